// Host suite of certified screening's pass-1 reduction op (convred/kernel/screen.cuh, docs/screening.md):
// kernel::screen_op driven on the host (its insert and merge are __host__ __device__, the same code the
// fused kernels run) over random and adversarial channel values (ties, near ties, -0 and +0, +-inf,
// subnormals, huge values, NaN), folded and merged in many orders (one thread's channels in order, random
// orders, per-lane partial states combined as the block reduction does, random merge trees with
// identities), against brute force in double. The contract pass 2 (kernel/screen_recompute.cuh) relies on,
// per pixel: k1 = the best channel (exact compare, ties to the lower channel), k2 another channel
// (screen_empty only when there is one channel), gap2 <= |yhat[k2] - yhat[k1]| and gap3 <= |yhat[c] -
// yhat[k1]| for every other channel c, a NaN gap meaning "recompute"; any NaN value makes gap3 NaN. The
// state also keeps the exact 2nd and 3rd best values: the gaps equal gap_bits of the true ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <convred/kernel/screen.cuh>

namespace {

using convred::kernel::screen_empty;

struct item {
  float v;
  std::uint32_t k;  // channel id, < screen_empty, distinct within a pixel
};

/// bf16 bits (the high 16 bits of a float) as a float
float bf16_to_float(std::uint32_t h) {
  const std::uint32_t u = h << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// distance of two values as pass 2 reads a gap: 0 for equal values (+-inf ties included), else |a - b|
double dist(double a, double b) { return a == b ? 0.0 : std::fabs(a - b); }

/// a better than b (Max: larger), ties to the lower channel; NaN never better
template <bool Max>
bool better(const item& a, const item& b) {
  const double x = a.v, y = b.v;
  return (Max ? x > y : x < y) || (x == y && a.k < b.k);
}

/// Checks the packed outputs of a state reduced over `items` (one pixel) against brute force. Returns the
/// number of failed checks (each also reported by doctest).
template <bool Max>
int check_state(const convred::kernel::screen_state<float>& s, const std::vector<item>& items) {
  using op_t = convred::kernel::screen_op<Max>;
  const float packed = op_t::template value<float>(s, 0);
  std::uint32_t u;
  std::memcpy(&u, &packed, sizeof u);
  const float gap2 = bf16_to_float(u & 0xFFFFu), gap3 = bf16_to_float(u >> 16);
  const std::int64_t idx = op_t::template index<float>(s);
  const std::uint32_t k1 = static_cast<std::uint32_t>(idx & 0xFFFF), k2 = static_cast<std::uint32_t>((idx >> 16) & 0xFFFF);
  int fails = 0;
  auto fail = [&](bool ok, const char* what) {
    if (!ok) {
      ++fails;
      FAIL_CHECK(std::string(what) << " (K = " << items.size() << ", k1 = " << k1 << ", k2 = " << k2 << ", gap2 = " << gap2
                      << ", gap3 = " << gap3 << ")");
    }
  };
  fail((idx >> 32) == 0, "index above 32 bits");
  const bool any_nan = std::any_of(items.begin(), items.end(), [](const item& it) { return std::isnan(it.v); });
  if (any_nan) {  // pass 2 recomputes the pixel in full: gap3 NaN is all it needs
    fail(std::isnan(gap3), "a NaN channel but gap3 is not NaN");
    return fails;
  }
  if (items.empty()) {
    fail(k1 == screen_empty && k2 == screen_empty, "no channel but a channel index");
    return fails;
  }
  const item best = *std::min_element(items.begin(), items.end(), [](const item& a, const item& b) { return better<Max>(a, b); });
  fail(k1 == best.k, "k1 is not the best channel (ties to the lower channel)");
  const double v1 = best.v;
  auto find = [&](std::uint32_t k) { return std::find_if(items.begin(), items.end(), [&](const item& it) { return it.k == k; }); };
  if (items.size() == 1) {
    fail(k2 == screen_empty, "one channel but k2 is not empty");
    return fails;
  }
  const auto it2 = find(k2);
  fail(k2 != k1 && it2 != items.end(), "k2 is not another channel");
  if (it2 == items.end()) return fails;
  fail(!(gap2 > dist(it2->v, v1)), "gap2 above |yhat[k2] - yhat[k1]|");
  // the exact 2nd best value (k2 holds it, any channel among ties), the exact 3rd best value
  std::vector<item> rest;
  for (const item& it : items)
    if (it.k != k1) rest.push_back(it);
  const item second = *std::min_element(rest.begin(), rest.end(), [](const item& a, const item& b) { return better<Max>(a, b); });
  fail(static_cast<double>(it2->v) == static_cast<double>(second.v), "yhat[k2] is not the 2nd best value");
  float third = Max ? -INFINITY : INFINITY;
  for (const item& it : items) {
    if (it.k == k1 || it.k == k2) continue;
    fail(!(gap3 > dist(it.v, v1)), "gap3 above |yhat[c] - yhat[k1]| of another channel");
    if (Max ? it.v > third : it.v < third) third = it.v;
  }
  // tightness: the gaps of the true 2nd and 3rd values (as screen_op computes them)
  const float g2 = bf16_to_float(op_t::gap_bits(best.v, second.v)), g3 = bf16_to_float(op_t::gap_bits(best.v, third));
  fail(gap2 == g2 || (std::isnan(gap2) && std::isnan(g2)), "gap2 is not the gap of the 2nd best value");
  fail(gap3 == g3 || (std::isnan(gap3) && std::isnan(g3)), "gap3 is not the gap of the 3rd best value");
  return fails;
}

/// Value generators: kind 0 random normal, 1 small integers (ties), 2 specials, 3 near ties, 4 all equal,
/// 5 specials with NaN, 6 random with one NaN, 7 huge and tiny magnitudes.
float draw(std::mt19937& rng, int kind, float base) {
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  const float specials[] = {0.0f,
                            -0.0f,
                            INFINITY,
                            -INFINITY,
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            1.0e-40f,
                            -1.0e-40f,
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            3.0e38f,
                            -3.0e38f,
                            1.0f,
                            -1.0f,
                            65504.0f};
  constexpr int n_specials = sizeof(specials) / sizeof(specials[0]);
  switch (kind) {
    case 0: return std::normal_distribution<float>()(rng);
    case 1: return static_cast<float>(pick(rng) % 5) - 2.0f;
    case 2: return specials[pick(rng) % n_specials];
    case 3: {
      float v = base;
      for (int i = pick(rng) % 3; i > 0; --i) v = std::nextafter(v, (pick(rng) & 1) ? INFINITY : -INFINITY);
      return v;
    }
    case 4: return base;
    case 5: return pick(rng) % 7 == 0 ? NAN : specials[pick(rng) % n_specials];
    case 6: return pick(rng) % 13 == 0 ? -NAN : std::normal_distribution<float>()(rng);
    default: {
      const float m = std::ldexp(1.0f, pick(rng) % 250 - 140);
      return (pick(rng) & 1 ? m : -m) * (1.0f + static_cast<float>(pick(rng) % 8) / 8.0f);
    }
  }
}

/// K channels with distinct ids: 0..K-1, or random ids below screen_empty.
std::vector<item> make_items(std::mt19937& rng, int K, int kind, bool random_ids) {
  std::vector<item> items(static_cast<std::size_t>(K));
  const float base = std::normal_distribution<float>()(rng);
  std::vector<std::uint32_t> ids(static_cast<std::size_t>(K));
  std::iota(ids.begin(), ids.end(), 0u);
  if (random_ids) {
    std::uniform_int_distribution<std::uint32_t> id(0, screen_empty - 1);
    std::vector<std::uint32_t> used;
    for (auto& k : ids) {
      do k = id(rng) % 8 == 0 ? screen_empty - 1 - id(rng) % 4 : id(rng);  // also the largest ids
      while (std::find(used.begin(), used.end(), k) != used.end());
      used.push_back(k);
    }
  }
  for (int i = 0; i < K; ++i) items[static_cast<std::size_t>(i)] = {draw(rng, kind, base), ids[static_cast<std::size_t>(i)]};
  return items;
}

/// Folds `items` in the given order into one state from the identity: op(state, make(v, k)).
template <bool Max>
convred::kernel::screen_state<float> fold(const std::vector<item>& items) {
  using op_t = convred::kernel::screen_op<Max>;
  const op_t op;
  auto s = op_t::template identity<float>();
  for (const item& it : items) s = op(s, op_t::template make<float>(it.v, static_cast<int>(it.k)));
  return s;
}

/// Random merge tree over `parts` (partial states, identities among them), random operand order.
template <bool Max>
convred::kernel::screen_state<float> merge_tree(std::mt19937& rng, std::vector<convred::kernel::screen_state<float>> parts) {
  const convred::kernel::screen_op<Max> op;
  while (parts.size() > 1) {
    std::uniform_int_distribution<std::size_t> pick(0, parts.size() - 1);
    std::size_t i = pick(rng), j = pick(rng);
    if (i == j) j = (i + 1) % parts.size();
    const auto a = parts[i], b = parts[j];
    parts[i] = (rng() & 1) ? op(a, b) : op(b, a);
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return parts.front();
}

/// The wgmma consumer's layout for one pixel: 4 lanes, lane l holding channels n of each 128-channel pass
/// with (n % 8) / 2 == l, folded in channel order across the passes; then the transposing reduction's
/// order (lane l: op(own, lane l ^ 2's), then op(own, lane l ^ 1's)). Returns each lane's final state.
template <bool Max>
std::vector<convred::kernel::screen_state<float>> block_reduce(const std::vector<item>& items) {
  using op_t = convred::kernel::screen_op<Max>;
  const op_t op;
  std::vector<convred::kernel::screen_state<float>> lane(4, op_t::template identity<float>());
  for (std::size_t n = 0; n < items.size(); ++n)
    lane[(n % 8) / 2] = op(lane[(n % 8) / 2], op_t::template make<float>(items[n].v, static_cast<int>(items[n].k)));
  for (int d : {2, 1}) {
    auto next = lane;
    for (int l = 0; l < 4; ++l) next[static_cast<std::size_t>(l)] = op(lane[static_cast<std::size_t>(l)], lane[static_cast<std::size_t>(l ^ d)]);
    lane = next;
  }
  return lane;
}

/// Same packed outputs (as pass 2 reads them: k1 and the gaps as values; k2 may differ among ties).
template <bool Max>
bool same_outputs(const convred::kernel::screen_state<float>& a, const convred::kernel::screen_state<float>& b) {
  using op_t = convred::kernel::screen_op<Max>;
  const float va = op_t::template value<float>(a, 0), vb = op_t::template value<float>(b, 0);
  std::uint32_t ua, ub;
  std::memcpy(&ua, &va, sizeof ua);
  std::memcpy(&ub, &vb, sizeof ub);
  auto eq = [](float x, float y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return (op_t::template index<float>(a) & 0xFFFF) == (op_t::template index<float>(b) & 0xFFFF) &&
         eq(bf16_to_float(ua & 0xFFFF), bf16_to_float(ub & 0xFFFF)) && eq(bf16_to_float(ua >> 16), bf16_to_float(ub >> 16));
}

template <bool Max>
void run_cases(std::uint32_t seed, int cases) {
  using op_t = convred::kernel::screen_op<Max>;
  const op_t op;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind_of(0, 7), small_k(1, 12), mid_k(13, 300);
  int fails = 0, checked = 0;
  for (int c = 0; c < cases && fails < 20; ++c) {
    const int K = c % 4 == 3 ? mid_k(rng) : small_k(rng);
    const int kind = kind_of(rng);
    const bool random_ids = rng() % 3 == 0;
    std::vector<item> items = make_items(rng, K, kind, random_ids);
    // one thread's channels in channel order, and in a random order
    std::vector<item> sorted = items;
    std::sort(sorted.begin(), sorted.end(), [](const item& a, const item& b) { return a.k < b.k; });
    const auto s_in_order = fold<Max>(sorted);
    fails += check_state<Max>(s_in_order, items), ++checked;
    std::vector<item> shuffled = items;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const auto s_random = fold<Max>(shuffled);
    fails += check_state<Max>(s_random, items), ++checked;
    // the block reduction's order (channel ids in the wgmma layout: sorted ids as tile columns)
    for (const auto& s : block_reduce<Max>(sorted)) fails += check_state<Max>(s, items), ++checked;
    // random partitions folded separately (some parts empty: identities), then a random merge tree; the
    // parts built by op(state, make), by the entry's conversion, or by merging single-channel states
    const int G = 1 + static_cast<int>(rng() % 9);
    std::vector<std::vector<item>> groups(static_cast<std::size_t>(G));
    for (const item& it : shuffled) groups[rng() % static_cast<unsigned>(G)].push_back(it);
    std::vector<convred::kernel::screen_state<float>> parts;
    for (const auto& g : groups) {
      const unsigned how = rng() % 3;
      if (how == 0 || g.empty()) {
        parts.push_back(fold<Max>(g));
      } else if (how == 1) {
        convred::kernel::screen_state<float> s = op_t::template make<float>(g[0].v, static_cast<int>(g[0].k));
        for (std::size_t i = 1; i < g.size(); ++i) s = op(s, op_t::template make<float>(g[i].v, static_cast<int>(g[i].k)));
        parts.push_back(s);
      } else {
        std::vector<convred::kernel::screen_state<float>> singles;
        for (const item& it : g) singles.push_back(op_t::template make<float>(it.v, static_cast<int>(it.k)));
        parts.push_back(merge_tree<Max>(rng, singles));
      }
    }
    parts.push_back(op_t::template identity<float>());
    const auto s_tree = merge_tree<Max>(rng, parts);
    fails += check_state<Max>(s_tree, items), ++checked;
    // the identity is neutral on either side
    const auto id = op_t::template identity<float>();
    if (!same_outputs<Max>(op(s_tree, id), s_tree) || !same_outputs<Max>(op(id, s_tree), s_tree)) {
      ++fails;
      FAIL_CHECK("the identity is not neutral (K = " << K << ", kind " << kind << ")");
    }
  }
  MESSAGE("screen_op<" << (Max ? "max" : "min") << ">: " << checked << " states checked, " << fails << " failures");
  CHECK(fails == 0);
}

}  // namespace

TEST_CASE("screen_op: the pass-1 contract against brute force, min and max, many fold and merge orders (host)") {
  run_cases<false>(20261205u, 6000);
  run_cases<true>(20261206u, 6000);
}

TEST_CASE("screen_op: hand-made edge cases (host)") {
  using op_t = convred::kernel::screen_op<false>;
  const op_t op;
  auto idx = [](const convred::kernel::screen_state<float>& s) { return op_t::index<float>(s); };
  // no channel: both slots empty
  CHECK(idx(op_t::identity<float>()) == 0xFFFFFFFFll);
  // one channel: k2 empty, gaps +inf
  auto one = op(op_t::identity<float>(), op_t::make<float>(2.0f, 7));
  CHECK(idx(one) == (7 | (0xFFFFll << 16)));
  // +inf channels fill the empty slots (the empty slot's value is +inf too, but sorts last)
  auto infs = op(op(op_t::identity<float>(), op_t::make<float>(INFINITY, 5)), op_t::make<float>(INFINITY, 3));
  CHECK(idx(infs) == (3 | (5ll << 16)));
  // -0 and +0 tie: the lower channel is k1, whichever came first
  auto zeros = op(op(op_t::identity<float>(), op_t::make<float>(0.0f, 9)), op_t::make<float>(-0.0f, 4));
  CHECK((idx(zeros) & 0xFFFF) == 4);
  // merging a one-channel +inf state with the identity keeps its channel in slot 2
  auto a = op(op_t::identity<float>(), op_t::make<float>(1.0f, 0));
  a = op(a, op_t::make<float>(INFINITY, 1));
  CHECK(idx(op(a, op_t::identity<float>())) == (0 | (1ll << 16)));
  CHECK(idx(op(op_t::identity<float>(), a)) == (0 | (1ll << 16)));
  // a NaN channel, alone: slot 1 stays empty and the pixel is recomputed in full (gap3 NaN)
  auto nan = op(op_t::identity<float>(), op_t::make<float>(NAN, 2));
  const float g = op_t::value<float>(nan, 0);
  std::uint32_t u;
  std::memcpy(&u, &g, sizeof u);
  CHECK((idx(nan) & 0xFFFF) == screen_empty);
  CHECK(std::isnan(bf16_to_float(u >> 16)));
}
