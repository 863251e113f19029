// GPU tests of the standalone channel reduction (device::channel_reduce) against the float64 reference
// (reference::channel_reduce), plus host checks of its run-time kernel rule (make_channel_reduce_plan).
//
// Every GPU check: fresh random data (never zeros), outputs poisoned first (NaN for y, or a finite
// sentinel where NaN results are expected; INT64_MIN for indices) and every element checked written.
// Tolerances (docs/tolerances.md): selection ops (min, max, argmin, argmax, the user max_abs) are exact with an exact
// epilogue (identity, powers of two, integers) and otherwise within tol::ieee<T>() * |ref| elementwise (for
// 16-bit T the only error is the final rounding of y to T: inputs are exact in fp32); accumulating ops (sum,
// mean, the user sum_sq) within tol::ieee<T>() in relative norm. Indices exact where the epilogue is exact,
// else any index whose float64 value is within the same bound of the reference's (a float-vs-double
// near-tie may legitimately pick another channel).
// Cases named "*sanitizer*" are small and meant for compute-sanitizer (memcheck, racecheck, synccheck,
// initcheck): e.g. `compute-sanitizer --tool racecheck convred_tests --test-case='*sanitizer*'`.
#include <doctest/doctest.h>

#include <cuda_runtime.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/channel_reduce.cuh>
#include <convred/reference/conv2d.hpp>

#include "test_util.cuh"

namespace convred::test::channel_reduce_gpu {

// ---- user-written ops (they must plug in like the built-in ones; see functional.cuh) ----------------

/// Largest absolute value, NaN-propagating. Identity 0 (exact: every |v| >= 0).
struct max_abs {
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = V;
  template <class V>
  __host__ __device__ static V identity() { return V(0); }
  template <class V>
  __host__ __device__ static V make(V v, int) { return v < V(0) ? -v : v; }
  template <class V>
  __host__ __device__ V operator()(V a, V b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a < b ? b : a;
  }
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};

/// Sum of squares in the compute type. Identity 0.
struct sum_sq {
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = V;
  template <class V>
  __host__ __device__ static V identity() { return V(0); }
  template <class V>
  __host__ __device__ static V make(V v, int) { return v * v; }
  template <class V>
  __host__ __device__ V operator()(V a, V b) const { return a + b; }
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};

/// A user epilogue functor: v + c / 64 (exact in every type for these tests' small c and |v| <= 1 ... up to
/// rounding of the sum, hence checked with the tolerant bound).
struct add_channel {
  template <class V>
  __host__ __device__ V operator()(V v, int c) const { return v + static_cast<V>(c) / V(64); }
};

template <class Op>
constexpr bool is_selection_op = std::is_same_v<Op, op::min> || std::is_same_v<Op, op::max> ||
                                 std::is_same_v<Op, op::argmin> || std::is_same_v<Op, op::argmax> ||
                                 std::is_same_v<Op, max_abs>;

/// Name of an op: this file's two user ops, else test::op_name (the built-in ones).
template <class Op>
const char* op_name() {
  if constexpr (std::is_same_v<Op, max_abs>) return "max_abs(user)";
  else if constexpr (std::is_same_v<Op, sum_sq>) return "sum_sq(user)";
  else return test::op_name<Op>();
}

/// Calls f(op) for every op of the sweep: the six built-ins and the two user ops.
template <class F>
void for_each_op(F&& f) {
  for_each_builtin_op(f);
  f(max_abs{});
  f(sum_sq{});
}

inline channel_reduce_problem problem(layout l, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W) {
  channel_reduce_problem p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.x_layout = l;
  return p;
}

/// Offset of x[n, c, hw] (hw = h*W + w) in the problem's layout.
inline std::int64_t offset_of(const channel_reduce_problem& p, std::int64_t n, std::int64_t c, std::int64_t hw) {
  const std::int64_t HW = p.H * p.W;
  return p.x_layout == layout::nchw ? (n * p.C + c) * HW + hw : (n * HW + hw) * p.C + c;
}

/// A fresh seed for each call (deterministic across runs, so a failure reproduces).
inline std::uint64_t next_seed() {
  static std::uint64_t s = 0x5eed0c0ffee;
  return s += 0x9e3779b97f4a7c15ull;
}

/// Finite sentinel for y when NaN results are expected (never a result of these tests' data).
template <class T>
T y_sentinel() {
  return from_compute<T>(-7777.0);
}

/// Spacing of T's subnormals (2^-24 for __half; negligible for the others): a result near zero rounds to
/// T with this absolute error, which a purely relative bound would not allow.
template <class T>
double subnormal_spacing() {
  if constexpr (std::is_same_v<T, __half>) {
    return 1.0 / (1 << 24);
  } else {
    return std::numeric_limits<double>::min();
  }
}

/// Accumulating ops: ‖got − ref‖₂ <= tol * ‖ref‖₂ + sqrt(n) * subnormal_spacing<T>() over the finite
/// elements, and NaN / infinities exactly where the reference has them (rel_norm_error is +inf otherwise).
/// Returns the relative error for the message; `ok` says whether the bound holds.
template <class T>
double norm_check(const std::vector<T>& got, const std::vector<double>& ref, double tol, bool& ok) {
  const double rel = rel_norm_error(got, ref);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    if (std::isfinite(g) && std::isfinite(r)) num += (g - r) * (g - r), den += r * r;
  }
  ok = std::isfinite(rel) &&
       std::sqrt(num) <= tol * std::sqrt(den) + std::sqrt(static_cast<double>(ref.size())) * subnormal_spacing<T>();
  return rel;
}

