/// @file device/conv2d_reduce_direct.cuh
/// @brief Host entry point of the tiled direct kernel for C/groups == 1 (depthwise convolutions, any
/// channel multiplier): conv2d_reduce_direct, its tiling heuristic (choose_direct_config) and the facts
/// about the device it needs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../block/conv_direct.cuh"
#include "../block/direct_patch_stager.cuh"
#include "../functional.cuh"
#include "../kernel/conv2d_reduce.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"

namespace convred::device {

/// @brief The compile-time shape of one direct-kernel variant, as the tiling heuristic needs it
/// (direct_kernel_shape_of gives it for an element type and filter).
struct direct_kernel_shape {
  int sh_max = 1;             ///< most output rows per thread (block::direct_strip::SH)
  int sw = 1;                 ///< output columns per thread (block::direct_strip::SW)
  bool unrolled = false;      ///< taps unrolled, each input row read once as a run (block::direct_strip::unrolled)
  std::size_t elem_bytes = 4; ///< sizeof(T)
  int stages = 3;             ///< shared-memory buffers (block::direct_patch_stager::stages)
  int slots = 0;              ///< registers per thread for a stage (2-byte types; 0: cp.async)
};

/// @brief The filter sizes the direct kernel unrolls: 3x3, 5x5 and 7x7 with stride and dilation 1 in
/// both directions; 0 for every other problem (the run-time variant).
inline int direct_unrolled_filter(const conv2d_problem& p) {
  const bool unit = p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1;
  return unit && p.R == p.S && (p.R == 3 || p.R == 5 || p.R == 7) ? static_cast<int>(p.R) : 0;
}

/// @brief The shape of the direct-kernel variant with the taps unrolled for a `filter` x `filter` filter
/// (3, 5 or 7), or of the run-time variant (0), for element type T (host).
template <class T>
direct_kernel_shape direct_kernel_shape_of(int filter) {
  direct_kernel_shape k;
  using fixed = block::direct_strip<T, 3, 3>;  // SH, SW are the same for 3x3, 5x5 and 7x7
  using any = block::direct_strip<T, 0, 0>;
  k.unrolled = filter > 0;
  k.sh_max = k.unrolled ? fixed::SH : any::SH;
  k.sw = k.unrolled ? fixed::SW : any::SW;
  k.elem_bytes = sizeof(T);
  k.stages = block::direct_patch_stager<T>::stages;
  k.slots = block::direct_patch_stager<T>::slots;
  return k;
}

/// @brief The shape of the direct-kernel variant that serves p with element type T (host):
/// direct_kernel_shape_of<T>(direct_unrolled_filter(p)).
template <class T>
direct_kernel_shape direct_kernel_shape_of(const conv2d_problem& p) {
  return direct_kernel_shape_of<T>(direct_unrolled_filter(p));
}

/// @brief What choose_direct_config picks: the thread grid of a tile, the strip height, the blocks per
/// tile and the channels per stage (block::make_direct_tiling derives the rest), and the model's time.
struct direct_config {
  int tx = 1;          ///< threads across a tile
  int ty = 1;          ///< threads down a tile
  int sh = 1;          ///< output rows per thread
  int splits = 1;      ///< blocks per tile (a cluster when > 1), each over ceil(C / splits) input channels
  int cb = 1;          ///< input channels per pipeline stage
  /// false: no patch fits a buffer (huge strides, dilations or filters): the run-time variant reads x
  /// directly (block::direct_tiling::staged)
  bool staged = true;
  double cycles = 0;   ///< the model's estimate of the kernel's time, in SM clock cycles
};

/// Most blocks per tile (the portable cluster size limit).
inline constexpr int direct_max_splits = 8;
/// Most dynamic shared memory a direct tiling uses: 96 KiB, within every sm_80+ GPU's per-block limit
/// (99 KiB on sm_86 / sm_89).
inline constexpr std::size_t direct_max_smem = 96 * 1024;

/// @brief The model choose_direct_config minimises, for one candidate: its terms in SM cycles and the
/// channels per stage it implies.
struct direct_estimate {
  bool ok = false;         ///< the candidate can run (2-byte types: a stage fits the registers)
  int cb = 1;              ///< input channels per stage
  double throughput = 0;   ///< issue, FMA and shared-memory / L2-sector throughput over all SMs
  double memory = 0;       ///< DRAM (x once) or L2 (every staged sector), whichever is longer
  double latency = 0;      ///< one block's serial time times the waves of blocks
  double cycles = 0;       ///< max(throughput, memory, latency) + 5% of (throughput + memory)
};

/// @brief The estimate of choose_direct_config for one candidate tiling (tx x ty threads, strips of sh
/// rows, `splits` blocks per tile; the channels per stage derived as there) of problem p on kernel variant
/// k over `sms` SMs (>= 1). See choose_direct_config for the model; host only.
inline direct_estimate estimate_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, double sms, int tx,
                                              int ty, int sh, int splits) {
  direct_estimate r;
  const double e = static_cast<double>(k.elem_bytes);
  const std::int64_t P = p.P(), Q = p.Q(), C = p.C, Kg = p.K_per_group(), R = p.R, S = p.S, RS = R * S;
  const int sw = k.sw, threads = tx * ty;
  const bool nchw = p.x_layout == layout::nchw;
  const std::int64_t tile_h = std::int64_t(ty) * sh, tile_w = std::int64_t(tx) * sw;
  const double tiles = double(p.N) * double((P + tile_h - 1) / tile_h) * double((Q + tile_w - 1) / tile_w);
  const double rows = double((tile_h - 1) * p.stride_h + (R - 1) * p.dil_h + 1);
  const double cols = double((tile_w - 1) * p.stride_w + (S - 1) * p.dil_w + 1);
  const double patch = rows * cols, px = double(tile_h * tile_w);
  const double warps = (threads + 31) / 32;
  // per thread and output channel: FMAs, shared-memory loads (instructions, wavefronts per warp), weight
  // and bias loads, epilogue + fold
  const double run = double(sw + S - 1);
  const double chunk = std::min(16.0, sw * e);
  const double lds = k.unrolled ? (sh + R - 1) * std::ceil(run * e / chunk) : double(sh * RS);
  const double lds_wf = k.unrolled ? (sh + R - 1) * std::ceil(32 * run * e / 128) : sh * RS * std::ceil(32 * e / 128);
  const double fma = double(sh * sw * RS), epi = double(sh * sw) * 4, ldg = double(RS + 1);
  const double per_k = fma + lds + ldg + epi + 6;
  // the plane with the widest pitch make_direct_tiling may pick (for the channels per stage)
  const double align = 16 / e;
  const double plane = rows * (std::ceil(cols / align) * align + 8 * align);
  const std::int64_t cs = (C + splits - 1) / splits;
  std::int64_t cb = std::max<std::int64_t>(1, static_cast<std::int64_t>(48.0 * 1024 / (k.stages * plane * e)));
  cb = std::min<std::int64_t>({cb, cs, 16});
  if (k.slots > 0) {
    cb = std::min<std::int64_t>(cb, static_cast<std::int64_t>(k.slots * threads / patch));
    if (cb < 1) return r;
  }
  if (k.stages * double(cb) * plane * e > double(direct_max_smem)) return r;
  r.ok = true, r.cb = static_cast<int>(cb);
  // staging of one stage: instructions (warp) and L2 sectors
  double stage_issue = 20;
  if (k.slots > 0) {
    stage_issue += warps * std::ceil(double(cb) * patch / threads) * 30;
  } else {
    const double len = nchw ? cols : double(cb), lines = nchw ? double(cb) * rows : patch;
    double g = 1;
    while (g < 32 && g < len) g *= 2;
    g = std::min(g, double(threads));
    const double groups = std::max(1.0, std::floor(threads / g));
    stage_issue += warps * std::ceil(lines / groups) * (14 + 6 * std::ceil(len / g));
  }
  const double sectors =
      nchw ? double(cb) * rows * (std::ceil(cols * e / 32) + 1) : patch * (std::ceil(double(cb) * e / 32) + 1);
  const double issue_bc = warps * Kg * per_k + stage_issue / double(cb);
  const double lsu_bc = warps * Kg * (lds_wf + ldg) + sectors / double(cb);
  const double fma_bc = warps * Kg * (fma + sh * sw * 2) / (k.elem_bytes == 8 ? 2 : 4);
  const double blocks = tiles * splits;
  r.throughput = (tiles * double(C) * std::max({issue_bc / 4, lsu_bc, fma_bc}) +
                  (splits > 1 ? blocks * (px * splits / warps + 200) : 0)) / sms;
  r.memory = std::max(double(p.x_elements()) * e / (sms * 16), tiles * double(C) * sectors / double(cb) / sms);
  const double serial_c = issue_bc / std::min(warps, 4.0);
  const double nst = std::ceil(double(cs) / double(cb));
  const double t_blk = 1500 + nst * std::max(double(cb) * serial_c, 900.0 / (k.stages - 1)) + (splits > 1 ? 800 : 0);
  const double smem = std::max(k.stages * double(cb) * plane * e, px * 16);
  const double regs = k.unrolled ? 128 : 80;
  const double bps = std::max(1.0, std::floor(std::min({32.0, 64 / warps, 65536 / (regs * warps * 32),
                                                         228.0 * 1024 / (smem + 1024)})));
  r.latency = std::ceil(blocks / (sms * bps)) * t_blk;
  r.cycles = std::max({r.throughput, r.memory, r.latency}) + 0.05 * (r.throughput + r.memory);
  return r;
}

