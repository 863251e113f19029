/// @file device/conv2d_reduce_packed.cuh
/// @brief Host entry points of the Hopper packed-filter path: filter packing (a separate, once-per-filter
/// step) and the fused conv2d -> epilogue -> channel reduction on wgmma.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../functional.cuh"
#include "../kernel/conv2d_reduce_wgmma.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "conv2d_reduce.cuh"
#include "conv2d_reduce_split.cuh"

namespace convred::device {

namespace detail {

/// True if the current device runs sm_90a code (compute capability 9.0 and an sm_90a image of
/// kernel::wgmma_probe_kernel, a template shared by every translation unit of the program: build all of
/// them that use this path with the same architectures). A CUDA error pending from the caller's own
/// work is left alone; one caused here (no device) is cleared.
inline bool wgmma_available() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // ours: no usable device
    return false;
  }
  // the answer per device is fixed for the process: asked once (0 unknown, 1 yes, 2 no)
  static std::atomic<signed char> known[64];
  if (dev >= 0 && dev < 64 && known[dev].load(std::memory_order_relaxed) != 0) return known[dev] == 1;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();  // ours
    return false;
  }
  bool yes = false;
  if (major == 9 && minor == 0) {
    cudaFuncAttributes with{}, without{};
    if (cudaFuncGetAttributes(&with, kernel::wgmma_probe_kernel<true>) != cudaSuccess ||
        cudaFuncGetAttributes(&without, kernel::wgmma_probe_kernel<false>) != cudaSuccess) {
      cudaGetLastError();  // ours: no image for this device
      return false;
    }
    yes = with.sharedSizeBytes >= without.sharedSizeBytes + 2048;
  }
  if (dev >= 0 && dev < 64) known[dev].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

/// Whether the wgmma kernel serves a problem, and its launch parameters (filter, x, bias left null).
struct wgmma_plan_t {
  bool served = false;            ///< false: conv2d_reduce_packed runs Policy::fallback on w
  block::wgmma_conv_params k;    ///< launch parameters (when served)
  std::size_t smem_bytes = 0;     ///< dynamic shared memory: the stages, then the reduction and mbarriers
};

/// Shared memory after the stages: the reduction state of Op or of argmin (the largest standard state),
/// whichever is larger, so that whether a problem is served does not depend on the standard op.
template <class Policy, class Op>
constexpr std::size_t wgmma_tail_bytes() {
  const std::size_t a = sizeof(kernel::wgmma_tail_storage<Policy, Op>);
  const std::size_t b = sizeof(kernel::wgmma_tail_storage<Policy, op::argmin>);
  return a > b ? a : b;
}

/// The wgmma kernel's plan for p: not served for T other than float, an invalid problem, a problem the
/// mainloop does not implement (block::conv_mainloop_wgmma::make_params), or a device without sm_90a code.
template <class Policy, class T, class Op>
wgmma_plan_t wgmma_plan(const conv2d_problem& p) {
  wgmma_plan_t plan;
  if constexpr (!std::is_same_v<T, float>) {
    return plan;
  } else {
    if (validate(p, sizeof(T)) != status::success ||
        !block::conv_mainloop_wgmma<Policy>::make_params(p, wgmma_tail_bytes<Policy, Op>(), max_smem_per_block, plan.k,
                                                         plan.smem_bytes) ||
        !wgmma_available())
      return plan;
    plan.served = true;
    return plan;
  }
}

/// The TMA descriptor of x (NCHW fp32, dims W, H, C, N innermost first) with box (rp, bh, raw_c, 1) and
/// zero fill outside the tensor, encoded with the driver's cuTensorMapEncodeTiled (found through the
/// runtime, so nothing links libcuda). False if the driver lacks it or refuses the map.
template <class Policy>
bool make_x_tensor_map(CUtensorMap& map, const float* x, const block::wgmma_conv_params& k) {
  using encode_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const encode_fn encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
      if (e != cudaSuccess) cudaGetLastError();  // ours
      fn = nullptr;
    }
    return reinterpret_cast<encode_fn>(fn);
  }();
  if (!encode) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(k.W), static_cast<cuuint64_t>(k.H), static_cast<cuuint64_t>(k.C),
                              static_cast<cuuint64_t>(k.N)};
  const cuuint64_t strides[3] = {dims[0] * 4, dims[0] * dims[1] * 4, dims[0] * dims[1] * dims[2] * 4};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(k.rp), static_cast<cuuint32_t>(k.bh),
                             static_cast<cuuint32_t>(Policy::raw_c), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  return encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<float*>(x), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// Packed filter bytes of a plan (zero when the wgmma kernel does not serve the problem).
