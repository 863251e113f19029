/// @file device/family/simt.cuh
/// @brief The SIMT family: the exact CUDA-core FMA kernel (conv2d_reduce with default_simt_policy<T>), or
/// its split over channel tiles and GEMM_K (conv2d_reduce_split) when its pixel tiles are too few for
/// the GPU (choose_k_splits). Serves every problem on every GPU; the planner takes it for math::ieee, for
/// double data, and for math::accurate on GPUs without TF32 tensor cores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../policy.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../conv2d_reduce.cuh"
#include "../conv2d_reduce_split.cuh"
#include "family.cuh"

namespace convred::device::family {

namespace detail {

/// The split path's configuration for Policy on dev: splits (choose_k_splits) and the partial sums'
/// workspace (conv2d_reduce_split_workspace_bytes).
template <class Policy, class T>
plan_config split_config(const conv2d_problem& p, const device_info& dev) {
  plan_config c;
  c.splits = choose_k_splits<Policy, T>(p, dev.sm_count);
  if (c.splits > 0) c.workspace_bytes = conv2d_reduce_split_workspace_bytes<T>(p, c.splits);
  return c;
}

/// The middle of a split-path family's description: " (<what>B-pixel x B-channel tiles)" or " split C
/// channel tiles x S GEMM_K splits (<what>tiles; m pixel tiles for n SMs; bytes-byte workspace)".
template <class Policy, class T>
std::string describe_split(const conv2d_problem& p, const plan_config& c, const device_info& dev, const std::string& what) {
  const std::string tiles = what + std::to_string(Policy::block_m) + "-pixel x " + std::to_string(Policy::block_n) +
                            "-channel tiles";
  if (c.splits == 0) return " (" + tiles + ")";
  const std::int64_t m_tiles = (p.gemm_m() + Policy::block_m - 1) / Policy::block_m;
  return " split " + std::to_string(split_channel_tiles<Policy, T>(p)) + " channel tiles x " + std::to_string(c.splits) +
         " GEMM_K splits (" + tiles + "; " + std::to_string(m_tiles) + " pixel tile" + (m_tiles == 1 ? "" : "s") +
         " for " + std::to_string(dev.sm_count) + " SMs; " + std::to_string(c.workspace_bytes) + "-byte workspace)";
}

/// Runs Policy's fused kernel, or its split path with the plan's splits and the scratch.
template <class Policy, class T, class Op, class Epilogue>
status launch_split_path(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                         cudaStream_t stream) {
  if (c.splits > 0)
    return conv2d_reduce_split<Policy>(p, a.x, a.w, a.bias, a.y, a.indices, a.scratch ? a.scratch : a.workspace,
                                       a.scratch ? a.scratch_bytes : a.workspace_bytes, c.splits, op, epi, stream);
  return conv2d_reduce<Policy>(p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
}

}  // namespace detail

/// @brief The SIMT family for element type T under the plan's math tag Math (see the file comment).
template <class T, class Math>
struct simt : family_defaults<simt<T, Math>, T> {
  using policy = typename default_simt_policy<T>::type;  ///< its policy
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::simt;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "simt";
  /// the plan's math runs exact FMA: math::ieee, or math::accurate on double data
  static constexpr bool exact_math = std::is_same_v<kernel_math_t<T, Math>, math::ieee>;
  /// the plan's math is math::accurate
  static constexpr bool accurate = std::is_same_v<Math, math::accurate>;

  /// Every device with convred's code (sm_80+ builds; the kernel itself needs no tensor cores).
  static bool available(const device_info& dev) { return dev.cc_major > 0; }
  /// Serves every problem where the math is exact FMA, or math::accurate without TF32 tensor cores (a
  /// device older than sm_80); a tensor-core math reaches it only where no tensor-core family served:
  /// "<math> tensor-core math needs sm_80 or newer".
  static const char* can_implement(const conv2d_problem&, const device_info& dev, const plan_options&) {
    if (!available(dev)) return "no CUDA device";
    if (exact_math || (accurate && dev.cc_major < 8)) return nullptr;
    if constexpr (std::is_same_v<Math, math::tf32>) return "tf32 tensor-core math needs sm_80 or newer";
    else if constexpr (std::is_same_v<Math, math::tf32x3>) return "tf32x3 tensor-core math needs sm_80 or newer";
    else if constexpr (std::is_same_v<Math, math::bf16>) return "bf16 tensor-core math needs sm_80 or newer";
    else return "fp16 tensor-core math needs sm_80 or newer";
  }
  /// The split heuristic's choice (choose_k_splits) and its workspace; seconds: plan_conv2d_reduce_seconds
  /// for that choice on dev's SMs.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    plan_config c = detail::split_config<policy, T>(p, dev);
    c.seconds = plan_conv2d_reduce_seconds<policy>(p, dev.sm_count, c.splits, sizeof(compute_t<T>));
    return c;
  }
  /// "simt ieee (exact fp32 FMA, 64-pixel x 64-channel tiles): math::ieee", or with the split.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev, const std::string&) {
    const char* fma = std::is_same_v<T, double> ? "fp64" : "fp32";
    return std::string("simt ieee") + detail::describe_split<policy, T>(p, c, dev, std::string("exact ") + fma + " FMA, ") +
           (!exact_math ? ": math::accurate on a GPU older than sm_80 (no TF32 tensor cores)"
            : accurate  ? ": math::accurate on double data (error vs float64 <= 1e-6)"
                        : ": math::ieee");
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
