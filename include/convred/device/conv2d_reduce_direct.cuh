/// @file device/conv2d_reduce_direct.cuh
/// @brief Host entry point of the tiled direct kernel for C/groups <= 16 (depthwise convolutions, any
/// channel multiplier; grouped convolutions with narrow groups, any K/groups): conv2d_reduce_direct, its launch and the facts about the device it needs; its
/// tiling heuristic (choose_direct_config) is device/direct_config.cuh.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "../block/conv_direct.cuh"
#include "../block/direct_patch_stager.cuh"
#include "../functional.cuh"
#include "../kernel/conv2d_reduce_direct.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"
#include "direct_config.cuh"

namespace convred::device {

namespace detail {

/// Device facts the direct kernel's launch needs, asked once per device and kernel (cached): SM count,
/// and whether clusters can be launched (compute capability 9.0 or newer and the kernel's code built for
/// sm_90 or newer: cudaFuncAttributes::ptxVersion >= 90). Returns false when a query fails (its error is
/// left pending for the caller's next check).
template <class Kernel>
bool direct_device_facts(Kernel* kern, int& sm_count, bool& clusters) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  // per device, asked once: SM count (0 unknown) and clusters (0 unknown, 1 yes, 2 no)
  static std::atomic<int> sms[64];
  static std::atomic<signed char> cluster_ok[64];
  if (dev >= 0 && dev < 64 && sms[dev].load(std::memory_order_relaxed) > 0 &&
      cluster_ok[dev].load(std::memory_order_relaxed) != 0) {
    sm_count = sms[dev].load(std::memory_order_relaxed);
    clusters = cluster_ok[dev].load(std::memory_order_relaxed) == 1;
    return true;
  }
  int major = 0;
  cudaFuncAttributes attr{};
  if (cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaFuncGetAttributes(&attr, kern) != cudaSuccess)
    return false;
  clusters = major >= 9 && attr.ptxVersion >= 90;
  if (dev >= 0 && dev < 64) {
    sms[dev].store(sm_count, std::memory_order_relaxed);
    cluster_ok[dev].store(clusters ? 1 : 2, std::memory_order_relaxed);
  }
  return true;
}

/// choose_direct_config's result, from the last `capacity` distinct choices of the process (shared by
/// every host thread, guarded by a mutex) keyed by everything it reads: a plan runs the same problem again
/// and again, and the search costs 0.1 to 2 ms on the host (a lookup: tens of nanoseconds). The search
/// runs outside the lock; its result depends on the key alone, so threads that race on a key store the
/// same value (the first one stored is kept).
inline direct_config cached_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, int sm_count,
                                          int max_splits) {
  struct entry {
    conv2d_problem p;
    direct_kernel_shape k;
    int sms, splits;
    direct_config c;
  };
  constexpr int capacity = 32;  // more than the depthwise layers of one network (MobileNetV2: 17)
  struct cache_t {
    std::mutex m;
    entry e[capacity];
    int used = 0, next = 0;  // entries filled; the next one replaced (oldest first)
  };
  static cache_t cache;
  auto same = [&](const entry& e) {
    return e.sms == sm_count && e.splits == max_splits && e.k.sh == k.sh && e.k.sw == k.sw &&
           e.k.unrolled == k.unrolled && e.k.filter == k.filter && e.k.stride == k.stride && e.k.elem_bytes == k.elem_bytes &&
           e.k.stages == k.stages && e.k.vector == k.vector && e.p.N == p.N && e.p.C == p.C && e.p.H == p.H && e.p.W == p.W && e.p.K == p.K &&
           e.p.R == p.R && e.p.S == p.S && e.p.pad_h == p.pad_h && e.p.pad_w == p.pad_w &&
           e.p.stride_h == p.stride_h && e.p.stride_w == p.stride_w && e.p.dil_h == p.dil_h &&
           e.p.dil_w == p.dil_w && e.p.groups == p.groups && e.p.x_layout == p.x_layout;
  };
  auto find = [&]() -> const entry* {  // (cache.m held)
    for (int i = 0; i < cache.used; ++i)
      if (same(cache.e[i])) return &cache.e[i];
    return nullptr;
  };
  {
    const std::lock_guard<std::mutex> lock(cache.m);
    if (const entry* e = find()) return e->c;
  }
  const direct_config c = choose_direct_config(p, k, sm_count, max_splits);
  const std::lock_guard<std::mutex> lock(cache.m);
  if (!find()) {
    cache.e[cache.next] = entry{p, k, sm_count, max_splits, c};
    cache.next = (cache.next + 1) % capacity;
    cache.used = cache.used < capacity ? cache.used + 1 : capacity;
  }
  return c;
}

