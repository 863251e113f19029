/// @file kernel/screen_recompute.cuh
/// @brief Certified screening's pass 2 (docs/screening.md; the bound, pass 1's op and the statistics are in
/// kernel/screen.cuh): the exact fp32 recompute of the channels the bound cannot rule out
/// (screen_recompute_kernel), and of every channel of the pixels it lists (screen_full_kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/warp/warp_reduce.cuh>

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

/// x at (n, c, h, w), 0 in the padding.
__device__ inline float screen_x(const screen_params& a, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  const conv2d_problem& p = a.p;
  if (h < 0 || h >= p.H || w < 0 || w >= p.W) return 0.0f;
  return p.x_layout == layout::nhwc ? a.x[((n * p.H + h) * p.W + w) * p.C + c] : a.x[((n * p.C + c) * p.H + h) * p.W + w];
}

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

/// Listed pixels per warp of screen_full_kernel (each filter value loaded from shared memory serves them all).
inline constexpr int screen_full_pixels = 4;

/// @brief Tiling of screen_recompute_kernel (host: screen_tile_of): a tile is th x tw output pixels of one
/// image; a chunk is cc input channels, whose x window (wr x wc inputs per channel) and filter rows
/// (cc * R * S rows of K weights, from the transposed filter) a block stages in shared memory.
struct screen_tile {
  int th = 0;                   ///< output rows per tile
  int tw = 0;                   ///< output columns per tile
  int wr = 0;                   ///< x window rows: (th - 1) * stride_h + (R - 1) * dil_h + 1
  int wc = 0;                   ///< x window columns: (tw - 1) * stride_w + (S - 1) * dil_w + 1
  int cc = 0;                   ///< input channels per chunk (0: not served)
  std::int64_t tiles_p = 0;     ///< tiles along P: ceil(P / th)
  std::int64_t tiles_q = 0;     ///< tiles along Q: ceil(Q / tw)
  std::size_t smem_bytes = 0;   ///< dynamic shared memory: two chunk buffers, the tile's list and sums
};

/// Dynamic shared memory of screen_recompute_kernel at most (bytes; sm_90 allows 227 KB per block).
inline constexpr std::size_t screen_max_smem = 200 * 1024;

