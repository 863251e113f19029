/// @file device/conv2d_reduce_split.cuh
/// @brief Host entry points of the split path: conv2d -> epilogue -> channel reduction for problems with
/// few output pixels, split over channel tiles and over GEMM_K into a workspace of partial sums, then
/// reduced by a fixup kernel; its workspace size and the split heuristic.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../functional.cuh"
#include "../kernel/conv2d_reduce_split.cuh"
#include "../numeric.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "cost_model.cuh"

namespace convred::device {

namespace detail {

/// @brief Launches kernel::conv2d_reduce_split_fixup_kernel over `splits` partial planes of M x K on
/// `stream`, right after the kernel that wrote them (a programmatic dependent launch where supported:
/// launch_kernel): 16-byte loads where kernel::split_fixup_vec allows, kernel::split_fixup_lanes threads
/// per pixel. A launch error is left pending (launch_status).
template <class T, class Op, class Epilogue, class V>
void launch_split_fixup(const V* partial, int splits, std::int64_t M, std::int32_t K, const T* bias, Op op,
                        Epilogue epi, T* y, std::int64_t* indices, cudaStream_t stream) {
  const int vec = kernel::split_fixup_vec(partial, K);
  const int lanes = kernel::split_fixup_lanes(M, K, vec);
  const dim3 grid(static_cast<unsigned>(kernel::split_fixup_blocks(M, K, vec)));
  if (vec == 4) {
    if constexpr (std::is_same_v<V, float>)
      launch_kernel(true, kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, V, 4>, grid,
                    dim3(kernel::split_fixup_threads), 0, stream, partial, splits, M, K, bias, op, epi, y, indices, lanes);
  } else {
    launch_kernel(true, kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, V, 1>, grid,
                  dim3(kernel::split_fixup_threads), 0, stream, partial, splits, M, K, bias, op, epi, y, indices, lanes);
  }
}

}  // namespace detail


/// Largest GEMM_K split count of conv2d_reduce_split (the grid's z extent, 65535); also the largest number
/// of channel tiles (its y extent).
inline constexpr int max_k_splits = 65535;

/// Workspace bound of choose_k_splits' default: 64 MiB of partial sums.
inline constexpr std::size_t default_split_workspace_limit = std::size_t(64) << 20;

/// @brief Bytes of workspace conv2d_reduce_split needs for problem p, element type T and `k_splits` GEMM_K
/// splits: k_splits * N*P*Q * K partial sums of the compute type (compute_t<T>: 4 bytes for float, __half
/// and __nv_bfloat16, 8 for double), laid out [split][pixel][channel].
/// @return the size; 0 when there is nothing to run or conv2d_reduce_split refuses the arguments before
///   reading the workspace (p invalid: validate's codes; N = 0; k_splits outside [1, max_k_splits]; the
///   size overflows int64: size_overflow).
template <class T>
std::size_t conv2d_reduce_split_workspace_bytes(const conv2d_problem& p, int k_splits) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  if (validate(p, sizeof(T)) != status::success || k_splits < 1 || k_splits > max_k_splits) return 0;
  std::int64_t plane = 0, bytes = 0;  // p.K * N*P*Q * sizeof(T) was validated to fit int64
  if (!convred::detail::mul_ok(p.gemm_m() * p.K, static_cast<std::int64_t>(sizeof(compute_t<T>)), plane) ||
      !convred::detail::mul_ok(plane, k_splits, bytes))
    return 0;
  return static_cast<std::size_t>(bytes);
}

/// @brief Channel tiles of the split path for problem p: groups * ceil((K/groups) / BlockN), the grid's y
/// extent (a tile never spans two groups). 0 for an invalid problem.
/// @tparam Policy a simt_policy or mma_sync_policy (or default_policy / default_policy_for<Math>)
/// @tparam T      element type
template <class Policy, class T = float>
std::int64_t split_channel_tiles(const conv2d_problem& p) {
  using policy = convred::detail::resolve_policy_t<Policy, T>;
  if (validate(p, sizeof(T)) != status::success) return 0;
  return p.groups * ((p.K_per_group() + policy::block_n - 1) / policy::block_n);
}

