/// @file device/family/pruned.cuh
/// @brief The pruned family: a convolution whose outer filter taps read only padding, for every output,
/// run by another family as the smaller convolution of the taps that some output reads inside the image.
/// DeepLab's ASPP at output stride 8 or 16 (3x3, dilation = padding = 12 to 36 on 33x33 to 65x65 images)
/// is the common case: at dilation >= the image, the off-centre taps of every output fall in the padding
/// and the layer is exactly a 1x1 convolution with the centre weights, 1/9 of the work.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../kernel/prune_taps.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "family.cuh"

namespace convred::device::family {

/// @brief The taps of one filter dimension that some output reads inside the image: [first, last]
/// (first > last: none). Tap r of output o reads input row o*stride - pad + r*dil; over the outputs
/// o in [0, out) these rows span [r*dil - pad, (out - 1)*stride + r*dil - pad], so tap r can read the
/// image [0, in) only if that span meets it: r*dil - pad <= in - 1 and (out - 1)*stride + r*dil - pad >= 0.
/// At stride 1 the span is every row, so this is exact; at a larger stride a tap inside [first, last] may
/// still step over the image and is kept (correct, only less pruned).
struct live_taps {
  std::int64_t first = 0;  ///< first tap some output may read inside the image
  std::int64_t last = -1;  ///< last such tap
  /// The live range for one dimension: input extent `in`, output extent `out`, padding, stride,
  /// dilation, filter extent k (validated values: no overflow).
  static live_taps of(std::int64_t in, std::int64_t out, std::int64_t pad, std::int64_t stride, std::int64_t dil,
                      std::int64_t k) {
    const auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    live_taps t;
    t.first = std::max<std::int64_t>(0, -floor_div(-(pad - (out - 1) * stride), dil));  // ceil division
    t.last = std::min<std::int64_t>(k - 1, floor_div(in - 1 + pad, dil));
    return t;
  }
  /// kept taps, last - first + 1 (0 when none)
  std::int64_t count() const { return last >= first ? last - first + 1 : 0; }
};

/// @brief The pruned family over an inner family (family::wgmma in the default list). Where the taps
/// that some output reads inside the image (live_taps, per dimension) are fewer than R x S, the inner
/// family runs the sub-problem of those taps: filter Rp x Sp, padding pad - first*dil (the same outputs
/// then read the same input rows), dilation 1 along a dimension left with one tap. prepare() copies the
/// kept taps to the start of the prepared bytes (kernel::prune_taps_kernel) and prepares the inner
/// family on them into the rest (its prepared bytes, then its scratch, start 16-byte aligned after them).
/// Each output is the sum of the same nonzero products as the full convolution's: a dropped tap reads a
/// padding zero at every output, and x*0 adds nothing to a sum that starts at +0 (IEEE 754), except for a
/// non-finite weight there, whose 0 x inf = NaN makes the channel NaN at every pixel in PyTorch's conv2d:
/// prepare() then makes that channel's kept taps NaN, which gives the same. Results are the inner
/// family's on the sub-problem (its precision class; the tensor cores may group the products into
/// different partial sums than on the full filter). `Rival`: the family that would run p unpruned
/// (family::mma_sync in the default list, whose inner wgmma family does not weigh itself against it), or
/// void: p is served only where the pruned estimate is below Rival's on p (rival_not_slower).
template <class Inner, class Rival = void>
struct pruned : family_defaults<pruned<Inner, Rival>, typename Inner::element_type> {
  using T = typename Inner::element_type;  ///< the element type of x, w, b, y
  /// the inner family's kind: its kernels run (plan::kernel())
  static constexpr kernel_kind kind = Inner::kind;
  /// its name in descriptions
  static constexpr const char* name = "pruned";
  /// whether a family chosen after it names why this one was passed over
  static constexpr bool report_rejection = false;

