// Host tests of the reduction ops and epilogue functors (include/convred/functional.cuh):
// identity / make / combine / value / index for V = float and double, PyTorch's NaN, tie and
// signed-zero rules, no identity leak, associativity and commutativity, epilogues through
// apply_epilogue, and a user-written op plugged into reference::reduce_values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <convred/functional.cuh>
#include <convred/reference/conv2d.hpp>

#include "test_util.cuh"

namespace {

using convred::arg_value;
namespace op = convred::op;
namespace epi = convred::epilogue;

template <class V>
constexpr V inf_v() {
  return std::numeric_limits<V>::infinity();
}
template <class V>
V nan_v() {
  return std::numeric_limits<V>::quiet_NaN();
}

/// Same value, NaN equal to NaN, and the same sign for zeros only if `sign` is set.
template <class V>
bool same(V a, V b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;
}
template <class V>
bool same(arg_value<V> a, arg_value<V> b) {
  return same(a.value, b.value) && a.index == b.index;
}

/// Folds op over values (channel = position) from the op's identity, left to right.
template <class Op, class V>
typename Op::template accum_t<V> fold(Op o, const std::vector<V>& vals) {
  auto a = Op::template identity<V>();
  for (std::size_t k = 0; k < vals.size(); ++k) a = o(a, Op::template make<V>(vals[k], static_cast<int>(k)));
  return a;
}
/// Folds right to left (the order a tree or a reversed warp reduction might use).
template <class Op, class V>
typename Op::template accum_t<V> fold_reverse(Op o, const std::vector<V>& vals) {
  auto a = Op::template identity<V>();
  for (std::size_t k = vals.size(); k-- > 0;) a = o(Op::template make<V>(vals[k], static_cast<int>(k)), a);
  return a;
}
/// Pairwise tree fold (as a warp shuffle reduction does).
template <class Op, class V>
typename Op::template accum_t<V> fold_tree(Op o, const std::vector<V>& vals) {
  using A = typename Op::template accum_t<V>;
  std::vector<A> level;
  for (std::size_t k = 0; k < vals.size(); ++k) level.push_back(Op::template make<V>(vals[k], static_cast<int>(k)));
  if (level.empty()) return Op::template identity<V>();
  while (level.size() > 1) {
    std::vector<A> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(o(level[i], level[i + 1]));
    if (level.size() % 2) next.push_back(level.back());
    level.swap(next);
  }
  return level[0];
}

}  // namespace

