/// @file problem.cuh
/// @brief Problem descriptions (conv2d and channel reduction), output sizes and validation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "numeric.cuh"
#include "status.cuh"

namespace convred {

/// @brief A 2-D convolution, exactly as PyTorch's `torch.nn.functional.conv2d` (cross-correlation).
///
/// Input x: (N, C, H, W) in `x_layout` (NCHW or NHWC). Weights w: (K, C/groups, R, S), PyTorch's KCRS,
/// contiguous. Bias: (K). Output (N, K, P, Q) with, as in PyTorch,
///   P = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1,   Q likewise with W, pad_w, dil_w, S, stride_w;
///   out[n,k,p,q] = b[k] + sum_{c in group(k), r, s} x[n, c, p*stride_h - pad_h + r*dil_h,
///                                                     q*stride_w - pad_w + s*dil_w] * w[k, c', r, s]
/// where taps outside the input read zero (zero padding). Implicit-GEMM view: GEMM_M = N*P*Q,
/// GEMM_N = K, GEMM_K = (C/groups)*R*S.
struct conv2d_problem {
  std::int64_t N = 0;  ///< batch
  std::int64_t C = 0;  ///< input channels
  std::int64_t H = 0;  ///< input height
  std::int64_t W = 0;  ///< input width
  std::int64_t K = 0;  ///< output channels
  std::int64_t R = 1;  ///< kernel height
  std::int64_t S = 1;  ///< kernel width
  /// @var pad_h
  /// @brief zero padding rows, added both above and below x
  std::int64_t pad_h = 0, pad_w = 0;        ///< zero padding columns, added both left and right of x
  /// @var stride_h
  /// @brief vertical stride: input-row step between output rows
  std::int64_t stride_h = 1, stride_w = 1;  ///< horizontal stride: input-column step between output columns
  /// @var dil_h
  /// @brief vertical dilation: input-row step between kernel rows
  std::int64_t dil_h = 1, dil_w = 1;        ///< horizontal dilation: input-column step between kernel columns
  std::int64_t groups = 1;                  ///< groups: C and K are split into `groups` equal parts
  layout x_layout = layout::nchw;           ///< layout of x (and of a full conv output)

