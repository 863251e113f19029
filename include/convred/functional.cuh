/// @file functional.cuh
/// @brief Reduction ops across channels and epilogue functors: stateless `__host__ __device__` types.
///
/// A **reduction op** `Op` is a plain type with, for a compute value type `V` (float or double):
/// - `template <class V> using accum_t = ...;` the running state (V itself, or `arg_value<V>`);
/// - `static constexpr bool has_index;` whether the op yields an index (argmin / argmax);
/// - `template <class V> static accum_t<V> identity();` an exact identity: combining it with any state
///   gives that state back, so it never leaks into a result (min starts at +inf, not FLT_MAX);
/// - `template <class V> static accum_t<V> make(V value, int channel);` the state of one element;
/// - `template <class A> A operator()(A a, A b) const;` associative and commutative combine;
/// - `template <class V> static V value(accum_t<V> a, std::int64_t count);` the reduced value
///   (mean divides by `count`, the number of channels reduced);
/// - if `has_index`: `template <class V> static std::int64_t index(accum_t<V> a);`.
/// Any user type meeting this plugs into every kernel (see tests and the README for an example).
///
/// An **epilogue** is any callable `V e(V value, int channel)` or `V e(V value)` applied to each
/// conv output (after the bias, before the reduction), on the device: a functor with a `__host__ __device__`
/// (or `__device__`) `operator()`, or an extended `__device__` / `__host__ __device__` lambda (nvcc
/// `--extended-lambda`). It is copied to the kernel by value. See `apply_epilogue`.
///
/// Every entry point checks both at compile time (detail/concepts.cuh): a type that lacks a member or
/// has the wrong signature stops the build with one static_assert listing what is needed, before the
/// kernels' own errors; a host-only epilogue is a compile error (nvcc alone would only warn, #20011-D).
///
/// Semantics follow PyTorch (`torch.min(x, dim)`, `torch.amin`, `torch.argmin`, `torch.sum`, `torch.mean`):
/// - min/max propagate NaN: any NaN among the inputs gives NaN (unlike fminf/fmaxf);
/// - argmin/argmax return the lowest index among equal values, and the first NaN's index if any NaN;
/// - -0.0 and +0.0 compare equal;
/// - sum/mean accumulate in the compute type (fp32 for half/bf16/float inputs, fp64 for double).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "numeric.cuh"
#if defined(__CUDACC__)
#include "detail/concepts.cuh"  // the entry points' checks of Op and Epilogue (CUDA only: it holds a kernel)
#endif

