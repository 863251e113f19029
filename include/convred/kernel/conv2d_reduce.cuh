/// @file kernel/conv2d_reduce.cuh
/// @brief Thin __global__ kernels: fused conv2d -> epilogue -> channel reduction, and conv2d + epilogue.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../block/conv_mainloop_simt.cuh"
#include "../block/conv_mainloop_mma_sync.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../functional.cuh"
#include "../block/conv_params.cuh"

namespace convred::kernel {

/// @brief The block mainloop a policy selects: conv_mainloop_simt (SIMT, math::ieee) or conv_mainloop_mma_sync.
template <class Policy, class T>
using mainloop_t = std::conditional_t<Policy::tensor_core, block::conv_mainloop_mma_sync<Policy, T>,
                                      block::conv_mainloop_simt<Policy, T>>;

/// @brief Shared memory of conv2d_reduce_kernel (dynamic: its size may pass the 48 KB static limit).
template <class Policy, class T, class Op>
struct conv2d_reduce_smem {
  typename mainloop_t<Policy, T>::TempStorage main;                             ///< operand stages
  typename block::reduce_epilogue<mainloop_t<Policy, T>, Op>::TempStorage reduce;  ///< reduction states
};

/// @brief One block per BlockM output pixels: for every group and every BlockN-channel tile of it, run
/// the conv mainloop and fold the tile into the per-pixel reduction state; then reduce across the block's
/// channel groups and write y / indices. The (N,K,P,Q) conv output never leaves the chip.
template <class Policy, class T, class Op, class Epilogue>
__global__ void __launch_bounds__(Policy::threads, Policy::min_blocks_per_sm)
    conv2d_reduce_kernel(const block::conv_params<T> prm, Op op, Epilogue epi, T* y, std::int64_t* indices) {
  using mainloop = mainloop_t<Policy, T>;
  using V = typename mainloop::V;
  using epilogue_t = block::reduce_epilogue<mainloop, Op>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<conv2d_reduce_smem<Policy, T, Op>*>(smem_raw);

  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * Policy::block_m;
  mainloop ml(smem.main, prm, m0);
  epilogue_t red(smem.reduce, op);
  V acc[mainloop::TM][mainloop::TN];
  const std::int32_t tiles_per_group = (prm.Kg + Policy::block_n - 1) / Policy::block_n;
  const std::int32_t tiles = prm.groups * tiles_per_group;
#pragma unroll 1
  for (std::int32_t tile = 0; tile < tiles; ++tile) {
    const std::int32_t g = tile / tiles_per_group, n0 = (tile - g * tiles_per_group) * Policy::block_n;
    const std::int64_t k_first = std::int64_t(g) * prm.Kg + n0;
    ml.run(g, k_first, acc);
    red.accumulate(acc, prm.bias, epi, k_first, min(Policy::block_n, prm.Kg - n0), mainloop::tile_n, tile == 0);
  }
  red.store(y, indices, prm.K, mainloop::tile_m,
            [&](int p) { return m0 + p < prm.M ? m0 + p : std::int64_t(-1); });
}

/// @brief conv2d + epilogue writing the full output (layout of x: NCHW -> (N,K,P,Q), NHWC -> (N,P,Q,K)).
/// One block per BlockM output pixels; each block loops over every group and BlockN-channel tile.
template <class Policy, class T, class Epilogue>
__global__ void __launch_bounds__(Policy::threads, Policy::min_blocks_per_sm)
    conv2d_kernel(const block::conv_params<T> prm, Epilogue epi, T* out) {
  using mainloop = mainloop_t<Policy, T>;
  using V = typename mainloop::V;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename mainloop::TempStorage*>(smem_raw);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * Policy::block_m;
  mainloop ml(smem, prm, m0);
  V acc[mainloop::TM][mainloop::TN];
  for (std::int32_t g = 0; g < prm.groups; ++g) {
    for (std::int32_t n0 = 0; n0 < prm.Kg; n0 += Policy::block_n) {
      const std::int64_t k_first = std::int64_t(g) * prm.Kg + n0;
      const int valid = min(Policy::block_n, prm.Kg - n0);
      ml.run(g, k_first, acc);
#pragma unroll
      for (int i = 0; i < mainloop::TM; ++i) {
        const std::int64_t m = m0 + mainloop::tile_m(i);
        if (m >= prm.M) continue;
        const std::int64_t n = m / prm.PQ, pq = m - n * prm.PQ;
#pragma unroll
        for (int j = 0; j < mainloop::TN; ++j) {
          const int c = mainloop::tile_n(j);
          if (c >= valid) continue;
          const std::int64_t k = k_first + c;
          const V b = prm.bias ? to_compute(prm.bias[k]) : V(0);
          const std::int64_t off = prm.x_layout == layout::nchw ? (n * prm.K + k) * prm.PQ + pq : m * prm.K + k;
          out[off] = from_compute<T>(apply_epilogue(epi, acc[i][j] + b, static_cast<int>(k)));
        }
      }
    }
  }
}

}  // namespace convred::kernel
