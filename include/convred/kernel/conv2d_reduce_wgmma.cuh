/// @file kernel/conv2d_reduce_wgmma.cuh
/// @brief Thin __global__ kernels of the Hopper packed-filter path: the filter packing kernel and the
/// persistent fused conv2d -> epilogue -> channel reduction kernel (wgmma).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/conv_patch_loader.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../detail/tma.cuh"
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

/// @brief Shared memory of conv2d_reduce_wgmma_kernel after its `stages` operand stages (dynamic): the
/// reduction's storage and the stages' full / empty mbarriers.
template <class Policy, class Op>
struct wgmma_tail_storage {
  /// the reduction's shared memory
  typename block::reduce_epilogue<block::conv_mainloop_wgmma<Policy>, Op>::TempStorage reduce;
  std::uint64_t full[Policy::stages];   ///< stage s landed (producer arrive + TMA transactions)
  std::uint64_t empty[Policy::stages];  ///< stage s consumed (every consumer thread arrives)
};

/// @brief Persistent fused kernel: block b computes tiles b, b + gridDim.x, ... Warpgroup 2 is the
/// producer (its registers released with setmaxnreg): one thread copies each stage with TMA (block::conv_patch_loader) as soon as its slot is released, so
/// the copies run ahead across tile boundaries. Warps 0-7 (two warpgroups) consume: per stage,
/// conv_mainloop_wgmma; per tile, the epilogue e(acc + bias[k], k) and the reduction across the K channels
/// in registers and with cub::WarpReduce (block::reduce_epilogue); y and indices written once.
/// Synchronisation is by mbarriers only (no block-wide barrier after the set-up).
template <class Policy, class Op, class Epilogue>
__global__ void __launch_bounds__(Policy::threads, 1)
    conv2d_reduce_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const wgmma_conv_params prm, Op op,
                               Epilogue epi, float* y, std::int64_t* indices) {
#if CONVRED_HAS_WGMMA
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  using loader = block::conv_patch_loader<Policy>;
  using epilogue_t = block::reduce_epilogue<mainloop, Op>;
  constexpr int S = Policy::stages;
  extern __shared__ __align__(128) unsigned char smem[];
  auto& tail = *reinterpret_cast<wgmma_tail_storage<Policy, Op>*>(smem + S * prm.stage_bytes);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      convred::detail::mbarrier_init(&tail.full[s], 1);
      convred::detail::mbarrier_init(&tail.empty[s], Policy::consumer_threads);
    }
    convred::detail::mbarrier_init_fence();
  }
  __syncthreads();
  const int tw_mask = (1 << prm.tw_log2) - 1;
  auto decode = [&](std::int64_t tile, std::int64_t& n, std::int64_t& tp, std::int64_t& tq) {
    tq = tile % prm.tiles_q;
    const std::int64_t rest = tile / prm.tiles_q;
    tp = rest % prm.tiles_p, n = rest / prm.tiles_p;
  };

  if (tid >= Policy::consumer_threads) {  // producer warpgroup: one thread issues every copy
    warpgroup::set_max_registers<40, false>();
    if (tid == Policy::consumer_threads) {
      int slot = 0;
      std::uint32_t phase = 0;
      std::int64_t st = 0;
      for (std::int64_t tile = blockIdx.x; tile < prm.tiles; tile += gridDim.x) {
        std::int64_t n, tp, tq;
        decode(tile, n, tp, tq);
        const int h0 = static_cast<int>(tp) * prm.th - prm.pad_h;
        const int w0 = (static_cast<int>(tq) << prm.tw_log2) - prm.pad_w - prm.col_shift;
        for (int kt = 0; kt < prm.kt; ++kt, ++st) {
          if (st >= S) convred::detail::mbarrier_wait(&tail.empty[slot], phase ^ 1);
          loader::load(smem + slot * prm.stage_bytes, &tail.full[slot], &x_map, prm, static_cast<int>(n), h0, w0, kt);
          if (++slot == S) slot = 0, phase ^= 1;
        }
      }
    }
    return;
  }

  warpgroup::set_max_registers<Policy::consumer_registers, true>();
  const mainloop ml(prm);
  epilogue_t red(tail.reduce, op);
  float d[2][64];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < 64; ++i) d[m][i] = 0.f;
  typename mainloop::frags f[2];
  int parity = 0, slot = 0, prev_slot = -1;
  std::uint32_t phase = 0;
  for (std::int64_t tile = blockIdx.x; tile < prm.tiles; tile += gridDim.x) {
    for (int kt = 0; kt < prm.kt; ++kt) {
      convred::detail::mbarrier_wait(&tail.full[slot], phase);
      mainloop::fence_acc(d);
      // the previous stage's slot is freed as soon as its last wgmma batch has completed (first tap)
      ml.run_stage(smem + slot * prm.stage_bytes, d, f, parity, prm, [&]() {
        if (prev_slot >= 0) convred::detail::mbarrier_arrive(&tail.empty[prev_slot]);
        prev_slot = -1;
      });
      prev_slot = slot;
      if (++slot == S) slot = 0, phase ^= 1;
    }
    warpgroup::wait<0>();
    mainloop::fence_acc(d);
    convred::detail::mbarrier_arrive(&tail.empty[prev_slot]);
    prev_slot = -1;
    // tile complete: epilogue + reduction, then start the next tile from zero
    float acc[mainloop::TM][mainloop::TN];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[2 * mt + e / 2][2 * j + e % 2] = d[mt][4 * j + e];
    red.accumulate(acc, prm.bias, epi, 0, prm.K, mainloop::tile_n, true);
    std::int64_t n, tp, tq;
    decode(tile, n, tp, tq);
    const std::int64_t p0 = tp * prm.th, q0 = tq << prm.tw_log2;
    red.store(y, indices, prm.K, mainloop::tile_m, [&](int px) {
      const std::int64_t p = p0 + (px >> prm.tw_log2), q = q0 + (px & tw_mask);
      return p < prm.P && q < prm.Q ? (n * prm.P + p) * prm.Q + q : std::int64_t(-1);
    });
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) d[m][i] = 0.f;
  }
#else
  (void)x_map, (void)prm, (void)op, (void)epi, (void)y, (void)indices;
#endif
}

/// @brief Probe of the image the current device runs, read without a launch (cudaFuncGetAttributes): with
/// Wgmma = true its static shared memory is 4096 bytes in an sm_90a image and 32 otherwise; with Wgmma =
/// false always 32. The difference tells sm_90a apart, whatever the system reserves per block and however
/// the section is rounded (to 128 bytes in some images).
template <bool Wgmma>
__global__ void wgmma_probe_kernel(int* out) {
  constexpr int n = (Wgmma && CONVRED_HAS_WGMMA) ? 1024 : 8;
  __shared__ int s[n];
  volatile int* v = s;
  for (int i = 0; i < n; ++i) v[i] = i;
  if (out) *out = v[static_cast<int>(threadIdx.x) % n];
}

}  // namespace convred::kernel
