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
/// groups 1, stride 1, dilation 1, K <= 128 (device::packed_filter_bytes decides). A tile is 4 x 64
/// output pixels (rows x columns) of one image; tiles run q fastest, then p, then n.
/// Shared memory: `stages` operand stages of stage_bytes (the packed filter slice, b_bytes, then the
/// planes of the input patch: parts x part_bytes, see block::conv_patch_loader), then `raw_stages` raw
/// patch buffers of raw_bytes (the TMA box: block_c channels of bh rows x rp columns), then the tail.
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
  /// @var tiles_p
  /// @brief tiles down the output, ceil(P / 4)
  /// @var tiles_q
  /// @brief tiles across the output, ceil(Q / 64)
  /// @var kt
  /// @brief stages per tile: ceil(C / block_c)
  std::int32_t tiles_p = 0, tiles_q = 0, kt = 0;
  /// @var rp
  /// @brief raw patch row pitch in floats: the TMA box width (>= pw + col_shift, a multiple of 4)
  /// @var bh
  /// @brief raw patch rows: the TMA box height, ph
  /// @var col_shift
  /// @brief columns between the TMA box's first column and the patch's (q0 - pad_w): the box starts at
  /// q0 - pad_w - col_shift, a multiple of 4, i.e. at a 16-byte aligned address (measured: a box starting
  /// at column -1 stopped the kernel with an illegal-instruction error on the H200)
  std::int32_t rp = 0, bh = 0, col_shift = 0;
  /// @var ph
  /// @brief patch rows, 4 + R - 1
  /// @var pw
  /// @brief patch columns, 64 + S - 1: the plane row pitch in 16-byte pixels
  std::int32_t ph = 0, pw = 0;
  /// @var raw_copy_bytes
  /// @brief bytes one TMA box writes: block_c * bh * rp * 4
  /// @var raw_bytes
  /// @brief shared-memory bytes per raw buffer, raw_copy_bytes rounded up to 128
  /// @var plane_bytes
  /// @brief bytes of one plane (E channels of the patch): ph * pw * 16
  /// @var part_bytes
  /// @brief bytes of one set of planes (block_c channels, the big or the small parts): block_c / E planes
  std::int32_t raw_copy_bytes = 0, raw_bytes = 0, plane_bytes = 0, part_bytes = 0;
  /// @var b_bytes
  /// @brief packed filter bytes per stage: parts * R*S * 128 * block_c * element bytes
  /// @var stage_bytes
  /// @brief shared-memory bytes per operand stage (filter slice + planes), a multiple of 128
  std::int32_t b_bytes = 0, stage_bytes = 0;
  detail::fast_divmod div_pix;  ///< divides by ph * pw (plane item -> plane, pixel)
  detail::fast_divmod div_pw;   ///< divides by pw (pixel -> row, column)
};

}  // namespace convred::kernel
