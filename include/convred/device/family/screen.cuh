/// @file device/family/screen.cuh
/// @brief The screening family (docs/screening.md, kernel/screen.cuh): min, max, argmin and argmax with
/// the result of exact fp32 FMA (the unsplit SIMT kernel's, math::ieee's fused kernel, bit for bit) from a
/// 16-bit tensor-core pass and an exact recompute of the few channels its certified error bound cannot
/// rule out. Every run writes the plan's scratch (pass 1's outputs): runs of one plan on different streams
/// must not overlap in time, unless each binds its own scratch (conv2d_reduce_plan::bind).
///
/// Not in the default family list yet: a plan takes it when a caller lists it first, e.g.
/// `conv2d_reduce_plan<float, math::accurate, family_list<family::screen<float, math::accurate>,
/// family::wgmma<float, math::accurate>, ...>>`. It serves the ops op::min, op::max, op::argmin and
/// op::argmax with epilogue::identity or epilogue::scale; a run with any other op or epilogue returns
/// status::invalid_argument (the bound needs the epilogue's Lipschitz constant and the op's order).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../functional.cuh"
#include "../../kernel/screen.cuh"
#include "../../kernel/screen_full.cuh"
#include "../../kernel/screen_recompute.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "../cost_model.cuh"
#include "family.cuh"
#include "wgmma.cuh"

namespace convred::device::family {

namespace detail {
/// 1 for op::min / op::argmin, 2 for op::max / op::argmax, 0 for an op screening does not serve.
template <class Op>
constexpr int screen_direction() {
  if constexpr (std::is_same_v<Op, op::min> || std::is_same_v<Op, op::argmin>) return 1;
  else if constexpr (std::is_same_v<Op, op::max> || std::is_same_v<Op, op::argmax>) return 2;
  else return 0;
}
/// Whether E is epilogue::scale<S> for some S.
template <class E>
struct is_scale_epilogue : std::false_type {};
template <class S>
struct is_scale_epilogue<epilogue::scale<S>> : std::true_type {};
/// The epilogue's Lipschitz constant: |s| as the kernels apply it (v * float(s)) for epilogue::scale, 1 for
/// epilogue::identity (the only two screening serves).
template <class E>
double screen_lipschitz(const E& e) {
  if constexpr (is_scale_epilogue<E>::value) {
    return std::fabs(static_cast<double>(static_cast<float>(e.s)));
  } else {
    (void)e;
    return 1.0;
  }
}
}  // namespace detail

/// @brief The screening family for float data under the plan's math Math (math::accurate: the results
/// are math::ieee's). Pass 1 runs the wgmma family in InnerMath (fp16: unit roundoff 2^-11, like TF32's,
/// at 16-bit speed); its scratch gets pass 1's packed per-pixel outputs and pass 2's list (20 bytes per
/// output pixel), the per-run statistics of w and b and the filter transposed (4 bytes per weight) after it.
template <class T, class Math, class InnerMath = math::fp16>
struct screen : family_defaults<screen<T, Math, InnerMath>, T> {
  /// pass 1's family (wgmma_role::pass1: on any problem size, not weighed against the mma.sync kernel, which
  /// has no pass 1)
  using inner = wgmma<T, InnerMath, wgmma_role::pass1>;
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::screen;
  /// its name in descriptions
  static constexpr const char* name = "screen";
  /// whether a family chosen after it names why this one was passed over
  static constexpr bool report_rejection = false;

  /// Bytes after pass 1's own workspace: its value and index outputs (4 + 8 bytes per output pixel), the
  /// list of pixels recomputed in full (8 bytes per output pixel), the statistics, the filter transposed
  /// (4 bytes per weight), 16-byte alignment.
  static std::size_t extra_bytes(const conv2d_problem& p) {
    const std::size_t M = static_cast<std::size_t>(p.gemm_m());
    return 16 + round16(M * sizeof(float)) + 2 * round16(M * sizeof(std::int64_t)) + round16(sizeof(kernel::screen_stats)) +
           round16(static_cast<std::size_t>(p.w_elements()) * sizeof(float)) + 16;
  }

