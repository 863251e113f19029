/// @file detail/load.cuh
/// @brief Predicated read-only global loads issued where they are written (inline PTX, volatile), so the
/// compiler cannot sink them next to their use and expose their latency ("memory" clobber: no shared-memory
/// load of the following multiply loop moves above them; seen in SASS: the register-
/// staged im2col loads had been moved to the end of the mainloop iteration).
#pragma once

#include "../arch.cuh"

#include <cstdint>
#include <cstring>

namespace convred::detail {

/// @brief Returns *p if pred, else a zero bit pattern (+0.0 for floating types); p is not read when !pred.
/// T must be 2, 4 or 8 bytes (float, double, __half, __nv_bfloat16).
template <class T>
__device__ __forceinline__ T load_or_zero(const T* p, bool pred) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "load_or_zero: 2, 4 or 8 byte types");
  T out;
  if constexpr (sizeof(T) == 4) {
    std::uint32_t v;
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n mov.b32 %0, 0;\n @p ld.global.nc.b32 %0, [%1];\n}\n"
        : "=r"(v)
        : "l"(p), "r"(static_cast<int>(pred))
        : "memory");
    std::memcpy(&out, &v, 4);
  } else if constexpr (sizeof(T) == 8) {
    std::uint64_t v;
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n mov.b64 %0, 0;\n @p ld.global.nc.b64 %0, [%1];\n}\n"
        : "=l"(v)
        : "l"(p), "r"(static_cast<int>(pred))
        : "memory");
    std::memcpy(&out, &v, 8);
  } else {
    std::uint16_t v;
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n mov.b16 %0, 0;\n @p ld.global.nc.b16 %0, [%1];\n}\n"
        : "=h"(v)
        : "l"(p), "r"(static_cast<int>(pred))
        : "memory");
    std::memcpy(&out, &v, 2);
  }
  return out;
}

}  // namespace convred::detail

namespace convred::detail {

/// @brief Asynchronous global -> shared copy of one 4- or 8-byte element (sm_80+ `cp.async.ca`, LDGSTS):
/// copies *src to *dst if pred, else writes zero bytes to *dst (src-size 0: nothing is read).
/// Completes at `cp_async_wait<N>()` for its commit group. No register is held while the copy is in flight.
template <class T>
__device__ __forceinline__ void cp_async_or_zero(T* dst, const T* src, bool pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp_async_or_zero: 4 or 8 byte types");
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  const int n = pred ? static_cast<int>(sizeof(T)) : 0;
  if constexpr (sizeof(T) == 4) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
  }
}

/// @brief Asynchronous global -> shared copy of 16 bytes (sm_80+ `cp.async.cg`, through L2 only): copies
/// 16 bytes from src to dst (both 16-byte aligned) if pred, else writes 16 zero bytes to dst (src-size 0:
/// nothing is read). Completes at `cp_async_wait<N>()` for its commit group.
__device__ __forceinline__ void cp_async16_or_zero(void* dst, const void* src, bool pred) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n) : "memory");
}

/// @brief Closes the group of this thread's cp.async copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// @brief Waits until at most `Pending` of this thread's committed cp.async groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

}  // namespace convred::detail
