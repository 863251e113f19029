/// @file device/conv2d_reduce_packed.cuh
/// @brief Host entry points of the Hopper packed-filter path: filter packing (a separate, once-per-filter
/// step) and the fused conv2d -> epilogue -> channel reduction on wgmma. The planner's time model of the
/// kernel is device/wgmma_model.cuh, the entry points' internals (plan, launch) device/wgmma_launch.cuh.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../functional.cuh"
#include "../kernel/conv2d_reduce_wgmma.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "conv2d_reduce.cuh"
#include "conv2d_reduce_split.cuh"
#include "plan_options.cuh"
#include "wgmma_launch.cuh"
#include "wgmma_model.cuh"

namespace convred::device {

/// @brief Bytes of the packed filter that conv2d_reduce_packed needs for problem p on the current device.
///
/// Zero when the wgmma kernel cannot serve p, in tiles of image rows, flat tiles or direct tiles (then
/// conv2d_reduce_packed and conv2d_reduce_packed_split run `Policy::fallback`, the mma.sync tensor-core
/// kernel with the same math, on the KCRS weights w, and need no packed filter). The packed filter does not
/// depend on the tiles.
/// The wgmma kernel serves: T = float, NCHW x, groups 1 or any groups with C/groups a multiple of
/// Policy::block_c (8 for TF32 and 3xTF32, 16 for bf16 and fp16; each group's K/groups channels its own
/// ceil(K/groups / 128) channel passes), stride 1 or 2 (the same in both dimensions),
/// dilation 1 (dilated filters at stride 1: flat tiles, the taps as offsets into the packed window, or direct
/// tiles of filter rows), N < 2^31, any K (K > 128 runs ceil(K/128) channel passes per tile), and R, S, padding and output width whose operand stages fit in
/// shared memory (every 3x3, 3x1, 1x3 and 1x1 filter with the default policies; under 3xTF32, whose stages
/// hold two parts, 1x7, 7x1, 2x2 and 1x1 at stride 2 too, at stride 1 any filter with groups 1 and a box of
/// at most 256 columns (5x5 and larger: direct tiles of filter rows), but not most 3x3 at stride 2), on a
/// compute capability 9.0 device running
/// an sm_90a image. The answer does not depend on N or on the reduction op. Size: groups * ceil(K/groups/128) *
/// ceil(C/groups/block_c) * parts * R*S * 128 * block_c * (4 bytes for tf32/tf32x3, 2 for bf16/fp16), plus 256
/// (pack_filter's flag word, padded); the seed problem (C = 64, K = 128, 3x3): 295,168 bytes for tf32, 590,080
/// for tf32x3, 147,712 for bf16/fp16.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @tparam T element type of x and w (only float is served by the wgmma kernel)
template <class Policy, class T>
std::size_t packed_filter_bytes(const conv2d_problem& p) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  return detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::either));
}

