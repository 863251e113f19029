/// @file device/family/family.cuh
/// @brief Kernel families as types, and the planner's one decision: select() walks a family_list in
/// order and keeps the first family that can implement the problem on the device; its configure() makes
/// the plan_config once, its describe() the plan's description, its launch() every run.
///
/// A family is a type with these static members (device/family/simt.cuh is the shortest example; the
/// test family in tests/narrow_k_family.cuh shows a new one added to a list; family_defaults provides
/// report_rejection, cost, runs_here and prepare for a family that inherits it):
/// - `kind` (kernel_kind; kernel_kind::user outside convred), `name` (for descriptions) and
///   `report_rejection` (whether a family chosen after it names why it was passed over);
/// - `bool available(const device_info&)`: the device can run it at all (architecture, code image);
/// - `const char* can_implement(const conv2d_problem&, const device_info&, const plan_options&)`: nullptr
///   when it serves the problem there, else why not (a string literal);
/// - `plan_config configure(const conv2d_problem&, const device_info&, const plan_options&)`: its tiling,
///   mode, splits and workspace for a problem it serves, with its time estimate in `seconds`;
/// - `double cost(const conv2d_problem&, const device_info&, const plan_options&)`: that estimate
///   (seconds; 0 where the family has no time model);
/// - `std::string describe(const conv2d_problem&, const plan_config&, const device_info&, const
///   std::string& passed_over)`: one line for a log; `passed_over` is ": the <name> kernel does not serve
///   this problem: <reason>" for the first family before it that reports its rejections, else empty;
/// - `status runs_here(const plan_config&)`: success when the current device can run the configuration
///   (a plan made from another device's device_info), else no_device;
/// - `status prepare(const conv2d_problem&, const plan_config&, const T* w, void* workspace, std::size_t
///   bytes, cudaStream_t)`: fills the prepared bytes of the workspace (the wgmma family packs the filter);
/// - `template <class Op, class Epilogue> status launch(const conv2d_problem&, const plan_config&, const
///   run_arguments<T>&, Op, Epilogue, cudaStream_t)`: runs the configuration, nothing chosen again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "../plan_config.cuh"
#include "../plan_options.cuh"
#include "../plan_types.cuh"

