/// @file device/family/grouped.cuh
/// @brief The grouped family: a grouped convolution (groups > 1, C/groups > 1) run by another family one
/// group at a time, each group a dense convolution of C/groups input and K/groups output channels
/// (GEMM_N = K/groups, GEMM_K = C/groups R S), its reduced outputs combined per pixel after the last
/// group (kernel/group_combine.cuh). With the Hopper wgmma family inside, ResNeXt- and RegNet-style
/// layers with wide groups run on the wgmma kernel instead of the mma.sync fallback, which spends a
/// 128-channel tile on each group's channels at a quarter of wgmma's rate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../functional.cuh"
#include "../../kernel/group_combine.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "../conv2d_reduce.cuh"
#include "../cost_model.cuh"
#include "family.cuh"

namespace convred::device::family {

namespace detail {
/// @brief An epilogue of the problem as the epilogue of one group's sub-problem, whose channel k' is the
/// problem's k' + offset: `ok` where that is the same type (identity, scale and callables without a
/// channel index: unchanged; per_channel_scale: its pointer moved by offset; compose: both parts), so
/// that the inner family's kernels are the instantiations the plan already has. A user epilogue taking
/// a channel index, and any extended __device__ lambda, is not `ok` (the grouped family then runs the
/// mma.sync kernel on the whole problem).
template <class E, class V>
struct channel_shift {
  /// the channel is not read: a callable without a channel index; never an extended __device__ lambda, whose
  /// signature nvcc's host pass cannot see (the two passes would disagree)
  static constexpr bool ok = !convred::detail::is_device_lambda<E>() && !std::is_invocable_v<const E&, V, int>;
  static E apply(const E& e, std::int64_t) { return e; }             ///< e itself
};
template <class V>
struct channel_shift<epilogue::identity, V> {
  static constexpr bool ok = true;
  static epilogue::identity apply(const epilogue::identity& e, std::int64_t) { return e; }
};
template <class S, class V>
struct channel_shift<epilogue::scale<S>, V> {
  static constexpr bool ok = true;
  static epilogue::scale<S> apply(const epilogue::scale<S>& e, std::int64_t) { return e; }
};
template <class S, class V>
struct channel_shift<epilogue::per_channel_scale<S>, V> {
  static constexpr bool ok = true;
  static epilogue::per_channel_scale<S> apply(const epilogue::per_channel_scale<S>& e, std::int64_t offset) {
    return {e.s ? e.s + offset : nullptr};
  }
};
template <class A, class B, class V>
struct channel_shift<epilogue::compose<A, B>, V> {
  static constexpr bool ok = channel_shift<A, V>::ok && channel_shift<B, V>::ok;
  static epilogue::compose<A, B> apply(const epilogue::compose<A, B>& e, std::int64_t offset) {
    return {channel_shift<A, V>::apply(e.first, offset), channel_shift<B, V>::apply(e.second, offset)};
  }
};

/// @brief Whether the groups' reduced outputs can be combined for Op (kernel::group_combine_kernel):
/// convred's min, max, sum, mean, argmin and argmax; a user op's reduced value need not be its state.
template <class Op>
inline constexpr bool group_combinable_v =
    std::is_same_v<Op, op::min> || std::is_same_v<Op, op::max> || std::is_same_v<Op, op::sum> ||
    std::is_same_v<Op, op::mean> || std::is_same_v<Op, op::argmin> || std::is_same_v<Op, op::argmax>;
}  // namespace detail

/// @brief The grouped family over an inner family (family::wgmma in the default list) and the mma.sync
/// family `Fallback` of the same math (its policy's fused kernel runs what the groups cannot). Group j of
/// a problem p (groups G, Cg = C/G, Kg = K/G) is the dense sub-problem (N, Cg, H, W) -> Kg channels (groups 1) on x's channels [j Cg, (j + 1) Cg),
/// the filter rows [j Kg, (j + 1) Kg) of w (KCRS: contiguous) and the bias from b + j Kg. prepare()
/// prepares each group's filter in its own slot of the prepared bytes; a run copies each group's
/// channels of x into the scratch (cudaMemcpy2DAsync; not at batch 1, where they are contiguous in x,
/// when 16-byte aligned), runs the inner family on them, its reduced values and indices kept in the
/// scratch, and one kernel combines the G results per pixel (kernel::group_combine_kernel). Values and
/// indices follow PyTorch's conv2d (groups) and reduction semantics as in every family; the result is
/// the inner family's per group, so its precision class. Epilogues taking a channel index other than
/// convred's (per_channel_scale, compose of them) and user ops run Fallback's policy's fused kernel on the
/// whole problem instead (same results, the mma.sync path's speed), as do extended __device__ lambdas; the
/// plan's description does not say so (it is made before the epilogue is known).
template <class Inner, class Fallback>
struct grouped : family_defaults<grouped<Inner, Fallback>, typename Inner::element_type> {
  using T = typename Inner::element_type;  ///< the element type of x, w, b, y
  /// the inner family's kind: its kernels run (plan::kernel())
  static constexpr kernel_kind kind = Inner::kind;
  /// its name in descriptions
  static constexpr const char* name = "grouped";
  /// whether a family chosen after it names why this one was passed over
  static constexpr bool report_rejection = false;
  /// the fewest output channels per group it serves: fewer leave most of the inner kernel's 128-channel
  /// passes empty and its G launches per run cost more than they save
  static constexpr std::int64_t min_k_per_group = 32;

