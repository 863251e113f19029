// Certified screening (convred/kernel/screen.cuh, convred/device/family/screen.cuh; docs/screening.md):
// - the bound: every channel's fp16 tensor-core value yhat (the fp16 plan, one channel at a time) lies
//   within screen_bound of both the exact fp32 FMA value y32 and the float64 value, on random and crafted
//   data (all-positive sums, large GEMM_K, values near fp16's range and in its subnormal range);
// - the family: a plan whose family_list starts with family::screen gives, for min / max / argmin /
//   argmax with the identity or a scale epilogue, exactly the SIMT kernel's result (math::ieee), bit for
//   bit, also on ties, near ties, all-equal filters, NaN and +-inf in x, w and b, huge and tiny values.
#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/device/family/screen.cuh>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <random>

#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::kernel_kind;

namespace {

// screening first, the SIMT family (exact FMA: its math::ieee entry, which serves every GPU; simt<float,
// math::accurate> serves only GPUs older than sm_80) where it does not serve (a short list: each family's
// launch is instantiated for every op and epilogue run)
using screen_list = fam::family_list<fam::screen<float, math::accurate>, fam::simt<float, math::ieee>>;
using screen_plan = conv2d_reduce_plan<float, math::accurate, screen_list>;
using simt_policy = convred::default_simt_policy<float>::type;

/// e(v, k) = v * s for channel j, +inf for every other channel: op::min then yields channel j's value.
struct select_channel {
  int j;
  float s;
  template <class V>
  __host__ __device__ V operator()(V v, int k) const {
    return k == j ? v * static_cast<V>(s) : static_cast<V>(INFINITY);
  }
};

bool screening_runs() {
  const auto dev = convred::device::device_info::current();
  return dev.cc_major == 9 && dev.cc_minor == 0 && dev.wgmma_image;
}

/// Calls f(x, kk) for every tap of output pixel m in GEMM_K order (kk = (c * R + r) * S + s ascending),
/// x = 0 on a padding tap.
template <class F>
void for_each_tap(const conv2d_problem& p, const host_data<float>& d, std::int64_t m, F&& f) {
  const std::int64_t P = p.P(), Q = p.Q(), n = m / (P * Q), pq = m % (P * Q);
  const std::int64_t h0 = (pq / Q) * p.stride_h - p.pad_h, w0 = (pq % Q) * p.stride_w - p.pad_w;
  std::int64_t kk = 0;
  for (std::int64_t c = 0; c < p.C; ++c)
    for (std::int64_t r = 0; r < p.R; ++r)
      for (std::int64_t t = 0; t < p.S; ++t, ++kk) {
        const std::int64_t h = h0 + r * p.dil_h, w = w0 + t * p.dil_w;
        const bool inside = h >= 0 && h < p.H && w >= 0 && w < p.W;
        f(inside ? d.x[static_cast<std::size_t>(convred::reference::x_offset(p, n, c, h, w))] : 0.0f, kk);
      }
}

/// y32 of channel k at pixel m on the host: fp32 FMA in the SIMT kernel's order, bias, then * s.
float host_y32(const conv2d_problem& p, const host_data<float>& d, std::int64_t m, std::int64_t k, float s,
               bool bias) {
  float acc = 0.0f;
  const std::int64_t L = p.gemm_k();
  for_each_tap(p, d, m, [&](float xv, std::int64_t kk) {
    acc = std::fmaf(xv, d.w[static_cast<std::size_t>(k * L + kk)], acc);
  });
  return (acc + (bias ? d.b[static_cast<std::size_t>(k)] : 0.0f)) * s;
}

/// The data kinds the bitwise tests draw: random reals and integers, then ties, near ties and the values
/// that make the bound infinite or its pass-1 values overflow, underflow or change sign.
enum class kind {
  random, integer, equal_filters, near_tie, nan_x, inf_w, nan_b, neg_inf_b, huge_x, fp16_overflow, tiny, neg_zero
};
constexpr kind kinds[] = {kind::random, kind::integer, kind::equal_filters, kind::near_tie, kind::nan_x, kind::inf_w,
                          kind::nan_b, kind::neg_inf_b, kind::huge_x, kind::fp16_overflow, kind::tiny, kind::neg_zero};
constexpr const char* kind_names[] = {"random", "integer", "equal filters", "near tie", "NaN in x", "inf in w",
                                      "NaN in b", "-inf in b", "huge x", "x above fp16's range", "tiny",
                                      "products underflowing to -0, bias -0"};

/// Host data of kind kd for p (make_data's, from `seed`, then changed as the kind says).
host_data<float> screen_data(const conv2d_problem& p, kind kd, std::uint64_t seed) {
  auto d = make_data<float>(p, seed, kd == kind::integer ? data_kind::integer : data_kind::real);
  const std::int64_t L = p.gemm_k();
  const auto inf = std::numeric_limits<float>::infinity();
  switch (kd) {
    case kind::equal_filters:
      for (std::int64_t k = 1; k < p.K; ++k)
        for (std::int64_t i = 0; i < L; ++i) d.w[std::size_t(k * L + i)] = d.w[std::size_t(i)];
      std::fill(d.b.begin(), d.b.end(), 0.25f);
      break;
    case kind::near_tie:  // channel k+1 = channel k with one weight one ulp away
      for (std::int64_t k = 1; k < p.K; k += 2) {
        for (std::int64_t i = 0; i < L; ++i) d.w[std::size_t(k * L + i)] = d.w[std::size_t((k - 1) * L + i)];
        float& v = d.w[std::size_t(k * L + (k % L))];
        v = std::nextafter(v, 2.0f);
        d.b[std::size_t(k)] = d.b[std::size_t(k - 1)];
      }
      break;
    case kind::nan_x: d.x[d.x.size() / 3] = std::numeric_limits<float>::quiet_NaN(); break;
    case kind::inf_w: d.w[d.w.size() / 2] = inf; break;
    case kind::nan_b: d.b[std::size_t(p.K / 2)] = std::numeric_limits<float>::quiet_NaN(); break;
    case kind::neg_inf_b: d.b[std::size_t(p.K - 1)] = -inf; break;
    case kind::huge_x: d.x[d.x.size() / 2] = 3.0e37f; break;
    case kind::fp16_overflow: d.x[d.x.size() / 4] = 70000.0f; break;
    case kind::tiny:
      for (float& v : d.x) v *= 1e-30f;
      break;
    case kind::neg_zero:  // every conv output -0 (the SIMT kernel's padded last slice makes it +0)
      std::fill(d.x.begin(), d.x.end(), 1e-30f);
      std::fill(d.w.begin(), d.w.end(), -1e-20f);
      std::fill(d.b.begin(), d.b.end(), -0.0f);
      break;
    default: break;
  }
  return d;
}

/// Runs the prepared `plan` and the unsplit SIMT kernel on the same device buffers with op o and epilogue
/// e (outputs poisoned first) and checks that the values are equal byte for byte and the indices equal.
template <class Plan, class O, class E>
void check_against_simt(const Plan& plan, const conv2d_problem& p, const float* x, const float* w, const float* b,
                        O o, E e) {
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(O::has_index ? ny : 0), i2(O::has_index ? ny : 0);
  test::poison(y1), test::poison(y2);
  std::int64_t* pi1 = O::has_index ? thrust::raw_pointer_cast(i1.data()) : nullptr;
  std::int64_t* pi2 = O::has_index ? thrust::raw_pointer_cast(i2.data()) : nullptr;
  REQUIRE(plan.run(x, b, thrust::raw_pointer_cast(y1.data()), pi1, o, e) == status::success);
  REQUIRE(convred::device::conv2d_reduce<simt_policy>(p, x, w, b, thrust::raw_pointer_cast(y2.data()), pi2, o, e) ==
          status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(bytes_equal(test::to_host(y1), test::to_host(y2)));
  if constexpr (O::has_index) CHECK(test::to_host(i1) == test::to_host(i2));
}

}  // namespace

TEST_CASE("screen: the planner takes the family where it serves, the next one where not (host)") {
  const convred::device::device_info h200{9, 0, true, 132}, a100{8, 0, false, 108};
  const conv2d_problem seed = make_problem(64, 64, 256, 256, 128, 3, 3);
  screen_plan plan(seed, h200);
  REQUIRE(plan.state() == status::success);
  CHECK(plan.kernel() == kernel_kind::screen);
  CHECK(plan.config().family == 0);
  // pass 1's description, then what pass 2 does
  conv2d_reduce_plan<float, math::fp16> fp16(seed, h200);
  CHECK(plan.description().rfind("screened: " + fp16.description() + ", then an exact fp32 recompute", 0) == 0);
  // pass 1's workspace (the fp16 packed filter) first, then 20 bytes per output pixel, the statistics and
  // the filter transposed
  CHECK(plan.prepared_bytes() == fp16.prepared_bytes());
  CHECK(plan.workspace_bytes() == (fp16.workspace_bytes() + 15) / 16 * 16 +
                                      fam::screen<float, math::accurate>::extra_bytes(seed));
  CHECK(plan.workspace_bytes() >= fp16.workspace_bytes() + 20 * static_cast<std::size_t>(seed.gemm_m()));
  // where it does not serve: the SIMT family (the list's next), for a reason its can_implement names
  const struct {
    conv2d_problem p;
    const char* why;
  } refused[] = {
      {make_problem(2, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2), "groups != 1"},
      {make_problem(1, 4, 8, 8, 70000, 1, 1), "K above 65535"},
      {make_problem(1, 64, 16, 16, 4096, 3, 3, 1, 1), "R * S * K above pass 2's filter rows (200 KB of shared memory)"},
  };
  for (const auto& r : refused) {
    CAPTURE(describe(r.p));
    CHECK(std::string(fam::screen<float, math::accurate>::can_implement(r.p, h200, {})) == r.why);
    screen_plan q(r.p, h200);
    CHECK(q.state() == status::success);
    CHECK(q.kernel() == kernel_kind::simt);
    CHECK(q.config().family == 1);
  }
  // no sm_90a (pass 1's wgmma family is not available): the SIMT family
  CHECK_FALSE(fam::screen<float, math::accurate>::available(a100));
  screen_plan on_a100(seed, a100);
  CHECK(on_a100.state() == status::success);
  CHECK(on_a100.kernel() == kernel_kind::simt);
  CHECK(on_a100.config().family == 1);
}

TEST_SUITE("gpu") {
TEST_CASE("screen: fp16 tensor-core values lie within the certified bound of exact fp32 and float64") {
  require_gpu();
  if (!screening_runs()) {
    MESSAGE("skipped: needs a compute capability 9.0 GPU with sm_90a code");
    return;
  }
  constexpr auto pr = convred::kernel::screen_precision_of<math::fp16>();
  struct crafted {
    const char* name;
    conv2d_problem p;
    double lo, hi;   // x and w uniform in [lo, hi) ...
    bool log_scale;  // ... or sign * 2^U(lo, hi)
  };
  const crafted cases[] = {
      {"random [-1,1)", make_problem(2, 7, 11, 13, 12, 3, 3, 1, 1), -1, 1, false},
      {"all positive, GEMM_K 2304", make_problem(1, 256, 8, 9, 6, 3, 3, 1, 1), 0, 1, false},
      {"near fp16's range", make_problem(1, 16, 7, 8, 5, 3, 3), -250, 250, false},
      {"fp16 subnormals", make_problem(1, 16, 7, 8, 5, 3, 3, 1, 1), -2e-5, 2e-5, false},
      {"magnitudes 2^-24 .. 2^8", make_problem(1, 32, 9, 10, 7, 3, 3, 1, 1), -24, 8, true},
      {"1x1, stride 2", make_problem(2, 64, 12, 12, 9, 1, 1, 0, 0, 2, 2), -1, 1, false},
  };
  std::mt19937_64 rng(20261203);
  double worst = 0;  // largest |yhat - y32| / E seen
  for (const crafted& cs : cases) {
    const conv2d_problem& p = cs.p;
    CAPTURE(cs.name);
    CAPTURE(describe(p));
    host_data<float> d;
    auto draw = [&](std::size_t n) {
      std::vector<float> v(n);
      std::uniform_real_distribution<double> u(cs.lo, cs.hi), e(cs.lo, cs.hi), sign(-1, 1);
      for (float& f : v)
        f = cs.log_scale ? static_cast<float>((sign(rng) < 0 ? -1 : 1) * std::exp2(e(rng))) : static_cast<float>(u(rng));
      return v;
    };
    d.x = draw(static_cast<std::size_t>(p.x_elements()));
    d.w = draw(static_cast<std::size_t>(p.w_elements()));
    d.b = draw(static_cast<std::size_t>(p.K));
    auto dx = test::to_device(d.x);
    auto dw = test::to_device(d.w);
    auto db = test::to_device(d.b);
    const std::int64_t M = p.gemm_m(), L = p.gemm_k();
    // the bound's inputs as the kernels form them: max_k ||w_k||^2 and max |b|, per pixel ||x_patch||^2
    double wsq = 0, bmax = 0;
    for (std::int64_t k = 0; k < p.K; ++k) {
      double s = 0;
      for (std::int64_t i = 0; i < L; ++i) s += double(d.w[std::size_t(k * L + i)]) * d.w[std::size_t(k * L + i)];
      wsq = std::max(wsq, s * (1 + 1e-6));
      bmax = std::max(bmax, std::fabs(double(d.b[std::size_t(k)])));
    }
    const float scale = 2.0f;
    conv2d_reduce_plan<float, math::fp16> plan(p);
    REQUIRE(plan.state() == status::success);
    REQUIRE(plan.prepare(craw(dw)) == status::success);
    thrust::device_vector<float> yj(static_cast<std::size_t>(M));
    for (int j = 0; j < p.K; ++j) {
      test::poison(yj);
      REQUIRE(plan.run(craw(dx), craw(db), raw(yj), nullptr, op::min{}, select_channel{j, scale}) == status::success);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const auto yhat = test::to_host(yj);
      for (std::int64_t m = 0; m < M; ++m) {
        const std::int64_t n = m / (p.P() * p.Q()), pq = m % (p.P() * p.Q()), Q = p.Q();
        double sumsq = 0;
        for_each_tap(p, d, m, [&](float xv, std::int64_t) { sumsq += double(xv) * xv; });
        const double E = convred::kernel::screen_bound(sumsq, wsq, bmax, scale, L, pr);
        const double y32 = host_y32(p, d, m, j, scale, true);
        const double y64 = scale * convred::reference::conv2d_at(p, d.x.data(), d.w.data(), d.b.data(), n, j, pq / Q, pq % Q);
        const double got = yhat[static_cast<std::size_t>(m)];
        CAPTURE(m);
        CAPTURE(j);
        REQUIRE(std::isfinite(E));
        CHECK(std::fabs(got - y32) <= E);
        CHECK(std::fabs(got - y64) <= E);
        worst = std::max(worst, std::fabs(got - y32) / E);
      }
    }
  }
  MESSAGE("largest |yhat - y32| / bound over all cases: " << worst);
}

TEST_CASE("screen fuzz: random problems and data kinds, bit for bit with the SIMT kernel") {
  // CONVRED_SCREEN_FUZZ_N cases (default 120) from CONVRED_SCREEN_FUZZ_SEED (default 2026): shapes, strides,
  // paddings, filters and channel counts drawn at random (dilation 1 and groups 1: what the family serves),
  // each with one data kind of `kinds` and one op and epilogue; the case's numbers are in the failure message
  require_gpu();
  if (!screening_runs()) {
    MESSAGE("skipped: needs a compute capability 9.0 GPU with sm_90a code");
    return;
  }
  const char* n_env = std::getenv("CONVRED_SCREEN_FUZZ_N");
  const char* seed_env = std::getenv("CONVRED_SCREEN_FUZZ_SEED");
  const int n = n_env ? std::atoi(n_env) : 120;
  const std::uint64_t seed0 = seed_env ? std::strtoull(seed_env, nullptr, 10) : 2026;
  std::mt19937_64 gen(seed0);
  auto pick = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen); };
  const std::int64_t filters[] = {1, 2, 3, 5, 7};
  int screened = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t R = filters[pick(0, 4)], S = pick(0, 3) == 0 ? filters[pick(0, 4)] : R;
    const std::int64_t stride = pick(1, 2), pad_h = pick(0, R / 2), pad_w = pick(0, S / 2);
    const std::int64_t H = pick(std::max<std::int64_t>(R - 2 * pad_h, 1), 48);
    const std::int64_t W = pick(std::max<std::int64_t>(S - 2 * pad_w, 1), 80);
    const std::int64_t N = pick(1, 3), C = pick(1, 48);  // (in this order; the values follow the standard library's
                                                         // distribution: 81 of 120 screened is libstdc++'s)
    const std::int64_t K = pick(1, 3) == 1 ? pick(1, 8) : pick(9, 300);
    const conv2d_problem p = make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride, stride);
    const kind kd = kinds[pick(0, static_cast<std::int64_t>(std::size(kinds)) - 1)];
    const int which = static_cast<int>(pick(0, 3));
    const std::uint64_t data_seed = gen();
    CAPTURE(i);
    CAPTURE(seed0);
    CAPTURE(describe(p));
    const std::string kind_name = kind_names[static_cast<int>(kd)];
    CAPTURE(kind_name);
    CAPTURE(which);
    REQUIRE(convred::validate(p, sizeof(float)) == status::success);
    screen_plan plan(p);
    REQUIRE(plan.state() == status::success);
    if (plan.kernel() != kernel_kind::screen) continue;  // pass 1's kernel does not serve it (the SIMT family ran)
    ++screened;
    const auto d = screen_data(p, kd, data_seed);
    auto dx = test::to_device(d.x);
    auto dw = test::to_device(d.w);
    auto db = test::to_device(d.b);
    REQUIRE(plan.prepare(craw(dw)) == status::success);
    switch (which) {
      case 0: check_against_simt(plan, p, craw(dx), craw(dw), craw(db), op::min{}, epi::scale<float>{2.0f}); break;
      case 1: check_against_simt(plan, p, craw(dx), craw(dw), craw(db), op::argmin{}, epi::identity{}); break;
      case 2: check_against_simt(plan, p, craw(dx), craw(dw), craw(db), op::max{}, epi::scale<float>{-0.5f}); break;
      default: check_against_simt(plan, p, craw(dx), craw(dw), craw(db), op::argmax{}, epi::scale<float>{3.0f}); break;
    }
  }
  MESSAGE(screened << " of " << n << " random cases screened (seed " << seed0 << ")");
  if (n >= 100) CHECK(screened * 2 >= n);  // the draw aims at the family (81 of the default 120 on an H200)
}

