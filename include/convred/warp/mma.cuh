/// @file warp/mma.cuh
/// @brief Warp-level tensor-core pieces (sm_80+): operand conversions and `mma.sync` wrappers
/// (PTX ISA, "Warp-level matrix multiply-accumulate instructions", m16n8k8 TF32 and m16n8k16 BF16/F16).
///
/// Fragment ownership (lane = 4*g + t), as in the PTX ISA figures for these shapes:
/// - m16n8k8 .tf32:  A a0=(g,t) a1=(g+8,t) a2=(g,t+4) a3=(g+8,t+4);  B b0=(k=t,n=g) b1=(t+4,g)
/// - m16n8k16 .bf16/.f16: A a0=(g,2t..2t+1) a1=(g+8,2t..) a2=(g,2t+8..) a3=(g+8,2t+8..); B b0=(2t..2t+1,g)
///   b1=(2t+8..2t+9,g), two values per register, the lower k in the low half
/// - C/D (both): c0=(g,2t) c1=(g,2t+1) c2=(g+8,2t) c3=(g+8,2t+1), fp32.
#pragma once

#include "../arch.cuh"

#include <cstdint>

namespace convred::warp {

/// @brief fp32 -> TF32 (as a 32-bit pattern), round to nearest: ties to even on sm_90+ (`cvt.rn.tf32.f32`,
/// as cuDNN converts), ties away from zero below (`cvt.rna.tf32.f32`, the only rounding sm_80 offers).
/// The one TF32 conversion of the library (mma.sync and wgmma paths, filter packing).
__device__ __forceinline__ std::uint32_t to_tf32(float x) {
  std::uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#else
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}

/// @brief 3xTF32 split of x into two TF32 values, x ~= big + small to ~2^-22 relative (finite x: big =
/// TF32(x), small = TF32(x - big), the split of CUTLASS's 3xTF32), arranged so that the three products of
/// 3xTF32, a.small * b.big + a.big * b.small + a.big * b.big, also give IEEE's x * w for non-finite
/// operands (PyTorch's semantics: inf * w = +-inf by sign, inf * 0 = NaN, NaN propagates). For x = +-inf or
/// NaN: big = copysign(1, x), small = x. Then an infinity meets the other operand's big part (nonzero
/// with the other operand's sign unless that operand is 0, where inf * 0 = NaN is right) or its infinity,
/// never a zero small part, and the finite products beside it only add finite values. The naive split
/// (small = x - big = inf - inf) gives NaN for every infinite x. A nonzero |w| < 2^-136 rounds to big = 0:
/// then an infinite x times it gives NaN where IEEE gives +-inf.
__device__ __forceinline__ void split_tf32(float x, std::uint32_t& big, std::uint32_t& small) {
  const std::uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) {  // +-inf or NaN
    big = (bits & 0x80000000u) | 0x3f800000u;  // copysign(1, x)
    small = bits;
    return;
  }
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}

/// @brief Packs two fp32 into bf16x2 (round to nearest even): `lo` in the low half (lower k).
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// @brief Packs two fp32 into f16x2 (round to nearest even): `lo` in the low half (lower k).
__device__ __forceinline__ std::uint32_t pack_f16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/// @brief d += A(16x8, tf32) * B(8x8, tf32), fp32 accumulate (mma.sync.aligned.m16n8k8.row.col).
__device__ __forceinline__ void mma_tf32_16x8x8(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// @brief d += A(16x16, bf16) * B(16x8, bf16), fp32 accumulate (mma.sync.aligned.m16n8k16.row.col).
__device__ __forceinline__ void mma_bf16_16x8x16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// @brief d += A(16x16, f16) * B(16x8, f16), fp32 accumulate (mma.sync.aligned.m16n8k16.row.col).
__device__ __forceinline__ void mma_f16_16x8x16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace convred::warp
