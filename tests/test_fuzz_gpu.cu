// The differential fuzzer's driver (fuzz.cuh): random cases over every entry point, checked against the
// float64 reference, with one-line reproducers and greedy shrinking of failures.
//
// GPU suite:
// - "fuzz: fixed seeds ..."          400 cases from fixed seeds (tf32x3 with +-inf has its own case).
// - "fuzz: plan entry, fixed ..."    300 cases of the plan entry (conv2d_reduce_plan, the default family list;
//                                    problems aimed at each family: wide and narrow groups, depthwise,
//                                    dilation 2/3/12, outer taps reading only padding (pruned: dilation
//                                    >= the image, 5x5/7x7 on 1-3 rows), plain shapes; small problems:
//                                    tiny); every family must have been picked.
// - "fuzz: tf32x3 with +-inf ..."    the known 3xTF32 fault class (inf - inf in the big/small split);
//                                    CONVRED_FUZZ_TF32X3_INF=0 skips it (and excludes it from random runs).
// - "fuzz random: ..."               CONVRED_FUZZ_N cases from CONVRED_FUZZ_SEED (default: the time); runs
//                                    nothing unless CONVRED_FUZZ_N is set (bench/fuzz.sh sets it).
// - "fuzz sanitizer: ..."            >= 100 small cases covering every kernel and path (every family of the
//                                    plan entry too), for compute-sanitizer (bench/sanitize.sh); prints the
//                                    kernels it covered.
// - "fuzz determinism: ..."          every path (the wgmma kernel's partial mode, every family of the plan
//                                    entry too): bitwise-identical y and indices over 4 launches, 2 streams.
// - "fuzz regression: ..."           fixed reproducers of earlier false or true failures.
// - "fuzz repro: ..."                runs CONVRED_FUZZ_REPRO='<line>' (a reproducer printed by a failure).
// Host suite: the reproducer line round-trips, generated cases are valid and instantiated; the plan entry's
// fixed cases reach every family on a described H200 (plan_family: the planner's choice without a GPU).
// Plan cases are also an eighth of every random draw (a hash of the seed picks them).
// CONVRED_FUZZ_THREADS: host threads running cases (default: hardware threads, at most 16).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

/// What the generator may produce.
struct gen_opts {
  bool small = false;       ///< tiny problems (sanitizer runs)
  bool tf32x3_inf = false;  ///< allow +-inf inputs with math tf32x3 (the known fault class)
  bool force_combo = false; ///< use entry/t/m/o below instead of drawing them
  bool force_entry = false; ///< use entry e below, the rest of its combination drawn
  entry e = entry::fused;
  elem t = elem::f32;
  mathk m = mathk::ieee;
  opk o = opk::min;
  bool force_inf = false;   ///< inject at least one infinity
};

/// All supported (entry, type, math, op) combinations.
std::vector<fcase> combos() {
  std::vector<fcase> v;
  for (int e = 0; e < 6; ++e)
    for (int t = 0; t < 4; ++t)
      for (int m = 0; m < 6; ++m)
        for (int o = 0; o < 7; ++o)
          if (supported(static_cast<entry>(e), static_cast<elem>(t), static_cast<mathk>(m), static_cast<opk>(o))) {
            fcase c;
            c.e = static_cast<entry>(e), c.t = static_cast<elem>(t), c.m = static_cast<mathk>(m), c.o = static_cast<opk>(o);
            v.push_back(c);
          }
  return v;
}

std::size_t elem_bytes(elem t) {
  const std::size_t b[] = {4, 8, 2, 2};
  return b[static_cast<int>(t)];
}

/// True if a case is valid (the entry point must succeed) and cheap enough for the reference.
bool valid(const fcase& c, bool small) {
  const conv2d_problem& p = c.p;
  if (c.e == entry::channel) {
    channel_reduce_problem cp;
    cp.N = p.N, cp.C = p.C, cp.H = p.H, cp.W = p.W, cp.x_layout = p.x_layout;
    if (validate(cp, static_cast<std::int64_t>(elem_bytes(c.t))) != status::success) return false;
    return cp.x_elements() <= (small ? 80'000 : 400'000);
  }
  if (validate(p, static_cast<std::int64_t>(elem_bytes(c.t))) != status::success) return false;
  if (c.e == entry::packed && c.t != elem::f32) return false;
  const double cost = double(p.out_elements()) * double(p.gemm_k() + 1);
  return cost <= (small ? 1.5e5 : 4e6) && p.x_elements() <= 2'000'000;
}