TEST_SUITE("host") {

TEST_CASE_TEMPLATE("op::min: identity, NaN propagation, signed zeros, infinities", V, float, double) {
  const op::min m;
  CHECK(op::min::has_index == false);
  CHECK(op::min::identity<V>() == inf_v<V>());  // exact identity, not FLT_MAX
  CHECK(op::min::make<V>(V(3.5), 7) == V(3.5));
  CHECK(m(V(1), V(2)) == V(1));
  CHECK(m(V(2), V(1)) == V(1));
  CHECK(m(V(-5), V(4)) == V(-5));
  CHECK(op::min::value<V>(V(-2.25), 17) == V(-2.25));
  // NaN first or second propagates.
  CHECK(std::isnan(m(nan_v<V>(), V(1))));
  CHECK(std::isnan(m(V(1), nan_v<V>())));
  CHECK(std::isnan(m(nan_v<V>(), -inf_v<V>())));
  CHECK(std::isnan(m(-inf_v<V>(), nan_v<V>())));
  CHECK(std::isnan(m(op::min::identity<V>(), nan_v<V>())));
  CHECK(std::isnan(fold(m, std::vector<V>{V(1), V(-3), nan_v<V>(), V(-9)})));
  CHECK(std::isnan(fold(m, std::vector<V>{nan_v<V>(), V(-9)})));
  CHECK(std::isnan(fold(m, std::vector<V>{V(-9), V(0), nan_v<V>()})));
  // -0.0 and +0.0 compare equal: the result is a zero (either sign).
  CHECK(m(V(-0.0), V(0.0)) == V(0));
  CHECK(m(V(0.0), V(-0.0)) == V(0));
  CHECK(m(V(-0.0), V(1)) == V(0));
  // Infinities and the identity never leak.
  CHECK(fold(m, std::vector<V>{inf_v<V>(), inf_v<V>(), inf_v<V>()}) == inf_v<V>());
  CHECK(fold(m, std::vector<V>{inf_v<V>(), -inf_v<V>()}) == -inf_v<V>());
  CHECK(fold(m, std::vector<V>{std::numeric_limits<V>::max(), inf_v<V>()}) == std::numeric_limits<V>::max());
  CHECK(fold(m, std::vector<V>{V(4), V(-1), V(7), V(-1), V(2)}) == V(-1));
}

TEST_CASE_TEMPLATE("op::max: identity, NaN propagation, signed zeros, infinities", V, float, double) {
  const op::max m;
  CHECK(op::max::has_index == false);
  CHECK(op::max::identity<V>() == -inf_v<V>());
  CHECK(op::max::make<V>(V(-3.5), 2) == V(-3.5));
  CHECK(m(V(1), V(2)) == V(2));
  CHECK(m(V(2), V(1)) == V(2));
  CHECK(op::max::value<V>(V(6.5), 3) == V(6.5));
  CHECK(std::isnan(m(nan_v<V>(), V(1))));
  CHECK(std::isnan(m(V(1), nan_v<V>())));
  CHECK(std::isnan(m(nan_v<V>(), inf_v<V>())));
  CHECK(std::isnan(m(inf_v<V>(), nan_v<V>())));
  CHECK(std::isnan(fold(m, std::vector<V>{V(1), V(3), nan_v<V>(), V(9)})));
  CHECK(m(V(-0.0), V(0.0)) == V(0));
  CHECK(m(V(0.0), V(-0.0)) == V(0));
  CHECK(fold(m, std::vector<V>{-inf_v<V>(), -inf_v<V>()}) == -inf_v<V>());
  CHECK(fold(m, std::vector<V>{std::numeric_limits<V>::lowest(), -inf_v<V>()}) == std::numeric_limits<V>::lowest());
  CHECK(fold(m, std::vector<V>{V(4), V(-1), V(7), V(7), V(2)}) == V(7));
}

TEST_CASE_TEMPLATE("op::sum and op::mean: identity, accumulation, mean divides by count", V, float, double) {
  const op::sum s;
  const op::mean mn;
  CHECK(op::sum::has_index == false);
  CHECK(op::mean::has_index == false);
  CHECK(op::sum::identity<V>() == V(0));
  CHECK(op::mean::identity<V>() == V(0));
  CHECK(op::sum::make<V>(V(2.5), 4) == V(2.5));
  CHECK(s(V(1.5), V(2.25)) == V(3.75));
  CHECK(op::sum::value<V>(V(10), 4) == V(10));
  CHECK(op::mean::value<V>(V(10), 4) == V(2.5));
  CHECK(op::mean::value<V>(V(-9), 3) == V(-3));
  CHECK(op::mean::value<V>(V(7), 1) == V(7));
  // Sum of many: 1..1000 is exact in float and double.
  std::vector<V> vals;
  for (int i = 1; i <= 1000; ++i) vals.push_back(V(i));
  CHECK(op::sum::value<V>(fold(s, vals), 1000) == V(500500));
  CHECK(op::mean::value<V>(fold(mn, vals), 1000) == V(500.5));
  // Sum of many non-integers, against a float64 sum.
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<V> r(4096);
  double ref = 0;
  for (auto& e : r) {
    e = V(d(gen));
    ref += double(e);
  }
  const double got = double(op::sum::value<V>(fold(s, r), 4096));
  CHECK(std::abs(got - ref) <= 4096 * double(std::numeric_limits<V>::epsilon()) * 4096);
  CHECK(double(op::mean::value<V>(fold(mn, r), 4096)) == doctest::Approx(ref / 4096).epsilon(1e-3));
  // NaN and infinities follow IEEE addition.
  CHECK(std::isnan(fold(s, std::vector<V>{V(1), nan_v<V>(), V(2)})));
  CHECK(std::isnan(fold(s, std::vector<V>{inf_v<V>(), -inf_v<V>()})));
  CHECK(fold(s, std::vector<V>{inf_v<V>(), V(-1e30)}) == inf_v<V>());
  // The identity does not change a sum that is -0.0 in IEEE terms beyond sign (0 + -0 = +0 is fine).
  CHECK(fold(s, std::vector<V>{V(-0.0)}) == V(0));
}

TEST_CASE_TEMPLATE("op::argmin: lowest index on ties, first NaN, signed zeros, all +inf", V, float, double) {
  const op::argmin a;
  CHECK(op::argmin::has_index == true);
  const auto id = op::argmin::identity<V>();
  CHECK(id.value == inf_v<V>());
  CHECK(op::argmin::index<V>(op::argmin::make<V>(V(1), 9)) == 9);
  CHECK(op::argmin::value<V>(op::argmin::make<V>(V(-1.5), 9), 20) == V(-1.5));
  // Plain minimum with its index.
  auto r = fold(a, std::vector<V>{V(3), V(1), V(4), V(1), V(5), V(9), V(2), V(6)});
  CHECK(r.value == V(1));
  CHECK(op::argmin::index<V>(r) == 1);  // ties: lowest index
  CHECK(op::argmin::index<V>(fold_reverse(a, std::vector<V>{V(3), V(1), V(4), V(1)})) == 1);
  CHECK(op::argmin::index<V>(fold_tree(a, std::vector<V>{V(2), V(2), V(2), V(2), V(2)})) == 0);
  CHECK(op::argmin::index<V>(fold_reverse(a, std::vector<V>{V(2), V(2), V(2), V(2), V(2)})) == 0);
  // Combine order does not matter for ties.
  CHECK(a(op::argmin::make<V>(V(1), 5), op::argmin::make<V>(V(1), 2)).index == 2);
  CHECK(a(op::argmin::make<V>(V(1), 2), op::argmin::make<V>(V(1), 5)).index == 2);
  // First NaN's index wins, whatever the order and whatever smaller values exist.
  const std::vector<V> with_nan{V(0), V(-7), nan_v<V>(), V(-9), nan_v<V>(), -inf_v<V>()};
  for (auto res : {fold(a, with_nan), fold_reverse(a, with_nan), fold_tree(a, with_nan)}) {
    CHECK(std::isnan(res.value));
    CHECK(op::argmin::index<V>(res) == 2);
  }
  CHECK(a(op::argmin::make<V>(nan_v<V>(), 4), op::argmin::make<V>(nan_v<V>(), 1)).index == 1);
  CHECK(a(op::argmin::make<V>(V(-1), 0), op::argmin::make<V>(nan_v<V>(), 3)).index == 3);
  // -0.0 == +0.0: a tie, lowest index.
  CHECK(fold(a, std::vector<V>{V(1), V(0.0), V(-0.0)}).index == 1);
  CHECK(fold(a, std::vector<V>{V(-0.0), V(0.0)}).index == 0);
  CHECK(fold_reverse(a, std::vector<V>{V(2), V(0.0), V(-0.0)}).index == 1);
  // All +inf: +inf at index 0 (the identity's INT32_MAX index never leaks).
  const std::vector<V> all_inf(7, inf_v<V>());
  for (auto res : {fold(a, all_inf), fold_reverse(a, all_inf), fold_tree(a, all_inf)}) {
    CHECK(res.value == inf_v<V>());
    CHECK(op::argmin::index<V>(res) == 0);
  }
  CHECK(fold(a, std::vector<V>{inf_v<V>(), std::numeric_limits<V>::max()}).index == 1);
}

TEST_CASE_TEMPLATE("op::argmax: lowest index on ties, first NaN, signed zeros, all -inf", V, float, double) {
  const op::argmax a;
  CHECK(op::argmax::has_index == true);
  CHECK(op::argmax::identity<V>().value == -inf_v<V>());
  auto r = fold(a, std::vector<V>{V(3), V(9), V(4), V(9), V(5), V(-9)});
  CHECK(r.value == V(9));
  CHECK(op::argmax::index<V>(r) == 1);
  CHECK(op::argmax::index<V>(fold_reverse(a, std::vector<V>{V(3), V(9), V(4), V(9)})) == 1);
  CHECK(a(op::argmax::make<V>(V(1), 5), op::argmax::make<V>(V(1), 2)).index == 2);
  const std::vector<V> with_nan{V(0), inf_v<V>(), V(7), nan_v<V>(), nan_v<V>()};
  for (auto res : {fold(a, with_nan), fold_reverse(a, with_nan), fold_tree(a, with_nan)}) {
    CHECK(std::isnan(res.value));
    CHECK(op::argmax::index<V>(res) == 3);
  }
  CHECK(fold(a, std::vector<V>{V(-1), V(-0.0), V(0.0)}).index == 1);
  const std::vector<V> all_ninf(5, -inf_v<V>());
  for (auto res : {fold(a, all_ninf), fold_reverse(a, all_ninf), fold_tree(a, all_ninf)}) {
    CHECK(res.value == -inf_v<V>());
    CHECK(op::argmax::index<V>(res) == 0);
  }
}

TEST_CASE_TEMPLATE("ops: the identity never changes a state (incl. NaN, +-inf, +-0)", V, float, double) {
  const std::vector<V> specials{V(0),  V(-0.0), V(1),  V(-1), inf_v<V>(), -inf_v<V>(), nan_v<V>(),
                                std::numeric_limits<V>::max(), std::numeric_limits<V>::lowest(),
                                std::numeric_limits<V>::denorm_min()};
  for (std::size_t i = 0; i < specials.size(); ++i) {
    const V v = specials[i];
    CAPTURE(v);
    const int k = static_cast<int>(i);
    CHECK(same(op::min{}(op::min::identity<V>(), v), v));
    CHECK(same(op::min{}(v, op::min::identity<V>()), v));
    CHECK(same(op::max{}(op::max::identity<V>(), v), v));
    CHECK(same(op::max{}(v, op::max::identity<V>()), v));
    CHECK(same(op::sum{}(op::sum::identity<V>(), v), V(0) + v));
    CHECK(same(op::argmin{}(op::argmin::identity<V>(), op::argmin::make<V>(v, k)), op::argmin::make<V>(v, k)));
    CHECK(same(op::argmin{}(op::argmin::make<V>(v, k), op::argmin::identity<V>()), op::argmin::make<V>(v, k)));
    CHECK(same(op::argmax{}(op::argmax::identity<V>(), op::argmax::make<V>(v, k)), op::argmax::make<V>(v, k)));
    CHECK(same(op::argmax{}(op::argmax::make<V>(v, k), op::argmax::identity<V>()), op::argmax::make<V>(v, k)));
  }
}

TEST_CASE_TEMPLATE("ops: associativity and commutativity on random values with ties and NaN", V, float, double) {
  std::mt19937_64 gen(2024);
  std::uniform_int_distribution<int> pick(-3, 4);  // small range: many ties; 4 means NaN
  auto draw = [&]() -> V { const int i = pick(gen); return i == 4 ? nan_v<V>() : V(i); };
  std::uniform_int_distribution<int> idx(0, 1000);
  for (int t = 0; t < 2000; ++t) {
    const V x = draw(), y = draw(), z = draw();
    const int i = idx(gen), j = idx(gen), l = idx(gen);
    CAPTURE(x);
    CAPTURE(y);
    CAPTURE(z);
    {
      const op::min o;
      CHECK(same(o(o(x, y), z), o(x, o(y, z))));
      CHECK(same(o(x, y), o(y, x)));
    }
    {
      const op::max o;
      CHECK(same(o(o(x, y), z), o(x, o(y, z))));
      CHECK(same(o(x, y), o(y, x)));
    }
    {
      const op::sum o;  // integer values: exact, so associativity holds bit for bit
      CHECK(same(o(o(x, y), z), o(x, o(y, z))));
      CHECK(same(o(x, y), o(y, x)));
    }
    if (i != j && j != l && i != l) {  // distinct channels, as in a real reduction
      const op::argmin o;
      const auto a = op::argmin::make<V>(x, i), b = op::argmin::make<V>(y, j), c = op::argmin::make<V>(z, l);
      CHECK(same(o(o(a, b), c), o(a, o(b, c))));
      CHECK(same(o(a, b), o(b, a)));
      const op::argmax p;
      const auto a2 = op::argmax::make<V>(x, i), b2 = op::argmax::make<V>(y, j), c2 = op::argmax::make<V>(z, l);
      CHECK(same(p(p(a2, b2), c2), p(a2, p(b2, c2))));
      CHECK(same(p(a2, b2), p(b2, a2)));
    }
  }
}

TEST_CASE_TEMPLATE("ops: fold order (linear, reverse, tree) gives the same result on long inputs", V, float, double) {
  std::mt19937_64 gen(77);
  std::uniform_int_distribution<int> pick(-20, 20);
  for (int len : {1, 2, 3, 31, 32, 33, 65, 130, 257}) {
    CAPTURE(len);
    std::vector<V> v(len);
    for (auto& e : v) e = V(pick(gen));
    CHECK(same(fold(op::min{}, v), fold_tree(op::min{}, v)));
    CHECK(same(fold(op::max{}, v), fold_reverse(op::max{}, v)));
    CHECK(same(fold(op::argmin{}, v), fold_tree(op::argmin{}, v)));
    CHECK(same(fold(op::argmin{}, v), fold_reverse(op::argmin{}, v)));
    CHECK(same(fold(op::argmax{}, v), fold_tree(op::argmax{}, v)));
    // Independent check of argmin / argmax: first position of the extreme.
    int lo = 0, hi = 0;
    for (int k = 1; k < len; ++k) {
      if (v[k] < v[lo]) lo = k;
      if (v[k] > v[hi]) hi = k;
    }
    CHECK(fold(op::argmin{}, v).index == lo);
    CHECK(fold(op::argmax{}, v).index == hi);
    CHECK(fold(op::argmin{}, v).value == v[lo]);
    CHECK(fold(op::argmax{}, v).value == v[hi]);
  }
}

TEST_CASE_TEMPLATE("epilogues: identity, scale (incl. negative), per-channel scale, compose", V, float, double) {
  const epi::identity id;
  CHECK(id(V(3.25), 4) == V(3.25));
  CHECK(convred::apply_epilogue(id, V(-2), 0) == V(-2));
  CHECK(std::isnan(convred::apply_epilogue(id, nan_v<V>(), 0)));

  const epi::scale<float> two{2.0f};
  CHECK(convred::apply_epilogue(two, V(3.25), 0) == V(6.5));
  CHECK(convred::apply_epilogue(two, -inf_v<V>(), 0) == -inf_v<V>());
  const epi::scale<double> neg{-1.5};
  CHECK(convred::apply_epilogue(neg, V(2), 9) == V(-3));
  CHECK(convred::apply_epilogue(neg, V(-4), 9) == V(6));

  const float host_scales[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  const epi::per_channel_scale<float> pcs{host_scales};
  CHECK(convred::apply_epilogue(pcs, V(2), 0) == V(2));
  CHECK(convred::apply_epilogue(pcs, V(2), 1) == V(-4));
  CHECK(convred::apply_epilogue(pcs, V(2), 2) == V(1));
  CHECK(convred::apply_epilogue(pcs, V(2), 3) == V(6));
  const __half half_scales[2] = {__float2half(0.25f), __float2half(-8.0f)};
  const epi::per_channel_scale<__half> pch{half_scales};
  CHECK(convred::apply_epilogue(pch, V(4), 0) == V(1));
  CHECK(convred::apply_epilogue(pch, V(4), 1) == V(-32));

  // compose applies first, then second (order matters for a non-linear second stage).
  struct add_one {
    __host__ __device__ V operator()(V v, int) const { return v + V(1); }
  };
  const auto c1 = epi::make_compose(two, add_one{});   // 2v + 1
  const auto c2 = epi::make_compose(add_one{}, two);   // 2(v + 1)
  CHECK(convred::apply_epilogue(c1, V(5), 0) == V(11));
  CHECK(convred::apply_epilogue(c2, V(5), 0) == V(12));
  const auto c3 = epi::make_compose(pcs, neg);  // -1.5 * s[k] * v
  CHECK(convred::apply_epilogue(c3, V(2), 1) == V(6));
  CHECK(convred::apply_epilogue(c3, V(2), 3) == V(-9));
  const auto nested = epi::make_compose(epi::make_compose(two, two), add_one{});  // 4v + 1
  CHECK(convred::apply_epilogue(nested, V(3), 0) == V(13));
}

TEST_CASE_TEMPLATE("epilogues: lambdas and user functors through apply_epilogue (with and without k)", V, float,
                   double) {
  // Extended __host__ __device__ lambdas, as a user passes them to the device API (--extended-lambda).
  auto with_k = [] __host__ __device__(V v, int k) { return v * V(10) + V(k); };
  auto without_k = [] __host__ __device__(V v) { return v - V(0.5); };
  CHECK(convred::apply_epilogue(with_k, V(2), 3) == V(23));
  CHECK(convred::apply_epilogue(without_k, V(2), 3) == V(1.5));
  struct relu {
    __host__ __device__ V operator()(V v) const { return v > V(0) ? v : V(0); }
  };
  CHECK(convred::apply_epilogue(relu{}, V(-2), 0) == V(0));
  CHECK(convred::apply_epilogue(relu{}, V(2), 0) == V(2));
  // A one-argument callable composes too.
  const auto c = convred::epilogue::make_compose(relu{}, convred::epilogue::scale<float>{-1.5f});
  CHECK(convred::apply_epilogue(c, V(-4), 1) == V(0));
  CHECK(convred::apply_epilogue(c, V(4), 1) == V(-6));
}

TEST_CASE("reference::reduce_values: the built-in ops with epilogues; negative scale turns min into s*max") {
  const std::vector<double> v{0.5, -2.0, 3.0, -2.0, 1.0};
  auto f = [&](std::int64_t k) { return v[static_cast<std::size_t>(k)]; };
  CHECK(convred::reference::reduce_values(op::min{}, 5, f).value == -2.0);
  CHECK(convred::reference::reduce_values(op::min{}, 5, f).index == -1);
  CHECK(convred::reference::reduce_values(op::max{}, 5, f).value == 3.0);
  CHECK(convred::reference::reduce_values(op::sum{}, 5, f).value == 0.5);
  CHECK(convred::reference::reduce_values(op::mean{}, 5, f).value == 0.1);
  const auto am = convred::reference::reduce_values(op::argmin{}, 5, f);
  CHECK(am.value == -2.0);
  CHECK(am.index == 1);
  const auto ax = convred::reference::reduce_values(op::argmax{}, 5, f);
  CHECK(ax.value == 3.0);
  CHECK(ax.index == 2);
  // min(s * v) = s * max(v) for s < 0, and the argmin becomes the argmax.
  const epi::scale<double> s{-1.5};
  auto g = [&](std::int64_t k) { return convred::apply_epilogue(s, f(k), static_cast<int>(k)); };
  CHECK(convred::reference::reduce_values(op::min{}, 5, g).value == -1.5 * 3.0);
  CHECK(convred::reference::reduce_values(op::argmin{}, 5, g).index == 2);
  CHECK(convred::reference::reduce_values(op::max{}, 5, g).value == -1.5 * -2.0);
  // Empty-ish edge: one channel.
  CHECK(convred::reference::reduce_values(op::argmax{}, 1, f).index == 0);
  CHECK(convred::reference::reduce_values(op::mean{}, 1, f).value == 0.5);
}

}  // TEST_SUITE("host")

namespace {
/// A user-written op: the range (max - min) across channels, with a two-value running state and
/// NaN propagation (test_util.cuh; the fused GPU tests plug in the same op).
using convred::test::range_op;

/// A user-written index op: the channel with the largest |v| (lowest index on ties).
struct argabsmax {
  static constexpr bool has_index = true;
  template <class V>
  using accum_t = convred::arg_value<V>;
  template <class V>
  static convred::arg_value<V> identity() { return {V(-1), INT32_MAX}; }
  template <class V>
  static convred::arg_value<V> make(V v, int k) { return {v < 0 ? -v : v, k}; }
  template <class V>
  convred::arg_value<V> operator()(convred::arg_value<V> a, convred::arg_value<V> b) const {
    if (a.value != b.value) return a.value > b.value ? a : b;
    return a.index <= b.index ? a : b;
  }
  template <class V>
  static V value(convred::arg_value<V> a, std::int64_t) { return a.value; }
  template <class V>
  static std::int64_t index(convred::arg_value<V> a) { return a.index; }
};
}  // namespace

TEST_SUITE("host") {
TEST_CASE("user-written ops plug into reference::reduce_values") {
  const std::vector<double> v{0.5, -2.0, 3.0, -4.0, 1.0, 4.0};
  auto f = [&](std::int64_t k) { return v[static_cast<std::size_t>(k)]; };
  const auto r = convred::reference::reduce_values(range_op{}, 6, f);
  CHECK(r.value == 8.0);
  CHECK(r.index == -1);
  CHECK(convred::reference::reduce_values(range_op{}, 1, f).value == 0.0);  // identity does not leak
  auto with_nan = [&](std::int64_t k) { return k == 4 ? std::numeric_limits<double>::quiet_NaN() : f(k); };
  CHECK(std::isnan(convred::reference::reduce_values(range_op{}, 6, with_nan).value));
  const auto a = convred::reference::reduce_values(argabsmax{}, 6, f);
  CHECK(a.value == 4.0);
  CHECK(a.index == 3);  // |-4| ties |4| at 5: lowest index
  // Same results in float through the op directly.
  auto s = range_op::identity<float>();
  for (int k = 0; k < 6; ++k) s = range_op{}(s, range_op::make<float>(float(v[k]), k));
  CHECK(range_op::value<float>(s, 6) == 8.0f);
}
}  // TEST_SUITE("host")
