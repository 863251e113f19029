/// @file device/channel_reduce.cuh
/// @brief Host entry point: reduction across the channel dim of an existing (N, C, H, W) tensor, and the
/// run-time rule that picks its kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../functional.cuh"
#include "../kernel/channel_reduce.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"

namespace convred::device {

/// @brief The launch chosen for a channel reduction (see make_channel_reduce_plan).
struct channel_reduce_plan {
  /// Kernel family and load width.
  enum class kind : int {
    nchw_vector,  ///< NCHW tile kernel, one 16-byte vector of consecutive pixels per thread
    nchw_scalar,  ///< NCHW tile kernel, scalar loads, kernel::nchw_scalar_items<T> pixels per thread
    nhwc_vector,  ///< NHWC tile kernel, 16-byte vectors of consecutive channels
    nhwc_scalar,  ///< NHWC tile kernel, scalar loads
    pixel         ///< one block per pixel, cub::BlockReduce (either layout)
  };
  kind k = kind::nchw_scalar;  ///< which kernel
  int split = 1;               ///< NCHW: channel slices per tile (power of two); NHWC: lanes per pixel; pixel: 1
  int vec = 1;                 ///< elements per load (1 or 16 / sizeof(T))
  std::int64_t blocks = 0;     ///< grid size (may exceed 2^31 - 1: the caller refuses that as size_overflow)
  int threads = 0;             ///< block size
};

/// @brief The run-time rule that chooses the kernel and its launch shape (host only, no CUDA calls).
///
/// Let `target = sm_count * threads_per_sm / 2` (half the device's resident threads: each tile-kernel
/// thread keeps up to `unroll` loads of up to 16 bytes in flight, so this is ample to cover memory
/// latency), `pixels = N*H*W`, `t = Policy::threads`.
/// - Load width: 16-byte vectors when `Policy::vectorize`, x is 16-byte aligned and H*W (NCHW) or C (NHWC)
///   is a multiple of v = 16 / sizeof(T); otherwise scalar loads (still coalesced across a warp). Nothing
///   is refused for alignment beyond alignof(T).
/// - NCHW tile kernel: a thread owns `ppt` pixels (v when vectorised, else kernel::nchw_scalar_items<T>),
///   so `pixels / ppt` threads cover the tensor with no cross-thread work. While that is below `target`
///   and every slice keeps at least `unroll` channels (C >= 2 * slices * unroll), the channels are split in
///   twice as many slices, up to min(32, t / 8) (the partial states meet in shared memory).
/// - NHWC tile kernel: 4 lanes per pixel, or 32 when a pixel has at least 4 * 32 loads of channels
///   (C / v >= 128) or when `pixels * 4 < target`.
/// - Pixel kernel instead (one block of t threads per pixel, cub::BlockReduce): when the tile kernel would
///   launch fewer blocks than there are SMs, the pixels outnumber those blocks, and C >= 2 * t.
/// `Policy::path`, `Policy::slices`, `Policy::lanes` override the corresponding choice.
template <class Policy, class T>
channel_reduce_plan make_channel_reduce_plan(const channel_reduce_problem& p, const T* x, int sm_count,
                                             int threads_per_sm) {
  using plan = channel_reduce_plan;
  constexpr int t = Policy::threads;
  constexpr int v = kernel::vector_elems<T>;
  const std::int64_t pixels = p.y_elements(), hw = p.H * p.W, C = p.C;
  const std::int64_t target =
      static_cast<std::int64_t>(sm_count > 0 ? sm_count : 1) * (threads_per_sm > 0 ? threads_per_sm : 2048) / 2;
  const bool aligned16 = reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  plan r;
  r.threads = t;
  if (p.x_layout == layout::nchw) {
    const bool vector = Policy::vectorize && aligned16 && hw % v == 0;
    const int ppt = vector ? v : kernel::nchw_scalar_items<T>;
    const std::int64_t per_slice = (pixels + ppt - 1) / ppt;  // threads with one slice
    int s = 1;
    if constexpr (Policy::slices > 0) {
      s = Policy::slices;
    } else {
      constexpr int max_slices = t / 8 < 32 ? t / 8 : 32;
      while (s < max_slices && per_slice * s < target && C >= 2 * static_cast<std::int64_t>(s) * Policy::unroll)
        s *= 2;
    }
    r.k = vector ? plan::kind::nchw_vector : plan::kind::nchw_scalar;
    r.vec = vector ? v : 1;
    r.split = s;
    const std::int64_t per_block = static_cast<std::int64_t>(t / s) * ppt;  // pixels per tile
    r.blocks = (pixels + per_block - 1) / per_block;
  } else {
    const bool vector = Policy::vectorize && aligned16 && C % v == 0;
    const std::int64_t loads = vector ? C / v : C;
    int lanes = 4;
    if constexpr (Policy::lanes > 0) {
      lanes = Policy::lanes;
    } else {
      if (loads >= 4 * 32 || pixels * 4 < target) lanes = 32;
    }
    r.k = vector ? plan::kind::nhwc_vector : plan::kind::nhwc_scalar;
    r.vec = vector ? v : 1;
    r.split = lanes;
    r.blocks = (pixels + t / lanes - 1) / (t / lanes);
  }
  bool use_pixel = Policy::path == kernel::channel_reduce_path::pixel;
  if (Policy::path == kernel::channel_reduce_path::automatic)
    use_pixel = r.blocks < sm_count && pixels > r.blocks && C >= 2 * static_cast<std::int64_t>(t);
  if (use_pixel) {
    r.k = plan::kind::pixel;
    r.split = 1;
    r.vec = 1;
    r.blocks = pixels;
  }
  return r;
}

namespace detail {

/// Kernel of a plan, among those `Policy` allows (others are not instantiated); nullptr if none.
template <class Policy, class T, class Op, class Epilogue>
auto channel_reduce_kernel_for(const channel_reduce_plan& plan)
    -> void (*)(kernel::channel_reduce_params<T>, Op, Epilogue) {
  using kind = channel_reduce_plan::kind;
  constexpr int v = kernel::vector_elems<T>;
  constexpr bool tile = Policy::path != kernel::channel_reduce_path::pixel;
  if constexpr (Policy::path != kernel::channel_reduce_path::tile) {
    if (plan.k == kind::pixel) return kernel::channel_reduce_pixel_kernel<Policy, T, Op, Epilogue>;
  }
  if constexpr (tile) {
    if (plan.k == kind::nchw_scalar)
      return kernel::channel_reduce_nchw_kernel<Policy, T, Op, Epilogue, 1, kernel::nchw_scalar_items<T>>;
    if constexpr (Policy::vectorize) {
      if (plan.k == kind::nchw_vector) return kernel::channel_reduce_nchw_kernel<Policy, T, Op, Epilogue, v, 1>;
    }
    if constexpr (Policy::lanes == 0 || Policy::lanes == 4) {
      if (plan.k == kind::nhwc_scalar && plan.split == 4)
        return kernel::channel_reduce_nhwc_kernel<Policy, T, Op, Epilogue, 4, 1>;
      if constexpr (Policy::vectorize) {
        if (plan.k == kind::nhwc_vector && plan.split == 4)
          return kernel::channel_reduce_nhwc_kernel<Policy, T, Op, Epilogue, 4, v>;
      }
    }
    if constexpr (Policy::lanes == 0 || Policy::lanes == 32) {
      if (plan.k == kind::nhwc_scalar && plan.split == 32)
        return kernel::channel_reduce_nhwc_kernel<Policy, T, Op, Epilogue, 32, 1>;
      if constexpr (Policy::vectorize) {
        if (plan.k == kind::nhwc_vector && plan.split == 32)
          return kernel::channel_reduce_nhwc_kernel<Policy, T, Op, Epilogue, 32, v>;
      }
    }
  }
  return nullptr;
}

/// Number of SMs and resident threads per SM of the current device; (0, 0) if unknown. Called only when
/// pending_status() is success, so an error raised here is its own (or a no-device one) and is cleared;
/// check_device then reports the cause (e.g. no_device) when it asks the device again.
inline void device_shape(int& sm_count, int& threads_per_sm) {
  int dev = 0;
  sm_count = threads_per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev) != cudaSuccess) {
    sm_count = threads_per_sm = 0;
    cudaGetLastError();  // ours (nothing was pending before)
  }
}

}  // namespace detail

