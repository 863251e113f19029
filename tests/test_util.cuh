/// @file tests/test_util.cuh
/// @brief Shared helpers for the convred doctest suites (namespace convred::test).
///
/// - `has_gpu()`: is a CUDA device usable (GPU suites skip themselves when not).
/// - Host data: `random_vector<T>` (uniform reals, never all zeros) and `random_int_vector<T>`
///   (integer-valued, for exact ties), both deterministic for a seed (std::mt19937_64).
/// - Device buffers are `thrust::device_vector<T>`: `to_device`, `to_host`, and `poison` (NaN for
///   floating types incl. __half / __nv_bfloat16, INT64_MIN for int64 indices) so a test can tell
///   that every output element was written.
/// - `raw` / `craw`: the raw pointer of a device vector; `kLayouts` (NCHW, NHWC) and `lname(layout)`.
/// - `describe(problem)` (conv2d or channel_reduce), `type_name<T>()` and `op_name<Op>()` for INFO / CAPTURE
///   messages that name a failing case.
/// - `range_op`, the user-written reduction op the suites plug in next to the built-in ones, and
///   `for_each_builtin_op(f)` (f called with each of the six built-in ops, in a fixed order);
///   `for_each_type(f)` (f called with a value of each element type).
/// - `mix64`: the splitmix64 finalizer, for hash-generated data (host and device).
/// - Comparisons against float64 references: `rel_norm_error` (NaN-aware ‖got−ref‖₂/‖ref‖₂),
///   `count_nan`, `is_poison`, and the tolerances of docs/tolerances.md as constexpr (`tol::...`).
///
/// Header-only and `inline` throughout: included by several test translation units. It does not
/// define a doctest main (tests/main.cu does).
#pragma once

#include <cuda_runtime.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/functional.cuh>
#include <convred/numeric.cuh>
#include <convred/problem.cuh>

namespace convred::test {

/// @brief True if at least one CUDA device is present and usable (clears any CUDA error it causes).
inline bool has_gpu() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

/// @brief n values uniform in [lo, hi) drawn with std::mt19937_64(seed), converted to T with
/// convred::from_compute (round to nearest for __half / __nv_bfloat16). Exact zeros are replaced by
/// `hi / 2` so that "random" data never contains a run of zeros by accident.
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) {
    double d = dist(gen);
    if (d == 0.0) d = hi / 2;
    e = from_compute<T>(d);
  }
  return v;
}

/// @brief n integer values uniform in [lo, hi] (inclusive), converted to T: exact in every supported
/// type for small ranges (|v| <= 256 is exact even in bfloat16), so conv sums are exact and ties are real.
template <class T>
std::vector<T> random_int_vector(std::size_t n, std::uint64_t seed, long lo, long hi) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<long> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = from_compute<T>(static_cast<double>(dist(gen)));
  return v;
}

/// @brief Copies a host vector to a new device vector.
template <class T>
thrust::device_vector<T> to_device(const std::vector<T>& h) {
  return thrust::device_vector<T>(h.begin(), h.end());
}

/// @brief Copies a device vector back to a new host vector.
template <class T>
std::vector<T> to_host(const thrust::device_vector<T>& d) {
  std::vector<T> h(d.size());
  thrust::copy(d.begin(), d.end(), h.begin());
  return h;
}

/// @brief Raw pointer to the elements of a device vector.
template <class T>
T* raw(thrust::device_vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}
/// @brief Raw const pointer to the elements of a device vector.
template <class T>
const T* craw(const thrust::device_vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

/// @brief The poison value of T: quiet NaN for floating types (incl. __half, __nv_bfloat16),
/// INT64_MIN for int64 (index outputs, which are otherwise in [0, K)).
template <class T>
T poison_value() {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return std::numeric_limits<std::int64_t>::min();
  } else {
    return from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  }
}

/// @brief Fills a device buffer with the poison value of T (see poison_value), synchronously.
template <class T>
void poison(thrust::device_vector<T>& d) {
  thrust::fill(d.begin(), d.end(), poison_value<T>());
}

