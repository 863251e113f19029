/// @file kernel/tiny_conv_reduce.cuh
/// @brief The fused convolution and channel reduction for a problem of few output pixels and a short
/// GEMM_K (N*P*Q x GEMM_K <= 512: squeeze-and-excitation 1x1 layers on pooled features at batch 1), where a
/// tiled kernel computes a tile of hundreds of pixels for one and its time is latency, not work. The
/// pixels' im2col rows (GEMM_K values each) sit in shared memory; each output channel is one dot product
/// per pixel, computed by one warp that streams its filter row once, in exact FMA of the compute type; the
/// channels' reductions are combined per pixel in the block, and, where the channels span several blocks,
/// by tiny_combine_kernel (one block, launched after it as a programmatic dependent launch). Both are
/// deterministic: every sum and every combine runs in a fixed order.
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

/// @brief One block per 8 output channels, a warp each (a grid-stride loop beyond the grid): block b's
/// reduction of its channels per pixel, written to y / indices when the grid is one block, else to
/// partial[b * 32 + m]. A channel's 32 lanes are pm pixel lanes (pm: a power of two at or above N*P*Q, at
/// most 32) times 32 / pm slices: the lane of pixel m and slice s adds, by FMA in the compute type, the
/// products of GEMM_K terms s, s + slices, ... in order (its filter loads shared by the pm pixels), then
/// the slices' sums are added pairwise across the warp (a fixed tree). Dynamic shared memory: N*P*Q rows
/// of ld >= GEMM_K compute values (ld odd), the pixels' im2col rows (zero for padding taps). groups must
/// be 1 and N*P*Q <= 32 (the family checks). Channel k of pixel m is `apply_epilogue(epi, sum + b[k], k)`;
/// the channels are combined with `op` in increasing order per warp, the warps in order.
template <class T, class Op, class Epilogue>
__global__ void __launch_bounds__(tiny_threads)
    tiny_conv_reduce_kernel(const block::conv_params<T> prm, Op op, Epilogue epi, int pm, int ld,
                            typename Op::template accum_t<compute_t<T>>* partial, T* y, std::int64_t* indices) {
  using V = compute_t<T>;
  using A = typename Op::template accum_t<V>;
  extern __shared__ __align__(16) unsigned char tiny_smem_raw[];
  V* xs = reinterpret_cast<V*>(tiny_smem_raw);  // [M][ld]
  // the warps' states as raw bytes: a user op's state type may have a constructor, which a __shared__
  // variable cannot run (nvcc #20054-D)
  __shared__ alignas(16) unsigned char states_raw[(tiny_threads / 32) * 32 * sizeof(A)];
  A* states = reinterpret_cast<A*>(states_raw);  // [warp][32]
  convred::detail::launch_dependent_grids();  // the combine kernel may launch now (it waits for this grid)

  const int M = static_cast<int>(prm.M), G = prm.gemm_k;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  constexpr int per_block = tiny_threads / 32;
  const int m = lane % pm, slices = 32 / pm, slice = lane / pm;
  {  // the block's first filter rows (contiguous in KCRS) into L2 while x is read: one 128-byte line a thread
    const std::int64_t k0 = std::int64_t(blockIdx.x) * per_block;
    const std::int64_t count = (k0 + per_block < prm.K ? per_block : prm.K - k0) * std::int64_t(G) * std::int64_t(sizeof(T));
    const char* span = reinterpret_cast<const char*>(prm.w + k0 * G);
    for (std::int64_t line = threadIdx.x; line * 128 < count; line += tiny_threads)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(span + line * 128)));
  }
  // the im2col rows, 4 elements a thread at a time (their loads in flight together)
  for (int e0 = static_cast<int>(threadIdx.x); e0 < M * G; e0 += 4 * tiny_threads) {
    V v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = e0 + j * tiny_threads;
      v[j] = V(0);  // padding reads zero (its products still multiply w: 0 x inf is NaN, as PyTorch)
      if (e < M * G) {
        const int em = e / G, kk = e - em * G;
        std::int32_t c, rs, r, s;
        prm.div_rs.divmod(kk, c, rs);
        prm.div_s.divmod(rs, r, s);
        const std::int64_t n = em / prm.PQ, pq = em - n * prm.PQ;
        const std::int32_t op_ = static_cast<std::int32_t>(pq / prm.Q), oq = static_cast<std::int32_t>(pq - op_ * prm.Q);
        const std::int32_t h = op_ * prm.stride_h - prm.pad_h + r * prm.dil_h;
        const std::int32_t w = oq * prm.stride_w - prm.pad_w + s * prm.dil_w;
        if (static_cast<std::uint32_t>(h) < static_cast<std::uint32_t>(prm.H) &&
            static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(prm.W))
          v[j] = to_compute(prm.x[prm.x_layout == layout::nchw ? ((n * prm.C + c) * prm.H + h) * prm.W + w
                                                               : ((n * prm.H + h) * prm.W + w) * prm.C + c]);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = e0 + j * tiny_threads;
      if (e < M * G) xs[(e / G) * ld + e % G] = v[j];
    }
  }
  __syncthreads();

  A st = Op::template identity<V>();  // lane m < M: pixel m's reduction of the warp's channels so far
  for (std::int64_t base = std::int64_t(blockIdx.x) * per_block; base < prm.K;
       base += std::int64_t(gridDim.x) * per_block) {
    const std::int64_t k = base + warp;
    V acc = V(0);
    if (k < prm.K && m < M) {
      const T* wk = prm.w + k * G;
      const V* xm = xs + m * ld;
      int kk = slice;
      for (; kk + 3 * slices < G; kk += 4 * slices) {  // 4 filter loads in flight, their FMAs in order
        const V w0 = to_compute(wk[kk]), w1 = to_compute(wk[kk + slices]), w2 = to_compute(wk[kk + 2 * slices]),
                w3 = to_compute(wk[kk + 3 * slices]);
        acc = detail::tiny_fma(xm[kk], w0, acc);
        acc = detail::tiny_fma(xm[kk + slices], w1, acc);
        acc = detail::tiny_fma(xm[kk + 2 * slices], w2, acc);
        acc = detail::tiny_fma(xm[kk + 3 * slices], w3, acc);
      }
      for (; kk < G; kk += slices) acc = detail::tiny_fma(xm[kk], to_compute(wk[kk]), acc);
    }
    for (int o = 16; o >= pm; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);  // the warp's slices
    if (lane < pm && m < M && k < prm.K) {
      const V b = prm.bias ? to_compute(prm.bias[k]) : V(0);
      const int kc = static_cast<int>(k);
      st = op(st, Op::template make<V>(apply_epilogue(epi, acc + b, kc), kc));
    }
  }
  states[warp * 32 + lane] = st;
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  if (t < M) {
    A red = states[t];
    for (int g = 1; g < per_block; ++g) red = op(red, states[g * 32 + t]);
    if (gridDim.x == 1) {
      if (y) y[t] = from_compute<T>(Op::template value<V>(red, prm.K));
      if constexpr (Op::has_index) {
        if (indices) indices[t] = Op::template index<V>(red);
      }
    } else {
      partial[std::int64_t(blockIdx.x) * tiny_max_pixels + t] = red;
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
    for (int b0 = lane; b0 < blocks; b0 += 8 * 32) {  // 8 partials a lane loaded together, combined in order
      A t[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        t[j] = b0 + 32 * j < blocks ? partial[std::int64_t(b0 + 32 * j) * tiny_max_pixels + m] : Op::template identity<V>();
#pragma unroll
      for (int j = 0; j < 8; ++j) s = op(s, t[j]);
    }
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
