/// @file device/family/wgmma.cuh
/// @brief The wgmma family: the Hopper packed-filter kernel (sm_90a) with its tiles (image rows, flat
/// tiles over a packed x, direct tiles) and modes (fused, pass mode, partial (split-K) mode, a split-K
/// tail, the ping-pong policy), chosen once by its time model (device/wgmma_model.cuh) and launched as
/// chosen (conv2d_reduce_packed_split's launch, device::detail::packed_split_run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../block/wgmma_conv_params.cuh"
#include "../../policy.cuh"
#include "../conv2d_reduce_packed.cuh"
#include "../wgmma_launch.cuh"
#include "../wgmma_model.cuh"
#include "family.cuh"
#include "mma_sync.cuh"

namespace convred::device::family {

/// @brief How an entry of the wgmma family weighs itself against the mma.sync kernel (family::wgmma's third
/// template parameter).
enum class wgmma_role {
  /// an entry of a family list (the default list's own): the tiny-problem rule (plan_wgmma_min_pixels) and
  /// the comparison with the mma.sync family on the problem (rival_not_slower)
  standalone,
  /// the inner family of an adapter (pruned, dilated, grouped), which compares its own whole estimate with
  /// the mma.sync family on the whole problem: the tiny-problem rule on the sub-problem only
  adapter,
  /// family::screen's pass 1, which has no mma.sync sibling: neither
  pass1,
};

/// @brief The wgmma family for element type T under the plan's tensor-core math tag Math. Serves float
/// NCHW x on a compute capability 9.0 device running sm_90a code where the mainloop implements the
/// problem (block::conv_mainloop_wgmma::cannot_implement) and its stages fit in shared memory, except
/// a 1x1 filter with x gathered, forced splits or a forced tail of 2^40 work units or more, and a workspace
/// whose size overflows int64; unless plan_options::splits forces a choice, also except problems of 32
/// or fewer output pixels (plan_wgmma_min_pixels; Role standalone or adapter) and problems where the
/// mma.sync family is estimated at least as fast (rival_not_slower; Role standalone): see wgmma_role.
template <class T, class Math, wgmma_role Role = wgmma_role::standalone>
struct wgmma : family_defaults<wgmma<T, Math, Role>, T> {
  using kernel_math = kernel_math_t<T, Math>;  ///< Math, or tf32x3 for math::accurate
  static_assert(!std::is_same_v<kernel_math, math::ieee>, "family::wgmma: a tensor-core math");
  using policy = typename default_wgmma_policy<kernel_math>::type;  ///< the cooperative policy
  /// the ping-pong sibling (128-pixel tiles), taken where it replaces a split-K fixup (not under 3xTF32)
  using pingpong_policy = typename wgmma_pingpong<policy>::type;
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::wgmma;
  /// its name in descriptions ("the <name> kernel does not serve this problem: ...")
  static constexpr const char* name = "wgmma";
  /// whether a family chosen after it names why this one was passed over
  static constexpr bool report_rejection = true;