namespace convred {

/// @brief Running state of argmin/argmax: a value and the channel index it came from.
template <class V>
struct arg_value {
  V value;        ///< the extreme value seen so far (compute type)
  std::int32_t index;  ///< its channel index in [0, K); INT32_MAX for the identity
};

/// @brief Reduction ops across channels (namespace `convred::op`).
namespace op {

namespace detail {
/// NaN-propagating minimum (Max = false) or maximum (Max = true) of a and b, shared by op::min and
/// op::max: a NaN if either is NaN (a when a is NaN, else b), a on ties; as selects, not branches.
/// float on sm_80+: one `min.NaN.f32` / `max.NaN.f32` instruction (PTX ISA): canonical NaN, and a tie of
/// -0.0 and +0.0 gives -0.0 (min) or +0.0 (max).
template <bool Max, class V>
__host__ __device__ V nan_extreme(V a, V b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<V, float>) {
    float r;
    if constexpr (Max)
      asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    else
      asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
#endif
  V r = (Max ? a < b : b < a) ? b : a;
  r = is_nan(b) ? b : r;
  return is_nan(a) ? a : r;
}
}  // namespace detail

/// @brief Minimum, NaN-propagating (as torch.min / torch.amin). Identity +inf (exact).
struct min {
  static constexpr bool has_index = false;  ///< yields the value only, no index
  /// The running state is the compute value itself.
  template <class V>
  using accum_t = V;
  /// The exact identity: +inf (never leaks: min over all +inf is +inf).
  template <class V>
  __host__ __device__ static V identity() { return upper_identity<V>(); }
  /// The state of one element: its value (the channel index is not used).
  template <class V>
  __host__ __device__ static V make(V v, int) { return v; }
  /// The smaller of a and b; a NaN if either is NaN; a on ties of equal values. On the host and for
  /// double the NaN is a (when a is NaN) else b, and a tie of -0.0 and +0.0 gives a. float on sm_80+ is one
  /// `min.NaN.f32` instruction (PTX ISA): its NaN is the canonical one (payload and sign not kept) and a
  /// tie of -0.0 and +0.0 gives -0.0 (the two compare equal either way).
  template <class V>
  __host__ __device__ V operator()(V a, V b) const { return detail::nan_extreme<false>(a, b); }
  /// The reduced value: the state itself (count is not used).
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};

/// @brief Maximum, NaN-propagating (as torch.max / torch.amax). Identity -inf (exact).
struct max {
  static constexpr bool has_index = false;  ///< yields the value only, no index
  /// The running state is the compute value itself.
  template <class V>
  using accum_t = V;
  /// The exact identity: -inf (never leaks: max over all -inf is -inf).
  template <class V>
  __host__ __device__ static V identity() { return lower_identity<V>(); }
  /// The state of one element: its value (the channel index is not used).
  template <class V>
  __host__ __device__ static V make(V v, int) { return v; }
  /// The larger of a and b; a NaN if either is NaN; a on ties of equal values. On the host and for
  /// double the NaN is a (when a is NaN) else b, and a tie of -0.0 and +0.0 gives a. float on sm_80+ is one
  /// `max.NaN.f32` instruction: canonical NaN, +0.0 for a tie of -0.0 and +0.0.
  template <class V>
  __host__ __device__ V operator()(V a, V b) const { return detail::nan_extreme<true>(a, b); }
  /// The reduced value: the state itself (count is not used).
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};

/// @brief Sum in the compute type (fp32 for 16-bit and float inputs, fp64 for double). Identity 0.
struct sum {
  static constexpr bool has_index = false;  ///< yields the value only, no index
  /// The running state is the compute value itself (the partial sum).
  template <class V>
  using accum_t = V;
  /// The identity: 0 (x + 0 == x; only a sum of -0.0 values comes out as +0.0).
  template <class V>
  __host__ __device__ static V identity() { return V(0); }
  /// The state of one element: its value (the channel index is not used).
  template <class V>
  __host__ __device__ static V make(V v, int) { return v; }
  /// a + b in the compute type.
  template <class V>
  __host__ __device__ V operator()(V a, V b) const { return a + b; }
  /// The reduced value: the sum itself (count is not used).
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};

/// @brief Arithmetic mean: the sum (as `sum`) divided by the number of channels reduced.
struct mean : sum {
  /// The mean: the sum a divided by `count`, the number of channels reduced.
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t count) { return a / static_cast<V>(count); }
};

namespace detail {
/// Orders (NaN first, then by value, ties by lower index) for argmin when Less is `a < b`; argmax
/// uses `b < a`. The order is total, so combining is associative and commutative.
template <bool Greater, class V>
__host__ __device__ inline arg_value<V> arg_combine(arg_value<V> a, arg_value<V> b) {
  const bool an = is_nan(a.value), bn = is_nan(b.value);
  const bool b_better = Greater ? (a.value < b.value) : (b.value < a.value);
  const bool a_better = Greater ? (b.value < a.value) : (a.value < b.value);
  const bool b_lower = b.index < a.index;
  // both NaN or equal values (incl. -0 == +0): the lower index; one NaN: that one; else the better value.
  // Computed as predicates and one select (no branches: this runs per accumulator in the epilogues)
  const bool take_b = (an == bn) ? (an ? b_lower : (b_better || (!a_better && b_lower))) : bn;
  return take_b ? b : a;
}
}  // namespace detail

/// @brief argmin with the min value (as `torch.min(x, dim)` returning values and indices):
/// lowest index among ties, first NaN's index when any NaN. Identity (+inf, INT32_MAX), which
/// loses every tie on index, so an all-+inf input gives index 0.
struct argmin {
  static constexpr bool has_index = true;  ///< yields the channel index of the minimum too
  /// The running state: the minimum so far and its channel index.
  template <class V>
  using accum_t = arg_value<V>;
  /// The exact identity: (+inf, INT32_MAX) (never leaks: it loses every tie on index).
  template <class V>
  __host__ __device__ static arg_value<V> identity() { return {upper_identity<V>(), INT32_MAX}; }
  /// The state of one element: its value v and its channel index k.
  template <class V>
  __host__ __device__ static arg_value<V> make(V v, int k) { return {v, k}; }
  /// The better of a and b: a NaN first (lowest index among NaNs), else the smaller value, ties to the lower index.
  template <class V>
  __host__ __device__ arg_value<V> operator()(arg_value<V> a, arg_value<V> b) const {
    return detail::arg_combine<false>(a, b);
  }
  /// The reduced value: the minimum (count is not used).
  template <class V>
  __host__ __device__ static V value(arg_value<V> a, std::int64_t) { return a.value; }
  /// The channel index of the minimum, in [0, K).
  template <class V>
  __host__ __device__ static std::int64_t index(arg_value<V> a) { return a.index; }
};

/// @brief argmax with the max value (as `torch.max(x, dim)`): lowest index among ties, first NaN's
/// index when any NaN. Identity (-inf, INT32_MAX).
struct argmax {
  static constexpr bool has_index = true;  ///< yields the channel index of the maximum too
  /// The running state: the maximum so far and its channel index.
  template <class V>
  using accum_t = arg_value<V>;
  /// The exact identity: (-inf, INT32_MAX) (never leaks: it loses every tie on index).
  template <class V>
  __host__ __device__ static arg_value<V> identity() { return {lower_identity<V>(), INT32_MAX}; }
  /// The state of one element: its value v and its channel index k.
  template <class V>
  __host__ __device__ static arg_value<V> make(V v, int k) { return {v, k}; }
  /// The better of a and b: a NaN first (lowest index among NaNs), else the larger value, ties to the lower index.
  template <class V>
  __host__ __device__ arg_value<V> operator()(arg_value<V> a, arg_value<V> b) const {
    return detail::arg_combine<true>(a, b);
  }
  /// The reduced value: the maximum (count is not used).
  template <class V>
  __host__ __device__ static V value(arg_value<V> a, std::int64_t) { return a.value; }
  /// The channel index of the maximum, in [0, K).
  template <class V>
  __host__ __device__ static std::int64_t index(arg_value<V> a) { return a.index; }
};

}  // namespace op

