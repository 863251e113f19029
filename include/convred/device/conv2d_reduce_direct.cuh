/// @file device/conv2d_reduce_direct.cuh
/// @brief Host entry point of the tiled direct kernel for C/groups == 1 (depthwise convolutions, any
/// channel multiplier): conv2d_reduce_direct, its tiling heuristic (choose_direct_config) and the facts
/// about the device it needs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "../block/conv_direct.cuh"
#include "../block/direct_patch_stager.cuh"
#include "../functional.cuh"
#include "../kernel/conv2d_reduce_direct.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "common.cuh"

namespace convred::device {

/// @brief The compile-time shape of one direct-kernel variant and the staging a problem allows, as the
/// tiling heuristic needs them (direct_kernel_shape_of gives them for an element type and problem).
struct direct_kernel_shape {
  int sh = 2;                 ///< output rows per thread (block::direct_strip::SH)
  int sw = 1;                 ///< output columns per thread (block::direct_strip::SW)
  bool unrolled = false;      ///< taps unrolled, each input row read once as a run (block::direct_strip::unrolled)
  int filter = 0;             ///< the unrolled filter size (3, 5, 7), 0 for the run-time variant
  std::size_t elem_bytes = 4; ///< sizeof(T)
  int stages = 3;             ///< shared-memory buffers (block::direct_patch_stager::stages)
  /// chunked staging (block::direct_vector_staging: NCHW, W a multiple of the chunk, unrolled), assuming x
  /// aligned to a chunk (the launch falls back to element copies when it is not)
  bool vector = false;
};

/// @brief The filter sizes the direct kernel unrolls: 3x3, 5x5 and 7x7 with stride and dilation 1 in
/// both directions; 0 for every other problem (the run-time variant).
inline int direct_unrolled_filter(const conv2d_problem& p) {
  const bool unit = p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 && p.dil_w == 1;
  return unit && p.R == p.S && (p.R == 3 || p.R == 5 || p.R == 7) ? static_cast<int>(p.R) : 0;
}

/// @brief The shape of the direct-kernel variant with the taps unrolled for a `filter` x `filter` filter
/// (3, 5 or 7), or of the run-time variant (0), for element type T (host); `vector` as given.
template <class T>
direct_kernel_shape direct_kernel_shape_of(int filter, bool vector) {
  direct_kernel_shape k;
  using fixed = block::direct_strip<T, 3, 3>;  // SH, SW are the same for 3x3, 5x5 and 7x7
  using any = block::direct_strip<T, 0, 0>;
  k.unrolled = filter > 0;
  k.filter = k.unrolled ? filter : 0;
  k.sh = k.unrolled ? fixed::SH : any::SH;
  k.sw = k.unrolled ? fixed::SW : any::SW;
  k.elem_bytes = sizeof(T);
  k.stages = block::direct_patch_stager<T>::stages;
  k.vector = vector && k.unrolled;
  return k;
}

/// @brief The shape of the direct-kernel variant that serves p with element type T (host):
/// direct_kernel_shape_of<T>(direct_unrolled_filter(p), block::direct_vector_staging(p, ...)).
template <class T>
direct_kernel_shape direct_kernel_shape_of(const conv2d_problem& p) {
  const int f = direct_unrolled_filter(p);
  return direct_kernel_shape_of<T>(f, block::direct_vector_staging(p, sizeof(T), f > 0));
}

/// @brief What choose_direct_config picks: the pixel-thread grid of a tile, the channel groups of a block,
/// the blocks per tile and the channels per stage (block::make_direct_tiling derives the rest), and the
/// model's time.
struct direct_config {
  int tx = 1;          ///< pixel threads across a tile
  int ty = 1;          ///< pixel threads down a tile
  int groups = 1;      ///< channel groups per block (threads = groups * tx * ty)
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
/// Stage buffers the heuristic aims at per block (it takes the most channels per stage within this).
inline constexpr std::size_t direct_stage_smem = 64 * 1024;

/// @brief The model choose_direct_config minimises, for one candidate: its terms in SM cycles and the
/// channels per stage it implies.
struct direct_estimate {
  bool ok = false;         ///< the candidate can run (buffers and parked states fit, one block fits an SM)
  int cb = 1;              ///< input channels per stage
  double throughput = 0;   ///< the busiest SM's issue: its blocks' instructions at the issue rate its warps reach
  double memory = 0;       ///< DRAM (x once over all SMs) or the busiest SM's staged bytes from L2, the longer
  double latency = 0;      ///< one block's serial time times the waves of blocks on the busiest SM
  double cycles = 0;       ///< max(throughput, memory, latency) + 5% of (throughput + memory)
};

/// @brief The estimate of choose_direct_config for one candidate tiling (tx x ty pixel threads, `groups`
/// channel groups, `splits` blocks per tile; the channels per stage derived as there) of problem p on
/// kernel variant k over `sms` SMs (>= 1). See choose_direct_config for the model; host only.
inline direct_estimate estimate_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, double sms, int tx,
                                              int ty, int groups, int splits) {
  direct_estimate r;
  const double e = static_cast<double>(k.elem_bytes);
  const std::int64_t P = p.P(), Q = p.Q(), C = p.C, Kg = p.K_per_group(), R = p.R, S = p.S, RS = R * S;
  const int sh = k.sh, sw = k.sw, pt = tx * ty, threads = pt * groups;
  const std::int64_t cs = (C + splits - 1) / splits;
  if (groups > cs) return r;  // idle groups
  const int vec = k.vector ? block::direct_chunk_elements(k.elem_bytes) : 1;
  const std::int64_t shift = vec > 1 ? (vec - p.pad_w % vec) % vec : 0;
  const std::int64_t tile_h = std::int64_t(ty) * sh, tile_w = std::int64_t(tx) * sw;
  const double tiles = double(p.N) * double((P + tile_h - 1) / tile_h) * double((Q + shift + tile_w - 1) / tile_w);
  const bool nchw = p.x_layout == layout::nchw;
  const double rows = double((tile_h - 1) * p.stride_h + (R - 1) * p.dil_h + 1);
  const double cols = double((tile_w - 1) * p.stride_w + (S - 1) * p.dil_w + 1);
  const double chunks = nchw ? std::ceil(cols / vec) : cols;
  const double align = 16 / e;
  const double plane = rows * (std::ceil(chunks * vec / align) * align + align);  // the model's (pitch: one unit more)
  const double px = double(tile_h * tile_w), warps = std::ceil(threads / 32.0);
  // channels per stage: groups * J for the largest J in {4, 2, 1} within direct_stage_smem (at most the split's)
  std::int64_t cb = 0;
  for (int j = 4; j >= 1 && cb == 0; j /= 2) {
    const std::int64_t c = std::min<std::int64_t>(std::int64_t(groups) * j, cs);
    if (k.stages * double(c) * plane * e <= double(direct_stage_smem) || j == 1) cb = c;
  }
  const double buffers = k.stages * double(cb) * plane * e, park = double(groups) * px * 16;
  if (buffers > double(direct_max_smem) || park > double(direct_max_smem)) return r;
  // the fit, exactly as the kernel lays the patch out (its pitch may be up to 7 units wider than the
  // model's: the fewest bank wavefronts among 8): a candidate that would not fit is never picked
  if (block::make_direct_tiling(p, k.elem_bytes, 16, sh, sw, k.unrolled, k.stages, tx, ty, groups, splits,
                                static_cast<int>(cb), true, k.vector).smem_bytes > direct_max_smem)
    return r;
  const double smem = std::max(buffers, park);
  // registers per thread (ptxas -v, sm_90a, fp32; double about 1.8x), blocks per SM
  const double regs = (k.unrolled ? (k.filter == 3 ? 80 : k.filter == 5 ? 96 : 120) : 128) * (e == 8 ? 1.8 : 1.0);
  const double bps = std::floor(std::min({32.0, 64 / warps, 65536 / (std::min(255.0, regs) * warps * 32),
                                          227.0 * 1024 / (smem + 1024)}));
  if (bps < 1) return r;
  r.ok = true, r.cb = static_cast<int>(cb);
  // per thread and output channel: FMAs, shared-memory loads, weight and bias loads, epilogue + fold, loop
  const double run = double(sw + S - 1);
  const double lds = k.unrolled ? (sh + R - 1) * std::ceil(run * e / std::min(16.0, sw * e)) : double(sh * RS);
  const double per_k = double(sh * sw * RS) + lds + double(RS + 1) + 3.0 * sh * sw + 8;
  const double nst = std::ceil(double(cs) / double(cb));
  const double per_group = std::ceil(double(cb) / groups);  // channels a group computes per stage
  const double items = double(cb) * rows * chunks;
  const double stage_thread = std::ceil(items / threads) * 18 + 30;  // staging + barrier per thread and stage
  const double warp_stage = double(Kg) * per_group * per_k + stage_thread;  // one warp's instructions per stage
  const double store = std::ceil(px * groups / threads) * 10 + std::ceil(px / threads) * (12 + 6 * groups) + 100;
  const double w_blk = warps * (nst * warp_stage + store);
  const double blocks = tiles * splits;
  const double nb = std::ceil(blocks / sms);          // blocks on the busiest SM
  const double conc = std::min(nb, bps);              // of them resident at once
  const double ipc = std::min(4.0, 0.5 * conc * warps);  // a warp issues about every other cycle
  r.throughput = nb * w_blk / ipc;
  const double dram = double(p.x_elements()) * e / (sms * 17);
  const double l2 = nb * double(cs) * rows * chunks * vec * e / 48;
  r.memory = std::max(dram, l2);
  // one block: start and first DRAM round trip, then per stage the longer of its issue (shared with the
  // other resident warps) and the round trip spread over the stages in flight; the cluster's combine
  const double t_blk = 1500 + nst * std::max(warp_stage * conc * warps / ipc, 1400.0 / (k.stages - 1)) +
                       store * conc * warps / ipc + (splits > 1 ? 800 : 0);
  r.latency = std::ceil(nb / bps) * t_blk;
  r.cycles = std::max({r.throughput, r.memory, r.latency}) + 0.05 * (r.throughput + r.memory);
  return r;
}

/// @brief The tiling for problems whose patches fit no stage buffer: unstaged (threads read x
/// directly; the run-time kernel variant), up to 32 x 8 strips of k.sh x k.sw pixels, channel groups and
/// splits (at most `most_splits`) added while they stay within kernel::direct_max_threads, C, and about
/// two blocks per SM (`sms`). Host only.
inline direct_config unstaged_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, double sms,
                                            int most_splits) {
  const std::int64_t P = p.P(), Q = p.Q();
  direct_config best;
  best.staged = false;
  best.tx = static_cast<int>(std::min<std::int64_t>(32, (Q + k.sw - 1) / k.sw));
  best.ty = static_cast<int>(std::min<std::int64_t>(8, (P + k.sh - 1) / k.sh));
  const double tiles = double(p.N) * double((P + best.ty * k.sh - 1) / (best.ty * k.sh)) *
                       double((Q + best.tx * k.sw - 1) / (best.tx * k.sw));
  while (best.groups * 2 * best.tx * best.ty <= kernel::direct_max_threads && best.groups * 2 <= p.C) best.groups *= 2;
  while (best.splits * 2 <= most_splits && best.splits * 2 * best.groups <= p.C && tiles * best.splits * 2 <= 2 * sms)
    best.splits *= 2;
  best.cycles = 0;
  return best;
}

