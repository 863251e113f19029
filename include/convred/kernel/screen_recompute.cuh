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

/// Threads and output pixels per thread of screen_recompute_kernel: a block stages the whole filter once
/// per 1024 pixels (slice by slice), about as many bytes per pixel as x itself.
inline constexpr int screen_threads = 256;
/// Output pixels per thread of screen_recompute_kernel (see screen_threads).
inline constexpr int screen_pixels_per_thread = 4;

/// Listed pixels per warp of screen_full_kernel (each filter value loaded from shared memory serves them all).
inline constexpr int screen_full_pixels = 4;

/// Shared memory of screen_recompute_kernel for `cc` input channels per slice: K rows of cc * R * S
/// weights, each row padded to an odd number of words (rows of different channels in different banks).
inline std::size_t screen_slice_bytes(const conv2d_problem& p, std::int64_t cc) {
  return static_cast<std::size_t>(p.K * ((cc * p.R * p.S) | 1)) * sizeof(float);
}

/// @brief Pass 2 (groups 1; screen_threads threads, screen_pixels_per_thread output pixels each, thread t
/// of block b taking pixels (b * 4 + i) * 256 + t; dynamic shared memory screen_slice_bytes(p, cc)): over
/// slices of cc input channels, staged in shared memory for all K channels, ||x_patch||^2 and the dot
/// products of each pixel's two kept channels in exact fp32 FMA in the SIMT kernel's order (GEMM_K index
/// kk = (c * R + r) * S + s ascending, a padding tap an FMA with x = 0); then the bound E (screen_bound),
/// and Op's result over channel 1 and, when its gap is <= 2E, channel 2. A pixel whose 3rd best lies
/// within 2E, or whose bound is not finite (a NaN, inf or huge value, x or w outside the pass-1
/// precision's range), goes to the list for screen_full_kernel. FR x FS > 0: the filter size known at
/// compile time (3 x 3: the taps unrolled, their loads in flight together), else p.R x p.S.
template <class Op, class Epilogue, int FR = 0, int FS = 0>
__global__ void __launch_bounds__(screen_threads) screen_recompute_kernel(screen_params a, Op op, Epilogue epi, int cc) {
  constexpr int T = screen_threads, PPT = screen_pixels_per_thread;
  extern __shared__ float ws[];
  const conv2d_problem& p = a.p;
  const std::int64_t P = p.P(), Q = p.Q(), M = p.N * P * Q, RS = p.R * p.S, L = p.C * RS;
  const std::int64_t row = (cc * RS) | 1;
  // x of pixel i's image, and the element strides of c, h and w in x's layout
  const std::int64_t cs = p.x_layout == layout::nhwc ? 1 : p.H * p.W, hs = p.x_layout == layout::nhwc ? p.W * p.C : p.W,
                     wstr = p.x_layout == layout::nhwc ? p.C : 1;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int R = FR > 0 ? FR : static_cast<int>(p.R), S = FS > 0 ? FS : static_cast<int>(p.S);
  const int dh = static_cast<int>(p.dil_h), dw = static_cast<int>(p.dil_w);
  std::int64_t m[PPT];
  const float* xi[PPT];
  int h0[PPT], w0[PPT];
  std::int32_t k1[PPT], k2[PPT], r1[PPT], r2[PPT];
  float sumsq[PPT], acc1[PPT], acc2[PPT];
#pragma unroll
  for (int i = 0; i < PPT; ++i) {
    m[i] = (blockIdx.x * std::int64_t{PPT} + i) * T + threadIdx.x;
    xi[i] = a.x, h0[i] = w0[i] = 0, k1[i] = k2[i] = screen_empty;
    sumsq[i] = acc1[i] = acc2[i] = 0.0f;
    if (m[i] < M) {
      const std::int64_t pq = m[i] % (P * Q), n = m[i] / (P * Q);
      xi[i] = a.x + n * p.C * p.H * p.W;
      h0[i] = static_cast<int>((pq / Q) * p.stride_h - p.pad_h), w0[i] = static_cast<int>((pq % Q) * p.stride_w - p.pad_w);
      const std::uint64_t packed = static_cast<std::uint64_t>(a.packed[m[i]]);
      k1[i] = static_cast<std::int32_t>(packed & 0xFFFF), k2[i] = static_cast<std::int32_t>((packed >> 16) & 0xFFFF);
    }
    r1[i] = (k1[i] < p.K ? k1[i] : 0) * static_cast<std::int32_t>(row);  // an empty slot reads row 0
    r2[i] = (k2[i] < p.K ? k2[i] : 0) * static_cast<std::int32_t>(row);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::int64_t c0 = 0; c0 < p.C; c0 += cc) {
    const int cn = static_cast<int>(p.C - c0 < cc ? p.C - c0 : cc), len = cn * R * S;
    __syncthreads();  // the previous slice is consumed
    for (std::int64_t k = warp; k < p.K; k += T / 32)  // a warp per filter row: coalesced
      for (int e = lane; e < len; e += 32) ws[k * row + e] = a.w[k * L + c0 * RS + e];
    __syncthreads();
    // the taps outermost and the thread's pixels innermost (unrolled): four independent FMA chains per
    // tap (each pixel's own order, kk ascending, unchanged), so that their loads overlap
    for (int c = 0; c < cn; ++c) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int t = 0; t < S; ++t) {
          const int j = (c * R + r) * S + t;
#pragma unroll
          for (int i = 0; i < PPT; ++i) {
            const int h = h0[i] + r * dh, w = w0[i] + t * dw;
            const bool in = m[i] < M && h >= 0 && h < H && w >= 0 && w < W;
            const float xv =
                in ? xi[i][(c0 + c) * cs + static_cast<std::int64_t>(h) * hs + static_cast<std::int64_t>(w) * wstr] : 0.0f;
            sumsq[i] = fmaf(xv, xv, sumsq[i]);
            acc1[i] = fmaf(xv, ws[r1[i] + j], acc1[i]);
            acc2[i] = fmaf(xv, ws[r2[i] + j], acc2[i]);
          }
        }
      }
    }
  }
  const bool stats_ok = a.stats->bad == 0;
  const float wsq = __uint_as_float(a.stats->w_sumsq_max), bmax = __uint_as_float(a.stats->b_abs_max);
