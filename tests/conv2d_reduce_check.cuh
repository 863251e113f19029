/// @file conv2d_reduce_check.cuh
/// @brief Shared machinery of the conv2d GPU tests: the fused conv2d_reduce tests (test_conv2d_reduce_gpu.cu,
/// SIMT policies, and test_conv2d_reduce_mma_sync_gpu.cu, tensor-core policies) and the full-output conv2d tests
/// (test_conv2d_gpu.cu, which uses the problem, data, poisoning and comparison helpers but not check_fused):
/// data, poisoning, the float64 comparison.
///
/// GPU tests of the fused conv2d -> epilogue -> channel reduction, device::conv2d_reduce.
///
/// Every case: build a problem, fresh random data (a fixed but different seed per case), copy to the
/// device, poison the outputs (NaN / INT64_MIN), call the device API, require status::success, copy back,
/// require every element written and the inputs unmodified, and compare with the float64 reference
/// (reference::conv2d_reduce): exactly for integer-valued data (ties, NaN, infinities), else within the
/// tolerances of docs/tolerances.md: ‖y−ref‖/‖ref‖ ≤ tol::ieee<T>() and, per pixel, |y−ref| ≤ the accumulation
/// bound acc_tol·(gain·(Σ|x·w|+|b|) + |v|) of the channels involved plus T's final rounding.
/// For argmin/argmax on real data the reference value at the returned index must be within twice that
/// bound of the reference extreme. Test cases named "*sanitizer*" are small, for compute-sanitizer;
/// the "large" case has more than 2^31 input elements.
#pragma once

#include <doctest/doctest.h>

#include <thrust/count.h>
#include <thrust/tabulate.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>
#include <convred/device/conv2d_reduce_split.cuh>
#include <convred/reference/conv2d.hpp>

#include "instances.cuh"
#include "test_util.cuh"

