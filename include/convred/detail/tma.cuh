/// @file detail/tma.cuh
/// @brief sm_90 asynchronous copies and their barriers (PTX ISA: "mbarrier", "cp.async.bulk",
/// "cp.async.bulk.tensor"): shared-memory mbarriers with transaction counts, the 1D bulk global -> shared
/// copy and the 4D tiled tensor copy (TMA) with out-of-bounds zero fill. Compiled to nothing below sm_90.
#pragma once

#include <cstdint>

namespace convred::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CONVRED_HAS_TMA 1
#else
#define CONVRED_HAS_TMA 0
#endif

/// Shared-memory address of p (32-bit, as the PTX instructions take it).
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// @brief Initialises an mbarrier expecting `count` arrivals per phase.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
#if CONVRED_HAS_TMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}

/// @brief Makes mbarrier initialisations visible to the async proxy (TMA complete_tx) and other threads
/// (follow with a block barrier).
__device__ __forceinline__ void mbarrier_init_fence() {
#if CONVRED_HAS_TMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// @brief Arrives on the mbarrier (one of its `count` arrivals).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
#if CONVRED_HAS_TMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}

/// @brief Arrives on the mbarrier and adds `bytes` to the transactions its current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if CONVRED_HAS_TMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#endif
}

/// @brief Waits until the phase with parity `parity` of the mbarrier has completed (acquire: the
/// completed copies' shared-memory writes are then visible to this thread).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity) {
#if CONVRED_HAS_TMA
  const std::uint32_t a = smem_addr(bar);
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

/// @brief 1D bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared
/// memory, completing as transactions on `bar`.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* bar) {
#if CONVRED_HAS_TMA
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
#endif
}

/// @brief 4D tiled tensor copy (TMA) of the box at coordinates (c0 innermost .. c3) of the tensor map
/// `tmap` (a __grid_constant__ kernel parameter) into shared memory `dst` (128-byte aligned), completing
/// as transactions on `bar`; box elements outside the tensor are written as zeros.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tmap, int c0, int c1, int c2, int c3,
                                            std::uint64_t* bar) {
#if CONVRED_HAS_TMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
#endif
}

/// @brief Fetches the tensor map `tmap` (a __grid_constant__ kernel parameter) into the descriptor cache
/// ahead of its first tma_load_4d (PTX ISA "prefetch.tensormap"), so that the first copy does not wait for
/// it. A hint: no effect on results.
__device__ __forceinline__ void prefetch_tensormap(const void* tmap) {
#if CONVRED_HAS_TMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap) : "memory");
#endif
}

}  // namespace convred::detail
