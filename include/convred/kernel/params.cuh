/// @file kernel/params.cuh
/// @brief Kernel parameter block for the implicit-GEMM conv kernels, built on the host from a problem.
#pragma once

#include <cstdint>

#include "../detail/fast_divmod.cuh"
#include "../problem.cuh"

namespace convred::kernel {

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
  detail::fast_divmod div_rs;   ///< divides by R*S
  detail::fast_divmod div_s;    ///< divides by S
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
  k.div_rs = detail::fast_divmod(static_cast<std::int32_t>(p.R * p.S));
  k.div_s = detail::fast_divmod(static_cast<std::int32_t>(p.S));
  k.x_layout = p.x_layout;
  return k;
}

/// @brief Parameter block of the packed-filter wgmma kernel (conv2d_reduce_wgmma_kernel): NCHW fp32 x,
/// groups 1, stride 1, dilation 1, K <= 128 (device::packed_filter_bytes decides). A tile is a `th` x
/// 2^tw_log2 rectangle of output pixels of one image (256 pixels); tiles run q fastest, then p, then n.
/// Shared-memory stage: the packed filter slice (b_bytes) then the input patch as the TMA box writes it,
/// `block_c` channels of `bh` rows x `rp` columns (the (TH+R-1) x (TW+S-1) patch and some unused rows/columns, sized
/// so that the channel stride cs = bh * rp makes the fragment loads of a warp hit 32 distinct banks).
struct wgmma_conv_params {
  const float* x = nullptr;       ///< input (N,C,H,W), NCHW fp32
  const void* filter = nullptr;   ///< packed filter (device::pack_filter), 16-byte aligned
  const float* bias = nullptr;    ///< bias (K) or nullptr
  std::int64_t N = 0;             ///< batch
  std::int64_t tiles = 0;         ///< N * tiles_p * tiles_q
  /// @var C
  /// @brief input channels
  /// @var H
  /// @brief input height
  /// @var W
  /// @brief input width
  /// @var K
  /// @brief output channels (<= 128)
  /// @var P
  /// @brief output height
  /// @var Q
  /// @brief output width
  std::int32_t C = 0, H = 0, W = 0, K = 0, P = 0, Q = 0;
  /// @var R
  /// @brief kernel height
  /// @var S
  /// @brief kernel width
  /// @var pad_h
  /// @brief zero padding rows
  /// @var pad_w
  /// @brief zero padding columns
  std::int32_t R = 0, S = 0, pad_h = 0, pad_w = 0;
  /// @var tw_log2
  /// @brief log2 of the tile width TW (output columns)
  /// @var th
  /// @brief tile height TH (output rows), 256 / TW
  /// @var tiles_p
  /// @brief tiles down the output, ceil(P / TH)
  /// @var tiles_q
  /// @brief tiles across the output, ceil(Q / TW)
  std::int32_t tw_log2 = 0, th = 0, tiles_p = 0, tiles_q = 0;
  std::int32_t kt = 0;  ///< stages per tile: ceil(C / block_c)
  /// @var rp
  /// @brief patch row pitch in floats: the TMA box width (>= TW + S - 1 + col_shift, a multiple of 4)
  /// @var bh
  /// @brief TMA box height (>= TH + R - 1)
  /// @var cs
  /// @brief patch channel stride in floats, rp * bh
  std::int32_t rp = 0, bh = 0, cs = 0;
  std::int32_t a_bytes = 0;  ///< patch bytes per stage: block_c * cs * 4
  /// columns between the TMA box's first column and the patch's (q0 - pad_w): the box starts at
  /// q0 - pad_w - col_shift, a multiple of 4 (q0 is), i.e. at a 16-byte aligned address (measured: a box
  /// starting at column -1 stopped the kernel with an illegal-instruction error on the H200)
  std::int32_t col_shift = 0;
  /// @var b_bytes
  /// @brief packed filter bytes per stage: parts * R*S * 128 * block_c * element bytes
  /// @var stage_bytes
  /// @brief shared-memory bytes per stage (filter slice + patch), a multiple of 128
  std::int32_t b_bytes = 0, stage_bytes = 0;
};

}  // namespace convred::kernel