/// @brief Picks the direct kernel's tiling for a validated problem with C/groups == 1 (host, no CUDA
/// call): the candidate with the least estimate_direct_config (ties: the first found).
///
/// Candidates: tx in {1, 2, 4, 8, 16, 32} and the counts that cover the output's width (plus the chunk
/// shift) in one or two tiles (at most 32); ty alike for the height (at most 64); channel groups in {1, 2,
/// 4, ..., 32} up to the split's channels; at most kernel::direct_max_threads threads; splits in {1, 2, 4,
/// 8} up to C and `max_splits` (1 when clusters cannot be launched). Channels per stage: groups * J for
/// the largest J in {4, 2, 1} whose buffers fit direct_stage_smem. The estimate, in SM cycles, is the
/// largest of
///  - throughput: the busiest SM's blocks' warp instructions (per thread and output channel SH*SW*R*S
///    FMAs, the row loads, R*S + 1 weight and bias loads, 3 per pixel for bias, epilogue and fold; per stage
///    18 per staged item and 30 for the barrier; the store) at min(4, warps / 2) per cycle;
///  - memory: x once from DRAM (17 bytes per cycle and SM: ~4 TB/s on 132 SMs at 1.75 GHz), or the
///    busiest SM's staged bytes from L2 (48 bytes per cycle);
///  - latency: one block's serial time (1,500 cycles to start, per stage the longer of its issue and an
///    L2/DRAM round trip of 1,400 cycles over the stages in flight, the store, 800 more to combine
///    splits) times the waves of blocks on the busiest SM (residency from the registers, 80 / 96 / 120 per
///    thread for the 3x3 / 5x5 / 7x7 variants, 128 for the run-time one, x1.8 for double, the warps and the
///    shared memory);
/// plus 5% of the throughput and memory terms, so that among latency-bound candidates the cheaper wins.
/// The constants are estimates for an H100 / H200 class GPU (bench/NOTES.md, "Depthwise direct kernel
/// v3"), not measurements. sm_count <= 0 (unknown): planned as for one SM, never split.
inline direct_config choose_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, int sm_count,
                                          int max_splits) {
  const double sms = sm_count > 0 ? sm_count : 1;
  if (sm_count <= 0) max_splits = 1;
  const std::int64_t P = p.P(), Q = p.Q();
  const int vec = k.vector ? block::direct_chunk_elements(k.elem_bytes) : 1;
  const std::int64_t shift = vec > 1 ? (vec - p.pad_w % vec) % vec : 0;
  // thread counts along one side: powers of two up to the count covering `strips`, and the counts
  // covering `strips` in one or two tiles, at most `most`
  auto candidates = [](std::int64_t strips, std::int64_t most, int* out) {
    int n = 0;
    auto add = [&](std::int64_t v) {
      if (v < 1 || v > most) return;
      for (int i = 0; i < n; ++i)
        if (out[i] == v) return;
      out[n++] = static_cast<int>(v);
    };
    for (std::int64_t v = 1; v <= most && v < 2 * strips; v *= 2) add(v);
    add(strips), add((strips + 1) / 2);
    return n;
  };
  const int most_splits = static_cast<int>(std::min<std::int64_t>(std::min(max_splits, direct_max_splits), p.C));
  int txs[16], tys[16];
  const int ntx = candidates((Q + shift + k.sw - 1) / k.sw, 32, txs);
  const int nty = candidates((P + k.sh - 1) / k.sh, 64, tys);
  direct_config best;
  best.cycles = -1;
  for (int a = 0; a < ntx; ++a)
    for (int b = 0; b < nty; ++b)
      for (int groups = 1; groups <= 32; groups *= 2) {
        if (txs[a] * tys[b] * groups > kernel::direct_max_threads) continue;
        for (int splits = 1; splits <= most_splits; splits *= 2) {
          const direct_estimate r = estimate_direct_config(p, k, sms, txs[a], tys[b], groups, splits);
          if (r.ok && (best.cycles < 0 || r.cycles < best.cycles)) {
            best.tx = txs[a], best.ty = tys[b], best.groups = groups, best.splits = splits, best.cb = r.cb;
            best.cycles = r.cycles;
          }
        }
      }
  if (best.cycles < 0) best = unstaged_direct_config(p, k, sms, most_splits);  // no patch fits
  return best;
}