  /// A compute capability 9.0 device whose program holds sm_90a code.
  static bool available(const device_info& dev) { return dev.cc_major == 9 && dev.cc_minor == 0 && dev.wgmma_image; }
  /// nullptr when the family serves p on dev with options o, else why not (a string literal).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    plan_config c;
    return consider(p, dev, o, c);
  }
  /// The tiles, mode and splits its time model picks for dev, the packed filter and the workspace, and
  /// the model's time.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    plan_config c;
    consider(p, dev, o, c);
    return c;
  }

  /// "wgmma tf32 (sm_90a, packed filter streamed, 4 stages, 4x64-pixel tiles, 224976 bytes of shared
  /// memory)" (grouped: "32 groups as channel passes (1 per group of 64 channels)" before the bytes),
  /// then the mode (pass mode, split into GEMM_K ranges, a split-K tail), then the math::accurate note.
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev, const std::string&) {
    const block::wgmma_conv_params& k = c.wgmma.k;
    const std::size_t xpack = block::conv_mainloop_wgmma<policy>::xpack_bytes(k);
    const int block_m = c.pingpong ? pingpong_policy::block_m : policy::block_m;
    const std::string tiles =
        k.direct_taps
            ? std::to_string(k.tile_rows) + "x" + std::to_string(k.tile_cols) + "-pixel tiles of " +
                  (k.dil_h > 1 || k.dil_w > 1
                       ? "dilation " + std::to_string(k.dil_h) + "x" + std::to_string(k.dil_w)
                       : "a " + std::to_string(k.R) + "x" + std::to_string(k.S) + " filter") +
                  ", a stage per filter row (TMA boxes of " +
                  (policy::is_tf32 ? std::to_string(k.group * 8) + " channels x "
                                   : std::to_string(k.group * 16) + " channels as 16-bit pairs x ") +
                  std::to_string(k.rp) + " columns" +
                  (!policy::is_tf32 ? " from x copied as pairs with a pitch of " + std::to_string(k.x_pitch) + " (" +
                                          std::to_string(xpack) + " bytes, copied on each run)"
                   : k.x_pitch != k.W ? " from x copied with a pitch of " + std::to_string(k.x_pitch) + " (" +
                                            std::to_string(xpack) + " bytes, copied on each run)"
                                      : std::string(" from NCHW")) +
                  "; rows reading only padding skipped; A fragments in registers)"
        : k.direct ? std::to_string(k.tile_rows) + "x" + std::to_string(k.tile_cols) +
                       "-pixel tiles with x read straight from NCHW (" +
                       (k.W != p.W ? "the " + std::to_string(p.H) + "x" + std::to_string(p.W) + " image viewed as " +
                                         std::to_string(k.H) + "x" + std::to_string(k.W) + ", "
                                   : std::string()) +
                       "TMA boxes of " + std::to_string(k.group * 8) +
                       " channels; A fragments loaded into registers and rounded to tf32 there: no packing pass)"
        : k.flat ? std::string("flat ") + std::to_string(block_m) + "-pixel tiles over x packed (" +
                       std::to_string(k.flat_rows) + "x" + std::to_string(k.pw) + " pixels per image" +
                       (k.stride != 1 ? ", stride " + std::to_string(k.stride) + " phases" : "") +
                       (k.dil_h > 1 || k.dil_w > 1
                            ? ", dilation " + std::to_string(k.dil_h) + "x" + std::to_string(k.dil_w) + " as tap offsets"
                            : "") +
                       ", " +
                       std::to_string(xpack) + " bytes, packed on each run)"
                 : std::to_string(k.tile_rows) + "x" + std::to_string(k.tile_cols) + "-pixel tiles";
    std::string why = std::string("wgmma ") + math_name<kernel_math>() + (c.pingpong ? " ping-pong" : "") +
                      " (sm_90a, packed filter " + (k.resident_bytes ? "resident" : "streamed") + ", " +
                      std::to_string(k.stages) + " stages, " + tiles + ", " +
                      (k.conv_groups > 1 ? std::to_string(k.conv_groups) + " groups as channel passes (" +
                                               std::to_string(k.group_passes) + " per group of " +
                                               std::to_string(k.Kg) + " channels), "
                       : k.npass > 1 ? std::to_string(k.npass) + " channel passes, "
                                     : "") +
                      (k.gather ? "x gathered (stride " + std::to_string(k.stride) + "), " : "") +
                      std::to_string(c.wgmma.smem_bytes) + " bytes of shared memory)";
    const bool pass = c.splits == 0 && c.wgmma.pass_mode;
    if (pass && c.wgmma.tail_tiles == 0)
      why += " in pass mode (" + std::to_string(k.tiles) + " tiles x " + std::to_string(k.npass) + " channel passes = " +
             std::to_string(k.tiles * k.npass) + " work units for " + std::to_string(dev.sm_count) +
             " SMs, each pass's reduction states combined after; " + std::to_string(c.workspace_bytes) + "-byte workspace)";
    if (c.wgmma.tail_tiles > 0) {
      const std::int64_t tail_tiles = c.wgmma.tail_tiles, head = (k.tiles - tail_tiles) * (pass ? k.npass : 1);
      why += std::string(pass ? " in pass mode" : "") + " with a split-K tail (" + std::to_string(k.tiles - tail_tiles) +
             " tiles" + (pass ? " x " + std::to_string(k.npass) + " channel passes" : "") + " = " + std::to_string(head) +
             " work units, then the last " + std::to_string(tail_tiles) + " tile" + (tail_tiles == 1 ? "" : "s") + " x " +
             std::to_string(k.npass) + " channel pass" + (k.npass == 1 ? "" : "es") + " x " +
             std::to_string(c.wgmma.tail_splits) + " GEMM_K ranges = " +
             std::to_string(tail_tiles * k.npass * c.wgmma.tail_splits) + " work units for " +
             std::to_string(dev.sm_count) + " SMs; " + std::to_string(c.wgmma.tail_pixels) + " pixels' partial sums, then " +
             (pass ? "the combine and " : "") + "the fixup; " + std::to_string(c.workspace_bytes) + "-byte workspace)";
    }
    if (c.splits > 0) {
      const std::size_t sums = c.workspace_bytes - device::detail::partial_offset(c.prepared_bytes) - xpack;
      const std::int64_t units = k.tiles * k.npass * c.splits;
      why += " split into " + std::to_string(c.splits) + " GEMM_K range" + (c.splits == 1 ? "" : "s") + " (" +
             std::to_string(k.tiles) + " tile" + (k.tiles == 1 ? "" : "s") + " x " + std::to_string(k.npass) +
             " channel pass" + (k.npass == 1 ? "" : "es") + " x " + std::to_string(c.splits) + " = " +
             std::to_string(units) + " work units for " + std::to_string(dev.sm_count) + " SMs, " +
             std::to_string(k.kt) + " stages of " + std::to_string(policy::block_c * k.group) + " channels" +
             (k.direct_taps ? " and one filter row" : "") + " per pass; " + std::to_string(sums) + " bytes of partial sums, then the fixup; " +
             std::to_string(c.workspace_bytes) + "-byte workspace)";
    }
    return why + accurate_note<Math>();
  }

  /// no_device where the current device does not run sm_90a code (a plan made from another device's
  /// device_info).
  static status runs_here(const plan_config&) {
    return device::detail::wgmma_available() ? status::success : status::no_device;
  }
  /// Packs the filter into the workspace's start (pack_filter), after the plan checked the whole workspace.
  static status prepare(const conv2d_problem& p, const plan_config& c, const T* w, void* workspace, std::size_t bytes,
                        cudaStream_t stream) {
    if constexpr (!std::is_same_v<T, float>) {
      (void)p, (void)c, (void)w, (void)workspace, (void)bytes, (void)stream;
      return status::invalid_argument;  // never chosen: the family serves float x only
    } else {
      return pack_filter<policy>(p, w, workspace, bytes, stream);
    }
  }

  /// Runs the configuration (device::detail::packed_split_run): nothing is chosen again. An Op whose
  /// reduction state needs more shared memory than argmin's (the configuration's: every standard op fits)
  /// runs the entry point of the configuration's mode instead, which plans its tiles for that state on
  /// the current device: conv2d_reduce_packed (row tiles) for a fused configuration, else
  /// conv2d_reduce_packed_split (which takes the mma.sync kernel where that state's tiles differ in kind
  /// from the configuration's).
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    if constexpr (!std::is_same_v<T, float>) {
      (void)p, (void)c, (void)a, (void)op, (void)epi, (void)stream;
      return status::invalid_argument;  // never chosen: the family serves float x only
    } else if constexpr (device::detail::wgmma_tail_bytes<policy, Op>() !=
                             device::detail::wgmma_tail_bytes<policy, op::argmin>() ||
                         device::detail::wgmma_tail_bytes<pingpong_policy, Op>() !=
                             device::detail::wgmma_tail_bytes<pingpong_policy, op::argmin>()) {
      if (!c.wgmma_split_modes())
        return conv2d_reduce_packed<policy>(p, a.x, a.w, a.workspace, a.workspace_bytes, a.bias, a.y, a.indices, op, epi,
                                            stream);
      if (c.pingpong)
        return conv2d_reduce_packed_split<pingpong_policy>(p, a.x, a.w, a.workspace, a.workspace_bytes, a.bias, a.y,
                                                           a.indices, 0, op, epi, stream, a.options, a.scratch,
                                                           a.scratch_bytes);
      return conv2d_reduce_packed_split<policy>(p, a.x, a.w, a.workspace, a.workspace_bytes, a.bias, a.y, a.indices,
                                                c.splits, op, epi, stream, a.options, a.scratch, a.scratch_bytes);
    } else {
      if (status s = device::detail::pending_status(); p.y_elements() > 0 && s != status::success) return s;
      if constexpr (pingpong_policy::parts == 1) {  // (never under 3xTF32)
        if (c.pingpong)
          return device::detail::packed_split_run<pingpong_policy>(c.wgmma, c.prepared_bytes, p, a.x, a.w, a.workspace,
                                                                   a.workspace_bytes, a.bias, a.y, a.indices, 0, op, epi,
                                                                   stream, a.scratch, a.scratch_bytes);
      }
      return device::detail::packed_split_run<policy>(c.wgmma, c.prepared_bytes, p, a.x, a.w, a.workspace,
                                                      a.workspace_bytes, a.bias, a.y, a.indices, c.splits, op, epi,
                                                      stream, a.scratch, a.scratch_bytes);
    }
  }

 private:
  /// nullptr when the family serves p on dev (c then holds its configuration), else why not.
  static const char* consider(const conv2d_problem& p, const device_info& dev, const plan_options& o, plan_config& c) {
    if (!std::is_same_v<T, float>) return "x is not float";
    if (dev.cc_major != 9 || dev.cc_minor != 0) return "not a compute capability 9.0 device";
    if (!dev.wgmma_image) return "no sm_90a code for this device in the program";
    if (const char* why = block::conv_mainloop_wgmma<policy>::cannot_implement(p)) return why;
    // Grouped passes where they were measured faster (H100, 2026-12-05: bench/NOTES.md, "Grouped
    // convolutions as channel passes of the wgmma kernel"): stride 1 and 16 or more input channels per
    // group. At stride 2 they ran at 0.90-0.97x the other paths on four of eight layers (c1920 g16 at 14 x 14:
    // 120 us against mma.sync's 110), and with 8 channels per group (n1 c256 56x56 g32: 8 in, 8 out) at 1.4x
    // the direct kernel's time, where the model (no per-pass cost) had them faster. Unless a choice is forced.
    if (p.groups > 1 && o.splits == 0) {
      if (p.stride_h != 1) return "grouped at stride 2 (the grouped passes measured slower than the other paths)";
      if (p.C_per_group() < 16) return "grouped with fewer than 16 channels per group (the grouped passes measured slower)";
    }
    if (Role != wgmma_role::pass1 && p.gemm_m() < plan_wgmma_min_pixels && o.splits == 0)
      return "32 or fewer output pixels: the mma.sync kernel is faster there (plan_wgmma_min_pixels)";
    // tiles of image rows, flat tiles over a packed x or direct tiles, as the time model picks them on dev
    block::wgmma_conv_params k;
    std::size_t smem = 0;
    if (!choose_wgmma_params<policy>(p, device::detail::wgmma_tail_bytes<policy, op::argmin>(),
                                     device::detail::max_smem_per_block, dev.sm_count, dev.sm_count > 0, k, smem, o))
      return plan::wgmma_params<policy>::dilated(p)
                 ? "dilation != 1 not served by its dilated tiles here (both need the SM count; flat tiles: a tile's "
                   "window, its taps' reach included, must fit its stages in shared memory; direct tiles: groups 1 and "
                   "Q + (S - 1) dil_w up to ~248 columns; tiles forced to flat exclude direct ones)"
                 : "its operand stages do not fit in shared memory";
    // Gathered x (stride 2, W % 4 != 0): the producer's plain loads are slower than TMA, and a 1x1 filter
    // (one tap per stage) leaves it no time at all.
    if (k.gather && p.R * p.S == 1) return "1x1 filter with x gathered (stride 2 or W % 4 != 0)";
    // forced splits or a forced tail: their work units (tiles x passes x GEMM_K ranges, at most kt ranges)
    // below 2^40, so that no count or size below overflows
    if (o.splits > 0 &&
        !convred::detail::product_below({k.tiles, k.npass, std::min<std::int64_t>(o.splits, k.kt)}, std::int64_t(1) << 40))
      return "the forced GEMM_K splits' work units (tiles x channel passes x splits) at or above 2^40";
    if (o.tail > 0 && !convred::detail::product_below({std::min<std::int64_t>(o.tail, k.tiles), k.npass, k.kt},
                                                      std::int64_t(1) << 40))
      return "the forced split-K tail's work units (tail tiles x channel passes x GEMM_K ranges) may reach 2^40";
    // Few tiles (small batches, deep layers): each tile runs its npass channel passes on one SM and most
    // SMs idle. The partial mode spreads (tile, GEMM_K split, pass) units over the SMs
    // (choose_wgmma_splits); the mma.sync kernel, slower per SM but never wasting a tile's pixels and
    // cheaper to launch, may still win where the tiles are mostly empty (1x1 images, few output channels),
    // x is gathered, 3xTF32 loops over taps or the whole layer takes a few microseconds.
    const double speed = plan_math_speed<kernel_math>();
    wgmma_split_estimate est =
        choose_wgmma_splits<policy>(p, k, dev.sm_count, speed, default_split_workspace_limit, o);
    // (the measured factors of 3xTF32's tap loop, direct tiles and flat 1x1 tiles: wgmma_slowdown; every run
    // plus plan_wgmma_fixed_seconds)
    const double slowdown = wgmma_slowdown<policy>(p, k);
    const double t_wgmma = plan_wgmma_fixed_seconds + (est.splits > 0      ? est.split_s
                                                       : est.tail_tiles > 0 ? est.tail_s
                                                       : est.pass_mode      ? est.pass_mode_s
                                                                            : est.fused_s) *
                                                          slowdown;
    if constexpr (Role == wgmma_role::standalone) {
      if (rival_not_slower<mma_sync<T, Math>>(p, dev, o, t_wgmma))
        return "the mma.sync kernel is estimated faster than the wgmma kernel's fused and split modes";
    }
    c.pingpong = choose_pingpong(p, dev, o, k, smem, est);
    c.seconds = !c.pingpong ? t_wgmma
                            : plan_wgmma_fixed_seconds + (est.tail_tiles > 0 ? est.tail_s
                                                          : est.pass_mode    ? est.pass_mode_s
                                                                             : est.fused_s) *
                                                             wgmma_slowdown<pingpong_policy>(p, k);
    c.prepared_bytes = c.workspace_bytes = block::conv_mainloop_wgmma<policy>::packed_bytes(k);
    const std::size_t xpack = block::conv_mainloop_wgmma<policy>::xpack_bytes(k);
    c.wgmma.served = true, c.wgmma.k = k, c.wgmma.smem_bytes = smem;
    if (k.flat || k.direct) c.workspace_bytes = device::detail::packed_split_bytes(p, c.prepared_bytes, xpack, 0);
    if (est.splits == 0 && est.pass_mode) {  // pass mode, unsplit
      c.wgmma.pass_mode = true;
      c.workspace_bytes = device::detail::packed_split_bytes(p, c.prepared_bytes, xpack, 0, true);
    }
    if (est.splits == 0 && est.tail_tiles > 0) {  // a split-K tail, unsplit head
      c.wgmma.tail_tiles = est.tail_tiles, c.wgmma.tail_splits = est.tail_splits;
      c.wgmma.tail_pixels = p.gemm_m() - block::conv_mainloop_wgmma<policy>::first_pixel(k, k.tiles - est.tail_tiles);
      c.workspace_bytes = device::detail::packed_split_bytes(p, c.prepared_bytes, xpack, 0, c.wgmma.pass_mode,
                                                             c.wgmma.tail_pixels, est.tail_splits);
    }
    if (est.splits > 0) {  // partial mode
      c.splits = est.splits;
      c.workspace_bytes = device::detail::packed_split_bytes(p, c.prepared_bytes, xpack, c.splits);
    }
    if (c.workspace_bytes == 0) return "its workspace's size overflows int64";  // (packed_split_bytes' 0)
    return nullptr;
  }

  /// @brief Whether the ping-pong policy replaces the cooperative one's split-K fixup, and if so its
  /// parameters, shared memory and estimate in k, smem and est. Taken when the cooperative plan (k, est)
  /// splits GEMM_K into 2 ranges (partial sums of every pixel, then the fixup) and the ping-pong plan on
  /// the same tiles' kind runs unsplit in units of one pass (pass mode, or fused with one pass; no tail),
  /// no more of them than the cooperative units and the SMs (128 pixels x a whole pass against 256 x half
  /// a pass): the same waves without the partial sums.
  /// The rule is narrow: where the time model alone preferred ping-pong it was often slower (fewer
  /// consumers per tile) (bench/NOTES.md, "Moved from header comments"). Not under 3xTF32 (its consumers
  /// spill) or without an SM count. plan_options::pingpong may turn it off, or on wherever the ping-pong
  /// plan runs unsplit (then in pass mode where it has several channel passes, with no tail).
  static bool choose_pingpong(const conv2d_problem& p, const device_info& dev, const plan_options& o,
                              block::wgmma_conv_params& k, std::size_t& smem, wgmma_split_estimate& est) {
    using pp = pingpong_policy;
    if constexpr (pp::parts != 1) {
      (void)p, (void)dev, (void)o, (void)k, (void)smem, (void)est;
      return false;
    } else {
      const bool forced = o.pingpong == wgmma_pingpong_mode::on;
      if (o.pingpong == wgmma_pingpong_mode::off || dev.sm_count <= 0 || o.splits != 0) return false;
      if (!forced && est.splits != 2) return false;
      block::wgmma_conv_params q;
      std::size_t q_smem = 0;
      if (!choose_wgmma_params<pp>(p, device::detail::wgmma_tail_bytes<pp, op::argmin>(), device::detail::max_smem_per_block,
                                   dev.sm_count, true, q, q_smem, o) ||
          (!forced && (q.flat != k.flat || q.direct != k.direct || q.gather != k.gather || q.kt != k.kt)))
        return false;
      plan_options po = o;  // forced: unsplit, in pass mode where there are several passes, no tail
      if (forced) po.pass = q.npass > 1 ? wgmma_pass_mode::on : o.pass, po.tail = -1;
      const wgmma_split_estimate e = choose_wgmma_splits<pp>(p, q, dev.sm_count, plan_math_speed<kernel_math>(),
                                                             default_split_workspace_limit, po);
      if (forced) {
        if (e.splits != 0 || e.tail_tiles != 0) return false;
        k = q, smem = q_smem, est = e;
        return true;
      }
      const std::int64_t units = e.pass_mode ? q.tiles * q.npass : q.tiles;
      // a unit of one pass (pass mode, or fused with one pass): 128 pixels x a whole pass, the size of the
      // cooperative unit (256 pixels x half a pass); fused units of several passes would be larger
      if (e.splits != 0 || e.tail_tiles != 0 || !(e.pass_mode || q.npass == 1) || units > est.units ||
          units > dev.sm_count)
        return false;
      k = q, smem = q_smem, est = e;
      return true;
    }
  }
};

}  // namespace convred::device::family