template <class Policy>
std::size_t packed_bytes(const wgmma_plan_t& plan) {
  return plan.served ? block::conv_mainloop_wgmma<Policy>::packed_bytes(plan.k) : 0;
}

/// Offset of the partial sums in conv2d_reduce_packed_split's workspace: the packed filter's `packed`
/// bytes rounded up to a multiple of 16 (0 when nothing is packed).
inline std::size_t partial_offset(std::size_t packed) { return (packed + 15) / 16 * 16; }

/// The size of conv2d_reduce_packed_split's workspace for p on a served plan: partial_offset(packed) +
/// splits * N*P*Q * K * 4 bytes; 0 when it overflows int64.
inline std::size_t packed_split_bytes(const conv2d_problem& p, std::size_t packed, int splits) {
  std::int64_t plane = 0, all = 0;  // N*P*Q*K*4 was validated to fit int64 (y's and the conv's sizes)
  if (!convred::detail::mul_ok(p.gemm_m() * p.K, 4, plane) || !convred::detail::mul_ok(plane, splits, all) ||
      all > std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(partial_offset(packed)))
    return 0;
  return partial_offset(packed) + static_cast<std::size_t>(all);
}

}  // namespace detail

/// @brief Bytes of the packed filter that conv2d_reduce_packed needs for problem p on the current device.
///
/// Zero when the wgmma kernel cannot serve p (then conv2d_reduce_packed runs `Policy::fallback`, the
/// mma.sync tensor-core kernel with the same math, on the KCRS weights w, and needs no packed filter).
/// The wgmma kernel serves: T = float, NCHW x, groups 1, stride 1 or 2 (the same in both dimensions),
/// dilation 1, N < 2^31, any K (K > 128 runs ceil(K/128) channel passes per tile), and R, S, padding and
/// output width whose operand stages fit in shared memory (every 3x3, 3x1, 1x3 and 1x1 filter with the
/// default policies; 3xTF32: 3x3 and 1x1 at stride 1 only), on a compute capability 9.0 device running
/// an sm_90a image. The answer does not depend on N or on the reduction op. Size: ceil(K/128) *
/// ceil(C/block_c) * parts * R*S * 128 * block_c * (4 bytes for tf32/tf32x3, 2 for bf16/fp16); the seed
/// problem (C = 64, K = 128, 3x3): 294,912 bytes for tf32, 589,824 for tf32x3, 147,456 for bf16/fp16.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @tparam T element type of x and w (only float is served by the wgmma kernel)
template <class Policy, class T>
std::size_t packed_filter_bytes(const conv2d_problem& p) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  return detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p));
}

/// @brief Packs the KCRS weights w (K, C, R, S) into `packed` for conv2d_reduce_packed: a separate,
/// once-per-filter step (one small kernel on `stream`, asynchronous), timed apart from the convolution.
///
/// The packed image is the wgmma kernel's shared-memory layout (kernel::pack_filter_kernel): per stage of
/// block_c input channels, per filter tap, a 128 x block_c slice in K-major core matrices, converted once to
/// the math's operand type (tf32 round-to-nearest-even, 3xTF32 big + small, bf16, fp16). w is not modified.
/// @param p      the problem the filter will be used with (see packed_filter_bytes for what it depends on)
/// @param w      device pointer, K*C*R*S elements, KCRS contiguous
/// @param packed device pointer to `bytes` bytes, 16-byte aligned (cudaMalloc gives 256)
/// @param bytes  size of `packed`, at least packed_filter_bytes<Policy, T>(p)
/// @param stream CUDA stream the packing kernel is launched on (asynchronous)
/// @return status::success (also when packed_filter_bytes is 0: nothing to do, packed may be null);
///   validate(p)'s codes; null_pointer (w or packed null); misaligned_pointer (packed not 16-byte
///   aligned, w not aligned to T); workspace_too_small (bytes too small); overlapping_buffers (packed overlaps
///   w); cuda_error (a CUDA error was pending on entry, or the launch failed: nothing launched).
template <class Policy, class T>
status pack_filter(const conv2d_problem& p, const T* w, void* packed, std::size_t bytes, cudaStream_t stream = nullptr) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (status s = detail::pending_status(); s != status::success) return s;  // the caller's error, left pending
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p);
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
    const std::int64_t total = static_cast<std::int64_t>(need / Policy::filter_elem_bytes);
    kern<<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(w, packed, k.K, k.C, k.R, k.S, total);
    return detail::launch_status();
  } else {
    return status::success;
  }
}