namespace convred_test_fused {

using convred::conv2d_problem;
using convred::layout;
using convred::status;
using convred::test::craw;
using convred::test::describe;
using convred::test::kLayouts;
using convred::test::lname;
using convred::test::op_name;
using convred::test::range_op;
using convred::test::raw;
using convred::test::type_name;
namespace op = convred::op;
namespace epi = convred::epilogue;
namespace test = convred::test;

/// A small tensor-core policy (64 x 32 tiles, 2 x 2 warps, BlockK one mma deep: 8 for tf32/tf32x3, 16 for
/// bf16/fp16), so that small problems cross many pixel tiles, channel tiles and GEMM_K slices.
template <class Math>
using small_tc = convred::mma_sync_policy<Math, 64, 32,
                                          (std::is_same_v<Math, convred::math::tf32> ||
                                           std::is_same_v<Math, convred::math::tf32x3>) ? 8 : 16,
                                          2, 2, 1, 2>;

/// A user epilogue functor taking only the value (no channel index): 0.5 v - 0.25.
struct half_minus_quarter {
  template <class V>
  __host__ __device__ V operator()(V v) const {
    return v * V(0.5) - V(0.25);
  }
};

/// How per-channel errors combine into the error of the reduced value.
enum class agg { extreme, sum, mean, range };
template <class Op>
constexpr agg agg_of() {
  if constexpr (std::is_same_v<Op, op::mean>) return agg::mean;
  else if constexpr (std::is_same_v<Op, op::sum>) return agg::sum;
  else if constexpr (std::is_same_v<Op, range_op>) return agg::range;
  else return agg::extreme;
}

/// Relative accumulation tolerance of one conv output (per Σ|x·w|+|b|): docs/tolerances.md's 1e-5 for fp32
/// compute (float, half, bf16); for double, fp64 accumulation over ≤ 10^4 terms is good to ~1e-12.
template <class T>
constexpr double acc_tol() {
  return std::is_same_v<T, double> ? 1e-12 : test::tol::ieee_fp32;
}

/// The math tag a (possibly default) policy resolves to for element type T.
template <class Policy, class T>
using math_of = typename convred::detail::resolve_policy_t<Policy, T>::math;

/// docs/tolerances.md's bound for a math tag (relative to Σ|x·w|+|b| per output, and in relative norm):
/// tf32 1e-3, tf32x3 1e-5, bf16 / fp16 1e-2; math::ieee keeps acc_tol / tol::ieee<T>.
template <class Math>
constexpr double math_tol() {
  if constexpr (std::is_same_v<Math, convred::math::tf32>) return test::tol::tf32;
  else if constexpr (std::is_same_v<Math, convred::math::tf32x3>) return test::tol::tf32x3;
  else if constexpr (std::is_same_v<Math, convred::math::bf16>) return test::tol::bf16;
  else if constexpr (std::is_same_v<Math, convred::math::fp16>) return test::tol::fp16;
  else return 0;
}
/// Name of a math tag, for failure messages.
template <class Math>
const char* math_name() {
  if constexpr (std::is_same_v<Math, convred::math::tf32>) return "tf32";
  else if constexpr (std::is_same_v<Math, convred::math::tf32x3>) return "tf32x3";
  else if constexpr (std::is_same_v<Math, convred::math::bf16>) return "bf16";
  else if constexpr (std::is_same_v<Math, convred::math::fp16>) return "fp16";
  else return "ieee";
}
/// Per-output accumulation tolerance of a policy on T.
template <class Policy, class T>
constexpr double acc_tol_for() {
  return std::max(acc_tol<T>(), math_tol<math_of<Policy, T>>());
}
/// Relative-norm tolerance of a policy on T (never looser than docs/tolerances.md's bound for its math).
template <class Policy, class T>
constexpr double rel_tol_for() {
  return std::max(test::tol::ieee<T>(), math_tol<math_of<Policy, T>>());
}

/// Policy tag of check_fused for the direct entry point (device::conv2d_reduce_direct: C/groups == 1,
/// exact FMA).
struct direct_entry {
  using math = convred::math::ieee;  ///< exact FMA
};

/// Policy tag of check_fused for the split entry point (device::conv2d_reduce_split with Policy and
/// KSplits GEMM_K splits): `launch` gives it a workspace of exactly conv2d_reduce_split_workspace_bytes,
/// poisoned first (every byte 0xFF: NaN partial sums, so that a partial left unwritten shows in y), and
/// synchronises before freeing it.
template <class Policy, int KSplits>
struct split_entry {
  using math = typename convred::detail::resolve_policy_t<Policy, float>::math;  ///< the policy's math
  static constexpr int k_splits = KSplits;                                       ///< GEMM_K splits
  /// conv2d_reduce_split<Policy>(p, ..., KSplits, op, epi) on the default stream, then synchronised.
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    const std::size_t bytes = convred::device::conv2d_reduce_split_workspace_bytes<T>(p, KSplits);
    thrust::device_vector<unsigned char> ws(bytes ? bytes : 1, static_cast<unsigned char>(0xFF));
    const status s =
        convred::device::conv2d_reduce_split<Policy>(p, x, w, bias, y, indices, raw(ws), bytes, KSplits, op, epi);
    const cudaError_t e = cudaDeviceSynchronize();  // the workspace is freed on return
    return s == status::success && e != cudaSuccess ? status::cuda_error : s;
  }
};
template <class Policy>
struct is_split_entry : std::false_type {};
template <class Policy, int KSplits>
struct is_split_entry<split_entry<Policy, KSplits>> : std::true_type {};

/// Policy tag of check_fused for the wgmma kernel's partial (split-K) mode: device::conv2d_reduce_packed_split
/// with the wgmma_policy Policy and opts::splits GEMM_K splits. `launch` gives it a workspace of exactly
/// packed_split_workspace_bytes plus 256 guard bytes, every byte poisoned first (0xFF: the partial sums
/// read as NaN, so that a partial left unwritten shows in y), packs the filter into its start
/// (pack_filter), and after the call (synchronised) requires the packed filter unchanged (read only) and
/// the guard bytes untouched (no write past the partial sums). Options: a type whose static get() returns
/// the plan_options passed to the planner functions (default: none, the time model's choice).
struct default_plan_options {
  static convred::device::plan_options get() { return {}; }
};
template <class Policy, class Options = default_plan_options>
struct packed_split_entry {
  using math = typename Policy::math;  ///< the policy's math
  /// pack_filter + conv2d_reduce_packed_split<Policy>(p, ..., splits, op, epi) on the default stream, then
  /// synchronised.
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       int splits, Op op, Epi epi) {
    constexpr std::size_t guard = 256;
    const convred::device::plan_options options = Options::get();
    const std::size_t bytes = convred::device::packed_split_workspace_bytes<Policy, T>(p, splits, options);
    const std::size_t packed = convred::device::packed_filter_bytes<Policy, T>(p);
    INFO("splits=" << splits << " workspace " << bytes << " bytes, packed filter " << packed);
    REQUIRE(bytes > 0);
    thrust::device_vector<unsigned char> ws(bytes + guard, static_cast<unsigned char>(0xFF));
    REQUIRE(convred::device::pack_filter<Policy>(p, w, raw(ws), bytes) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const std::vector<unsigned char> before = test::to_host(ws);
    const status s = convred::device::conv2d_reduce_packed_split<Policy>(p, x, w, raw(ws), bytes, bias, y, indices,
                                                                          splits, op, epi, nullptr, options);
    const cudaError_t e = cudaDeviceSynchronize();  // the workspace is freed on return
    if (s == status::success && e == cudaSuccess) {
      const std::vector<unsigned char> after = test::to_host(ws);
      CHECK(std::equal(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(packed), after.begin()));
      CHECK(std::equal(before.end() - static_cast<std::ptrdiff_t>(guard), before.end(), after.end() - static_cast<std::ptrdiff_t>(guard)));
    }
    return s == status::success && e != cudaSuccess ? status::cuda_error : s;
  }
};
template <class Policy>
struct is_packed_split_entry : std::false_type {};
template <class Policy, class Options>
struct is_packed_split_entry<packed_split_entry<Policy, Options>> : std::true_type {};