/// The problem of a plan case aimed at the families beside the plain ones (drawn with gen; `small` for the
/// sanitizer and determinism runs): one of
/// - wide groups (family::grouped: K/groups >= 32, groups 2, 4 or 32, NCHW mostly, 1x1 or 3x3, stride 1 or 2;
///   the planner's model or the mma.sync kernel decides, and the direct family where C/groups <= 16);
/// - narrow groups (the direct family's grouped path: 1 < C/groups <= 16, filters 3x3, 5x5, 7x7 at stride 1
///   mostly, which it unrolls, sometimes others);
/// - depthwise (groups == C, K == C or 2C: the direct family; 3x3, 5x5, 7x7, stride 1 or 2);
/// - dilated (family::dilated: dilation 2, 3 or 12 at stride 1 with a padding the dilation divides, images of
///   at least three sub-image rows; sometimes stride 2 or another padding: the mma.sync kernel).
/// The plan's other cases draw the fuzzer's plain shapes (generate).
void plan_problem(conv2d_problem& p, bool small, std::mt19937_64& gen) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen); };
  auto chance = [&](double q) { return std::uniform_real_distribution<double>(0, 1)(gen) < q; };
  auto one_of = [&](std::initializer_list<std::int64_t> v) { return v.begin()[pick(0, static_cast<std::int64_t>(v.size()) - 1)]; };
  const int regime = static_cast<int>(pick(0, 3));
  p.N = pick(1, small ? 2 : 3);
  if (regime == 0) {  // wide groups
    p.groups = small ? one_of({2, 4}) : one_of({2, 2, 4, 4, 32});
    const std::int64_t kg = p.groups == 32 || small ? one_of({32, 33, 48}) : one_of({32, 33, 48, 64, 96, 128, 130});
    const std::int64_t cg = p.groups == 32 ? one_of({2, 4}) : small ? one_of({2, 3, 8}) : one_of({2, 3, 4, 8, 16, 17, 32});
    p.C = cg * p.groups, p.K = kg * p.groups;
    p.R = chance(0.5) ? 1 : 3, p.S = chance(0.8) ? p.R : 4 - p.R;
    p.stride_h = p.stride_w = chance(0.75) ? 1 : 2;
    p.pad_h = p.R / 2, p.pad_w = p.S / 2;
    p.H = pick(3, small || p.groups == 32 ? 8 : 14);
    p.W = chance(0.7) ? pick(1, small ? 2 : 4) * 4 : pick(3, 14);
    if (p.groups == 32) p.N = 1;
    p.x_layout = chance(0.9) ? layout::nchw : layout::nhwc;
  } else if (regime == 1) {  // narrow groups: 1 < C/groups <= 16
    p.groups = one_of({2, 3, 4, 8, 16, 32});
    if (small && p.groups > 8) p.groups = 8;
    p.C = pick(2, small ? 8 : 16) * p.groups, p.K = one_of({1, 2, 4, 8, 16}) * p.groups;
    if (chance(0.8)) p.R = p.S = one_of({3, 5, 7});
    else p.R = pick(1, 5), p.S = pick(1, 5);
    p.stride_h = p.stride_w = chance(0.8) ? 1 : 2;
    p.pad_h = p.R / 2, p.pad_w = p.S / 2;
    if (chance(0.1)) p.dil_h = p.dil_w = 2, p.pad_h *= 2, p.pad_w *= 2;
    p.H = pick(3, small ? 8 : 16), p.W = pick(3, small ? 8 : 16);
    p.x_layout = chance(0.5) ? layout::nchw : layout::nhwc;
  } else if (regime == 2) {  // depthwise
    p.C = p.groups = pick(1, small ? 12 : 48);
    p.K = chance(0.8) ? p.C : 2 * p.C;
    p.R = p.S = one_of({3, 5, 7});
    p.stride_h = p.stride_w = chance(0.6) ? 1 : 2;
    p.pad_h = p.pad_w = chance(0.85) ? p.R / 2 : 0;
    if (chance(0.1)) p.dil_h = p.dil_w = 2, p.pad_h *= 2, p.pad_w *= 2;
    p.H = pick(4, small ? 10 : 20), p.W = pick(4, small ? 10 : 20);
    p.x_layout = chance(0.5) ? layout::nchw : layout::nhwc;
  } else {  // dilated
    const std::int64_t d = small ? one_of({2, 3}) : one_of({2, 2, 3, 3, 12});
    p.dil_h = p.dil_w = d;
    if (chance(0.8)) p.R = p.S = 3;
    else if (d < 12 && chance(0.5)) p.R = p.S = 5;
    else p.R = 1, p.S = 3;
    p.pad_h = d * (p.R / 2), p.pad_w = d * (p.S / 2);
    if (chance(0.1) && p.pad_h > 0) p.pad_h -= 1;  // a padding the dilation does not divide
    p.stride_h = p.stride_w = chance(0.9) ? 1 : 2;
    p.H = pick(3 * d, (small ? 4 : 5) * d), p.W = chance(0.7) ? (pick(3 * d, 5 * d) + 3) / 4 * 4 : pick(3 * d, 5 * d);
    if (small) p.W = std::min<std::int64_t>(p.W, 4 * d);
    p.C = d == 12 ? pick(1, 6) : pick(1, small ? 8 : 16);
    p.K = d == 12 ? one_of({8, 16}) : one_of({8, 16, 32, 64});
    if (d == 12) p.N = 1;
    p.x_layout = chance(0.9) ? layout::nchw : layout::nhwc;
  }
}

/// The problem of a plan case aimed at family::pruned (drawn with gen; `small` as above): outer taps that
/// read only padding for every output, NCHW mostly, C >= 2 (C == 1: the direct family), one of
/// - ASPP-like: 3x3 at dilation = padding >= the image (only the centre tap reads it: a 1x1; W a multiple of
///   4 mostly, which the wgmma kernel needs for a 1x1), sometimes dilated along rows only (dilation 1,
///   padding 1 along columns: a 1x3), sometimes at stride 2 (a 1x1 there: another family);
/// - a large filter on a tiny image: 5x5 or 7x7, padding R/2, on 1 to 3 rows (sometimes columns instead):
///   the taps beyond the image dropped (a 3x7 on 2 rows), sometimes at stride 2.
void pruned_problem(conv2d_problem& p, bool small, std::mt19937_64& gen) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen); };
  auto chance = [&](double q) { return std::uniform_real_distribution<double>(0, 1)(gen) < q; };
  auto one_of = [&](std::initializer_list<std::int64_t> v) { return v.begin()[pick(0, static_cast<std::int64_t>(v.size()) - 1)]; };
  p.N = pick(1, small ? 2 : 3);
  p.stride_h = p.stride_w = chance(0.85) ? 1 : 2;
  p.x_layout = chance(0.9) ? layout::nchw : layout::nhwc;
  if (chance(0.6)) {  // ASPP-like
    p.H = pick(1, small ? 6 : 12), p.W = chance(0.8) ? pick(1, small ? 2 : 3) * 4 : pick(1, small ? 8 : 12);
    const std::int64_t d = chance(0.3) ? one_of({12, 24, 36}) : std::max(p.H, p.W) + pick(0, 4);
    p.R = p.S = 3;
    p.dil_h = p.dil_w = p.pad_h = p.pad_w = d;
    if (chance(0.25)) p.dil_w = p.pad_w = 1;  // rows only
    p.C = pick(2, small ? 8 : 16), p.K = small ? one_of({8, 16, 24}) : one_of({8, 16, 24, 32, 64});
  } else {  // a large filter on a tiny image
    p.R = p.S = one_of({5, 7});
    p.pad_h = p.pad_w = p.R / 2;
    p.H = pick(1, 3), p.W = chance(0.7) ? pick(3, small ? 4 : 8) * 4 : pick(9, small ? 16 : 30);
    if (chance(0.3)) std::swap(p.H, p.W);
    p.C = pick(2, small ? 4 : 8), p.K = small ? one_of({8, 16}) : one_of({8, 16, 32});
  }
}

/// The plan options of a plan case: the planner's own choices mostly; a quarter splits = -1 (the wgmma
/// kernel and its adapters, pruned, dilated and grouped, wherever they serve); a few a forced partial mode, tiles, pass mode or split-K
/// tail (documented choices for tests: every one must give correct results).
convred::device::plan_options plan_opts(std::mt19937_64& gen) {
  using namespace convred::device;
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen); };
  const double u = std::uniform_real_distribution<double>(0, 1)(gen);
  plan_options o;
  if (u < 0.25) o.splits = -1;
  else if (u < 0.31) o.splits = static_cast<int>(pick(1, 4));
  else if (u < 0.36) o.tiles = static_cast<wgmma_tiling>(pick(1, 3));
  else if (u < 0.40) o.pass = static_cast<wgmma_pass_mode>(pick(1, 2));
  else if (u < 0.43) o.tail = pick(1, 3), o.tail_splits = static_cast<int>(pick(0, 3));
  return o;
}