/// @brief Picks the direct kernel's tiling for a validated problem with C/groups == 1 (host, no CUDA
/// call): the candidate with the least estimate_direct_config (ties: the first found, fewer splits).
///
/// Candidates: strips of sh = 1 ... k.sh_max rows; tx in {1, 2, 4, 8, 16, 32} plus the counts that cover
/// the output's width in one or two tiles (at most 32), ty alike for the height, at most
/// kernel::direct_max_threads threads; splits in {1, 2, 4, 8} up to C and `max_splits` (1 when clusters
/// cannot be launched). Channels per stage: as many as fit 48 KiB of stage buffers (at most 16 and the
/// split's channels; 2-byte types: also cb * patch <= slots * threads, or the candidate is dropped). The
/// estimate, in SM cycles, is the largest of
///  - throughput: per block and channel, K/groups x (FMAs, shared-memory row loads, weight loads,
///    epilogue and fold) per thread plus the staging (per line 14 instructions, per element 6; registers:
///    30 per element), against 4 issue slots, 4 FP32 (2 FP64) warp-FMAs and 1 shared-memory wavefront
///    or L2 sector per cycle and SM, over all tiles and channels spread on `sm_count` SMs;
///  - memory: x once from DRAM (16 bytes per cycle and SM) and every staged line's 32-byte sectors (one
///    more per line for its alignment) from L2 (one sector per cycle and SM);
///  - latency: one block's serial time (its channels' issue on min(warps, 4) schedulers, at least an L2
///    round trip of 900 cycles per stage over the stages in flight, 1,500 cycles to start and finish, 800
///    more to combine splits) times the waves of blocks (residency from 128 registers per thread for the
///    unrolled variants, 80 otherwise, and the shared memory);
/// plus 5% of the throughput and memory terms, so that among latency-bound candidates the cheaper wins.
/// The constants are estimates for an H100 / H200 class GPU, not measurements. sm_count <= 0 (unknown):
/// planned as for one SM, never split.
inline direct_config choose_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, int sm_count,
                                          int max_splits) {
  const double sms = sm_count > 0 ? sm_count : 1;
  if (sm_count <= 0) max_splits = 1;
  const std::int64_t P = p.P(), Q = p.Q();
  // thread counts along one side: powers of two and the counts covering `strips` in one or two tiles, at
  // most `most`; `beyond`: also powers of two past `strips` (more threads to stage a large patch)
  auto candidates = [](std::int64_t strips, std::int64_t most, bool beyond, int* out) {
    int n = 0;
    auto add = [&](std::int64_t v) {
      if (v < 1 || (v > strips && !beyond) || v > most) return;
      for (int i = 0; i < n; ++i)
        if (out[i] == v) return;
      out[n++] = static_cast<int>(v);
    };
    for (int v = 1; v <= 256; v *= 2) add(v);
    add(strips), add((strips + 1) / 2);
    return n;
  };
  const int most_splits = static_cast<int>(std::min<std::int64_t>(std::min(max_splits, direct_max_splits), p.C));
  direct_config best;
  best.cycles = -1;
  for (int pass = 0; pass < 2 && best.cycles < 0; ++pass)
    for (int sh = 1; sh <= k.sh_max; ++sh) {
      int txs[16], tys[16];
      const int ntx = candidates((Q + k.sw - 1) / k.sw, 32, pass == 1, txs);
      const int nty = candidates((P + sh - 1) / sh, kernel::direct_max_threads, pass == 1, tys);
      for (int a = 0; a < ntx; ++a)
        for (int b = 0; b < nty; ++b) {
          if (txs[a] * tys[b] > kernel::direct_max_threads) continue;
          for (int splits = 1; splits <= most_splits; splits *= 2) {
            const direct_estimate r = estimate_direct_config(p, k, sms, txs[a], tys[b], sh, splits);
            if (r.ok && (best.cycles < 0 || r.cycles < best.cycles)) {
              best.tx = txs[a], best.ty = tys[b], best.sh = sh, best.splits = splits, best.cb = r.cb;
              best.cycles = r.cycles;
            }
          }
        }
    }
  if (best.cycles < 0) {  // no patch fits: unstaged, one column per thread, 8 rows of strips, splits to fill the SMs
    best.staged = false;
    best.sh = 1, best.cb = 1;
    best.tx = static_cast<int>(std::min<std::int64_t>(32, (Q + k.sw - 1) / k.sw));
    best.ty = static_cast<int>(std::min<std::int64_t>(8, P));
    const double tiles = double(p.N) * double((P + best.ty - 1) / best.ty) * double((Q + best.tx * k.sw - 1) / (best.tx * k.sw));
    while (best.splits * 2 <= most_splits && tiles * best.splits * 2 <= 2 * sms) best.splits *= 2;
    best.cycles = 0;
  }
  return best;
}

