/// @file device/wgmma_launch.cuh
/// @brief Internals of the packed-filter entry points (device/conv2d_reduce_packed.cuh): whether the
/// current device runs the wgmma kernel, its plan for a problem there (tiles, mode, shared memory), x's
/// tensor map, the kernel's launch, and the layout of the entry points' workspace.
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
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "plan_config.cuh"
#include "plan_options.cuh"
#include "wgmma_model.cuh"

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

// (wgmma_plan_t: device/plan_config.cuh)

/// Shared memory after the stages: the reduction state of Op or of argmin (the largest standard state),
/// whichever is larger, so that whether a problem is served does not depend on the standard op.
template <class Policy, class Op>
constexpr std::size_t wgmma_tail_bytes() {
  const std::size_t a = sizeof(kernel::wgmma_tail_storage<Policy, Op>);
  const std::size_t b = sizeof(kernel::wgmma_tail_storage<Policy, op::argmin>);
  return a > b ? a : b;
}

/// Which tiles detail::wgmma_plan considers: `rows` only tiles of image rows (conv2d_reduce_packed, which
/// has no workspace for a packed x); `either` rows where they serve, else flat tiles, else direct tiles (the packed filter's
/// size and layout, which do not depend on the tiles: pack_filter, packed_filter_bytes); `chosen` the
/// tiles and the unsplit mode the time model picks on the current device (choose_wgmma_params,
/// choose_wgmma_splits: conv2d_reduce_packed_split).
enum class wgmma_tiles { rows, either, chosen };

/// The wgmma kernel's plan for p: not served for T other than float, an invalid problem, a problem the
/// mainloop does not implement in the tiles `tiles` allows (block::conv_mainloop_wgmma::make_params), or a
/// device without sm_90a code. `options` (plan_options) apply to `chosen` plans.
template <class Policy, class T, class Op>
wgmma_plan_t wgmma_plan(const conv2d_problem& p, wgmma_tiles tiles = wgmma_tiles::rows,
                        const plan_options& options = {}) {
  wgmma_plan_t plan;
  if constexpr (!std::is_same_v<T, float>) {
    return plan;
  } else {
    if (validate(p, sizeof(T)) != status::success || !wgmma_available()) return plan;
    using mainloop = block::conv_mainloop_wgmma<Policy>;
    const std::size_t tail = wgmma_tail_bytes<Policy, Op>();
    auto rows = [&] { return mainloop::make_params(p, tail, max_smem_per_block, plan.k, plan.smem_bytes); };
    auto flat = [&] { return mainloop::make_params(p, tail, max_smem_per_block, plan.k, plan.smem_bytes, true); };
    if (tiles == wgmma_tiles::rows) {
      plan.served = rows();
      return plan;
    }
    if (tiles == wgmma_tiles::either) {  // (dilated problems: flat tiles, else direct tiles; 3xTF32's whose other stages do not fit: direct tiles)
      plan.served = rows() || flat() ||
                    ((mainloop::dilated(p) || Policy::parts == 2) &&
                     mainloop::make_direct_params(p, tail, max_smem_per_block, plan.k, plan.smem_bytes, Policy::parts == 2));
      return plan;
    }
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();  // ours
      sms = 0;
    }
    // (choose_wgmma_params applies options.tiles)
    plan.served = choose_wgmma_params<Policy>(p, tail, max_smem_per_block, sms, true, plan.k, plan.smem_bytes, options);
    if (plan.served) {
      const wgmma_split_estimate e = choose_wgmma_splits<Policy>(p, plan.k, sms, plan_math_speed<typename Policy::math>(),
                                                                 default_split_workspace_limit, options);
      const bool applies = plan.k.npass > 1 && Policy::parts == 1;
      plan.pass_mode = applies && e.splits == 0 && e.pass_mode;  // (options.pass applied there)
      if (e.splits == 0 && e.tail_tiles > 0) {
        plan.tail_tiles = e.tail_tiles, plan.tail_splits = e.tail_splits;
        plan.tail_pixels = p.gemm_m() - mainloop::first_pixel(plan.k, plan.k.tiles - e.tail_tiles);
      }
    }
    return plan;
  }
}

