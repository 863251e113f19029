/// @file device/family/mma_sync.cuh
/// @brief The mma.sync family: the sm_80+ tensor-core kernel (conv2d_reduce with
/// default_mma_sync_policy of the kernel math), or its split over channel tiles and GEMM_K
/// (conv2d_reduce_split) when its pixel tiles are too few for the GPU (choose_k_splits). Serves every
/// problem and layout on sm_80 and newer.
#pragma once

#include <string>
#include <type_traits>

#include "../../policy.cuh"
#include "../cost_model.cuh"
#include "family.cuh"
#include "simt.cuh"

namespace convred::device::family {

/// @brief The mma.sync family for element type T under the plan's tensor-core math tag Math.
template <class T, class Math>
struct mma_sync : family_defaults<mma_sync<T, Math>, T> {
  using kernel_math = kernel_math_t<T, Math>;  ///< Math, or tf32x3 for math::accurate
  static_assert(!std::is_same_v<kernel_math, math::ieee>, "family::mma_sync: a tensor-core math");
  using policy = typename default_mma_sync_policy<kernel_math>::type;  ///< its policy
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::mma_sync;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "mma.sync";

  /// sm_80 and newer (TF32, bf16 and fp16 mma.sync).
  static bool available(const device_info& dev) { return dev.cc_major >= 8; }
  /// nullptr when the family serves p on dev with options o, else why not (a string literal).
  static const char* can_implement(const conv2d_problem&, const device_info& dev, const plan_options&) {
    return available(dev) ? nullptr : "mma.sync needs sm_80 or newer";
  }
  /// The split heuristic's choice (choose_k_splits) and its workspace; seconds: plan_conv2d_reduce_seconds
  /// for that choice (fused or split) on dev's SMs.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    plan_config c = detail::split_config<policy, T>(p, dev);
    c.seconds = plan_conv2d_reduce_seconds<policy>(p, dev.sm_count, c.splits, sizeof(compute_t<T>));
    return c;
  }
  /// "mma.sync tf32 (64-pixel x 64-channel tiles)" or with the split, then why the wgmma family was passed
  /// over, then the math::accurate note.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev,
                              const std::string& passed_over) {
    return std::string("mma.sync ") + math_name<kernel_math>() + detail::describe_split<policy, T>(p, c, dev, "") +
           passed_over + accurate_note<Math>();
  }
  /// Runs the configuration c for p on `stream` with the buffers in a (conv2d_reduce_plan::run's
  /// semantics and codes).
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    return detail::launch_split_path<policy>(p, c, a, op, epi, stream);
  }
};

}  // namespace convred::device::family