#pragma unroll
  for (int i = 0; i < PPT; ++i) {
    if (m[i] >= M) continue;
    const std::uint32_t gbits = __float_as_uint(a.gaps[m[i]]);
    const float gap2 = __uint_as_float((gbits & 0xFFFFu) << 16), gap3 = __uint_as_float(gbits & 0xFFFF0000u);
    double E = INFINITY;
    // max |x| <= ||x_patch||_2 (half the squared limit leaves room for the fp32 sum's rounding): the range
    // check of the pass-1 precision
    if (stats_ok && static_cast<double>(sumsq[i]) <= 0.5 * a.precision.limit * a.precision.limit)
      E = screen_bound(sumsq[i], wsq, bmax, a.lip, L, a.precision);
    const double E2 = 2.0 * E;
    if (!(E2 < 1.0e30 && k1[i] < p.K && static_cast<double>(gap3) > E2)) {
      a.full[atomicAdd(&a.stats->full, 1ull)] = m[i];
      continue;
    }
    auto value = [&](float acc, std::int32_t k) {
      return apply_epilogue(epi, screen_simt_tail(acc, L) + (a.bias ? a.bias[k] : 0.0f), k);
    };
    typename Op::template accum_t<float> st = Op::template make<float>(value(acc1[i], k1[i]), k1[i]);
    if (k2[i] < p.K && !(static_cast<double>(gap2) > E2))
      st = op(st, Op::template make<float>(value(acc2[i], k2[i]), k2[i]));
    if (a.y) a.y[m[i]] = Op::template value<float>(st, p.K);
    if constexpr (Op::has_index) {
      if (a.indices) a.indices[m[i]] = Op::template index<float>(st);
    }
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