/// Launches the direct kernel variant FR x FS (0: run time) at stride ST (1 or 2: the unrolled stride; 1
/// at run time) with tiling c (fitting: direct_config_fits) for a checked problem, staging in chunks when
/// k.vector and x is aligned to a chunk; when a cluster launch (c.splits > 1) is refused, the same tiling
/// with 8 splits (from 16), else with one. Grouped: the grouped variant (C/groups > 1), else the depthwise one.
template <int FR, int FS, bool Grouped, int ST, class T, class Op, class Epilogue>
status launch_direct(const conv2d_problem& p, const direct_kernel_shape& k, const T* x, const T* w, const T* bias, T* y,
                     std::int64_t* indices, Op op, Epilogue epi, cudaStream_t stream, const direct_config& c) {
  using strip = block::direct_strip<T, FR, FS, ST>;
  using V = typename strip::V;
  auto kern = kernel::conv2d_reduce_direct_kernel<T, Op, Epilogue, FR, FS, Grouped, ST>;
  const std::size_t chunk = static_cast<std::size_t>(block::direct_chunk_elements(sizeof(T))) * sizeof(T);
  const bool vector = k.vector && reinterpret_cast<std::uintptr_t>(x) % chunk == 0;
  const block::direct_tiling t =
      block::make_direct_tiling(p, sizeof(T), sizeof(typename Op::template accum_t<V>), strip::SH, strip::SW,
                                strip::unrolled, block::direct_patch_stager<T>::stages, c.tx, c.ty, c.groups, c.splits,
                                c.cb, c.staged, vector);
  if (t.blocks() > 0x7fffffff) return status::size_overflow;
  if (t.smem_bytes > direct_max_smem) return status::invalid_argument;  // not for a fitting c (element copies need no more)
  if (status s = check_device(kern, t.smem_bytes); s != status::success) return s;
  const block::conv_params<T> prm = block::make_conv_params(p, x, w, bias);
  if (t.splits == 1) {
    kern<<<static_cast<unsigned>(t.blocks()), static_cast<unsigned>(t.threads), t.smem_bytes, stream>>>(prm, t, op, epi,
                                                                                                     y, indices);
    return launch_status();
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(t.blocks()));
  cfg.blockDim = dim3(static_cast<unsigned>(t.threads));
  cfg.dynamicSmemBytes = t.smem_bytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(t.splits);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // 16-block clusters (direct_max_splits_sm90) are a non-portable size the kernel must opt in to
  const bool wide = t.splits > direct_max_splits;
  if ((wide && cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) ||
      cudaLaunchKernelEx(&cfg, kern, prm, t, op, epi, y, indices) != cudaSuccess) {
    // the cluster could not be placed (resources): that error is ours (check_device found none pending);
    // the same tiling with 8 splits (from 16), else without splits, instead
    cudaGetLastError();
    direct_config fewer = c;
    fewer.splits = wide ? direct_max_splits : 1;
    return launch_direct<FR, FS, Grouped, ST>(p, k, x, w, bias, y, indices, op, epi, stream, fewer);
  }
  return launch_status();
}