/// @brief True if config c can run problem p on the kernel variant k with at most max_splits blocks per
/// tile: 1 <= tx, ty with tx * ty <= kernel::direct_max_threads; 1 <= sh <= k.sh_max; 1 <= splits <=
/// min(C, max_splits, direct_max_splits); 1 <= cb; staged: the stage buffers (and 16-byte parked states)
/// within direct_max_smem and, for the register path (k.slots > 0), cb * patch <= slots * threads;
/// unstaged: the run-time variant only.
inline bool direct_config_fits(const conv2d_problem& p, const direct_kernel_shape& k, const direct_config& c,
                               int max_splits) {
  if (c.tx < 1 || c.ty < 1 || c.tx * c.ty > kernel::direct_max_threads || c.sh < 1 || c.sh > k.sh_max || c.cb < 1 ||
      c.splits < 1 || c.splits > std::min(max_splits, direct_max_splits) || c.splits > p.C)
    return false;
  if (!c.staged && k.unrolled) return false;
  const block::direct_tiling t = block::make_direct_tiling(p, k.elem_bytes, 16, c.sh, k.sw, k.unrolled, k.stages, c.tx,
                                                           c.ty, c.splits, c.cb, c.staged);
  if (c.staged && k.slots > 0 && std::int64_t(c.cb) * t.rows * t.cols > std::int64_t(k.slots) * t.threads) return false;
  return t.smem_bytes <= direct_max_smem;
}

