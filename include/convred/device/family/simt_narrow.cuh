/// @file device/family/simt_narrow.cuh
/// @brief The narrow family: the exact CUDA-core FMA kernel (conv2d_reduce, or its split over GEMM_K) in
/// 16-channel tiles for layers of at most 16 output channels per group (K = 1 to 16: heads, bottlenecks,
/// attention maps) and in 32-channel tiles for 17 to 32 (narrow groups: RegNet's and ResNeXt's 24-channel
/// groups), where every other kernel's 128-channel tile computes mostly padding (narrow_simt_policy).
/// Exact (the SIMT kernel's FMA order), so it may serve any math: under 3xTF32 (math::accurate on sm_80+)
/// where its estimate beats the tensor-core families' (family::direct::tensor_seconds), under math::ieee
/// (and on GPUs without tensor cores) where it beats the SIMT family's; not under TF32, bf16 or fp16, whose
/// tensor cores it has not been measured against (family::mma_narrow serves those; no kernel of this
/// family is compiled for them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../policy.cuh"
#include "../cost_model.cuh"
#include "direct.cuh"
#include "family.cuh"
#include "simt.cuh"

namespace convred::device::family {

/// @brief The narrow family for element type T under the plan's math tag Math in BlockN-channel tiles, 16
/// (K/groups <= 16) or 32 (16 < K/groups <= 32), see the file comment.
template <class T, class Math, int BlockN = 16>
struct simt_narrow : family_defaults<simt_narrow<T, Math, BlockN>, T> {
  using policy = typename narrow_simt_policy<T, BlockN>::type;  ///< its policy (BlockN-channel tiles)
  /// the family's kind (plan_config::kind): the SIMT kernel
  static constexpr kernel_kind kind = kernel_kind::simt;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "narrow simt";

