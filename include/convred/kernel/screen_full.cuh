/// @file kernel/screen_full.cuh
/// @brief Certified screening's full recompute (docs/screening.md): every channel of the output pixels
/// that kernel::screen_recompute_kernel lists (a register-tiled SGEMM over their gathered patches, exact
/// fp32 in the SIMT kernel's FMA order), then the op over all K channels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/warp/warp_reduce.cuh>

#include "../detail/load.cuh"
#include "../functional.cuh"
#include "../problem.cuh"
#include "screen_recompute.cuh"

namespace convred::kernel {

/// Threads of screen_full_kernel (16 x 16: 16 pixel groups of 4 pixels, 16 channel groups of 8 channels).
inline constexpr int screen_full_threads = 256;
/// Listed pixels per tile of screen_full_kernel (BM: a block's rows of the gathered im2col tile).
inline constexpr int screen_full_tile_pixels = 64;
/// Channels per tile of screen_full_kernel (BN; a block loops over the channel tiles for K > 128).
inline constexpr int screen_full_tile_channels = 128;
/// GEMM_K taps per shared-memory stage of screen_full_kernel (BK).
inline constexpr int screen_full_tile_taps = 16;
/// Shared-memory stages of screen_full_kernel (a cp.async pipeline: NS - 1 stages in flight during the FMAs).
inline constexpr int screen_full_stages = 3;

/// One GEMM_K tap kk = (c * R + r) * S + s of screen_full_kernel's per-stage table: r * dil_h, s * dil_w
/// and the tap's byte offset in x from a pixel's window corner, 4 (c * cs + r * dil_h * hs + s * dil_w *
/// ws) with cs, hs, ws the element strides of c, h and w in x's layout. A tap past GEMM_K has dh = -2^30:
/// every pixel's h0 + dh is then negative, so it reads nothing (x = 0).
struct alignas(16) screen_full_tap {
  std::int32_t dh;     ///< r * dil_h (-2^30 past GEMM_K)
  std::int32_t dw;     ///< s * dil_w
  std::int64_t delta;  ///< byte offset in x
};

/// @brief Pass 2's full recompute (groups 1; screen_full_threads threads, any grid; 37,632 bytes of static
/// shared memory): every channel of each listed pixel in exact fp32, then Op over all K channels into y
/// and indices. A register-tiled SGEMM over a gathered im2col tile:
///
/// - Work: the a.stats->full pixels listed in a.full (m = (n * P + oh) * Q + ow), in tiles of BM =
///   screen_full_tile_pixels (64) consecutive list entries; block b takes tiles b, b + gridDim.x, ... (the
///   count is read on the device, so any grid works; a block without a tile returns at once). The last
///   tile's missing pixels gather zeros and write nothing.
/// - Per pixel tile and channel tile g (BN = screen_full_tile_channels = 128 channels: g = 0, 128, ... < K,
///   a loop inside the block; the Op states stay in registers), the block computes the BM x BN dot products
///   acc[i][k] = sum over kk of X[kk][i] * wt[kk][g + k], GEMM_K in stages of BK = screen_full_tile_taps (16)
///   taps, each stage copied into shared memory with cp.async (screen_full_stages = 3 buffers: two stages in
///   flight during a stage's FMAs; one __syncthreads per stage):
///   - xs[kk][i] ([tap][pixel]): pixel i's patch value at tap kk = (c * R + r) * S + s, that is
///     x[n, c, oh * stride_h - pad_h + r * dil_h, ow * stride_w - pad_w + s * dil_w] in p.x_layout (NCHW or
///     NHWC), 0 in the padding and past GEMM_K. Thread t copies pixel t % 64 at the stage's taps t / 64 + 4 j
///     (j < 4). The pixel's window corner (h0, w0) and byte address are computed once per tile (the only
///     64-bit divisions); each tap's (r * dil_h, s * dil_w, byte offset) comes from a table in shared memory
///     (screen_full_tap, 16 entries per stage, written by 16 threads with 32-bit divisions an iteration
///     before the stage's copies are issued): per element its entry's two 8-byte reads, two adds, two unsigned
///     compares, a 64-bit add and the 4-byte copy (cp.async.ca: the neighbouring taps' reads of x hit L1);
///   - ws[kk][k] ([tap][channel]) = a.wt[kk * K + g + k] (the transposed filter, L x K: rows of 128
///     consecutive channels, coalesced), 0 for g + k >= K or kk >= L; in 16-byte copies when K % 4 == 0 and
///     a.wt is 16-byte aligned (the family's scratch is), else in 4-byte copies.
/// - Thread (ty, tx) = (t / 16, t % 16) holds a 4 x 8 register tile: pixels 4 ty + {0..3} and channels
///   g + 4 tx + {0..3}, g + 64 + 4 tx + {0..3}; per tap it reads one float4 of xs (the warp's two pixel
///   groups: a broadcast) and two float4 of ws (conflict-free) and runs 32 FMAs.
///
/// Order of the FMAs, and why each value is bitwise the SIMT kernel's (and the former one-warp-per-pixel
/// kernel's): each accumulator starts at 0.0f and runs acc = fmaf(x, w, acc) over kk = 0, 1, ..., L - 1 in
/// that order, one FMA per tap and nothing else (a padding tap: x = +0 times the filter's value, as in the
/// SIMT kernel); the stages cut the chain without reordering it, and the last, partial stage runs only its
/// L - kk0 taps (its zero fill is never read). Then screen_simt_tail (the SIMT kernel's 0 x 0 FMAs of its
/// padded last slice), + bias[k] (+ 0.0f without a bias) and apply_epilogue, exactly as before. Op over all
/// K channels: each thread folds its 8 channels per pixel into one state per pixel, channel tile after
/// channel tile, then cub::WarpReduce over the 16 lanes that share ty (logical warps of 16). Op's merge for
/// min, max, argmin and argmax is associative and commutative with its NaN, lowest-index tie and +-0
/// rules, so the result does not depend on the grouping (which is fixed anyway: deterministic).
///
/// Expected rate (a model from the SASS of this code; not yet measured on a GPU):
/// - Shared memory: per tap a thread reads 3 x 16 bytes for 32 FMAs (1.5 B/FMA per thread); per warp the
///   distinct bytes are 32 (x, broadcast) + 2 x 256 (w) for 1024 FMAs, 0.53 B/FMA, about half of what an
///   SM's shared memory delivers (128 B per clock) at its FP32 rate (128 FMA per clock): FMA-bound.
/// - Issue: per full stage a thread issues 512 FFMA among ~660 instructions (48 LDS.128; ~45 for the four
///   gathered copies, ~20 for the two 16-byte filter copies; the loop, wait and barrier), ~78 % FFMA; warp
///   0's 16 lanes add ~90 for the next table entries. ptxas: ~115 registers, no spills, 2 blocks per SM.
/// - L2 / memory: a tile reads (64 + 128) x 4 bytes per tap for 8192 FMAs (0.09 B/FMA), issued two stages
///   ahead of its FMAs. Scattered pixels touch ~64 x 3 sectors of x each on the seed (~8 KB), at most x
///   itself (1.07 GB) in all.
/// - H200 (132 SMs, ~30-33 TFMA/s peak at 1.75-1.98 GHz): 18-24 TFMA/s, about the SIMT kernel's rate (~18
///   on the seed). Seed (K = 128, L = 576): all 4.13 M pixels (305 G FMA) ~13-17 ms; 73,174 pixels (5.4 G
///   FMA) ~0.25-0.35 ms (1,144 tiles on 264 resident blocks: 4-5 rounds of ~55-70 us; the scattered reads
///   of x, ~0.6 GB at a few TB/s, take about as long and overlap). A K below 128 costs a full channel
///   tile (zero weights).
template <class Op, class Epilogue>
__global__ void __launch_bounds__(screen_full_threads, 2) screen_full_kernel(screen_params a, Op op, Epilogue epi) {
  using state_t = typename Op::template accum_t<float>;
  constexpr int T = screen_full_threads, BM = screen_full_tile_pixels, BN = screen_full_tile_channels,
                BK = screen_full_tile_taps, NS = screen_full_stages, TM = 4, TN = 8,
                TX = BN / TN;  // TX: threads of a pixel group (16)
  static_assert(TN == 8 && BN == 2 * 4 * TX && T == (BM / TM) * TX && T % 32 == 0 && 32 % TX == 0,
                "the 4 x 8 register tile: channels 4 tx + {0..3} and BN / 2 + 4 tx + {0..3}");
  constexpr int XG = T / BM, XPT = BK / XG;  // the gather: tap step (4), elements per thread and stage (4)
  constexpr int WG = T / BN, WPT = BK / WG;  // the filter: tap step (2), elements per thread and stage (8)
  constexpr int VG = WG * 4;                 // the filter in 16-byte copies: tap step (8), WPT / 4 copies
  static_assert(T % BM == 0 && BK % XG == 0 && T % BN == 0 && BK % WG == 0 && WPT % 4 == 0 && BK <= T && NS >= 2,
                "the staging");
  using reduce_t = cub::WarpReduce<state_t, TX>;
  __shared__ __align__(16) float xs[NS][BK][BM];  // [stage buffer][tap][pixel]
  __shared__ __align__(16) float ws[NS][BK][BN];  // [stage buffer][tap][channel]
  __shared__ screen_full_tap taps[NS][BK];        // [stage buffer][tap]
  __shared__ typename reduce_t::TempStorage temp[T / TX];
  const conv2d_problem& p = a.p;
  const std::int64_t P = p.P(), Q = p.Q(), PQ = P * Q, count = static_cast<std::int64_t>(a.stats->full);
  const int K = static_cast<int>(p.K);              // <= 65535 (screen_max_channels)
  const int L = static_cast<int>(p.C * p.R * p.S);  // <= 2^20 (screen_max_gemm_k)
  const int tid = static_cast<int>(threadIdx.x), tx = tid % TX, ty = tid / TX;
  const int gj = tid % BM, gt = tid / BM;  // the gather: this thread's pixel and first tap of a stage
  const int fk = tid % BN, ft = tid / BN;  // the filter: this thread's channel and first tap of a stage
  // the filter's rows in 16-byte copies when they are 16-byte aligned (a.wt is, in the family's scratch):
  // this thread's first tap and channel
  const bool wvec = K % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.wt) % 16 == 0;
  const int vt = tid / (BN / 4), vk = 4 * (tid % (BN / 4));
  // the table entry of tap kk (threads tid < BK write a stage's)
  auto tap_of = [&](int kk) {
    screen_full_tap e{-(1 << 30), 0, 0};
    if (kk < L) {
      const int RS = static_cast<int>(p.R * p.S), S = static_cast<int>(p.S);
      const int c = kk / RS, rs = kk - c * RS, r = rs / S, s = rs - r * S;
      e.dh = r * static_cast<int>(p.dil_h), e.dw = s * static_cast<int>(p.dil_w);
      const std::int64_t hw = static_cast<std::int64_t>(e.dh) * p.W + e.dw;
      e.delta = (p.x_layout == layout::nhwc ? hw * p.C + c : c * p.H * p.W + hw) * std::int64_t{sizeof(float)};
    }
    return e;
  };
  for (std::int64_t tile = blockIdx.x; tile * BM < count; tile += gridDim.x) {  // (block-uniform)
    // pixel gj's window corner and its byte address in x (a missing pixel: a corner far outside, never read)
    const char* xb = reinterpret_cast<const char*>(a.x);
    int h0 = -(1 << 30), w0 = -(1 << 30);
    if (const std::int64_t i = tile * BM + gj; i < count) {
      const std::int64_t m = a.full[i], n = m / PQ, pq = m - n * PQ, oh = pq / Q, ow = pq - oh * Q;
      h0 = static_cast<int>(oh * p.stride_h - p.pad_h), w0 = static_cast<int>(ow * p.stride_w - p.pad_w);
      const std::int64_t corner = p.x_layout == layout::nhwc ? (n * p.H + h0) * p.W * p.C + std::int64_t{w0} * p.C
                                                              : n * p.C * p.H * p.W + std::int64_t{h0} * p.W + w0;
      xb += corner * std::int64_t{sizeof(float)};  // (outside x for a corner in the padding: read with a tap only)
    }
    state_t st[TM];
#pragma unroll
    for (int q = 0; q < TM; ++q) st[q] = Op::template identity<float>();
    for (int g = 0; g < K; g += BN) {  // (block-uniform)
      // the filter: this thread's first copy of the next stage issued, and whether its channels are < K
      const float* wnext = a.wt + (wvec ? std::int64_t{vt} * K + g + vk : std::int64_t{ft} * K + g + fk);
      const bool kin = g + (wvec ? vk : fk) < K;
      // stage j (taps j * BK ...) into buffer b: this thread's XPT patch values and WPT weights
      auto issue = [&](int j, int b) {
        const int kk0 = j * BK;
        screen_full_tap tp[XPT];  // the taps first: a copy writes shared memory, so a later read waits for it
#pragma unroll
        for (int e = 0; e < XPT; ++e) tp[e] = taps[b][gt + XG * e];
#pragma unroll
        for (int e = 0; e < XPT; ++e) {
          const bool ok = static_cast<unsigned>(h0 + tp[e].dh) < static_cast<unsigned>(p.H) &&
                          static_cast<unsigned>(w0 + tp[e].dw) < static_cast<unsigned>(p.W);
          convred::detail::cp_async_or_zero(&xs[b][gt + XG * e][gj], reinterpret_cast<const float*>(xb + tp[e].delta),
                                            ok);
        }
        if (wvec) {  // 16-byte copies: channels g + vk + {0..3} at taps vt + 8 e
#pragma unroll
          for (int e = 0; e < WPT / 4; ++e) {
            const int t = vt + VG * e;
            convred::detail::cp_async16_or_zero(&ws[b][t][vk], wnext + static_cast<std::int64_t>(VG * e) * K,
                                                kin && kk0 + t < L);
          }
        } else {  // 4-byte copies: channel g + fk at taps ft + 2 e
#pragma unroll
          for (int e = 0; e < WPT; ++e) {
            const int t = ft + WG * e;
            convred::detail::cp_async_or_zero(&ws[b][t][fk], wnext + static_cast<std::int64_t>(WG * e) * K,
                                              kin && kk0 + t < L);
          }
        }
        wnext += std::int64_t{BK} * K;  // (the stages are issued in order)
      };
      float acc[TM][TN];
#pragma unroll
      for (int q = 0; q < TM; ++q)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[q][j] = 0.0f;
      // tap e of buffer b: 32 FMAs
      auto fma_tap = [&](int b, int e) {
        const float4 xv = *reinterpret_cast<const float4*>(&xs[b][e][TM * ty]);
        const float4 w0v = *reinterpret_cast<const float4*>(&ws[b][e][4 * tx]);
        const float4 w1v = *reinterpret_cast<const float4*>(&ws[b][e][BN / 2 + 4 * tx]);
        const float xa[TM] = {xv.x, xv.y, xv.z, xv.w};
        const float wa[TN] = {w0v.x, w0v.y, w0v.z, w0v.w, w1v.x, w1v.y, w1v.z, w1v.w};
#pragma unroll
        for (int q = 0; q < TM; ++q)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[q][j] = fmaf(xa[q], wa[j], acc[q][j]);
      };
      const int stages = (L + BK - 1) / BK;
      __syncthreads();  // the previous channel or pixel tile's buffers and tables are consumed
      if (tid < BK) {
#pragma unroll
        for (int j = 0; j < NS; ++j) taps[j][tid] = tap_of(j * BK + tid);
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < NS - 1; ++j) {
        if (j < stages) issue(j, j);
        convred::detail::cp_async_commit();
      }
      for (int j = 0, b = 0; j < stages; ++j, b = b + 1 == NS ? 0 : b + 1) {  // (block-uniform)
        convred::detail::cp_async_wait<NS - 2>();  // this thread's copies of stage j have landed
        __syncthreads();  // everyone's have, and stage j - 1's buffer is consumed
        const int bn = b == 0 ? NS - 1 : b - 1;  // buffer of stage j + NS - 1 (stage j - 1's)
        if (j + NS - 1 < stages) issue(j + NS - 1, bn);
        convred::detail::cp_async_commit();
        if (tid < BK) taps[b][tid] = tap_of((j + NS) * BK + tid);  // stage j + NS's (read after 1 barrier)
        if ((j + 1) * BK <= L) {
#pragma unroll
          for (int e = 0; e < BK; ++e) fma_tap(b, e);
        } else {  // the last, partial stage: exactly its L - j * BK taps
#pragma unroll 1
          for (int e = 0; e < L - j * BK; ++e) fma_tap(b, e);
        }
      }
      // this thread's channels into its pixels' states
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int k = g + (j < 4 ? 4 * tx + j : BN / 2 + 4 * tx + (j - 4));
        if (k >= K) continue;
        const float bk = a.bias ? a.bias[k] : 0.0f;
#pragma unroll
        for (int q = 0; q < TM; ++q)
          st[q] = op(st[q], Op::template make<float>(apply_epilogue(epi, screen_simt_tail(acc[q][j], L) + bk, k), k));
      }
    }
    // Op over the 16 lanes of each pixel group; lane tx = 0 writes
#pragma unroll
    for (int q = 0; q < TM; ++q) {
      const state_t r = reduce_t(temp[ty]).Reduce(st[q], op);
      __syncwarp();  // temp[ty] is reused next (CUB's rule for WarpReduce storage)
      const std::int64_t i = tile * BM + TM * ty + q;
      if (tx == 0 && i < count) {
        const std::int64_t m = a.full[i];
        if (a.y) a.y[m] = Op::template value<float>(r, p.K);
        if constexpr (Op::has_index) {
          if (a.indices) a.indices[m] = Op::template index<float>(r);
        }
      }
    }
  }
}

}  // namespace convred::kernel