/// @brief The split heuristic: the GEMM_K split count conv2d_reduce_split should run p with on a GPU of
/// `sm_count` SMs, or 0 when the fused kernel (conv2d_reduce) should run it instead.
///
/// The fused kernel launches m_tiles = ceil(N*P*Q / BlockM) blocks, each looping over every channel tile
/// and all of GEMM_K: with fewer pixel tiles than SMs most of the GPU idles whatever the batch. Split
/// only below sm_count / 2 pixel tiles: above that the partial sums' traffic costs more than the idle
/// SMs (measured on the H200, ResNet-50 layer2.0 3x3 stride 2 at batch 32, 98 tiles: fused 0.124 ms,
/// split 3 ways 0.175 ms). Below it, the count is the one the planner's time model of this kernel
/// (plan_conv2d_reduce_seconds, device/cost_model.cuh: waves of resident blocks, the partial sums'
/// traffic, the fixup's fixed cost) estimates fastest: k_splits in [1, min(slices, max_k_splits)] (slices
/// = ceil(GEMM_K / BlockK)) with channel_tiles * k_splits >= 2 and a workspace
/// (conv2d_reduce_split_workspace_bytes) within `max_workspace_bytes`, the smallest on ties; the fused
/// kernel (0) when its own estimate is not above the best split's.
/// @return 0 (run the fused kernel) when sm_count <= 0 (unknown), p is invalid or empty, 2 * m_tiles >=
///   sm_count (the fused grid keeps half the GPU or more busy), channel_tiles > max_k_splits, one split's
///   workspace is already above max_workspace_bytes, no count has channel_tiles * k_splits >= 2 (nothing
///   to spread), or the fused kernel's estimate is not above the best split's; else k_splits >= 1.
/// @tparam Policy a simt_policy or mma_sync_policy (or default_policy / default_policy_for<Math>)
/// @tparam T      element type
template <class Policy, class T>
int choose_k_splits(const conv2d_problem& p, int sm_count,
                    std::size_t max_workspace_bytes = default_split_workspace_limit) {
  using policy = convred::detail::resolve_policy_t<Policy, T>;
  if (sm_count <= 0 || validate(p, sizeof(T)) != status::success || p.y_elements() == 0) return 0;
  const std::int64_t m_tiles = (p.gemm_m() + policy::block_m - 1) / policy::block_m;
  if (2 * m_tiles >= sm_count) return 0;  // half the SMs busy or more: the fused kernel (see above)
  const std::int64_t ctiles = split_channel_tiles<policy, T>(p);
  if (ctiles > max_k_splits) return 0;
  const std::int64_t slices = (p.gemm_k() + policy::block_k - 1) / policy::block_k;
  const std::size_t plane = conv2d_reduce_split_workspace_bytes<T>(p, 1);
  if (plane == 0) return 0;
  std::int64_t ks_max = static_cast<std::int64_t>(max_workspace_bytes / plane);
  if (ks_max > slices) ks_max = slices;
  if (ks_max > max_k_splits) ks_max = max_k_splits;
  int ks = 0;
  constexpr double value_bytes = sizeof(compute_t<T>);  // the partial sums' type (8 bytes for double)
  double best = plan_conv2d_reduce_seconds<policy>(p, sm_count, 0, value_bytes);
  for (std::int64_t k = ctiles >= 2 ? 1 : 2; k <= ks_max; ++k) {
    const double t = plan_conv2d_reduce_seconds<policy>(p, sm_count, static_cast<int>(k), value_bytes);
    if (t < best) ks = static_cast<int>(k), best = t;
  }
  return ks;
}

