/// @file device/family/tiny.cuh
/// @brief The tiny family: problems of 32 or fewer output pixels (N*P*Q), squeeze-and-excitation 1x1
/// convolutions on pooled features and 1x1 or 2x2 images, run by kernel::tiny_conv_reduce_kernel in exact
/// FMA instead of a tiled kernel whose 128- or 256-pixel tile holds one to 32 of them (the mma.sync kernel
/// took ~10 us on the H200 for 48 x 8 multiply-adds: bench/NOTES.md, "Tiny problems: one kernel sized for
/// them").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../kernel/tiny_conv_reduce.cuh"
#include "../../policy.cuh"
#include "../../problem.cuh"
#include "../../status.cuh"
#include "../common.cuh"
#include "../conv2d_reduce.cuh"
#include "../cost_model.cuh"
#include "family.cuh"

namespace convred::device::family {

/// @brief The tiny family for element type T under any math Math: the result is exact FMA in the
/// compute type (fp32; fp64 for double data), the precision class of math::ieee, whatever Math asks.
/// Serves groups 1 and N*P*Q <= 32 where the pixels' im2col rows (N*P*Q x GEMM_K compute values) fit in
/// 40 KB of shared memory, with the planner's default options. One kernel when the output channels fit
/// one block (256 / tpc of them), else a second one-block kernel combines the blocks' reductions per
/// pixel (its scratch: 32 states of 16 bytes per block). An op whose state is larger than 16 bytes (a
/// user's) runs the SIMT kernel instead (the same precision class).
template <class T, class Math>
struct tiny : family_defaults<tiny<T, Math>, T> {
  using V = compute_t<T>;  ///< the compute type
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::tiny;
  /// its name in descriptions
  static constexpr const char* name = "tiny";
  /// bytes of scratch per reduction state (arg_value<double>'s)
  static constexpr std::size_t state_bytes = 16;
  /// the shared memory the im2col rows may take: with the kernel's static 3 to 6 KB, within the 48 KB a block
  /// gets without opting in
  static constexpr std::size_t max_smem = 40 * 1024;

  /// @brief Threads per output channel: 32 times the power of two at or above GEMM_K / 512, at most 256
  /// (each thread loads at most 16 weights of a channel, all in flight at once; a power of two divides
  /// the block).
  static int threads_per_channel(const conv2d_problem& p) {
    int warps = 1;
    while (warps < kernel::tiny_threads / 32 && std::int64_t(warps) * 512 < p.gemm_k()) warps *= 2;
    return 32 * warps;
  }
  /// @brief Blocks of the first kernel: one per 256 / tpc channels, at most 2^16 (a grid-stride loop).
  static std::int64_t blocks(const conv2d_problem& p) {
    const std::int64_t per = kernel::tiny_threads / threads_per_channel(p);
    return std::min<std::int64_t>((p.K + per - 1) / per, std::int64_t(1) << 16);
  }
  /// @brief Dynamic shared memory of the first kernel: N*P*Q x GEMM_K compute values.
  static std::size_t smem_bytes(const conv2d_problem& p) {
    return static_cast<std::size_t>(p.gemm_m() * p.gemm_k()) * sizeof(V);
  }

  /// Every device with convred's code.
  static bool available(const device_info& dev) { return dev.cc_major > 0; }

  /// nullptr when it serves p: groups 1, 1 to 32 output pixels, the im2col rows in 40 KB, the default
  /// plan options (options force the wgmma kernel's choices).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (!available(dev)) return "no CUDA device";
    if (p.groups != 1) return "groups != 1";
    if (p.gemm_m() > kernel::tiny_max_pixels) return "more than 32 output pixels";
    if (o.splits != 0 || o.tiles != wgmma_tiling::model || o.pass != wgmma_pass_mode::model || o.tail != 0 ||
        o.tail_splits != 0)
      return "plan options that force the wgmma kernel's choices";
    if (p.gemm_k() > std::int64_t(max_smem / sizeof(V)) || smem_bytes(p) > max_smem)
      return "the pixels' im2col rows exceed 40 KB of shared memory";
    return nullptr;
  }