/// @brief True if config c can run problem p on the kernel variant k with at most max_splits blocks per
/// tile: 1 <= tx, ty, groups with groups * tx * ty <= kernel::direct_max_threads; 1 <= splits <= min(C,
/// max_splits, direct_max_splits); 1 <= cb; staged: the stage buffers (and 16-byte parked states) within
/// direct_max_smem; unstaged: the run-time variant only.
inline bool direct_config_fits(const conv2d_problem& p, const direct_kernel_shape& k, const direct_config& c,
                               int max_splits) {
  if (c.tx < 1 || c.ty < 1 || c.groups < 1 || c.tx * c.ty > kernel::direct_max_threads ||
      c.groups * c.tx * c.ty > kernel::direct_max_threads || c.cb < 1 || c.splits < 1 ||
      c.splits > std::min(max_splits, direct_max_splits) || c.splits > p.C)
    return false;
  if (!c.staged && k.unrolled) return false;
  const block::direct_tiling t = block::make_direct_tiling(p, k.elem_bytes, 16, k.sh, k.sw, k.unrolled, k.stages, c.tx,
                                                           c.ty, c.groups, c.splits, c.cb, c.staged, k.vector);
  return t.smem_bytes <= direct_max_smem;
}

/// @brief One line for a log: the tile, the strip, the channel groups and the split of a direct tiling,
/// e.g. "8x56-pixel tiles of 2x4-pixel strips, 8 channel groups, 16 channels per stage (16-byte chunks), 4
/// blocks per tile (a cluster, 36 channels each)".
inline std::string describe_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, const direct_config& c) {
  char b[240];
  int n;
  if (c.staged)
    n = std::snprintf(b, sizeof b, "%dx%d-pixel tiles of %dx%d-pixel strips, %d channel group%s, %d channel%s per stage%s",
                      c.ty * k.sh, c.tx * k.sw, k.sh, k.sw, c.groups, c.groups == 1 ? "" : "s", c.cb, c.cb == 1 ? "" : "s",
                      k.vector ? (k.elem_bytes == 2 ? " (8-byte chunks)" : " (16-byte chunks)") : "");
  else
    n = std::snprintf(b, sizeof b, "%dx%d-pixel tiles of %dx%d-pixel strips, %d channel group%s, x read directly (no patch fits)",
                      c.ty * k.sh, c.tx * k.sw, k.sh, k.sw, c.groups, c.groups == 1 ? "" : "s");
  std::string s(b, static_cast<std::size_t>(n > 0 ? n : 0));
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
           e.k.unrolled == k.unrolled && e.k.filter == k.filter && e.k.elem_bytes == k.elem_bytes &&
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

/// Launches the direct kernel variant FR x FS (0: run time) with tiling c (fitting: direct_config_fits)
/// for a checked problem, staging in chunks when k.vector and x is aligned to a chunk; when a cluster
/// launch (c.splits > 1) is refused, the same tiling with one split.
template <int FR, int FS, class T, class Op, class Epilogue>
status launch_direct(const conv2d_problem& p, const direct_kernel_shape& k, const T* x, const T* w, const T* bias, T* y,
                     std::int64_t* indices, Op op, Epilogue epi, cudaStream_t stream, const direct_config& c) {
  using strip = block::direct_strip<T, FR, FS>;
  using V = typename strip::V;
  auto kern = kernel::conv2d_reduce_direct_kernel<T, Op, Epilogue, FR, FS>;
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
  if (cudaLaunchKernelEx(&cfg, kern, prm, t, op, epi, y, indices) != cudaSuccess) {
    // the cluster could not be placed (resources): that error is ours (check_device found none pending);
    // the same tiling without splits instead
    cudaGetLastError();
    direct_config one = c;
    one.splits = 1;
    return launch_direct<FR, FS>(p, k, x, w, bias, y, indices, op, epi, stream, one);
  }
  return launch_status();
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
  direct_kernel_shape shape = direct_kernel_shape_of<T>(p);
  if (element_copies) shape.vector = false;
  direct_config c = forced ? *forced : cached_direct_config(p, shape, sms, max_splits);
  if (!direct_config_fits(p, shape, c, max_splits)) {
    if (forced) return status::invalid_argument;
    shape = direct_kernel_shape_of<T>(0, false);
    c = cached_direct_config(p, shape, sms, max_splits);
    if (!direct_config_fits(p, shape, c, max_splits))  // (the chooser's estimate fits whatever it picks)
      c = unstaged_direct_config(p, shape, sms > 0 ? sms : 1,
                                 static_cast<int>(std::min<std::int64_t>(std::min(max_splits, direct_max_splits), p.C)));
  }
  switch (shape.filter) {
    case 3: return launch_direct<3, 3>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
    case 5: return launch_direct<5, 5>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
    case 7: return launch_direct<7, 7>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
    default: return launch_direct<0, 0>(p, shape, x, w, bias, y, indices, op, epi, stream, c);
  }
}

}  // namespace detail