/// True for a tag that launches itself like split_entry, `launch(p, x, w, bias, y, indices, op, epi)`,
/// and says so with a `self_launching` member (a test file's tag, e.g. one running a plan).
template <class Policy, class = void>
struct self_launching : std::false_type {};
template <class Policy>
struct self_launching<Policy, std::void_t<typename Policy::self_launching>> : std::true_type {};

/// True for policies of the packed-filter entry point (wgmma_policy: has `parts`).
template <class Policy, class = void>
struct uses_packed_filter : std::false_type {};
template <class Policy>
struct uses_packed_filter<Policy, std::void_t<decltype(Policy::parts)>> : std::true_type {};

enum class data_kind { real, integer };

template <class T>
struct host_data {
  std::vector<T> x, w, b;
};

/// Fresh data for a problem: uniform reals in [-1, 1) (never zero), or small integers (exact sums, ties).
template <class T>
host_data<T> make_data(const conv2d_problem& p, std::uint64_t seed, data_kind kind) {
  host_data<T> d;
  const auto nx = static_cast<std::size_t>(p.x_elements()), nw = static_cast<std::size_t>(p.w_elements()),
             nb = static_cast<std::size_t>(p.K);
  if (kind == data_kind::real) {
    d.x = test::random_vector<T>(nx, seed * 3 + 1);
    d.w = test::random_vector<T>(nw, seed * 3 + 2);
    d.b = test::random_vector<T>(nb, seed * 3 + 3);
  } else {
    d.x = test::random_int_vector<T>(nx, seed * 3 + 1, -2, 2);
    d.w = test::random_int_vector<T>(nw, seed * 3 + 2, -1, 1);
    d.b = test::random_int_vector<T>(nb, seed * 3 + 3, -2, 2);
  }
  return d;
}

struct opts {
  bool bias = true;           ///< pass the bias (else nullptr)
  bool exact = false;         ///< integer data: y (or out) must equal the reference rounded to T, indices exactly
  bool nan_expected = false;  ///< the reference has NaN: poison y with a finite sentinel instead of NaN
  double gain = 1;            ///< max over channels of |d epilogue / d v| (1 for identity, |s| for scale)
  int splits = 1;             ///< packed_split_entry: GEMM_K splits
};

/// The finite sentinel an output is poisoned with when NaN results are expected (opts::nan_expected).
template <class T>
T output_sentinel() {
  return convred::from_compute<T>(-4321.25);
}

/// Poisons an output buffer before a call: NaN, or output_sentinel<T>() if NaN results are expected.
template <class T>
void poison_output(thrust::device_vector<T>& d, bool nan_expected) {
  if (nan_expected)
    test::poison_with(d, output_sentinel<T>());
  else
    test::poison(d);
}

/// Number of elements of a copied-back output still holding the poison of poison_output.
template <class T>
std::size_t count_unwritten(const std::vector<T>& v, bool nan_expected) {
  const T sentinel = output_sentinel<T>();
  std::size_t unwritten = 0;
  for (const T& e : v)
    unwritten += nan_expected ? convred::to_double(e) == convred::to_double(sentinel) : test::is_poison(e);
  return unwritten;
}

