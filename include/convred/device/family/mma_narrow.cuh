/// @file device/family/mma_narrow.cuh
/// @brief The narrow tensor-core family: the mma.sync kernel (conv2d_reduce, or its split over GEMM_K) with
/// 32-channel tiles (narrow_mma_sync_policy) for layers of at most 32 output channels per group under TF32,
/// bf16 or fp16 (heads, bottlenecks, squeeze layers), where the wgmma kernel's and the default mma.sync
/// policy's 128-channel tiles compute 4x (K = 32) to 128x (K = 1) the layer's products. The same kernel and
/// FMA order as family::mma_sync; not under 3xTF32 (math::accurate), whose narrow layers the exact narrow
/// family takes.
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>

#include "../../policy.cuh"
#include "../cost_model.cuh"
#include "dilated.cuh"
#include "family.cuh"
#include "mma_sync.cuh"
#include "pruned.cuh"
#include "simt.cuh"
#include "wgmma.cuh"

namespace convred::device::family {

template <class T, class Math>
struct direct;  // direct.cuh (included at the end): its tensor_seconds is this family's rival, and its
                // can_implement weighs this family's estimate (rival_seconds)

/// @brief The narrow tensor-core family for element type T under the plan's math tag Math (see the file
/// comment).
template <class T, class Math>
struct mma_narrow : family_defaults<mma_narrow<T, Math>, T> {
  using kernel_math = kernel_math_t<T, Math>;  ///< Math, or tf32x3 for math::accurate
  using policy = typename narrow_mma_sync_policy<std::conditional_t<std::is_same_v<kernel_math, math::ieee>, math::tf32,
                                                                    kernel_math>>::type;  ///< its policy
  /// the family's kind (plan_config::kind): the mma.sync kernel
  static constexpr kernel_kind kind = kernel_kind::mma_sync;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "narrow mma.sync";

  /// sm_80 and newer (TF32, bf16 and fp16 mma.sync).
  static bool available(const device_info& dev) { return dev.cc_major >= 8; }
  /// nullptr when it serves p on dev with options o: a TF32, bf16 or fp16 kernel math, K/groups <=
  /// policy::block_n (32), a known SM count, no wgmma choice forced (plan_options::splits == 0), and its
  /// estimate (configure) below the tensor-core families' on p (family::direct::tensor_seconds: the
  /// default mma.sync policy, the wgmma kernel and one group at a time) and below family::pruned's and
  /// family::dilated's where they serve p (after it in the default list).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if constexpr (std::is_same_v<kernel_math, math::ieee> || std::is_same_v<kernel_math, math::tf32x3>) {
      (void)p, (void)dev, (void)o;
      return "not a TF32, bf16 or fp16 math (3xTF32's narrow layers: the exact narrow family)";
    } else {
      if (!available(dev)) return "mma.sync needs sm_80 or newer";
      if (p.K_per_group() > policy::block_n) return "K/groups > 32";
      if (o.splits != 0) return "a wgmma choice is forced (plan_options::splits)";
      if (dev.sm_count <= 0) return "an unknown SM count (its estimate is per SM)";
      // its rivals: the tensor-core families (direct::tensor_seconds), and the adapters after it in the
      // default list where they serve p (taps reading only padding dropped, dilation as space to batch),
      // which weigh themselves against the default mma.sync family only
      using W = wgmma<T, Math, wgmma_role::adapter>;
      using P = pruned<W, mma_sync<T, Math>>;
      using D = dilated<W, mma_sync<T, Math>>;
      double rival = direct<T, Math>::tensor_seconds(p, dev);
      if (P::can_implement(p, dev, o) == nullptr) rival = std::min(rival, P::cost(p, dev, o));
      if (D::can_implement(p, dev, o) == nullptr) rival = std::min(rival, D::cost(p, dev, o));
      return configure(p, dev, o).seconds < rival ? nullptr
                                                  : "estimated slower than the tensor-core kernels' 128-channel tiles";
    }
  }
  /// Its estimate (configure's seconds) where it could serve p on dev by shape (a TF32, bf16 or fp16 kernel
  /// math, K/groups <= 32, sm_80+, a known SM count), else infinity: the direct family, ahead of it in the
  /// default list, weighs itself against this too.
  static double rival_seconds(const conv2d_problem& p, const device_info& dev) {
    if constexpr (std::is_same_v<kernel_math, math::ieee> || std::is_same_v<kernel_math, math::tf32x3>) {
      (void)p, (void)dev;
      return std::numeric_limits<double>::infinity();
    } else {
      return available(dev) && dev.sm_count > 0 && p.K_per_group() <= policy::block_n
                 ? configure(p, dev, plan_options{}).seconds
                 : std::numeric_limits<double>::infinity();
    }
  }
  /// The split heuristic's choice (choose_k_splits) for its policy and the workspace; seconds:
  /// plan_mma_fixed_seconds plus the longer of plan_conv2d_reduce_seconds' part beyond it (that choice on
  /// dev's SMs) times plan_mma_narrow_slowdown and its im2col operand (N*P*Q x GEMM_K x groups elements, 4
  /// bytes each for any T: measured on fp32 data) at plan_mma_narrow_operand_bytes_per_s.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    plan_config c = detail::split_config<policy, T>(p, dev);
    const double t = plan_conv2d_reduce_seconds<policy>(p, dev.sm_count, c.splits, sizeof(compute_t<T>));
    // (counted at 4 bytes per element whatever T: fitted on fp32 data, the gather's cost per element)
    const double operand = static_cast<double>(p.gemm_m()) * static_cast<double>(p.gemm_k()) *
                           static_cast<double>(p.groups) * 4.0;
    c.seconds = plan_mma_fixed_seconds + std::max((t - plan_mma_fixed_seconds) * plan_mma_narrow_slowdown,
                                                  operand / plan_mma_narrow_operand_bytes_per_s);
    return c;
  }
  /// "mma.sync tf32 (128-pixel x 32-channel tiles): K/groups <= 32 (the narrow tensor-core family)", or with
  /// the split.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev, const std::string&) {
    return std::string("mma.sync ") + math_name<kernel_math>() + detail::describe_split<policy, T>(p, c, dev, "") +
           ": K/groups <= 32 (the narrow tensor-core family)";
  }
  /// Runs the configuration c for p on `stream` with the buffers in a (conv2d_reduce_plan::run's
  /// semantics and codes).
  /// (Under 3xTF32 or math::ieee it never serves, and no kernel is compiled: invalid_argument.)
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    if constexpr (std::is_same_v<kernel_math, math::ieee> || std::is_same_v<kernel_math, math::tf32x3>) {
      (void)p, (void)c, (void)a, (void)op, (void)epi, (void)stream;
      return status::invalid_argument;
    } else {
      return detail::launch_split_path<policy>(p, c, a, op, epi, stream);
    }
  }
};

}  // namespace convred::device::family

#include "direct.cuh"  // family::direct (declared above; this order lets either header come first)
