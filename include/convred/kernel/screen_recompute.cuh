/// @file kernel/screen_recompute.cuh
/// @brief Certified screening's pass 2 (docs/screening.md; the bound, pass 1's op and the statistics are in
/// kernel/screen.cuh): the exact fp32 recompute of the channels the bound cannot rule out
/// (screen_recompute_kernel) and its arguments (screen_params); every channel of the pixels it lists is
/// recomputed by screen_full_kernel (kernel/screen_full.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

}  // namespace convred::kernel
