/// @file device/family/dilated.cuh
/// @brief The dilated family: a dilated convolution at stride 1 run by another family as an undilated
/// one over sub-images folded into the batch (space to batch, kernel/space_to_batch.cuh), so that the
/// Hopper tensor-core kernel, whose producer reads contiguous taps, serves DeepLab-style layers
/// (dilation 2 to 36 with padding = dilation) instead of the slower mma.sync fallback.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "../../kernel/space_to_batch.cuh"
#include "../../plan/wgmma_params.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "../cost_model.cuh"
#include "family.cuh"

namespace convred::device::family {

/// @brief The dilated family over an inner family (family::wgmma in the default list). For each
/// dimension with a filter size above 1 and a dilation f above 1, the problem must have stride 1 there
/// and a padding that f divides; x (N, C, H, W) is then copied into N f_h f_w sub-images of ceil(H / f_h)
/// x ceil(W / f_w) pixels (sub-image (a, b) of image n holds rows a, a + f_h, ... and columns b, b + f_w,
/// ...; zero past x), the inner family runs the undilated sub-problem (padding / f, dilation 1) on them,
/// and its reduced outputs are put back in place. The results are the inner family's on the sub-problem,
/// which computes each output from the same products in the same order as on an undilated layer
/// (values and indices follow PyTorch's conv2d and reduction semantics as in every family). Costs per
/// run: x read once and its copy written and read (the workspace holds the copy, and the sub-problem's
/// outputs: 12 bytes per output pixel), then the inner family's own run. `Rival`: the family that would
/// run p dilated (family::mma_sync in the default list, whose inner wgmma family does not weigh itself
/// against it), or void: p is served only where this estimate is below Rival's on p (rival_not_slower).
template <class Inner, class Rival = void>
struct dilated : family_defaults<dilated<Inner, Rival>, typename Inner::element_type> {
  using T = typename Inner::element_type;  ///< the element type of x, w, b, y
  /// the inner family's kind: its kernels run (plan::kernel())
  static constexpr kernel_kind kind = Inner::kind;
  /// its name in descriptions
  static constexpr const char* name = "dilated";
  /// whether a family chosen after it names why this one was passed over
  static constexpr bool report_rejection = false;

  /// @brief The row and column factors of p's full split: its dilation in each dimension whose filter size
  /// is above 1, else 1 (the largest factors; configure may choose smaller ones that divide them).
  static std::int64_t factor_h(const conv2d_problem& p) { return p.R > 1 ? p.dil_h : 1; }
  /// @copydoc factor_h
  static std::int64_t factor_w(const conv2d_problem& p) { return p.S > 1 ? p.dil_w : 1; }

  /// @brief The sub-problem of a split by fh x fw (each dividing factor_h / factor_w(p); by default the full
  /// split): batch N fh fw, sub-images of ceil(H / fh) x ceil(W / fw), padding pad / f, dilation dil / f (1
  /// for the full split; where the filter size is 1, the dilation, which then moves no tap, becomes 1 too).
  /// At stride 1 an output row p = a + fh p' reads only rows of x congruent to a mod fh (pad and dil are
  /// multiples of fh), rows a + fh (p' - pad / fh + r dil / fh): sub-image a's rows of the sub-problem.
  static conv2d_problem sub_problem(const conv2d_problem& p, std::int64_t fh = 0, std::int64_t fw = 0) {
    if (fh <= 0) fh = factor_h(p);
    if (fw <= 0) fw = factor_w(p);
    conv2d_problem s = p;
    s.N = p.N * fh * fw;
    s.H = (p.H + fh - 1) / fh, s.W = (p.W + fw - 1) / fw;
    s.pad_h = p.pad_h / fh, s.pad_w = p.pad_w / fw;
    s.dil_h = p.R > 1 ? p.dil_h / fh : 1, s.dil_w = p.S > 1 ? p.dil_w / fw : 1;
    return s;
  }
  /// @brief The sub-problem of the split configure chose (plan_config::split_h, split_w).
  static conv2d_problem sub_problem(const conv2d_problem& p, const plan_config& c) {
    return sub_problem(p, c.split_h, c.split_w);
  }

  /// The inner family's.
  static bool available(const device_info& dev) { return Inner::available(dev); }