/// @brief One line for a log: the tile, the strip and the split of a direct tiling, e.g. "16x56-pixel
/// tiles of 4x4-pixel strips, 8 channels per stage, 8 blocks per tile (a cluster, 18 channels each)".
inline std::string describe_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, const direct_config& c) {
  char b[200];
  const int n = std::snprintf(b, sizeof b, "%dx%d-pixel tiles of %dx%d-pixel strips, %d channel%s per stage",
                              c.ty * c.sh, c.tx * k.sw, c.sh, k.sw, c.cb, c.cb == 1 ? "" : "s");
  std::string s(b, static_cast<std::size_t>(n > 0 ? n : 0));
  if (!c.staged) {
    std::snprintf(b, sizeof b, "%dx%d-pixel tiles of %dx%d-pixel strips, x read directly (no patch fits)", c.ty * c.sh,
                  c.tx * k.sw, c.sh, k.sw);
    s = b;
  }
  if (c.splits > 1) {
    std::snprintf(b, sizeof b, ", %d blocks per tile (a cluster, %lld channels each)", c.splits,
                  static_cast<long long>((p.C + c.splits - 1) / c.splits));
    s += b;
  }
  return s;
}

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

/// The last few choices of choose_direct_config on this thread, keyed by everything it reads: a plan runs
/// the same problem again and again, and the search costs tens of microseconds.
inline direct_config cached_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, int sm_count,
                                          int max_splits) {
  struct entry {
    conv2d_problem p;
    direct_kernel_shape k;
    int sms, splits;
    direct_config c;
  };
  thread_local entry cache[8];
  thread_local int used = 0, next = 0;
  auto same = [&](const entry& e) {
    return e.sms == sm_count && e.splits == max_splits && e.k.sh_max == k.sh_max && e.k.sw == k.sw &&
           e.k.unrolled == k.unrolled && e.k.elem_bytes == k.elem_bytes && e.k.stages == k.stages &&
           e.k.slots == k.slots && e.p.N == p.N && e.p.C == p.C && e.p.H == p.H && e.p.W == p.W && e.p.K == p.K &&
           e.p.R == p.R && e.p.S == p.S && e.p.pad_h == p.pad_h && e.p.pad_w == p.pad_w &&
           e.p.stride_h == p.stride_h && e.p.stride_w == p.stride_w && e.p.dil_h == p.dil_h &&
           e.p.dil_w == p.dil_w && e.p.groups == p.groups && e.p.x_layout == p.x_layout;
  };
  for (int i = 0; i < used; ++i)
    if (same(cache[i])) return cache[i].c;
  const direct_config c = choose_direct_config(p, k, sm_count, max_splits);
  cache[next] = entry{p, k, sm_count, max_splits, c};
  next = (next + 1) % 8;
  used = used < 8 ? used + 1 : 8;
  return c;
}

