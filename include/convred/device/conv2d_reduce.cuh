/// @file device/conv2d_reduce.cuh
/// @brief Host entry points: fused conv2d -> epilogue -> channel reduction, and conv2d with epilogue (the
/// direct kernel's entry point, conv2d_reduce_direct, is in conv2d_reduce_direct.cuh, included here).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../functional.cuh"
#include "../kernel/conv2d_reduce.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "conv2d_reduce_direct.cuh"

namespace convred::device {

/// @brief Fused conv2d -> epilogue -> reduction across all K output channels, in one kernel.
///
/// Computes, for every output pixel (n, p, q),
///   y[n,0,p,q] = Op over k in [0,K) of e(bias[k] + conv2d(x, w)[n,k,p,q], k)
/// and, for index ops (op::argmin, op::argmax), indices[n,0,p,q] = the k attaining it (int64, lowest k
/// on ties, first NaN). This is `torch.min(e(conv2d(x, w, b)), dim=1, keepdim=True)` (values, indices)
/// with PyTorch's conv2d semantics (see conv2d_problem). The (N,K,P,Q) conv output is never written to
/// global memory: each block reduces its tile across channels in registers and with cub::WarpReduce.
///
/// @tparam Policy tile policy: default_policy (exact SIMT, default_simt_policy<T>), default_policy_for<Math>
///   (math::ieee, tf32, tf32x3, bf16, fp16), or a simt_policy<...> / mma_sync_policy<...> of your own (policy.cuh).
/// @param p        problem; x layout NCHW or NHWC (y is (N,1,P,Q), the same in either layout)
/// @param x        device pointer, (N,C,H,W) elements of T (float, double, __half, __nv_bfloat16)
/// @param w        device pointer, (K, C/groups, R, S) elements (PyTorch's KCRS), contiguous
/// @param bias     device pointer to K elements, or nullptr for no bias
/// @param y        device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
/// @param indices  device pointer, N*P*Q int64; must be nullptr for ops without an index
/// @param op       reduction op (op::min, max, sum, mean, argmin, argmax, or a user op; functional.cuh)
/// @param epi      epilogue `V e(V, int k)` or `V e(V)`, run on the device in the compute type
/// @param stream   CUDA stream the kernel is launched on (asynchronous; nothing is synchronised)
/// @return status::success after a launch (or for N = 0, with no launch); otherwise the first problem
///   found, with nothing launched: any code of validate(conv2d_problem), null_pointer, misaligned_pointer
///   (a pointer not aligned to its element type: refused, there is no fallback), indices_not_supported,
///   overlapping_buffers, no_device (no device or no kernel image for it), cuda_error (a CUDA error was
///   already pending before the launch, or the launch failed; nothing launched, the error left pending).
/// Math: the policy's (README "Precision"): by default exact fp32 FMA for float/__half/__nv_bfloat16
/// inputs (widened to fp32 on load) and fp64 for double (math::ieee); tensor-core policies take float,
/// __half and __nv_bfloat16. Inputs are never modified; an epilogue's own device arrays (e.g.
/// per_channel_scale) must not overlap y or indices (not checked).
template <class Policy = default_policy, class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, T* y,
                     std::int64_t* indices, Op op = {}, Epilogue epi = {}, cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  using policy = convred::detail::resolve_policy_t<Policy, T>;
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  const std::int64_t ny = p.y_elements();
  if (ny == 0) return status::success;
  if (!x || !w || (!y && !indices)) return status::null_pointer;
  const std::int64_t blocks = (p.gemm_m() + policy::block_m - 1) / policy::block_m;
  const detail::buffer_arg args[] = {detail::input(x, p.x_elements()), detail::input(w, p.w_elements()),
                                     detail::input(bias, p.K), detail::output(y, ny), detail::output(indices, ny)};
  if (status s = detail::check_buffers(args, blocks); s != status::success) return s;
  auto kern = kernel::conv2d_reduce_kernel<policy, T, Op, Epilogue>;
  constexpr std::size_t smem = sizeof(kernel::conv2d_reduce_smem<policy, T, Op>);
  static_assert(smem <= detail::max_smem_per_block,
                "convred: this policy needs more shared memory than a block can have (227 KB on sm_90, 163 KB on "
                "sm_80): use fewer stages or a smaller BlockK / tile");
  if (status s = detail::check_device(kern, smem); s != status::success) return s;
  kern<<<static_cast<unsigned>(blocks), policy::threads, smem, stream>>>(block::make_conv_params(p, x, w, bias), op,
                                                                       epi, y, indices);
  return detail::launch_status();
}

/// @brief conv2d with epilogue, writing the full output: out[n,k,p,q] = e(bias[k] + conv2d(x,w)[n,k,p,q], k).
///
/// Same conv semantics, policies and math as conv2d_reduce (PyTorch's conv2d). `out` holds N*K*P*Q
/// elements of T in the layout of x: (N,K,P,Q) for NCHW, (N,P,Q,K) for NHWC. For unfused pipelines
/// (conv2d then channel_reduce) and checks.
/// @return as conv2d_reduce (null_pointer if x, w or out is null for non-empty work).
template <class Policy = default_policy, class T, class Epilogue = epilogue::identity>
status conv2d(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, T* out, Epilogue epi = {},
              cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  using policy = convred::detail::resolve_policy_t<Policy, T>;
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (p.out_elements() == 0) return status::success;
  if (!x || !w || !out) return status::null_pointer;
  const std::int64_t blocks = (p.gemm_m() + policy::block_m - 1) / policy::block_m;
  const detail::buffer_arg args[] = {detail::input(x, p.x_elements()), detail::input(w, p.w_elements()),
                                     detail::input(bias, p.K), detail::output(out, p.out_elements())};
  if (status s = detail::check_buffers(args, blocks); s != status::success) return s;
  auto kern = kernel::conv2d_kernel<policy, T, Epilogue>;
  constexpr std::size_t smem = sizeof(typename kernel::mainloop_t<policy, T>::TempStorage);
  static_assert(smem <= detail::max_smem_per_block,
                "convred: this policy needs more shared memory than a block can have: use fewer stages or a "
                "smaller BlockK / tile");
  if (status s = detail::check_device(kern, smem); s != status::success) return s;
  kern<<<static_cast<unsigned>(blocks), policy::threads, smem, stream>>>(block::make_conv_params(p, x, w, bias), epi,
                                                                       out);
  return detail::launch_status();
}

}  // namespace convred::device