/// A random case from a seed (deterministic).
fcase generate(std::uint64_t seed, const gen_opts& g) {
  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + 12345);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(gen) < p; };
  fcase c;
  if (g.force_combo) {
    c.e = g.e, c.t = g.t, c.m = g.m, c.o = g.o;
  } else {
    const double r = std::uniform_real_distribution<double>(0, 1)(gen);
    entry e = r < 0.4 ? entry::fused : r < 0.6 ? entry::packed : r < 0.75 ? entry::conv2d : entry::channel;
    // a quarter of the fused cases run the split path, chosen by a hash of the seed (not a draw: every
    // other case draws the same numbers as before the split path existed)
    if (e == entry::fused && test::mix64(seed ^ 0x5B117ull) % 4 == 0) e = entry::split;
    // an eighth of all cases run the planner, chosen by a hash of the seed (not a draw: the other cases draw
    // the same numbers as before the plan entry existed)
    if (g.force_entry) e = g.e;
    else if (test::mix64(seed ^ 0x91A4ull) % 8 == 0) e = entry::plan;
    std::vector<fcase> all;
    for (const fcase& k : combos())
      if (k.e == e) all.push_back(k);
    const fcase& k = all[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(all.size()) - 1))];
    c.e = k.e, c.t = k.t, c.m = k.m, c.o = k.o;
  }
  const bool small = g.small;
  // a sixth of the plan cases aim at family::pruned, chosen by a hash of the seed (not a draw: the other
  // cases draw the same numbers as before the pruned family existed)
  const bool pruned_seed = c.e == entry::plan && test::mix64(seed ^ 0x9D07ull) % 6 == 0;
  for (int attempt = 0;; ++attempt) {
    conv2d_problem& p = c.p;
    p = conv2d_problem{};
    if (c.e == entry::channel) {
      const int regime = static_cast<int>(pick(0, small ? 3 : 4));
      p.N = pick(1, 3), p.C = pick(1, 40), p.H = pick(1, 20), p.W = pick(1, 20);
      if (regime == 1) {  // many channels, few pixels: the pixel (block-per-pixel) kernel
        p.N = 1, p.C = pick(500, small ? 560 : 1100), p.H = pick(1, 6), p.W = pick(1, 8);
      } else if (regime == 2) {  // vector-friendly: H*W (NCHW) or C (NHWC) a multiple of 8
        p.H = pick(1, 6) * 2, p.W = pick(1, 8) * 4, p.C = pick(1, 12) * 8;
      } else if (regime == 3) {  // channel counts around 2^k
        const std::int64_t base = std::int64_t(1) << pick(0, 8);
        p.C = std::max<std::int64_t>(1, base + pick(-1, 1));
      } else if (regime == 4) {  // many pixels (NHWC: 4 lanes per pixel), few channels
        p.N = pick(1, 2), p.H = pick(130, 190), p.W = pick(130, 190), p.C = pick(1, 6);
      }
      p.x_layout = chance(0.5) ? layout::nhwc : layout::nchw;
      p.K = 1;
    } else if (c.e == entry::plan && pruned_seed) {
      pruned_problem(p, small, gen);  // outer taps reading only padding
    } else if (c.e == entry::plan && chance(0.7)) {
      plan_problem(p, small, gen);  // grouped, narrow groups, depthwise, dilated (the other 30%: plain)
    } else {
      const int regime = c.e == entry::packed && chance(0.75) ? 2 : static_cast<int>(pick(0, c.e == entry::plan ? 2 : 1));
      if (regime == 0) {  // random small shapes, groups, stride, dilation
        p.N = pick(1, 3);
        p.groups = chance(0.3) ? pick(2, 4) : 1;
        p.C = pick(1, small ? 4 : 9) * p.groups;
        p.K = pick(1, small ? 12 : 40) * p.groups;
        p.H = pick(1, small ? 10 : 20), p.W = pick(1, small ? 10 : 20);
        p.R = pick(1, 5), p.S = pick(1, 5);
        p.pad_h = pick(0, 2), p.pad_w = pick(0, 2);
        p.stride_h = pick(1, 3), p.stride_w = pick(1, 3);
        p.dil_h = pick(1, 2), p.dil_w = pick(1, 2);
      } else {  // sizes at and around tile boundaries (GEMM_M, K, GEMM_K), or shapes the wgmma kernel serves
        const std::int64_t Ks[] = {1, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257};
        const std::int64_t Ms[] = {31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513};
        const std::int64_t Cs[] = {1, 3, 4, 7, 8, 9, 15, 16, 17, 32, 33};
        p.K = Ks[pick(0, small ? 9 : 16)];
        p.C = Cs[pick(0, small ? 6 : 10)];
        p.R = chance(0.5) ? 3 : pick(1, 3), p.S = chance(0.5) ? 3 : pick(1, 3);
        p.pad_h = pick(0, p.R / 2 + 1), p.pad_w = pick(0, p.S / 2 + 1);
        p.N = pick(1, 2);
        const std::int64_t M = small ? Ms[pick(0, 8)] : Ms[pick(0, 14)];
        std::int64_t Q = regime == 2 ? pick(1, 10) * 4 : pick(1, 40);
        std::int64_t P = std::max<std::int64_t>(1, (M + p.N * Q - 1) / (p.N * Q));
        if (regime == 2) {  // NCHW float, W % 4 == 0, groups 1, stride 1, dilation 1, K <= 128 (mostly)
          if (p.K > 128 && chance(0.8)) p.K = 128;
          p.W = Q - 1 + p.S - 2 * p.pad_w;
          p.W = std::max<std::int64_t>(4, (p.W + 3) / 4 * 4);
        } else {
          p.W = std::max<std::int64_t>(1, Q - 1 + p.S - 2 * p.pad_w);
        }
        p.H = std::max<std::int64_t>(1, P - 1 + p.R - 2 * p.pad_h);
      }
      p.x_layout = regime != 2 && chance(0.5) ? layout::nhwc : layout::nchw;
    }
    if (!small && chance(0.01)) p.N = 0;  // empty work: success, nothing written
    if (valid(c, small)) break;
    if (attempt > 200) {  // fall back to a tiny valid problem
      p = conv2d_problem{};
      p.N = 1, p.C = 2, p.H = 5, p.W = 8, p.K = c.e == entry::channel ? 1 : 3, p.R = 3, p.S = 3, p.pad_h = p.pad_w = 1;
      break;
    }
  }
  // a third of the packed cases run the wgmma kernel's partial mode (wks: 1 to 12 GEMM_K splits, clamped to
  // the problem's stages per pass), chosen by a hash of the seed (not a draw: every other case draws the
  // same numbers as before the partial mode existed); half of those with K = 128 take K = 130 or 257
  // instead (2 or 3 channel passes: units per pass), when the case stays valid
  if (c.e == entry::packed && test::mix64(seed ^ 0xA11CEull) % 3 == 0) {
    const std::uint64_t h = test::mix64(seed ^ 0xA11CEull) >> 8;
    c.wks = 1 + static_cast<int>(h % 12);
    if ((h >> 8) % 2 == 0 && c.p.K == 128) {
      c.p.K = (h >> 9) % 2 ? 130 : 257;
      if (!valid(c, small)) c.p.K = 128;
    }
  }
  if (c.e == entry::plan) c.po = plan_opts(gen);
  const float scales[] = {1.0f, 2.0f, -1.5f, 0.5f, -1.0f, 0.0f, 3.25f};
  c.scale = scales[pick(0, 6)];
  c.pcs = chance(0.4);
  c.bias = chance(0.75);
  auto off = [&](bool vec_ok) { return chance(0.5) ? 0 : static_cast<int>(vec_ok && chance(0.3) ? 4 : 2 * pick(0, 3) + 1); };
  // (x 16-byte aligned, mostly: the wgmma kernel reads other x through the mma.sync kernel)
  c.off_x = (c.e == entry::packed && chance(0.6)) || (c.e == entry::plan && chance(0.7)) ? 0 : off(true);
  c.off_w = off(false), c.off_b = off(false), c.off_y = off(false), c.off_i = off(false);
  c.integer = chance(0.4);
  if (chance(0.35) || g.force_inf) {
    do {
      c.n_nan = chance(0.5) ? static_cast<int>(pick(1, 2)) : 0;
      c.n_inf = chance(0.5) ? static_cast<int>(pick(1, 3)) : 0;
      c.n_zero = chance(0.5) ? static_cast<int>(pick(1, 4)) : 0;
      c.n_huge = chance(0.4) ? static_cast<int>(pick(1, 2)) : 0;
      if (g.force_inf && c.n_inf == 0) c.n_inf = static_cast<int>(pick(1, 3));
    } while (c.n_nan + c.n_inf + c.n_zero + c.n_huge == 0);
  }
  if ((c.m == mathk::tf32x3 || c.m == mathk::accurate) && !g.tf32x3_inf) c.n_inf = 0;
  c.seed = seed;
  if (c.e == entry::split) {  // 1 to 12 GEMM_K splits, sometimes up to 64 (more than the slices: empty ranges)
    const std::uint64_t h = test::mix64(seed ^ 0x5B117ull) >> 8;
    c.ks = h % 5 == 0 ? 1 + static_cast<int>((h >> 8) % 64) : 1 + static_cast<int>((h >> 8) % 12);
  }
  return c;
}