  /// @brief One group's dense sub-problem: C/G input and K/G output channels, groups 1.
  static conv2d_problem sub_problem(const conv2d_problem& p) {
    conv2d_problem s = p;
    s.C = p.C_per_group(), s.K = p.K_per_group(), s.groups = 1;
    return s;
  }

  /// The inner family's.
  static bool available(const device_info& dev) { return Inner::available(dev); }

  /// nullptr when it serves p: groups > 1 with C/groups > 1 (C/groups == 1 is the direct family's), K/groups
  /// >= min_k_per_group, NCHW float x with images under 2 GiB, the inner family serving the sub-problem,
  /// and (on a device with an SM count, unless o.splits is nonzero: a forced wgmma choice) its time model
  /// estimating the G groups faster than Fallback on the whole problem (Fallback::cost: the mma.sync
  /// family's plan_conv2d_reduce_seconds, fused or split) and (unless o.splits is nonzero) than the inner
  /// family on the whole problem where it serves that (the wgmma kernel's grouped passes: every group in
  /// one launch; the wgmma family after this one in the default list then takes it).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (p.groups <= 1) return "groups == 1";
    if (p.C_per_group() == 1) return "C/groups == 1 (depthwise: the direct family's)";
    if (p.K_per_group() < min_k_per_group) return "fewer than 32 output channels per group";
    if (!std::is_same_v<T, float>) return "x is not float";
    if (p.x_layout != layout::nchw) return "x is not NCHW";
    if (p.groups >= (std::int64_t(1) << 31)) return "groups at or above 2^31";
    // (cudaMemcpy2DAsync's pitches: at most 2^31 - 1 bytes on current GPUs, cudaDeviceProp::memPitch)
    if (!convred::detail::product_below({p.C, p.H, p.W, static_cast<std::int64_t>(sizeof(T))}, std::int64_t(1) << 31))
      return "an image of x of 2 GiB or more (the group copy's pitch)";
    const conv2d_problem s = sub_problem(p);
    if (const char* why = Inner::can_implement(s, dev, o)) return why;
    const plan_config ic = Inner::configure(s, dev, o);
    const double groups = static_cast<double>(p.groups);
    if (!workspace_fits({groups * (static_cast<double>(ic.prepared_bytes) + 16), static_cast<double>(ic.workspace_bytes),
                         static_cast<double>(s.x_elements()) * sizeof(T),
                         groups * static_cast<double>(p.gemm_m()) * (sizeof(T) + sizeof(std::int64_t))}))
      return "its workspace would reach 2^62 bytes";
    const double t = configure(p, dev, o).seconds;
    if (rival_not_slower<Fallback>(p, dev, o, t))
      return "the groups one at a time are estimated slower than the mma.sync kernel on the whole problem";
    if (o.splits == 0 && Inner::can_implement(p, dev, o) == nullptr && !(t < Inner::configure(p, dev, o).seconds))
      return "the inner kernel's grouped passes (all groups in one launch) are estimated as fast";
    return nullptr;
  }