/// @brief Packs the KCRS weights w (K, C, R, S) into `packed` for conv2d_reduce_packed: a separate,
/// once-per-filter step (one small kernel on `stream`, after a 16-byte memset for a dilated filter or a
/// 3xTF32 filter of several taps; asynchronous), timed apart from the convolution.
///
/// The packed image is the wgmma kernel's shared-memory layout (kernel::pack_filter_kernel): per stage of
/// block_c input channels, per filter tap, a 128 x block_c slice in K-major core matrices, converted once to
/// the math's operand type (tf32 round-to-nearest-even, 3xTF32 big + small, bf16, fp16); a grouped
/// convolution's groups one after another, each as a dense filter of K/groups output and C/groups input
/// channels. Then 256 bytes whose first 32-bit word is nonzero when some weight is +-inf or NaN (the rest
/// padding, so that what follows keeps its alignment): the direct
/// tiles of filter rows skip the filter rows that read only padding only when it is zero
/// (block::wgmma_conv_params::skips_dead_rows). The first 16 of them are written (the memset, then the kernel)
/// only where such tiles may serve p (a dilated filter; under 3xTF32 any filter of several taps), else
/// left as they are and never read; so a filter packed for one problem must run with that problem (as the
/// layout already requires), not with another of the same C, K, R and S but another dilation. w is not
/// modified.
/// @param p      the problem the filter will be used with (see packed_filter_bytes for what it depends on)
/// @param w      device pointer, K*(C/groups)*R*S elements, KCRS contiguous
/// @param packed device pointer to `bytes` bytes, 16-byte aligned (cudaMalloc gives 256)
/// @param bytes  size of `packed`, at least packed_filter_bytes<Policy, T>(p)
/// @param stream CUDA stream the packing kernel is launched on (asynchronous)
/// @return status::success (also when packed_filter_bytes is 0: nothing to do, packed may be null);
///   validate(p)'s codes; null_pointer (w or packed null); misaligned_pointer (packed not 16-byte
///   aligned, w not aligned to T); workspace_too_small (bytes too small); overlapping_buffers (packed overlaps
///   w); size_overflow (the packing kernel's grid would pass 2^31 - 1 blocks, a packed filter near 2^40
///   bytes); cuda_error (a CUDA error was pending on entry, or the memset or the launch failed; the memset
///   may then be queued, the kernel is not).
template <class Policy, class T>
status pack_filter(const conv2d_problem& p, const T* w, void* packed, std::size_t bytes, cudaStream_t stream = nullptr) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (status s = detail::pending_status(); s != status::success) return s;  // the caller's error, left pending
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::either);
  const std::size_t need = detail::packed_bytes<Policy>(plan);
  if (need == 0) return status::success;
  if constexpr (std::is_same_v<T, float>) {
    const block::wgmma_conv_params& k = plan.k;
    if (!w || !packed) return status::null_pointer;
    if (!detail::aligned(w) || reinterpret_cast<std::uintptr_t>(packed) % 16 != 0) return status::misaligned_pointer;
    if (bytes < need) return status::workspace_too_small;
    const detail::span in[] = {detail::make_span(w, p.w_elements())};
    const detail::span out[] = {detail::make_span(static_cast<const unsigned char*>(packed), static_cast<std::int64_t>(need))};
    if (detail::any_overlap(in, out)) return status::overlapping_buffers;
    auto kern = kernel::pack_filter_kernel<Policy>;
    if (status s = detail::check_device(kern); s != status::success) return s;
    const std::int64_t slices = k.filter_flag_offset(), total = slices / Policy::filter_elem_bytes;
    // the flag word (the first 16 of filter_flag_bytes): written where its only reader, the direct tiles of
    // filter rows, may serve p
    const bool flagged = block::conv_mainloop_wgmma<Policy>::direct_taps_may_serve(p);
    int* flag = flagged ? reinterpret_cast<int*>(static_cast<unsigned char*>(packed) + slices) : nullptr;
    if ((total + 255) / 256 > 0x7fffffff) return status::size_overflow;  // (the grid's x extent)
    if (flag && cudaMemsetAsync(flag, 0, 16, stream) != cudaSuccess) return status::cuda_error;  // (left pending)
    kern<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(w, packed, k.Kg, k.C / k.conv_groups,
                                                                        k.group_passes, k.R, k.S, total, flag);
    return detail::launch_status();
  } else {
    return status::success;
  }
}

