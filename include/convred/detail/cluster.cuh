/// @file detail/cluster.cuh
/// @brief sm_90 thread-block cluster helpers (PTX ISA "barrier.cluster", "mapa", "ld.shared::cluster"):
/// the cluster-wide barrier and reads of another block's shared memory (distributed shared memory).
/// Compiled only for sm_90 and newer; callers use them in code for those architectures.
#pragma once

#include <cstdint>
#include <cstring>

namespace convred::detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Barrier of every thread of the cluster, with release / acquire of memory (barrier.cluster, sm_90).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/// The shared::cluster address of `local` (this block's shared memory) in the block of cluster rank
/// `rank` (mapa, sm_90): the same offset in that block's shared memory.
__device__ __forceinline__ std::uint32_t cluster_map(const void* local, int rank) {
  const auto own = static_cast<std::uint32_t>(__cvta_generic_to_shared(local));
  std::uint32_t addr;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(addr) : "r"(own), "r"(rank));
  return addr;
}

/// Reads an A at shared::cluster address `addr` (cluster_map; ld.shared::cluster, sm_90): in 8-byte
/// words when A's size and alignment are multiples of 8, else in 4-byte words and then bytes.
template <class A>
__device__ __forceinline__ A cluster_load_at(std::uint32_t addr) {
  unsigned char bytes[sizeof(A)];
  constexpr int n = static_cast<int>(sizeof(A));
  if constexpr (n % 8 == 0 && alignof(A) % 8 == 0) {
#pragma unroll
    for (int i = 0; i < n; i += 8) {
      std::uint32_t v0, v1;
      asm volatile("ld.shared::cluster.v2.u32 {%0, %1}, [%2];" : "=r"(v0), "=r"(v1) : "r"(addr + i) : "memory");
      std::memcpy(bytes + i, &v0, 4);
      std::memcpy(bytes + i + 4, &v1, 4);
    }
  } else {
#pragma unroll
    for (int i = 0; i + 4 <= n; i += 4) {
      std::uint32_t v;
      asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr + i) : "memory");
      std::memcpy(bytes + i, &v, 4);
    }
#pragma unroll
    for (int i = n / 4 * 4; i < n; ++i) {
      unsigned short v;
      asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(addr + i) : "memory");
      bytes[i] = static_cast<unsigned char>(v);
    }
  }
  A r;
  std::memcpy(&r, bytes, sizeof(A));
  return r;
}

/// Reads the value at the shared-memory address of `local` in the block of cluster rank `rank`
/// (cluster_map, cluster_load_at).
template <class A>
__device__ __forceinline__ A cluster_load(const A* local, int rank) {
  return cluster_load_at<A>(cluster_map(local, rank));
}

/// This block's rank in its cluster (%cluster_ctarank, sm_90; 0 without a cluster launch).
__device__ __forceinline__ int cluster_rank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
}
#endif

}  // namespace convred::detail
