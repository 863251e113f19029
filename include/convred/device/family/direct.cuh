/// @file device/family/direct.cuh
/// @brief The direct family: tiled direct convolution in exact FMA (conv2d_reduce_direct) for problems
/// whose output channels each read few input channels: C/groups == 1 (depthwise convolutions) under every
/// math, grouped convolutions with 1 < C/groups <= 16 (ResNeXt, RegNet) where its time model beats the
/// tensor-core families', and under TF32 and 3xTF32 dense ones with C <= 16 (stems) where it does. Exact,
/// so it serves every math; the GEMM families would spend a whole channel tile on each group's K/groups
/// channels, or a GEMM_K slice on a stem's 3 x R x S taps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>

#include "../conv2d_reduce_direct.cuh"
#include "../cost_model.cuh"
#include "../direct_config.cuh"
#include "family.cuh"
#include "grouped.cuh"
#include "mma_narrow.cuh"
#include "mma_sync.cuh"
#include "tiny.cuh"
#include "wgmma.cuh"

namespace convred::device::family {

/// @brief The direct family for element type T under the plan's math tag Math.
template <class T, class Math>
struct direct : family_defaults<direct<T, Math>, T> {
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::direct;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "direct";

  /// The device can run the family at all.
  static bool available(const device_info& dev) { return dev.cc_major > 0; }
  /// nullptr when the family serves p on dev with options o, else why not (a string literal): C/groups ==
  /// 1 (depthwise; also C = 1) always; 1 < C/groups <= block::direct_max_group_channels with groups > 1
  /// under math::ieee, on double data and on devices without tensor cores (compute capability below 8.0);
  /// and under a tensor-core math on sm_80+, for grouped layers and, under TF32 and 3xTF32, dense ones
  /// (groups == 1) with C <= 16 (stems such as 3 -> 16 channels 3x3 at stride 2), where no wgmma choice is forced
  /// (plan_options::splits == 0), the kernel unrolls the filter (direct_unrolled_filter: 3x3, 5x5, 7x7;
  /// grouped layers at stride 1, dense ones at stride 1 or 2) and its time estimate (configure) is below
  /// tensor_seconds and the narrow tensor-core family's (mma_narrow::rival_seconds: K/groups <= 32 under
  /// TF32, bf16 or fp16).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (!available(dev)) return "no CUDA device";
    const std::int64_t cg = p.C_per_group();
    if (cg == 1) return nullptr;
    if (cg > block::direct_max_group_channels) return "C/groups > 16";
    const bool dense = p.groups == 1;
    if constexpr (!std::is_same_v<kernel_math_t<T, Math>, math::ieee>) {
      if (dev.cc_major >= 8) {
        if (o.splits != 0) return "a wgmma choice is forced (plan_options::splits)";
        // Dense layers: not under a 16-bit math, whose tensor cores matched the exact kernel on the measured
        // stems (n1 c3 800x1088 k16 s2: mma.sync bf16 32.7 us, direct 35.7), nor where the tiny family (exact,
        // one kernel sized for the problem) serves them. Only the filters the kernel unrolls: its run-time
        // variant measured 2.6x slower than its estimate against mma.sync (H200: c1024 28x28 s2 g64 at batch
        // 32 under 3xTF32, 1.12 ms vs 0.43; bench/NOTES.md, "Grouped direct kernel, measured"). Grouped layers
        // at stride 1 only: the unrolled stride-2 variant is measured on depthwise and C = 3 dense layers,
        // not against mma.sync on grouped ones (bench/NOTES.md, "Ping-pong forced, and the direct kernel's
        // tilings measured").
        if (dense && plan_math_speed<kernel_math_t<T, Math>>() > 1.0)
          return "a dense convolution under a 16-bit math (the tensor-core kernels)";
        if (dense && tiny<T, Math>::can_implement(p, dev, o) == nullptr)
          return "a dense convolution the tiny family serves";
        if (direct_unrolled_filter(p) == 0 || (!dense && p.stride_h != 1))
          return dense ? "a dense convolution with a filter the direct kernel does not unroll"
                       : "grouped with a filter the direct kernel does not unroll at stride 1";
        if (!(configure(p, dev, o).seconds < std::min(tensor_seconds(p, dev), mma_narrow<T, Math>::rival_seconds(p, dev))))
          return dense ? "a dense convolution of C <= 16: estimated slower than the tensor-core kernels"
                       : "grouped: estimated slower than the tensor-core kernels";
        return nullptr;
      }
    }
    if (dense) return "groups == 1 (a dense convolution)";
    return nullptr;
  }
  /// @brief The tensor-core families' time on a grouped or small-C dense problem as the direct family
  /// compares itself with them (a tensor-core math): the mma.sync family's (plan_conv2d_reduce_seconds,
  /// fused or split: each group's K/groups channels in 128-channel tiles), or where faster family::grouped's
  /// (groups > 1: the wgmma kernel one group at a time) or the wgmma family's (dense, or a grouped problem's
  /// groups as channel passes) where that serves p; an unknown SM count (0) counts as one SM, as
  /// choose_direct_config plans it.
  static double tensor_seconds(const conv2d_problem& p, const device_info& dev) {
    if constexpr (std::is_same_v<kernel_math_t<T, Math>, math::ieee>) {
      (void)p, (void)dev;
      return 0;
    } else {
      using G = grouped<wgmma<T, Math, wgmma_role::adapter>, mma_sync<T, Math>>;
      using W = wgmma<T, Math, wgmma_role::adapter>;
      device_info d = dev;
      d.sm_count = std::max(1, dev.sm_count);
      double s = mma_sync<T, Math>::cost(p, d, plan_options{});
      if (p.groups > 1 && G::can_implement(p, d, plan_options{}) == nullptr)
        s = std::min(s, G::configure(p, d, plan_options{}).seconds);
      if (W::can_implement(p, d, plan_options{}) == nullptr)  // dense, or grouped passes
        s = std::min(s, W::configure(p, d, plan_options{}).seconds);
      return s;
    }
  }
  /// The tiling choose_direct_config picks for dev (thread-block clusters of up to direct_max_splits_sm90
  /// blocks on compute capability 9.0+ devices running sm_90a code); launched as is when it fits the
  /// problem's kernel variant (direct_fixed). seconds: the model's cycles at plan_direct_clock_hz (an
  /// estimate for comparisons only).
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    plan_config c;
    const direct_kernel_shape shape = direct_kernel_shape_of<T>(p);
    const int max_splits = clusters(dev) ? direct_max_splits_sm90 : 1;
    c.direct = choose_direct_config(p, shape, dev.sm_count, max_splits);
    c.direct_fixed = direct_config_fits(p, shape, c.direct, max_splits);
    c.seconds = c.direct.cycles / plan_direct_clock_hz;
    return c;
  }
  /// "direct (exact fp32 FMA, <the tiling>): C/groups == 1 (depthwise)" (or "grouped, C/groups = n" for
  /// 1 < C/groups <= 16 with groups > 1, "dense, C = n" for groups 1), ", exact for any math" under a
  /// tensor-core math.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info&, const std::string&) {
    const char* fma = std::is_same_v<T, double> ? "fp64" : "fp32";
    const bool exact_asked = std::is_same_v<Math, math::ieee> || std::is_same_v<Math, math::accurate>;
    return std::string("direct (exact ") + fma + " FMA, " + describe_direct_config(p, direct_kernel_shape_of<T>(p), c.direct) +
           (p.C_per_group() == 1 ? std::string("): C/groups == 1 (depthwise)")
            : p.groups == 1      ? "): dense, C = " + std::to_string(p.C)
                                 : "): grouped, C/groups = " + std::to_string(p.C_per_group())) +
           (exact_asked ? "" : ", exact for any math");
  }
  /// The configured tiling (conv2d_reduce_direct with it forced). conv2d_reduce_direct's own choice for
  /// the current device instead where the configuration did not fit the unrolled variant (direct_fixed
  /// false: the generic variant), or where the current device cannot launch its clusters (invalid_argument
  /// from the forced tiling: a plan made from another device's device_info).
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    if (c.direct_fixed) {
      const status s =
          device::detail::conv2d_reduce_direct_with<T>(&c.direct, p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
      if (s != status::invalid_argument) return s;
    }
    return conv2d_reduce_direct(p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
  }

 private:
  static bool clusters(const device_info& dev) { return dev.cc_major >= 9 && dev.wgmma_image; }
};

}  // namespace convred::device::family