/// @brief Fused conv2d -> epilogue -> reduction across the K output channels on Hopper tensor cores
/// (wgmma), with a filter packed by pack_filter. Same semantics, arguments and errors as conv2d_reduce
/// (y[n,0,p,q] = Op over k of e(bias[k] + conv2d(x, w)[n,k,p,q], k); PyTorch's conv2d), plus `packed`.
///
/// This entry point has no workspace for a packed x, so it runs tiles of image rows only. When they do
/// not serve p (packed_filter_bytes<Policy, T>(p) is 0, or > 0 only because flat or direct tiles of filter rows fit, which
/// conv2d_reduce_packed_split runs), or x is not 16-byte aligned where the kernel reads it with TMA
/// (stride 1 and W a multiple of 4; otherwise its producer gathers x with plain loads), this is
/// conv2d_reduce<Policy::fallback> on w (packed is ignored and may be null). Otherwise `packed` must hold
/// pack_filter's output for this problem and these weights, in a buffer of `packed_bytes` >=
/// packed_filter_bytes bytes (checked: a too small buffer is refused; its contents are not checked: a
/// filter packed for other weights gives a wrong answer), and one persistent block per SM runs
/// conv2d_reduce_wgmma_kernel: each tile's input patch is read once per tile (not per filter
/// tap), converted once on chip into pixel-major planes, multiplied with wgmma with both operands in shared
/// memory (fp32 accumulation; each filter tap a shifted A descriptor), and reduced across channels in
/// registers; the (N,K,P,Q) conv output never leaves the chip.
/// Math: Policy::math (README "Precision"): tf32 (round to nearest even), tf32x3, bf16 or fp16 operands.
/// @param p            problem (conv2d_problem; PyTorch's conv2d semantics)
/// @param x            device pointer, (N,C,H,W) elements of T in p.x_layout (the wgmma kernel: NCHW float)
/// @param w            device pointer, (K, C/groups, R, S) elements (KCRS), used by the fallback
/// @param packed       device pointer to pack_filter's output (16-byte aligned), or nullptr when
///   packed_filter_bytes<Policy, T>(p) is 0
/// @param packed_bytes size of the `packed` buffer in bytes
/// @param bias         device pointer to K elements, or nullptr for no bias
/// @param y            device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
/// @param indices      device pointer, N*P*Q int64 (argmin / argmax); must be nullptr for other ops
/// @param op           reduction op (functional.cuh)
/// @param epi          epilogue `V e(V, int k)` or `V e(V)`, run on the device in fp32
/// @param stream       CUDA stream (asynchronous; nothing is synchronised)
/// @return as conv2d_reduce; also null_pointer (packed needed and null), misaligned_pointer (packed not
///   16-byte aligned), workspace_too_small (packed_bytes smaller than packed_filter_bytes).
template <class Policy, class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_packed(const conv2d_problem& p, const T* x, const T* w, const void* packed,
                            std::size_t packed_bytes, const nondeduced_t<T>* bias, T* y, std::int64_t* indices,
                            Op op = {}, Epilogue epi = {}, cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (status s = detail::pending_status(); p.y_elements() > 0 && s != status::success) return s;  // caller's error
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, Op>(p);
  auto fallback = [&] { return conv2d_reduce<typename Policy::fallback>(p, x, w, bias, y, indices, op, epi, stream); };
  // TMA reads x from a 16-byte aligned base: any other x (legal for float) takes the fallback too (the
  // gathering producer, for stride 2 or W % 4 != 0, reads any x)
  if (!plan.served || (!plan.k.gather && reinterpret_cast<std::uintptr_t>(x) % 16 != 0)) return fallback();
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (!Op::has_index) {
      if (indices) return status::indices_not_supported;
    }
    const std::int64_t ny = p.y_elements();
    if (ny == 0) return status::success;
    const std::size_t need = detail::packed_bytes<Policy>(plan);
    if (!x || !w || !packed || (!y && !indices)) return status::null_pointer;
    if (!detail::aligned(x) || !detail::aligned(w) || !detail::aligned(bias) || !detail::aligned(y) ||
        !detail::aligned(indices) || reinterpret_cast<std::uintptr_t>(packed) % 16 != 0)  // x: the gather's loads
      return status::misaligned_pointer;
    if (packed_bytes < need) return status::workspace_too_small;
    const detail::span in[] = {
        detail::make_span(x, p.x_elements()), detail::make_span(w, p.w_elements()),
        detail::make_span(bias, bias ? p.K : 0),
        detail::make_span(static_cast<const unsigned char*>(packed), static_cast<std::int64_t>(need))};
    const detail::span out[] = {detail::make_span(y, y ? ny : 0), detail::make_span(indices, indices ? ny : 0)};
    if (detail::any_overlap(in, out)) return status::overlapping_buffers;
    block::wgmma_conv_params k = plan.k;
    k.x = x, k.filter = packed, k.bias = bias;
    bool refused = false;
    const status s = detail::launch_wgmma<Policy, false>(k, plan.smem_bytes, k.tiles, op, epi, y, indices, stream, refused);
    return refused ? fallback() : s;  // the driver refused x's tensor map: the fallback
  } else {
    return fallback();  // unreachable: only float is served
  }
}