/// Simpler variants of a case, for greedy shrinking (invalid ones are filtered by the caller).
std::vector<fcase> simpler(const fcase& c) {
  std::vector<fcase> v;
  auto add = [&](auto f) {
    fcase d = c;
    f(d);
    if (to_string(d) != to_string(c)) v.push_back(d);
  };
  conv2d_problem q = c.p;
  const std::int64_t g = q.groups;
  add([](fcase& d) { d.p.N = std::min<std::int64_t>(d.p.N, 1); });
  add([](fcase& d) { d.p.N -= d.p.N > 1; });
  add([](fcase& d) { d.p.groups = 1; });
  add([&](fcase& d) { d.p.C = std::max<std::int64_t>(1, q.C / g / 2) * g; });
  add([&](fcase& d) { d.p.C = std::max<std::int64_t>(g, q.C - g); });
  add([&](fcase& d) { d.p.K = std::max<std::int64_t>(1, q.K / g / 2) * g; });
  add([&](fcase& d) { d.p.K = std::max<std::int64_t>(g, q.K - g); });
  add([](fcase& d) { d.p.H = std::max<std::int64_t>(1, d.p.H / 2); });
  add([](fcase& d) { d.p.H -= d.p.H > 1; });
  add([](fcase& d) { d.p.W = std::max<std::int64_t>(1, d.p.W / 2); });
  add([](fcase& d) { d.p.W -= d.p.W > 1; });
  add([](fcase& d) { d.p.W -= d.p.W > 4 ? 4 : 0; });
  add([](fcase& d) { d.p.R = 1; });
  add([](fcase& d) { d.p.R -= d.p.R > 1; });
  add([](fcase& d) { d.p.S = 1; });
  add([](fcase& d) { d.p.S -= d.p.S > 1; });
  add([](fcase& d) { d.p.pad_h = 0, d.p.pad_w = 0; });
  add([](fcase& d) { d.p.pad_h -= d.p.pad_h > 0; });
  add([](fcase& d) { d.p.pad_w -= d.p.pad_w > 0; });
  add([](fcase& d) { d.p.stride_h = d.p.stride_w = 1; });
  add([](fcase& d) { d.p.dil_h = d.p.dil_w = 1; });
  add([](fcase& d) { d.p.x_layout = layout::nchw; });
  add([](fcase& d) { d.off_x = d.off_w = d.off_b = d.off_y = d.off_i = 0; });
  add([](fcase& d) { d.bias = false; });
  add([](fcase& d) { d.pcs = false; });
  add([](fcase& d) { d.scale = d.scale == 0.0f ? 0.0f : 1.0f; });
  add([](fcase& d) { d.n_nan = 0; });
  add([](fcase& d) { d.n_inf = d.n_inf > 1 ? 1 : 0; });
  add([](fcase& d) { d.n_zero = 0; });
  add([](fcase& d) { d.n_huge = 0; });
  add([](fcase& d) { d.ks = 1; });
  add([](fcase& d) { d.wks = d.wks > 1 ? 1 : d.wks; });
  add([](fcase& d) { d.wks = 0; });
  add([](fcase& d) { d.po = convred::device::plan_options{}; });
  return v;
}

/// Greedy shrinking: repeatedly takes the first simpler variant that still fails, up to `budget` runs.
fcase shrink(fcase c, result& last, int budget, int& tries) {
  tries = 0;
  for (bool progress = true; progress && tries < budget;) {
    progress = false;
    for (const fcase& d : simpler(c)) {
      if (!valid(d, false) || !supported(d.e, d.t, d.m, d.o)) continue;
      if (++tries > budget) break;
      const result r = run(d);
      if (!r.ok) {
        c = d, last = r, progress = true;
        break;
      }
    }
  }
  return c;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

/// Host threads running cases: CONVRED_FUZZ_THREADS, else the hardware threads (at most 16).
int thread_count() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, env_int("CONVRED_FUZZ_THREADS", std::min(16, hw > 0 ? hw : 1)));
}

/// Summary of a batch.
struct batch {
  std::size_t failures = 0;
  std::map<std::string, int> kernels;  ///< coverage: kernel label -> cases
  std::map<std::string, int> families; ///< plan cases: the family the plan picked -> cases
  double seconds = 0;
};