/// @brief Epilogue functors (namespace `convred::epilogue`), applied per conv output as
/// `v = e(conv + bias, k)` before the reduction. Any user callable works too.
namespace epilogue {

/// @brief Returns its input unchanged.
struct identity {
  /// Returns v unchanged (the channel index is not used).
  template <class V>
  __host__ __device__ V operator()(V v, int) const { return v; }
};

/// @brief Multiplies by a scalar: `v * s` (PyTorch `conv2d(...) * s`), in the compute type.
template <class S = float>
struct scale {
  S s;  ///< the scale factor
  /// Returns v * s, with s converted to the compute type V (the channel index is not used).
  template <class V>
  __host__ __device__ V operator()(V v, int) const { return v * static_cast<V>(s); }
};

/// @brief Multiplies channel k by `s[k]`: `s` is a device pointer to K elements of type S.
template <class S = float>
struct per_channel_scale {
  const S* s;  ///< device pointer, K elements (one per output channel)
  /// Returns v * s[k], with s[k] (read on the device) converted to the compute type V.
  template <class V>
  __host__ __device__ V operator()(V v, int k) const { return v * static_cast<V>(to_compute(s[k])); }
};

/// @brief Applies `first`, then `second`: `second(first(v, k), k)`.
template <class First, class Second>
struct compose {
  First first;    ///< applied first
  Second second;  ///< applied to first's result
  /// Returns second(first(v, k), k), each called through apply_epilogue (so either may omit k).
  template <class V>
  __host__ __device__ V operator()(V v, int k) const;
};

/// @brief Builds `compose<First, Second>{a, b}`.
template <class First, class Second>
__host__ __device__ compose<First, Second> make_compose(First a, Second b) {
  return {a, b};
}

}  // namespace epilogue

/// @brief Calls an epilogue as `e(v, k)` when it takes a channel index, else as `e(v)`.
template <class E, class V>
__host__ __device__ inline V apply_epilogue(const E& e, V v, int k) {
  if constexpr (std::is_invocable_v<const E&, V, int>) {
    return static_cast<V>(e(v, k));
  } else {
    return static_cast<V>(e(v));
  }
}

namespace epilogue {
template <class First, class Second>
template <class V>
__host__ __device__ V compose<First, Second>::operator()(V v, int k) const {
  return apply_epilogue(second, apply_epilogue(first, v, k), k);
}
}  // namespace epilogue

}  // namespace convred