namespace convred::device::family {

/// @brief Defaults a family may inherit (`struct my_family : family_defaults<my_family, T>`): rejections
/// not reported, cost = configure(...).seconds, any device runs the configuration, nothing to prepare. A
/// family declares the member itself to do otherwise (the wgmma family does for all but cost).
template <class Derived, class T>
struct family_defaults {
  /// the element type of x, w, b and y the family runs
  using element_type = T;
  /// a family chosen after this one does not name why this one was passed over
  static constexpr bool report_rejection = false;
  /// The family's time estimate for p on dev (seconds): Derived::configure(p, dev, o).seconds.
  static double cost(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    return Derived::configure(p, dev, o).seconds;
  }
  /// Any device: success.
  static status runs_here(const plan_config&) { return status::success; }
  /// Nothing to prepare: success.
  static status prepare(const conv2d_problem&, const plan_config&, const T*, void*, std::size_t, cudaStream_t) {
    return status::success;
  }
};

/// @brief Whether family Rival's estimate on the whole problem p (Rival::cost) is not above `seconds`, the
/// estimate of a family that would serve p instead (the wgmma family against the mma.sync family; an
/// adapter family, whose inner family sees only its sub-problem, against the family that would run p
/// unchanged). Weighed only on a device with an SM count (the estimates are per SM) and when o.splits does
/// not force a wgmma choice; always false for Rival = void (no rival).
template <class Rival>
bool rival_not_slower(const conv2d_problem& p, const device_info& dev, const plan_options& o, double seconds) {
  if constexpr (std::is_void_v<Rival>) {
    (void)p, (void)dev, (void)o, (void)seconds;
    return false;
  } else {
    return dev.sm_count > 0 && o.splits == 0 && Rival::cost(p, dev, o) <= seconds;
  }
}

/// @brief The families a planner considers, best first (a plain type list).
template <class... Families>
struct family_list {
  /// the number of families in the list
  static constexpr std::size_t size = sizeof...(Families);
};

/// @brief The family at position I of a family_list.
template <std::size_t I, class List>
struct family_at;
template <std::size_t I, class F, class... Rest>
struct family_at<I, family_list<F, Rest...>> : family_at<I - 1, family_list<Rest...>> {};
template <class F, class... Rest>
struct family_at<0, family_list<F, Rest...>> {
  using type = F;
};
/// @brief The family at position I of List.
template <std::size_t I, class List>
using family_at_t = typename family_at<I, List>::type;

/// @brief What select() decided: whether a family serves the problem, its configuration and the plan's
/// description.
struct selection {
  status state = status::success;  ///< success, validate()'s code, or no_device (no device, no family serves)
  plan_config config{};            ///< the chosen family's configuration (config.family: its position)
  std::string description;         ///< the chosen family's describe(), or "none: <why>"
};

namespace detail {
template <class T, class List, std::size_t... I>
void select_each(selection& out, const conv2d_problem& p, const device_info& dev, const plan_options& o,
                 std::index_sequence<I...>) {
  bool chosen = false;
  std::string passed_over;
  const char* last = "no kernel family in the list";
  auto consider = [&](auto family, std::size_t index) {
    using F = decltype(family);
    if (chosen) return;
    if (const char* why = F::can_implement(p, dev, o)) {
      if (F::report_rejection && passed_over.empty())
        passed_over = std::string(": the ") + F::name + " kernel does not serve this problem: " + why;
      last = why;
      return;
    }
    chosen = true;
    out.config = F::configure(p, dev, o);
    out.config.kind = F::kind;
    out.config.family = static_cast<int>(index);
    out.description = F::describe(p, out.config, dev, passed_over);
  };
  (consider(family_at_t<I, List>{}, I), ...);
  if (!chosen) {
    out.state = status::no_device;
    out.description = std::string("none: ") + last;
  }
}
}  // namespace detail

/// @brief The planner's decision (host only, no CUDA call): for problem p with element type T on the
/// device `dev`, the first family of List, in order, that can implement p there, its configuration and
/// description. state is validate(p, sizeof(T))'s code for an invalid problem ("none: <code>"),
/// no_device for no device ("none: no CUDA device") or when no family serves ("none: <the last family's
/// reason>").
template <class T, class List>
selection select(const conv2d_problem& p, const device_info& dev, const plan_options& options = {}) {
  selection out;
  out.state = validate(p, sizeof(T));
  if (out.state != status::success) {
    out.description = std::string("none: ") + to_string(out.state);
    return out;
  }
  if (dev.cc_major == 0) {
    out.state = status::no_device;
    out.description = "none: no CUDA device";
    return out;
  }
  detail::select_each<T, List>(out, p, dev, options, std::make_index_sequence<List::size>{});
  return out;
}

namespace detail {
template <class List, class Fn, std::size_t... I>
status visit_each(int family, Fn&& fn, std::index_sequence<I...>) {
  status s = status::invalid_argument;
  (void)((family == static_cast<int>(I) && (s = fn(family_at_t<I, List>{}), true)) || ...);
  return s;
}
}  // namespace detail

/// @brief Calls fn(F{}) with F the family at position config.family of List and returns its status:
/// the one dispatch from a plan_config to its family's static members (launch, runs_here, prepare).
/// invalid_argument when config.family is not a position of List.
template <class List, class Fn>
status visit(const plan_config& config, Fn&& fn) {
  return detail::visit_each<List>(config.family, fn, std::make_index_sequence<List::size>{});
}

/// @brief Runs the configuration: the chosen family's launch(p, config, args, op, epi, stream).
template <class List, class T, class Op, class Epilogue>
status launch(const conv2d_problem& p, const plan_config& config, const run_arguments<T>& args, Op op, Epilogue epi,
              cudaStream_t stream) {
  return visit<List>(config, [&](auto f) {
    return decltype(f)::template launch<Op, Epilogue>(p, config, args, op, epi, stream);
  });
}

/// @brief Whether the current device can run the configuration: the chosen family's runs_here(config).
template <class List>
status runs_here(const plan_config& config) {
  return visit<List>(config, [&](auto f) { return decltype(f)::runs_here(config); });
}

/// @brief Prepares the configuration: the chosen family's prepare(p, config, w, workspace, bytes, stream).
template <class List, class T>
status prepare(const conv2d_problem& p, const plan_config& config, const T* w, void* workspace, std::size_t bytes,
               cudaStream_t stream) {
  return visit<List>(config, [&](auto f) { return decltype(f)::prepare(p, config, w, workspace, bytes, stream); });
}

/// @brief 16-byte round-up of a byte count (the workspace's sections start at 16-byte boundaries).
inline constexpr std::size_t round16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

/// @brief Whether a workspace of these parts (bytes, each rounded up to 16 as the families lay them out)
/// stays below 2^62 bytes, summed in double so that a size near validate()'s limits is refused before a
/// size_t sum of it wraps (no device holds 2^62 bytes). The adapter families (dilated, grouped, pruned,
/// screen) check their workspaces with it.
inline bool workspace_fits(std::initializer_list<double> parts) {
  double sum = 0;
  for (const double b : parts) sum += b + 16;
  return sum < 0x1p62;
}

/// @brief The scratch of an adapter family (one that runs an inner family and kernels of its own:
/// family::screen, family::dilated), whose plan_config is the inner family's `ic` with `extra` bytes of
/// its own added to the workspace (extra holds 16 bytes of slack for the alignment). Returns the start
/// of the adapter's bytes, 16-byte aligned, and sets `ia`, the inner family's run arguments (a copy of
/// `a`): with a separate scratch (conv2d_reduce_plan::bind) the adapter's bytes come first in it and the
/// inner family's scratch (its workspace after its prepared bytes, conv2d_reduce_plan::scratch_bytes)
/// after them; else the adapter's bytes follow the inner family's workspace.
template <class T>
unsigned char* adapter_scratch(const run_arguments<T>& a, const plan_config& ic, std::size_t extra, run_arguments<T>& ia) {
  ia = a;
  const auto align = [](void* q) {
    return reinterpret_cast<unsigned char*>(round16(reinterpret_cast<std::uintptr_t>(q)));
  };
  if (a.scratch) {
    unsigned char* mine = align(a.scratch);
    const std::size_t pre = ic.prepared_bytes, off = pre > 0 ? round16(pre) : 0;
    const bool inner_scratch = ic.workspace_bytes > off;
    ia.scratch = inner_scratch ? mine + extra : nullptr;
    ia.scratch_bytes = inner_scratch ? ic.workspace_bytes - off : 0;
    return mine;
  }
  ia.workspace_bytes = ic.workspace_bytes;
  return align(static_cast<unsigned char*>(a.workspace) + ic.workspace_bytes);
}

/// @brief The checks an adapter family's launch makes before it launches anything, on the caller's
/// buffers in `a` for problem p and reduction op Op, with `mine` (`mine_bytes` bytes: adapter_scratch's
/// result) the adapter's part of the scratch: indices_not_supported (indices for an op without them),
/// null_pointer (x or w null, or both y and indices null), cuda_error (an error pending on entry, left
/// pending), misaligned_pointer, overlapping_buffers (y or indices overlapping x, w, bias, each other, the
/// prepared bytes of `ic` (the inner family's configuration) or the adapter's scratch; that scratch
/// overlapping x, w or bias), size_overflow (`blocks` above the grid limit); else success. The inner
/// family checks only the buffers the adapter hands it. Call it for p.gemm_m() > 0.
template <class Op, class T>
status adapter_checks(const conv2d_problem& p, const run_arguments<T>& a, const plan_config& ic, const unsigned char* mine,
                      std::size_t mine_bytes, std::int64_t blocks) {
  if constexpr (!Op::has_index) {
    if (a.indices) return status::indices_not_supported;
  }
  if (!a.x || !a.w || (!a.y && !a.indices)) return status::null_pointer;
  if (status s = device::detail::pending_status(); s != status::success) return s;
  const std::int64_t M = p.gemm_m();
  const device::detail::buffer_arg bufs[] = {
      device::detail::input(a.x, p.x_elements()), device::detail::input(a.w, p.w_elements()),
      device::detail::input(a.bias, p.K),
      device::detail::input(static_cast<const unsigned char*>(a.workspace), static_cast<std::int64_t>(ic.prepared_bytes)),
      device::detail::output(a.y, M), device::detail::output(a.indices, M),
      device::detail::output(mine, static_cast<std::int64_t>(mine_bytes))};
  return device::detail::check_buffers(bufs, blocks);
}

/// @brief Suffix of a tensor-core family's description under math::accurate: what the default math
/// resolved to.
template <class Math>
const char* accurate_note() {
  return std::is_same_v<Math, math::accurate> ? "; math::accurate (error vs float64 <= 1e-6)" : "";
}

/// @brief The math a family's kernels run for the plan's Math and element type T: math::accurate runs
/// tf32x3 on the tensor cores (math::ieee for double data); every other tag runs as itself.
template <class T, class Math>
using kernel_math_t = std::conditional_t<std::is_same_v<Math, math::accurate>,
                                         std::conditional_t<std::is_same_v<T, double>, math::ieee, math::tf32x3>, Math>;

/// @brief The name of a kernel math in descriptions ("tf32", "tf32x3", "bf16", "fp16", "ieee").
template <class KernelMath>
const char* math_name() {
  if constexpr (std::is_same_v<KernelMath, math::tf32>) return "tf32";
  else if constexpr (std::is_same_v<KernelMath, math::tf32x3>) return "tf32x3";
  else if constexpr (std::is_same_v<KernelMath, math::bf16>) return "bf16";
  else if constexpr (std::is_same_v<KernelMath, math::fp16>) return "fp16";
  else return "ieee";
}

}  // namespace convred::device::family
