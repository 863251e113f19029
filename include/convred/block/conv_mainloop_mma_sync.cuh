/// @file block/conv_mainloop_mma_sync.cuh
/// @brief Block-level tensor-core (mma.sync) implicit-GEMM conv mainloop for the tf32, tf32x3, bf16 and
/// fp16 math tags.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../policy.cuh"
#include "../warp/mma.cuh"
#include "conv_tile_loader.cuh"

namespace convred::block {

/// @brief Computes acc = x_im2col * w^T for one (BlockM pixels x BlockN channels) tile on tensor cores.
///
/// Operands arrive through conv_tile_loader as fp32 in k-major shared memory (x is read as given, NCHW or
/// NHWC, with no separate layout or precision pass); each warp converts its fragments on load (TF32 with
/// round-to-nearest, the 3xTF32 big/small split, or bf16/fp16 pairs) and issues mma.sync. Rows are padded
/// so that the scalar fragment loads of a warp hit 32 distinct banks. Accumulators are fp32, laid out as
/// acc[i][j] with pixel `tile_m(i)` and channel `tile_n(j)` (the mma C fragment: rows g, g+8 of each 16-row
/// tile, columns 2t, 2t+1 of each 8-column tile). Lanes 4g..4g+3 share pixels (`lanes_per_pixel` = 4) and
/// the WarpsN warps of a warp row share pixels (`warps_per_pixel`).
template <class Policy, class T>
struct conv_mainloop_mma_sync {
  static_assert(!std::is_same_v<T, double>, "tensor-core math policies take float, __half or __nv_bfloat16 inputs");
  using V = float;  ///< accumulator type
  using math_t = typename Policy::math;  ///< precision tag (tf32, tf32x3, bf16 or fp16)
  /// @var BM
  /// @brief pixels per block tile (GEMM_M rows), Policy::block_m
  /// @var BN
  /// @brief output channels per block tile (GEMM_N columns), Policy::block_n
  /// @var BK
  /// @brief GEMM_K rows per shared-memory slice, Policy::block_k
  /// @var NT
  /// @brief threads per block, Policy::threads (32 * WM * WN)
  static constexpr int BM = Policy::block_m, BN = Policy::block_n, BK = Policy::block_k, NT = Policy::threads;
  /// @var WM
  /// @brief warps along pixels, Policy::warps_m
  /// @var WN
  /// @brief warps along channels, Policy::warps_n
  /// @var KSTEP
  /// @brief mma depth (GEMM_K per mma.sync), Policy::mma_k: 8 for tf32/tf32x3, 16 for bf16/fp16
  static constexpr int WM = Policy::warps_m, WN = Policy::warps_n, KSTEP = Policy::mma_k;
  /// @var WTM
  /// @brief warp tile rows: pixels per warp (BM / WM)
  static constexpr int WTM = BM / WM, WTN = BN / WN;  ///< warp tile columns: channels per warp (BN / WN)
  /// @var MI
  /// @brief 16-row mma tiles per warp along pixels (WTM / 16)
  static constexpr int MI = WTM / 16, NI = WTN / 8;   ///< 8-column mma tiles per warp along channels (WTN / 8)
  /// @var TM
  /// @brief accumulator rows (pixels) per thread (2 per mma tile: rows g and g + 8)
  static constexpr int TM = 2 * MI, TN = 2 * NI;      ///< accumulator columns (channels) per thread (2 per mma tile)
  static constexpr int contiguous_n = 2;              ///< tile_n(j + 1) == tile_n(j) + 1 for j even (mma pairs)
  static constexpr int lanes_per_pixel = 4;           ///< lanes 4g..4g+3 hold the same pixels
  static constexpr int warps_per_pixel = WN;          ///< warps holding the same pixels
  static constexpr bool is_tf32 = KSTEP == 8;         ///< tf32/tf32x3: m16n8k8, one fp32 per k (else bf16/fp16 pairs)
  /// A (im2col) is k-major, row pitch 8 (tf32: k = t, column g) or 4 (16-bit pairs: k = 2t) mod 32 words,
  /// so the 32 scalar fragment loads of one instruction hit 32 distinct banks.
  static constexpr int PAD = is_tf32 ? 8 : 4;
  using layout_a = smem_k_major<BK, BM, PAD>;  ///< A (im2col) stage layout: k-major, rows padded by PAD
  /// B (weights) is n-major: a warp copies 32 consecutive k of one KCRS weight row (coalesced, conflict-
  /// free); row pitch 4 (tf32: address 4g + t) or 8 (16-bit pairs, 8-byte loads: 8g + 2t) mod 32 words.
  static constexpr int PAD_B = is_tf32 ? 4 : 8;
  using layout_b = smem_n_major<BK, BN, PAD_B>;  ///< B (weight) stage layout: n-major, rows padded by PAD_B
  /// Operand loader: fp32 stages (layout_a, layout_b), Policy::stages deep.
  using loader = conv_tile_loader<T, BM, BN, BK, NT, layout_a, layout_b, Policy::stages>;
  using TempStorage = typename loader::TempStorage;  ///< shared memory (caller-placed)

  loader ld;  ///< the operand loader (shared memory, parameters and this thread's decoded pixel)

  /// Decodes this thread's load pixel for the block tile starting at GEMM_M row m0.
  __device__ conv_mainloop_mma_sync(TempStorage& s, const conv_params<T>& p, std::int64_t m0) : ld(s, p, m0) {}