/// How a case is checked.
struct check_opts {
  double tol = -1;            ///< < 0: tol::ieee<T>(); selection ops with exact epilogues pass 0 (exact)
  bool exact_index = true;    ///< indices must equal the reference's (else: any index of an equal value)
  bool nan_sentinel = false;  ///< poison y with y_sentinel<T>() instead of NaN (NaN results expected)
  bool with_y = true;         ///< pass y (false: index-only call, y = nullptr)
  bool with_indices = true;   ///< pass indices for index ops
  int x_offset = 0;           ///< place x this many elements into its buffer (breaks 16-byte alignment)
  cudaStream_t stream = nullptr;
};

/// `o` with tol 0 (exact) for selection ops, the default tolerance for accumulating ops.
template <class Op>
check_opts for_op(Op, check_opts o) {
  o.tol = is_selection_op<Op> ? 0.0 : -1.0;
  return o;
}

/// Runs device::channel_reduce<Policy> on hx and checks it against reference::channel_reduce.
/// `ed` is the device epilogue, `eh` the same maths on the host (they differ only for pointer-holding ones).
template <class Policy = default_policy, class T, class Op, class EpiDev = epilogue::identity,
          class EpiHost = EpiDev>
void run_case(const channel_reduce_problem& p, const std::vector<T>& hx, Op op = {}, EpiDev ed = {}, EpiHost eh = {},
              check_opts o = {}) {
  const std::string ctx = describe(p) + " T=" + type_name<T>() + " op=" + op_name<Op>();
  INFO(ctx);
  const double tol = o.tol >= 0 ? o.tol : tol::ieee<T>();
  const std::int64_t ny = p.y_elements();
  thrust::device_vector<T> dx(hx.size() + static_cast<std::size_t>(o.x_offset));
  thrust::copy(hx.begin(), hx.end(), dx.begin() + o.x_offset);
  thrust::device_vector<T> dy(static_cast<std::size_t>(ny));
  if (o.nan_sentinel)
    poison_with(dy, y_sentinel<T>());
  else
    poison(dy);
  const bool want_idx = Op::has_index && o.with_indices;
  thrust::device_vector<std::int64_t> di(want_idx ? static_cast<std::size_t>(ny) : 0);
  poison(di);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  const status s = device::channel_reduce<Policy>(p, thrust::raw_pointer_cast(dx.data()) + o.x_offset,
                                                  o.with_y ? thrust::raw_pointer_cast(dy.data()) : nullptr,
                                                  want_idx ? thrust::raw_pointer_cast(di.data()) : nullptr, op, ed,
                                                  o.stream);
  REQUIRE_MESSAGE(s == status::success, to_string(s));
  REQUIRE(cudaStreamSynchronize(o.stream) == cudaSuccess);
  REQUIRE(cudaGetLastError() == cudaSuccess);

  const std::vector<T> gy = to_host(dy);
  const std::vector<std::int64_t> gi = to_host(di);
  std::vector<double> ry(static_cast<std::size_t>(ny));
  std::vector<std::int64_t> ri(static_cast<std::size_t>(ny));
  reference::channel_reduce(p, hx.data(), ry.data(), Op::has_index ? ri.data() : nullptr, op, eh);

  const T sentinel = y_sentinel<T>();
  const std::int64_t HW = p.H * p.W;
  std::int64_t bad = 0;
  std::string first;
  auto fail = [&](std::int64_t q, const char* what, double got, double ref) {
    if (bad++ == 0) {
      char b[256];
      std::snprintf(b, sizeof b, "pixel %lld: %s (got %.9g, ref %.9g)", static_cast<long long>(q), what, got, ref);
      first = b;
    }
  };
  if (o.with_y) {
    for (std::int64_t q = 0; q < ny; ++q) {
      const double g = to_double(gy[q]), r = ry[q];
      const bool unwritten = o.nan_sentinel ? g == to_double(sentinel) : (std::isnan(g) && !std::isnan(r));
      if (unwritten) {
        fail(q, "y not written", g, r);
        continue;
      }
      if (!is_selection_op<Op>) continue;  // accumulating ops: checked in norm below
      if (std::isnan(r) || std::isnan(g)) {
        if (!(std::isnan(r) && std::isnan(g))) fail(q, "NaN mismatch", g, r);
      } else if (std::isinf(r) || std::isinf(g)) {
        if (g != r) fail(q, "inf mismatch", g, r);
      } else if (std::fabs(g - r) > tol * std::fabs(r)) {
        fail(q, "value", g, r);
      }
    }
    if constexpr (!is_selection_op<Op>) {
      bool ok = false;
      const double err = norm_check(gy, ry, tol, ok);
      CHECK_MESSAGE(ok, "relative norm error " << err << " > " << tol);
    }
  }
  if constexpr (Op::has_index) {
    if (want_idx) {
      for (std::int64_t q = 0; q < ny; ++q) {
        const std::int64_t g = gi[q], r = ri[q];
        if (g == r) continue;
        if (g < 0 || g >= p.C) {
          fail(q, g == std::numeric_limits<std::int64_t>::min() ? "index not written" : "index out of range",
               static_cast<double>(g), static_cast<double>(r));
          continue;
        }
        if (o.exact_index || std::isnan(ry[q])) {
          fail(q, "index", static_cast<double>(g), static_cast<double>(r));
          continue;
        }
        const std::int64_t n = q / HW, hw = q % HW;
        const double v = apply_epilogue(eh, to_double(hx[offset_of(p, n, g, hw)]), static_cast<int>(g));
        if (!(v == ry[q] || std::fabs(v - ry[q]) <= tol * std::fabs(ry[q])))
          fail(q, "index of a value outside the bound", static_cast<double>(g), static_cast<double>(r));
      }
    }
  }
  CHECK_MESSAGE(bad == 0, bad << " bad elements; first: " << first);
}

