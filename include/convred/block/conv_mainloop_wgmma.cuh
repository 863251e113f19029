/// @file block/conv_mainloop_wgmma.cuh
/// @brief Block-level Hopper (sm_90a) implicit-GEMM conv mainloop: wgmma with both operands in shared
/// memory, A (the input patch planes) read at a shifted descriptor per filter tap, B the packed filter.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../kernel/params.cuh"
#include "../policy.cuh"
#include "../warpgroup/wgmma.cuh"

namespace convred::block {

/// @brief Accumulates one stage of a 4 x 64 pixel x 128-channel tile on tensor cores with wgmma.
///
/// Warpgroup g (threads 128g..128g+127) owns output rows 2g and 2g+1 of the tile (accumulators d[0], d[1]:
/// one m64 tile each, 64 fp32 per thread, the wgmma D fragment, see warpgroup/wgmma.cuh). Per stage it
/// issues, for every filter tap (r, s) and both rows, one m64n128 wgmma whose A descriptor starts in the
/// stage's planes (block::conv_patch_loader) at pixel ((row + r) * pw + s): the 64 pixels of an output row
/// segment read with the tap's shift, no data moved. GEMM_K is ordered (r, s, c) within a stage. All of
/// a stage's wgmmas (2 R S, or 6 R S for 3xTF32: small terms first, as CUTLASS orders them) form one
/// commit group, so the tensor pipe sees one long queue per stage instead of a round trip per tap.
///
/// Accumulator shape for block::reduce_epilogue: acc[i][j] with i = 2 * row + half (TM = 4 pixels per
/// thread: columns 16w + g and 16w + g + 8 of rows 2g and 2g+1) and j = 2 * n8 + e (TN = 32 channels:
/// 8 n8 + 2t + e); lanes 4g'..4g'+3 share pixels (`lanes_per_pixel` = 4), one warp per pixel.
template <class Policy>
struct conv_mainloop_wgmma {
  using V = float;                                     ///< accumulator type
  using math_t = typename Policy::math;                ///< precision tag
  static constexpr int BM = Policy::block_m;           ///< pixels per tile (256 = tile_h x tile_w)
  static constexpr int NT = Policy::consumer_threads;  ///< consumer threads (256)
  static constexpr int TM = 4;                         ///< accumulator pixel rows per thread
  static constexpr int TN = 32;                        ///< accumulator channels per thread
  static constexpr int lanes_per_pixel = 4;            ///< lanes 4g..4g+3 hold the same pixels
  static constexpr int warps_per_pixel = 1;            ///< one warp holds all 128 channels of its pixels
  static constexpr bool x3 = Policy::parts == 2;       ///< 3xTF32: big and small parts
  /// wgmma kind of warpgroup::mma_ss_m64n128: 0 tf32, 1 bf16, 2 fp16
  static constexpr int kind = Policy::is_tf32 ? 0 : (std::is_same_v<math_t, math::bf16> ? 1 : 2);
  /// bytes of one filter tap's 128 x block_c slice in shared memory
  static constexpr std::uint32_t tap_bytes = 128u * Policy::block_c * Policy::filter_elem_bytes;
  static_assert(Policy::tile_w == 64 && Policy::tile_h == 4, "conv_mainloop_wgmma: tiles are 4 rows of 64 pixels");

  /// Lane in the warp (lane = 4g + t).
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
  /// Warp index within its warpgroup (0..3).
  __device__ static int warp_in_group() { return (static_cast<int>(threadIdx.x) / 32) % 4; }
  /// Tile pixel (row * 64 + column) of accumulator row i.
  __device__ static int tile_m(int i) {
    return (static_cast<int>(threadIdx.x) / 128) * 128 + (i / 2) * 64 + 16 * warp_in_group() + lane() / 4 + 8 * (i % 2);
  }
  /// Output channel of accumulator column j.
  __device__ static int tile_n(int j) { return 8 * (j / 2) + 2 * (lane() % 4) + (j % 2); }

  /// Keeps the compiler from moving accesses of r across the wgmma fences and waits (no instruction).
  __device__ static void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
  /// fence_operand on every accumulator.
  __device__ static void fence_acc(float (&d)[2][64]) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(d[m][i]);
  }

  /// Issues the wgmmas of one staged (filter slice, planes) pair into d as one commit group (not waited
  /// for). `stage` holds the filter slice (b_bytes) then the planes (parts x part_bytes). `first`: the
  /// first stage of a tile, whose first wgmma per row overwrites d (scale-d = 0) instead of adding.
  /// 3x3 and 1x1 filters run a fully unrolled tap loop (no loop-carried accumulators for ptxas to fence).
  __device__ static void run_stage(const unsigned char* stage, float (&d)[2][64], bool first,
                                   const kernel::wgmma_conv_params& p) {
    if (p.R == 3 && p.S == 3)
      issue<3, 3>(stage, d, first, p);
    else if (p.R == 1 && p.S == 1)
      issue<1, 1>(stage, d, first, p);
    else
      issue<0, 0>(stage, d, first, p);
  }

 private:
  /// run_stage for an R x S filter known at compile time (FR, FS > 0) or at run time (FR = FS = 0).
  template <int FR, int FS>
  __device__ static void issue(const unsigned char* stage, float (&d)[2][64], bool first,
                               const kernel::wgmma_conv_params& p) {
    const int R = FR > 0 ? FR : p.R, S = FS > 0 ? FS : p.S;
    const unsigned char* planes = stage + p.b_bytes;
    const int row0 = 2 * (static_cast<int>(threadIdx.x) / 128);
    // A: K-major no-swizzle, core matrices 8 pixels x 16 bytes: LBO = one plane (the next E channels),
    // SBO = 128 bytes (the next 8 pixels); B: LBO 128 bytes (next E channels), SBO 256 (next 8 channels)
    const std::uint64_t a0 = warpgroup::make_smem_desc(planes + row0 * p.pw * 16, p.plane_bytes, 128);
    const std::uint64_t b0 = warpgroup::make_smem_desc(stage, 128, 256);
    const std::uint64_t a_small = static_cast<std::uint64_t>(p.part_bytes) >> 4;
    const std::uint64_t b_small = (static_cast<std::uint64_t>(R * S) * tap_bytes) >> 4;
    const std::uint64_t row_step = static_cast<std::uint64_t>(p.pw);  // one patch row, in 16-byte units
    warpgroup::fence();
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int tap = r * S + s;
        const std::uint64_t b = b0 + ((static_cast<std::uint64_t>(tap) * tap_bytes) >> 4);
        const std::uint64_t a = a0 + static_cast<std::uint64_t>(r) * row_step + static_cast<std::uint64_t>(s);
        const bool acc = !(first && tap == 0);
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const std::uint64_t am = a + static_cast<std::uint64_t>(mt) * row_step;
          if constexpr (x3) {
            warpgroup::mma_ss_m64n128<kind>(d[mt], am + a_small, b, acc);
            warpgroup::mma_ss_m64n128<kind>(d[mt], am, b + b_small);
            warpgroup::mma_ss_m64n128<kind>(d[mt], am, b);
          } else {
            warpgroup::mma_ss_m64n128<kind>(d[mt], am, b, acc);
          }
        }
      }
    warpgroup::commit();
  }
};

}  // namespace convred::block