/// Runs cases on thread_count() threads; prints every failure with its reproducer, shrinks the first
/// `shrink_max` failures and prints the shrunk reproducer.
batch run_batch(const std::vector<fcase>& cases, const run_opts& ro, int shrink_max = 3) {
  batch b;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<result> res(cases.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < cases.size();) res[i] = run(cases[i], ro);
  };
  std::vector<std::thread> pool;
  const int nt = std::min<int>(thread_count(), static_cast<int>(cases.size()));
  for (int t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  int shrunk = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ++b.kernels[res[i].kernel.empty() ? std::string("(none)") : res[i].kernel];
    if (!res[i].family.empty()) ++b.families[res[i].family];
    if (res[i].ok) continue;
    ++b.failures;
    std::printf("FUZZ FAIL [%s]: %s\n  repro: CONVRED_FUZZ_REPRO='%s'\n", res[i].kernel.c_str(), res[i].why.c_str(),
                to_string(cases[i]).c_str());
    if (shrunk++ < shrink_max) {
      result last = res[i];
      int tries = 0;
      const fcase s = shrink(cases[i], last, 150, tries);
      std::printf("  shrunk (%d runs) [%s]: %s\n  repro: CONVRED_FUZZ_REPRO='%s'\n", tries, last.kernel.c_str(),
                  last.why.c_str(), to_string(s).c_str());
    }
    std::fflush(stdout);
  }
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

void print_coverage(const char* title, const batch& b, std::size_t n) {
  std::printf("%s: %zu cases, %zu failures, %.1f s, %zu kernels/paths covered:\n", title, n, b.failures, b.seconds,
              b.kernels.size());
  for (const auto& [k, count] : b.kernels) std::printf("  %5d  %s\n", count, k.c_str());
  if (!b.families.empty()) std::printf("plan families:\n");
  for (const auto& [f, count] : b.families) std::printf("  %5d  %s\n", count, f.c_str());
  std::fflush(stdout);
}

bool tf32x3_inf_enabled() { return env_int("CONVRED_FUZZ_TF32X3_INF", 1) != 0; }

/// Packed cases in the wgmma kernel's partial mode (wks > 0): K > 128 (2 and 3 channel passes), C over
/// several stages (several GEMM_K splits), narrow, wide and gathered x, every packed (math, op), seeds
/// from `seed` on (advanced). For the sanitizer and determinism runs.
std::vector<fcase> packed_split_cases(std::uint64_t& seed) {
  std::vector<fcase> v;
  const mathk maths[] = {mathk::tf32, mathk::tf32x3, mathk::bf16, mathk::fp16};
  const opk ops[][2] = {{opk::argmin, opk::sum}, {opk::argmin, opk::mean}, {opk::argmax, opk::min}, {opk::argmin, opk::range}};
  for (int m = 0; m < 4; ++m)
    for (int k = 0; k < 2; ++k) {
      fcase c;
      c.e = entry::packed, c.t = elem::f32, c.m = maths[m], c.o = ops[m][k];
      if (k == 0) {  // narrow (pitch 16), 2 passes, kt 3 (tf32) / 2 (16-bit), 2 splits
        c.p.N = 1, c.p.C = 20, c.p.H = 6, c.p.W = 8, c.p.K = 130, c.p.R = 3, c.p.S = 3, c.p.pad_h = c.p.pad_w = 1;
        c.wks = 2;
      } else {  // wide (Q = 66: two column tiles), W % 4 != 0 (gathered), 1x1 at stride 1, 3 passes
        c.p.N = 1, c.p.C = 17, c.p.H = 3, c.p.W = 66, c.p.K = 257, c.p.R = 1, c.p.S = 1;
        c.wks = 5;  // 1 + 4 % kt splits: 2 for tf32 and tf32x3 (kt 3), 1 for bf16 and fp16 (kt 2)
      }
      c.bias = k == 0, c.pcs = true, c.scale = -1.5f, c.off_y = 1, c.off_i = 3, c.seed = ++seed, c.integer = m % 2 == 1;
      v.push_back(c);
    }
  return v;
}