/// Puts NaN, +inf and -inf at random channels of random pixels (about a third of the pixels get a NaN,
/// some two; a third get infinities).
template <class T>
void inject_nan_inf(const channel_reduce_problem& p, std::vector<T>& hx, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<std::int64_t> ch(0, p.C - 1);
  std::uniform_int_distribution<int> kind(0, 5);
  const T nan = from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  const T pinf = from_compute<T>(std::numeric_limits<double>::infinity());
  const T ninf = from_compute<T>(-std::numeric_limits<double>::infinity());
  const std::int64_t HW = p.H * p.W;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t hw = 0; hw < HW; ++hw) {
      switch (kind(g)) {
        case 0: hx[offset_of(p, n, ch(g), hw)] = nan; break;
        case 1:
          hx[offset_of(p, n, ch(g), hw)] = nan;
          hx[offset_of(p, n, ch(g), hw)] = nan;
          hx[offset_of(p, n, ch(g), hw)] = ninf;
          break;
        case 2: hx[offset_of(p, n, ch(g), hw)] = pinf; break;
        case 3:
          hx[offset_of(p, n, ch(g), hw)] = ninf;
          hx[offset_of(p, n, ch(g), hw)] = pinf;
          break;
        default: break;
      }
    }
}

// ---- policies that force each kernel (the run-time rule is checked separately) ------------------------
using kernel::channel_reduce_path;
using kernel::channel_reduce_policy;
struct pol_pixel : channel_reduce_policy {
  static constexpr channel_reduce_path path = channel_reduce_path::pixel;
};
template <int Slices>
struct pol_slices : channel_reduce_policy {
  static constexpr channel_reduce_path path = channel_reduce_path::tile;
  static constexpr int slices = Slices;
};
template <int Lanes>
struct pol_lanes : channel_reduce_policy {
  static constexpr channel_reduce_path path = channel_reduce_path::tile;
  static constexpr int lanes = Lanes;
};
struct pol_scalar : channel_reduce_policy {
  static constexpr channel_reduce_path path = channel_reduce_path::tile;
  static constexpr bool vectorize = false;
};
template <block::load_hint H>
struct pol_hint : channel_reduce_policy {
  static constexpr block::load_hint hint = H;
};
template <int U>
struct pol_unroll : channel_reduce_policy {
  static constexpr int unroll = U;
};
struct pol_512 : channel_reduce_policy {
  static constexpr int threads = 512;
};

/// Shapes of the sweep (issue 2 and the brief: C 1..1000, odd H, W, N 1 and 3).
constexpr std::int64_t sweep_C[] = {1, 3, 7, 33, 65, 130, 1000};
constexpr std::int64_t sweep_HW[][2] = {{1, 1}, {5, 7}, {17, 31}};
constexpr std::int64_t sweep_N[] = {1, 3};

/// Fills x on the device with hash_value(i) (exact in fp32): the > 2^31-element case, whose reference is
/// computed from the same function at sampled pixels.
__host__ __device__ inline float hash_value(std::uint64_t i) {
  const std::uint64_t z = mix64(i + 0x9e3779b97f4a7c15ull);
  return static_cast<float>(static_cast<int>(z % 2001) - 1000) / 1024.0f;
}
__global__ void fill_hash(float* x, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] = hash_value(static_cast<std::uint64_t>(i));
}

/// Runs argmin (value and index) on one problem and fresh data with every forced kernel family.
template <class T>
void forced_paths(const channel_reduce_problem& p) {
  const auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
  const check_opts exact{0.0};
  auto run = [&](auto pol) {
    run_case<decltype(pol)>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
  };
  run(pol_pixel{});
  run(pol_slices<1>{});
  run(pol_slices<32>{});
  run(pol_lanes<4>{});
  run(pol_lanes<32>{});
  run(pol_scalar{});
}

