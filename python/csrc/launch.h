// convred Python extension: the torch-free interface between the binding (binding.cpp, which knows
// torch) and the CUDA translation units (*.cu, which know only convred's headers). Keeping torch out of
// the .cu files keeps nvcc's work to the kernels themselves.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <convred/problem.cuh>

namespace convred_ext {

/// Reduction across output channels. min/argmin run convred::op::argmin and max/argmax
/// convred::op::argmax (values and indices both written); amin/amax (values only, as torch.amin /
/// torch.amax) run convred::op::min / convred::op::max, which skip the index bookkeeping and the int64
/// index store; sum and mean write values only.
enum class reduce_kind : int { min, max, sum, mean, argmin, argmax, amin, amax };

/// Math precision (convred::math tags): ieee (exact fp32 / fp64 FMA), tf32, tf32x3, bf16, fp16.
enum class math_kind : int { ieee, tf32, tf32x3, bf16, fp16 };

/// Arguments of one launch. Pointers are device pointers (already checked by the binding): x (N,C,H,W)
/// in p.x_layout, w KCRS contiguous, bias K elements or null, y N*P*Q elements, indices N*P*Q int64 or
/// null (ignored by amin / amax / sum / mean), packed the output of pack_filter (float + tensor-core math
/// only) or null.
struct launch_args {
  convred::conv2d_problem p;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  std::int64_t* indices = nullptr;
  const void* packed = nullptr;
  std::size_t packed_bytes = 0;
  double scale = 1.0;
  cudaStream_t stream = nullptr;
};

// Each returns a convred::status as int (0 = success, launched on a.stream).
int launch_f32_ieee(reduce_kind r, const launch_args& a);
int launch_f32_tf32(reduce_kind r, const launch_args& a);    // packed path (wgmma) with mma.sync fallback
int launch_f32_tf32x3(reduce_kind r, const launch_args& a);  // ditto
int launch_f32_bf16(reduce_kind r, const launch_args& a);    // ditto
int launch_f32_fp16(reduce_kind r, const launch_args& a);    // ditto
// 16-bit x: ieee (SIMT, widened to fp32), bf16, fp16 (mma.sync). Maths tf32 and tf32x3 run the kernel of
// x's own 16-bit type: 16-bit values are exact in TF32 and in their own type, so both multiply the same
// exact operands with fp32 accumulation (3xTF32's small parts would be zero)
int launch_f16_ieee(reduce_kind r, const launch_args& a);
int launch_f16_bf16(reduce_kind r, const launch_args& a);
int launch_f16_fp16(reduce_kind r, const launch_args& a);
int launch_bf16_ieee(reduce_kind r, const launch_args& a);
int launch_bf16_bf16(reduce_kind r, const launch_args& a);
int launch_bf16_fp16(reduce_kind r, const launch_args& a);
int launch_f64(reduce_kind r, const launch_args& a);                // ieee (fp64 FMA)

/// Bytes of the packed filter for float x with tensor-core math m (0: the wgmma kernel does not serve p
/// on the current device; math ieee: always 0). Queries the current device.
std::size_t packed_filter_bytes(math_kind m, const convred::conv2d_problem& p);
/// convred::device::pack_filter for float weights and tensor-core math m (status as int).
int pack_filter(math_kind m, const convred::conv2d_problem& p, const float* w, void* packed, std::size_t bytes,
                cudaStream_t stream);

}  // namespace convred_ext
