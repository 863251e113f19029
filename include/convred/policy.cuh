/// @file policy.cuh
/// @brief Tile policies (plain constexpr types) and math-precision tags.
#pragma once

#include <type_traits>

namespace convred {

/// @brief Math-precision tags: how a kernel multiplies (never a silent default; see README "Precision").
namespace math {
/// Exact IEEE fp32 (or fp64 for double) fused multiply-add on the CUDA cores (FFMA / DFMA). Matches a
/// float64 reference to ~1e-6 relative (fp32). Note: PyTorch's default conv2d math on Ampere and later
/// is TF32 (torch.backends.cudnn.allow_tf32 = True), which is less accurate (~1e-4).
struct ieee {};
}  // namespace math

/// @brief SIMT implicit-GEMM tile policy for the CUDA-core (`math::ieee`) kernels.
///
/// A thread block computes a tile of `BlockM` output pixels (GEMM_M) by `BlockN` output channels
/// (GEMM_N), stepping through GEMM_K = (C/groups)*R*S in slices of `BlockK` staged in shared memory
/// (double-buffered). Each thread holds `ThreadM` x `ThreadN` fp32 (or fp64) accumulators in registers.
/// The `BlockN / ThreadN` threads that share a pixel group form one logical warp, so the reduction
/// across channels is a `cub::WarpReduce` of that width. `MinBlocksPerSM` feeds `__launch_bounds__`.
///
/// Requirements (checked by static_assert): ThreadM and ThreadN multiples of 4; BlockN / ThreadN a power of
/// two <= 32; threads a multiple of 32 and of BlockM; BlockK*BlockM and BlockK*BlockN multiples of threads.
template <int BlockM, int BlockN, int BlockK, int ThreadM, int ThreadN, int MinBlocksPerSM = 1>
struct simt_policy {
  using math = math::ieee;                                  ///< precision tag
  static constexpr int block_m = BlockM;                    ///< output pixels per block (GEMM_M tile)
  static constexpr int block_n = BlockN;                    ///< output channels per block (GEMM_N tile)
  static constexpr int block_k = BlockK;                    ///< GEMM_K slice per shared-memory stage
  static constexpr int thread_m = ThreadM;                  ///< pixels per thread
  static constexpr int thread_n = ThreadN;                  ///< channels per thread
  static constexpr int min_blocks_per_sm = MinBlocksPerSM;  ///< occupancy hint for __launch_bounds__
  static constexpr int channel_groups = BlockN / ThreadN;   ///< threads across channels (logical warp)
  static constexpr int pixel_groups = BlockM / ThreadM;     ///< threads across pixels
  static constexpr int threads = channel_groups * pixel_groups;  ///< threads per block

  static_assert(ThreadM % 4 == 0 && ThreadN % 4 == 0, "thread tile must be a multiple of 4 each way");
  static_assert(BlockM % ThreadM == 0 && BlockN % ThreadN == 0, "block tile must divide by thread tile");
  static_assert(channel_groups <= 32 && (channel_groups & (channel_groups - 1)) == 0,
                "BlockN / ThreadN must be a power of two <= 32 (one logical warp)");
  static_assert(threads % 32 == 0 && threads % BlockM == 0, "threads must be a multiple of 32 and BlockM");
  static_assert((BlockK * BlockM) % threads == 0 && (BlockK * BlockN) % threads == 0,
                "each thread must stage a whole number of elements");
  static_assert(BlockK % ((BlockK * BlockN) / threads) == 0, "weight staging must tile BlockK");
};

/// @brief Default SIMT policy for element type T (float, __half, __nv_bfloat16: fp32 compute):
/// 256 pixels x 128 channels x 8 deep, 8x8 per thread, 512 threads, one block per SM (128 registers).
/// Chosen by measurement on the H200 seed case (bench/NOTES.md): 17.6 ms against 18.7 ms for 128x128x8
/// with two blocks per SM. 64x64x8 with 4x4 per thread for double (fp64 accumulators need twice the
/// registers).
template <class T>
struct default_simt_policy {
  using type = simt_policy<256, 128, 8, 8, 8, 1>;
};
/// @brief Default SIMT policy for double.
template <>
struct default_simt_policy<double> {
  using type = simt_policy<64, 64, 8, 4, 4, 2>;
};

/// @brief Tag meaning "choose the default policy for the element type" in device entry points.
struct default_policy {};

namespace detail {
template <class Policy, class T>
using resolve_policy_t =
    std::conditional_t<std::is_same_v<Policy, default_policy>, typename default_simt_policy<T>::type, Policy>;
}  // namespace detail

}  // namespace convred