/// launch_direct with the filter variant of shape k (3x3, 5x5, 7x7 unrolled at stride k.stride, 1 or 2;
/// else run time).
template <bool Grouped, class T, class Op, class Epilogue>
status launch_variant(const conv2d_problem& p, const direct_kernel_shape& k, const T* x, const T* w, const T* bias, T* y,
                      std::int64_t* indices, Op op, Epilogue epi, cudaStream_t stream, const direct_config& c) {
  const bool s2 = k.stride == 2;
  switch (k.filter) {
    case 3:
      return s2 ? launch_direct<3, 3, Grouped, 2>(p, k, x, w, bias, y, indices, op, epi, stream, c)
                : launch_direct<3, 3, Grouped, 1>(p, k, x, w, bias, y, indices, op, epi, stream, c);
    case 5:
      return s2 ? launch_direct<5, 5, Grouped, 2>(p, k, x, w, bias, y, indices, op, epi, stream, c)
                : launch_direct<5, 5, Grouped, 1>(p, k, x, w, bias, y, indices, op, epi, stream, c);
    case 7:
      return s2 ? launch_direct<7, 7, Grouped, 2>(p, k, x, w, bias, y, indices, op, epi, stream, c)
                : launch_direct<7, 7, Grouped, 1>(p, k, x, w, bias, y, indices, op, epi, stream, c);
    default: return launch_direct<0, 0, Grouped, 1>(p, k, x, w, bias, y, indices, op, epi, stream, c);
  }
}

/// conv2d_reduce_direct with its tiling given (`forced`, for tests of every split, group count, stage
/// and the unstaged mode) or chosen (nullptr: cached_direct_config for the current device): the same
/// checks and errors, plus invalid_argument for a forced tiling that does not fit (direct_config_fits;
/// splits > 1 needs a device and code that launch clusters). `element_copies`: stage element by element
/// even where chunks could be used (tests of that path). A chosen tiling that does not fit the unrolled
/// variant (none does not, for filters up to 7x7) runs on the run-time variant, and if the chooser's
/// tiling for that does not fit either, unstaged (unstaged_direct_config).
template <class T, class Op, class Epilogue>
status conv2d_reduce_direct_with(const direct_config* forced, const conv2d_problem& p, const T* x, const T* w,
                                 const T* bias, T* y, std::int64_t* indices, Op op, Epilogue epi, cudaStream_t stream,
                                 bool element_copies = false) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (p.C_per_group() > block::direct_max_group_channels) return status::invalid_groups;
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  const std::int64_t ny = p.y_elements();
  if (ny == 0) return status::success;
  if (!x || !w || (!y && !indices)) return status::null_pointer;
  const buffer_arg args[] = {input(x, p.x_elements()), input(w, p.w_elements()), input(bias, p.K), output(y, ny),
                             output(indices, ny)};
  if (status s = check_buffers(args); s != status::success) return s;
  auto any = kernel::conv2d_reduce_direct_kernel<T, Op, Epilogue, 0, 0>;  // the facts are the same for every variant
  if (status s = check_device(any); s != status::success) return s;
  int sms = 0;
  bool clusters = false;
  if (!direct_device_facts(any, sms, clusters)) return status::cuda_error;
  const int max_splits = clusters ? direct_max_splits_sm90 : 1;
  direct_kernel_shape shape = direct_kernel_shape_of<T>(p);
  if (element_copies) shape.vector = false;
  direct_config c = forced ? *forced : cached_direct_config(p, shape, sms, max_splits);
  if (!direct_config_fits(p, shape, c, max_splits)) {
    if (forced) return status::invalid_argument;
    shape = direct_kernel_shape_of<T>(0, false);
    c = cached_direct_config(p, shape, sms, max_splits);
    if (!direct_config_fits(p, shape, c, max_splits))  // (the chooser's estimate fits whatever it picks)
      c = unstaged_direct_config(p, shape, sms > 0 ? sms : 1,
                                 static_cast<int>(std::min<std::int64_t>(std::min(max_splits, direct_max_splits), p.groups)));
  }
  if (p.C_per_group() > 1) return launch_variant<true>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
  return launch_variant<false>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
}

}  // namespace detail