/// @brief The GEMM_K split counts conv2d_reduce_packed_split accepts for problem p on the current device:
/// 0 (the fused kernel) and 1 to the stages per channel pass of the tiles it runs (kt: ceil(C/groups / block_c),
/// or for flat or direct tiles of a 1x1 filter, whose stages hold wgmma_conv_params::group slices of block_c
/// channels, that over the group; for the direct tiles of a dilated filter, a stage per filter row: that
/// times R), when the wgmma kernel serves p (every split at least one stage); 0 to
/// max_k_splits when it does not (the mma.sync kernel runs then, split by conv2d_reduce_split for 1 and
/// more). 0 for an invalid problem. `options`: the planner's options (plan_options) the runs will use.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @tparam T element type of x and w (only float is served by the wgmma kernel)
template <class Policy, class T>
int max_packed_k_splits(const conv2d_problem& p, const plan_options& options = {}) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type");
  if (validate(p, sizeof(T)) != status::success) return 0;
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::chosen, options);
  return plan.served ? plan.k.kt : max_k_splits;
}

/// @brief Bytes of the workspace conv2d_reduce_packed_split needs for problem p, element type T and
/// `splits` GEMM_K splits (0: unsplit) on the current device.
///
/// When the wgmma kernel serves p (packed_filter_bytes<Policy, T>(p) > 0): the packed filter
/// (packed_filter_bytes), then, from the next multiple of 16 bytes, the packed x when the kernel runs flat
/// tiles there (choose_wgmma_params: small images, 1x1 stride 2, ...; block::conv_mainloop_wgmma::
/// xpack_bytes), then splits x N*P*Q x K fp32 partial sums laid out [split][pixel][channel] (the layout of
/// conv2d_reduce_split's workspace); for splits = 0, what the unsplit mode the model picks needs: nothing
/// (fused), pass mode's npass x N*P*Q reduction states of pass_state_bytes, or with a split-K tail the
/// head's states (pass mode) rounded up to 16 bytes and then the tail's Z x its pixels x K partial sums.
/// Otherwise the partial sums of the mma.sync split path that then runs
/// (conv2d_reduce_split_workspace_bytes<T>(p, splits); 0 for splits = 0), after the packed filter where
/// one is packed all the same (packed_filter_bytes > 0: `options` force tiles that do not serve p). Example: ResNet-50 layer3 3x3, x
/// (32, 256, 14, 14), K = 256, tf32, 2 splits: 2,359,552 bytes of packed filter (its padded flag word included), the packed x if flat, then
/// 2 x 6,272 x 256 x 4 = 12,845,056 bytes of partial sums.
/// `options`: the planner's options (plan_options) the runs will use.
/// @return the size; 0 for an invalid problem, N = 0, splits outside [0, max_packed_k_splits<Policy,
///   T>(p)], or a size that overflows int64.
template <class Policy, class T>
std::size_t packed_split_workspace_bytes(const conv2d_problem& p, int splits, const plan_options& options = {}) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type");
  if (validate(p, sizeof(T)) != status::success || p.y_elements() == 0 || splits < 0) return 0;
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::chosen, options);
  if (!plan.served) {  // the fallback: its partial sums after the packed filter, if any (conv2d_reduce_packed_split)
    const std::size_t packed = detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::either));
    if (splits == 0) return packed;
    const std::size_t sums = conv2d_reduce_split_workspace_bytes<T>(p, splits);
    return sums == 0 ? 0 : detail::partial_offset(packed) + sums;
  }
  if (splits > plan.k.kt) return 0;
  return detail::packed_split_bytes(p, detail::packed_bytes<Policy>(plan),
                                    block::conv_mainloop_wgmma<Policy>::xpack_bytes(plan.k), splits,
                                    splits == 0 && plan.pass_mode, plan.tail_pixels, plan.tail_splits);
}

