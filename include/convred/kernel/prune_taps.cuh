/// @file kernel/prune_taps.cuh
/// @brief The filter of a convolution whose outer taps read only padding (device::family::pruned): the
/// taps that some output reads inside the image, copied once at prepare, with the one thing the dropped
/// taps still decide kept: a non-finite weight at a dropped tap multiplies padding zeros, so PyTorch's
/// conv2d gives NaN for that output channel at every pixel (IEEE 754: 0 x inf and 0 x NaN are NaN), and
/// the pruned filter of that channel is NaN throughout so that it does too.
#pragma once

#include <cstdint>

#include "../numeric.cuh"

namespace convred::kernel {

/// @brief The shapes of one pruning: w (K, Cg, R, S) KCRS into wp (K, Cg, Rp, Sp), wp[k, c, i, j] =
/// w[k, c, r0 + i, s0 + j]; every int32 product below Cg R S < 2^31 (validated GEMM_K).
struct prune_taps_params {
  std::int64_t K = 0;  ///< output channels (filter rows)
  /// @var Cg
  /// @brief input channels per group, C / groups
  /// @var R
  /// @brief filter height
  /// @var S
  /// @brief filter width
  std::int32_t Cg = 0, R = 0, S = 0;
  /// @var r0
  /// @brief first kept filter row
  /// @var s0
  /// @brief first kept filter column
  /// @var Rp
  /// @brief kept filter rows
  /// @var Sp
  /// @brief kept filter columns
  std::int32_t r0 = 0, s0 = 0, Rp = 0, Sp = 0;
};

/// @brief wp = the kept taps of w (prune_taps_params); output channel k's whole slice of wp is NaN when a
/// dropped tap of k holds ±inf or NaN. One block per output channel and step of a grid-stride loop over
/// K; blockDim.x any multiple of 32. T any element type (float, double, __half, __nv_bfloat16); values are
/// copied, not converted.
template <class T>
__global__ void prune_taps_kernel(const T* __restrict__ w, T* __restrict__ wp, const prune_taps_params pp) {
  const std::int32_t full = pp.Cg * pp.R * pp.S, kept = pp.Cg * pp.Rp * pp.Sp, taps = pp.R * pp.S;
  for (std::int64_t k = blockIdx.x; k < pp.K; k += gridDim.x) {
    const T* wk = w + k * full;
    int bad = 0;
    for (std::int32_t e = static_cast<std::int32_t>(threadIdx.x); e < full; e += static_cast<std::int32_t>(blockDim.x)) {
      const std::int32_t rs = e % taps, r = rs / pp.S, s = rs - r * pp.S;
      const bool dropped = r < pp.r0 || r >= pp.r0 + pp.Rp || s < pp.s0 || s >= pp.s0 + pp.Sp;
      const double v = to_double(wk[e]);
      constexpr double most = 1.7976931348623157e308;  // DBL_MAX: beyond it, +-inf
      if (dropped && (is_nan(v) || v > most || v < -most)) bad = 1;
    }
    bad = __syncthreads_or(bad);
    T* out = wp + k * kept;
    for (std::int32_t e = static_cast<std::int32_t>(threadIdx.x); e < kept; e += static_cast<std::int32_t>(blockDim.x)) {
      const std::int32_t ij = e % (pp.Rp * pp.Sp), c = e / (pp.Rp * pp.Sp), i = ij / pp.Sp, j = ij - i * pp.Sp;
      out[e] = bad ? from_compute<T>(__int_as_float(0x7fc00000)) : wk[(c * pp.R + pp.r0 + i) * pp.S + pp.s0 + j];
    }
  }
}

}  // namespace convred::kernel