// float: every epilogue type with argmin (value and index) and sum; the other dtypes: the composition
// (negative scalar scale, then per-channel scales of both signs). Kept to these combinations because each
// (type, op, epilogue) instantiates every kernel of the run-time rule.
template <class T, bool AllEpilogues>
void epilogue_cases() {
  const channel_reduce_problem shapes[] = {problem(layout::nchw, 3, 130, 17, 31), problem(layout::nhwc, 3, 65, 5, 7),
                                           problem(layout::nchw, 1, 1000, 5, 7), problem(layout::nhwc, 1, 33, 17, 31),
                                           problem(layout::nchw, 2, 64, 128, 96), problem(layout::nhwc, 2, 64, 128, 96)};
  for (const auto& p : shapes) {
    const auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
    // Per-channel scales of both signs, on the device for the kernel and on the host for the reference.
    std::vector<float> hs(static_cast<std::size_t>(p.C));
    {
      std::mt19937_64 g(next_seed());
      std::uniform_real_distribution<double> d(0.25, 2.0);
      for (std::size_t k = 0; k < hs.size(); ++k) hs[k] = static_cast<float>(k % 3 == 1 ? -d(g) : d(g));
    }
    thrust::device_vector<float> ds(hs.begin(), hs.end());
    const epilogue::per_channel_scale<float> pcs_d{thrust::raw_pointer_cast(ds.data())}, pcs_h{hs.data()};
    const check_opts exact{0.0}, tolerant{-1, false};
    auto both_ops = [&](auto ed, auto eh, check_opts sel) {
      run_case(p, hx, op::argmin{}, ed, eh, sel);
      run_case(p, hx, op::sum{}, ed, eh);
    };
    both_ops(epilogue::make_compose(epilogue::scale<float>{-0.75f}, pcs_d),
             epilogue::make_compose(epilogue::scale<float>{-0.75f}, pcs_h), tolerant);
    if constexpr (AllEpilogues) {
      // Powers of two are exact: min of 2x is 2 * min, exactly, with the same index.
      both_ops(epilogue::scale<float>{2.0f}, epilogue::scale<float>{2.0f}, exact);
      // Negative scale: min of -1.5x is -1.5 * max (the kernel must not hoist it as if positive).
      both_ops(epilogue::scale<float>{-1.5f}, epilogue::scale<float>{-1.5f}, tolerant);
      both_ops(pcs_d, pcs_h, tolerant);
      both_ops(add_channel{}, add_channel{}, tolerant);
      // User lambdas: with the channel, and without (the e(v) form).
      auto shift = [] __host__ __device__(float v, int c) { return v * 0.5f - 0.001f * static_cast<float>(c); };
      both_ops(shift, shift, tolerant);
      auto square = [] __host__ __device__(float v) { return v * v; };
      both_ops(square, square, tolerant);
    }
  }
}

}  // namespace convred::test::channel_reduce_gpu

using namespace convred;
using namespace convred::test;
using namespace convred::test::channel_reduce_gpu;

// =========================================================================================================
// Host checks of the run-time rule (no GPU needed).
// =========================================================================================================
TEST_CASE("channel_reduce plan: run-time kernel rule") {
  using plan = device::channel_reduce_plan;
  using pol = kernel::channel_reduce_policy;
  const auto* x16 = reinterpret_cast<const float*>(std::uintptr_t{1} << 20);  // 16-byte aligned (fake)
  const auto* x4 = reinterpret_cast<const float*>((std::uintptr_t{1} << 20) + 4);
  // Issue 3's case (64,128,254,254) fp32 NCHW on an H200 (132 SMs x 2048 threads): vectors, no split.
  auto r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 64, 128, 254, 254), x16, 132, 2048);
  CHECK(r.k == plan::kind::nchw_vector);
  CHECK(r.split == 1);
  CHECK(r.vec == 4);
  CHECK(r.blocks == (64LL * 254 * 254 + 1023) / 1024);
  // The same tensor at an address not 16-byte aligned: scalar loads, still no split.
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 64, 128, 254, 254), x4, 132, 2048);
  CHECK(r.k == plan::kind::nchw_scalar);
  CHECK(r.split == 1);
  // Fewer pixels (64,128,28,28): the channels are split until pixels/4 * slices reaches half the device.
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 64, 128, 28, 28), x16, 132, 2048);
  CHECK(r.k == plan::kind::nchw_vector);
  CHECK(r.split == 16);
  CHECK(r.blocks == 64LL * 28 * 28 / (16 * 4));
  // NHWC: 4 lanes per pixel for C = 128 fp32 (32 vector loads per pixel), 32 lanes for C = 4096.
  r = device::make_channel_reduce_plan<pol>(problem(layout::nhwc, 64, 128, 254, 254), x16, 132, 2048);
  CHECK(r.k == plan::kind::nhwc_vector);
  CHECK(r.split == 4);
  r = device::make_channel_reduce_plan<pol>(problem(layout::nhwc, 64, 4096, 32, 32), x16, 132, 2048);
  CHECK(r.split == 32);
  r = device::make_channel_reduce_plan<pol>(problem(layout::nhwc, 64, 130, 32, 32), x16, 132, 2048);
  CHECK(r.k == plan::kind::nhwc_scalar);  // 130 % 4 != 0
  // Few pixels, many channels: one block per pixel.
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 1, 4096, 8, 8), x16, 132, 2048);
  CHECK(r.k == plan::kind::pixel);
  CHECK(r.blocks == 64);
  r = device::make_channel_reduce_plan<pol>(problem(layout::nhwc, 1, 4096, 8, 8), x16, 132, 2048);
  CHECK(r.k == plan::kind::pixel);
  // One pixel: the tile kernel with 32 slices (a block per pixel would not add blocks).
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 1, 1000, 1, 1), x16, 132, 2048);
  CHECK(r.k == plan::kind::nchw_scalar);
  CHECK(r.split == 32);
  // __half: 8 per vector; H*W = 254*254 is not a multiple of 8, so scalar.
  const auto* h16 = reinterpret_cast<const __half*>(std::uintptr_t{1} << 20);
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 64, 128, 254, 254), h16, 132, 2048);
  CHECK(r.k == plan::kind::nchw_scalar);
  r = device::make_channel_reduce_plan<pol>(problem(layout::nchw, 64, 128, 256, 256), h16, 132, 2048);
  CHECK(r.k == plan::kind::nchw_vector);
  CHECK(r.vec == 8);
}