/// @brief Fused conv2d -> epilogue -> reduction across the K output channels on Hopper tensor cores
/// (wgmma), with a filter packed by pack_filter. Same semantics, arguments and errors as conv2d_reduce
/// (y[n,0,p,q] = Op over k of e(bias[k] + conv2d(x, w)[n,k,p,q], k); PyTorch's conv2d), plus `packed`.
///
/// When packed_filter_bytes<Policy, T>(p) is 0, or x is not 16-byte aligned where the kernel reads it with
/// TMA (stride 1 and W a multiple of 4; otherwise its producer gathers x with plain loads), this is
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
    CUtensorMap x_map{};  // unused by the gathering producer
    if (!k.gather && !detail::make_x_tensor_map<Policy>(x_map, x, k)) return fallback();  // the driver refused it
    auto kern = k.gather ? kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, true>
                         : kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false>;
    const std::size_t smem = plan.smem_bytes;
    if (status s = detail::check_device(kern, smem); s != status::success) return s;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return status::cuda_error;
    const std::int64_t grid = k.tiles < sms ? k.tiles : sms;
    const int threads = k.gather ? kernel::wgmma_block<Policy, true>::threads : kernel::wgmma_block<Policy, false>::threads;
    kern<<<static_cast<unsigned>(grid), threads, smem, stream>>>(x_map, k, op, epi, y, indices);
    return detail::launch_status();
  } else {
    return fallback();  // unreachable: only float is served
  }
}

/// @brief The GEMM_K split counts conv2d_reduce_packed_split accepts for problem p on the current device:
/// 1 to the stages per channel pass, kt = ceil(C / block_c), when the wgmma kernel serves p (every split
/// at least one stage of block_c input channels); 1 to max_k_splits when it does not (the mma.sync split
/// path runs then, conv2d_reduce_split). 0 for an invalid problem.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @tparam T element type of x and w (only float is served by the wgmma kernel)
template <class Policy, class T>
int max_packed_k_splits(const conv2d_problem& p) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type");
  if (validate(p, sizeof(T)) != status::success) return 0;
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p);
  return plan.served ? plan.k.kt : max_k_splits;
}

/// @brief Bytes of the workspace conv2d_reduce_packed_split needs for problem p, element type T and
/// `splits` GEMM_K splits on the current device.
///
/// When the wgmma kernel serves p (packed_filter_bytes<Policy, T>(p) > 0): the packed filter
/// (packed_filter_bytes), then, from the next multiple of 16 bytes, splits x N*P*Q x K fp32 partial sums
/// laid out [split][pixel][channel] (the layout of conv2d_reduce_split's workspace). Otherwise the
/// partial sums of the mma.sync split path that then runs (conv2d_reduce_split_workspace_bytes<T>(p,
/// splits)). Example: ResNet-50 layer3 3x3, x (32, 256, 14, 14), K = 256, tf32, 2 splits: 2,359,296 bytes of
/// packed filter + 2 x 6,272 x 256 x 4 = 12,845,056 bytes of partial sums.
/// @return the size; 0 for an invalid problem, N = 0, splits outside [1, max_packed_k_splits<Policy,
///   T>(p)], or a size that overflows int64.
template <class Policy, class T>
std::size_t packed_split_workspace_bytes(const conv2d_problem& p, int splits) {
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type");
  if (validate(p, sizeof(T)) != status::success || p.y_elements() == 0) return 0;
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, op::argmin>(p);
  if (!plan.served) return conv2d_reduce_split_workspace_bytes<T>(p, splits);
  if (splits < 1 || splits > plan.k.kt) return 0;
  return detail::packed_split_bytes(p, detail::packed_bytes<Policy>(plan), splits);
}