/// @brief conv2d_reduce for problems whose output channels each read at most
/// block::direct_max_group_channels (16) input channels: C/groups == 1 (depthwise convolutions, any
/// channel multiplier K/groups; also C = 1) and 1 < C/groups <= 16 (grouped convolutions such as ResNeXt's
/// and RegNet's, any K/groups; also dense layers with C <= 16), by tiled direct convolution in exact FMA
/// (math::ieee: fp32, fp64 for double), no GEMM tiles (kernel::conv2d_reduce_direct_kernel).
///
/// Each block takes a tile of output pixels of one image and loops over its share of the input channels:
/// the padding is written into its shared-memory buffers once, then per pipeline stage it copies a few
/// channels' input patches (tile plus halo) with cp.async (16-byte chunks for NCHW x whose rows allow it,
/// else element by element) while the previous stages are computed; its threads form channel groups,
/// each computing every groups-th staged channel (C/groups > 1: a stage holds whole groups, and the channel
/// groups share its work items (group, output channel), each the sum over the group's C/groups channels
/// of a strip, folded once: block::direct_grouped_stage): each thread a strip of 2 x 4 adjacent outputs for every
/// output channel of the channel (each input row read once; 3x3, 5x5 and 7x7 filters with dilation 1 and
/// stride 1 or 2 unrolled, any other filter, stride and dilation at run time), bias + epilogue folded into the
/// pixels' reduction states in registers; the groups' states are combined in group order and y (and the
/// index) written once per pixel. The tiling comes from choose_direct_config for the current device
/// (cached); when the tiles are too few to fill the GPU (small batches), up to 8 blocks (16 on sm_90 for very
/// few tiles, and from batch direct_wide_cluster_batch on where the model puts 16 clearly ahead:
/// direct_max_splits_sm90) share a
/// tile as a thread-block cluster, each over a share of the channels, and their states are combined
/// through distributed shared memory in rank order (sm_90 code on a compute capability 9.0+ device;
/// elsewhere smaller tiles only). Deterministic: no atomics; for a given device the same tiling, hence
/// the same summation order, on every run (each output channel's conv sum runs over its group's input
/// channels, then taps r, s; sums over output channels are rounded in the tiling's order: channel group,
/// then rank). Splits share whole groups (ceil(groups / splits) each).
///
/// Same semantics, arguments and errors as conv2d_reduce (PyTorch's conv2d with groups, then the epilogue,
/// then the reduction across all K channels; x NCHW or NHWC; y (N,1,P,Q)), plus invalid_groups when
/// C/groups > 16. Padded taps multiply the zero padding by the weight (0 * inf = NaN, as PyTorch's padded
/// paths and the float64 reference; docs/semantics.md). conv2d_reduce_plan picks it for depthwise problems
/// whatever the math asked for (it is exact), and for grouped ones where family::direct says so.
/// @param p        problem with C/groups <= 16; x layout NCHW or NHWC
/// @param x        device pointer, (N,C,H,W) elements of T (float, double, __half, __nv_bfloat16)
/// @param w        device pointer, (K, C/groups, R, S) elements (PyTorch's KCRS), contiguous
/// @param bias     device pointer to K elements, or nullptr for no bias
/// @param y        device pointer, N*P*Q elements of T, (N,1,P,Q); may be nullptr only for index ops with indices
/// @param indices  device pointer, N*P*Q int64; must be nullptr for ops without an index
/// @param op       reduction op (functional.cuh; associative and commutative: the splits combine their shares)
/// @param epi      epilogue `V e(V, int k)` or `V e(V)`, run on the device in the compute type
/// @param stream   CUDA stream the kernel is launched on (asynchronous)
/// @return status::success after a launch (or for N = 0, with no launch); otherwise, with nothing
///   launched: validate's codes; invalid_groups (C/groups > 16); indices_not_supported; null_pointer;
///   misaligned_pointer; overlapping_buffers; no_device (no device, or no kernel image for it);
///   size_overflow (more than 2^31 - 1 blocks); cuda_error (a CUDA error already pending, a failed device
///   query or launch: left pending).
template <class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_direct(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, T* y,
                            std::int64_t* indices, Op op = {}, Epilogue epi = {}, cudaStream_t stream = nullptr) {
  static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
  static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
  return detail::conv2d_reduce_direct_with<T>(nullptr, p, x, w, bias, y, indices, op, epi, stream);
}

}  // namespace convred::device
