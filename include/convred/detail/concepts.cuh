/// @file detail/concepts.cuh
/// @brief Compile-time checks of the user-supplied types of the entry points (C++17 detection idiom):
/// `is_reduction_op_v<Op, V>` and `is_epilogue_v<E, V>` for the compute type V, the one-line messages
/// `CONVRED_REDUCTION_OP_REQUIREMENTS` / `CONVRED_EPILOGUE_REQUIREMENTS` that list what each needs, and
/// `epilogue_runs_on_device<E, V>()`, which makes a host-only epilogue a compile error.
///
/// Every public entry point (device::conv2d_reduce, conv2d, conv2d_reduce_direct, conv2d_reduce_split,
/// conv2d_reduce_packed, conv2d_reduce_packed_split, channel_reduce, conv2d_reduce_plan::run) starts with
///
///     static_assert(detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
///     static_assert(detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
///
/// so a type that misses a member is named, with what it needs, before the kernels' own errors.
///
/// Device callability cannot be seen by a type trait: `operator()` of a host-only functor or of a plain
/// (not `__device__`) lambda has the same type signature as a `__host__ __device__` one. nvcc only
/// warns (#20011-D) when the `__host__ __device__` apply_epilogue calls a host function, and a kernel then
/// calls nothing valid. `is_epilogue_v` therefore also instantiates `epilogue_must_be_device_callable<E, V>`,
/// a `__global__` function that calls the epilogue: a host-only one is then an nvcc *error* naming that
/// kernel ("calling a __host__ function(...) from a __global__ function(...epilogue_must_be_device_callable
/// ...) is not allowed"). The probe is never launched.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace convred::detail {

/// What a reduction op needs (functional.cuh), as the message of the entry points' static_assert.
#define CONVRED_REDUCTION_OP_REQUIREMENTS                                                                          \
  "convred: Op is not a reduction op. For the compute type V (float; double for double data) it needs: "       \
  "template <class V> using accum_t = ...; static constexpr bool has_index; "                                  \
  "template <class V> static accum_t<V> identity(); template <class V> static accum_t<V> make(V value, int k); " \
  "accum_t<V> operator()(accum_t<V>, accum_t<V>) const; template <class V> static V value(accum_t<V>, "        \
  "std::int64_t count); and if has_index, template <class V> static std::int64_t index(accum_t<V>); "          \
  "all __host__ __device__, Op default-constructible and copyable (see convred/functional.cuh)"

/// What an epilogue needs (functional.cuh), as the message of the entry points' static_assert.
#define CONVRED_EPILOGUE_REQUIREMENTS                                                                              \
  "convred: Epilogue is not an epilogue. It must be copyable and callable on the device as V e(V value, int k) " \
  "or V e(V value), V the compute type (float; double for double data), returning a value convertible to V: "  \
  "a __host__ __device__ (or __device__) operator(), or an extended __device__ lambda (see convred/functional.cuh)"

namespace concepts {
/// Stands in for a missing accum_t, so that the other members' detection fails softly.
struct no_accum {};

template <class Op, class V, class = void>
struct accum_of {
  using type = no_accum;
  static constexpr bool found = false;
};
template <class Op, class V>
struct accum_of<Op, V, std::void_t<typename Op::template accum_t<V>>> {
  using type = typename Op::template accum_t<V>;
  static constexpr bool found = true;
};

template <class Op, class = void>
struct has_index_constant : std::false_type {};
template <class Op>
struct has_index_constant<Op, std::void_t<std::integral_constant<bool, Op::has_index>>> : std::true_type {};

template <class Op, class V, class A, class = void>
struct identity_ok : std::false_type {};
template <class Op, class V, class A>
struct identity_ok<Op, V, A, std::void_t<decltype(Op::template identity<V>())>>
    : std::is_convertible<decltype(Op::template identity<V>()), A> {};

template <class Op, class V, class A, class = void>
struct make_ok : std::false_type {};
template <class Op, class V, class A>
struct make_ok<Op, V, A, std::void_t<decltype(Op::template make<V>(std::declval<V>(), 0))>>
    : std::is_convertible<decltype(Op::template make<V>(std::declval<V>(), 0)), A> {};

template <class Op, class A, class = void>
struct combine_ok : std::false_type {};
template <class Op, class A>
struct combine_ok<Op, A, std::void_t<decltype(std::declval<const Op&>()(std::declval<A>(), std::declval<A>()))>>
    : std::is_convertible<decltype(std::declval<const Op&>()(std::declval<A>(), std::declval<A>())), A> {};

template <class Op, class V, class A, class = void>
struct value_ok : std::false_type {};
template <class Op, class V, class A>
struct value_ok<Op, V, A, std::void_t<decltype(Op::template value<V>(std::declval<A>(), std::int64_t{}))>>
    : std::is_convertible<decltype(Op::template value<V>(std::declval<A>(), std::int64_t{})), V> {};

template <class Op, class V, class A, class = void>
struct index_ok : std::false_type {};
template <class Op, class V, class A>
struct index_ok<Op, V, A, std::void_t<decltype(Op::template index<V>(std::declval<A>()))>>
    : std::is_convertible<decltype(Op::template index<V>(std::declval<A>())), std::int64_t> {};

template <class Op, bool HasConstant = has_index_constant<Op>::value>
struct index_flag : std::false_type {};
template <class Op>
struct index_flag<Op, true> : std::bool_constant<Op::has_index> {};
}  // namespace concepts

