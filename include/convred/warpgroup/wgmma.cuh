/// @file warpgroup/wgmma.cuh
/// @brief Warpgroup-level tensor-core pieces (sm_90a): `wgmma.mma_async` with both operands from
/// shared-memory descriptors (or A from registers), its fences, and the descriptor itself (PTX ISA, "Asynchronous warpgroup level
/// matrix multiply-accumulate", shapes m64n128k8 .tf32 and m64n128k16 .bf16/.f16).
///
/// A warpgroup is 4 consecutive warps (128 threads, the first warp a multiple of 4). Warp w of the group
/// owns accumulator rows 16w..16w+15; lane = 4g + t. D fragment ownership, as in the PTX ISA figures
/// (n128, fp32): d[4j+0]=(16w+g, 8j+2t) d[4j+1]=(16w+g, 8j+2t+1) d[4j+2]=(16w+g+8, 8j+2t)
/// d[4j+3]=(16w+g+8, 8j+2t+1), j = 0..15.
/// A (M x K) and B (N x K) are "K-major" in shared memory, in the canonical no-swizzle layout: 8-row x
/// 16-byte core matrices, each 128 contiguous bytes; `lbo` bytes between core matrices along K, `sbo`
/// along M / N.
///
/// Everything here needs an sm_90a target (`CONVRED_HAS_WGMMA` is 1 there); elsewhere the functions compile
/// to nothing and the kernels built on them must not be launched (device::detail::wgmma_available()).
#pragma once

#include <cstdint>

/// @def CONVRED_HAS_WGMMA
/// 1 in device code compiled for sm_90a (wgmma, setmaxnreg available), else 0.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CONVRED_HAS_WGMMA 1
#else
#define CONVRED_HAS_WGMMA 0
#endif

namespace convred::warpgroup {

/// @brief Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"), no swizzle, base offset 0:
/// start address, leading-dimension byte offset (between core matrices along K) and stride-dimension byte
/// offset (between core matrices along M/N), each stored >> 4 in 14 bits. `smem` must be 16-byte aligned.
__device__ __forceinline__ std::uint64_t make_smem_desc(const void* smem, std::uint32_t lbo, std::uint32_t sbo) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<std::uint64_t>((a >> 4) & 0x3FFF) | (static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32);
}