/// @brief Fills a device buffer with a given sentinel (for tests whose expected results contain NaN,
/// where a NaN poison could not tell "unwritten" from "correctly NaN").
template <class T>
void poison_with(thrust::device_vector<T>& d, T value) {
  thrust::fill(d.begin(), d.end(), value);
}

/// @brief True if `v` is T's poison value (NaN for floating T, INT64_MIN for int64).
template <class T>
bool is_poison(T v) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    return v == std::numeric_limits<std::int64_t>::min();
  } else {
    return std::isnan(to_double(v));
  }
}

/// @brief Number of NaN elements of a host vector (any supported element type, or double).
template <class T>
std::size_t count_nan(const std::vector<T>& v) {
  std::size_t n = 0;
  for (const auto& e : v) n += std::isnan(to_double(e)) ? 1 : 0;
  return n;
}

/// @brief ‖got − ref‖₂ / ‖ref‖₂ in float64, NaN- and inf-aware.
///
/// An element where both are NaN, or both are the same infinity, matches exactly (contributes 0).
/// A NaN or infinity on one side only (or infinities of different sign), or a size mismatch, gives
/// +infinity. If ‖ref‖₂ is 0 the absolute norm ‖got − ref‖₂ is returned.
template <class T>
double rel_norm_error(const std::vector<T>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    const bool gn = std::isnan(g), rn = std::isnan(r);
    if (gn || rn) {
      if (gn && rn) continue;
      return std::numeric_limits<double>::infinity();
    }
    if (std::isinf(g) || std::isinf(r)) {
      if (g == r) continue;
      return std::numeric_limits<double>::infinity();
    }
    num += (g - r) * (g - r);
    den += r * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// @brief Short name of an element type ("float", "double", "half", "bf16").
template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, __half>) return "half";
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bf16";
  else return "other";
}

/// @brief One-line description of a conv2d problem, e.g.
/// "N=2 C=7 H=11 W=13 K=33 R=3 S=3 pad=1,1 stride=1,1 dil=1,1 groups=1 nchw (P=11 Q=13)".
inline std::string describe(const conv2d_problem& p) {
  std::ostringstream o;
  o << "N=" << p.N << " C=" << p.C << " H=" << p.H << " W=" << p.W << " K=" << p.K << " R=" << p.R
    << " S=" << p.S << " pad=" << p.pad_h << ',' << p.pad_w << " stride=" << p.stride_h << ',' << p.stride_w
    << " dil=" << p.dil_h << ',' << p.dil_w << " groups=" << p.groups
    << (p.x_layout == layout::nchw ? " nchw" : p.x_layout == layout::nhwc ? " nhwc" : " bad-layout") << " (P="
    << p.P() << " Q=" << p.Q() << ")";
  return o.str();
}

/// @brief One-line description of a channel_reduce problem, e.g. "NCHW N=3 C=33 H=17 W=31".
inline std::string describe(const channel_reduce_problem& p) {
  char b[160];
  std::snprintf(b, sizeof b, "%s N=%lld C=%lld H=%lld W=%lld", p.x_layout == layout::nchw ? "NCHW" : "NHWC",
                static_cast<long long>(p.N), static_cast<long long>(p.C), static_cast<long long>(p.H),
                static_cast<long long>(p.W));
  return b;
}

/// Both layouts of x, in the order the sweeps run them.
constexpr layout kLayouts[] = {layout::nchw, layout::nhwc};
/// Short lower-case name of a layout ("nchw", "nhwc"), for case names.
inline const char* lname(layout l) { return l == layout::nchw ? "nchw" : "nhwc"; }