  /// This thread's lane in its warp, 0..31 (g = lane / 4 and t = lane % 4 in the mma fragments).
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
  /// Index of this thread's warp along pixels, 0..WM-1: its warp tile starts at pixel warp_m() * WTM.
  __device__ static int warp_m() { return (static_cast<int>(threadIdx.x) / 32) % WM; }
  /// Index of this thread's warp among the WN warps that share its pixels.
  __device__ static int warp_n() { return (static_cast<int>(threadIdx.x) / 32) / WM; }

  /// 3xTF32 keeps a per-stage accumulator: the tensor cores' fp32 accumulation is not IEEE
  /// round-to-nearest, and over a long GEMM_K its error grew past 1e-5 of the result (measured on the
  /// H200: 1.1e-5 to 1.4e-5 relative norm at GEMM_K = 1625 and 2304). Summing BlockK products on the
  /// tensor cores and promoting each stage's sum with an IEEE add bounds that error by the stage's sum.
  static constexpr bool promote = std::is_same_v<math_t, convred::math::tf32x3>;

  /// Multiplies shared-memory stage `buf` into the accumulators.
  __device__ void mma_stage(int buf, V (&acc)[TM][TN]) const {
    const float* A = ld.smem.a[buf];
    const float* B = ld.smem.b[buf];
    const int g = lane() / 4, t = lane() % 4;
    const int mb = warp_m() * WTM + g, nb = warp_n() * WTN + g;
    float part[promote ? TM : 1][promote ? TN : 1];
    if constexpr (promote) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) part[i][j] = 0.0f;
    }
#pragma unroll
    for (int kb = 0; kb < BK; kb += KSTEP) {
      if constexpr (is_tf32) {
        float af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          af[mi][0] = A[layout_a::offset(kb + t, mb + mi * 16)];
          af[mi][1] = A[layout_a::offset(kb + t, mb + mi * 16 + 8)];
          af[mi][2] = A[layout_a::offset(kb + t + 4, mb + mi * 16)];
          af[mi][3] = A[layout_a::offset(kb + t + 4, mb + mi * 16 + 8)];
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          bf[ni][0] = B[layout_b::offset(kb + t, nb + ni * 8)];
          bf[ni][1] = B[layout_b::offset(kb + t + 4, nb + ni * 8)];
        }
        if constexpr (std::is_same_v<math_t, convred::math::tf32>) {
          std::uint32_t a[MI][4], b[NI][2];
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int r = 0; r < 4; ++r) a[mi][r] = warp::to_tf32(af[mi][r]);
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int r = 0; r < 2; ++r) b[ni][r] = warp::to_tf32(bf[ni][r]);
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma(acc, mi, ni, a[mi], b[ni]);
        } else {  // 3xTF32, accumulated per stage in `part` and promoted to acc with an IEEE add (below)
          std::uint32_t a[MI][4], as[MI][4], b[NI][2], bs[NI][2];
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int r = 0; r < 4; ++r) warp::split_tf32(af[mi][r], a[mi][r], as[mi][r]);
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int r = 0; r < 2; ++r) warp::split_tf32(bf[ni][r], b[ni][r], bs[ni][r]);
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {  // small terms first, the big product last
              mma(part, mi, ni, as[mi], b[ni]);
              mma(part, mi, ni, a[mi], bs[ni]);
              mma(part, mi, ni, a[mi], b[ni]);
            }
        }
      } else {  // bf16 / fp16: registers hold (k, k+1) pairs
        std::uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int k = kb + 2 * t + (r / 2) * 8, m = mb + mi * 16 + (r % 2) * 8;
            a[mi][r] = pack(A[layout_a::offset(k, m)], A[layout_a::offset(k + 1, m)]);
          }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int k = kb + 2 * t + r * 8, n = nb + ni * 8;
            b[ni][r] = pack(B[layout_b::offset(k, n)], B[layout_b::offset(k + 1, n)]);
          }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma(acc, mi, ni, a[mi], b[ni]);
      }
    }
    if constexpr (promote) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += part[i][j];
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
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    ld.run(g, k_first, [&](int buf) { mma_stage(buf, acc); }, first, last);
  }

  /// GEMM_M row (within the block tile) of accumulator row i for this thread.
  __device__ static int tile_m(int i) { return warp_m() * WTM + (i / 2) * 16 + (i % 2) * 8 + lane() / 4; }
  /// GEMM_N column (within the block tile) of accumulator column j for this thread.
  __device__ static int tile_n(int j) { return warp_n() * WTN + (j / 2) * 8 + 2 * (lane() % 4) + (j % 2); }

 private:
  __device__ static std::uint32_t pack(float lo, float hi) {
    if constexpr (std::is_same_v<math_t, convred::math::bf16>) {
      return warp::pack_bf16x2(lo, hi);
    } else {
      return warp::pack_f16x2(lo, hi);
    }
  }
  /// One mma of tile (mi, ni) into its C fragment inside acc.
  __device__ static void mma(V (&acc)[TM][TN], int mi, int ni, const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    float d[4] = {acc[2 * mi][2 * ni], acc[2 * mi][2 * ni + 1], acc[2 * mi + 1][2 * ni], acc[2 * mi + 1][2 * ni + 1]};
    if constexpr (is_tf32) {
      warp::mma_tf32_16x8x8(d, a, b);
    } else if constexpr (std::is_same_v<math_t, convred::math::bf16>) {
      warp::mma_bf16_16x8x16(d, a, b);
    } else {
      warp::mma_f16_16x8x16(d, a, b);
    }
    acc[2 * mi][2 * ni] = d[0], acc[2 * mi][2 * ni + 1] = d[1], acc[2 * mi + 1][2 * ni] = d[2],
                  acc[2 * mi + 1][2 * ni + 1] = d[3];
  }
};

}  // namespace convred::block