/// @brief `wgmma.fence`: orders this warpgroup's earlier register accesses (the accumulators) before the
/// wgmma.mma_async that follow. Needed before the first batch after the accumulators were read or written.
__device__ __forceinline__ void fence() {
#if CONVRED_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
/// @brief `wgmma.commit_group`: closes the batch of wgmma.mma_async issued since the last commit.
__device__ __forceinline__ void commit() {
#if CONVRED_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// @brief `wgmma.wait_group N`: waits until at most `Pending` committed batches are still in flight; their
/// accumulators may be read, and their shared-memory operands reused, only after this.
template <int Pending>
__device__ __forceinline__ void wait() {
#if CONVRED_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}
/// @brief `fence.proxy.async.shared::cta`: makes this thread's generic-proxy shared-memory writes (st.shared,
/// cp.async after its wait) visible to the async proxy that wgmma reads its operands through.
__device__ __forceinline__ void fence_proxy_async() {
#if CONVRED_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// @brief `setmaxnreg.inc` / `.dec`: this warpgroup's registers per thread become `Regs` (a multiple of 8 in
/// [24, 256]); every warp of the warpgroup must execute it.
template <int Regs, bool Increase>
__device__ __forceinline__ void set_max_registers() {
#if CONVRED_HAS_WGMMA
  if constexpr (Increase)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
  else
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
#endif
}

/// @cond CONVRED_INTERNAL
// The 64 fp32 accumulator operands of an m64n128 wgmma (d[0..63] as "+f" asm operands %0..%63).
#define CONVRED_WGMMA_D128 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
// The same 64 operands as the instruction's destination list.
#define CONVRED_WGMMA_D128_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
// One m64n128 wgmma.mma_async of shape and types SHAPE_TYPES (e.g. "m64n128k16.f32.bf16.bf16") into d,
// scale-d from `acc`, scale-a and scale-b 1, then TAIL (the transpose immediates the 16-bit types take):
// both operands from descriptors (SS: desc_a, desc_b) or A from the registers a[0..3] (RS).
#define CONVRED_WGMMA_SS128(SHAPE_TYPES, TAIL)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                 \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " " CONVRED_WGMMA_D128_REGS ", %64, %65, p, 1, 1" TAIL ";\n}\n"       \
               : CONVRED_WGMMA_D128                                                                          \
               : "l"(desc_a), "l"(desc_b), "r"(acc))
#define CONVRED_WGMMA_RS128(SHAPE_TYPES, TAIL)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                 \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " " CONVRED_WGMMA_D128_REGS ", {%64, %65, %66, %67}, %68, p, 1, 1" TAIL \
               ";\n}\n"                                                                                    \
               : CONVRED_WGMMA_D128                                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc))
/// @endcond

/// @brief d += A(64 x k, shared K-major) * B(k x 128, shared K-major), fp32 accumulate, both operands from
/// shared-memory descriptors (make_smem_desc): `Kind` 0 = tf32 (m64n128k8), 1 = bf16 (m64n128k16),
/// 2 = f16 (m64n128k16). With `accumulate` false, d = A * B (the wgmma scale-d predicate). Asynchronous:
/// see commit() / wait().
template <int Kind>
__device__ __forceinline__ void mma_ss_m64n128(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                               bool accumulate = true) {
#if CONVRED_HAS_WGMMA
  static_assert(Kind >= 0 && Kind <= 2, "mma_ss_m64n128: Kind is 0 (tf32), 1 (bf16) or 2 (f16)");
  const std::uint32_t acc = accumulate ? 1u : 0u;
  if constexpr (Kind == 0)
    CONVRED_WGMMA_SS128("m64n128k8.f32.tf32.tf32", "");
  else if constexpr (Kind == 1)
    CONVRED_WGMMA_SS128("m64n128k16.f32.bf16.bf16", ", 0, 0");  // (no transpose of A or B: both K-major)
  else
    CONVRED_WGMMA_SS128("m64n128k16.f32.f16.f16", ", 0, 0");
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
#endif
}

/// @brief d += A(64 x k, registers) * B(k x 128, shared K-major), fp32 accumulate: the register-A form of
/// m64n128k8 .tf32 (`Kind` 0) or m64n128k16 .bf16 (1) / .f16 (2) (PTX ISA, "Register Fragments and Shared
/// Memory Matrix Layouts", matrix A). Warp w of the warpgroup supplies rows 16w..16w+15; lane = 4g + t
/// holds a[0] = (16w+g, k-column t), a[1] = (16w+g+8, t), a[2] = (16w+g, t+4), a[3] = (16w+g+8, t+4), where
/// a k-column is one tf32 bit pattern (warp::to_tf32) for Kind 0 and a pair of 16-bit values (K indices 2c
/// and 2c + 1, the lower index in the low half) for Kinds 1 and 2: the same four registers and positions.
/// The registers a must not change until the wgmma has completed (wait()); issue fence() after writing
/// them. With `accumulate` false, d = A * B.
template <int Kind>
__device__ __forceinline__ void mma_rs_m64n128(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                               bool accumulate = true) {
#if CONVRED_HAS_WGMMA
  static_assert(Kind >= 0 && Kind <= 2, "mma_rs_m64n128: Kind is 0 (tf32), 1 (bf16) or 2 (f16)");
  const std::uint32_t acc = accumulate ? 1u : 0u;
  if constexpr (Kind == 0)
    CONVRED_WGMMA_RS128("m64n128k8.f32.tf32.tf32", "");
  else if constexpr (Kind == 1)
    CONVRED_WGMMA_RS128("m64n128k16.f32.bf16.bf16", ", 0");  // (register A: no transpose; B K-major)
  else
    CONVRED_WGMMA_RS128("m64n128k16.f32.f16.f16", ", 0");
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
#endif
}

/// @cond CONVRED_INTERNAL
// The 32 fp32 accumulator operands of an m64n64 wgmma (d[0..31] as "+f" asm operands %0..%31).
#define CONVRED_WGMMA_D64 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
/// @endcond

/// @brief d += A(64 x 8, registers) * B(8 x 64, shared K-major), tf32, fp32 accumulate: the register-A form
/// of m64n64k8 (the operands as mma_rs_m64n128<0>; B's 64 channels are the first 8 core matrices along N).
/// d holds channels 8j + 2t + e of rows 16w + g (d[4j + e]) and 16w + g + 8 (d[4j + 2 + e]), j = 0..7: the
/// first 32 registers of an m64n128 tile, so that the second half of one (channels 64..127, B 8 core
/// matrices further) is d + 32 of it. With `accumulate` false, d = A * B.
__device__ __forceinline__ void mma_rs_m64n64_tf32(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                                   bool accumulate = true) {
#if CONVRED_HAS_WGMMA
  const std::uint32_t acc = accumulate ? 1u : 0u;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : CONVRED_WGMMA_D64
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc));
#else
  (void)d, (void)a, (void)desc_b, (void)accumulate;
#endif
}

#undef CONVRED_WGMMA_D64
#undef CONVRED_WGMMA_RS128
#undef CONVRED_WGMMA_D128_REGS
#undef CONVRED_WGMMA_SS128
#undef CONVRED_WGMMA_D128

}  // namespace convred::warpgroup