/// Small plan cases, one per family of the default list and path of the direct family, each with the family
/// the plan picks on an H200 (plan_family; the host suite checks it), seeds from `seed` on (advanced). For the
/// sanitizer and determinism runs, whose generated plan cases are too small for the wgmma families.
std::vector<std::pair<fcase, std::string>> plan_family_cases(std::uint64_t& seed) {
  std::vector<std::pair<fcase, std::string>> v;
  auto add = [&](const char* family, elem t, mathk m, opk o, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W,
                 std::int64_t K, std::int64_t R, std::int64_t stride, std::int64_t dil, std::int64_t groups, int splits) {
    fcase c;
    c.e = entry::plan, c.t = t, c.m = m, c.o = o;
    c.p.N = N, c.p.C = C, c.p.H = H, c.p.W = W, c.p.K = K, c.p.R = c.p.S = R, c.p.pad_h = c.p.pad_w = dil * (R / 2);
    c.p.stride_h = c.p.stride_w = stride, c.p.dil_h = c.p.dil_w = dil, c.p.groups = groups;
    c.po.splits = splits;
    c.bias = v.size() % 2 == 0, c.pcs = true, c.scale = -1.5f, c.off_y = 1, c.off_i = 3, c.seed = ++seed;
    c.integer = v.size() % 3 == 1;
    v.emplace_back(c, family);
  };
  // (splits -1: the time model gives this small dilated layer to the mma.sync kernel)
  add("dilated", elem::f32, mathk::tf32, opk::argmin, 1, 4, 12, 12, 16, 3, 1, 2, 1, -1);
  add("grouped", elem::f32, mathk::tf32, opk::sum, 2, 16, 6, 8, 64, 1, 1, 1, 2, -1);
  // (16 output channels per group: not family::grouped's; splits -1: not the direct family's)
  add("wgmma grouped", elem::f32, mathk::tf32, opk::argmin, 2, 32, 8, 8, 32, 3, 1, 1, 2, -1);
  // (dilation 12 on 20 x 20: the full split's sub-images of 2 rows, not the dilated family's in TF32, and its
  // smaller splits' inner plans not on flat tiles the model trusts; every tap live somewhere)
  add("wgmma dilated", elem::f32, mathk::tf32, opk::argmin, 1, 8, 20, 20, 24, 3, 1, 12, 1, -1);
  // (bf16: the same tiles over x's channel pairs; the padding 11, which dilation 12 does not divide, keeps it
  // from space to batch, which serves 16-bit sub-images of 2 rows)
  add("wgmma dilated", elem::f32, mathk::bf16, opk::max, 1, 8, 20, 20, 24, 3, 1, 12, 1, -1);
  v.back().first.p.pad_h = v.back().first.p.pad_w = 11;
  // (3xTF32: both parts of each filter row, every stage promoted; the same padding)
  add("wgmma dilated", elem::f32, mathk::accurate, opk::argmax, 1, 8, 20, 20, 24, 3, 1, 12, 1, -1);
  v.back().first.p.pad_h = v.back().first.p.pad_w = 11;
  // (dense layers of C <= 16 go to the direct family under TF32 and 3xTF32 where it is estimated faster:
  // K = 64 here, and C = 20 in the mma.sync case, keep these two on the tensor-core kernels)
  add("wgmma", elem::f32, mathk::accurate, opk::argmax, 1, 8, 10, 16, 64, 3, 1, 1, 1, 0);
  add("wgmma", elem::f32, mathk::bf16, opk::max, 1, 8, 8, 8, 40, 3, 1, 1, 1, 0);
  add("direct depthwise", elem::f32, mathk::accurate, opk::mean, 2, 8, 9, 9, 8, 3, 2, 1, 8, 0);
  add("direct grouped", elem::f32, mathk::tf32, opk::argmin, 1, 16, 8, 8, 8, 3, 1, 1, 4, 0);
  // (K 33: more than the narrow tensor-core family's 32 channels, which takes this layer at K 16)
  add("mma.sync", elem::f32, mathk::tf32, opk::argmin, 1, 20, 4, 4, 33, 3, 1, 1, 1, 0);
  // (K 33: more than the narrow family's 32 channels)
  add("simt", elem::f32, mathk::ieee, opk::range, 1, 3, 6, 6, 33, 3, 1, 1, 1, 0);
  add("narrow simt", elem::f32, mathk::ieee, opk::range, 1, 3, 6, 6, 5, 3, 1, 1, 1, 0);
  add("narrow simt", elem::f32, mathk::accurate, opk::argmax, 2, 40, 12, 12, 12, 3, 1, 1, 1, 0);
  // (only the centre tap; K 33: the narrow tensor-core family takes it at K 16)
  add("pruned", elem::f32, mathk::tf32, opk::argmin, 1, 4, 5, 8, 33, 3, 1, 12, 1, 0);
  add("tiny", elem::f32, mathk::accurate, opk::mean, 1, 12, 1, 1, 20, 1, 1, 1, 1, 0);   // 12 im2col values
  // (last, so that the cases above keep their seeds and data; pointwise on 1x1 images, fused; a 3x3 layer of 3
  // pixel tiles under bf16, fused)
  add("narrow mma.sync", elem::f32, mathk::tf32, opk::argmin, 32, 96, 1, 1, 4, 1, 1, 1, 1, 0);
  add("narrow mma.sync", elem::f32, mathk::bf16, opk::max, 2, 33, 11, 13, 16, 3, 1, 1, 1, 0);
  // (the narrow family's 32-channel tiles: any layer of 17 to 32 channels per group under math::ieee, grouped
  // ones under 3xTF32: 24 per group at stride 2, as RegNet's)
  add("narrow simt 32", elem::f32, mathk::ieee, opk::min, 1, 5, 7, 9, 20, 3, 1, 1, 1, 0);
  add("narrow simt 32", elem::f32, mathk::accurate, opk::argmax, 2, 168, 12, 12, 168, 3, 2, 1, 7, 0);
  // (flat tiles, the taps as offsets into the packed window: dilation 2 on rows of 300, wider than the direct
  // tiles of filter rows take; the padding 1, which dilation 2 does not divide, keeps it from space to batch)
  add("wgmma dilated flat", elem::f32, mathk::tf32, opk::argmin, 1, 4, 3, 300, 8, 3, 1, 2, 1, -1);
  v.back().first.p.pad_h = v.back().first.p.pad_w = 1;
  add("wgmma dilated flat", elem::f32, mathk::bf16, opk::max, 1, 4, 3, 300, 8, 3, 1, 2, 1, -1);
  v.back().first.p.pad_h = v.back().first.p.pad_w = 1;
  // (space to batch by 2 x 2 into sub-images of dilation 2, forced: plan_options::dilated_residual)
  add("dilated split", elem::f32, mathk::tf32, opk::argmin, 1, 4, 17, 15, 16, 3, 1, 4, 1, -1);
  v.back().first.po.dilated_residual = 2;
  add("dilated split", elem::f32, mathk::accurate, opk::argmax, 2, 6, 13, 14, 20, 3, 1, 6, 1, -1);
  v.back().first.po.dilated_residual = 3;
  return v;
}

/// The cases of the sanitizer run: every supported combination twice (small, fixed seeds), then shapes
/// that force each channel_reduce kernel, the wgmma kernel with and without padding, odd offsets.
std::vector<fcase> sanitizer_cases() {
  std::vector<fcase> v;
  gen_opts g;
  g.small = true;
  g.force_combo = true;
  std::uint64_t seed = 9000;
  for (const fcase& k : combos())
    for (int rep = 0; rep < 2; ++rep) {
      g.e = k.e, g.t = k.t, g.m = k.m, g.o = k.o;
      v.push_back(generate(++seed, g));
    }
  // channel_reduce: each kernel of the plan, on float min and argmax
  auto chan = [&](opk o, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, layout l, int off) {
    fcase c;
    c.e = entry::channel, c.t = elem::f32, c.o = o;
    c.p.N = N, c.p.C = C, c.p.H = H, c.p.W = W, c.p.K = 1, c.p.x_layout = l;
    c.off_x = off, c.off_y = 3, c.off_i = 1, c.pcs = true, c.scale = -1.5f, c.seed = ++seed;
    v.push_back(c);
  };
  for (opk o : {opk::min, opk::argmax}) {
    chan(o, 2, 9, 4, 8, layout::nchw, 0);      // nchw_vector
    chan(o, 2, 9, 5, 7, layout::nchw, 1);      // nchw_scalar
    chan(o, 1, 64, 3, 4, layout::nchw, 0);     // nchw, channel slices
    chan(o, 2, 16, 3, 5, layout::nhwc, 0);     // nhwc_vector, 32 lanes
    chan(o, 2, 13, 3, 5, layout::nhwc, 3);     // nhwc_scalar, 32 lanes
    chan(o, 1, 520, 2, 3, layout::nchw, 0);    // pixel kernel
    chan(o, 1, 520, 2, 3, layout::nhwc, 1);    // pixel kernel, NHWC
    chan(o, 1, 4, 190, 190, layout::nhwc, 0);  // nhwc_vector, 4 lanes (many pixels)
    chan(o, 1, 3, 190, 190, layout::nhwc, 0);  // nhwc_scalar, 4 lanes
  }
  // packed: wgmma-served shapes (NCHW float, W % 4 == 0), padding 0 and 1, a K tail, odd C
  for (mathk m : {mathk::tf32, mathk::tf32x3, mathk::bf16, mathk::fp16}) {
    fcase c;
    c.e = entry::packed, c.t = elem::f32, c.m = m;
    c.o = m == mathk::bf16 ? opk::argmax : opk::argmin;
    c.p.N = 1, c.p.C = 5, c.p.H = 7, c.p.W = 12, c.p.K = 20, c.p.R = 3, c.p.S = 3, c.p.pad_h = 1, c.p.pad_w = 1;
    c.off_y = 1, c.off_i = 3, c.seed = ++seed;
    v.push_back(c);
    c.p.pad_h = c.p.pad_w = 0, c.p.C = 9, c.p.K = 33, c.seed = ++seed, c.integer = true;
    v.push_back(c);
  }
  for (const fcase& c : packed_split_cases(seed)) v.push_back(c);
  for (const auto& [c, family] : plan_family_cases(seed)) v.push_back(c);  // every family of the plan entry
  return v;
}