inline bool same_value(double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return got == want;
}

template <class T>
bool bytes_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
std::vector<double> abs_of(const std::vector<T>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = std::abs(convred::to_double(v[i]));
  return r;
}

/// The whole check of one fused call (see the file comment). `de` is the device epilogue, `he` the same
/// epilogue usable on the host (they differ only for per-channel scales: device vs host array).
template <class Policy = convred::default_policy, class T, class Op, class DevEpi, class HostEpi>
void check_fused(const std::string& name, const conv2d_problem& p, const host_data<T>& d, Op op, DevEpi de,
                 HostEpi he, opts o) {
  INFO("case: " << name);
  INFO("problem: " << describe(p));
  INFO("T=" << std::string(type_name<T>()) << " op=" << std::string(op_name<Op>()) << std::string(o.bias ? " bias" : " no-bias")
            << std::string(std::is_same_v<Policy, convred::default_policy> ? " default-policy" : " custom-policy")
            << " math=" << std::string(math_name<math_of<Policy, T>>()));
  REQUIRE(convred::validate(p, sizeof(T)) == status::success);
  const auto ny = static_cast<std::size_t>(p.y_elements());
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<T> dy(ny);
  thrust::device_vector<std::int64_t> di(Op::has_index ? ny : 0);
  poison_output(dy, o.nan_expected);
  test::poison(di);

  const T* dbias = o.bias ? craw(db) : nullptr;
  status s = status::success;
  if constexpr (std::is_same_v<Policy, direct_entry>) {
    s = convred::device::conv2d_reduce_direct(p, craw(dx), craw(dw), dbias, raw(dy), Op::has_index ? raw(di) : nullptr,
                                              op, de);
  } else if constexpr (is_split_entry<Policy>::value || self_launching<Policy>::value) {
    s = Policy::launch(p, craw(dx), craw(dw), dbias, raw(dy), Op::has_index ? raw(di) : nullptr, op, de);
  } else if constexpr (is_packed_split_entry<Policy>::value) {
    s = Policy::launch(p, craw(dx), craw(dw), dbias, raw(dy), Op::has_index ? raw(di) : nullptr, o.splits, op, de);
  } else if constexpr (uses_packed_filter<Policy>::value) {  // wgmma_policy: pack the filter, then the packed entry point
    const std::size_t bytes = convred::device::packed_filter_bytes<Policy, T>(p);
    thrust::device_vector<unsigned char> packed(bytes);
    void* pk = bytes ? static_cast<void*>(raw(packed)) : nullptr;
    REQUIRE(convred::device::pack_filter<Policy>(p, craw(dw), pk, bytes) == status::success);
    s = convred::device::conv2d_reduce_packed<Policy>(p, craw(dx), craw(dw), pk, bytes, dbias, raw(dy),
                                                      Op::has_index ? raw(di) : nullptr, op, de);
    INFO("status: " << std::string(convred::to_string(s)));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  } else {
    s = convred::device::conv2d_reduce<Policy>(p, craw(dx), craw(dw), dbias, raw(dy), Op::has_index ? raw(di) : nullptr,
                                               op, de);
  }
  INFO("status: " << std::string(convred::to_string(s)));
  REQUIRE(s == status::success);
  const cudaError_t e = cudaDeviceSynchronize();
  INFO("CUDA: " << std::string(cudaGetErrorString(e)));
  REQUIRE(e == cudaSuccess);

  const auto y = test::to_host(dy);
  const auto idx = test::to_host(di);
  CHECK(bytes_equal(test::to_host(dx), d.x));  // inputs are never modified
  CHECK(bytes_equal(test::to_host(dw), d.w));
  CHECK(bytes_equal(test::to_host(db), d.b));
  const std::size_t unwritten = count_unwritten(y, o.nan_expected);
  std::size_t unwritten_idx = 0;
  for (const auto v : idx) unwritten_idx += test::is_poison(v);
  CHECK(unwritten == 0);
  CHECK(unwritten_idx == 0);

  const T* hbias = o.bias ? d.b.data() : nullptr;
  std::vector<double> yref(ny);
  std::vector<std::int64_t> iref(ny, -1);
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), hbias, yref.data(),
                                    Op::has_index ? iref.data() : nullptr, op, he);

  std::size_t bad_y = 0, bad_i = 0;
  std::ostringstream first;
  auto note = [&](std::size_t m, double got, double want, std::int64_t gi, std::int64_t wi, double bound) {
    if (bad_y + bad_i <= 1 && first.tellp() == 0)
      first << "pixel " << m << ": y=" << got << " ref=" << want << " (bound " << bound << ") idx=" << gi
            << " ref idx=" << wi;
  };

  if (o.exact && !std::is_same_v<Op, op::mean>) {
    // Exact maths (integers, powers of two): the only rounding is y's final conversion to T.
    for (std::size_t m = 0; m < ny; ++m) {
      const double got = convred::to_double(y[m]), want = convred::to_double(convred::from_compute<T>(yref[m]));
      const std::int64_t gi = Op::has_index ? idx[m] : -1;
      const bool ok_y = same_value(got, want), ok_i = !Op::has_index || gi == iref[m];
      if (!ok_y || !ok_i) note(m, got, want, gi, iref[m], 0);
      bad_y += !ok_y;
      bad_i += !ok_i;
    }
    INFO("first mismatch: " << first.str());
    CHECK(bad_y == 0);
    CHECK(bad_i == 0);
    return;
  }

  CHECK(test::rel_norm_error(y, yref) <= rel_tol_for<Policy, T>());

  // Per-pixel bound from Σ|x·w|+|b| of each channel (a conv of the absolute values) and the reference
  // per-channel values v_k (needed for argmin / argmax on real data, where near-ties may flip).
  const auto ax = abs_of(d.x), aw = abs_of(d.w), ab = abs_of(d.b);
  std::vector<double> A(static_cast<std::size_t>(p.out_elements())), vals(A.size());
  convred::reference::conv2d(p, ax.data(), aw.data(), o.bias ? ab.data() : static_cast<const double*>(nullptr),
                             A.data());
  convred::reference::conv2d(p, d.x.data(), d.w.data(), hbias, vals.data(), he);
  const double ta = acc_tol_for<Policy, T>(), uT = test::tol::unit_roundoff<T>();
  std::size_t index_differs = 0;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t i = 0; i < p.P(); ++i)
      for (std::int64_t j = 0; j < p.Q(); ++j) {
        const auto m = static_cast<std::size_t>((n * p.P() + i) * p.Q() + j);
        double emax = 0, esum = 0;
        for (std::int64_t k = 0; k < p.K; ++k) {
          const auto off = static_cast<std::size_t>(convred::reference::out_offset(p, n, k, i, j));
          const double err = ta * (o.gain * A[off] + std::abs(vals[off]));
          emax = std::max(emax, err);
          esum += err;
        }
        constexpr agg kind = agg_of<Op>();
        const double delta = kind == agg::extreme ? emax
                             : kind == agg::sum   ? esum
                             : kind == agg::mean  ? esum / double(p.K)
                                                  : 2 * emax;
        const double got = convred::to_double(y[m]), want = yref[m];
        const double bound = delta + uT * (std::abs(want) + delta);
        const bool ok_y = std::isfinite(want) ? std::abs(got - want) <= bound : same_value(got, want);
        bool ok_i = true;
        std::int64_t gi = -1;
        if constexpr (Op::has_index) {
          gi = idx[m];
          if (gi < 0 || gi >= p.K) {
            ok_i = false;
          } else {
            const double vsel = vals[static_cast<std::size_t>(convred::reference::out_offset(p, n, gi, i, j))];
            // The chosen channel's true value is within 2 delta of the true extreme, and y is its value.
            ok_i = std::abs(vsel - want) <= 2 * emax && std::abs(got - vsel) <= emax + uT * (std::abs(vsel) + emax);
            index_differs += gi != iref[m];
          }
        }
        if (!ok_y || !ok_i) note(m, got, want, gi, iref[m], bound);
        bad_y += !ok_y;
        bad_i += !ok_i;
      }
  INFO("first mismatch: " << first.str());
  CHECK(bad_y == 0);
  CHECK(bad_i == 0);
  if (index_differs > 0)
    MESSAGE(name << ": " << index_differs << " of " << ny
                 << " indices differ from the float64 reference on near-ties (values within bound)");
}

