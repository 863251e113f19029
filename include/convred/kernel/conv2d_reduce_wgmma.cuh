/// @file kernel/conv2d_reduce_wgmma.cuh
/// @brief Thin __global__ kernels of the Hopper packed-filter path: the persistent fused conv2d -> epilogue
/// -> channel reduction kernel (wgmma), built from its producer (wgmma_producer.cuh), consumers
/// (wgmma_consumer.cuh) and their shared pieces (wgmma_pipeline.cuh), and the probe of the image the
/// device runs; the packing kernels are in wgmma_pack.cuh.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/wgmma_conv_params.cuh"
#include "../detail/pdl.cuh"
#include "../detail/tma.cuh"
#include "../functional.cuh"
#include "../warpgroup/wgmma.cuh"
#include "conv2d_reduce_split.cuh"
#include "wgmma_consumer.cuh"
#include "wgmma_pack.cuh"
#include "wgmma_pipeline.cuh"
#include "wgmma_producer.cuh"

namespace convred::kernel {

/// @brief Persistent fused kernel: block b computes the work units tile_scheduler gives it (tiles of tile_h x
/// 64 output pixels; cooperative: both consumer warpgroups on each unit; ping-pong: the warpgroups take
/// turns). Fused mode (prm.partial null): y (and indices) written, a unit per tile. Partial mode
/// (prm.partial set, prm.splits GEMM_K splits, prm.bias null): a unit per (tile, split, channel pass), the
/// raw accumulators written to prm.partial ([z][m - partial_m0][k], see wgmma_conv_params::partial) and y,
/// indices, op and epi unused; kernel::conv2d_reduce_split_fixup_kernel finishes the job
/// (device::conv2d_reduce_packed_split). A launch runs tiles [tile0, tile0 + tiles) of the problem: a
/// split-K tail is a second launch in partial mode over the last tiles, after the head's fused or pass-mode
/// launch over the others (wgmma_conv_params::tile0, partial_m0).
/// The mode is a run-time parameter: the same instantiation serves both.
/// Warpgroup 2 (and 3: wgmma_block, two producer warpgroups for Policy::producer_threads = 256 and, except
/// under 3xTF32, for the gathering variant) produces (produce; its registers lowered with setmaxnreg),
/// warpgroups 0-1 consume
/// (consume). Synchronisation is by mbarriers only (no block-wide barrier after the set-up).
/// Its phases have probes (CONVRED_WGMMA_PHASE and friends, nothing by default) that a diagnosis build
/// may time (bench/wgmma_clocks.cuh).
/// Direct: the variant for direct tiles (prm.direct: tf32 1x1, or dilated filters in any math, and under
/// 3xTF32 undilated filters too large for its other stages; x
/// read by TMA from NCHW or from its copy, the consumers loading the A fragments into registers; produce's
/// and consume's Direct code, compiled out of the others; one producer warpgroup, wgmma_block).
/// Gather: the variant for parameters with `gather` set (stride 2, W % 4 != 0; the producer threads load x
/// themselves) and for flat tiles at stride 2 (their taps read stride phases); the TMA variant (Gather =
/// false) is compiled without that code, which would cost its 72-register producer spills. TapLoop
/// (3xTF32 only, with Gather): the variant for filters other than 3x3 and 1x1 and for stride 2 (but flat
/// 1x1 tiles, whose one tap reads phase 0: plan::wgmma_params::tap_loop), whose
/// consumers promote each tap (block::conv_mainloop_wgmma::run_stage). Flat tiles
/// (prm.flat) run in either variant with one producer thread issuing bulk copies of the packed x
/// (conv_patch_loader::copy_flat). Pass mode (prm.states): y and indices unused; each unit's reduction
/// states go to prm.states for kernel::conv2d_reduce_pass_combine_kernel.
template <class Policy, class Op, class Epilogue, bool Gather = false, bool Direct = false, bool TapLoop = false>
__global__ void __launch_bounds__(wgmma_block<Policy, Gather, Direct>::threads, 1)
    conv2d_reduce_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const block::wgmma_conv_params prm, Op op,
                               Epilogue epi, float* y, std::int64_t* indices) {
#if CONVRED_HAS_WGMMA
  extern __shared__ __align__(128) unsigned char smem[];
  const wgmma_smem<Policy, Op> sm(smem, prm);
  const int tid = static_cast<int>(threadIdx.x);
  // the TMA producer's tensor map, fetched while the block sets up
  if (tid == Policy::consumer_threads && !prm.gather && !prm.flat) convred::detail::prefetch_tensormap(&x_map);
  if (tid == 0) init_barriers<Policy, Op, Gather>(sm.tail, prm);
  using blk = wgmma_block<Policy, Gather, Direct>;
  for (int i = tid; i < Policy::block_n; i += blk::threads)
    sm.tail.bias[i] = prm.bias && i < prm.K ? prm.bias[i] : 0.f;
  __syncthreads();
  // launched with PDL after kernel::pack_x_kernel (flat tiles), x's copy (pitch_x_kernel, pack_x_pairs_kernel:
  // direct tiles) or a split-K tail's head: the packed x or x's copy is read only past this point
  convred::detail::wait_prior_grids();
  convred::detail::launch_dependent_grids();  // the fixup or combine may take SMs as blocks finish
  // 3xTF32 runs no split-K tail (device::choose_wgmma_tail): its consumers sit at their register limit,
  // where the tail's offsets made ptxas spill ~280 bytes (sm_90a, nvcc 13.0)
  constexpr bool tails = Policy::parts == 1;
  const tile_scheduler sched(prm, tails ? prm.tile0 : 0);
  if (tid >= Policy::consumer_threads) {  // producer warpgroup(s)
    warpgroup::set_max_registers<blk::producer_registers, false>();
    produce<Policy, Op, Gather, Direct>(&x_map, prm, sm, sched, tid - Policy::consumer_threads);
    return;
  }
  warpgroup::set_max_registers<blk::consumer_registers, true>();
  consume<Policy, Op, Epilogue, Gather, Direct, TapLoop>(prm, sm, sched, op, epi, y, indices);
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