/// The plan entry's fixed-seed cases: n cases of entry plan (every plan combination drawn).
std::vector<fcase> plan_fixed_cases(int n) {
  std::vector<fcase> v;
  gen_opts g;
  g.force_entry = true;
  g.e = entry::plan;
  for (int s = 1; s <= n; ++s) v.push_back(generate(0x91A40000ull + static_cast<std::uint64_t>(s), g));
  return v;
}

/// Cases of plan_fixed_cases.
constexpr int plan_fixed_count = 300;

/// The families (result::family, plan_family) plan_fixed_cases must reach on an H200 running sm_90a code;
/// the first seven (those that need no wgmma kernel) on any device with tensor cores.
const char* const plan_families[] = {"direct depthwise", "direct grouped",  "mma.sync",      "simt",
                                     "tiny",             "narrow simt",     "narrow simt 32", "narrow mma.sync",
                                     "wgmma",            "dilated",         "grouped",        "pruned",
                                     "wgmma grouped",    "wgmma dilated"};
[[maybe_unused]] constexpr int plan_families_any_device = 8;

}  // namespace
}  // namespace convred::fuzz

using namespace convred::fuzz;

TEST_SUITE("host") {
TEST_CASE("fuzz: reproducer lines round-trip; generated cases are valid and instantiated") {
  gen_opts g;
  g.tf32x3_inf = true;
  for (std::uint64_t s = 1; s <= 300; ++s) {
    g.small = s % 3 == 0;
    const fcase c = generate(s, g);
    const std::string line = to_string(c);
    CAPTURE(line);
    fcase back;
    REQUIRE(parse(line, back));
    CHECK(to_string(back) == line);
    CHECK(supported(c.e, c.t, c.m, c.o));
    CHECK(valid(c, g.small));
    CHECK(to_string(generate(s, g)) == line);  // deterministic in the seed
  }
  fcase bad;
  CHECK_FALSE(parse("entry=fused bogus=1", bad));
  CHECK_FALSE(parse("op=median", bad));
  // the sanitizer list covers every supported combination and has at least 100 cases
  const auto cases = sanitizer_cases();
  CHECK(cases.size() >= 100);
  CHECK(combos().size() >= 50);
  for (const fcase& c : cases) {
    CAPTURE(to_string(c));
    CHECK(supported(c.e, c.t, c.m, c.o));
  }
  for (const fcase& k : combos()) {  // every instantiated combination is in the sanitizer run
    const bool found = std::any_of(cases.begin(), cases.end(), [&](const fcase& c) {
      return c.e == k.e && c.t == k.t && c.m == k.m && c.o == k.o;
    });
    CAPTURE(to_string(k));
    CHECK(found);
  }
  g.tf32x3_inf = false;
  for (std::uint64_t s = 1; s <= 300; ++s) {
    const fcase c = generate(s, g);
    if (c.m == mathk::tf32x3 || c.m == mathk::accurate) CHECK(c.n_inf == 0);
  }
  // plan options round-trip (popt=splits,tiles,pass,tail,tail_splits)
  fcase pc;
  pc.e = entry::plan, pc.m = mathk::accurate, pc.o = opk::argmax;
  pc.po.splits = -1, pc.po.tiles = convred::device::wgmma_tiling::flat, pc.po.pass = convred::device::wgmma_pass_mode::on;
  pc.po.tail = 3, pc.po.tail_splits = 2;
  fcase back;
  REQUIRE(parse(to_string(pc), back));
  CHECK(to_string(back) == to_string(pc));
  CHECK(to_string(back).find(" popt=-1,2,2,3,2") != std::string::npos);
  CHECK_FALSE(parse("entry=plan popt=0,7,0,0,0", back));
  CHECK_FALSE(parse("entry=plan popt=0,0,0,0,0xyz", back));  // trailing characters
}

TEST_CASE("fuzz: plan entry, fixed seeds reach every family on an H200 (the planner's choice, no GPU)") {
  // the cases of the GPU test "fuzz: plan entry, fixed seeds, every family drawn": the family each plan
  // picks for a described H200 (132 SMs, sm_90a code), as on the GPU
  std::map<std::string, int> families;
  for (const fcase& c : plan_fixed_cases(plan_fixed_count)) {
    const std::string line = to_string(c);
    CAPTURE(line);
    CHECK(c.e == entry::plan);
    CHECK(supported(c.e, c.t, c.m, c.o));
    CHECK(valid(c, false));
    fcase back;
    REQUIRE(parse(line, back));
    CHECK(to_string(back) == line);
    const std::string f = plan_family(c, plan_device{});
    CHECK(f.rfind("none", 0) != 0);
    ++families[f];
  }
  std::string seen;
  for (const auto& [f, count] : families) seen += f + ": " + std::to_string(count) + "; ";
  CAPTURE(seen);
  for (const char* f : plan_families) {
    CAPTURE(f);
    CHECK(families[f] > 0);
  }
  // the sanitizer and determinism runs' plan cases: one per family
  std::uint64_t seed = 0;
  std::map<std::string, int> small;
  for (const auto& fc : plan_family_cases(seed)) {
    const std::string line = to_string(fc.first);
    CAPTURE(line);
    fcase back;  // (their plan options round-trip too: popt=, dres=)
    REQUIRE(parse(line, back));
    CHECK(to_string(back) == line);
    CHECK(back.po.dilated_residual == fc.first.po.dilated_residual);
    CHECK(valid(fc.first, false));
    CHECK(plan_family(fc.first, plan_device{}) == fc.second);
    ++small[fc.second];
  }
  for (const char* f : plan_families) {
    CAPTURE(f);
    CHECK(small[f] > 0);
  }
  CHECK(small["wgmma dilated flat"] > 0);  // (explicit cases only: the fixed seeds' small dilated layers take direct tiles)
  CHECK(small["dilated split"] > 0);       // (explicit cases only, forced)
}
}