/// Shorthand: real random data, scale epilogue s (the seed case's form), default policy unless given.
template <class Policy = convred::default_policy, class T = float, class Op>
void check_scaled(const std::string& name, const conv2d_problem& p, std::uint64_t seed, Op op, float s = 2.0f,
                  bool bias = true) {
  const auto d = make_data<T>(p, seed, data_kind::real);
  opts o;
  o.bias = bias;
  o.gain = std::abs(s);
  check_fused<Policy>(name, p, d, op, epi::scale<float>{s}, epi::scale<float>{s}, o);
}

inline conv2d_problem make_problem(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                            std::int64_t R, std::int64_t S, std::int64_t pad_h = 0, std::int64_t pad_w = 0,
                            std::int64_t stride_h = 1, std::int64_t stride_w = 1, std::int64_t dil_h = 1,
                            std::int64_t dil_w = 1, std::int64_t groups = 1, layout lay = layout::nchw) {
  conv2d_problem p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = R, p.S = S;
  p.pad_h = pad_h, p.pad_w = pad_w, p.stride_h = stride_h, p.stride_w = stride_w, p.dil_h = dil_h, p.dil_w = dil_w;
  p.groups = groups, p.x_layout = lay;
  return p;
}

/// The base case each sweep varies one dimension of: N=2, C=7, 11x13, K=33, 3x3, padding 1.
inline conv2d_problem base(layout lay = layout::nchw) { return make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay); }