/// Launches the direct kernel variant FR x FS (0: run time) with tiling c (fitting: direct_config_fits)
/// for a checked problem; when a cluster launch (c.splits > 1) is refused, the same tiling with one split.
template <int FR, int FS, class T, class Op, class Epilogue>
status launch_direct(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                     Op op, Epilogue epi, cudaStream_t stream, const direct_config& c) {
  using strip = block::direct_strip<T, FR, FS>;
  using V = typename strip::V;
  auto kern = kernel::conv2d_reduce_direct_kernel<T, Op, Epilogue, FR, FS>;
  const block::direct_tiling t =
      block::make_direct_tiling(p, sizeof(T), sizeof(typename Op::template accum_t<V>), c.sh, strip::SW,
                                strip::unrolled, block::direct_patch_stager<T>::stages, c.tx, c.ty, c.splits, c.cb,
                                c.staged);
  if (t.blocks() > 0x7fffffff) return status::size_overflow;
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
  if (cudaLaunchKernelEx(&cfg, kern, prm, t, op, epi, y, indices) != cudaSuccess) {
    // the cluster could not be placed (resources): that error is ours (check_device found none pending);
    // the same tiling without splits instead
    cudaGetLastError();
    direct_config one = c;
    one.splits = 1;
    return launch_direct<FR, FS>(p, x, w, bias, y, indices, op, epi, stream, one);
  }
  return launch_status();
}

/// conv2d_reduce_direct with its tiling given (`forced`, for tests of every split, stage, strip height
/// and the unstaged mode) or chosen (nullptr: cached_direct_config for the current device): the same
/// checks and errors, plus invalid_argument for a forced tiling that does not fit (direct_config_fits;
/// splits > 1 needs a device and code that launch clusters). A chosen tiling that does not fit the
/// unrolled variant (none does not, for filters up to 7x7) runs on the run-time variant.
template <class T, class Op, class Epilogue>
status conv2d_reduce_direct_with(const direct_config* forced, const conv2d_problem& p, const T* x, const T* w,
                                 const T* bias, T* y, std::int64_t* indices, Op op, Epilogue epi, cudaStream_t stream) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
  if (status s = validate(p, sizeof(T)); s != status::success) return s;
  if (p.C_per_group() != 1) return status::invalid_groups;
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
  const int max_splits = clusters ? direct_max_splits : 1;
  int filter = direct_unrolled_filter(p);
  direct_kernel_shape shape = direct_kernel_shape_of<T>(filter);
  direct_config c = forced ? *forced : cached_direct_config(p, shape, sms, max_splits);
  if (!direct_config_fits(p, shape, c, max_splits)) {
    if (forced) return status::invalid_argument;
    filter = 0;
    shape = direct_kernel_shape_of<T>(0);
    c = cached_direct_config(p, shape, sms, max_splits);
  }
  switch (filter) {
    case 3: return launch_direct<3, 3>(p, x, w, bias, y, indices, op, epi, stream, c);
    case 5: return launch_direct<5, 5>(p, x, w, bias, y, indices, op, epi, stream, c);
    case 7: return launch_direct<7, 7>(p, x, w, bias, y, indices, op, epi, stream, c);
    default: return launch_direct<0, 0>(p, x, w, bias, y, indices, op, epi, stream, c);
  }
}

}  // namespace detail