TEST_SUITE("gpu") {
  // =======================================================================================================
  // The sweep: both layouts; C = 1..1000; 1x1, 5x7, 17x31; N = 1, 3; every op incl. two user ops; every dtype.
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce sweep: layouts, shapes, ops", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : sweep_C)
        for (const auto& hw : sweep_HW)
          for (std::int64_t N : sweep_N) {
            const auto p = problem(l, N, C, hw[0], hw[1]);
            const auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
            for_each_op([&](auto op) {
              // identity epilogue: selection ops return the selected input itself, exactly
              run_case(p, hx, op, epilogue::identity{}, epilogue::identity{}, for_op(op, check_opts{}));
            });
          }
  }

  // Many pixels: the NCHW tile kernel without a channel split, vector and scalar loads, and NHWC with
  // 4 lanes (vector for C = 64, scalar for C = 33).
  TEST_CASE_TEMPLATE("channel_reduce large: unsplit tiles", T, float, double, __half, __nv_bfloat16) {
    const channel_reduce_problem shapes[] = {
        problem(layout::nchw, 3, 33, 255, 720),   // H*W % 8 == 0: vector loads
        problem(layout::nchw, 2, 17, 383, 721),   // odd H*W: scalar loads
        problem(layout::nhwc, 2, 64, 255, 720),   // C % 8 == 0: vector loads
        problem(layout::nhwc, 2, 33, 255, 721)};  // scalar loads
    for (const auto& p : shapes) {
      const auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
      run_case(p, hx, op::min{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
      run_case(p, hx, op::argmax{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
      run_case(p, hx, op::mean{});
    }
  }

  // =======================================================================================================
  // Epilogues: scale (positive, negative), per-channel scale, compose, a user functor, user lambdas.
  // =======================================================================================================
  TEST_CASE("channel_reduce epilogues: float, every kind") { epilogue_cases<float, true>(); }
  TEST_CASE_TEMPLATE("channel_reduce epilogues: composed", T, double, __half, __nv_bfloat16) {
    epilogue_cases<T, false>();
  }

  // =======================================================================================================
  // NaN / inf: NaN propagates, argmin/argmax give the first NaN's index; infinities compare as values.
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce NaN and inf inputs", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : {1, 3, 33, 130, 1000})
        for (const auto& hw : sweep_HW) {
          const auto p = problem(l, 3, C, hw[0], hw[1]);
          auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
          inject_nan_inf(p, hx, next_seed());
          check_opts o{0.0};
          o.nan_sentinel = true;
          for_each_op([&](auto op) { run_case(p, hx, op, epilogue::identity{}, epilogue::identity{}, for_op(op, o)); });
          // Also through a forced kernel of each family (the rule picks a split tile kernel for these sizes).
          run_case<pol_slices<1>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
          run_case<pol_lanes<4>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
          run_case<pol_pixel>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
        }
  }

  // =======================================================================================================
  // Exact ties (integer-valued data): lowest index; min/max/sum exact.
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce exact ties: lowest index", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : sweep_C)
        for (const auto& hw : sweep_HW) {
          const auto p = problem(l, 3, C, hw[0], hw[1]);
          const auto hx = random_int_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed(), -3, 3);
          for_each_op([&](auto op) {
            run_case(p, hx, op, epilogue::identity{}, epilogue::identity{}, for_op(op, check_opts{}));
          });
          run_case<pol_slices<32>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
          run_case<pol_lanes<4>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
          run_case<pol_pixel>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
        }
  }

  // =======================================================================================================
  // No identity leak: all +inf gives +inf (not FLT_MAX) and index 0; all -inf likewise for max.
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce all infinite: no identity leak", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : {1, 7, 130, 1000}) {
        const auto p = problem(l, 3, C, 5, 7);
        for (double v : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
          const std::vector<T> hx(static_cast<std::size_t>(p.x_elements()), from_compute<T>(v));
          check_opts o{0.0};
          o.nan_sentinel = true;
          for_each_op([&](auto op) { run_case(p, hx, op, epilogue::identity{}, epilogue::identity{}, for_op(op, o)); });
          run_case<pol_pixel>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
          run_case<pol_slices<32>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
        }
        // Explicitly: min over all +inf is +inf with index 0.
        const std::vector<T> hx(static_cast<std::size_t>(p.x_elements()),
                                from_compute<T>(std::numeric_limits<double>::infinity()));
        thrust::device_vector<T> dx = to_device(hx), dy(static_cast<std::size_t>(p.y_elements()));
        thrust::device_vector<std::int64_t> di(static_cast<std::size_t>(p.y_elements()));
        poison_with(dy, y_sentinel<T>());
        poison(di);
        REQUIRE(device::channel_reduce(p, thrust::raw_pointer_cast(dx.data()), thrust::raw_pointer_cast(dy.data()),
                                       thrust::raw_pointer_cast(di.data()), op::argmin{}) == status::success);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        for (const T& y : to_host(dy)) REQUIRE(to_double(y) == std::numeric_limits<double>::infinity());
        for (std::int64_t i : to_host(di)) REQUIRE(i == 0);
      }
  }

  // =======================================================================================================
  // -0.0 and +0.0 compare equal: lowest index among them; mixed with random data.
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce signed zeros", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : {3, 33, 130}) {
        const auto p = problem(l, 3, C, 17, 31);
        std::mt19937_64 g(next_seed());
        std::vector<T> zeros(static_cast<std::size_t>(p.x_elements()));
        for (auto& z : zeros) z = from_compute<T>((g() & 1) ? -0.0 : 0.0);
        auto mixed = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed(), 0.0, 1.0);
        for (std::size_t i = 0; i < mixed.size(); ++i)
          if (g() % 4 == 0) mixed[i] = from_compute<T>((g() & 1) ? -0.0 : 0.0);
        check_opts o{0.0};
        o.nan_sentinel = true;
        for (const auto* hx : {&zeros, &mixed})
          for_each_op([&](auto op) { run_case(p, *hx, op, epilogue::identity{}, epilogue::identity{}, for_op(op, o)); });
      }
  }

  // =======================================================================================================
  // Each kernel family forced by a policy (and policy variants: hints, unroll, 512 threads).
  // =======================================================================================================
  TEST_CASE_TEMPLATE("channel_reduce forced kernels", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (std::int64_t C : {1, 3, 33, 130, 1000})
        for (const auto& hw : {std::pair<int, int>{1, 1}, {5, 7}, {16, 16}, {17, 31}})
          forced_paths<T>(problem(l, 3, C, hw.first, hw.second));
  }

  TEST_CASE("channel_reduce policy variants: hints, unroll, threads") {
    for (layout l : kLayouts)
      for (const auto& p : {problem(l, 3, 130, 16, 24), problem(l, 2, 33, 17, 31), problem(l, 1, 1000, 5, 7),
                            problem(l, 2, 64, 128, 96)}) {
        const auto hx = random_vector<float>(static_cast<std::size_t>(p.x_elements()), next_seed());
        auto both = [&](auto pol) {
          run_case<decltype(pol)>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, check_opts{0.0});
        };
        both(pol_hint<block::load_hint::cached>{});
        both(pol_hint<block::load_hint::streaming>{});
        both(pol_hint<block::load_hint::readonly_prefetch>{});
        both(pol_unroll<1>{});
        both(pol_unroll<3>{});
        both(pol_512{});
      }
  }

  // x not 16-byte aligned (a view one element into a buffer): scalar loads, same results.
  TEST_CASE_TEMPLATE("channel_reduce x not 16-byte aligned", T, float, double, __half, __nv_bfloat16) {
    for (layout l : kLayouts)
      for (const auto& p : {problem(l, 3, 64, 16, 16), problem(l, 2, 8, 255, 720)}) {
        const auto hx = random_vector<T>(static_cast<std::size_t>(p.x_elements()), next_seed());
        check_opts o{0.0};
        o.x_offset = 1;
        run_case(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
        run_case(p, hx, op::max{}, epilogue::identity{}, epilogue::identity{}, o);
        o.tol = -1;
        run_case(p, hx, op::sum{}, epilogue::identity{}, epilogue::identity{}, o);
      }
  }

  // Index ops with only indices (y = nullptr), and only y (indices = nullptr).
  TEST_CASE("channel_reduce index-only and value-only outputs") {
    for (layout l : kLayouts) {
      const auto p = problem(l, 3, 130, 17, 31);
      const auto hx = random_vector<float>(static_cast<std::size_t>(p.x_elements()), next_seed());
      check_opts o{0.0};
      o.with_y = false;
      run_case(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
      run_case<pol_pixel>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
      o.with_y = true;
      o.with_indices = false;
      run_case(p, hx, op::argmax{}, epilogue::identity{}, epilogue::identity{}, o);
    }
  }

  // A non-default stream.
  TEST_CASE("channel_reduce on a stream") {
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    for (layout l : kLayouts) {
      const auto p = problem(l, 3, 65, 17, 31);
      const auto hx = random_vector<float>(static_cast<std::size_t>(p.x_elements()), next_seed());
      check_opts o{0.0};
      o.stream = s;
      run_case(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, o);
    }
    REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
  }

  // =======================================================================================================
  // Validation: each status, nothing launched, outputs untouched.
  // =======================================================================================================
  TEST_CASE("channel_reduce validation errors leave outputs untouched") {
    const auto p = problem(layout::nchw, 2, 3, 4, 5);
    const auto hx = random_vector<float>(static_cast<std::size_t>(p.x_elements()), next_seed());
    thrust::device_vector<float> dx = to_device(hx), dy(40);
    thrust::device_vector<std::int64_t> di(40);
    const float sentinel = 12345.0f;
    poison_with(dy, sentinel);
    poison(di);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    float* x = thrust::raw_pointer_cast(dx.data());
    float* y = thrust::raw_pointer_cast(dy.data());
    std::int64_t* idx = thrust::raw_pointer_cast(di.data());
    auto untouched = [&] {
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      for (float v : to_host(dy)) REQUIRE(v == sentinel);
      for (std::int64_t i : to_host(di)) REQUIRE(i == std::numeric_limits<std::int64_t>::min());
    };
    auto with = [&](auto f) {
      auto q = p;
      f(q);
      return q;
    };
    // Shapes and layout (validate(channel_reduce_problem)).
    CHECK(device::channel_reduce(with([](auto& q) { q.C = 0; }), x, y, nullptr, op::min{}) == status::invalid_shape);
    CHECK(device::channel_reduce(with([](auto& q) { q.H = 0; }), x, y, nullptr, op::min{}) == status::invalid_shape);
    CHECK(device::channel_reduce(with([](auto& q) { q.N = -1; }), x, y, nullptr, op::min{}) == status::invalid_shape);
    CHECK(device::channel_reduce(with([](auto& q) { q.x_layout = static_cast<layout>(7); }), x, y, nullptr,
                                 op::min{}) == status::invalid_layout);
    CHECK(device::channel_reduce(with([](auto& q) { q.N = q.C = q.H = q.W = std::int64_t(1) << 20; }), x, y, nullptr,
                                 op::min{}) == status::size_overflow);
    CHECK(device::channel_reduce(with([](auto& q) { q.C = std::int64_t(1) << 31; }), x, y, nullptr, op::min{}) ==
          status::size_overflow);
    // Index output for an op without an index.
    CHECK(device::channel_reduce(p, x, y, idx, op::min{}) == status::indices_not_supported);
    CHECK(device::channel_reduce(p, x, y, idx, op::sum{}) == status::indices_not_supported);
    // Null pointers.
    CHECK(device::channel_reduce(p, static_cast<const float*>(nullptr), y, nullptr, op::min{}) ==
          status::null_pointer);
    CHECK(device::channel_reduce(p, x, static_cast<float*>(nullptr), nullptr, op::min{}) == status::null_pointer);
    CHECK(device::channel_reduce(p, x, static_cast<float*>(nullptr), nullptr, op::argmin{}) == status::null_pointer);
    // Misaligned pointers (not aligned to the element type).
    const auto* xm = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x) + 2);
    auto* ym = reinterpret_cast<float*>(reinterpret_cast<char*>(y) + 2);
    auto* im = reinterpret_cast<std::int64_t*>(reinterpret_cast<char*>(idx) + 4);
    CHECK(device::channel_reduce(p, xm, y, nullptr, op::min{}) == status::misaligned_pointer);
    CHECK(device::channel_reduce(p, static_cast<const float*>(x), ym, nullptr, op::min{}) ==
          status::misaligned_pointer);
    CHECK(device::channel_reduce(p, static_cast<const float*>(x), y, im, op::argmin{}) == status::misaligned_pointer);
    // Overlaps: y inside x, indices over y.
    CHECK(device::channel_reduce(p, static_cast<const float*>(x), x + 10, nullptr, op::min{}) ==
          status::overlapping_buffers);
    CHECK(device::channel_reduce(p, static_cast<const float*>(x), y, reinterpret_cast<std::int64_t*>(y),
                                 op::argmin{}) == status::overlapping_buffers);
    CHECK(device::channel_reduce(p, static_cast<const float*>(x), y, reinterpret_cast<std::int64_t*>(x),
                                 op::argmax{}) == status::overlapping_buffers);
    // Grid too large (2^31 pixels, one block each, forced): refused before anything is touched, so the
    // pointers may be fake, far-apart addresses.
    {
      const auto big = problem(layout::nchw, 1, 1, std::int64_t(1) << 16, std::int64_t(1) << 15);
      const auto* fx = reinterpret_cast<const float*>(std::uintptr_t{1} << 40);
      auto* fy = reinterpret_cast<float*>(std::uintptr_t{1} << 44);
      CHECK(device::channel_reduce<pol_pixel>(big, fx, fy, nullptr, op::min{}) == status::size_overflow);
    }
    untouched();
  }

  TEST_CASE("channel_reduce N = 0 succeeds without a launch") {
    const auto p = problem(layout::nchw, 0, 3, 4, 5);
    CHECK(device::channel_reduce(p, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), nullptr,
                                 op::min{}) == status::success);
    CHECK(device::channel_reduce(problem(layout::nhwc, 0, 3, 4, 5), static_cast<const __half*>(nullptr),
                                 static_cast<__half*>(nullptr), nullptr, op::argmax{}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }

  // =======================================================================================================
  // Small cases for compute-sanitizer: every kernel family, incl. the shared-memory combine (racecheck).
  // =======================================================================================================
  TEST_CASE("channel_reduce sanitizer small") {
    for (layout l : kLayouts)
      for (const auto& p : {problem(l, 2, 33, 16, 16), problem(l, 1, 600, 5, 7), problem(l, 3, 7, 17, 31)}) {
        const auto hx = random_vector<float>(static_cast<std::size_t>(p.x_elements()), next_seed());
        const auto hh = random_vector<__nv_bfloat16>(static_cast<std::size_t>(p.x_elements()), next_seed());
        const check_opts exact{0.0};
        run_case(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case(p, hh, op::max{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case(p, hx, op::mean{});
        run_case<pol_slices<1>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case<pol_slices<32>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case<pol_lanes<4>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case<pol_lanes<32>>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case<pol_pixel>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
        run_case<pol_scalar>(p, hx, op::argmin{}, epilogue::identity{}, epilogue::identity{}, exact);
      }
  }

  // =======================================================================================================
  // x with more than 2^31 elements (8.7 GB fp32): 64-bit offsets. Data from a hash of the flat offset
  // (values k/1024, exact), so the reference at sampled pixels needs no copy of x; sums are exact too.
  // =======================================================================================================
  TEST_CASE("channel_reduce x over 2^31 elements") {
    const std::int64_t N = 2, C = 130, H = 2900, W = 2900;
    const std::int64_t elems = N * C * H * W, ny = N * H * W;
    REQUIRE(elems > (std::int64_t(1) << 31));
    std::size_t free_b = 0, total_b = 0;
    REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess);
    const std::size_t need = static_cast<std::size_t>(elems) * 4 + static_cast<std::size_t>(ny) * 12 + (1u << 28);
    if (free_b < need) {
      MESSAGE("skipped: needs " << need / (1 << 20) << " MiB of device memory, " << free_b / (1 << 20) << " free");
      return;
    }
    thrust::device_vector<float> dx(static_cast<std::size_t>(elems)), dy(static_cast<std::size_t>(ny));
    thrust::device_vector<std::int64_t> di(static_cast<std::size_t>(ny));
    fill_hash<<<132 * 8, 256>>>(thrust::raw_pointer_cast(dx.data()), elems);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::mt19937_64 g(next_seed());
    for (layout l : kLayouts) {
      const auto p = problem(l, N, C, H, W);
      INFO(describe(p));
      for (int which = 0; which < 2; ++which) {
        poison(dy);
        poison(di);
        const bool arg = which == 0;
        const status s =
            arg ? device::channel_reduce(p, static_cast<const float*>(thrust::raw_pointer_cast(dx.data())),
                                         thrust::raw_pointer_cast(dy.data()), thrust::raw_pointer_cast(di.data()),
                                         op::argmin{})
                : device::channel_reduce(p, static_cast<const float*>(thrust::raw_pointer_cast(dx.data())),
                                         thrust::raw_pointer_cast(dy.data()), nullptr, op::sum{});
        REQUIRE(s == status::success);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        const auto gy = to_host(dy);
        const auto gi = to_host(di);
        std::int64_t unwritten = 0;
        for (float v : gy) unwritten += std::isnan(v) ? 1 : 0;
        CHECK(unwritten == 0);
        // Sampled pixels: the last ones (largest offsets), the first, and random ones.
        std::vector<std::int64_t> qs = {0, 1, ny - 1, ny - 2, ny / 2, ny - H * W};
        std::uniform_int_distribution<std::int64_t> d(0, ny - 1);
        for (int i = 0; i < 4000; ++i) qs.push_back(d(g));
        std::int64_t bad = 0;
        for (std::int64_t q : qs) {
          const std::int64_t n = q / (H * W), hw = q % (H * W);
          double best = std::numeric_limits<double>::infinity(), sum = 0;
          std::int64_t bi = 0;
          for (std::int64_t c = 0; c < C; ++c) {
            const double v = hash_value(static_cast<std::uint64_t>(offset_of(p, n, c, hw)));
            sum += v;
            if (v < best) best = v, bi = c;
          }
          if (arg) {
            bad += (gy[q] != best || gi[q] != bi) ? 1 : 0;
          } else {
            bad += gy[q] != sum ? 1 : 0;
          }
        }
        CHECK_MESSAGE(bad == 0, (arg ? "argmin" : "sum") << ": " << bad << " of " << qs.size() << " samples wrong");
      }
    }
  }
}