/// A named problem, for tables of geometry cases.
struct geom {
  const char* name;
  conv2d_problem p;
};

/// Calls f(p, name) for each case of a geometry table in each layout: p is the case's problem in that
/// layout, name "<case name> <layout>" (cases in table order, NCHW before NHWC).
template <std::size_t N, class F>
void for_each_case_layout(const geom (&cases)[N], F&& f) {
  for (const auto& g : cases)
    for (layout lay : kLayouts) {
      conv2d_problem p = g.p;
      p.x_layout = lay;
      f(p, std::string(g.name) + " " + lname(lay));
    }
}

/// Uniform integers in [lo, hi] from a std::mt19937_64, for the random-combination tests.
struct picker {
  std::mt19937_64 gen;
  std::int64_t operator()(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  }
};

/// A random valid problem for the random-combination tests: N 1..3, groups 1..3 (a third of the time),
/// C and K from {1, 3, 7, 33, 65, 130} times groups (at most 200), H, W 1..19, R, S 1..5, padding 0..2,
/// stride 1..3, dilation 1..2, either layout; valid for element size elem_bytes, with P, Q >= 1 by PyTorch's
/// floor formula, and small enough for a fast reference. pick(lo, hi) draws uniformly from [lo, hi].
template <class Pick>
conv2d_problem random_problem(Pick& pick, std::size_t elem_bytes) {
  const std::int64_t CK[] = {1, 3, 7, 33, 65, 130};
  conv2d_problem p;
  for (;;) {
    p.N = pick(1, 3);
    p.groups = pick(0, 2) == 0 ? pick(1, 3) : 1;
    p.C = CK[pick(0, 5)] * p.groups;
    p.K = CK[pick(0, 5)] * p.groups;
    if (p.C > 200 || p.K > 200) continue;
    p.H = pick(1, 19), p.W = pick(1, 19);
    p.R = pick(1, 5), p.S = pick(1, 5);
    p.pad_h = pick(0, 2), p.pad_w = pick(0, 2);
    p.stride_h = pick(1, 3), p.stride_w = pick(1, 3);
    p.dil_h = pick(1, 2), p.dil_w = pick(1, 2);
    p.x_layout = pick(0, 1) ? layout::nhwc : layout::nchw;
    // Valid, and computed as PyTorch would (P, Q >= 1 by PyTorch's floor formula).
    const std::int64_t nh = p.H + 2 * p.pad_h - p.dil_h * (p.R - 1) - 1;
    const std::int64_t nw = p.W + 2 * p.pad_w - p.dil_w * (p.S - 1) - 1;
    if (nh < 0 || nw < 0 || convred::validate(p, static_cast<std::int64_t>(elem_bytes)) != status::success) continue;
    if (p.out_elements() * p.gemm_k() > 20'000'000) continue;  // keep the reference fast
    break;
  }
  return p;
}

/// A pointer `bytes` bytes past p (for misaligned-pointer checks), with const removed.
template <class E>
std::remove_cv_t<E>* misaligned(E* p, int bytes) {
  return reinterpret_cast<std::remove_cv_t<E>*>(reinterpret_cast<std::uintptr_t>(p) + bytes);
}