  /// pass 1's family is available
  static bool available(const device_info& dev) { return inner::available(dev); }
  /// nullptr when it serves p: float data, groups 1, no dilation unless pass 1 is TF32, K <= 65535, GEMM_K
  /// <= 2^20, and pass 1's family serves p.
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (!std::is_same_v<T, float>) return "x is not float";
    if (p.groups != 1) return "groups != 1";
    // (pass 1's wgmma family serves dilated 16-bit problems on its direct tiles of filter rows, which the
    // screening op has not been run on)
    if constexpr (!std::is_same_v<InnerMath, math::tf32>) {
      if ((p.dil_h != 1 && p.R > 1) || (p.dil_w != 1 && p.S > 1)) return "dilation != 1 (pass 1 in 16-bit math)";
    }
    if (p.K > kernel::screen_max_channels) return "K above 65535";
    if (p.gemm_k() > kernel::screen_max_gemm_k) return "GEMM_K above 2^20";
    if (kernel::screen_tile_of(p).cc == 0) return "R * S * K above pass 2's filter rows (200 KB of shared memory)";
    if (const char* why = inner::can_implement(p, dev, o)) return why;
    if (!workspace_fits({static_cast<double>(inner::configure(p, dev, o).workspace_bytes),
                         static_cast<double>(p.gemm_m()) * (sizeof(float) + 2 * sizeof(std::int64_t)),
                         static_cast<double>(p.w_elements()) * sizeof(float)}))
      return "its workspace would reach 2^62 bytes";
    return nullptr;
  }
  /// pass 1's configuration, with the workspace grown by extra_bytes and its time estimate plus pass 2's.
  static plan_config configure(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    plan_config c = inner::configure(p, dev, o);
    c.workspace_bytes = round16(c.workspace_bytes) + extra_bytes(p);
    c.seconds += recompute_seconds(p, dev);
    return c;
  }
  /// "screened: <pass 1's description>, then an exact fp32 recompute of the channels its error bound
  /// cannot rule out (min, max, argmin, argmax: math::ieee's results)".
  static std::string describe(const conv2d_problem& p, const plan_config& c, const device_info& dev,
                              const std::string& passed_over) {
    return "screened: " + inner::describe(p, inner_config(p, c), dev, passed_over) +
           ", then an exact fp32 recompute of the channels its certified error bound cannot rule out (min, max, "
           "argmin, argmax with the identity or scale epilogue: the unsplit SIMT kernel's results, bit for bit)";
  }
  /// pass 1's
  static status runs_here(const plan_config& c) { return inner::runs_here(c); }
  /// pass 1's (packs the filter in InnerMath)
  static status prepare(const conv2d_problem& p, const plan_config& c, const T* w, void* workspace, std::size_t bytes,
                        cudaStream_t stream) {
    return inner::prepare(p, inner_config(p, c), w, workspace, bytes, stream);
  }

