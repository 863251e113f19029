/// @file kernel/space_to_batch.cuh
/// @brief The two permutations of a dilated convolution run as an undilated one (device::family::dilated):
/// x split into f_h x f_w sub-images folded into the batch (space to batch), and the reduced output of
/// the sub-problem put back in place (batch to space). The identity behind them is the one TensorFlow's
/// atrous convolution uses (`space_to_batch_nd`; Chen et al., "DeepLab", TPAMI 2018, section 3.1): at
/// stride 1, output row p = p' f_h + a reads input rows p + r f_h - pad_h = (p' + r - pad_h / f_h) f_h + a,
/// i.e. rows p' + r of sub-image a (input rows a, a + f_h, ...) with padding pad_h / f_h, when f_h divides
/// pad_h; likewise for columns.
#pragma once

#include <cstdint>

#include "../detail/fast_divmod.cuh"
#include "../numeric.cuh"

namespace convred::kernel {

/// @brief Quotient and remainder of n / d.d for 0 <= n: the multiply-high division while n < 2^31 (the
/// kernels' common case), a 64-bit division above.
__device__ inline void divmod64(std::int64_t n, const detail::fast_divmod& d, std::int64_t& q, std::int64_t& r) {
  if (n < (std::int64_t(1) << 31)) {
    std::int32_t q32, r32;
    d.divmod(static_cast<std::int32_t>(n), q32, r32);
    q = q32, r = r32;
  } else {
    q = n / d.d, r = n - q * d.d;
  }
}

/// @brief The shapes of one space-to-batch split: x (N, C, H, W) in `layout` into xs (N * fh * fw, C, Hs,
/// Ws) in the same layout, Hs = ceil(H / fh), Ws = ceil(W / fw); sub-image n' = (n * fh + a) * fw + b holds
/// xs[n', c, i, j] = x[n, c, i * fh + a, j * fw + b], zero where that row or column is past x. The
/// reduced output of the sub-problem, y' (N * fh * fw, 1, P', Q'), goes back to y (N, 1, P, Q): y[n, 0,
/// p' fh + a, q' fw + b] = y'[(n * fh + a) * fw + b, 0, p', q']. Divisors below 2^31 (the family checks).
struct space_to_batch_params {
  std::int64_t N = 0;  ///< batch of x
  /// @var C
  /// @brief channels
  /// @var H
  /// @brief height of x
  /// @var W
  /// @brief width of x
  std::int64_t C = 0, H = 0, W = 0;
  /// @var P
  /// @brief output height of the dilated problem
  /// @var Q
  /// @brief output width of the dilated problem
  /// @var Ps
  /// @brief output height of the sub-problem, P'
  /// @var Qs
  /// @brief output width of the sub-problem, Q'
  std::int64_t P = 0, Q = 0, Ps = 0, Qs = 0;
  bool nhwc = false;  ///< x and xs are NHWC (else NCHW)
  /// @var fh
  /// @brief row factor (the vertical dilation, or 1)
  /// @var fw
  /// @brief column factor (the horizontal dilation, or 1)
  /// @var hs
  /// @brief sub-image height Hs
  /// @var ws
  /// @brief sub-image width Ws
  /// @var c
  /// @brief channels, as a divisor
  /// @var p
  /// @brief P, as a divisor
  /// @var q
  /// @brief Q, as a divisor
  detail::fast_divmod fh, fw, hs, ws, c, p, q;
};

/// @brief xs[e] = x at the position space_to_batch_params describes, or zero past x; one element per
/// thread and step of a grid-stride loop over the N * fh * fw * C * Hs * Ws elements of xs (reads of x at
/// stride fw, writes coalesced). T any element type of the convolution (float, double, __half,
/// __nv_bfloat16); values are copied, not converted.
template <class T>
__global__ void space_to_batch_kernel(const T* __restrict__ x, T* __restrict__ xs, const space_to_batch_params sp,
                                      std::int64_t count) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += step) {
    std::int64_t t = e, ch = 0, i, j, a, b;
    if (sp.nhwc) divmod64(t, sp.c, t, ch);
    divmod64(t, sp.ws, t, j);
    divmod64(t, sp.hs, t, i);
    if (!sp.nhwc) divmod64(t, sp.c, t, ch);
    divmod64(t, sp.fw, t, b);
    divmod64(t, sp.fh, t, a);  // t is now n
    const std::int64_t h = i * sp.fh.d + a, w = j * sp.fw.d + b;
    T v = T(0.0f);
    if (h < sp.H && w < sp.W)
      v = x[sp.nhwc ? ((t * sp.H + h) * sp.W + w) * sp.C + ch : ((t * sp.C + ch) * sp.H + h) * sp.W + w];
    xs[e] = v;
  }
}

/// @brief The sub-problem's reduced outputs back in place: y[e] = ys[...] and indices[e] = is[...] over
/// the N * P * Q output pixels (grid-stride loop; y or indices nullptr: not written). V the output element
/// type.
template <class V>
__global__ void batch_to_space_kernel(const V* __restrict__ ys, const std::int64_t* __restrict__ is, V* __restrict__ y,
                                      std::int64_t* __restrict__ indices, const space_to_batch_params sp,
                                      std::int64_t count) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += step) {
    std::int64_t t, q, p, ps, a, qs, b;
    divmod64(e, sp.q, t, q);
    divmod64(t, sp.p, t, p);  // t is now n
    divmod64(p, sp.fh, ps, a);
    divmod64(q, sp.fw, qs, b);
    const std::int64_t src = (((t * sp.fh.d + a) * sp.fw.d + b) * sp.Ps + ps) * sp.Qs + qs;
    if (y) y[e] = ys[src];
    if (indices) indices[e] = is[src];
  }
}

}  // namespace convred::kernel