  /// nullptr when it serves p: groups 1, a dilation above 1 in a dimension with a filter size above 1; there
  /// stride 1 and a padding the dilation divides; a split (choose: the full one, or a smaller one on the
  /// inner family's flat tiles) with every extent below 2^31, the batch N f_h f_w below 2^40, sub-images
  /// of at least 3 output rows (columns) in each split dimension unless the inner math is 16-bit, and the
  /// inner family serving its sub-problem; Rival is not estimated as fast on p (unless dilated_residual forces
  /// a split); and (unless plan_options::splits or dilated_residual forces a choice) the inner family on the whole problem is not
  /// estimated faster: its flat tiles (the taps as offsets into the packed window; their model was within
  /// 5 % on three H100 layers of windows up to 3.2 tiles, the full split's 1-20 % optimistic; wider windows,
  /// plan::wgmma_params::wide_dilated_window, never) below this time, its direct tiles of filter rows below
  /// plan_dilated_yield_share of the full split's time (under 3xTF32 of any split's), or a smaller split
  /// not below that share of their time in TF32 and 16-bit maths (then it yields to them:
  /// the list must hold the inner family on its own after this one, as the default list does).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (o.dilated_residual < 0) return "plan_options::dilated_residual < 0 (space to batch not taken)";
    if (p.groups != 1) return "groups != 1 (the dilated family takes dense layers)";
    const std::int64_t fh = factor_h(p), fw = factor_w(p);
    if (fh == 1 && fw == 1) return "no dilation (or a 1-wide filter in each dilated dimension)";
    if ((fh > 1 && p.stride_h != 1) || (fw > 1 && p.stride_w != 1)) return "dilation with a stride above 1";
    if (p.pad_h % fh != 0 || p.pad_w % fw != 0) return "a padding that the dilation does not divide";
    const char* why = nullptr;
    const plan_config c = choose(p, dev, o, why);
    if (why) return why;
    const double t = c.seconds;
    if (o.dilated_residual == 0 && rival_not_slower<Rival>(p, dev, o, t))
      return "space to batch is estimated slower than the mma.sync kernel on the dilated problem";
    // (the list must hold the inner family on its own after this one, as the default list does): flat tiles
    // of the whole problem (the taps as offsets) wherever estimated faster, direct tiles of filter rows as
    // the margins below say
    if (o.splits == 0 && o.dilated_residual == 0 && Inner::can_implement(p, dev, o) == nullptr) {
      const plan_config whole = Inner::configure(p, dev, o);
      const bool flat = flat_estimated(whole), full = c.split_h == factor_h(p) && c.split_w == factor_w(p);
      // (the margins, measured on the H100: against the full split, and under 3xTF32, whose direct tiles'
      // model was up to 31 % optimistic (n1 c2048 65x65 d24: 0.895 ms against 0.683), the direct tiles must
      // be estimated below 0.85 of space to batch; against a smaller split in TF32 and bf16, whose flat
      // sub-images were up to 29 % optimistic (n32 c2048 65x65 d12 by 6 x 6: TF32 8.2 ms against 6.50, the
      // direct tiles 7.36 against 7.20), they yield unless space to batch is below 0.85 of the direct tiles)
      const double share = flat ? 1.0 : full || x3_inner() ? plan_dilated_yield_share : 1.0 / plan_dilated_yield_share;
      const bool margin = share < 1.0;
      if (whole.seconds < share * t && (flat || !whole.wgmma.k.flat))
        return flat ? "the inner kernel's flat tiles of the whole problem (the taps as offsets into the packed window) "
                      "are estimated faster than space to batch"
                    : margin ? "the inner kernel's dilated tiles (the whole problem, a stage per filter row) are estimated "
                             "below 0.85 of space to batch's time"
                           : "space to batch into sub-images of a residual dilation is not estimated below 0.85 of the "
                             "inner kernel's dilated tiles (the whole problem, a stage per filter row)";
    }
    return nullptr;
  }