  /// @brief The kept taps of p's filter rows and columns.
  static live_taps rows(const conv2d_problem& p) {
    return live_taps::of(p.H, p.P(), p.pad_h, p.stride_h, p.dil_h, p.R);
  }
  /// @copydoc rows
  static live_taps cols(const conv2d_problem& p) {
    return live_taps::of(p.W, p.Q(), p.pad_w, p.stride_w, p.dil_w, p.S);
  }

  /// @brief The sub-problem of the kept taps: filter rows(p).count() x cols(p).count(), padding pad -
  /// first*dil, dilation 1 along a dimension left with one tap (where no tap is kept: p itself).
  static conv2d_problem sub_problem(const conv2d_problem& p) {
    const live_taps r = rows(p), s = cols(p);
    if (r.count() == 0 || s.count() == 0) return p;
    conv2d_problem q = p;
    q.R = r.count(), q.S = s.count();
    q.pad_h = p.pad_h - r.first * p.dil_h, q.pad_w = p.pad_w - s.first * p.dil_w;
    if (q.R == 1) q.dil_h = 1;
    if (q.S == 1) q.dil_w = 1;
    return q;
  }

  /// The inner family's.
  static bool available(const device_info& dev) { return Inner::available(dev); }

  /// nullptr when it serves p: groups 1, some tap reads only padding for every output and at least one tap does
  /// not, the sub-problem keeps p's outputs (its padding at least 0 and its P x Q equal to p's, which a
  /// symmetric padding cut on one side only may miss), the inner family serves the sub-problem, and
  /// Rival is not estimated as fast on p.
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (p.groups != 1) return "groups != 1 (the pruned family takes dense layers)";
    const live_taps r = rows(p), s = cols(p);
    if (r.count() == 0 || s.count() == 0) return "every tap reads only padding";
    if (r.count() * s.count() == p.R * p.S) return "no tap reads only padding for every output";
    const conv2d_problem q = sub_problem(p);
    if (q.pad_h < 0 || q.pad_w < 0 || q.P() != p.P() || q.Q() != p.Q())
      return "the kept taps need a padding other than the problem's, cut on one side";
    if (validate(q, sizeof(T)) != status::success) return "the sub-problem is not valid";
    if (const char* why = Inner::can_implement(q, dev, o)) return why;
    if (!workspace_fits({static_cast<double>(q.w_elements()) * sizeof(T),
                         static_cast<double>(Inner::configure(q, dev, o).workspace_bytes)}))
      return "its workspace would reach 2^62 bytes";
    if (rival_not_slower<Rival>(p, dev, o, configure(p, dev, o).seconds))
      return "the pruned filter is estimated slower than the mma.sync kernel on the whole filter";
    return nullptr;
  }