/// x[i] uniform in (-1, 1), never 0, from a 64-bit hash of (seed, i): generated on the device.
struct hash_uniform {
  std::uint64_t seed;
  __host__ __device__ float operator()(std::int64_t i) const {
    const std::uint64_t z = test::mix64(static_cast<std::uint64_t>(i) + seed * 0x9E3779B97F4A7C15ull);
    return (2.0f * static_cast<float>(z >> 40) + 1.0f) / 16777216.0f - 1.0f;  // (2k+1)/2^24 - 1, never 0
  }
};
struct is_nan_f {
  __host__ __device__ bool operator()(float v) const { return v != v; }
};

inline void require_gpu() { REQUIRE_MESSAGE(test::has_gpu(), "no CUDA device"); }

/// Calls f(op) for every op: the six built-in ones and the user-written range_op.
template <class F>
void for_each_op(F&& f) {
  test::for_each_builtin_op(f);
  f(range_op{});
}

/// Runs check_fused with the op chosen at run time (0..6), scale 2.
template <class T>
void check_op_index(int which, const std::string& name, const conv2d_problem& p, std::uint64_t seed) {
  switch (which) {
    case 0: check_scaled<convred::default_policy, T>(name, p, seed, op::min{}); break;
    case 1: check_scaled<convred::default_policy, T>(name, p, seed, op::max{}); break;
    case 2: check_scaled<convred::default_policy, T>(name, p, seed, op::sum{}); break;
    case 3: check_scaled<convred::default_policy, T>(name, p, seed, op::mean{}); break;
    case 4: check_scaled<convred::default_policy, T>(name, p, seed, op::argmin{}); break;
    case 5: check_scaled<convred::default_policy, T>(name, p, seed, op::argmax{}); break;
    default: check_scaled<convred::default_policy, T>(name, p, seed, range_op{}); break;
  }
}