  /// The inner family's configuration of the chosen split's sub-problem (choose; plan_config::split_h,
  /// split_w), its workspace grown by extra_bytes and its time estimate by the copies'.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    const char* why = nullptr;
    return choose(p, dev, o, why);
  }

  /// "dilation 12x12 at stride 1 as 144 undilated sub-images per image (space to batch: ...): <the inner
  /// family's description>"; a smaller split: "dilation 12x12 at stride 1 as 4 sub-images of dilation 6x6
  /// per image (space to batch by 2x2: ...): ...".
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev,
                              const std::string& passed_over) {
    const conv2d_problem s = sub_problem(p, c);
    const std::int64_t fh = split_h(p, c), fw = split_w(p, c);
    const bool full = fh == factor_h(p) && fw == factor_w(p);
    return "dilation " + std::to_string(factor_h(p)) + "x" + std::to_string(factor_w(p)) + " at stride 1 as " +
           std::to_string(fh * fw) +
           (full ? " undilated sub-images per image (space to batch: batch "
                 : " sub-images of dilation " + std::to_string(s.dil_h) + "x" + std::to_string(s.dil_w) +
                       " per image (space to batch by " + std::to_string(fh) + "x" + std::to_string(fw) + ": batch ") +
           std::to_string(s.N) + ", " + std::to_string(s.H) + "x" + std::to_string(s.W) + " pixels, padding " +
           std::to_string(s.pad_h) + "x" + std::to_string(s.pad_w) + ", x copied into the workspace on each run): " +
           Inner::describe(s, inner_config(p, c), dev, passed_over);
  }
  /// The inner family's.
  static status runs_here(const plan_config& c) { return Inner::runs_here(c); }  // (c's device fields are the inner's)
  /// The inner family's, for the sub-problem (the filter is the same).
  static status prepare(const conv2d_problem& p, const plan_config& c, const T* w, void* workspace, std::size_t bytes,
                        cudaStream_t stream) {
    return Inner::prepare(sub_problem(p, c), inner_config(p, c), w, workspace, bytes, stream);
  }

  /// Copies x into the sub-images, runs the inner family on them, puts the outputs back. Every run writes
  /// the copies into the plan's scratch: runs of one plan on different streams must not overlap in time
  /// unless each binds its own scratch. The caller's buffers are checked first: indices_not_supported
  /// (indices for an op without them), null_pointer (x or w null, or both y and indices),
  /// misaligned_pointer, overlapping_buffers (y or indices overlapping x, w, bias, each other, the prepared
  /// bytes or the copies; the copies overlapping x), cuda_error (an error pending on entry, or a launch
  /// error, left pending); then the inner family's statuses.
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    const std::int64_t M = p.gemm_m();
    if (M == 0) return status::success;
    const conv2d_problem s = sub_problem(p, c);
    const plan_config ic = inner_config(p, c);
    const std::size_t extra = extra_bytes(p, c);
    run_arguments<T> ia;
    unsigned char* mine = adapter_scratch(a, ic, extra, ia);
    const std::int64_t xs_count = s.x_elements(), Ms = s.gemm_m();
    T* xs = reinterpret_cast<T*>(mine);
    T* ys = reinterpret_cast<T*>(mine + round16(static_cast<std::size_t>(xs_count) * sizeof(T)));
    auto* is = reinterpret_cast<std::int64_t*>(reinterpret_cast<unsigned char*>(ys) +
                                               round16(static_cast<std::size_t>(Ms) * sizeof(T)));
    // (the copies: extra_bytes less its 16 bytes of alignment slack)
    if (status st = adapter_checks<Op>(p, a, ic, mine, extra - 16, 1); st != status::success) return st;
    const kernel::space_to_batch_params sp = params(p, c);
    kernel::space_to_batch_kernel<T><<<blocks(xs_count), 256, 0, stream>>>(a.x, xs, sp, xs_count);
    if (status st = device::detail::launch_status(); st != status::success) return st;
    ia.x = xs, ia.y = a.y ? ys : nullptr, ia.indices = a.indices ? is : nullptr;
    if (status st = Inner::launch(s, ic, ia, op, epi, stream); st != status::success) return st;
    kernel::batch_to_space_kernel<T><<<blocks(M), 256, 0, stream>>>(ia.y, ia.indices, a.y, a.indices, sp, M);
    return device::detail::launch_status();
  }

  /// Bytes after the inner family's workspace: the sub-images, the sub-problem's values and indices, and
  /// 16 bytes of alignment slack (of c's split; the full split by default).
  static std::size_t extra_bytes(const conv2d_problem& p, const plan_config& c = {}) {
    const conv2d_problem s = sub_problem(p, c);
    const std::size_t Ms = static_cast<std::size_t>(s.gemm_m());
    return 16 + round16(static_cast<std::size_t>(s.x_elements()) * sizeof(T)) + round16(Ms * sizeof(T)) +
           round16(Ms * sizeof(std::int64_t));
  }

  /// @brief The divisors of g >= 1, ascending: the residual dilations choose weighs (found up to g's square
  /// root, so that a dilation near validate()'s 2^30 costs a few thousand steps, not a loop to it).
  static std::vector<std::int64_t> divisors(std::int64_t g) {
    std::vector<std::int64_t> d;
    for (std::int64_t k = 1; k * k <= g; ++k)
      if (g % k == 0) d.push_back(k);
    for (std::size_t i = d.size(); i-- > 0;)
      if (d[i] * d[i] != g) d.push_back(g / d[i]);
    return d;
  }

  /// @brief The configuration of the split fh x fw (fh dividing factor_h(p), fw factor_w(p); what configure
  /// chooses among), or `no` set to why it is not served. The caller checks the rest of can_implement's
  /// conditions (groups, stride, a dilation).
  static plan_config split_config(const conv2d_problem& p, std::int64_t fh, std::int64_t fw, const device_info& dev,
                                  const plan_options& o, const char*& no) {
    constexpr std::int64_t lim = std::int64_t(1) << 31;
    plan_config c;
    if (fh < 1 || fw < 1 || factor_h(p) % fh != 0 || factor_w(p) % fw != 0 || p.pad_h % fh != 0 || p.pad_w % fw != 0)
      return no = "a split whose factors do not divide the dilation and the padding", c;
    // (the extents first: sub_problem multiplies N by fh fw)
    if (fh >= lim || fw >= lim || p.N >= (std::int64_t(1) << 40) / (fh * fw) || p.C >= lim || p.P() >= lim || p.Q() >= lim)
      return no = "extents of the space-to-batch split at or above 2^31", c;
    const conv2d_problem s = sub_problem(p, fh, fw);
    if (s.H >= lim || s.W >= lim) return no = "extents of the space-to-batch split at or above 2^31", c;
    if (validate(s, sizeof(T)) != status::success) return no = "the sub-problem is not valid", c;
    // Sub-images of fewer than 3 output rows or columns (a dilation of a third of the image or more): the
    // inner kernel's tiles then hold more padding than outputs (2 x 2 outputs in 3 x 3 plane pixels). On
    // the H200 that was slower than the mma.sync kernel on the dilation itself in TF32 (batch 1) and 3xTF32,
    // but faster in bf16 (5 of 6 layers, up to 1.45x at batch 32): such layers are served only under a
    // 16-bit inner math (bench/NOTES.md, "Reach: dilation on the Hopper kernel").
    if (!sixteen_bit() && ((fh > 1 && s.P() < 3) || (fw > 1 && s.Q() < 3)))
      return no = "sub-images of fewer than 3 output rows or columns (TF32 and 3xTF32)", c;
    if (const char* w = Inner::can_implement(s, dev, o)) return no = w, c;
    c = Inner::configure(s, dev, o);
    if (!workspace_fits({static_cast<double>(c.workspace_bytes), static_cast<double>(s.x_elements()) * sizeof(T),
                         static_cast<double>(s.gemm_m()) * (sizeof(T) + sizeof(std::int64_t))}))
      return no = "its workspace would reach 2^62 bytes", c;
    if ((s.dil_h > 1 || s.dil_w > 1) && c.wgmma.k.flat && !flat_estimated(c))
      return no = "the sub-problem's flat tiles read a wide dilated window", c;
    c.split_h = static_cast<int>(fh), c.split_w = static_cast<int>(fw);
    c.workspace_bytes = round16(c.workspace_bytes) + extra_bytes(p, c);
    c.seconds += copy_seconds(p, c);
    return c;
  }

 private:
  /// Whether the inner family runs a 16-bit tensor-core math (its kernel_math's speed in the time model
  /// above TF32's); false for an inner family without a kernel_math.
  template <class I = Inner>
  static constexpr auto sixteen_bit_of(int) -> decltype(plan_math_speed<typename I::kernel_math>(), bool()) {
    return plan_math_speed<typename I::kernel_math>() > 1.0;
  }
  template <class I = Inner>
  static constexpr bool sixteen_bit_of(long) {
    return false;
  }
  static constexpr bool sixteen_bit() { return sixteen_bit_of(0); }
  /// Whether the inner family runs the wgmma kernel in 3xTF32 (a policy of two parts)
  static constexpr bool x3_inner() {
    if constexpr (Inner::kind == kernel_kind::wgmma)
      return Inner::policy::parts == 2;
    else
      return false;
  }
  /// c's row and column factors (plan_config::split_h, split_w; 0: the full split's)
  static std::int64_t split_h(const conv2d_problem& p, const plan_config& c) { return c.split_h > 0 ? c.split_h : factor_h(p); }
  static std::int64_t split_w(const conv2d_problem& p, const plan_config& c) { return c.split_w > 0 ? c.split_w : factor_w(p); }
  /// Whether an inner configuration runs the wgmma kernel's flat tiles whose model is trusted: not a dilated
  /// window above 3.5 tiles (plan::wgmma_params::wide_dilated_window, where it was 55 % optimistic).
  static bool flat_estimated(const plan_config& c) {
    if constexpr (Inner::kind == kernel_kind::wgmma)
      return c.wgmma.k.flat && !plan::wgmma_params<typename Inner::policy>::wide_dilated_window(c.wgmma.k);
    else
      return false;
  }
  /// The split and its configuration: the full split, or a smaller one that leaves a residual dilation k
  /// in the sub-images (fh = factor_h / k, fw = factor_w / k; k dividing both where both are above 1),
  /// which the inner family runs on its flat tiles (the taps as offsets into their window: flat_estimated;
  /// a smaller split on other tiles is not taken unless forced). plan_options::dilated_residual > 0 forces
  /// the split of that residual dilation (1: the full split) where it serves. Of those served (split_config), the one of the least
  /// estimate (the inner family's on the sub-problem plus the copies'), the larger factors on a tie (the
  /// full split first). For DeepLab's d12 on 65 x 65 a split by 6 gives 11 x 11 sub-images of dilation 2
  /// (121 outputs in 13 x 13 packed pixels, windows of 1.2 tiles) where the full one gives 6 x 6 (36 in 7 x
  /// 7). `why`: set (and the configuration's seconds infinite) where no split serves p, to the full split's
  /// reason.
  static plan_config choose(const conv2d_problem& p, const device_info& dev, const plan_options& o, const char*& why) {
    const std::int64_t FH = factor_h(p), FW = factor_w(p);
    const std::int64_t g = FH == 1 ? FW : FW == 1 ? FH : std::gcd(FH, FW);
    plan_config best;
    best.seconds = std::numeric_limits<double>::infinity();
    bool found = false;
    why = nullptr;
    for (const std::int64_t k : divisors(g)) {  // k: the residual dilation (1: the full split)
      if (o.dilated_residual > 0 && k != o.dilated_residual) continue;
      const std::int64_t fh = FH == 1 ? 1 : FH / k, fw = FW == 1 ? 1 : FW / k;
      if (fh == 1 && fw == 1) continue;  // (no split)
      const char* no = nullptr;
      const plan_config c = split_config(p, fh, fw, dev, o, no);
      if (no) {
        if (k == 1 || o.dilated_residual > 0) why = no;  // (the full split's reason, or the forced split's)
        continue;
      }
      if (k > 1 && o.dilated_residual <= 0 && !flat_estimated(c)) continue;
      if (!found || c.seconds < best.seconds) best = c, found = true;
    }
    if (found) why = nullptr;
    else if (!why) why = "no space-to-batch split is served (plan_options::dilated_residual)";
    return best;
  }
  /// the inner family's configuration: c without extra_bytes
  static plan_config inner_config(const conv2d_problem& p, const plan_config& c) {
    plan_config ic = c;
    ic.workspace_bytes = c.workspace_bytes - extra_bytes(p, c);
    return ic;
  }
  /// The copies' time: x read, its copy written (and read again by the inner family: counted in its
  /// own model as x), the outputs moved, at the packing passes' rate.
  static double copy_seconds(const conv2d_problem& p, const plan_config& c) {
    const conv2d_problem s = sub_problem(p, c);
    const double bytes = static_cast<double>(p.x_elements() + s.x_elements()) * sizeof(T) +
                         static_cast<double>(p.gemm_m() + s.gemm_m()) * (sizeof(T) + 8);
    return 2 * plan_xpack_fixed_seconds + bytes / plan_xpack_bytes_per_s;
  }
  /// a grid-stride loop's blocks of 256 threads for n elements: at most 2^16
  static unsigned blocks(std::int64_t n) {
    return static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, std::int64_t(1) << 16));
  }
  /// the kernels' shapes and divisors (c's split)
  static kernel::space_to_batch_params params(const conv2d_problem& p, const plan_config& c) {
    const conv2d_problem s = sub_problem(p, c);
    kernel::space_to_batch_params sp;
    sp.N = p.N, sp.C = p.C, sp.H = p.H, sp.W = p.W, sp.P = p.P(), sp.Q = p.Q(), sp.Ps = s.P(), sp.Qs = s.Q();
    sp.nhwc = p.x_layout == layout::nhwc;
    using fd = convred::detail::fast_divmod;
    sp.fh = fd(static_cast<std::int32_t>(split_h(p, c))), sp.fw = fd(static_cast<std::int32_t>(split_w(p, c)));
    sp.hs = fd(static_cast<std::int32_t>(s.H)), sp.ws = fd(static_cast<std::int32_t>(s.W));
    sp.c = fd(static_cast<std::int32_t>(p.C));
    sp.p = fd(static_cast<std::int32_t>(p.P())), sp.q = fd(static_cast<std::int32_t>(p.Q()));
    return sp;
  }
};

}  // namespace convred::device::family
