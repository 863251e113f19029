/// @file block/conv_mainloop_simt.cuh
/// @brief Block-level SIMT implicit-GEMM conv mainloop: one (BlockM pixels x BlockN channels) tile of
/// conv2d accumulated in registers, GEMM_K staged through double-buffered shared memory.
#pragma once

#include <cstdint>

#include "conv_tile_loader.cuh"

namespace convred::block {

/// @brief Computes acc[i][j] = sum over GEMM_K of x_im2col[m_i, kk] * w[k_j, kk] for one block tile.
///
/// Operands arrive slice by slice through conv_tile_loader (shared memory, double-buffered); each thread
/// multiplies a ThreadM x ThreadN register tile with exact fp32 (fp64 for double) FMAs (math::ieee).
/// Thread t owns channel group `t % channel_groups` and pixel group `t / channel_groups`; its pixels are
/// `(i/4)*pixel_groups*4 + pg*4 + i%4` and its channels `(j/4)*channel_groups*4 + cg*4 + j%4` (4-wide
/// vector shared-memory loads, conflict-free for the default policy).
///
/// Usage: construct once per block tile (the constructor decodes this thread's pixel), then call `run`
/// for each (group, channel tile); the caller places TempStorage in shared memory.
template <class Policy, class T>
struct conv_mainloop_simt {
  using V = compute_t<T>;  ///< compute/accumulator type
  /// @var BM
  /// @brief pixels per block tile (GEMM_M rows), Policy::block_m
  /// @var BN
  /// @brief output channels per block tile (GEMM_N columns), Policy::block_n
  /// @var BK
  /// @brief GEMM_K rows per shared-memory slice, Policy::block_k
  static constexpr int BM = Policy::block_m, BN = Policy::block_n, BK = Policy::block_k;
  /// @var TM
  /// @brief accumulator rows (pixels) per thread, Policy::thread_m
  /// @var TN
  /// @brief accumulator columns (channels) per thread, Policy::thread_n
  /// @var NT
  /// @brief threads per block, Policy::threads
  static constexpr int TM = Policy::thread_m, TN = Policy::thread_n, NT = Policy::threads;
  /// @var CG
  /// @brief channel groups: threads across channels, sharing the same pixels (BN / TN)
  /// @var PG
  /// @brief pixel groups: threads across pixels (BM / TM)
  static constexpr int CG = Policy::channel_groups, PG = Policy::pixel_groups;
  static constexpr int contiguous_n = 4;      ///< tile_n(j .. j + 3) consecutive for j a multiple of 4
  static constexpr int lanes_per_pixel = CG;  ///< consecutive lanes holding the same pixels
  static constexpr int warps_per_pixel = 1;   ///< those lanes are within one warp
  /// Index of this thread's warp among the warps that share its pixels (always 0 here).
  __device__ static int warp_n() { return 0; }
  /// Operand loader: k-major stages (4-wide fragment loads); weight rows padded by 4 for bank-conflict-free
  /// transposed stores.
  using layout_a = smem_k_major<BK, BM, 0>;  ///< A (im2col) stage layout: k-major, unpadded
  using layout_b = smem_k_major<BK, BN, 4>;  ///< B (weight) stage layout: k-major, rows padded by 4
  using loader = conv_tile_loader<T, BM, BN, BK, NT, layout_a, layout_b, Policy::stages>;  ///< operand loader
  using TempStorage = typename loader::TempStorage;  ///< shared memory (caller-placed)

  loader ld;  ///< the operand loader (shared memory, parameters and this thread's decoded pixel)

  /// Decodes this thread's load pixel for the block tile starting at GEMM_M row m0.
  __device__ conv_mainloop_simt(TempStorage& s, const conv_params<T>& p, std::int64_t m0) : ld(s, p, m0) {}

  /// Loads 4 consecutive compute values from 16-byte (float) / 32-byte (double) aligned shared memory.
  __device__ static void load4(const V* src, V* dst) {
    if constexpr (sizeof(V) == 4) {
      const float4 q = *reinterpret_cast<const float4*>(src);
      dst[0] = q.x, dst[1] = q.y, dst[2] = q.z, dst[3] = q.w;
    } else {
      const double2 q0 = *reinterpret_cast<const double2*>(src);
      const double2 q1 = *reinterpret_cast<const double2*>(src + 2);
      dst[0] = q0.x, dst[1] = q0.y, dst[2] = q1.x, dst[3] = q1.y;
    }
  }

  /// Multiplies shared-memory stage `buf` into the register tile.
  __device__ void mma_stage(int buf, V (&acc)[TM][TN]) const {
    const int t = static_cast<int>(threadIdx.x);
    const int cg = t % CG, pg = t / CG;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      V a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) load4(&ld.smem.a[buf][layout_a::offset(k, i * PG * 4 + pg * 4)], &a[i * 4]);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) load4(&ld.smem.b[buf][layout_b::offset(k, j * CG * 4 + cg * 4)], &b[j * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
  }

  /// Accumulates the conv of this block's pixels with channels [k_first, k_first + BN) of group g into
  /// acc (overwritten), over GEMM_K slices [first, last) (BK rows each, loader::run; default: all of
  /// GEMM_K; an empty range leaves acc zero). Ends with a barrier, so TempStorage may be reused afterwards.
  __device__ void run(std::int32_t g, std::int64_t k_first, V (&acc)[TM][TN], std::int32_t first = 0,
                      std::int32_t last = 0x7fffffff) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = V(0);
    ld.run(g, k_first, [&](int buf) { mma_stage(buf, acc); }, first, last);
  }

  /// GEMM_M row (within the tile) of accumulator row i for this thread.
  __device__ static int tile_m(int i) { return (i / 4) * PG * 4 + (static_cast<int>(threadIdx.x) / CG) * 4 + i % 4; }
  /// GEMM_N column (within the tile) of accumulator column j for this thread.
  __device__ static int tile_n(int j) { return (j / 4) * CG * 4 + (static_cast<int>(threadIdx.x) % CG) * 4 + j % 4; }
};

}  // namespace convred::block