namespace detail {

/// @brief conv2d_reduce_packed_split's launch for a plan made before (wgmma_plan, or a plan_config's
/// wgmma part: the tiles and unsplit mode are not chosen again): checks the arguments, then launches the
/// packing pass (flat tiles), the kernel (the head; a split-K tail's second launch) and the combine or
/// fixup, or runs the mma.sync fallback where plan is not served or x cannot be read with TMA. `packed`:
/// the packed filter's bytes at the workspace's start. Arguments, semantics and codes as
/// conv2d_reduce_packed_split, except that p is not validated and a pending CUDA error is not looked for
/// here: the caller does both (conv2d_reduce_packed_split; family::wgmma::launch, whose plan validated p).
template <class Policy, class T, class Op, class Epilogue>
status packed_split_run(const wgmma_plan_t& plan, std::size_t packed, const conv2d_problem& p, const T* x, const T* w,
                        void* workspace, std::size_t workspace_bytes, const nondeduced_t<T>* bias, T* y,
                        std::int64_t* indices, int splits, Op op, Epilogue epi, cudaStream_t stream, void* scratch,
                        std::size_t scratch_bytes) {
  const std::size_t off = partial_offset(packed);
  // the scratch: after the packed filter in the workspace, or the caller's separate buffer
  unsigned char* rest = scratch ? static_cast<unsigned char*>(scratch)
                        : workspace ? static_cast<unsigned char*>(workspace) + off
                                    : nullptr;
  const std::size_t rest_bytes = scratch ? scratch_bytes : workspace_bytes > off ? workspace_bytes - off : 0;
  // the mma.sync path, its partial sums in the scratch (none when not served)
  auto fallback = [&] {
    if (splits == 0) return conv2d_reduce<typename Policy::fallback>(p, x, w, bias, y, indices, op, epi, stream);
    return conv2d_reduce_split<typename Policy::fallback>(p, x, w, bias, y, indices, rest, rest_bytes, splits, op, epi,
                                                          stream);
  };
  if (!plan.served) return fallback();
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  if (splits < 0 || splits > plan.k.kt) return status::invalid_argument;
  // TMA reads x from a 16-byte aligned base: any other x (legal for float) takes the fallback too (not where
  // direct_taps tiles read x's copy)
  const bool copied = plan::wgmma_params<Policy>::x_copied(plan.k);
  if (!plan.k.gather && !plan.k.flat && !copied && reinterpret_cast<std::uintptr_t>(x) % 16 != 0) return fallback();
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t ny = p.y_elements();
    if (ny == 0) return status::success;
    if (!x || !w || !workspace || (!y && !indices)) return status::null_pointer;
    if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0 || reinterpret_cast<std::uintptr_t>(rest) % 16 != 0)
      return status::misaligned_pointer;
    const std::size_t xbytes = block::conv_mainloop_wgmma<Policy>::xpack_bytes(plan.k);
    using state_t = typename Op::template accum_t<float>;
    const bool pass = splits == 0 && plan.pass_mode && sizeof(state_t) <= pass_state_bytes;
    // partial sums: of every pixel (splits > 0), of a split-K tail's [m0, ny) (splits = 0), or none
    const bool tail = splits == 0 && plan.tail_tiles > 0 && Policy::parts == 1;  // (never under 3xTF32)
    const int zs = splits > 0 ? splits : tail ? plan.tail_splits : 0;
    const std::int64_t sum_pixels = splits > 0 ? ny : tail ? plan.tail_pixels : 0, m0 = ny - sum_pixels;
    const std::size_t need = packed_split_bytes(p, packed, xbytes, splits, pass, tail ? plan.tail_pixels : 0,
                                                        tail ? plan.tail_splits : 0);
    if (need == 0) return status::size_overflow;
    if (scratch ? workspace_bytes < packed || rest_bytes < need - off : workspace_bytes < need)
      return status::workspace_too_small;
    const std::int64_t fixup_blocks = std::max<std::int64_t>(zs > 0 ? kernel::split_fixup_blocks(sum_pixels, p.K) : 0,
                                                             (m0 + 255) / 256);
    unsigned char* xpack = rest;
    auto* states = reinterpret_cast<state_t*>(xpack + xbytes);  // pass mode's states, then the partial sums
    float* partial = reinterpret_cast<float*>(xpack + xbytes + pass_states_bytes(p, pass));
    const buffer_arg args[] = {
        input(x, p.x_elements()), input(w, p.w_elements()), input(bias, p.K),
        input(static_cast<const unsigned char*>(workspace), static_cast<std::int64_t>(packed)),
        output(y, ny), output(indices, ny),
        output(xpack, static_cast<std::int64_t>(xbytes)),
        output(partial, std::int64_t(zs) * sum_pixels * p.K),
        output(states, pass ? std::int64_t(plan.k.npass) * ny : 0)};
    if (status s = check_buffers(args, fixup_blocks); s != status::success) return s;
    block::wgmma_conv_params k = plan.k;
    k.x = x, k.filter = workspace, k.xpack = xbytes ? xpack : nullptr;
    k.bias = splits == 0 ? bias : nullptr;  // partial mode: the bias is the fixup's
    if (splits > 0) k.partial = partial, k.splits = splits;
    if (pass) k.states = states;
    auto fixup_kern = kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, float>;
    auto combine_kern = kernel::conv2d_reduce_pass_combine_kernel<T, Op>;
    if (zs > 0)
      if (status s = check_device(fixup_kern); s != status::success) return s;
    if (pass)
      if (status s = check_device(combine_kern); s != status::success) return s;
    // the head: every tile, or all but a split-K tail's (fused: y and indices written by the kernel)
    const std::int64_t head_tiles = k.tiles - (tail ? plan.tail_tiles : 0);
    block::wgmma_conv_params head = k;
    head.tiles = head_tiles;
    const std::int64_t head_units = splits > 0 ? k.tiles * splits * k.npass : pass ? head_tiles * k.npass : head_tiles;
    const bool direct = splits == 0 && !pass;
    bool refused = false;
    status s = launch_wgmma<Policy>(head, plan.smem_bytes, head_units, op, epi, direct ? y : static_cast<float*>(nullptr),
                                            direct ? indices : static_cast<std::int64_t*>(nullptr), stream, refused,
                                            k.flat || k.direct_taps ? k.tiles : 0);  // (the packing pass: every tile's)
    if (refused) return fallback();  // the driver refused x's tensor map
    if (s != status::success) return s;
    if (tail) {  // the last tiles in partial mode, right after the head (a programmatic dependent launch)
      block::wgmma_conv_params last = k;
      last.tile0 = head_tiles, last.tiles = plan.tail_tiles, last.states = nullptr, last.bias = nullptr;
      last.partial = partial, last.splits = zs, last.partial_m0 = m0;
      s = launch_wgmma<Policy>(last, plan.smem_bytes, plan.tail_tiles * zs * k.npass, op, epi, static_cast<float*>(nullptr),
                                       static_cast<std::int64_t*>(nullptr), stream, refused, 0, true);
      if (s != status::success || refused) return refused ? status::cuda_error : s;  // (the same map was accepted)
    }
    if (direct && !tail) return s;
    if (pass)  // the head's pixels [0, m0)
      launch_kernel(true, combine_kern, dim3(static_cast<unsigned>((m0 + 255) / 256)), dim3(256), 0, stream,
                            states, k.npass, m0, ny, p.K, op, y, indices);
    if (zs > 0)  // the partial sums' pixels [m0, ny)
      launch_split_fixup(static_cast<const float*>(partial), zs, sum_pixels, static_cast<std::int32_t>(p.K), bias,
                                 op, epi, y ? y + m0 : y, indices ? indices + m0 : indices, stream);
    return launch_status();
  } else {
    return fallback();  // unreachable: only float is served
  }
}

}  // namespace detail