/// @brief conv2d_reduce_packed in partial ("split-K") mode, for layers with too few output tiles to fill
/// the GPU (small batches, deep layers: ResNet-50 layer3 / layer4, VGG conv3, a U-Net bottleneck): the
/// same wgmma kernel, with its work spread over (tile, GEMM_K split, channel pass) units, then the split
/// path's fixup kernel. Same result semantics as conv2d_reduce_packed (y[n,0,p,q] = Op over k of
/// e(bias[k] + conv2d(x, w)[n,k,p,q], k), argmin / argmax indices: lowest k on ties, first NaN).
///
/// The fused kernel runs each tile (tile_h m64 rows of 64 pixels x 128 channels, npass channel passes
/// for K > 128, kt stages of block_c input channels per pass) on one SM, so with fewer tiles than SMs most
/// SMs idle. Here:
/// 1. kernel::conv2d_reduce_wgmma_kernel in partial mode (wgmma_conv_params::partial and splits; the same
///    instantiation as the fused mode): tiles x splits x npass work units, one persistent block per SM (at
///    most one per unit); unit (tile, z, pass) runs the pass's stages [first, last) of split_range(kt,
///    splits, z) and stores its raw fp32 accumulators (no bias, no epilogue) to partial[z][m][pass * 128
///    + c] for the tile's pixels inside the output and channels < K: every element of each split's M x K
///    plane written exactly once;
/// 2. kernel::conv2d_reduce_split_fixup_kernel (as conv2d_reduce_split): per pixel, up to 256 lanes over
///    the K channels sum the `splits` partials in split order (IEEE fp32 adds), add bias[k], apply the
///    epilogue, fold with Op, combine the lanes in a fixed order and write y (and indices).
/// Deterministic (no atomics, fixed orders). Each split's sums are shorter fp32 accumulations than the
/// fused kernel's (3xTF32: each stage still promoted with IEEE adds): the error stays within the math's
/// documented bound (README "Precision").
///
/// The workspace holds the packed filter and the partial sums: pack_filter<Policy>(p, w, workspace,
/// workspace_bytes) writes the filter at its start (once per filter); every call then overwrites the
/// partial sums after it (packed_split_workspace_bytes): runs sharing a workspace must not overlap in
/// time. Where the wgmma kernel does not serve p (packed_filter_bytes<Policy, T>(p) == 0), this is
/// conv2d_reduce_split<Policy::fallback> on w with the whole workspace as its partial sums; where it serves
/// p but x is not 16-byte aligned and the kernel would read it with TMA (stride 1 and W % 4 == 0), the
/// same with the partial sums after the packed filter.
/// @tparam Policy a wgmma_policy (or default_wgmma_policy<Math>::type)
/// @param p               problem (conv2d_problem; PyTorch's conv2d semantics)
/// @param x               device pointer, (N,C,H,W) elements of T in p.x_layout (the wgmma kernel: NCHW float)
/// @param w               device pointer, (K, C/groups, R, S) elements (KCRS), used by the fallback
/// @param workspace       device pointer, 16-byte aligned, of `workspace_bytes` bytes: the packed filter
///   (pack_filter's output for this problem and these weights: not checked, a filter packed for other
///   weights gives a wrong answer; read only) and the partial sums (overwritten, scratch)
/// @param workspace_bytes size of `workspace`, at least packed_split_workspace_bytes<Policy, T>(p, splits)
/// @param bias            device pointer to K elements, or nullptr for no bias
/// @param y               device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
/// @param indices         device pointer, N*P*Q int64 (argmin / argmax); must be nullptr for other ops
/// @param splits          GEMM_K splits of each channel pass, in [1, max_packed_k_splits<Policy, T>(p)]
///   (1: the channel passes alone are spread over SMs)
/// @param op              reduction op (functional.cuh)
/// @param epi             epilogue `V e(V, int k)` or `V e(V)`, run on the device in fp32 (by the fixup)
/// @param stream          CUDA stream both kernels are launched on (asynchronous; nothing is synchronised)
/// @return status::success after both launches (or for N = 0, with no launch); otherwise the first problem
///   found, with nothing launched: validate(p)'s codes; indices_not_supported; invalid_argument (splits
///   outside [1, kt]); null_pointer (x, w or workspace null, or both y and indices); misaligned_pointer (a
///   pointer not aligned to its element type, the workspace not to 16 bytes); size_overflow (the workspace
///   size overflows int64, or the fixup's grid is above 2^31 - 1 blocks); workspace_too_small
///   (workspace_bytes below packed_split_workspace_bytes); overlapping_buffers (y, indices or the partial
///   sums sharing a byte with x, w, the bias, the packed filter or each other); no_device; cuda_error (a
///   CUDA error was pending, or the first launch failed: nothing launched, the error left pending; if the
///   second launch fails, the first kernel, which writes only the partial sums, may have run). The
///   fallbacks return conv2d_reduce_split's codes. Inputs (x, w, bias, the packed filter) are never
///   modified.
template <class Policy, class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_packed_split(const conv2d_problem& p, const T* x, const T* w, void* workspace,
                                  std::size_t workspace_bytes, const nondeduced_t<T>* bias, T* y,
                                  std::int64_t* indices, int splits, Op op = {}, Epilogue epi = {},
                                  cudaStream_t stream = nullptr) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  static_assert(is_wgmma_policy_v<Policy>,
                "convred: Policy must be a wgmma_policy<Math, ...>, e.g. convred::default_wgmma_policy<convred::math::tf32>::type "
                "(device::conv2d_reduce_plan picks a kernel and policy for any GPU and problem)");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (status s = detail::pending_status(); p.y_elements() > 0 && s != status::success) return s;  // caller's error
  const detail::wgmma_plan_t plan = detail::wgmma_plan<Policy, T, Op>(p);
  // the workspace's layout is the one packed_split_workspace_bytes and pack_filter use (the plan of
  // op::argmin, the largest standard state): a custom Op whose larger state does not fit (plan not
  // served) still finds the packed filter at the start and puts its partial sums after it
  const std::size_t packed = detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p));
  const std::size_t off = detail::partial_offset(packed);
  // the mma.sync split path, its partial sums after the packed filter (none when not served)
  auto fallback = [&] {
    void* part = workspace ? static_cast<unsigned char*>(workspace) + off : nullptr;
    return conv2d_reduce_split<typename Policy::fallback>(p, x, w, bias, y, indices, part,
                                                          workspace_bytes > off ? workspace_bytes - off : 0, splits,
                                                          op, epi, stream);
  };
  if (!plan.served) return fallback();
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  if (splits < 1 || splits > plan.k.kt) return status::invalid_argument;
  // TMA reads x from a 16-byte aligned base: any other x (legal for float) takes the fallback too
  if (!plan.k.gather && reinterpret_cast<std::uintptr_t>(x) % 16 != 0) return fallback();
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t ny = p.y_elements();
    if (ny == 0) return status::success;
    if (!x || !w || !workspace || (!y && !indices)) return status::null_pointer;
    if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0) return status::misaligned_pointer;
    const std::size_t need = detail::packed_split_bytes(p, packed, splits);
    if (need == 0) return status::size_overflow;
    if (workspace_bytes < need) return status::workspace_too_small;
    int lanes = 1;  // threads per pixel in the fixup: the channels, up to a block (as conv2d_reduce_split)
    while (lanes < kernel::split_fixup_threads && lanes < p.K) lanes *= 2;
    const std::int64_t fixup_blocks = (ny * lanes + kernel::split_fixup_threads - 1) / kernel::split_fixup_threads;
    float* partial = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + off);
    const detail::buffer_arg args[] = {
        detail::input(x, p.x_elements()), detail::input(w, p.w_elements()), detail::input(bias, p.K),
        detail::input(static_cast<const unsigned char*>(workspace), static_cast<std::int64_t>(packed)),
        detail::output(y, ny), detail::output(indices, ny), detail::output(partial, std::int64_t(splits) * ny * p.K)};
    if (status s = detail::check_buffers(args, fixup_blocks); s != status::success) return s;
    block::wgmma_conv_params k = plan.k;
    k.x = x, k.filter = workspace, k.bias = nullptr;  // the bias: the fixup's
    k.partial = partial, k.splits = splits;
    CUtensorMap x_map{};  // unused by the gathering producer
    if (!k.gather && !detail::make_x_tensor_map<Policy>(x_map, x, k)) return fallback();  // the driver refused it
    auto kern = k.gather ? kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, true>
                         : kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false>;
    auto fixup_kern = kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, float>;
    const std::size_t smem = plan.smem_bytes;
    if (status s = detail::check_device(kern, smem); s != status::success) return s;
    if (status s = detail::check_device(fixup_kern); s != status::success) return s;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return status::cuda_error;
    const std::int64_t units = k.tiles * splits * k.npass;
    const std::int64_t grid = units < sms ? units : sms;
    const int threads = k.gather ? kernel::wgmma_block<Policy, true>::threads : kernel::wgmma_block<Policy, false>::threads;
    kern<<<static_cast<unsigned>(grid), threads, smem, stream>>>(x_map, k, op, epi, static_cast<float*>(nullptr),
                                                                         static_cast<std::int64_t*>(nullptr));
    if (status s = detail::launch_status(); s != status::success) return s;
    fixup_kern<<<static_cast<unsigned>(fixup_blocks), kernel::split_fixup_threads, 0, stream>>>(
        partial, splits, ny, static_cast<std::int32_t>(p.K), bias, op, epi, y, indices, lanes);
    return detail::launch_status();
  } else {
    return fallback();  // unreachable: only float is served
  }
}

}  // namespace convred::device
