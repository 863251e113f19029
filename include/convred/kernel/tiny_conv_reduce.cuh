/// @file kernel/tiny_conv_reduce.cuh
/// @brief The fused convolution and channel reduction for a problem of few output pixels (N*P*Q <= 32: a
/// squeeze-and-excitation 1x1 on pooled features, a 1x1 or 2x2 image at batch 1 or 32), where a tiled
/// kernel computes a tile of hundreds of pixels for one or two and its time is latency, not work. The
/// pixels' im2col rows (GEMM_K values each) sit in shared memory; each output channel is one dot product
/// per pixel, spread over 32 to 256 threads that stream its filter row once (coalesced), in exact FMA of
/// the compute type; the channels' reductions are combined per pixel in the block, and, where the
/// channels span several blocks, by tiny_combine_kernel (one block, launched after it as a programmatic
/// dependent launch). Both are deterministic: every sum and every combine runs in a fixed order.
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <cstdint>
#include <type_traits>

#include "../block/conv_params.cuh"
#include "../detail/pdl.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::kernel {

/// @brief The most output pixels (N*P*Q) the tiny kernel serves: one per lane of a warp.
inline constexpr int tiny_max_pixels = 32;
/// @brief Threads per block of tiny_conv_reduce_kernel.
inline constexpr int tiny_threads = 256;

namespace detail {
/// fma in the compute type: fmaf for float, fma for double (IEEE 754 fused multiply-add).
template <class V>
__device__ __forceinline__ V tiny_fma(V a, V b, V c) {
  if constexpr (std::is_same_v<V, float>) return fmaf(a, b, c);
  else return fma(a, b, c);
}
}  // namespace detail

