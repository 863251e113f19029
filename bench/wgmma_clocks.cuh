/// @file bench/wgmma_clocks.cuh
/// @brief Diagnosis build of the wgmma kernel (kernel::conv2d_reduce_wgmma_kernel): clock64 cycles per
/// phase, summed over the blocks into convred::kernel::exp_clocks, through the kernel's phase probes
/// (CONVRED_WGMMA_PROBE, CONVRED_WGMMA_PHASE, CONVRED_WGMMA_UNIT_BEGIN / END; nothing in other builds).
/// Must come before any convred header, e.g. for bench/wgmma_stages.cu, which prints them:
///
///   nvcc -std=c++17 -arch=sm_90a --extended-lambda -Iinclude -DCONVRED_EXP_CLOCKS \
///        -include bench/wgmma_clocks.cuh bench/wgmma_stages.cu -o wgmma_stages_clocks
///
/// Slots: consumer threads 0 and 128: [0] a unit's mainloop with its waits, [1] full-barrier waits, [2] the
/// epilogue math, [3] the reduction and stores, [4] units; producer thread 32 (transform warp 0, lane 0):
/// [5] raw-buffer waits, [6] stage-slot waits, [7] the plane conversion. The timing changes the kernel's
/// code: compare times only between builds of this header.
#pragma once

#include <cuda_runtime.h>

namespace convred::kernel {

/// Cycles per slot, summed over the recording threads of every block (zero them before a run).
__device__ unsigned long long exp_clocks[8];

/// One thread's cycle counts, added to exp_clocks when they go out of scope (recording threads only).
struct exp_clock_counts {
  unsigned long long c[8] = {};  ///< cycles per slot (see exp_clocks)
  bool on;                       ///< this thread's counts are added
  /// Counts for this thread when `counting`.
  __device__ explicit exp_clock_counts(bool counting) : on(counting) {}
  /// Adds the counts to exp_clocks.
  __device__ ~exp_clock_counts() {
    if (on)
      for (int i = 0; i < 8; ++i) atomicAdd(&exp_clocks[i], c[i]);
  }
};

}  // namespace convred::kernel

#define CONVRED_WGMMA_PROBE(on) ::convred::kernel::exp_clock_counts convred_clk_(on)
#define CONVRED_WGMMA_PHASE(slot, stmt)                \
  do {                                                 \
    const long long convred_t0_ = clock64();           \
    stmt;                                              \
    convred_clk_.c[slot] += clock64() - convred_t0_;   \
  } while (0)
#define CONVRED_WGMMA_UNIT_BEGIN()                  \
  const long long convred_unit_t0_ = clock64();     \
  ++convred_clk_.c[4]
#define CONVRED_WGMMA_UNIT_END(done) \
  if (done) convred_clk_.c[0] += clock64() - convred_unit_t0_
