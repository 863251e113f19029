/// @file block/conv_patch_loader.cuh
/// @brief Producer side of the packed-filter wgmma kernel: one thread copies a stage (filter slice + input
/// patch) into shared memory with TMA, completing on an mbarrier.
#pragma once

#include <cstdint>

#include "../detail/tma.cuh"
#include "../kernel/params.cuh"

namespace convred::block {

/// @brief Issues, from one thread, the asynchronous copies of one stage and arms its mbarrier: stage `kt`
/// of the packed filter (b_bytes contiguous bytes, one bulk copy) and channels [kt*block_c,
/// kt*block_c + block_c) of the input patch of a tile (one 4D TMA box of (rp, bh, block_c, 1) elements
/// of x at (w0, h0, kt*block_c, n), w0 a multiple of 4 (TMA reads rows from 16-byte aligned addresses):
/// negative or past-the-end coordinates read as zero, which is the conv's zero padding and the C tail). The patch is the union of the R x S windows of the tile's pixels
/// (stride 1, dilation 1), so each input element is copied once per tile instead of R*S times (im2col).
template <class Policy>
struct conv_patch_loader {
  static constexpr int BC = Policy::block_c;  ///< input channels per stage

  /// Copies stage `kt` of the tile whose patch starts at (n, h0, w0) into `stage` (shared memory,
  /// 128-byte aligned); `full` completes when every byte has landed.
  __device__ static void load(unsigned char* stage, std::uint64_t* full, const void* x_map,
                              const kernel::wgmma_conv_params& p, int n, int h0, int w0, int kt) {
    convred::detail::mbarrier_arrive_expect_tx(full, static_cast<std::uint32_t>(p.b_bytes + p.a_bytes));
    const auto* src_b = static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(kt) * p.b_bytes;
    convred::detail::bulk_copy_g2s(stage, src_b, static_cast<std::uint32_t>(p.b_bytes), full);
    convred::detail::tma_load_4d(stage + p.b_bytes, x_map, w0, h0, kt * BC, n, full);
  }
};

}  // namespace convred::block