/// The splitmix64 finalizer: a well-mixed 64-bit hash of z (for data generated from a flat offset).
__host__ __device__ inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A user-written reduction op: the range (max - min) across channels, with a two-value running state and
/// NaN propagation. Written against the op concept of functional.cuh only (it inherits from nothing).
struct range_op {
  template <class V>
  struct state {
    V lo, hi;
  };
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = state<V>;
  template <class V>
  __host__ __device__ static state<V> identity() {
    return {upper_identity<V>(), lower_identity<V>()};
  }
  template <class V>
  __host__ __device__ static state<V> make(V v, int) {
    return {v, v};
  }
  template <class V>
  __host__ __device__ state<V> operator()(state<V> a, state<V> b) const {
    return {op::min{}(a.lo, b.lo), op::max{}(a.hi, b.hi)};
  }
  template <class V>
  __host__ __device__ static V value(state<V> a, std::int64_t) {
    return a.hi - a.lo;
  }
};

/// @brief Name of a reduction op: the built-in ones, range_op, else "user op".
template <class Op>
const char* op_name() {
  if constexpr (std::is_same_v<Op, op::min>) return "min";
  else if constexpr (std::is_same_v<Op, op::max>) return "max";
  else if constexpr (std::is_same_v<Op, op::mean>) return "mean";
  else if constexpr (std::is_same_v<Op, op::sum>) return "sum";
  else if constexpr (std::is_same_v<Op, op::argmin>) return "argmin";
  else if constexpr (std::is_same_v<Op, op::argmax>) return "argmax";
  else if constexpr (std::is_same_v<Op, range_op>) return "range (user op)";
  else return "user op";
}

/// Calls f(op) for each built-in op: min, max, sum, mean, argmin, argmax (in this order).
template <class F>
void for_each_builtin_op(F&& f) {
  f(op::min{});
  f(op::max{});
  f(op::sum{});
  f(op::mean{});
  f(op::argmin{});
  f(op::argmax{});
}

/// Calls f(T{}) for each supported element type: float, double, __half, __nv_bfloat16 (in this order).
template <class F>
void for_each_type(F&& f) {
  f(float{});
  f(double{});
  f(__half{});
  f(__nv_bfloat16{});
}

/// @brief Tolerances of docs/tolerances.md: relative-norm error vs float64 by math precision.
namespace tol {
inline constexpr double ieee_fp32 = 1e-5;    ///< math::ieee on float (FFMA)
inline constexpr double ieee_double = 1e-12;  ///< math::ieee on double (DFMA), as docs/tolerances.md says (fp64 throughout)
inline constexpr double tf32x3 = 1e-5;       ///< 3xTF32 split on tensor cores
inline constexpr double accurate = 1e-6;     ///< math::accurate (the planner's default), relative norm vs float64
inline constexpr double tf32 = 1e-3;         ///< TF32 tensor cores (cuDNN's default conv math)
inline constexpr double bf16 = 1e-2;         ///< bf16 inputs / outputs, fp32 accumulation
inline constexpr double fp16 = 1e-2;         ///< fp16 inputs / outputs, fp32 accumulation

/// Unit roundoff of T's final rounding: 2^-24 float, 2^-53 double, 2^-11 __half, 2^-8 __nv_bfloat16.
template <class T>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<T, __half>) {
    return 1.0 / 2048;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return 1.0 / 256;
  } else {
    return std::numeric_limits<T>::epsilon() / 2;
  }
}

/// @brief Relative-norm tolerance for math::ieee with element type T. float and double: 1e-5. For
/// __half / __nv_bfloat16 the inputs are exact in fp32 and accumulation is fp32, so only the final
/// rounding of y to T matters: 2 unit roundoffs of T plus the fp32 bound (half ~2e-3, bf16 ~8e-3),
/// stricter than docs/tolerances.md's 1e-2 and never looser.
template <class T>
constexpr double ieee() {
  if constexpr (std::is_same_v<T, float>) {
    return ieee_fp32;
  } else if constexpr (std::is_same_v<T, double>) {
    return ieee_double;
  } else {
    return 2 * unit_roundoff<T>() + ieee_fp32;
  }
}
static_assert(ieee<__half>() <= fp16 && ieee<__nv_bfloat16>() <= bf16, "never looser than docs/tolerances.md");
}  // namespace tol

}  // namespace convred::test