/// Every epilogue kind on one problem, for ops min, argmin and sum, both layouts, with and without bias.
/// (A namespace-scope function: it hosts an extended __host__ __device__ lambda.)
template <class T>
void check_epilogues(std::uint64_t& seed) {
  auto lam = [] __host__ __device__(float v, int k) { return (k % 2 ? 3.0f : -0.5f) * v; };
  for (layout lay : kLayouts)
    for (bool bias : {true, false}) {
      const conv2d_problem p = make_problem(2, 7, 11, 13, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
      const std::string tail = std::string(" ") + type_name<T>() + " " + lname(lay) + (bias ? " bias" : " no-bias");
      // Per-channel scales in [-2, 2], never zero; the device and host epilogues read the same values.
      const auto hs = test::random_vector<float>(static_cast<std::size_t>(p.K), ++seed, -2, 2);
      const auto ds = test::to_device(hs);
      double smax = 0;
      for (float v : hs) smax = std::max(smax, double(std::abs(v)));
      const epi::per_channel_scale<float> dev_pcs{craw(ds)}, host_pcs{hs.data()};
      auto each_op = [&](auto o) {
        const std::string on = op_name<decltype(o)>();
        const auto d = make_data<T>(p, ++seed, data_kind::real);
        opts opt;
        opt.bias = bias;
        opt.gain = 1;
        check_fused("identity " + on + tail, p, d, o, epi::identity{}, epi::identity{}, opt);
        opt.gain = 2;
        check_fused("scale 2 " + on + tail, p, d, o, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
        opt.gain = 1.5;
        check_fused("scale -1.5 " + on + tail, p, d, o, epi::scale<double>{-1.5}, epi::scale<double>{-1.5}, opt);
        opt.gain = smax;
        check_fused("per-channel scale " + on + tail, p, d, o, dev_pcs, host_pcs, opt);
        opt.gain = 1.5 * smax;
        check_fused("compose(per-channel, scale -1.5) " + on + tail, p, d, o,
                    epi::make_compose(dev_pcs, epi::scale<float>{-1.5f}),
                    epi::make_compose(host_pcs, epi::scale<float>{-1.5f}), opt);
        opt.gain = 0.5;
        check_fused("user functor 0.5v-0.25 " + on + tail, p, d, o, half_minus_quarter{}, half_minus_quarter{}, opt);
        opt.gain = 3;
        check_fused("extended lambda " + on + tail, p, d, o, lam, lam, opt);
      };
      each_op(op::min{});
      each_op(op::argmin{});
      each_op(op::sum{});
    }
}

}  // namespace convred_test_fused

namespace convred_test_fused {

/// Non-finite operands under a tensor-core policy (every math, the mma.sync and the packed wgmma paths):
/// +inf, -inf and NaN in x, in w and in the bias, with integer-valued data elsewhere, so that every result
/// is exact: values (inf * w = +-inf, inf * 0 = NaN, inf - inf = NaN, NaN propagates) and argmin / argmax
/// indices (the first NaN channel) must equal the float64 reference. Ops min, argmin, argmax and mean with
/// a scale epilogue of either sign, and sum. Also the 1x1 reproducer of the 3xTF32 split fault: C = 1,
/// K = 3, x = +inf everywhere, w = [1, 2, 3] (then negated; then w = 0: NaN). `lays` are the layouts to try.
template <class Policy>
void check_nonfinite(const std::string& label, std::uint64_t seed, std::initializer_list<layout> lays) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  opts o;
  o.exact = true;
  o.nan_expected = true;
  auto all_ops = [&](const std::string& name, const conv2d_problem& p, const host_data<float>& d) {
    INFO("case: " << name << " " << describe(p));
    check_fused<Policy>(name + " min", p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    // scale 0 (inf * 0 is NaN) and a subnormal scale (products underflow to ties of signed zeros)
    check_fused<Policy>(name + " min scale 0", p, d, op::min{}, epi::scale<float>{0.0f}, epi::scale<float>{0.0f}, o);
    check_fused<Policy>(name + " min scale 1e-44", p, d, op::min{}, epi::scale<float>{1e-44f}, epi::scale<float>{1e-44f}, o);
    check_fused<Policy>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    check_fused<Policy>(name + " argmax", p, d, op::argmax{}, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
    check_fused<Policy>(name + " mean", p, d, op::mean{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    check_fused<Policy>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
  };
  for (layout lay : lays) {
    // the reproducer: every x = +inf, 1x1, C = 1
    {
      const conv2d_problem p = make_problem(1, 1, 4, 8, 3, 1, 1, 0, 0, 1, 1, 1, 1, 1, lay);
      host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
      std::fill(d.x.begin(), d.x.end(), static_cast<float>(inf));
      std::fill(d.b.begin(), d.b.end(), 0.f);
      d.w = {1.f, 2.f, 3.f};
      all_ops(label + " x=+inf w=[1,2,3]", p, d);
      d.w = {-1.f, -2.f, -3.f};
      all_ops(label + " x=+inf w=-[1,2,3]", p, d);
      d.w = {1.f, 0.f, -3.f};
      all_ops(label + " x=+inf w=[1,0,-3]", p, d);
    }
    // channels [+inf, NaN, -inf, +inf, finite...] at every pixel through the bias: argmin / argmax = 1
    {
      const conv2d_problem p = make_problem(2, 3, 5, 8, 6, 1, 1, 0, 0, 1, 1, 1, 1, 1, lay);
      host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
      d.b[0] = static_cast<float>(inf), d.b[1] = static_cast<float>(nan), d.b[2] = static_cast<float>(-inf);
      d.b[3] = static_cast<float>(inf);
      all_ops(label + " bias [inf,NaN,-inf,inf]", p, d);
    }
    // 3x3 with padding: infinities and NaN scattered in x, then in w too (some w are 0: NaN)
    {
      const conv2d_problem p = make_problem(2, 5, 9, 12, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
      host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 4, 4))] = static_cast<float>(inf);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 2, 4, 6))] = static_cast<float>(-inf);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 4, 8, 11))] = static_cast<float>(-inf);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 0, 2, 9))] = static_cast<float>(nan);
      all_ops(label + " inf/NaN in x", p, d);
      d.w[static_cast<std::size_t>(7 * p.gemm_k() + 4)] = static_cast<float>(inf);    // channel 7
      d.w[static_cast<std::size_t>(20 * p.gemm_k() + 13)] = static_cast<float>(-inf);  // channel 20
      d.w[static_cast<std::size_t>(30 * p.gemm_k() + 40)] = static_cast<float>(nan);   // channel 30
      all_ops(label + " inf/NaN in x and w", p, d);
      d.b[2] = static_cast<float>(-inf), d.b[25] = static_cast<float>(nan);
      all_ops(label + " inf/NaN in x, w and bias", p, d);
    }
  }
}

}  // namespace convred_test_fused