/// The TMA descriptor of x (NCHW fp32, dims W, H, C, N innermost first) with box (rp, bh, raw_c, 1), or for
/// direct tiles (wgmma_conv_params::direct) dims W, C, P, N (row r of the P at input row stride * r) with box
/// (rp, 8 * group, tile_rows, 1) (direct_taps: dims W, C', H, N of x or of its copy, plan::wgmma_params::x_copied,
/// rows x_pitch entries apart, C' = x_copy_channels: C, or ceil(C / 2) 16-bit channel pairs), and zero fill
/// outside the tensor, encoded with the driver's cuTensorMapEncodeTiled (found through the runtime, so
/// nothing links libcuda); the elements are 4 bytes (fp32 channels or channel pairs). False if the driver
/// lacks it or refuses the map.
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
  // the row pitch in 4-byte entries (direct_taps: x_pitch, of which the first W are x) and the channel
  // entries (direct tiles: x_copy_channels, C or 16-bit channel pairs)
  const cuuint64_t W = static_cast<cuuint64_t>(k.direct_taps ? k.x_pitch : k.W), H = static_cast<cuuint64_t>(k.H),
                  C = static_cast<cuuint64_t>(k.direct ? plan::wgmma_params<Policy>::x_copy_channels(k) : k.C);
  // row tiles: dims (W, H, C, N), box (rp, bh, raw_c, 1); direct tiles: dims (W, C, P rows `stride`
  // input rows apart, N) (direct_taps: (W, C, H, N) with a row pitch of x_pitch: TMA fills the columns past
  // W with zeros), box (rp, box_c * group, tile_rows, 1), landing as [row][entry][column]
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(k.W), k.direct ? C : H,
                              static_cast<cuuint64_t>(k.direct_taps ? k.H : k.direct ? k.P : k.C), static_cast<cuuint64_t>(k.N)};
  const cuuint64_t strides[3] = {k.direct ? W * H * 4 : W * 4, k.direct ? W * 4 * static_cast<cuuint64_t>(k.stride) : W * H * 4,
                                 W * H * C * 4};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(k.rp),
                             static_cast<cuuint32_t>(k.direct ? plan::wgmma_params<Policy>::box_c * k.group : k.bh),
                             static_cast<cuuint32_t>(k.direct ? k.bh : Policy::raw_c), 1};
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

/// Launches the wgmma kernel with parameters k (x, filter, bias, xpack and the modes set) on `units`
/// work units: first, when `pack_tiles` > 0, for flat tiles kernel::pack_x_kernel for that many tiles into
/// k.xpack, for direct_taps tiles that read a copy of x (plan::wgmma_params::x_copied) that copy into
/// k.xpack: tf32 with W % 4 != 0 rows of x_pitch floats (kernel::pitch_x_kernel), bf16 / fp16 channel pairs
/// (kernel::pack_x_pairs_kernel); then the persistent kernel, one block per SM (at most one per unit), in the variant the
/// parameters need (the gathering one also for flat tiles at stride 2, whose taps read stride phases; the
/// direct one for direct tiles; under 3xTF32 the tap-loop one for filters other than 3x3 and 1x1 and for
/// stride 2 but flat 1x1 tiles: plan::wgmma_params::tap_loop), as
/// a programmatic dependent launch of the kernel before it when `dependent` (after the packing pass or
/// x's copy, or a split-K tail after the head's launch). `refused` is set (and success returned, nothing launched) when
/// the driver refuses x's tensor map: the caller runs its fallback. `Direct` = false (conv2d_reduce_packed,
/// whose parameters are row tiles) leaves the direct tiles' kernel out of the build.
template <class Policy, bool Direct = true, class Op, class Epilogue>
status launch_wgmma(const block::wgmma_conv_params& k, std::size_t smem, std::int64_t units, Op op, Epilogue epi,
                    float* y, std::int64_t* indices, cudaStream_t stream, bool& refused, std::int64_t pack_tiles = 0,
                    bool dependent = false) {
  refused = false;
  CUtensorMap x_map{};  // used by the TMA producer only
  // direct_taps with W % 4 != 0 or 16-bit math: the box reads k.xpack, x copied there with rows of x_pitch
  // entries (TMA reads the first W of each), by the launch that packs (pack_tiles > 0)
  const bool copied = plan::wgmma_params<Policy>::x_copied(k);
  if (!k.gather && !k.flat && !make_x_tensor_map<Policy>(x_map, copied ? static_cast<const float*>(k.xpack) : k.x, k)) {
    refused = true;
    return status::success;
  }
  const bool taps = plan::wgmma_params<Policy>::tap_loop(k);  // 3xTF32: a promoted group per tap
  const bool phased = k.gather || (k.flat && k.stride != 1) || taps;
  auto kern = phased ? kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, true>
                     : kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false>;
  if constexpr (Policy::parts == 2) {
    if (taps) kern = kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, true, false, true>;
  }
  // (direct parameters: the tf32 1x1 ones also ping-pong; direct_taps, in every math, never)
  constexpr bool direct_kernel = Direct && (!Policy::pingpong || (Policy::is_tf32 && Policy::parts == 1));
  if constexpr (direct_kernel) {
    if (k.direct) kern = kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false, true>;
  }
  if (status s = check_device(kern, smem); s != status::success) return s;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return status::cuda_error;
  const bool copying = copied && pack_tiles > 0;  // (a kernel: the main one follows with PDL)
  if (copying) {
    if constexpr (Policy::is_tf32) {  // rows of W floats to rows of x_pitch, 16 bytes per thread and step
      auto copy = kernel::pitch_x_kernel<float>;
      if (status s = check_device(copy); s != status::success) return s;
      copy<<<static_cast<unsigned>(sms) * 8, 256, 0, stream>>>(k.x, static_cast<float4*>(const_cast<void*>(k.xpack)), k);
      if (status s = launch_status(); s != status::success) return s;
    } else {  // 16-bit channel pairs, a block per (n, pair) plane at a time
      auto copy = kernel::pack_x_pairs_kernel<typename Policy::math>;
      if (status s = check_device(copy); s != status::success) return s;
      const std::int64_t planes = k.N * ((k.C + 1) / 2), cap = std::int64_t(sms) * 16;
      copy<<<static_cast<unsigned>(planes < cap ? planes : cap), dim3(32, 8), 0, stream>>>(
          k.x, static_cast<std::uint32_t*>(const_cast<void*>(k.xpack)), k);
      if (status s = launch_status(); s != status::success) return s;
    }
  }
  if (pack_tiles > 0 && k.flat) {
    auto pack = kernel::pack_x_kernel<Policy>;
    if (status s = check_device(pack); s != status::success) return s;
    // a block row per (tile, stage) block of the packed x, 256 of its first part's 16-byte entries per block
    const dim3 grid(static_cast<unsigned>(pack_tiles * k.x_stages()), static_cast<unsigned>((k.part_bytes / 16 + 255) / 256));
    pack<<<grid, 256, 0, stream>>>(k.x, const_cast<void*>(k.xpack), k);
    if (status s = launch_status(); s != status::success) return s;
  }
  const std::int64_t grid = units < sms ? units : sms;
  const int threads = phased                     ? kernel::wgmma_block<Policy, true>::threads
                      : direct_kernel && k.direct ? kernel::wgmma_block<Policy, false, true>::threads
                                                  : kernel::wgmma_block<Policy, false>::threads;
  launch_kernel(dependent || (pack_tiles > 0 && k.flat) || copying, kern, dim3(static_cast<unsigned>(grid)), dim3(threads), smem, stream, x_map,
                k, op, epi, y, indices);
  return launch_status();
}