/// @brief conv2d_reduce for problems where each output channel reads one input channel (C/groups == 1:
/// depthwise convolutions, any channel multiplier K/groups; also C = 1), by tiled direct convolution in
/// exact FMA (math::ieee: fp32, fp64 for double), no GEMM tiles (kernel::conv2d_reduce_direct_kernel).
///
/// Each block takes a tile of output pixels of one image and loops over its share of the input channels:
/// the padding is written into its shared-memory buffers once, then per pipeline stage it copies a few
/// channels' input patches (tile plus halo) with cp.async (16-byte chunks for NCHW x whose rows allow it,
/// else element by element) while the previous stages are computed; its threads form channel groups,
/// each computing every groups-th staged channel: each thread a strip of 2 x 4 adjacent outputs for every
/// output channel of the channel (each input row read once; 3x3, 5x5 and 7x7 filters with stride and
/// dilation 1 unrolled, any other filter, stride and dilation at run time), bias + epilogue folded into the
/// pixels' reduction states in registers; the groups' states are combined in group order and y (and the
/// index) written once per pixel. The tiling comes from choose_direct_config for the current device
/// (cached); when the tiles are too few to fill the GPU (small batches), up to 8 blocks share a
/// tile as a thread-block cluster, each over a share of the channels, and their states are combined
/// through distributed shared memory in rank order (sm_90 code on a compute capability 9.0+ device;
/// elsewhere smaller tiles only). Deterministic: no atomics; for a given device the same tiling, hence
/// the same summation order, on every run (sums over channels are rounded in the tiling's order: group,
/// then rank).
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
