/// @file kernel/conv2d_reduce_wgmma.cuh
/// @brief Thin __global__ kernels of the Hopper packed-filter path: the filter packing kernel and the
/// persistent fused conv2d -> epilogue -> channel reduction kernel (wgmma).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/conv_patch_loader.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../detail/load.cuh"
#include "../functional.cuh"
#include "params.cuh"

namespace convred::kernel {

/// @brief Packs KCRS fp32 weights (K <= 128, groups 1) into the wgmma kernel's shared-memory image, one
/// thread per packed element. Layout, in elements: [stage kt][part][tap r*S+s][n/8][c/E][n%8][c%E] with
/// E = 16 / element bytes (one 16-byte core-matrix row), c = channel within the stage's block_c; so each
/// tap's 128 x block_c slice is K-major no-swizzle core matrices (128 B each, 128 B apart along K, 256 B
/// along N). Values: tf32 (round to nearest even), the 3xTF32 big / small parts (part 0 / 1), bf16 or fp16
/// (round to nearest even); zero for n >= K and c >= C.
template <class Policy>
__global__ void pack_filter_kernel(const float* __restrict__ w, void* __restrict__ out, std::int32_t K, std::int32_t C,
                                   std::int32_t R, std::int32_t S, std::int64_t total) {
  constexpr int BC = Policy::block_c, E = 16 / Policy::filter_elem_bytes;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int taps = R * S;
  std::int64_t rest = i;
  const int ce = static_cast<int>(rest % E);
  rest /= E;
  const int n8 = static_cast<int>(rest % 8);
  rest /= 8;
  const int cb = static_cast<int>(rest % (BC / E));
  rest /= BC / E;
  const int ng = static_cast<int>(rest % 16);
  rest /= 16;
  const int tap = static_cast<int>(rest % taps);
  rest /= taps;
  const int part = static_cast<int>(rest % Policy::parts);
  const std::int64_t kt = rest / Policy::parts;
  const int n = ng * 8 + n8;
  const std::int64_t c = kt * BC + cb * E + ce;
  const int r = tap / S, s = tap % S;
  const float v = (n < K && c < C) ? w[((static_cast<std::int64_t>(n) * C + c) * R + r) * S + s] : 0.f;
  if constexpr (Policy::is_tf32) {
    const std::uint32_t big = block::conv_mainloop_wgmma<Policy>::tf32_rn(v);
    const std::uint32_t small = block::conv_mainloop_wgmma<Policy>::tf32_rn(v - __uint_as_float(big));
    static_cast<std::uint32_t*>(out)[i] = part == 0 ? big : small;
  } else if constexpr (std::is_same_v<typename Policy::math, math::bf16>) {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(out)[i] = __float2half_rn(v);
  }
}

/// @brief Shared memory of conv2d_reduce_wgmma_kernel after its `stages` operand stages (dynamic).
template <class Policy, class Op>
using wgmma_reduce_storage = typename block::reduce_epilogue<block::conv_mainloop_wgmma<Policy>, Op>::TempStorage;

/// @brief Persistent fused kernel: block b computes tiles b, b + gridDim.x, ...; the cp.async pipeline runs
/// across tile boundaries (the next tile's stages load while this tile's epilogue runs). Per tile:
/// kt stages of conv_mainloop_wgmma, then the epilogue e(acc + bias[k], k) and the reduction across the K
/// channels in registers and with cub::WarpReduce (block::reduce_epilogue); y and indices written once.
template <class Policy, class Op, class Epilogue>
__global__ void __launch_bounds__(Policy::threads, 1)
    conv2d_reduce_wgmma_kernel(const wgmma_conv_params prm, Op op, Epilogue epi, float* y, std::int64_t* indices) {
#if CONVRED_HAS_WGMMA
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  using loader = block::conv_patch_loader<Policy>;
  using epilogue_t = block::reduce_epilogue<mainloop, Op>;
  constexpr int S = Policy::stages;
  constexpr bool drain = S < 3;           // two stages: drain the wgmmas before each barrier
  constexpr int ahead = drain ? S - 1 : S - 2;  // stages being loaded while one is computed
  extern __shared__ __align__(128) unsigned char smem[];
  auto& red_storage = *reinterpret_cast<wgmma_reduce_storage<Policy, Op>*>(smem + S * prm.stage_bytes);

  const mainloop ml(prm);
  epilogue_t red(red_storage, op);
  const std::int64_t first = blockIdx.x, step_tiles = gridDim.x;
  const std::int64_t my_tiles = prm.tiles > first ? (prm.tiles - 1 - first) / step_tiles + 1 : 0;
  const std::int64_t steps = my_tiles * prm.kt;
  auto stage_of = [&](std::int64_t st) { return smem + static_cast<int>(st % S) * prm.stage_bytes; };
  auto tile_of = [&](std::int64_t st) { return first + (st / prm.kt) * step_tiles; };

#pragma unroll
  for (int st = 0; st < ahead; ++st) {
    if (st < steps) loader::load(stage_of(st), prm, tile_of(st), static_cast<int>(st % prm.kt));
    detail::cp_async_commit();
  }
  float d[2][64];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < 64; ++i) d[m][i] = 0.f;
  typename mainloop::frags f[2];
  int parity = 0;
  int kt = 0;
  for (std::int64_t st = 0; st < steps; ++st) {
    detail::cp_async_wait<ahead - 1>();
    warpgroup::fence_proxy_async();
    __syncthreads();
    const std::int64_t next = st + ahead;
    if (next < steps) loader::load(stage_of(next), prm, tile_of(next), static_cast<int>(next % prm.kt));
    detail::cp_async_commit();
    mainloop::fence_acc(d);
    ml.run_stage(stage_of(st), d, f, parity, prm);
    if (++kt == prm.kt) {  // tile complete: epilogue + reduction, then start the next tile from zero
      kt = 0;
      warpgroup::wait<0>();
      mainloop::fence_acc(d);
      float acc[mainloop::TM][mainloop::TN];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[2 * mt + e / 2][2 * j + e % 2] = d[mt][4 * j + e];
      red.accumulate(acc, prm.bias, epi, 0, prm.K, mainloop::tile_n, true);
      const std::int64_t tile = tile_of(st);
      const std::int64_t tq = tile % prm.tiles_q, rest = tile / prm.tiles_q;
      const std::int64_t tp = rest % prm.tiles_p, n = rest / prm.tiles_p;
      const std::int64_t p0 = tp * prm.th, q0 = tq << prm.tw_log2;
      const int tw_mask = (1 << prm.tw_log2) - 1;
      red.store(y, indices, prm.K, mainloop::tile_m, [&](int px) {
        const std::int64_t p = p0 + (px >> prm.tw_log2), q = q0 + (px & tw_mask);
        return p < prm.P && q < prm.Q ? (n * prm.P + p) * prm.Q + q : std::int64_t(-1);
      });
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int i = 0; i < 64; ++i) d[m][i] = 0.f;
    } else if constexpr (drain) {
      warpgroup::wait<0>();
    }
  }
  warpgroup::wait<0>();
  detail::cp_async_wait<0>();
#else
  (void)prm, (void)op, (void)epi, (void)y, (void)indices;
#endif
}

/// @brief Probe: its static shared memory is 32 bytes in an sm_90a image (wgmma available) and 16
/// otherwise, so cudaFuncGetAttributes tells which image the current device would run, without a launch.
template <int = 0>
__global__ void wgmma_probe_kernel(int* out) {
  __shared__ int s[CONVRED_HAS_WGMMA ? 8 : 4];
  volatile int* v = s;
  for (int i = 0; i < (CONVRED_HAS_WGMMA ? 8 : 4); ++i) v[i] = i;
  if (out) *out = v[static_cast<int>(threadIdx.x) % 4];
}

}  // namespace convred::kernel