  /// Output height P = floor((H + 2*pad_h - dil_h*(R-1) - 1) / stride_h) + 1, as PyTorch (floor, not
  /// truncation toward zero: a kernel larger than the padded input gives P <= 0, which `validate` reports).
  __host__ __device__ constexpr std::int64_t P() const { return out_size(H, pad_h, dil_h, R, stride_h); }
  /// Output width Q, as P with W, pad_w, dil_w, S, stride_w.
  __host__ __device__ constexpr std::int64_t Q() const { return out_size(W, pad_w, dil_w, S, stride_w); }
  /// floor((in + 2*pad - dil*(k-1) - 1) / stride) + 1, or 0 for stride < 1.
  __host__ __device__ static constexpr std::int64_t out_size(std::int64_t in, std::int64_t pad, std::int64_t dil,
                                                             std::int64_t k, std::int64_t stride) {
    if (stride < 1) return 0;
    const std::int64_t top = in + 2 * pad - dil * (k - 1) - 1;
    return (top >= 0 ? top / stride : -((-top + stride - 1) / stride)) + 1;
  }
  /// Input channels per group, C / groups.
  __host__ __device__ constexpr std::int64_t C_per_group() const { return C / groups; }
  /// Output channels per group, K / groups.
  __host__ __device__ constexpr std::int64_t K_per_group() const { return K / groups; }
  /// GEMM_M = N*P*Q, the number of output pixels.
  __host__ __device__ constexpr std::int64_t gemm_m() const { return N * P() * Q(); }
  /// GEMM_K = (C/groups)*R*S, the reduction depth of one output.
  __host__ __device__ constexpr std::int64_t gemm_k() const { return C_per_group() * R * S; }
  /// Multiply-add FLOPs of the convolution: 2 * N*P*Q * K * (C/groups)*R*S (bias and epilogue not counted).
  __host__ __device__ constexpr double flops() const {
    return 2.0 * static_cast<double>(gemm_m()) * static_cast<double>(K) * static_cast<double>(gemm_k());
  }
  /// Elements of x: N*C*H*W.
  __host__ __device__ constexpr std::int64_t x_elements() const { return N * C * H * W; }
  /// Elements of w: K*(C/groups)*R*S.
  __host__ __device__ constexpr std::int64_t w_elements() const { return K * gemm_k(); }
  /// Elements of the reduced output y (and of the indices): N*P*Q.
  __host__ __device__ constexpr std::int64_t y_elements() const { return gemm_m(); }
  /// Elements of the full conv output: N*K*P*Q.
  __host__ __device__ constexpr std::int64_t out_elements() const { return gemm_m() * K; }
};

/// @brief A reduction across the channel dim of an existing (N, C, H, W) tensor in NCHW or NHWC,
/// giving (N, 1, H, W): `y[n,0,h,w] = R over c of e(x[n,c,h,w], c)`.
struct channel_reduce_problem {
  std::int64_t N = 0;              ///< batch
  std::int64_t C = 0;              ///< channels reduced over
  std::int64_t H = 0;              ///< height
  std::int64_t W = 0;              ///< width
  layout x_layout = layout::nchw;  ///< layout of x
  /// Elements of x: N*C*H*W.
  __host__ __device__ constexpr std::int64_t x_elements() const { return N * C * H * W; }
  /// Elements of y: N*H*W.
  __host__ __device__ constexpr std::int64_t y_elements() const { return N * H * W; }
};

namespace detail {
/// a*b without signed overflow; false if it would overflow (both non-negative).
inline bool mul_ok(std::int64_t a, std::int64_t b, std::int64_t& out) {
  if (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) return false;
  out = a * b;
  return true;
}
/// The product of the factors (each >= 0) in `out`; false (out unspecified) if it overflows int64.
inline bool product(std::initializer_list<std::int64_t> factors, std::int64_t& out) {
  out = 1;
  for (auto f : factors)
    if (!mul_ok(out, f, out)) return false;
  return true;
}
/// Product of all factors with overflow check, also checking the byte size for `elem_bytes`.
inline bool product_ok(std::initializer_list<std::int64_t> factors, std::int64_t elem_bytes) {
  std::int64_t p = 1;
  return product(factors, p) && mul_ok(p, elem_bytes, p);
}
/// Whether the product of the factors (each >= 0) is below `limit`, without overflowing on the way.
inline bool product_below(std::initializer_list<std::int64_t> factors, std::int64_t limit) {
  std::int64_t p = 1;
  return product(factors, p) && p < limit;
}
/// Sizes and parameters the kernels index with fit comfortably in int64 when each is below 2^40.
inline constexpr std::int64_t max_extent = std::int64_t(1) << 40;
}  // namespace detail

/// @brief Validates a conv2d problem for element size `elem_bytes`; says exactly what is wrong.
///
/// @return `invalid_shape` (N < 0; C, H, W, K, R, S < 1; a size above 2^40), `invalid_stride`,
/// `invalid_dilation`, `invalid_padding`, `invalid_groups` (groups < 1 or not dividing C and K),
/// `invalid_output_size` (P or Q < 1: the dilated kernel is larger than the padded input),
/// `invalid_layout`, `size_overflow` (N*C*H*W, K*C/g*R*S, N*K*P*Q elements or bytes, or N*P*Q x 8 bytes of
/// int64 indices, overflow int64, with N read as 1 where it is 0; C, K or (C/groups)*R*S at or above 2^30;
/// R, S, padding, stride or dilation above 2^30; H + 2*pad_h + dil_h*(R-1) + stride_h or its W analogue
/// above 2^30), `invalid_argument` (elem_bytes < 1), else `success`. N = 0 is valid (empty work) where one
/// image would be. `elem_bytes` is sizeof(T) of the tensors (default 4, float): the byte sizes are checked
/// with it, so pass sizeof(double) for double (the device entry points do).
inline status validate(const conv2d_problem& p, std::int64_t elem_bytes = 4) {
  if (p.N < 0 || p.C < 1 || p.H < 1 || p.W < 1 || p.K < 1 || p.R < 1 || p.S < 1) return status::invalid_shape;
  for (auto v : {p.N, p.C, p.H, p.W, p.K, p.R, p.S})
    if (v > detail::max_extent) return status::invalid_shape;
  if (p.stride_h < 1 || p.stride_w < 1) return status::invalid_stride;
  if (p.dil_h < 1 || p.dil_w < 1) return status::invalid_dilation;
  if (p.pad_h < 0 || p.pad_w < 0) return status::invalid_padding;
  if (p.groups < 1 || p.C % p.groups != 0 || p.K % p.groups != 0) return status::invalid_groups;
  if (p.x_layout != layout::nchw && p.x_layout != layout::nhwc) return status::invalid_layout;
  if (elem_bytes < 1) return status::invalid_argument;
  // Input coordinates are int32 in the kernels: h = p*stride - pad + r*dil stays within (-2^30, 2^30).
  // Checked before P() and Q() so that no product below can overflow.
  constexpr std::int64_t coord_limit = std::int64_t(1) << 30;
  for (auto v : {p.R, p.S, p.pad_h, p.pad_w, p.stride_h, p.stride_w, p.dil_h, p.dil_w})
    if (v > coord_limit) return status::size_overflow;
  if (p.H + 2 * p.pad_h + p.dil_h * (p.R - 1) + p.stride_h > coord_limit ||
      p.W + 2 * p.pad_w + p.dil_w * (p.S - 1) + p.stride_w > coord_limit)
    return status::size_overflow;
  if (p.P() < 1 || p.Q() < 1) return status::invalid_output_size;
  // At least one image: N = 0 (no work) bounds nothing, so one image's tensors must fit as well.
  const std::int64_t n1 = p.N > 0 ? p.N : 1;
  if (!detail::product_ok({n1, p.C, p.H, p.W}, elem_bytes) ||
      !detail::product_ok({p.K, p.C_per_group(), p.R, p.S}, elem_bytes) ||
      !detail::product_ok({n1, p.K, p.P(), p.Q()}, elem_bytes) ||
      !detail::product_ok({n1, p.P(), p.Q()}, 8))
    return status::size_overflow;
  // Channel indices and GEMM_K indices are int32 in the kernels.
  constexpr std::int64_t index_limit = std::numeric_limits<std::int32_t>::max() / 2;
  if (p.C > index_limit || p.K > index_limit || p.gemm_k() > index_limit) return status::size_overflow;
  return status::success;
}

/// @brief Validates a channel-reduction problem: `invalid_argument` (elem_bytes < 1), `invalid_shape`
/// (N < 0; C, H, W < 1; a size above 2^40), `invalid_layout`, `size_overflow` (elements or bytes overflow
/// int64, with N read as 1 where it is 0; C at or above 2^30), else `success`.
inline status validate(const channel_reduce_problem& p, std::int64_t elem_bytes = 4) {
  if (elem_bytes < 1) return status::invalid_argument;
  if (p.N < 0 || p.C < 1 || p.H < 1 || p.W < 1) return status::invalid_shape;
  for (auto v : {p.N, p.C, p.H, p.W})
    if (v > detail::max_extent) return status::invalid_shape;
  if (p.x_layout != layout::nchw && p.x_layout != layout::nhwc) return status::invalid_layout;
  const std::int64_t n1 = p.N > 0 ? p.N : 1;  // (N = 0: one image must fit, as for conv2d_problem)
  if (!detail::product_ok({n1, p.C, p.H, p.W}, elem_bytes) || !detail::product_ok({n1, p.H, p.W}, 8))
    return status::size_overflow;
  if (p.C > std::numeric_limits<std::int32_t>::max() / 2) return status::size_overflow;
  return status::success;
}

}  // namespace convred