/// True if Op meets the reduction-op requirements of functional.cuh for compute type V (members and
/// their signatures; see CONVRED_REDUCTION_OP_REQUIREMENTS).
template <class Op, class V>
inline constexpr bool is_reduction_op_v = [] {
  using A = typename concepts::accum_of<Op, V>::type;
  constexpr bool members = concepts::accum_of<Op, V>::found && concepts::has_index_constant<Op>::value &&
                           concepts::identity_ok<Op, V, A>::value && concepts::make_ok<Op, V, A>::value &&
                           concepts::combine_ok<Op, A>::value && concepts::value_ok<Op, V, A>::value;
  constexpr bool index = !concepts::index_flag<Op>::value || concepts::index_ok<Op, V, A>::value;
  return members && index && std::is_default_constructible_v<Op> && std::is_copy_constructible_v<Op>;
}();

/// True if E can be called as `e(v, k)` or `e(v)` with v of type V (as apply_epilogue calls it) and the
/// result converts to V, and E is copyable (kernels take it by value). Says nothing of the execution space:
/// see epilogue_runs_on_device.
/// True for the closure type of an extended `__device__` lambda (nvcc --extended-lambda). nvcc's host pass
/// replaces it by a placeholder type that is not callable on the host, so its signature is checked in the
/// device pass only, and it needs no device-callability probe.
template <class E>
constexpr bool is_device_lambda() {
  return __nv_is_extended_device_lambda_closure_type(E);
}

template <class E, class V>
constexpr bool epilogue_signature() {
  if constexpr (!std::is_copy_constructible_v<E>) {
    return false;
#if !defined(__CUDA_ARCH__)
  } else if constexpr (is_device_lambda<E>()) {
    return true;  // host pass: checked in the device pass
#endif
  } else if constexpr (std::is_invocable_v<const E&, V, int>) {
    return std::is_convertible_v<std::invoke_result_t<const E&, V, int>, V>;
  } else if constexpr (std::is_invocable_v<const E&, V>) {
    return std::is_convertible_v<std::invoke_result_t<const E&, V>, V>;
  } else {
    return false;
  }
}
template <class E, class V>
inline constexpr bool is_epilogue_signature_v = epilogue_signature<E, V>();

/// Never launched: instantiated only so that nvcc compiles a device call of the epilogue, which is an error
/// (not the warning #20011-D) when the epilogue is host-only.
template <class E, class V>
__global__ void epilogue_must_be_device_callable(E e, V v, V* out) {
  if constexpr (std::is_invocable_v<const E&, V, int>) {
    *out = static_cast<V>(static_cast<const E&>(e)(v, 0));
  } else {
    *out = static_cast<V>(static_cast<const E&>(e)(v));
  }
}

/// Instantiates epilogue_must_be_device_callable<E, V> (its address is taken, so nvcc compiles it for the
/// device) when E has an epilogue's signature and is not a `__device__` lambda; returns the signature check.
template <class E, class V>
constexpr bool epilogue_runs_on_device() {
  if constexpr (!is_epilogue_signature_v<E, V>) {
    return false;
  } else {
    if constexpr (!is_device_lambda<E>()) {
      void (*probe)(E, V, V*) = &epilogue_must_be_device_callable<E, V>;
      (void)probe;
    }
    return true;
  }
}

/// True if E is an epilogue for compute type V (see CONVRED_EPILOGUE_REQUIREMENTS); a host-only E is a
/// compile error where this is used (epilogue_runs_on_device).
template <class E, class V>
inline constexpr bool is_epilogue_v = epilogue_runs_on_device<E, V>();

}  // namespace convred::detail