TEST_CASE("screen: min, max, argmin, argmax equal the SIMT kernel's results bit for bit") {
  require_gpu();
  if (!screening_runs()) {
    MESSAGE("skipped: needs a compute capability 9.0 GPU with sm_90a code");
    return;
  }
  const conv2d_problem shapes[] = {
      base(),                                         // N=2, C=7, 11x13, K=33, 3x3, padding 1
      make_problem(1, 64, 20, 24, 128, 3, 3),         // the seed's layer, small
      make_problem(2, 16, 9, 10, 1, 3, 3, 1, 1),      // K = 1
      make_problem(2, 16, 9, 10, 2, 3, 3, 1, 1),      // K = 2
      make_problem(2, 16, 9, 10, 3, 3, 3, 1, 1),      // K = 3
      make_problem(1, 32, 12, 14, 130, 3, 3, 1, 1),   // two channel passes
      make_problem(2, 24, 17, 15, 40, 3, 3, 1, 1, 2, 2),  // stride 2
      make_problem(3, 48, 8, 8, 64, 1, 1),            // 1x1
      make_problem(1, 8, 23, 21, 20, 5, 5, 2, 2),     // 5x5
      make_problem(1, 16, 37, 130, 40, 3, 3, 1, 1),   // pass 2: 3 x 3 tiles (partial ones), 3 chunks of channels
      make_problem(2, 24, 40, 150, 40, 3, 3, 1, 1, 2, 2),  // stride 2: wider windows, 2 x 2 tiles per image
      make_problem(1, 16, 10, 12, 136, 3, 3, 1, 1),   // two channel tiles, the filter in 16-byte copies
      // 120,000 pixels: the kinds that list every pixel for the full recompute give it more tiles of 64
      // than its grid has blocks (8 per SM: 67,584 pixels in the first round on an H200)
      make_problem(3, 4, 200, 200, 8, 3, 3, 1, 1),
  };
  int runs = 0;
  std::uint64_t seed = 777;
  for (const conv2d_problem& p : shapes) {
    CAPTURE(describe(p));
    screen_plan plan(p);
    REQUIRE(plan.state() == status::success);
    REQUIRE(plan.kernel() == kernel_kind::screen);
    for (kind kd : kinds) {
      const std::string kind_name = kind_names[static_cast<int>(kd)];
      CAPTURE(kind_name);
      const auto d = screen_data(p, kd, ++seed);
      auto dx = test::to_device(d.x);
      auto dw = test::to_device(d.w);
      auto db = test::to_device(d.b);
      REQUIRE(plan.prepare(craw(dw)) == status::success);
      auto one = [&](auto o, auto e, const char* what) {
        CAPTURE(what);
        check_against_simt(plan, p, craw(dx), craw(dw), craw(db), o, e);
        ++runs;
      };
      one(op::min{}, epi::scale<float>{2.0f}, "min * 2");
      one(op::argmin{}, epi::identity{}, "argmin");
      one(op::max{}, epi::scale<float>{-0.5f}, "max * -0.5");
      one(op::argmax{}, epi::scale<float>{3.0f}, "argmax * 3");
    }
  }
  // the inputs are left as given (the plan's runs read x, w and b only) and an op it does not serve is refused
  const conv2d_problem p = base();
  const auto d = make_data<float>(p, 99, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  screen_plan plan(p);
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  CHECK(plan.run(craw(dx), craw(db), raw(y), nullptr, op::sum{}, epi::identity{}) == status::invalid_argument);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y), nullptr, op::min{}, epi::identity{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(dx) == d.x);
  CHECK(test::to_host(dw) == d.w);
  CHECK(test::to_host(db) == d.b);
  // scale 0, NaN and -inf (every pixel recomputed in full), and a plan bound to a separate scratch
  for (float sc : {0.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    CAPTURE(sc);
    const std::size_t ny = static_cast<std::size_t>(p.y_elements());
    thrust::device_vector<float> y1(ny), y2(ny);
    thrust::device_vector<std::int64_t> i1(ny), i2(ny);
    REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmax{}, epi::scale<float>{sc}) == status::success);
    REQUIRE(convred::device::conv2d_reduce<simt_policy>(p, craw(dx), craw(dw), craw(db), raw(y2), raw(i2), op::argmax{},
                                                        epi::scale<float>{sc}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(bytes_equal(test::to_host(y1), test::to_host(y2)));
    CHECK(test::to_host(i1) == test::to_host(i2));
  }
  {
    thrust::device_vector<unsigned char> ws(plan.workspace_bytes() + 16), scratch(plan.scratch_bytes() + 16);
    screen_plan owner(p), borrower(p);
    REQUIRE(owner.prepare(craw(dw), raw(ws), ws.size()) == status::success);
    REQUIRE(borrower.bind(craw(dw), raw(ws), owner.prepared_bytes(), raw(scratch), scratch.size()) == status::success);
    const std::size_t ny = static_cast<std::size_t>(p.y_elements());
    thrust::device_vector<float> y1(ny), y2(ny);
    thrust::device_vector<std::int64_t> i1(ny), i2(ny);
    REQUIRE(borrower.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}, epi::scale<float>{2.0f}) == status::success);
    REQUIRE(convred::device::conv2d_reduce<simt_policy>(p, craw(dx), craw(dw), craw(db), raw(y2), raw(i2), op::argmin{},
                                                        epi::scale<float>{2.0f}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(bytes_equal(test::to_host(y1), test::to_host(y2)));
    CHECK(test::to_host(i1) == test::to_host(i2));
  }
  // the entry points' argument checks; N = 0 does nothing
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  CHECK(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::min{}, epi::identity{}) == status::indices_not_supported);
  CHECK(plan.run(craw(dx), craw(db), nullptr, nullptr, op::argmin{}, epi::identity{}) == status::null_pointer);
  CHECK(plan.run(nullptr, craw(db), raw(y), nullptr, op::min{}, epi::identity{}) == status::null_pointer);
  conv2d_problem empty = p;
  empty.N = 0;
  screen_plan none(empty);
  REQUIRE(none.prepare(craw(dw)) == status::success);
  CHECK(none.run(craw(dx), craw(db), raw(y), nullptr, op::min{}, epi::identity{}) == status::success);
  MESSAGE(runs << " screened runs compared with the SIMT kernel");
}

TEST_CASE("screen sanitizer: the two passes on a small problem") {
  require_gpu();
  if (!screening_runs()) return;
  const conv2d_problem p = make_problem(1, 16, 9, 10, 20, 3, 3, 1, 1);
  auto d = make_data<float>(p, 5, data_kind::integer);
  d.x[7] = std::numeric_limits<float>::quiet_NaN();  // one pixel through the full recompute
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  screen_plan plan(p);
  REQUIRE(plan.kernel() == kernel_kind::screen);
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  REQUIRE(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::argmin{}, epi::scale<float>{2.0f}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}
}
