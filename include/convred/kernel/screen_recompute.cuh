/// @file kernel/screen_recompute.cuh
/// @brief Certified screening's pass 2 (docs/screening.md; the bound, pass 1's op and the statistics are in
/// kernel/screen.cuh): the exact fp32 recompute of the channels the bound cannot rule out
/// (screen_recompute_kernel), and of every channel of the pixels it lists (screen_full_kernel, a
/// register-tiled SGEMM over their gathered patches).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/warp/warp_reduce.cuh>

#include "../detail/load.cuh"
#include "../functional.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "screen.cuh"

namespace convred::kernel {

/// @brief Pass 2's arguments: the problem, the tensors (x, w, bias as the caller gave them), pass 1's
/// packed outputs, the stats, the precision, |scale|, the list of pixels recomputed in full and the
/// outputs.
struct screen_params {
  conv2d_problem p;                ///< the problem (groups 1)
  const float* x;                  ///< (N, C, H, W) in p.x_layout
  const float* w;                  ///< KCRS
  const float* wt;                 ///< the filter transposed, L x K (screen_stats_kernel's `wt`)
  const float* bias;               ///< K elements, or nullptr
  const float* gaps;               ///< pass 1's value output (N*P*Q)
  const std::int64_t* packed;      ///< pass 1's index output (N*P*Q)
  screen_stats* stats;             ///< screen_stats_kernel's result; stats->full counts `full`
  std::int64_t* full;              ///< N*P*Q entries: the pixels screen_full_kernel recomputes
  screen_precision precision;      ///< pass 1's operand precision
  double lip;                      ///< |scale| of the epilogue (inf or NaN: every channel recomputed)
  float* y;                        ///< N*P*Q, or nullptr
  std::int64_t* indices;           ///< N*P*Q, or nullptr
};

/// The SIMT kernel's last GEMM_K slice is padded with FMAs of 0 x 0 when GEMM_K is not a multiple of its
/// slice (default_simt_policy<float>::block_k): they turn an accumulator of -0 into +0. Pass 2 does the
/// same, so that its values equal the SIMT kernel's bit for bit, the sign of a zero included.
__device__ inline float screen_simt_tail(float acc, std::int64_t L) {
  return L % default_simt_policy<float>::type::block_k != 0 ? acc + 0.0f : acc;
}

/// Threads of screen_recompute_kernel.
inline constexpr int screen_threads = 256;
/// Output pixels per thread of screen_recompute_kernel: a tile holds at most 1,024 output pixels.
inline constexpr int screen_pixels_per_thread = 4;
/// Output pixels of one tile of screen_recompute_kernel at most (screen_threads * screen_pixels_per_thread).
inline constexpr int screen_tile_pixels = screen_threads * screen_pixels_per_thread;

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

/// @brief Tiling of screen_recompute_kernel (host: screen_tile_of): a tile is th x tw output pixels of one
/// image; a chunk is cc input channels, whose x window (wr x wc inputs per channel) and filter rows
/// (cc * R * S rows of K weights, from the transposed filter) a block stages in shared memory.
struct screen_tile {
  int th = 0;                   ///< output rows per tile
  int tw = 0;                   ///< output columns per tile
  int wr = 0;                   ///< x window rows: (th - 1) * stride_h + (R - 1) * dil_h + 1
  int wc = 0;                   ///< x window columns: (tw - 1) * stride_w + (S - 1) * dil_w + 1
  int wcs = 0;                  ///< a window row's floats in shared memory: wc + 3 rounded up to 4 (16-byte rows)
  bool vec_x = false;           ///< x copied in 16-byte pieces (set at launch: NCHW, W % 4 == 0, x 16-byte aligned)
  bool vec_w = false;           ///< the filter copied in 16-byte pieces (set at launch: K % 4 == 0, wt 16-byte aligned)
  int cc = 0;                   ///< input channels per chunk (0: not served)
  std::int64_t tiles_p = 0;     ///< tiles along P: ceil(P / th)
  std::int64_t tiles_q = 0;     ///< tiles along Q: ceil(Q / tw)
  std::size_t smem_bytes = 0;   ///< dynamic shared memory: two chunk buffers, the tile's list and sums
};

/// Dynamic shared memory of screen_recompute_kernel at most (bytes; sm_90 allows 227 KB per block).
inline constexpr std::size_t screen_max_smem = 200 * 1024;

/// @brief The tiling of screen_recompute_kernel for p (host): tiles of up to 64 output columns and 1,024
/// pixels, the most input channels per chunk whose two buffers fit 72 KB (three blocks per SM), else one
/// channel within screen_max_smem, halving the tile's rows (then columns) until one channel fits. cc == 0:
/// not served (the filter rows of one channel, R * S * K weights, do not fit).
inline screen_tile screen_tile_of(const conv2d_problem& p) {
  screen_tile t;
  const std::int64_t P = p.P(), Q = p.Q();
  if (P < 1 || Q < 1) return t;
  std::int64_t tw = Q < 64 ? Q : 64, th = screen_tile_pixels / tw < P ? screen_tile_pixels / tw : P;
  const std::size_t fixed = static_cast<std::size_t>(screen_tile_pixels) * 8 + 16;  // list and second sums
  for (;;) {
    const std::int64_t wr = (th - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1, wc = (tw - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1;
    const std::int64_t wcs = (wc + 3 + 3) / 4 * 4;
    // both buffers of cc channels (each a multiple of 4 floats): the x window and cc * R * S filter rows of K weights
    auto bytes = [&](std::int64_t cc) {
      return fixed + 2 * static_cast<std::size_t>((cc * wr * wcs + cc * p.R * p.S * p.K + 3) / 4 * 4) * sizeof(float);
    };
    if (bytes(1) <= screen_max_smem) {
      std::int64_t cc = 1;
      while (cc < p.C && bytes(cc + 1) <= 72 * 1024) ++cc;
      t.th = static_cast<int>(th), t.tw = static_cast<int>(tw), t.wr = static_cast<int>(wr), t.wc = static_cast<int>(wc);
      t.wcs = static_cast<int>(wcs);
      t.cc = static_cast<int>(cc);
      t.tiles_p = (P + th - 1) / th, t.tiles_q = (Q + tw - 1) / tw;
      t.smem_bytes = bytes(cc);
      return t;
    }
    if (th > 1) th = (th + 1) / 2;
    else if (tw > 1) tw = (tw + 1) / 2;
    else return t;  // one channel's filter rows alone do not fit
  }
}

/// @brief Pass 2 (groups 1; screen_threads threads, any grid: blocks stride over the tiles; dynamic shared
/// memory tl.smem_bytes). A block takes a tile of tl.th x tl.tw output pixels of one image, thread t its
/// pixels t + i * 256 (i < 4: consecutive lanes, consecutive pixels), and streams the input channels in
/// chunks of tl.cc through two shared-memory buffers (cp.async, in 16-byte pieces where x's rows and the
/// filter allow; the next chunk's copy overlaps this one's FMAs): the x window of the chunk's channels
/// ([c][wr][wcs], zeros in the padding) and the chunk's rows of the transposed filter ([tap][K], from wt). Sweep 1: per pixel ||x_patch||^2 and the dot product of its best
/// channel k1 in exact fp32 FMA in the SIMT kernel's order (GEMM_K index kk = (c * R + r) * S + s ascending,
/// a padding tap an FMA with x = 0); then the bound E (screen_bound). A pixel whose 3rd best lies within
/// 2E, or whose bound is not finite (a NaN, inf or huge value, x or w outside the pass-1 precision's
/// range), goes to the list for screen_full_kernel; one whose 2nd best lies within 2E goes to the tile's
/// list, and sweep 2 (only when that list is not empty) streams the chunks again and computes those
/// pixels' second channel, in the same order. Then Op over the kept channels into y and indices.
///
/// Cost (the seed: K = 128, 3x3, cc = 3, tiles of 16 x 64; bench/NOTES.md, "Certified screening: pass 2
/// tiled"): per pixel and tap one x load (consecutive lanes: no bank conflict) and one filter load gathered
/// by the lane's channel (random channels: about 3.5-way bank conflicts), about 4.5 / 32 shared-memory
/// wavefronts per pixel and tap, 343 M on the seed (1.3 ms of an H200's shared-memory pipes at one
/// wavefront per clock): the floor of this design; measured 2.8 ms (ncu). Three blocks of 256 threads per
/// SM (80 registers, a few spilled: faster than two blocks without spills). FR x FS > 0: the filter size
/// known at compile time (the taps unrolled), dilation 1.
template <class Op, class Epilogue, int FR = 0, int FS = 0>
__global__ void __launch_bounds__(screen_threads, 3) screen_recompute_kernel(screen_params a, Op op, Epilogue epi, screen_tile tl) {
  constexpr int T = screen_threads, PPT = screen_pixels_per_thread, TP = screen_tile_pixels;
  extern __shared__ __align__(16) float screen_smem[];
  __shared__ int list_count;
  const conv2d_problem& p = a.p;
  const int K = static_cast<int>(p.K), C = static_cast<int>(p.C);
  const int R = FR > 0 ? FR : static_cast<int>(p.R), S = FS > 0 ? FS : static_cast<int>(p.S), RS = R * S;
  const std::int64_t P = p.P(), Q = p.Q(), L = p.C * RS, HW = p.H * p.W;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int sh = static_cast<int>(p.stride_h), sw = static_cast<int>(p.stride_w);
  // (FR x FS > 0: dilation 1, so that the taps' offsets are immediates)
  const int dh = FR > 0 ? 1 : static_cast<int>(p.dil_h), dw = FS > 0 ? 1 : static_cast<int>(p.dil_w);
  const int wr = tl.wr, wc = tl.wc, wcs = tl.wcs, win = wr * wcs, cc = tl.cc;
  const int xs_floats = cc * win, buf_floats = (xs_floats + cc * RS * K + 3) / 4 * 4;
  unsigned* const list = reinterpret_cast<unsigned*>(screen_smem + 2 * buf_floats);  // tile pixel | k2 << 10
  float* const acc2s = screen_smem + 2 * buf_floats + TP;                            // sweep 2's sums, by tile pixel
  const bool nhwc = p.x_layout == layout::nhwc;
  const int nchunks = (C + cc - 1) / cc;
  const std::int64_t tiles_img = tl.tiles_p * tl.tiles_q, tiles = p.N * tiles_img;
  const bool stats_ok = a.stats->bad == 0;
  const float wsq = __uint_as_float(a.stats->w_sumsq_max), bmax = __uint_as_float(a.stats->b_abs_max);

  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t n = tile / tiles_img, tr = tile - n * tiles_img;
    const std::int64_t p0 = (tr / tl.tiles_q) * tl.th, q0 = (tr % tl.tiles_q) * tl.tw;
    const std::int64_t h0 = p0 * sh - p.pad_h, w0 = q0 * sw - p.pad_w;  // the window's first input row, column
    const float* const xn = a.x + n * p.C * HW;
    // The window's columns in shared memory: input column w0 - shift + v at v (shift = w0 mod 4, so that
    // 16-byte pieces of x land 16-byte aligned).
    const int shift = static_cast<int>(((w0 % 4) + 4) % 4);
    // Copies chunk ch's x window ([c][wr][wcs]) and filter rows ([tap][K]: the rows c0 * R * S ... of the
    // transposed filter, contiguous) into the buffer at screen_smem + bo (cp.async; zeros outside the image).
    auto stage = [&](int ch, int bo) {
      float* const b = screen_smem + bo;
      const int c0 = ch * cc, cn = C - c0 < cc ? C - c0 : cc, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      if (tl.vec_x) {  // NCHW rows in 16-byte pieces, fully inside or fully outside the image (W % 4 == 0)
        const int nq = wcs / 4, rpi = 32 / nq > 0 ? 32 / nq : 1, sub = lane / nq, qi = lane - sub * nq;
        if (sub < rpi) {
          const int wa = static_cast<int>(w0) - shift, hb = static_cast<int>(h0);  // (wa: a multiple of 4)
          for (int c = 0; c < cn; ++c) {
            const float* plane = xn + (c0 + c) * HW;
            float* dst = b + c * win;
            for (int rr = warp * rpi + sub; rr < wr; rr += (T / 32) * rpi) {
              const int h = hb + rr;
              const bool hin = h >= 0 && h < H;
              const float* src = plane + static_cast<std::int64_t>(hin ? h : 0) * W;
              for (int q = qi; q < nq; q += 32) {
                const int w = wa + 4 * q;
                const bool in = hin && w >= 0 && w < W;
                convred::detail::cp_async16_or_zero(dst + rr * wcs + 4 * q, in ? src + w : a.x, in);
              }
            }
          }
        }
      } else {
        for (int e = threadIdx.x; e < cn * wr * wc; e += T) {
          int c, rest;
          if (nhwc) c = e % cn, rest = e / cn;  // channels fastest: consecutive in memory
          else c = e / (wr * wc), rest = e - c * (wr * wc);
          const int rr = rest / wc, cl = rest - rr * wc;
          const std::int64_t h = h0 + rr, w = w0 + cl;
          const bool in = h >= 0 && h < H && w >= 0 && w < W;
          const float* src = nhwc ? xn + (h * W + w) * p.C + c0 + c : xn + (c0 + c) * HW + h * W + w;
          convred::detail::cp_async_or_zero(b + c * win + rr * wcs + shift + cl, in ? src : a.x, in);
        }
      }
      float* ws = b + xs_floats;
      const float* wsrc = a.wt + static_cast<std::int64_t>(c0) * RS * K;
      const int len = cn * RS * K;
      if (tl.vec_w) {
        for (int e = 4 * static_cast<int>(threadIdx.x); e < len; e += 4 * T) convred::detail::cp_async16_or_zero(ws + e, wsrc + e, true);
      } else {
        for (int e = threadIdx.x; e < len; e += T) convred::detail::cp_async_or_zero(ws + e, wsrc + e, true);
      }
    };
    // Runs f(ch, bo) over the chunks (bo: the chunk's buffer, a float offset in screen_smem: shared-memory
    // loads), chunk ch + 1's copy in flight during chunk ch's f.
    auto stream = [&](auto&& f) {
      stage(0, 0);
      convred::detail::cp_async_commit();
      for (int ch = 0; ch < nchunks; ++ch) {
        if (ch + 1 < nchunks) {
          stage(ch + 1, (ch + 1) & 1 ? buf_floats : 0);
          convred::detail::cp_async_commit();
          convred::detail::cp_async_wait<1>();
        } else {
          convred::detail::cp_async_wait<0>();
        }
        __syncthreads();  // chunk ch is in shared memory for every thread
        f(ch, ch & 1 ? buf_floats : 0);
        __syncthreads();  // consumed: chunk ch + 2 may overwrite the buffer
      }
    };

    // this thread's pixels: the offsets of their x windows and filter rows in a chunk buffer
    int xo[PPT], wo[PPT];
    float acc1[PPT], sumsq[PPT];
    auto pixel = [&](int i) {  // output pixel of this thread's i-th, or -1
      const int j = static_cast<int>(threadIdx.x) + i * T, tr1 = j / tl.tw, col = j - tr1 * tl.tw;
      return j < tl.th * tl.tw && p0 + tr1 < P && q0 + col < Q ? (n * P + p0 + tr1) * Q + q0 + col : std::int64_t{-1};
    };
#pragma unroll
    for (int i = 0; i < PPT; ++i) {
      const int j = static_cast<int>(threadIdx.x) + i * T, tr1 = j / tl.tw, col = j - tr1 * tl.tw;
      xo[i] = shift + (j < tl.th * tl.tw ? tr1 * sh * wcs + col * sw : 0);
      const std::int64_t m = pixel(i);
      const int k1 = m >= 0 ? static_cast<int>(static_cast<std::uint64_t>(a.packed[m]) & 0xFFFF) : 0;
      wo[i] = xs_floats + (k1 < K ? k1 : 0);  // an empty slot loads channel 0's weights (not used)
      acc1[i] = sumsq[i] = 0.0f;
    }
    if (threadIdx.x == 0) list_count = 0;

    // sweep 1: ||x_patch||^2 and channel k1
    stream([&](int ch, int bo) {
      const int cn = C - ch * cc < cc ? C - ch * cc : cc;
      for (int c = 0; c < cn; ++c) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int xt = bo + c * win + r * dh * wcs, wt = bo + (c * RS + r * S) * K;
#pragma unroll
          for (int s = 0; s < S; ++s) {
#pragma unroll
            for (int i = 0; i < PPT; ++i) {
              const float xv = screen_smem[xo[i] + xt + s * dw];
              sumsq[i] = fmaf(xv, xv, sumsq[i]);
              acc1[i] = fmaf(xv, screen_smem[wo[i] + wt + s * K], acc1[i]);
            }
          }
        }
      }
    });

    // the bound; the lists
    int need2 = 0, resolved = 0;  // bit i: pixel i takes channel k2 too; is resolved here
    int k1[PPT], k2[PPT];
#pragma unroll
    for (int i = 0; i < PPT; ++i) {
      const std::int64_t m = pixel(i);
      k1[i] = k2[i] = K;
      if (m < 0) continue;
      const std::uint64_t packed = static_cast<std::uint64_t>(a.packed[m]);
      k1[i] = static_cast<int>(packed & 0xFFFF), k2[i] = static_cast<int>((packed >> 16) & 0xFFFF);
      const std::uint32_t gbits = __float_as_uint(a.gaps[m]);
      const float gap2 = __uint_as_float((gbits & 0xFFFFu) << 16), gap3 = __uint_as_float(gbits & 0xFFFF0000u);
      double E = INFINITY;
      // max |x| <= ||x_patch||_2 (half the squared limit leaves room for the fp32 sum's rounding): the range
      // check of the pass-1 precision
      if (stats_ok && static_cast<double>(sumsq[i]) <= 0.5 * a.precision.limit * a.precision.limit)
        E = screen_bound(sumsq[i], wsq, bmax, a.lip, L, a.precision);
      const double E2 = 2.0 * E;
      if (!(E2 < 1.0e30 && k1[i] < K && static_cast<double>(gap3) > E2)) {
        a.full[atomicAdd(&a.stats->full, 1ull)] = m;
        continue;
      }
      resolved |= 1 << i;
      if (k2[i] < K && !(static_cast<double>(gap2) > E2)) {
        need2 |= 1 << i;
        list[atomicAdd(&list_count, 1)] = static_cast<unsigned>(threadIdx.x + i * T) | static_cast<unsigned>(k2[i]) << 10;
      }
    }
    __syncthreads();  // list_count is final
    const int count = list_count;

    // sweep 2 (block-uniform): the second channel of the listed pixels
    if (count > 0) {
      int xo2[PPT], wo2[PPT];
      float acc2[PPT];
#pragma unroll
      for (int q = 0; q < PPT; ++q) {
        const int e = static_cast<int>(threadIdx.x) + q * T;
        const unsigned entry = e < count ? list[e] : 0u;
        const int j = static_cast<int>(entry & 0x3FFu), tr2 = j / tl.tw, col = j - tr2 * tl.tw;
        xo2[q] = shift + tr2 * sh * wcs + col * sw;
        wo2[q] = xs_floats + static_cast<int>(entry >> 10);
        acc2[q] = 0.0f;
      }
      // entries of this warp: q < rounds (warp-uniform; the warps past the list only stage)
      const int first = static_cast<int>(threadIdx.x) & ~31,
                rounds = first < count ? (count - first + T - 1) / T : 0;
      stream([&](int ch, int bo) {
        const int cn = C - ch * cc < cc ? C - ch * cc : cc;
#pragma unroll
        for (int q = 0; q < PPT; ++q) {
          if (q >= rounds) break;  // (warp-uniform)
          for (int c = 0; c < cn; ++c) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const int xt = bo + c * win + r * dh * wcs, wt = bo + (c * RS + r * S) * K;
#pragma unroll
              for (int s = 0; s < S; ++s)
                acc2[q] = fmaf(screen_smem[xo2[q] + xt + s * dw], screen_smem[wo2[q] + wt + s * K], acc2[q]);
            }
          }
        }
      });
#pragma unroll
      for (int q = 0; q < PPT; ++q) {
        const int e = static_cast<int>(threadIdx.x) + q * T;
        if (e < count) acc2s[list[e] & 0x3FFu] = acc2[q];
      }
      __syncthreads();
    }

    auto value = [&](float acc, int k) {
      return apply_epilogue(epi, screen_simt_tail(acc, L) + (a.bias ? a.bias[k] : 0.0f), k);
    };
#pragma unroll
    for (int i = 0; i < PPT; ++i) {
      if (!(resolved >> i & 1)) continue;
      const std::int64_t m = pixel(i);
      typename Op::template accum_t<float> st = Op::template make<float>(value(acc1[i], k1[i]), k1[i]);
      if (need2 >> i & 1)
        st = op(st, Op::template make<float>(value(acc2s[threadIdx.x + i * T], k2[i]), k2[i]));
      if (a.y) a.y[m] = Op::template value<float>(st, p.K);
      if constexpr (Op::has_index) {
        if (a.indices) a.indices[m] = Op::template index<float>(st);
      }
    }
    __syncthreads();  // the tile's list and sums are read: the next tile may reset them
  }
}

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