TEST_SUITE("gpu") {
TEST_CASE("fuzz: fixed seeds, every entry point vs float64 (400 cases)") {
  std::vector<fcase> cases;
  gen_opts g;  // tf32x3 with +-inf: its own test case below
  for (std::uint64_t s = 1; s <= 400; ++s) cases.push_back(generate(0xF00D0000 + s, g));
  const batch b = run_batch(cases, {});
  print_coverage("fuzz fixed seeds", b, cases.size());
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz: plan entry, fixed seeds, every family drawn (300 cases)") {
  const std::vector<fcase> cases = plan_fixed_cases(plan_fixed_count);
  const batch b = run_batch(cases, {});
  print_coverage("fuzz plan fixed seeds", b, cases.size());
  CHECK(b.failures == 0);
#ifdef CONVRED_TEST_EXPECT_WGMMA
  const int required = static_cast<int>(std::size(plan_families));  // an H200 running sm_90a code
#else
  const int required = plan_families_any_device;
#endif
  for (int i = 0; i < required; ++i) {
    CAPTURE(plan_families[i]);
    CHECK(b.families.count(plan_families[i]) == 1);
  }
}

TEST_CASE("fuzz: tf32x3 with +-inf inputs (3xTF32 big/small split; CONVRED_FUZZ_TF32X3_INF=0 skips)") {
  if (!tf32x3_inf_enabled()) {
    MESSAGE("CONVRED_FUZZ_TF32X3_INF=0: the tf32x3 + infinity cases are skipped (known fault class)");
    return;
  }
  std::vector<fcase> cases;
  gen_opts g;
  g.tf32x3_inf = true;
  g.force_combo = true;
  g.force_inf = true;
  g.m = mathk::tf32x3;
  g.t = elem::f32;
  std::uint64_t seed = 0x7F3300;
  for (entry e : {entry::fused, entry::packed, entry::conv2d})
    for (opk o : {opk::argmin, opk::max, opk::mean, opk::min}) {  // conv2d: min stands for "no op"
      if (!supported(e, elem::f32, mathk::tf32x3, o)) continue;
      g.e = e, g.o = o;
      for (int i = 0; i < 6; ++i) cases.push_back(generate(++seed, g));
    }
  const batch b = run_batch(cases, {});
  print_coverage("fuzz tf32x3 + inf", b, cases.size());
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz random: CONVRED_FUZZ_N cases from CONVRED_FUZZ_SEED (default: the time)") {
  const int n = env_int("CONVRED_FUZZ_N", 0);
  if (n <= 0) {
    MESSAGE("CONVRED_FUZZ_N not set: no random fuzz run (bench/fuzz.sh runs one)");
    return;
  }
  const char* sv = std::getenv("CONVRED_FUZZ_SEED");
  const std::uint64_t seed =
      sv && *sv ? std::strtoull(sv, nullptr, 0)
                : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  gen_opts g;
  g.tf32x3_inf = tf32x3_inf_enabled();
  std::vector<fcase> cases;
  for (int i = 0; i < n; ++i) cases.push_back(generate(seed * 1000003ull + static_cast<std::uint64_t>(i), g));
  std::printf("fuzz random: seed %llu, %d cases, tf32x3 with +-inf %s, %d threads\n", static_cast<unsigned long long>(seed),
              n, g.tf32x3_inf ? "included" : "excluded (CONVRED_FUZZ_TF32X3_INF=0)", thread_count());
  const batch b = run_batch(cases, {}, env_int("CONVRED_FUZZ_SHRINK", 5));
  print_coverage("fuzz random", b, cases.size());
  std::printf("FUZZ RESULT: seed=%llu cases=%d failures=%zu seconds=%.1f\n", static_cast<unsigned long long>(seed), n,
              b.failures, b.seconds);
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz sanitizer: >= 100 small cases over every kernel and path") {
  const auto cases = sanitizer_cases();
  const batch b = run_batch(cases, {}, 1);
  print_coverage("fuzz sanitizer", b, cases.size());
  CHECK(cases.size() >= 100);
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz determinism: every path gives bitwise-identical y and indices (4 launches, 2 streams)") {
  std::vector<fcase> cases;
  gen_opts g;
  g.force_combo = true;
  std::uint64_t seed = 0xDE7000;
  for (const fcase& k : combos())
    for (int rep = 0; rep < 2; ++rep) {
      g.e = k.e, g.t = k.t, g.m = k.m, g.o = k.o;
      cases.push_back(generate(++seed, g));
    }
  for (const fcase& c : packed_split_cases(seed)) cases.push_back(c);  // the wgmma kernel's partial mode
  for (const auto& [c, family] : plan_family_cases(seed)) cases.push_back(c);  // every family of the plan entry
  run_opts ro;
  ro.determinism = true;
  const batch b = run_batch(cases, ro);
  print_coverage("fuzz determinism", b, cases.size());
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz regression: double channel sums of huge values (the oracle's aggregate norm overflowed)") {
  // Two time-seeded draws of session 26 (seeds 1796640688 and 1796640721, shrunk): the device's sums were
  // within their bounds, but the oracle's sum of squared magnitudes (1e300 each) overflowed to inf / inf = NaN.
  std::vector<fcase> cs;
  for (const char* line :
       {"entry=channel T=double math=ieee op=sum N=1 C=5 H=42 W=158 K=1 R=1 S=1 pad=0,0 stride=1,1 dil=1,1 groups=1 "
        "layout=nchw bias=0 scale=-1.5 pcs=1 off=0,0,0,0,0 data=real nan=2 inf=1 zero=0 huge=1 seed=1796646077922863",
        "entry=channel T=double math=ieee op=sum N=1 C=19 H=1 W=1 K=1 R=1 S=1 pad=0,0 stride=1,1 dil=1,1 groups=1 "
        "layout=nchw bias=0 scale=-1.5 pcs=1 off=0,0,0,0,0 data=real nan=0 inf=0 zero=3 huge=2 seed=1796646110929310"}) {
    fcase c;
    REQUIRE(parse(line, c));
    cs.push_back(c);
  }
  const batch b = run_batch(cs, {}, 0);
  CHECK(b.failures == 0);
}

TEST_CASE("fuzz repro: CONVRED_FUZZ_REPRO='<line>' (a reproducer printed by a failure)") {
  const char* line = std::getenv("CONVRED_FUZZ_REPRO");
  if (!line || !*line) {
    MESSAGE("CONVRED_FUZZ_REPRO not set: nothing to reproduce");
    return;
  }
  fcase c;
  REQUIRE_MESSAGE(parse(line, c), "cannot parse CONVRED_FUZZ_REPRO");
  const batch b = run_batch({c}, {}, env_int("CONVRED_FUZZ_SHRINK", 1));
  print_coverage("fuzz repro", b, 1);
  CHECK(b.failures == 0);
}
}