  /// Every device with convred's code (the kernel needs no tensor cores).
  static bool available(const device_info& dev) { return dev.cc_major > 0; }
  /// nullptr when it serves p on dev with options o: K/groups <= BlockN (and above 16 for the 32-channel
  /// tiles: the 16-channel tiles, ahead of them in the default list, serve the others; under 3xTF32 the
  /// 32-channel tiles serve grouped layers only), no wgmma choice
  /// forced (plan_options::splits == 0), and its estimate (configure) below the SIMT family's under
  /// math::ieee (double data, and math::accurate on GPUs without tensor cores, whose SIMT family runs it),
  /// or below the tensor-core families' on p (family::direct::tensor_seconds: the mma.sync kernel, the
  /// wgmma kernel and one group at a time) under 3xTF32 (math::accurate, math::tf32x3) on sm_80+ with a
  /// known SM count and its partial sums within default_split_workspace_limit; never under TF32, bf16 or
  /// fp16, nor under math::tf32x3 below sm_80 (the tensor-core maths' own "needs sm_80" then).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (!available(dev)) return "no CUDA device";
    if (p.K_per_group() > BlockN) return BlockN == 16 ? "K/groups > 16" : "K/groups > 32";
    if (BlockN == 32 && p.K_per_group() <= 16) return "K/groups <= 16 (its 16-channel tiles)";
    if (o.splits != 0) return "a wgmma choice is forced (plan_options::splits)";
    if constexpr (!std::is_same_v<kernel_math_t<T, Math>, math::ieee>) {
      // TF32 and the 16-bit maths run the tensor cores at 3-6x 3xTF32's rate (plan_math_speed): not weighed
      // against them until measured
      if (!std::is_same_v<kernel_math_t<T, Math>, math::tf32x3>) return "a TF32 or 16-bit math (the tensor-core kernels)";
      if (chained(dev)) {
        if (dev.sm_count <= 0) return "an unknown SM count (its estimate is per SM)";
        // 32-channel tiles in place of 3xTF32: grouped layers only (measured 1.3-2.4x faster than the
        // mma.sync kernel on five; on two dense 1x1 layers of K = 24 and 32, 7-17 % slower)
        if (BlockN == 32 && p.groups == 1) return "a dense layer under 3xTF32 (its 32-channel tiles: grouped layers)";
        const plan_config c = configure(p, dev, o);
        if (c.splits > 0 && (c.workspace_bytes == 0 || c.workspace_bytes > default_split_workspace_limit ||
                             split_channel_tiles<policy, T>(p) > max_k_splits))
          return "its GEMM_K splits' partial sums above 64 MiB";
        return c.seconds < direct<T, Math>::tensor_seconds(p, dev) ? nullptr
                                                                    : "estimated slower than the tensor-core kernels";
      }
      if (!std::is_same_v<Math, math::accurate>) return "tf32x3 tensor-core math needs sm_80 or newer";
    }
    return configure(p, dev, o).seconds < simt<T, Math>::configure(p, dev, o).seconds
               ? nullptr
               : "estimated slower than the SIMT family's 128-channel tiles";
  }
  /// The split heuristic's choice (choose_k_splits) for its policy and the workspace; in place of 3xTF32
  /// (chained: sm_80+) at least ceil(GEMM_K / plan_narrow_accurate_chain) GEMM_K splits, so that no sum
  /// runs more than that many FMAs in sequence before the fixup adds the partial sums (3xTF32's error,
  /// 1e-6 against float64, holds). seconds: plan_conv2d_reduce_seconds for that choice on dev's SMs, its
  /// part beyond plan_mma_fixed_seconds times plan_simt_narrow_slowdown (16-channel tiles) or
  /// plan_simt_narrow32_slowdown (32).
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    plan_config c = detail::split_config<policy, T>(p, dev);
    if (chained(dev)) {
      const std::int64_t chains = (p.gemm_k() + plan_narrow_accurate_chain - 1) / plan_narrow_accurate_chain;
      if (chains > 1 && c.splits < chains) {
        c.splits = static_cast<int>(std::min<std::int64_t>(chains, max_k_splits));
        c.workspace_bytes = conv2d_reduce_split_workspace_bytes<T>(p, c.splits);
      }
    }
    const double t = plan_conv2d_reduce_seconds<policy>(p, dev.sm_count, c.splits, sizeof(compute_t<T>));
    c.seconds = plan_mma_fixed_seconds +
                (t - plan_mma_fixed_seconds) * (BlockN == 16 ? plan_simt_narrow_slowdown : plan_simt_narrow32_slowdown);
    return c;
  }
  /// "simt ieee (exact fp32 FMA, 128-pixel x 16-channel tiles): K/groups <= 16 (the narrow family)" (32:
  /// "16 < K/groups <= 32"), or with the split; ", exact for any math" under a tensor-core math.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev, const std::string&) {
    const char* fma = std::is_same_v<T, double> ? "fp64" : "fp32";
    const bool exact_asked = std::is_same_v<Math, math::ieee> || std::is_same_v<Math, math::accurate>;
    return std::string("simt ieee") + detail::describe_split<policy, T>(p, c, dev, std::string("exact ") + fma + " FMA, ") +
           (BlockN == 16 ? ": K/groups <= 16" : ": 16 < K/groups <= 32") + " (the narrow family)" +
           (exact_asked ? "" : ", exact for any math");
  }
  /// Runs the configuration c for p on `stream` with the buffers in a (conv2d_reduce_plan::run's
  /// semantics and codes). (Under TF32, bf16 or fp16 it never serves, and no kernel is compiled:
  /// invalid_argument.)
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    if constexpr (std::is_same_v<kernel_math_t<T, Math>, math::ieee> || std::is_same_v<kernel_math_t<T, Math>, math::tf32x3>) {
      return detail::launch_split_path<policy>(p, c, a, op, epi, stream);
    } else {
      (void)p, (void)c, (void)a, (void)op, (void)epi, (void)stream;
      return status::invalid_argument;
    }
  }

 private:
  /// Whether it runs in place of 3xTF32 on dev (a 3xTF32 kernel math on sm_80+): its sums then chained
  /// to plan_narrow_accurate_chain values.
  static bool chained(const device_info& dev) {
    return std::is_same_v<kernel_math_t<T, Math>, math::tf32x3> && dev.cc_major >= 8;
  }
};

}  // namespace convred::device::family