/// @brief conv2d_reduce split over channel tiles and over GEMM_K, for problems with few output pixels:
/// two kernels on `stream`, with a workspace of partial sums in between.
///
/// Same result semantics as conv2d_reduce (y[n,0,p,q] = Op over k in [0,K) of e(bias[k] + conv2d(x,
/// w)[n,k,p,q], k), and for argmin / argmax the k attaining it, int64, lowest k on ties, first NaN;
/// PyTorch's conv2d: padding, stride, dilation, groups; x NCHW or NHWC). conv2d_reduce gives each block
/// BlockM pixels and loops it over all K channels and all of GEMM_K = (C/groups)*R*S, so a layer with
/// fewer pixel tiles than SMs leaves most of the GPU idle. Here:
/// 1. kernel::conv2d_split_partial_kernel, grid (ceil(N*P*Q / BlockM), split_channel_tiles, k_splits):
///    each block runs the policy's mainloop (the same implicit GEMM, math and tiles as conv2d_reduce) over
///    one contiguous range of GEMM_K slices (kernel::split_range: k_splits ranges of whole BlockK slices,
///    balanced, in order) and stores its raw accumulators to workspace[split][m][k] (m = (n*P + p)*Q + q,
///    k fastest; no bias, no epilogue);
/// 2. kernel::conv2d_reduce_split_fixup_kernel: per pixel, up to 256 lanes over the K channels sum the
///    k_splits partials in split order (IEEE adds in the compute type), add bias[k], apply the epilogue,
///    fold with Op, combine the lanes (shuffles, then the warps in order) and write y (and indices).
/// The result is deterministic (no atomics; fixed orders). With k_splits = 1 every channel's conv value is
/// bitwise the fused kernel's (same mainloop, same slices), so selections (min, max, argmin, argmax) match
/// conv2d_reduce bitwise; sums differ only by the order of the channel reduction. Splitting GEMM_K
/// shortens each fp32 accumulation: the error stays within the policy's documented bound (README
/// "Precision", docs/tolerances.md). device::choose_k_splits says when and how much to split;
/// conv2d_reduce_plan uses it.
///
/// @tparam Policy tile policy, as conv2d_reduce: default_policy (exact SIMT), default_policy_for<Math>, or a
///   simt_policy / mma_sync_policy (not a wgmma_policy)
/// @param p               problem; x layout NCHW or NHWC (y is (N,1,P,Q))
/// @param x               device pointer, (N,C,H,W) elements of T (float, double, __half, __nv_bfloat16)
/// @param w               device pointer, (K, C/groups, R, S) elements (PyTorch's KCRS), contiguous
/// @param bias            device pointer to K elements, or nullptr for no bias
/// @param y               device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
/// @param indices         device pointer, N*P*Q int64; must be nullptr for ops without an index
/// @param workspace       device pointer, aligned to the compute type (4 bytes; 8 for double; 16-byte
///   alignment, as cudaMalloc's, lets the first kernel store its channel pairs / quads 8 or 16 bytes at a
///   time), of
///   `workspace_bytes` bytes; overwritten (scratch: its contents before and after the call mean nothing)
///   and read by the second kernel, so it must not be used by other work until the call's kernels are done
/// @param workspace_bytes size of `workspace`, at least conv2d_reduce_split_workspace_bytes<T>(p, k_splits)
/// @param k_splits        GEMM_K splits, in [1, max_k_splits]; more splits than BlockK slices leave some
///   ranges empty (their partials are zero: correct, wasted work)
/// @param op              reduction op (functional.cuh; associative and commutative)
/// @param epi             epilogue `V e(V, int k)` or `V e(V)`, run on the device in the compute type
/// @param stream          CUDA stream both kernels are launched on (asynchronous; nothing is synchronised)
/// @return status::success after both launches (or for N = 0, with no launch); otherwise the first problem
///   found, with nothing launched: validate(p)'s codes; indices_not_supported; invalid_argument (k_splits
///   outside [1, max_k_splits]); null_pointer (x, w or workspace null, or both y and indices); size_overflow
///   (the workspace size overflows int64, more than max_k_splits channel tiles, or a grid above 2^31 - 1
///   blocks); workspace_too_small (workspace_bytes below conv2d_reduce_split_workspace_bytes);
///   misaligned_pointer (any pointer not aligned to its element type, the workspace to the compute type);
///   overlapping_buffers (y, indices or the used part of the workspace sharing a byte with an input or with
///   each other); no_device (no device or no kernel image for it); cuda_error (a CUDA error was pending
///   before the launch, or the first launch failed: nothing launched, the error left pending; if the second
///   launch fails, the first kernel, which writes only the workspace, may have run). Inputs are never
///   modified; an epilogue's own device arrays (e.g. per_channel_scale) must not overlap y, indices or the
///   workspace (not checked).
template <class Policy = default_policy, class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_split(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, T* y,
                           std::int64_t* indices, void* workspace, std::size_t workspace_bytes, int k_splits, Op op = {},
                           Epilogue epi = {}, cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  static_assert(!is_wgmma_policy_v<Policy>,
                "convred: conv2d_reduce_split takes a simt_policy or mma_sync_policy (or default_policy_for<Math>)");
  using policy = convred::detail::resolve_policy_t<Policy, T>;
  using V = typename kernel::mainloop_t<policy, T>::V;  // the partial sums' type
  static_assert(std::is_same_v<V, compute_t<T>>, "convred: the workspace holds partial sums of the compute type");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  if (k_splits < 1 || k_splits > max_k_splits) return status::invalid_argument;
  const std::int64_t ny = p.y_elements();
  if (ny == 0) return status::success;
  if (!x || !w || (!y && !indices) || !workspace) return status::null_pointer;
  const std::size_t need = conv2d_reduce_split_workspace_bytes<T>(p, k_splits);
  const std::int64_t ctiles = split_channel_tiles<policy, T>(p);
  if (need == 0 || ctiles > max_k_splits) return status::size_overflow;
  if (workspace_bytes < need) return status::workspace_too_small;
  const std::int64_t m_tiles = (ny + policy::block_m - 1) / policy::block_m;
  const std::int64_t fixup_blocks = kernel::split_fixup_blocks(ny, p.K);  // the most the fixup's grid needs
  V* partial = static_cast<V*>(workspace);
  const detail::buffer_arg args[] = {detail::input(x, p.x_elements()), detail::input(w, p.w_elements()),
                                     detail::input(bias, p.K),         detail::output(y, ny),
                                     detail::output(indices, ny),      detail::output(partial, std::int64_t(k_splits) * ny * p.K)};
  if (status s = detail::check_buffers(args, m_tiles > fixup_blocks ? m_tiles : fixup_blocks); s != status::success)
    return s;
  auto partial_kern = kernel::conv2d_split_partial_kernel<policy, T>;
  auto fixup_kern = kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, V>;
  constexpr std::size_t smem = sizeof(typename kernel::mainloop_t<policy, T>::TempStorage);
  static_assert(smem <= detail::max_smem_per_block,
                "convred: this policy needs more shared memory than a block can have: use fewer stages or a "
                "smaller BlockK / tile");
  if (status s = detail::check_device(partial_kern, smem); s != status::success) return s;
  if (status s = detail::check_device(fixup_kern); s != status::success) return s;
  const block::conv_params<T> prm = block::make_conv_params(p, x, w, bias);
  const dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(ctiles), static_cast<unsigned>(k_splits));
  partial_kern<<<grid, policy::threads, smem, stream>>>(prm, partial);
  if (status s = detail::launch_status(); s != status::success) return s;
  detail::launch_split_fixup(static_cast<const V*>(partial), k_splits, ny, static_cast<std::int32_t>(p.K), bias, op, epi,
                             y, indices, stream);
  return detail::launch_status();
}

}  // namespace convred::device
