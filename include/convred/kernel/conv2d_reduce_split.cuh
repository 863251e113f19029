/// @file kernel/conv2d_reduce_split.cuh
/// @brief Thin __global__ kernels of the split path (device::conv2d_reduce_split): raw partial conv tiles
/// over a range of GEMM_K into a workspace, then a fixup that sums them, applies bias and epilogue and
/// reduces across the channels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../block/conv_params.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../detail/pdl.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"
#include "conv2d_reduce.cuh"

namespace convred::kernel {

/// @brief The GEMM_K slices [first, last) of split z of `splits` over `slices` slices of BlockK rows:
/// contiguous, in order, sizes differing by at most one (first = floor(z * slices / splits)); a split past
/// the slices (splits > slices) gets an empty range.
__host__ __device__ inline void split_range(std::int32_t slices, std::int32_t splits, std::int32_t z,
                                            std::int32_t& first, std::int32_t& last) {
  first = static_cast<std::int32_t>(std::int64_t(slices) * z / splits);
  last = static_cast<std::int32_t>(std::int64_t(slices) * (z + 1) / splits);
}

/// Elements of type V one store of conv2d_split_partial_kernel writes: the mainloop's run of consecutive
/// channels per thread (Contiguous), at most 16 bytes.
template <class V, int Contiguous>
inline constexpr int split_partial_vec = Contiguous * sizeof(V) > 16 ? int(16 / sizeof(V)) : Contiguous;

/// @brief Stores v[0 .. Vec) to p as one 8- or 16-byte access (Vec * sizeof(V) of 8 or 16, p aligned to it),
/// or element by element for other sizes.
template <int Vec, class V>
__device__ __forceinline__ void store_vec(V* p, const V* v) {
  if constexpr (std::is_same_v<V, float> && Vec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (std::is_same_v<V, float> && Vec == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else if constexpr (std::is_same_v<V, double> && Vec == 2) {
    *reinterpret_cast<double2*>(p) = make_double2(v[0], v[1]);
  } else {
#pragma unroll
    for (int e = 0; e < Vec; ++e) p[e] = v[e];
  }
}

/// @brief One block per (BlockM pixels, BlockN channels of one group, GEMM_K split): grid (ceil(M /
/// BlockM), groups * ceil((K/groups) / BlockN), splits). The block runs the policy's mainloop
/// (conv_mainloop_mma_sync or conv_mainloop_simt) over its split's GEMM_K slices (split_range) and stores
/// the raw accumulators (no bias, no epilogue) to `partial[z][m][k]` (z = blockIdx.z; m the pixel, GEMM_M
/// row, k the global output channel, fastest): only pixels m < M and the channels of the tile's group.
/// Every element of the M x K plane of each split is written by exactly one block: a thread's run of
/// consecutive channels (mainloop::contiguous_n, at most 16 bytes: split_partial_vec) as one store where K, the
/// tile's first channel and `partial` are aligned to it (half the store instructions of scalar stores for
/// mma.sync's channel pairs), else element by element.
/// @param prm     the conv parameters (block::make_conv_params; the bias is not read)
/// @param partial device pointer, gridDim.z * M * K elements of the mainloop's accumulator type (float;
///   double for the SIMT policy on double data)
template <class Policy, class T>
__global__ void __launch_bounds__(Policy::threads, Policy::min_blocks_per_sm)
    conv2d_split_partial_kernel(const block::conv_params<T> prm, typename mainloop_t<Policy, T>::V* partial) {
  using mainloop = mainloop_t<Policy, T>;
  using V = typename mainloop::V;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename mainloop::TempStorage*>(smem_raw);

  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * Policy::block_m;
  const std::int32_t tiles_per_group = (prm.Kg + Policy::block_n - 1) / Policy::block_n;
  const std::int32_t tile = static_cast<std::int32_t>(blockIdx.y);
  const std::int32_t g = tile / tiles_per_group, n0 = (tile - g * tiles_per_group) * Policy::block_n;
  const std::int64_t k_first = std::int64_t(g) * prm.Kg + n0;
  const int valid = min(Policy::block_n, prm.Kg - n0);
  std::int32_t first, last;
  split_range(mainloop::loader::slices_of(prm.gemm_k), static_cast<std::int32_t>(gridDim.z),
              static_cast<std::int32_t>(blockIdx.z), first, last);

  convred::detail::launch_dependent_grids();  // the fixup may take SMs as blocks finish (PDL)
  mainloop ml(smem, prm, m0);
  V acc[mainloop::TM][mainloop::TN];
  ml.run(g, k_first, acc, first, last);

  V* out = partial + static_cast<std::int64_t>(blockIdx.z) * prm.M * prm.K + k_first;
  // A thread's channels come in runs of mainloop::contiguous_n; stored Vec at a time (8 or 16 bytes) where
  // K, the tile's first channel and the workspace allow it, else one element at a time.
  constexpr int Vec = split_partial_vec<V, mainloop::contiguous_n>;
  static_assert(mainloop::TN % Vec == 0, "a thread's channel runs must tile its accumulator columns");
  const bool vec_ok = prm.K % Vec == 0 && k_first % Vec == 0 &&
                      reinterpret_cast<std::uintptr_t>(partial) % (Vec * sizeof(V)) == 0;
#pragma unroll
  for (int i = 0; i < mainloop::TM; ++i) {
    const std::int64_t m = m0 + mainloop::tile_m(i);
    if (m >= prm.M) continue;
#pragma unroll
    for (int j = 0; j < mainloop::TN; j += Vec) {
      const int c = mainloop::tile_n(j);
      if (vec_ok && c + Vec <= valid) {
        store_vec<Vec>(out + m * prm.K + c, &acc[i][j]);
      } else {
#pragma unroll
        for (int e = 0; e < Vec; ++e)
          if (c + e < valid) out[m * prm.K + c + e] = acc[i][j + e];
      }
    }
  }
}

/// Threads per block of conv2d_reduce_split_fixup_kernel.
inline constexpr int split_fixup_threads = 256;

/// Threads of conv2d_reduce_split_fixup_kernel enough to keep the loads of a large fixup in flight (about
/// one wave of resident threads on an H200 at the kernel's ~70 registers: 132 SMs x 768):
/// split_fixup_lanes gives a pixel fewer lanes, each more channel vectors, while the grid stays above it.
/// (A larger bound left a ResNet-50 layer's fixup too few loads in flight: bench/NOTES.md, "Moved from header
/// comments").
inline constexpr std::int64_t split_fixup_min_threads = std::int64_t(1) << 16;

/// Channels one thread of conv2d_reduce_split_fixup_kernel loads per access for float partial sums of K
/// channels at `partial` (16-byte loads: 4 when K is a multiple of 4 and partial 16-byte aligned, else 1;
/// double partial sums: 1).
template <class V>
inline int split_fixup_vec(const V* partial, std::int64_t K) {
  return std::is_same_v<V, float> && K % 4 == 0 && reinterpret_cast<std::uintptr_t>(partial) % 16 == 0 ? 4 : 1;
}

/// Threads per pixel of conv2d_reduce_split_fixup_kernel for M pixels of K channels read `vec` at a time:
/// the K / vec vectors rounded up to a power of two, at most split_fixup_threads (a layer with few pixels
/// and many channels, e.g. 49 pixels x 512 channels, spreads its loads over many threads), then halved,
/// down to one warp, while M x the halved lanes stays at or above split_fixup_min_threads (many pixels:
/// each lane several vectors, fewer shuffles and no cross-warp combine per pixel).
inline int split_fixup_lanes(std::int64_t M, std::int64_t K, int vec = 1) {
  const std::int64_t cols = (K + vec - 1) / vec;
  int lanes = 1;
  while (lanes < split_fixup_threads && lanes < cols) lanes *= 2;
  while (lanes > 32 && M * (lanes / 2) >= split_fixup_min_threads) lanes /= 2;
  return lanes;
}

/// Blocks of conv2d_reduce_split_fixup_kernel for M pixels of K channels read `vec` at a time (vec = 1: the
/// most any vec needs).
inline std::int64_t split_fixup_blocks(std::int64_t M, std::int64_t K, int vec = 1) {
  return (M * split_fixup_lanes(M, K, vec) + split_fixup_threads - 1) / split_fixup_threads;
}

/// Partial sums one thread of conv2d_reduce_split_fixup_kernel loads before adding them (all in flight
/// together: one L2 round trip per group of this many splits, not one per split).
inline constexpr int split_fixup_batch = 8;

/// @brief The split path's second kernel: `lanes` consecutive threads (a power of two <= split_fixup_threads)
/// share an output pixel m; lane j of them takes the channel vectors (Vec consecutive channels: 16-byte loads
/// when Vec = 4) j, j + lanes, ..., and for each channel k sums the `splits` partials partial[0][m][k] +
/// partial[1][m][k] + ... in split order (IEEE fp32 adds, fp64 for double: deterministic; the loads of up to
/// split_fixup_batch splits in flight together, issued before any is added), adds bias[k] (0 without a bias,
/// as the fused kernels do), applies the epilogue (apply_epilogue(epi, v, k)) and folds Op::make(v, k) into
/// its state in k order; the lanes' states are then combined, in a fixed order: within each warp with
/// block::combine_lanes, then (lanes > 32) the warps' states in warp order through shared memory, and the
/// first lane writes y[m] (and indices[m]) with block::write_reduced (mean divides by K). Consecutive lanes
/// read consecutive vectors: coalesced. As every fused kernel: lowest k on ties and the first NaN for argmin
/// / argmax (their combine is a total order). The fixup is a pass over the partial sums, bound by their bytes
/// when enough loads are in flight: one 16-byte load per split and vector, all of a lane's splits in flight
/// together (bench/NOTES.md, "Moved from header comments").
/// @tparam Vec    channels per load: 4 (V = float, K % 4 == 0, partial 16-byte aligned: split_fixup_vec) or 1
/// @param partial device pointer, splits * M * K elements ([split][m][k], k fastest), conv2d_split_partial_kernel's output
/// @param splits  number of partial planes, >= 1
/// @param M       output pixels, N*P*Q
/// @param K       output channels
/// @param bias    device pointer to K elements of T, or nullptr
/// @param op      the reduction op
/// @param epi     the epilogue, `V e(V, int k)` or `V e(V)`
/// @param y       device pointer, M elements of T, or nullptr (index ops with indices)
/// @param indices device pointer, M int64, or nullptr
/// @param lanes   threads per pixel, a power of two <= split_fixup_threads (split_fixup_lanes(M, K, Vec))
template <class T, class Op, class Epilogue, class V, int Vec = 1>
__global__ void __launch_bounds__(split_fixup_threads)
    conv2d_reduce_split_fixup_kernel(const V* partial, int splits, std::int64_t M, std::int32_t K, const T* bias,
                                     Op op, Epilogue epi, T* y, std::int64_t* indices, int lanes) {
  static_assert(Vec == 1 || (Vec == 4 && std::is_same_v<V, float>), "split fixup: 16-byte loads of float only");
  using accum_t = typename Op::template accum_t<V>;
  using vec_t = std::conditional_t<Vec == 4, float4, V>;
  constexpr int warps = split_fixup_threads / 32;
  __shared__ alignas(16) unsigned char warp_states_raw[warps * sizeof(accum_t)];
  auto* warp_states = reinterpret_cast<accum_t*>(warp_states_raw);
  convred::detail::wait_prior_grids();  // launched after the partial sums' kernel with PDL
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t m = t / lanes;
  const int j = static_cast<int>(t % lanes);
  const bool live = m < M;  // every lane stays for the shuffles and the barrier
  const std::int64_t plane = M * K / Vec;  // vectors per split
  const vec_t* row = reinterpret_cast<const vec_t*>(partial + (live ? m : 0) * K);
  const std::int32_t cols = K / Vec;
  auto state = Op::template identity<V>();
#pragma unroll 2
  for (std::int32_t c = j; live && c < cols; c += lanes) {
    const vec_t* col = row + c;
    V v[Vec];
#pragma unroll 1
    for (int z0 = 0; z0 < splits; z0 += split_fixup_batch) {
      vec_t part[split_fixup_batch];
#pragma unroll
      for (int i = 0; i < split_fixup_batch; ++i)
        if (z0 + i < splits) part[i] = col[(z0 + i) * plane];
#pragma unroll
      for (int i = 0; i < split_fixup_batch; ++i) {
        if (z0 + i >= splits) break;
        const V* p = reinterpret_cast<const V*>(&part[i]);
#pragma unroll
        for (int e = 0; e < Vec; ++e) v[e] = z0 + i == 0 ? p[e] : v[e] + p[e];  // split order
      }
    }
#pragma unroll
    for (int e = 0; e < Vec; ++e) {
      const int k = c * Vec + e;
      const V b = bias ? to_compute(bias[k]) : V(0);
      state = op(state, Op::template make<V>(apply_epilogue(epi, v[e] + b, k), k));
    }
  }
  state = block::combine_lanes(state, lanes < 32 ? lanes : 32, op);
  if (lanes > 32) {  // the pixel's lanes / 32 warps, combined in warp order
    const int warp = static_cast<int>(threadIdx.x) / 32;
    if (threadIdx.x % 32 == 0) warp_states[warp] = state;
    __syncthreads();
    if (j == 0) {
      for (int w = 1; w < lanes / 32; ++w) state = op(state, warp_states[warp + w]);
    }
  }
  if (live && j == 0) block::write_reduced<Op, V>(y, indices, m, state, K);
}

/// @brief The combine of the wgmma kernel's pass mode (block::wgmma_conv_params::states): per output pixel
/// m (one thread each, m < M: N*P*Q, or a split-K tail's first pixel), the npass reduction states
/// states[pass * stride + m] (stride = N*P*Q; each already over its pass's channels, bias and epilogue
/// applied) combined with Op in pass order, then y[m] (and indices[m]) written with block::write_reduced
/// (mean divides by K). Ops combine their states exactly (min, max, argmin / argmax: lowest index on
/// ties, first NaN); sum and mean add the passes' fp32 sums in order.
template <class T, class Op>
__global__ void conv2d_reduce_pass_combine_kernel(const typename Op::template accum_t<float>* __restrict__ states,
                                                  std::int32_t npass, std::int64_t M, std::int64_t stride,
                                                  std::int64_t K, Op op, T* y, std::int64_t* indices) {
  convred::detail::wait_prior_grids();  // launched after the wgmma kernel with PDL
  const std::int64_t m = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= M) return;
  typename Op::template accum_t<float> r = states[m];
  for (int pass = 1; pass < npass; ++pass) r = op(r, states[pass * stride + m]);
  block::write_reduced<Op, float>(y, indices, m, r, K);
}

}  // namespace convred::kernel