  /// Pass 1 (inner's launch with kernel::screen_op), the statistics of w and b, pass 2. invalid_argument
  /// for an op other than min, max, argmin, argmax or an epilogue other than identity and scale; the
  /// entry points' checks of the caller's buffers first (indices_not_supported: indices for min or max;
  /// null_pointer: x, w, or both y and indices null; misaligned_pointer; overlapping_buffers: y or indices
  /// overlapping x, w, bias, each other, the prepared bytes or this run's scratch, or the scratch
  /// overlapping x, w or bias; cuda_error: an error pending on entry).
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    constexpr int dir = detail::screen_direction<Op>();
    if constexpr (!std::is_same_v<T, float> || dir == 0 ||
                  !(std::is_same_v<Epilogue, epilogue::identity> || detail::is_scale_epilogue<Epilogue>::value)) {
      (void)p, (void)c, (void)a, (void)op, (void)epi, (void)stream;
      return status::invalid_argument;
    } else {
      const std::int64_t M = p.gemm_m();
      if (M == 0) return status::success;
      kernel::screen_tile tl = kernel::screen_tile_of(p);
      const std::int64_t tiles = p.N * tl.tiles_p * tl.tiles_q;
      const unsigned grid = static_cast<unsigned>(tiles < 0x7FFFFFFF ? tiles : 0x7FFFFFFF);  // (blocks stride over tiles)
      const plan_config ic = inner_config(p, c);
      run_arguments<T> ia;
      unsigned char* mine = adapter_scratch(a, ic, extra_bytes(p), ia);
      // (this run's scratch: pass 1's outputs, the list, the statistics, the transposed filter)
      if (status s = adapter_checks<Op>(p, a, ic, mine, extra_bytes(p) - 16, grid);
          s != status::success)
        return s;
      float* gaps = reinterpret_cast<float*>(mine);
      auto* packed = reinterpret_cast<std::int64_t*>(mine + round16(static_cast<std::size_t>(M) * sizeof(float)));
      auto* full = packed + M;
      auto* stats = reinterpret_cast<kernel::screen_stats*>(full + M);
      auto* wt = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(stats) + round16(sizeof(kernel::screen_stats)));
      ia.y = gaps, ia.indices = packed;
      if (status s = inner::launch(p, ic, ia, kernel::screen_op<dir == 2>{}, epi, stream); s != status::success) return s;
      if (cudaMemsetAsync(stats, 0, sizeof(kernel::screen_stats), stream) != cudaSuccess) return status::cuda_error;
      constexpr kernel::screen_precision pr = kernel::screen_precision_of<InnerMath>();
      kernel::screen_stats_kernel<256><<<static_cast<unsigned>(p.K), 256, 0, stream>>>(
          a.w, a.bias, p.gemm_k(), static_cast<float>(pr.limit), stats, wt);
      const double lip = detail::screen_lipschitz(epi);
      const kernel::screen_params sp{p,     a.x,  a.w, wt, a.bias, gaps, packed, stats, full, pr,
                                     std::isfinite(lip) ? lip : INFINITY, a.y, a.indices};
      tl.vec_x = p.x_layout == layout::nchw && p.W % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0;
      tl.vec_w = p.K % 4 == 0 && reinterpret_cast<std::uintptr_t>(wt) % 16 == 0;
      auto recompute = p.R == 3 && p.S == 3 && p.dil_h == 1 && p.dil_w == 1 ? kernel::screen_recompute_kernel<Op, Epilogue, 3, 3>
                                            : kernel::screen_recompute_kernel<Op, Epilogue>;
      if (tl.smem_bytes > 48 * 1024 &&
          cudaFuncSetAttribute(recompute, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(tl.smem_bytes)) !=
              cudaSuccess)
        return status::cuda_error;
      recompute<<<grid, kernel::screen_threads, tl.smem_bytes, stream>>>(sp, op, epi, tl);
      int device = 0, sms = 0;
      if (cudaGetDevice(&device) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return status::cuda_error;
      // the list's length is known on the device only: a grid of 8 blocks per SM (2 resident per SM, 4 each
      // per slot) strides over its tiles of 64 pixels; static shared memory (under 48 KB)
      kernel::screen_full_kernel<Op, Epilogue>
          <<<static_cast<unsigned>(sms * 8), kernel::screen_full_threads, 0, stream>>>(sp, op, epi);
      return device::detail::launch_status();  // (a launch error left pending, as every entry point's)
    }
  }

 private:
  /// pass 1's own configuration: c without extra_bytes
  static plan_config inner_config(const conv2d_problem& p, const plan_config& c) {
    plan_config ic = c;
    ic.workspace_bytes = c.workspace_bytes - extra_bytes(p);
    return ic;
  }
  /// Pass 2's time model: x read once from memory (the tiles' halos from L2), or the shared-memory
  /// wavefronts of the tiled recompute (screen_wavefronts_per_tap per pixel and tap), whichever is longer.
  static double recompute_seconds(const conv2d_problem& p, const device_info& dev) {
    const double M = static_cast<double>(p.gemm_m()), L = static_cast<double>(p.gemm_k());
    const double bytes = static_cast<double>(p.x_elements()) * sizeof(float) + M * 16.0;
    const double sms = dev.sm_count > 0 ? dev.sm_count : 132;
    return std::max(bytes / screen_x_bytes_per_s, M * L * screen_wavefronts_per_tap / (sms * screen_wavefronts_per_sm));
  }
};

}  // namespace convred::device::family
