/// @file block/conv_direct.cuh
/// @brief Direct convolution of one output value for problems where every output channel reads one input
/// channel (C/groups == 1: depthwise, with any channel multiplier K/groups), exact FMA on the CUDA cores.
#pragma once

#include <cstdint>

#include "../numeric.cuh"
#include "conv_params.cuh"

namespace convred::block {

/// @brief bias[k] + conv2d(x, w)[n, k, p, q] in V (float, or double for double data) for a problem with
/// C/groups == 1: output channel k reads input channel c = k / (K/groups) only (PyTorch's depthwise
/// conv2d with a channel multiplier K/groups), its R x S window at rows p*stride_h - pad_h + r*dil_h and
/// columns q*stride_w - pad_w + s*dil_w. Taps in the zero padding multiply 0 by the filter value, as the
/// library's float64 reference and GEMM kernels do and as a conv over an explicitly zero-padded input does
/// (so an infinite or NaN filter value gives NaN there; PyTorch's own CUDA depthwise kernel skips padded
/// taps and would give +-inf instead). FR or FS 0: that extent at run time (prm.R, prm.S). w is
/// (K, 1, R, S); x in prm.x_layout. The sum runs in the order r, s with one multiply-add per tap
/// (math::ieee), then the bias is added, as the GEMM kernels add it after their sums. FR, FS: the filter
/// size at compile time (unrolled taps, their loads in flight together), or 0 for prm.R / prm.S at run time.
/// Host and device: the host suite checks it against the float64 reference.
template <class V, int FR = 0, int FS = 0, class T>
__host__ __device__ inline V direct_conv_at(const conv_params<T>& prm, std::int64_t n, std::int64_t k, std::int64_t p,
                                            std::int64_t q) {
  const int R = FR > 0 ? FR : prm.R, S = FS > 0 ? FS : prm.S;
  const std::int64_t c = k / prm.Kg;
  const T* wk = prm.w + k * R * S;
  const bool nchw = prm.x_layout == layout::nchw;
  // input channel c of image n, and the element steps between columns and between rows
  const T* xc = prm.x + (nchw ? (n * prm.C + c) * prm.H * prm.W : n * prm.H * prm.W * prm.C + c);
  const std::int64_t col = nchw ? 1 : prm.C, row = prm.W * col;
  const std::int64_t h0 = p * prm.stride_h - prm.pad_h, w0 = q * prm.stride_w - prm.pad_w;
  V acc = V(0);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int r = 0; r < R; ++r) {
    const std::int64_t h = h0 + static_cast<std::int64_t>(r) * prm.dil_h;
    const bool row_in = h >= 0 && h < prm.H;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int s = 0; s < S; ++s) {
      const std::int64_t wc = w0 + static_cast<std::int64_t>(s) * prm.dil_w;
      const V xv = row_in && wc >= 0 && wc < prm.W ? static_cast<V>(to_compute(xc[h * row + wc * col])) : V(0);
      acc += xv * static_cast<V>(to_compute(wk[r * S + s]));
    }
  }
  return prm.bias ? acc + static_cast<V>(to_compute(prm.bias[k])) : acc;
}

}  // namespace convred::block
