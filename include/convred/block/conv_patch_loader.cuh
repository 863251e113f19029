/// @file block/conv_patch_loader.cuh
/// @brief Block-level cp.async loads of one stage of the packed-filter wgmma kernel: the filter slice and
/// the input patch of a tile.
#pragma once

#include <cstdint>

#include "../detail/load.cuh"
#include "../kernel/params.cuh"

namespace convred::block {

/// @brief Issues (does not commit or wait for) the cp.async copies of one stage: stage `kt` of the packed
/// filter (b_bytes contiguous bytes, 16-byte copies) and channels [kt*block_c, kt*block_c + block_c) of
/// the input patch of a tile (`ph` rows x `pw` columns from (p0 - pad_h, q0 - pad_w), 4-byte copies, zero
/// outside the image and past C). Warp w copies patch rows w, w + NT/32, ...; a warp's lanes copy
/// consecutive columns (coalesced). The patch is the union of the R x S windows of the tile's pixels
/// (stride 1, dilation 1), so each input element is copied once per tile instead of R*S times (im2col).
template <class Policy>
struct conv_patch_loader {
  static constexpr int NT = Policy::threads;  ///< threads per block
  static constexpr int BC = Policy::block_c;  ///< input channels per stage

  /// Copies stage `kt` of tile `tile` into `stage` (shared memory, 128-byte aligned).
  __device__ static void load(unsigned char* stage, const kernel::wgmma_conv_params& p, std::int64_t tile, int kt) {
    const int tid = static_cast<int>(threadIdx.x);
    const auto* src_b = static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(kt) * p.b_bytes;
    for (int i = tid; i < p.b_bytes / 16; i += NT) detail::cp_async_16(stage + 16 * i, src_b + 16 * i);

    const std::int64_t tq = tile % p.tiles_q, rest = tile / p.tiles_q;
    const std::int64_t tp = rest % p.tiles_p, n = rest / p.tiles_p;
    const int h0 = static_cast<int>(tp) * p.th - p.pad_h;
    const int w0 = (static_cast<int>(tq) << p.tw_log2) - p.pad_w;
    const int c0 = kt * BC;
    float* patch = reinterpret_cast<float*>(stage + p.b_bytes);
    const int lane = tid % 32;
    for (int row = tid / 32; row < BC * p.ph; row += NT / 32) {
      const int c = row / p.ph, r = row - c * p.ph, h = h0 + r;
      const bool row_ok = c0 + c < p.C && h >= 0 && h < p.H;
      const float* src = row_ok ? p.x + ((n * p.C + c0 + c) * p.H + h) * p.W : p.x;
      float* dst = patch + c * p.cs + r * p.rp;
      for (int col = lane; col < p.pw; col += 32) {
        const int w = w0 + col;
        const bool ok = row_ok && w >= 0 && w < p.W;
        detail::cp_async_or_zero(dst + col, ok ? src + w : p.x, ok);
      }
    }
  }
};

}  // namespace convred::block