/// @brief One block per `256 / tpc` output channels (a grid-stride loop beyond the grid): block b's
/// reduction of its channels per pixel, written to y / indices when the grid is one block, else to
/// partial[b * 32 + m]. tpc (threads per channel) is 32, 64, 128 or 256; dynamic shared memory: N*P*Q x
/// GEMM_K compute values (the pixels' im2col rows, zero for padding taps). groups must be 1 and N*P*Q <=
/// 32 (the family checks). Channel k of pixel m is `apply_epilogue(epi, sum + b[k], k)`, sum the GEMM_K
/// products added by FMA, thread t of the channel's tpc taking the terms t, t + tpc, ... in order, then the
/// threads' partial sums added pairwise across the warp (a fixed tree) and the warps' in order; the
/// channels are combined with `op` in increasing order per thread group, the groups in order.
template <class T, class Op, class Epilogue>
__global__ void __launch_bounds__(tiny_threads)
    tiny_conv_reduce_kernel(const block::conv_params<T> prm, Op op, Epilogue epi, int tpc,
                            typename Op::template accum_t<compute_t<T>>* partial, T* y, std::int64_t* indices) {
  using V = compute_t<T>;
  using A = typename Op::template accum_t<V>;
  extern __shared__ __align__(16) unsigned char tiny_smem_raw[];
  V* xs = reinterpret_cast<V*>(tiny_smem_raw);  // [M][G]
  __shared__ V sums[tiny_threads / 32][32];
  __shared__ A states[tiny_threads / 32][32];
  convred::detail::launch_dependent_grids();  // the combine kernel may launch now (it waits for this grid)

  const int M = static_cast<int>(prm.M), G = prm.gemm_k;
  for (int e = static_cast<int>(threadIdx.x); e < M * G; e += tiny_threads) {
    const int m = e / G, kk = e - m * G;
    std::int32_t c, rs, r, s;
    prm.div_rs.divmod(kk, c, rs);
    prm.div_s.divmod(rs, r, s);
    const std::int64_t n = m / prm.PQ, pq = m - n * prm.PQ;
    const std::int32_t op_ = static_cast<std::int32_t>(pq / prm.Q), oq = static_cast<std::int32_t>(pq - op_ * prm.Q);
    const std::int32_t h = op_ * prm.stride_h - prm.pad_h + r * prm.dil_h, w = oq * prm.stride_w - prm.pad_w + s * prm.dil_w;
    V v = V(0);  // padding reads zero (its products still multiply w: 0 x inf is NaN, as PyTorch)
    if (static_cast<std::uint32_t>(h) < static_cast<std::uint32_t>(prm.H) &&
        static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(prm.W))
      v = to_compute(prm.x[prm.x_layout == layout::nchw ? ((n * prm.C + c) * prm.H + h) * prm.W + w
                                                        : ((n * prm.H + h) * prm.W + w) * prm.C + c]);
    xs[e] = v;
  }
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int wpc = tpc / 32, per_block = tiny_threads / tpc, gid = warp / wpc, wig = warp % wpc;
  A st = Op::template identity<V>();  // lane m of a channel's first warp: pixel m's reduction so far
  for (std::int64_t base = std::int64_t(blockIdx.x) * per_block; base < prm.K;
       base += std::int64_t(gridDim.x) * per_block) {  // (the same trip count in every thread: __syncthreads below)
    const std::int64_t k = base + gid;
    V acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = V(0);
    if (k < prm.K) {
      const T* wk = prm.w + k * G;
#pragma unroll 4
      for (int kk = wig * 32 + lane; kk < G; kk += tpc) {
        const V wv = to_compute(wk[kk]);
#pragma unroll
        for (int m = 0; m < 32; ++m)
          if (m < M) acc[m] = detail::tiny_fma(xs[m * G + kk], wv, acc[m]);
      }
    }
    // reduce-scatter over the warp (31 shuffles): lane m ends with the warp's sum of pixel m in acc[0]
#pragma unroll
    for (int o = 16; o >= 1; o /= 2) {
      const bool upper = (lane & o) != 0;
#pragma unroll
      for (int i = 0; i < o; ++i) {
        const V send = upper ? acc[i] : acc[i + o];
        const V keep = upper ? acc[i + o] : acc[i];
        acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    }
    V sum = acc[0];
    if (wpc > 1) {
      sums[warp][lane] = sum;
      __syncthreads();
      if (wig == 0)
        for (int j = 1; j < wpc; ++j) sum += sums[warp + j][lane];
      __syncthreads();
    }
    if (wig == 0 && k < prm.K && lane < M) {
      const V b = prm.bias ? to_compute(prm.bias[k]) : V(0);
      const int kc = static_cast<int>(k);
      st = op(st, Op::template make<V>(apply_epilogue(epi, sum + b, kc), kc));
    }
  }
  if (wig == 0) states[gid][lane] = st;
  __syncthreads();
  const int m = static_cast<int>(threadIdx.x);
  if (m < M) {
    A red = states[0][m];
    for (int g = 1; g < per_block; ++g) red = op(red, states[g][m]);
    if (gridDim.x == 1) {
      if (y) y[m] = from_compute<T>(Op::template value<V>(red, prm.K));
      if constexpr (Op::has_index) {
        if (indices) indices[m] = Op::template index<V>(red);
      }
    } else {
      partial[std::int64_t(blockIdx.x) * tiny_max_pixels + m] = red;
    }
  }
}

/// @brief The per-pixel combine of tiny_conv_reduce_kernel's `blocks` partial reductions (one block of
/// 32 warps, a warp per pixel: its lanes combine partials lane, lane + 32, ... in order, then
/// cub::WarpReduce with `op`), the result written to y and indices as the fused kernels do. Waits for the
/// grid before it (griddepcontrol.wait: launched as its programmatic dependent).
template <class T, class Op>
__global__ void __launch_bounds__(1024)
    tiny_combine_kernel(const typename Op::template accum_t<compute_t<T>>* partial, int blocks, int M, std::int64_t K,
                        Op op, T* y, std::int64_t* indices) {
  using V = compute_t<T>;
  using A = typename Op::template accum_t<V>;
  using warp_reduce = cub::WarpReduce<A>;
  __shared__ typename warp_reduce::TempStorage temp[32];
  convred::detail::wait_prior_grids();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int m = warp; m < M; m += static_cast<int>(blockDim.x) / 32) {
    A s = Op::template identity<V>();
    for (int b = lane; b < blocks; b += 32) s = op(s, partial[std::int64_t(b) * tiny_max_pixels + m]);
    s = warp_reduce(temp[warp]).Reduce(s, op);
    if (lane == 0) {
      if (y) y[m] = from_compute<T>(Op::template value<V>(s, K));
      if constexpr (Op::has_index) {
        if (indices) indices[m] = Op::template index<V>(s);
      }
    }
  }
}

}  // namespace convred::kernel
