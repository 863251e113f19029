/// @file device/family/tiny.cuh
/// @brief The tiny family: problems of at most 512 im2col values (N*P*Q output pixels x GEMM_K), the
/// squeeze-and-excitation 1x1 convolutions on pooled features at batch 1, run by
/// kernel::tiny_conv_reduce_kernel in exact FMA instead of a tiled kernel whose 256-pixel tile holds one
/// pixel (the mma.sync kernel took ~10 us on the H200 for 48 x 8 multiply-adds; the tiny kernel 6.4 us).
/// Above 512 values the tiled kernels measured faster (bench/NOTES.md, "Tiny problems: one kernel sized
/// for them").
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
/// Serves groups 1, N*P*Q <= 32 and N*P*Q x GEMM_K <= max_values, with the planner's default options. One
/// kernel when the output channels fit one block (8 of them, a warp each), else a second one-block kernel
/// combines the blocks' reductions per pixel (its scratch: 32 states of 16 bytes per block). An op whose
/// state is larger than 16 bytes (a user's) runs the SIMT kernel instead (the same precision class).
template <class T, class Math>
struct tiny : family_defaults<tiny<T, Math>, T> {
  using V = compute_t<T>;  ///< the compute type
  /// the family's kind (plan_config::kind)
  static constexpr kernel_kind kind = kernel_kind::tiny;
  /// its name in descriptions
  static constexpr const char* name = "tiny";
  /// bytes of scratch per reduction state (arg_value<double>'s)
  static constexpr std::size_t state_bytes = 16;
  /// the most im2col values (N*P*Q x GEMM_K) it serves: on the H200 it was faster than the mma.sync kernel
  /// up to 192 (1.2-1.6x), even at 348 and slower from 2048 (0.5-0.9x), where each block's im2col copy and
  /// filter rounds take longer than the tiled kernel (bench/NOTES.md)
  static constexpr std::int64_t max_values = 512;

  /// @brief Pixel lanes of a channel's warp: the power of two at or above N*P*Q (at most 32).
  static int pixel_lanes(const conv2d_problem& p) {
    int pm = 1;
    while (pm < p.gemm_m() && pm < kernel::tiny_max_pixels) pm *= 2;
    return pm;
  }
  /// @brief The im2col row stride in shared memory: GEMM_K, made odd (pixel lanes reading one term hit
  /// distinct banks).
  static std::int64_t row_stride(const conv2d_problem& p) { return p.gemm_k() % 2 == 0 ? p.gemm_k() + 1 : p.gemm_k(); }
  /// @brief Blocks of the first kernel: one per 8 channels, at most 2^16 (a grid-stride loop).
  static std::int64_t blocks(const conv2d_problem& p) {
    constexpr std::int64_t per = kernel::tiny_threads / 32;
    return std::min<std::int64_t>((p.K + per - 1) / per, std::int64_t(1) << 16);
  }
  /// @brief Dynamic shared memory of the first kernel: N*P*Q rows of row_stride compute values.
  static std::size_t smem_bytes(const conv2d_problem& p) {
    return static_cast<std::size_t>(p.gemm_m() * row_stride(p)) * sizeof(V);
  }

  /// Every device with convred's code.
  static bool available(const device_info& dev) { return dev.cc_major > 0; }

  /// nullptr when it serves p: groups 1, 1 to 32 output pixels, at most max_values im2col values, the
  /// default plan options (options force the wgmma kernel's choices).
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options& o) {
    if (!available(dev)) return "no CUDA device";
    if (p.groups != 1) return "groups != 1";
    if (p.gemm_m() > kernel::tiny_max_pixels) return "more than 32 output pixels";
    if (o.splits != 0 || o.tiles != wgmma_tiling::model || o.pass != wgmma_pass_mode::model || o.tail != 0 ||
        o.tail_splits != 0 || o.pingpong != wgmma_pingpong_mode::model)
      return "plan options that force the wgmma kernel's choices";
    if (p.gemm_m() * p.gemm_k() > max_values)
      return "more than 512 im2col values (N*P*Q x GEMM_K): the tiled kernels are faster there";
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

  /// "tiny (exact fp32 FMA, 1 output pixel: its im2col row in shared memory, a warp per output channel, 42
  /// blocks, then one block combines their reductions): at most 512 im2col values, exact for any math".
  static std::string describe(const conv2d_problem& p, const plan_config&, const device_info&, const std::string&) {
    const std::int64_t b = blocks(p);
    return std::string("tiny (exact ") + (std::is_same_v<T, double> ? "fp64" : "fp32") + " FMA, " +
           std::to_string(p.gemm_m()) +
           (p.gemm_m() == 1 ? " output pixel: its im2col row" : " output pixels: their im2col rows") +
           " in shared memory, a warp per output channel, " + std::to_string(b) + " block" + (b == 1 ? "" : "s") +
           (b > 1 ? ", then one block combines their reductions" : "") + "): at most 512 im2col values, exact for any math";
  }

  /// Runs the kernel(s) on `stream`. The caller's buffers are checked first: indices_not_supported,
  /// null_pointer (x or w null, or both y and indices), workspace_too_small (the scratch), misaligned_pointer,
  /// overlapping_buffers (y or indices overlapping x, w, bias, each other or the scratch), cuda_error
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
          block::make_conv_params(p, a.x, a.w, a.bias), op, epi, pixel_lanes(p),
          static_cast<int>(row_stride(p)), partial, a.y, a.indices);
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