/// @brief conv2d_reduce_packed with a workspace: the packed filter, the packed x of flat tiles and, in
/// partial ("split-K") mode, the partial sums. For layers with too few output tiles to fill the GPU (small
/// batches, deep layers: ResNet-50 layer3 / layer4, VGG conv3, a U-Net bottleneck) and for layers whose
/// images fit tiles of image rows badly (7 x 7, 14 x 14, 1x1 stride 2). Same result semantics as
/// conv2d_reduce_packed (y[n,0,p,q] = Op over k of e(bias[k] + conv2d(x, w)[n,k,p,q], k), argmin / argmax
/// indices: lowest k on ties, first NaN).
///
/// The kernel's tiles are those choose_wgmma_params picks on the current device: of image rows (as
/// conv2d_reduce_packed), or flat (wgmma_conv_params::flat: kernel::pack_x_kernel first writes x,
/// converted and zero-padded, into the workspace, each tile's windows of planes over the whole batch stored
/// stage by stage in the stage's shared-memory layout; a stage is then one bulk copy of 256 consecutive
/// GEMM rows' windows, whatever the image size). Then:
/// - splits = 0: unsplit, as the time model picks on the current device (choose_wgmma_splits): the fused
///   kernel (y and indices written by it); pass mode (a unit per tile and channel pass, each writing its
///   reduction states to the workspace, kernel::conv2d_reduce_pass_combine_kernel combining them); or a
///   split-K tail after either (the last tail_tiles tiles in partial mode as below, over their output
///   pixels [m0, N*P*Q) only: the combine takes [0, m0), the fixup [m0, N*P*Q));
/// - splits >= 1: kernel::conv2d_reduce_wgmma_kernel in partial mode (wgmma_conv_params::partial and
///   splits; the same instantiation as the fused mode): tiles x splits x npass work units, one persistent
///   block per SM (at most one per unit); unit (tile, z, pass) runs the pass's stages [first, last) of
///   split_range(kt, splits, z) and stores its raw fp32 accumulators (no bias, no epilogue) to
///   partial[z][m][pass * 128 + c] for the tile's pixels inside the output and channels < K: every element
///   of each split's M x K plane written exactly once; then kernel::conv2d_reduce_split_fixup_kernel (as
///   conv2d_reduce_split): per pixel, up to 256 lanes over the K channels sum the `splits` partials in
///   split order (IEEE fp32 adds), add bias[k], apply the epilogue, fold with Op, combine the lanes in a
///   fixed order and write y (and indices).
/// Deterministic (no atomics, fixed orders). Each split's sums are shorter fp32 accumulations than the
/// fused kernel's (3xTF32: each stage still promoted with IEEE adds): the error stays within the math's
/// documented bound (README "Precision").
///
/// The workspace holds the packed filter, the packed x and the partial sums: pack_filter<Policy>(p, w,
/// workspace, workspace_bytes) writes the filter at its start (once per filter); every call then
/// overwrites the rest (packed_split_workspace_bytes): runs sharing a workspace must not overlap in time.
/// Where the wgmma kernel does not serve p (packed_filter_bytes<Policy, T>(p) == 0), this is
/// conv2d_reduce_split<Policy::fallback> on w with the whole workspace as its partial sums
/// (conv2d_reduce<Policy::fallback> for splits = 0); where it serves p with tiles of image rows or direct
/// tiles but x is not 16-byte aligned and the kernel would read it with TMA (row tiles at stride 1 and W %
/// 4 == 0; direct tiles always), the same with the partial sums after the packed filter.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @param p               problem (conv2d_problem; PyTorch's conv2d semantics)
/// @param x               device pointer, (N,C,H,W) elements of T in p.x_layout (the wgmma kernel: NCHW float)
/// @param w               device pointer, (K, C/groups, R, S) elements (KCRS), used by the fallback
/// @param workspace       device pointer, 16-byte aligned, of `workspace_bytes` bytes: the packed filter
///   (pack_filter's output for this problem and these weights: not checked, a filter packed for other
///   weights gives a wrong answer; read only), then the packed x and the partial sums (overwritten, scratch)
/// @param workspace_bytes size of `workspace`, at least packed_split_workspace_bytes<Policy, T>(p, splits)
/// @param bias            device pointer to K elements, or nullptr for no bias
/// @param y               device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
/// @param indices         device pointer, N*P*Q int64 (argmin / argmax); must be nullptr for other ops
/// @param splits          GEMM_K splits of each channel pass, in [0, max_packed_k_splits<Policy, T>(p)]
///   (0: unsplit: fused, pass mode, or a split-K tail after either, as the time model picks; 1: the channel
///   passes alone are spread over SMs)
/// @param op              reduction op (functional.cuh)
/// @param epi             epilogue `V e(V, int k)` or `V e(V)`, run on the device in fp32
/// @param stream          CUDA stream the kernels are launched on (asynchronous; nothing is synchronised)
/// @param options         the planner's options (plan_options: the tiles and the unsplit mode; the default
///   is the time model's choice): the same as packed_split_workspace_bytes was given
/// @param scratch         nullptr (default): the scratch (packed x, pass states, partial sums) follows the
///   packed filter in `workspace`, as above. Else a separate device buffer, 16-byte aligned, that holds what
///   would follow detail::partial_offset(packed filter bytes) in the workspace: `workspace` then needs to
///   hold the packed filter alone, read only (a caller that keeps one packed filter for many calls gives
///   each call, or each stream, its own scratch)
/// @param scratch_bytes   size of `scratch` (at least the workspace size minus that offset)
/// @return status::success after the launches (or for N = 0, with no launch); otherwise the first problem
///   found, with nothing launched: validate(p)'s codes; indices_not_supported; invalid_argument (splits
///   outside [0, kt]); null_pointer (x, w or workspace null, or both y and indices); misaligned_pointer (a
///   pointer not aligned to its element type, the workspace or the scratch not to 16 bytes); size_overflow (the workspace
///   size overflows int64, or the fixup's grid is above 2^31 - 1 blocks); workspace_too_small
///   (workspace_bytes below packed_split_workspace_bytes; with a separate scratch: the workspace below the
///   packed filter or the scratch below the rest); overlapping_buffers (y, indices, the packed x or
///   the partial sums sharing a byte with x, w, the bias, the packed filter or each other); no_device;
///   cuda_error (a CUDA error was pending, or the first launch failed: nothing launched, the error left
///   pending; if a later launch fails, the earlier kernels, which write only the workspace (and, before a
///   split-K tail's launch, the fused head's y and indices), may have
///   run). The fallbacks return conv2d_reduce_split's (conv2d_reduce's) codes. Inputs (x, w, bias, the
///   packed filter) are never modified.
template <class Policy, class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_packed_split(const conv2d_problem& p, const T* x, const T* w, void* workspace,
                                  std::size_t workspace_bytes, const nondeduced_t<T>* bias, T* y,
                                  std::int64_t* indices, int splits, Op op = {}, Epilogue epi = {},
                                  cudaStream_t stream = nullptr, const plan_options& options = {},
                                  void* scratch = nullptr, std::size_t scratch_bytes = 0) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (status s = detail::pending_status(); p.y_elements() > 0 && s != status::success) return s;  // caller's error
  detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, Op>(p, detail::wgmma_tiles::chosen, options);
  // the workspace's layout (packed x, pass mode) is argmin's plan's, which packed_split_workspace_bytes
  // sized; the same plan for every Op whose shared memory tail is argmin's (every standard op), else
  // planned again: an Op whose own choice differs (a larger reduction state) takes the fallback
  if constexpr (detail::wgmma_tail_bytes<Policy, Op>() != detail::wgmma_tail_bytes<Policy, op::argmin>()) {
    const detail::wgmma_plan_t ref = detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::chosen, options);
    if (plan.served && (!ref.served || ref.k.flat != plan.k.flat || ref.k.direct != plan.k.direct)) plan.served = false;
    plan.pass_mode = ref.pass_mode;
    plan.tail_tiles = ref.tail_tiles, plan.tail_splits = ref.tail_splits, plan.tail_pixels = ref.tail_pixels;
  }
  // the packed filter at the workspace's start (pack_filter's layout, the same for either tiles): a custom
  // Op whose larger state does not fit (plan not served) still finds it there and puts its partial sums
  // after it
  const std::size_t packed = plan.served ? detail::packed_bytes<Policy>(plan)
                                         : detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::either));
  return detail::packed_split_run<Policy>(plan, packed, p, x, w, workspace, workspace_bytes, bias, y, indices, splits, op,
                                          epi, stream, scratch, scratch_bytes);
}

}  // namespace convred::device
