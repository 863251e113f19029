/// @file numeric.cuh
/// @brief Element types, their compute (accumulation) types and conversions, usable on host and device.
#pragma once

#include "arch.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/limits>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace convred {

/// @brief Compute (accumulation) type of an element type: `double` for `double`, `float` for `float`,
/// `__half` and `__nv_bfloat16`. Convolution sums, epilogues and reductions run in this type, so sum and
/// mean of 16-bit inputs accumulate in fp32 (as PyTorch does) and double stays double.
template <class T>
struct compute_type {
  using type = float;  ///< float: the compute type of float, __half and __nv_bfloat16
};
/// @brief `double` computes in `double`.
template <>
struct compute_type<double> {
  using type = double;  ///< double
};
/// @brief Shorthand for `compute_type<T>::type`.
template <class T>
using compute_t = typename compute_type<T>::type;

/// @brief True for the element types convred kernels accept: float, double, __half, __nv_bfloat16.
template <class T>
inline constexpr bool is_supported_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, __half> ||
    std::is_same_v<T, __nv_bfloat16>;

/// @brief Converts an element to its compute type (exact: every half and bfloat16 is a float).
template <class T>
__host__ __device__ inline compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<compute_t<T>>(v);
  }
}

/// @brief Converts a compute value back to the element type (round to nearest even for 16-bit types).
template <class T, class V>
__host__ __device__ inline T from_compute(V v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// @brief Converts any supported element or arithmetic value to double (host and device).
template <class T>
__host__ __device__ inline double to_double(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<double>(to_compute(v));
  } else {
    return static_cast<double>(v);
  }
}

/// @brief NaN test for float, double and integers (always false), host and device.
template <class V>
__host__ __device__ inline bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

/// @brief +infinity for floating types, the largest value for integers (the exact identity of min).
template <class V>
__host__ __device__ constexpr V upper_identity() {
  if constexpr (std::is_floating_point_v<V>) {
    return cuda::std::numeric_limits<V>::infinity();
  } else {
    return cuda::std::numeric_limits<V>::max();
  }
}

/// @brief -infinity for floating types, the lowest value for integers (the exact identity of max).
template <class V>
__host__ __device__ constexpr V lower_identity() {
  if constexpr (std::is_floating_point_v<V>) {
    return -cuda::std::numeric_limits<V>::infinity();
  } else {
    return cuda::std::numeric_limits<V>::lowest();
  }
}

/// @brief `T` in a context that does not take part in template argument deduction (C++20's
/// std::type_identity_t), so `nullptr` can be passed for an optional `const T*` such as the bias.
template <class T>
struct nondeduced {
  using type = T;  ///< T itself
};
/// @brief Shorthand for `nondeduced<T>::type`.
template <class T>
using nondeduced_t = typename nondeduced<T>::type;

/// @brief Memory layout of a 4-D activation tensor (PyTorch's contiguous and channels_last formats).
enum class layout : int {
  nchw = 0,  ///< (N, C, H, W), W fastest: PyTorch's default contiguous format.
  nhwc = 1   ///< (N, H, W, C), C fastest: PyTorch's torch.channels_last.
};

}  // namespace convred