/// Offset of the packed x (flat tiles), then of the partial sums, in conv2d_reduce_packed_split's
/// workspace: the packed filter's `packed` bytes rounded up to a multiple of 16 (0 when nothing is packed).
inline std::size_t partial_offset(std::size_t packed) { return (packed + 15) / 16 * 16; }

/// Bytes of pass mode's reduction states (npass x N*P*Q x pass_state_bytes, npass = groups x ceil(K/groups /
/// 128), rounded up to a multiple of 16: the partial sums of a split-K tail follow them); 0 without pass mode,
/// -1 where the size overflows int64.
inline std::int64_t pass_states_bytes(const conv2d_problem& p, bool pass_states) {
  if (!pass_states) return 0;
  const std::int64_t npass = p.groups * ((p.K_per_group() + 127) / 128);
  std::int64_t bytes = 0;
  if (!convred::detail::product({npass, p.gemm_m(), static_cast<std::int64_t>(pass_state_bytes)}, bytes) ||
      bytes > std::numeric_limits<std::int64_t>::max() - 15)
    return -1;
  return (bytes + 15) / 16 * 16;
}

/// The size of conv2d_reduce_packed_split's workspace for p on a served plan: partial_offset(packed) +
/// `xpack` bytes of packed x (flat tiles; a multiple of 16) + splits * N*P*Q * K * 4 bytes of partial sums
/// (splits > 0); with splits = 0: pass mode's states (`pass_states`: npass x N*P*Q, pass_states_bytes;
/// a split-K tail's pixels keep theirs unused), then a split-K tail's partial sums (tail_splits x
/// tail_pixels x K x 4 bytes). 0 when it overflows int64. (N*P*Q*K*4 was validated to fit int64: y's and the conv's sizes;
/// splits and tail_splits are at most kt <= C R.)
inline std::size_t packed_split_bytes(const conv2d_problem& p, std::size_t packed, std::size_t xpack, int splits,
                                      bool pass_states = false, std::int64_t tail_pixels = 0, int tail_splits = 0) {
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  if (packed > static_cast<std::size_t>(most / 4) || xpack > static_cast<std::size_t>(most / 4)) return 0;
  std::int64_t sums = 0;
  const std::int64_t head = static_cast<std::int64_t>(partial_offset(packed) + xpack);  // < 2^62
  const std::int64_t pixels = splits > 0 ? p.gemm_m() : tail_pixels, z = splits > 0 ? splits : tail_splits;
  const std::int64_t states = splits > 0 ? 0 : pass_states_bytes(p, pass_states);
  const bool ok = states >= 0 && convred::detail::product({pixels, p.K, 4, z}, sums);
  if (!ok || states > most - head || sums > most - head - states) return 0;
  return static_cast<std::size_t>(head + states + sums);
}

}  // namespace detail

}  // namespace convred::device