  /// The inner family's configuration of the sub-problem, the kept taps before its prepared bytes.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    const plan_config ic = Inner::configure(sub_problem(p), dev, o);
    plan_config c = ic;
    c.prepared_bytes = round16(kept_bytes(p)) + ic.prepared_bytes;
    c.workspace_bytes = round16(c.prepared_bytes) + inner_scratch_bytes(ic);
    return c;
  }

  /// "taps reading only padding pruned (3x3 -> 1x1 filter, padding 36x36 -> 0x0, the kept taps copied at
  /// prepare): <the inner family's description>".
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev,
                              const std::string& passed_over) {
    const conv2d_problem q = sub_problem(p);
    return "taps reading only padding pruned (" + std::to_string(p.R) + "x" + std::to_string(p.S) + " -> " +
           std::to_string(q.R) + "x" + std::to_string(q.S) + " filter, padding " + std::to_string(p.pad_h) + "x" +
           std::to_string(p.pad_w) + " -> " + std::to_string(q.pad_h) + "x" + std::to_string(q.pad_w) +
           ", the kept taps copied at prepare): " + Inner::describe(q, inner_config(p, c), dev, passed_over);
  }
  /// The inner family's.
  static status runs_here(const plan_config& c) { return Inner::runs_here(c); }

  /// Copies the kept taps of w to the start of the prepared bytes, then the inner family's prepare on them
  /// into the rest; cuda_error for a failed launch (left pending).
  static status prepare(const conv2d_problem& p, const plan_config& c, const T* w, void* workspace, std::size_t bytes,
                        cudaStream_t stream) {
    (void)bytes;  // (the plan checked the workspace against workspace_bytes)
    const conv2d_problem q = sub_problem(p);
    const live_taps r = rows(p), s = cols(p);
    kernel::prune_taps_params pp;
    pp.K = p.K, pp.Cg = static_cast<std::int32_t>(p.C_per_group());
    pp.R = static_cast<std::int32_t>(p.R), pp.S = static_cast<std::int32_t>(p.S);
    pp.r0 = static_cast<std::int32_t>(r.first), pp.s0 = static_cast<std::int32_t>(s.first);
    pp.Rp = static_cast<std::int32_t>(q.R), pp.Sp = static_cast<std::int32_t>(q.S);
    const plan_config ic = inner_config(p, c);
    T* kept = static_cast<T*>(workspace);
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(p.K, std::int64_t(1) << 16));
    if (status st = device::detail::check_device(kernel::prune_taps_kernel<T>); st != status::success) return st;
    kernel::prune_taps_kernel<T><<<blocks, 128, 0, stream>>>(w, kept, pp);
    if (status st = device::detail::launch_status(); st != status::success) return st;
    return Inner::prepare(q, ic, kept, inner_workspace(workspace, p), round16(ic.prepared_bytes), stream);
  }

  /// Runs the inner family on the sub-problem with the kept taps as its filter. The caller's buffers are
  /// checked first (adapter_checks: indices_not_supported, null_pointer, misaligned_pointer,
  /// overlapping_buffers, cuda_error); then the inner family's statuses.
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    if (p.gemm_m() == 0) return status::success;
    if (status st = adapter_checks<Op>(p, a, c, nullptr, 0, 1); st != status::success) return st;
    const plan_config ic = inner_config(p, c);
    run_arguments<T> ia = a;
    ia.w = static_cast<const T*>(a.workspace);
    ia.workspace = inner_workspace(a.workspace, p);
    ia.workspace_bytes = a.workspace_bytes - round16(kept_bytes(p));  // (the plan checked it holds the prepared bytes)
    if (!a.scratch) {  // the inner family's scratch after all the prepared bytes
      const std::size_t off = round16(c.prepared_bytes);
      const bool some = inner_scratch_bytes(ic) > 0;
      ia.scratch = some ? static_cast<unsigned char*>(a.workspace) + off : nullptr;
      ia.scratch_bytes = some && a.workspace_bytes > off ? a.workspace_bytes - off : 0;
    }
    return Inner::launch(sub_problem(p), ic, ia, op, epi, stream);
  }

 private:
  /// bytes of the kept taps: K x C/groups x Rp x Sp elements
  static std::size_t kept_bytes(const conv2d_problem& p) {
    return static_cast<std::size_t>(sub_problem(p).w_elements()) * sizeof(T);
  }
  /// the inner family's workspace: after the kept taps
  static void* inner_workspace(void* workspace, const conv2d_problem& p) {
    return static_cast<unsigned char*>(workspace) + round16(kept_bytes(p));
  }
  /// the inner family's scratch: its workspace after its prepared bytes
  static std::size_t inner_scratch_bytes(const plan_config& ic) {
    const std::size_t off = ic.prepared_bytes > 0 ? round16(ic.prepared_bytes) : 0;
    return ic.workspace_bytes > off ? ic.workspace_bytes - off : 0;
  }
  /// the inner family's configuration: c with its own prepared bytes and workspace
  static plan_config inner_config(const conv2d_problem& p, const plan_config& c) {
    plan_config ic = c;
    ic.prepared_bytes = c.prepared_bytes - round16(kept_bytes(p));
    ic.workspace_bytes =
        (ic.prepared_bytes > 0 ? round16(ic.prepared_bytes) : 0) + (c.workspace_bytes - round16(c.prepared_bytes));
    return ic;
  }
};

}  // namespace convred::device::family