  /// The inner family's configuration of the sub-problem, with G slots of its prepared bytes, its scratch
  /// and extra_bytes after them, and G times its time estimate plus the copies' and the combine's.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    const plan_config ic = Inner::configure(sub_problem(p), dev, o);
    plan_config c = ic;
    c.prepared_bytes = static_cast<std::size_t>(p.groups) * slot_bytes(ic);
    c.workspace_bytes = c.prepared_bytes + round16(inner_scratch_bytes(ic)) + extra_bytes(p);
    c.seconds = static_cast<double>(p.groups) * ic.seconds + copy_seconds(p);
    return c;
  }

  /// "groups 4 one at a time (4 dense convolutions of 168 -> 168 channels; x's group copied into the
  /// workspace on each run; their reductions combined per pixel): <the inner family's description>".
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev,
                              const std::string& passed_over) {
    const conv2d_problem s = sub_problem(p);
    return "groups " + std::to_string(p.groups) + " one at a time (" + std::to_string(p.groups) +
           " dense convolutions of " + std::to_string(s.C) + " -> " + std::to_string(s.K) + " channels; " +
           (copies(p) ? "x's group copied into the workspace on each run"
                      : "each group read in place where 16-byte aligned, else copied") +
           "; their reductions combined per pixel): " + Inner::describe(s, inner_config(p, c), dev, passed_over);
  }
  /// The inner family's.
  static status runs_here(const plan_config& c) { return Inner::runs_here(c); }
  /// The inner family's prepare of each group's filter rows into its slot of the prepared bytes.
  static status prepare(const conv2d_problem& p, const plan_config& c, const T* w, void* workspace, std::size_t,
                        cudaStream_t stream) {
    const plan_config ic = inner_config(p, c);
    const conv2d_problem s = sub_problem(p);
    const std::size_t slot = c.prepared_bytes / static_cast<std::size_t>(p.groups);
    for (std::int64_t j = 0; j < p.groups; ++j)
      if (status st = Inner::prepare(s, ic, w + j * s.w_elements(), static_cast<unsigned char*>(workspace) + j * slot,
                                     slot, stream);
          st != status::success)
        return st;
    return status::success;
  }

  /// Runs the groups one after the other on `stream`, then the combine. Every run writes the scratch
  /// (the copies of x's groups, the groups' outputs): runs of one plan on different streams must not
  /// overlap in time unless each binds its own scratch. The caller's buffers are checked first
  /// (adapter_checks: indices_not_supported, null_pointer, misaligned_pointer, overlapping_buffers,
  /// cuda_error, size_overflow); then the inner family's statuses; cuda_error for a failed copy or launch.
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    using V = compute_t<T>;
    if constexpr (!detail::group_combinable_v<Op> || !detail::channel_shift<Epilogue, V>::ok) {
      (void)c;
      return conv2d_reduce<typename Fallback::policy>(p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
    } else {
      const std::int64_t M = p.gemm_m(), G = p.groups;
      if (M == 0) return status::success;
      const conv2d_problem s = sub_problem(p);
      const plan_config ic = inner_config(p, c);
      const std::size_t slot = c.prepared_bytes / static_cast<std::size_t>(G);
      const std::size_t inner_scratch = c.workspace_bytes - c.prepared_bytes - extra_bytes(p);
      auto* base = a.scratch ? static_cast<unsigned char*>(a.scratch)
                             : static_cast<unsigned char*>(a.workspace) + c.prepared_bytes;
      if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return status::misaligned_pointer;
      const std::size_t have = a.scratch                             ? a.scratch_bytes
                               : a.workspace_bytes > c.prepared_bytes ? a.workspace_bytes - c.prepared_bytes
                                                                      : 0;
      if (have < inner_scratch + extra_bytes(p)) return status::workspace_too_small;
      unsigned char* mine = base + inner_scratch;
      T* xs = reinterpret_cast<T*>(mine);
      T* ys = reinterpret_cast<T*>(mine + xs_bytes(p));
      const std::size_t gm = static_cast<std::size_t>(G) * static_cast<std::size_t>(M);  // (workspace_fits)
      auto* is = reinterpret_cast<std::int64_t*>(mine + xs_bytes(p) + round16(gm * sizeof(T)));
      const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((M + 255) / 256, std::int64_t(1) << 16));
      // (the whole scratch: the inner family's and the copies)
      if (status st = adapter_checks<Op>(p, a, c, base, inner_scratch + extra_bytes(p), blocks); st != status::success)
        return st;
      run_arguments<T> ia = a;
      ia.workspace_bytes = slot, ia.scratch = base, ia.scratch_bytes = inner_scratch;
      const std::int64_t plane = s.C * p.H * p.W;  // one image's channels of a group
      for (std::int64_t j = 0; j < G; ++j) {
        const T* xg = a.x + j * plane;
        if (copies(p) || reinterpret_cast<std::uintptr_t>(xg) % 16 != 0) {
          const std::size_t width = static_cast<std::size_t>(plane) * sizeof(T),
                            pitch = static_cast<std::size_t>(p.C * p.H * p.W) * sizeof(T);
          if (cudaMemcpy2DAsync(xs, width, xg, pitch, width, static_cast<std::size_t>(p.N), cudaMemcpyDeviceToDevice,
                                stream) != cudaSuccess)
            return status::cuda_error;
          xg = xs;
        }
        ia.x = xg, ia.w = a.w + j * s.w_elements(), ia.bias = a.bias ? a.bias + j * s.K : nullptr;
        ia.y = ys + j * M, ia.indices = Op::has_index ? is + j * M : nullptr;
        ia.workspace = static_cast<unsigned char*>(a.workspace) + j * slot;
        const Epilogue ej = detail::channel_shift<Epilogue, V>::apply(epi, j * s.K);
        if (status st = Inner::launch(s, ic, ia, op, ej, stream); st != status::success) return st;
      }
      kernel::group_combine_kernel<T, Op><<<blocks, 256, 0, stream>>>(ys, Op::has_index ? is : nullptr, M,
                                                                      static_cast<std::int32_t>(G), s.K, a.y,
                                                                      a.indices, op);
      return device::detail::launch_status();
    }
  }

  /// Bytes after the inner family's scratch: the copy of one group of x (used at batch 1 only where a
  /// group's channels in x are not 16-byte aligned), the G groups' values (T) and indices (int64) per
  /// output pixel.
  static std::size_t extra_bytes(const conv2d_problem& p) {
    const std::size_t gm = static_cast<std::size_t>(p.groups) * static_cast<std::size_t>(p.gemm_m());  // (workspace_fits)
    return xs_bytes(p) + round16(gm * sizeof(T)) + round16(gm * sizeof(std::int64_t));
  }

 private:
  /// Whether a run copies x's groups: at batch 1 a group's channels are contiguous in NCHW x.
  static bool copies(const conv2d_problem& p) { return p.N != 1; }
  static std::size_t xs_bytes(const conv2d_problem& p) {
    return round16(static_cast<std::size_t>(sub_problem(p).x_elements()) * sizeof(T));
  }
  /// a group's slot of prepared bytes: the inner family's, rounded up to 16 bytes
  static std::size_t slot_bytes(const plan_config& ic) { return round16(ic.prepared_bytes); }
  /// the inner family's scratch: its workspace after its prepared bytes
  static std::size_t inner_scratch_bytes(const plan_config& ic) {
    return ic.workspace_bytes > slot_bytes(ic) ? ic.workspace_bytes - slot_bytes(ic) : 0;
  }
  /// the inner family's configuration of one group: c with one slot of prepared bytes and its scratch
  static plan_config inner_config(const conv2d_problem& p, const plan_config& c) {
    plan_config ic = c;
    ic.prepared_bytes = c.prepared_bytes / static_cast<std::size_t>(p.groups);
    ic.workspace_bytes = c.workspace_bytes - c.prepared_bytes + ic.prepared_bytes - extra_bytes(p);
    return ic;
  }
  /// The copies' and the combine's time: x read and its groups' copies written (at batch 1 none), the
  /// groups' outputs written and read, at the packing passes' rate; a copy per group and the combine.
  static double copy_seconds(const conv2d_problem& p) {
    const double xb = copies(p) ? 2.0 * static_cast<double>(p.x_elements()) * sizeof(T) : 0.0;
    const double yb = 2.0 * static_cast<double>(p.groups * p.gemm_m()) * (sizeof(T) + 8);
    return static_cast<double>(copies(p) ? p.groups + 1 : 1) * plan_xpack_fixed_seconds +
           (xb + yb) / plan_xpack_bytes_per_s;
  }
};

}  // namespace convred::device::family