/// @brief The tiling of screen_recompute_kernel for p (host): tiles of up to 64 output columns and 1,024
/// pixels, the most input channels per chunk whose two buffers fit 96 KB (two blocks per SM), else one
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
    // both buffers of cc channels: the x window and K filter rows of (cc * R * S) | 1 weights
    auto bytes = [&](std::int64_t cc) {
      return fixed + 2 * static_cast<std::size_t>(cc * wr * wc + p.K * ((cc * p.R * p.S) | 1)) * sizeof(float);
    };
    if (bytes(1) <= screen_max_smem) {
      std::int64_t cc = 1;
      while (cc < p.C && bytes(cc + 1) <= 96 * 1024) ++cc;
      t.th = static_cast<int>(th), t.tw = static_cast<int>(tw), t.wr = static_cast<int>(wr), t.wc = static_cast<int>(wc);
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
/// chunks of tl.cc through two shared-memory buffers (cp.async; the next chunk's copy overlaps this one's
/// FMAs): the x window of the chunk's channels (zeros in the padding) and the chunk's rows of the
/// transposed filter (wt, GEMM_K x K). Sweep 1: per pixel ||x_patch||^2 and the dot product of its best
/// channel k1 in exact fp32 FMA in the SIMT kernel's order (GEMM_K index kk = (c * R + r) * S + s ascending,
/// a padding tap an FMA with x = 0); then the bound E (screen_bound). A pixel whose 3rd best lies within
/// 2E, or whose bound is not finite (a NaN, inf or huge value, x or w outside the pass-1 precision's
/// range), goes to the list for screen_full_kernel; one whose 2nd best lies within 2E goes to the tile's
/// list, and sweep 2 (only when that list is not empty) streams the chunks again and computes those
/// pixels' second channel, in the same order. Then Op over the kept channels into y and indices.
///
/// Cost (the seed: K = 128, 3x3, cc = 4, tiles of 16 x 64): per pixel and tap one x load (consecutive
/// lanes, no bank conflict) and one filter load gathered by k1 (random lanes' channels: about 3.5-way bank
/// conflicts), so about one shared-memory wavefront per pixel, input channel and 9 taps; the filter is
/// staged once per tile. FR x FS > 0: the filter size known at compile time (the taps unrolled), dilation 1.
template <class Op, class Epilogue, int FR = 0, int FS = 0>
__global__ void __launch_bounds__(screen_threads, 2) screen_recompute_kernel(screen_params a, Op op, Epilogue epi, screen_tile tl) {
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
  const int wr = tl.wr, wc = tl.wc, win = wr * wc, cc = tl.cc;
  const int row = (cc * RS) | 1;  // a filter row in shared memory: odd, so that random channels spread over the banks
  const int xs_floats = cc * win, buf_floats = xs_floats + K * row;
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
    // Copies chunk ch's x window ([c][wr][wc]) and filter rows ([k][row]: channel k's cn * R * S weights of
    // the chunk, KCRS order) into the buffer at screen_smem + bo (cp.async; zeros outside the image). Warps
    // over rows, lanes over columns.
    auto stage = [&](int ch, int bo) {
      float* const b = screen_smem + bo;
      const int c0 = ch * cc, cn = C - c0 < cc ? C - c0 : cc, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      if (nhwc) {
        for (int e = threadIdx.x; e < cn * win; e += T) {  // channels fastest: consecutive in memory
          const int c = e % cn, rest = e / cn, rr = rest / wc, cl = rest - rr * wc;
          const std::int64_t h = h0 + rr, w = w0 + cl;
          const bool in = h >= 0 && h < H && w >= 0 && w < W;
          convred::detail::cp_async_or_zero(b + c * win + rest, in ? xn + (h * W + w) * p.C + c0 + c : a.x, in);
        }
      } else {
        for (int rw = warp; rw < cn * wr; rw += T / 32) {
          const int c = rw / wr, rr = rw - c * wr;
          const std::int64_t h = h0 + rr;
          const bool hin = h >= 0 && h < H;
          const float* src = xn + (c0 + c) * HW + h * W + w0;
          float* dst = b + rw * wc;
          for (int cl = lane; cl < wc; cl += 32) {
            const bool in = hin && w0 + cl >= 0 && w0 + cl < W;
            convred::detail::cp_async_or_zero(dst + cl, in ? src + cl : a.x, in);
          }
        }
      }
      float* ws = b + xs_floats;
      const int len = cn * RS;
      for (int k = warp; k < K; k += T / 32) {
        const float* src = a.w + static_cast<std::int64_t>(k) * L + static_cast<std::int64_t>(c0) * RS;
        for (int e = lane; e < len; e += 32) convred::detail::cp_async_or_zero(ws + k * row + e, src + e, true);
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
      xo[i] = j < tl.th * tl.tw ? tr1 * sh * wc + col * sw : 0;
      const std::int64_t m = pixel(i);
      const int k1 = m >= 0 ? static_cast<int>(static_cast<std::uint64_t>(a.packed[m]) & 0xFFFF) : 0;
      wo[i] = xs_floats + (k1 < K ? k1 : 0) * row;  // an empty slot loads channel 0's weights (not used)
      acc1[i] = sumsq[i] = 0.0f;
    }
    if (threadIdx.x == 0) list_count = 0;

    // sweep 1: ||x_patch||^2 and channel k1
    stream([&](int ch, int bo) {
      const int cn = C - ch * cc < cc ? C - ch * cc : cc;
      for (int c = 0; c < cn; ++c) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int xt = bo + c * win + r * dh * wc, wt = bo + c * RS + r * S;
#pragma unroll
          for (int s = 0; s < S; ++s) {
#pragma unroll
            for (int i = 0; i < PPT; ++i) {
              const float xv = screen_smem[xo[i] + xt + s * dw];
              sumsq[i] = fmaf(xv, xv, sumsq[i]);
              acc1[i] = fmaf(xv, screen_smem[wo[i] + wt + s], acc1[i]);
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
        xo2[q] = tr2 * sh * wc + col * sw;
        wo2[q] = xs_floats + static_cast<int>(entry >> 10) * row;
        acc2[q] = 0.0f;
      }
      const int rounds = (count + T - 1) / T;  // (block-uniform)
      stream([&](int ch, int bo) {
        const int cn = C - ch * cc < cc ? C - ch * cc : cc;
        for (int c = 0; c < cn; ++c) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const int xt = bo + c * win + r * dh * wc, wt = bo + c * RS + r * S;
#pragma unroll
            for (int s = 0; s < S; ++s) {
#pragma unroll
              for (int q = 0; q < PPT; ++q)
                if (q < rounds) acc2[q] = fmaf(screen_smem[xo2[q] + xt + s * dw], screen_smem[wo2[q] + wt + s], acc2[q]);
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
/// @brief Pass 2's full recompute (groups 1; Threads / 32 warps of 32 threads, any grid): each warp takes
/// screen_full_pixels listed pixels, lane l computing channels g + l, g + l + 32, g + l + 64, g + l + 96 of
/// each channel group g (128 channels) in exact fp32 FMA (the SIMT kernel's order: GEMM_K index ascending),
/// then Op over all K channels (cub::WarpReduce) into y and indices. The block stages the transposed filter
/// (L x K) 64 taps x 128 channels at a time in shared memory, shared by its warps' pixels, and each warp its
/// pixels' patches, all lanes loading at once (the listed pixels are scattered, their x mostly not in L2):
/// per tap a lane loads 4 weights and 4 x values and runs 16 FMAs.
template <class Op, class Epilogue, int Threads>
__global__ void __launch_bounds__(Threads) screen_full_kernel(screen_params a, Op op, Epilogue epi) {
  using state_t = typename Op::template accum_t<float>;
  using reduce_t = cub::WarpReduce<state_t>;
  constexpr int NW = Threads / 32, PW = screen_full_pixels, J = 4, G = 32 * J, CT = 64;
  __shared__ typename reduce_t::TempStorage temp[NW];
  __shared__ float fw[CT * G];          // the filter chunk: [tap][channel of the group]
  __shared__ float patch[NW][PW][CT];   // each warp's pixels' taps of the chunk
  const conv2d_problem& p = a.p;
  const std::int64_t P = p.P(), Q = p.Q(), RS = p.R * p.S, L = p.C * RS, count = static_cast<std::int64_t>(a.stats->full);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (std::int64_t i0 = blockIdx.x * std::int64_t{NW * PW}; i0 < count;  // (block-uniform)
       i0 += static_cast<std::int64_t>(gridDim.x) * (NW * PW)) {
    std::int64_t m[PW], n[PW], h0[PW], w0[PW];
    bool valid[PW];  // (warp-uniform)
#pragma unroll
    for (int q = 0; q < PW; ++q) {
      const std::int64_t i = i0 + warp * PW + q;
      valid[q] = i < count;
      m[q] = valid[q] ? a.full[i] : 0;
      const std::int64_t pq = m[q] % (P * Q);
      n[q] = m[q] / (P * Q), h0[q] = (pq / Q) * p.stride_h - p.pad_h, w0[q] = (pq % Q) * p.stride_w - p.pad_w;
    }
    state_t st[PW];
#pragma unroll
    for (int q = 0; q < PW; ++q) st[q] = Op::template identity<float>();
    for (std::int64_t g = 0; g < p.K; g += G) {
      float acc[PW][J] = {};
      for (std::int64_t kk0 = 0; kk0 < L; kk0 += CT) {
        const int len = static_cast<int>(L - kk0 < CT ? L - kk0 : CT);
        __syncthreads();  // the previous chunk is consumed by every warp
        for (int e = threadIdx.x; e < len * G; e += Threads) {  // rows of 128 consecutive channels: coalesced
          const int t = e / G, kl = e % G;
          fw[e] = g + kl < p.K ? a.wt[(kk0 + t) * p.K + g + kl] : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < PW; ++q)
          for (int e = lane; e < len; e += 32) {
            const std::int64_t kk = kk0 + e, c = kk / RS, rs = kk - c * RS, r = rs / p.S, t = rs - r * p.S;
            patch[warp][q][e] = valid[q] ? screen_x(a, n[q], c, h0[q] + r * p.dil_h, w0[q] + t * p.dil_w) : 0.0f;
          }
        __syncthreads();
#pragma unroll 2
        for (int e = 0; e < len; ++e) {
          float wv[J], xv[PW];
#pragma unroll
          for (int j = 0; j < J; ++j) wv[j] = fw[e * G + lane + 32 * j];
#pragma unroll
          for (int q = 0; q < PW; ++q) xv[q] = patch[warp][q][e];
#pragma unroll
          for (int q = 0; q < PW; ++q)
#pragma unroll
            for (int j = 0; j < J; ++j) acc[q][j] = fmaf(xv[q], wv[j], acc[q][j]);
        }
      }
#pragma unroll
      for (int q = 0; q < PW; ++q)
#pragma unroll
        for (int j = 0; j < J; ++j) {
          const std::int64_t k = g + lane + 32 * j;
          if (k >= p.K) break;
          const float b = a.bias ? a.bias[k] : 0.0f;
          st[q] = op(st[q], Op::template make<float>(
                                apply_epilogue(epi, screen_simt_tail(acc[q][j], L) + b, static_cast<int>(k)),
                                static_cast<int>(k)));
        }
    }
#pragma unroll
    for (int q = 0; q < PW; ++q) {
      if (!valid[q]) continue;
      const state_t r = reduce_t(temp[warp]).Reduce(st[q], op);
      __syncwarp();  // temp[warp] is reused next (CUB's rule for WarpReduce storage)
      if (lane == 0) {
        if (a.y) a.y[m[q]] = Op::template value<float>(r, p.K);
        if constexpr (Op::has_index) {
          if (a.indices) a.indices[m[q]] = Op::template index<float>(r);
        }
      }
    }
  }
}

}  // namespace convred::kernel