/// @brief conv2d_reduce for problems where each output channel reads one input channel (C/groups == 1:
/// depthwise convolutions, any channel multiplier K/groups; also C = 1), by tiled direct convolution in
/// exact FMA (math::ieee: fp32, fp64 for double), no GEMM tiles (kernel::conv2d_reduce_direct_kernel).
///
/// Each block takes a tile of output pixels of one image and loops over its input channels: per pipeline
/// stage it stages a few channels' input patches (tile plus halo, zero padding) in shared memory with
/// coalesced loads (cp.async; registers for 16-bit data) while the previous stage is computed, each thread
/// computes a strip of adjacent outputs for every output channel of the staged channel (each input row
/// read once; 3x3, 5x5 and 7x7 filters with stride and dilation 1 unrolled, any other filter, stride and
/// dilation at run time) and folds bias + epilogue into the pixels' reduction states in registers; y (and
/// the index) is written once per pixel. The tiling comes from choose_direct_config for the current
/// device (cached per thread); when the tiles are too few to fill the GPU (small batches), up to 8 blocks
/// share a tile as a thread-block cluster, each over a share of the channels, and their states are
/// combined through distributed shared memory in a fixed order (sm_90 code on a compute capability 9.0+
/// device; elsewhere smaller tiles only). Deterministic: no atomics; for a given device the same tiling,
/// hence the same summation order, on every run.
///
/// Same semantics, arguments and errors as conv2d_reduce (PyTorch's conv2d with groups, then the epilogue,
/// then the reduction across all K channels; x NCHW or NHWC; y (N,1,P,Q)), plus invalid_groups when
/// C/groups != 1. Padded taps multiply the zero padding by the weight (0 * inf = NaN, as PyTorch's padded
/// paths and the float64 reference; docs/semantics.md). conv2d_reduce_plan picks it for such problems
/// whatever the math asked for (it is exact).
/// @param p        problem with C/groups == 1; x layout NCHW or NHWC
/// @param x        device pointer, (N,C,H,W) elements of T (float, double, __half, __nv_bfloat16)
/// @param w        device pointer, (K, 1, R, S) elements (PyTorch's KCRS with C/groups = 1), contiguous
/// @param bias     device pointer to K elements, or nullptr for no bias
/// @param y        device pointer, N*P*Q elements of T, (N,1,P,Q); may be nullptr only for index ops with indices
/// @param indices  device pointer, N*P*Q int64; must be nullptr for ops without an index
/// @param op       reduction op (functional.cuh; associative and commutative: the splits combine their shares)
/// @param epi      epilogue `V e(V, int k)` or `V e(V)`, run on the device in the compute type
/// @param stream   CUDA stream the kernel is launched on (asynchronous)
/// @return status::success after a launch (or for N = 0, with no launch); otherwise, with nothing
///   launched: validate's codes; invalid_groups (C/groups != 1); indices_not_supported; null_pointer;
///   misaligned_pointer; overlapping_buffers; no_device (no device, or no kernel image for it);
///   size_overflow (more than 2^31 - 1 blocks); cuda_error (a CUDA error already pending, a failed device
///   query or launch: left pending).
template <class T, class Op, class Epilogue = epilogue::identity>
status conv2d_reduce_direct(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, T* y,
                            std::int64_t* indices, Op op = {}, Epilogue epi = {}, cudaStream_t stream = nullptr) {
  return detail::conv2d_reduce_direct_with<T>(nullptr, p, x, w, bias, y, indices, op, epi, stream);
}

}  // namespace convred::device