  /// The scratch of the combine (none for one block) and a latency estimate: two launches' fixed time
  /// and the filter's bytes at the packing passes' rate.
  static plan_config configure(const conv2d_problem& p, const device_info&, const plan_options&) {
    plan_config c;
    const std::int64_t b = p.gemm_m() > 0 ? blocks(p) : 0;
    c.workspace_bytes = b > 1 ? static_cast<std::size_t>(b) * kernel::tiny_max_pixels * state_bytes : 0;
    c.seconds = (b > 1 ? 2 : 1) * plan_xpack_fixed_seconds +
                static_cast<double>(p.w_elements()) * sizeof(T) / plan_xpack_bytes_per_s;
    return c;
  }

  /// "tiny (exact fp32 FMA, 3 output pixels: their im2col rows in shared memory, 32 threads per output
  /// channel, 42 blocks, then one block combines their reductions): 32 or fewer output pixels, exact for any math".
  static std::string describe(const conv2d_problem& p, const plan_config&, const device_info&, const std::string&) {
    const std::int64_t b = blocks(p);
    return std::string("tiny (exact ") + (std::is_same_v<T, double> ? "fp64" : "fp32") + " FMA, " +
           std::to_string(p.gemm_m()) +
           (p.gemm_m() == 1 ? " output pixel: its im2col row" : " output pixels: their im2col rows") +
           " in shared memory, " + std::to_string(threads_per_channel(p)) +
           " threads per output channel, " + std::to_string(b) + " block" + (b == 1 ? "" : "s") +
           (b > 1 ? ", then one block combines their reductions" : "") + "): 32 or fewer output pixels, exact for any math";
  }

  /// Runs the kernel(s) on `stream`. The caller's buffers are checked first: indices_not_supported,
  /// null_pointer (x or w null, or both y and indices), misaligned_pointer, overlapping_buffers (y or
  /// indices overlapping x, w, bias, each other or the scratch), workspace_too_small (the scratch), cuda_error
  /// (pending on entry, or a launch error, left pending).
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const plan_config& c, const run_arguments<T>& a, Op op, Epilogue epi,
                       cudaStream_t stream) {
    using A = typename Op::template accum_t<V>;
    if constexpr (sizeof(A) > state_bytes || alignof(A) > state_bytes) {
      (void)c;
      return conv2d_reduce<typename default_simt_policy<T>::type>(p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
    } else {
      if constexpr (!Op::has_index) {
        if (a.indices) return status::indices_not_supported;
      }
      const std::int64_t M = p.gemm_m();
      if (M == 0) return status::success;
      if (!a.x || !a.w || (!a.y && !a.indices)) return status::null_pointer;
      const std::int64_t b = blocks(p);
      void* scratch = a.scratch ? a.scratch : a.workspace;
      const std::size_t have = a.scratch ? a.scratch_bytes : a.workspace_bytes;
      const std::size_t need = b > 1 ? c.workspace_bytes : 0;
      if (need > 0 && (!scratch || have < need)) return status::workspace_too_small;
      if (reinterpret_cast<std::uintptr_t>(scratch) % alignof(A) != 0) return status::misaligned_pointer;
      const device::detail::buffer_arg bufs[] = {
          device::detail::input(a.x, p.x_elements()), device::detail::input(a.w, p.w_elements()),
          device::detail::input(a.bias, p.K), device::detail::output(a.y, M), device::detail::output(a.indices, M),
          device::detail::output(static_cast<const unsigned char*>(need ? scratch : nullptr),
                                 static_cast<std::int64_t>(need))};
      if (status s = device::detail::check_buffers(bufs, b); s != status::success) return s;
      auto kern = kernel::tiny_conv_reduce_kernel<T, Op, Epilogue>;
      if (status s = device::detail::check_device(kern, smem_bytes(p)); s != status::success) return s;
      A* partial = static_cast<A*>(scratch);
      kern<<<static_cast<unsigned>(b), kernel::tiny_threads, smem_bytes(p), stream>>>(
          block::make_conv_params(p, a.x, a.w, a.bias), op, epi, threads_per_channel(p), partial, a.y, a.indices);
      if (b > 1) {
        const int threads = 32 * static_cast<int>(std::min<std::int64_t>(M, 32));
        device::detail::launch_kernel(true, kernel::tiny_combine_kernel<T, Op>, dim3(1), dim3(threads), 0, stream,
                                      static_cast<const A*>(partial), static_cast<int>(b), static_cast<int>(M), p.K,
                                      op, a.y, a.indices);
      }
      return device::detail::launch_status();
    }
  }
};

}  // namespace convred::device::family