/// @brief y[n,0,h,w] = Op over c in [0,C) of e(x[n,c,h,w], c); for index ops also indices[n,0,h,w].
///
/// The standalone channel reduction of an existing tensor: `torch.amin(e(x), dim=1, keepdim=True)` for
/// op::min, `torch.min(e(x), dim=1, keepdim=True)` (values, indices) for op::argmin, and likewise max,
/// argmax, sum, mean or a user op (functional.cuh). Each element is converted to the compute type
/// V = compute_t<T> (fp32 for float, __half, __nv_bfloat16; fp64 for double), passed through the epilogue
/// `v = e(v, c)` (or `e(v)`), folded into the op's state; y gets `from_compute<T>(Op::value(state, C))`
/// (round to nearest for 16-bit T) and, for index ops, indices gets `Op::index(state)` (int64, lowest c
/// among ties, the first NaN's c if any NaN). Semantics of NaN, ties and identities: functional.cuh.
///
/// Kernels (chosen at run time by make_channel_reduce_plan, documented there): an NCHW tile kernel (each
/// thread one 16-byte vector of consecutive pixels, or a few scalar pixels, looping over its channels with
/// `Policy::unroll` loads in flight; channels split across threads and combined in shared memory when there
/// are few pixels), an NHWC tile kernel (a logical warp per pixel over contiguous channels,
/// cub::WarpReduce), and a pixel kernel (a block per pixel, cub::BlockReduce). It is bandwidth-bound:
/// x is read once, y (and indices) written once; all offsets are 64-bit.
///
/// @tparam Policy   kernel::channel_reduce_policy, a type derived from it, or default_policy (the former)
/// @param p        problem: N >= 0, C, H, W >= 1, layout of x NCHW or NHWC (y is (N,1,H,W) in either)
/// @param x        device pointer, N*C*H*W elements of T (float, double, __half, __nv_bfloat16), aligned to
///                 alignof(T); 16-byte alignment enables vector loads (otherwise scalar loads, no refusal)
/// @param y        device pointer, N*H*W elements of T; may be nullptr only for index ops with indices
/// @param indices  device pointer, N*H*W int64; must be nullptr for ops without an index
/// @param op       reduction op
/// @param epi      epilogue `V e(V, int c)` or `V e(V)`, run on the device in the compute type (e.g.
///                 epilogue::scale; per_channel_scale with a device pointer to C values; any
///                 `__host__ __device__` callable)
/// @param stream   CUDA stream the kernel is launched on (asynchronous; nothing is synchronised)
/// @return status::success after a launch (or for N = 0, with no launch); otherwise the first problem
///   found, in this order, with nothing launched and nothing written: any code of
///   validate(channel_reduce_problem), indices_not_supported, null_pointer, misaligned_pointer (a pointer not
///   aligned to its element type), overlapping_buffers (y or indices overlaps x or each other), size_overflow
///   (grid above 2^31 - 1 blocks), no_device (no device, or no kernel image for it), cuda_error (a CUDA
///   error was already pending before the launch, or the launch failed: nothing was launched; the CUDA
///   error is left to cudaGetLastError's caller as usual).
/// Inputs are never modified.
template <class Policy = default_policy, class T, class Op, class Epilogue = epilogue::identity>
status channel_reduce(const channel_reduce_problem& p, const T* x, T* y, std::int64_t* indices, Op op = {},
                      Epilogue epi = {}, cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  using policy =
      std::conditional_t<std::is_same_v<Policy, default_policy>, kernel::channel_reduce_policy, Policy>;
  static_assert(policy::threads % 32 == 0 && policy::threads >= 256 && policy::threads <= 1024,
                "channel_reduce_policy::threads: a multiple of 32 in [256, 1024]");
  static_assert(policy::slices == 0 ||
                    (policy::slices <= 32 && policy::slices <= policy::threads / 8 &&
                     (policy::slices & (policy::slices - 1)) == 0),
                "channel_reduce_policy::slices: 0 or a power of two <= min(32, threads / 8)");
  static_assert(policy::lanes == 0 || policy::lanes == 4 || policy::lanes == 32,
                "channel_reduce_policy::lanes: 0, 4 or 32");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  const std::int64_t ny = p.y_elements();
  if (ny == 0) return status::success;
  if (!x || (!y && !indices)) return status::null_pointer;
  const detail::buffer_arg args[] = {detail::input(x, p.x_elements()), detail::output(y, ny),
                                     detail::output(indices, ny)};
  if (status s = detail::check_buffers(args); s != status::success) return s;  // the grid is checked below
  // A CUDA error left pending by the caller: launch nothing, leave it pending (check_device says the same).
  if (status s = detail::pending_status(); s != status::success) return s;
  int sm_count = 0, threads_per_sm = 0;
  detail::device_shape(sm_count, threads_per_sm);  // (0, 0) without a device: check_device reports it below
  const channel_reduce_plan plan = make_channel_reduce_plan<policy>(p, x, sm_count, threads_per_sm);
  if (plan.blocks > 0x7fffffff) return status::size_overflow;
  auto kern = detail::channel_reduce_kernel_for<policy, T, Op, Epilogue>(plan);
  if (!kern) return status::invalid_argument;  // unreachable: the plan only names kernels the policy allows
  if (status s = detail::check_device(kern); s != status::success) return s;

  kernel::channel_reduce_params<T> prm;
  prm.x = x, prm.y = y, prm.indices = indices;
  prm.pixels = ny;
  prm.hw = p.H * p.W;
  prm.image_skip = (p.C - 1) * prm.hw;
  prm.units = ny / plan.vec;
  prm.C = static_cast<std::int32_t>(p.C);
  int log2 = 0;
  while ((1 << log2) < plan.split) ++log2;
  prm.slices_log2 = plan.k == channel_reduce_plan::kind::nchw_vector ||
                            plan.k == channel_reduce_plan::kind::nchw_scalar
                        ? log2
                        : 0;
  prm.x_layout = p.x_layout;
  kern<<<static_cast<unsigned>(plan.blocks), plan.threads, 0, stream>>>(prm, op, epi);
  return detail::launch_status();
}

}  // namespace convred::device
