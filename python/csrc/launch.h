// convred Python extension: the torch-free interface between the binding (binding.cpp, which knows
// torch) and the CUDA translation units (*.cu, which know only convred's headers). Keeping torch out of
// the .cu files keeps nvcc's work to the kernels themselves.
//
// Every CUDA call of the operator runs a convred::device::conv2d_reduce_plan: the binding keeps one plan
// per (problem, dtype, math, device) in a cache (as cudnn.benchmark keeps one algorithm per shape) and
// lends it a workspace from PyTorch's caching allocator.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <convred/problem.cuh>

namespace convred_ext {

/// Reduction across output channels. min/argmin run convred::op::argmin and max/argmax
/// convred::op::argmax (values and indices both written); amin/amax (values only, as torch.amin /
/// torch.amax) run convred::op::min / convred::op::max, which skip the index bookkeeping and the int64
/// index store; sum and mean write values only.
enum class reduce_kind : int { min, max, sum, mean, argmin, argmax, amin, amax };

/// Math precision as the user names it: ieee (exact fp32 / fp64 FMA), tf32, tf32x3, bf16, fp16, accurate
/// (convred::math::accurate: error vs float64 <= 1e-6, the planner's choice of kernel).
enum class math_kind : int { ieee, tf32, tf32x3, bf16, fp16, accurate };

/// Element type of x, weight, bias and values.
enum class dtype_kind : int { f32, f16, bf16, f64 };

/// The per-run arguments. Pointers are device pointers (already checked by the binding): x (N,C,H,W) in
/// the problem's layout, bias K elements or null, y N*P*Q elements, indices N*P*Q int64 or null (ignored
/// by amin / amax / sum / mean).
struct run_args {
  const void* x = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  std::int64_t* indices = nullptr;
  double scale = 1.0;
  cudaStream_t stream = nullptr;
};

/// A conv2d_reduce_plan<T, Math> behind a virtual interface, made for the device current at make_plan.
/// Every int is a convred::status (0 = success). Not thread-safe: bind/prepare and run must not race (the
/// binding holds a lock per plan).
class plan {
 public:
  virtual ~plan() = default;
  /// convred::status: success when the plan can run, else why not
  virtual int state() const = 0;
  /// the planner's one-line description (kernel, tiles, mode, workspace, why)
  virtual const std::string& description() const = 0;
  /// bytes of workspace a run needs (the packed filter and/or partial sums; 0: none)
  virtual std::size_t workspace_bytes() const = 0;
  /// the workspace's first bytes that prepare fills and runs only read (the packed filter; 0: none)
  virtual std::size_t prepared_bytes() const = 0;
  /// conv2d_reduce_plan::prepare: binds w and the workspace and packs the filter into it (on stream)
  virtual int prepare(const void* w, void* workspace, std::size_t bytes, cudaStream_t stream) = 0;
  /// the bytes of scratch bind takes beside the prepared bytes (what every run writes; 0: none)
  virtual std::size_t scratch_bytes() const = 0;
  /// conv2d_reduce_plan::bind: binds w, the prepared bytes an equal plan's prepare filled from w (read only),
  /// and a separate scratch buffer (written by the runs)
  virtual int bind(const void* w, const void* prepared, std::size_t prepared_size, void* scratch,
                   std::size_t scratch_size) = 0;
  /// conv2d_reduce_plan::run with the scale epilogue and the op of r
  virtual int run(reduce_kind r, const run_args& a) = 0;
};

/// The (T, Math) a (dtype, math) pair runs: 16-bit x under tf32 / tf32x3 / accurate runs its own 16-bit
/// tensor-core math (its values are exact in TF32 and in their own type alike, so the products are the
/// same and accumulate in fp32: fp32-level accuracy), float64 runs ieee (fp64 FMA). Returns the math the
/// plan is made with.
math_kind effective_math(dtype_kind t, math_kind m);

/// A plan for p with element type t and math m on the current device (never null; state() says whether
/// it can run). Host work only (no CUDA call besides device queries).
std::unique_ptr<plan> make_plan(dtype_kind t, math_kind m, const convred::conv2d_problem& p);

// One factory per translation unit (the .cu files): make_plan picks one.
std::unique_ptr<plan> make_plan_f32_ieee(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f32_tf32(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f32_tf32x3(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f32_accurate(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f32_bf16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f32_fp16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f16_ieee(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f16_bf16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f16_fp16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_bf16_ieee(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_bf16_bf16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_bf16_fp16(const convred::conv2d_problem& p);
std::unique_ptr<plan> make_plan_f64(const convred::conv2d_problem& p);

}  // namespace convred_ext
