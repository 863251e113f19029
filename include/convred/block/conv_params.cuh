/// @file block/conv_params.cuh
/// @brief Parameter block of the SIMT and mma.sync implicit-GEMM conv mainloops (block::conv_tile_loader),
/// built on the host from a problem.
#pragma once

#include <cstdint>

#include "../detail/fast_divmod.cuh"
#include "../problem.cuh"

namespace convred::block {

/// @brief Everything the conv kernels read, passed by value. Sizes that index whole tensors are int64;
/// GEMM_K indices are int32 (validated: (C/groups)*R*S < 2^30).
template <class T>
struct conv_params {
  const T* x = nullptr;     ///< input (N,C,H,W) in `x_layout`
  const T* w = nullptr;     ///< weights (K, C/groups, R, S)
  const T* bias = nullptr;  ///< bias (K) or nullptr
  /// @var N
  /// @brief batch
  /// @var C
  /// @brief input channels (all groups)
  /// @var K
  /// @brief output channels (all groups)
  /// @var P
  /// @brief output height
  /// @var Q
  /// @brief output width
  std::int64_t N, C, K, P, Q;
  /// @var H
  /// @brief input height (validated < 2^30 with padding)
  /// @var W
  /// @brief input width (validated < 2^30 with padding)
  std::int32_t H, W;
  std::int64_t M;   ///< GEMM_M = N*P*Q
  std::int64_t PQ;  ///< P*Q
  /// @var R
  /// @brief kernel height
  /// @var S
  /// @brief kernel width
  /// @var pad_h
  /// @brief zero padding rows, above and below x
  /// @var pad_w
  /// @brief zero padding columns, left and right of x
  /// @var stride_h
  /// @brief vertical stride: input-row step between output rows
  /// @var stride_w
  /// @brief horizontal stride: input-column step between output columns
  /// @var dil_h
  /// @brief vertical dilation: input-row step between kernel rows
  /// @var dil_w
  /// @brief horizontal dilation: input-column step between kernel columns
  std::int32_t R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  /// @var groups
  /// @brief groups (C and K are split into `groups` equal parts)
  /// @var Cg
  /// @brief input channels per group, C/groups
  std::int32_t groups, Cg, Kg;  ///< output channels per group, K/groups
  std::int32_t gemm_k;          ///< (C/groups)*R*S
  convred::detail::fast_divmod div_rs;   ///< divides by R*S
  convred::detail::fast_divmod div_s;    ///< divides by S
  layout x_layout;  ///< layout of x (NCHW or NHWC)
};

/// @brief Builds conv_params from a validated problem.
template <class T>
conv_params<T> make_conv_params(const conv2d_problem& p, const T* x, const T* w, const T* bias) {
  conv_params<T> k;
  k.x = x, k.w = w, k.bias = bias;
  k.N = p.N, k.C = p.C, k.H = static_cast<std::int32_t>(p.H), k.W = static_cast<std::int32_t>(p.W), k.K = p.K, k.P = p.P(), k.Q = p.Q();
  k.M = p.gemm_m(), k.PQ = k.P * k.Q;
  k.R = static_cast<std::int32_t>(p.R), k.S = static_cast<std::int32_t>(p.S);
  k.pad_h = static_cast<std::int32_t>(p.pad_h), k.pad_w = static_cast<std::int32_t>(p.pad_w);
  k.stride_h = static_cast<std::int32_t>(p.stride_h), k.stride_w = static_cast<std::int32_t>(p.stride_w);
  k.dil_h = static_cast<std::int32_t>(p.dil_h), k.dil_w = static_cast<std::int32_t>(p.dil_w);
  k.groups = static_cast<std::int32_t>(p.groups);
  k.Cg = static_cast<std::int32_t>(p.C_per_group()), k.Kg = static_cast<std::int32_t>(p.K_per_group());
  k.gemm_k = static_cast<std::int32_t>(p.gemm_k());
  k.div_rs = convred::detail::fast_divmod(static_cast<std::int32_t>(p.R * p.S));
  k.div_s = convred::detail::fast_divmod(static_cast<std::int32_t>(p.S));
  k.x_layout = p.x_layout;
  return k;
}

}  // namespace convred::block
