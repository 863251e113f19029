/// @file device/direct_config.cuh
/// @brief The tiling heuristic of the tiled direct kernel for C/groups <= 16 (host only, no CUDA call): the
/// kernel variants' shapes, the model choose_direct_config minimises, whether a tiling fits, and its
/// description for a log.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../block/conv_direct.cuh"
#include "../block/direct_patch_stager.cuh"
#include "../kernel/conv2d_reduce_direct.cuh"
#include "../problem.cuh"

namespace convred::device {

/// @brief The compile-time shape of one direct-kernel variant and the staging a problem allows, as the
/// tiling heuristic needs them (direct_kernel_shape_of gives them for an element type and problem).
struct direct_kernel_shape {
  int sh = 2;                 ///< output rows per thread (block::direct_strip::SH)
  int sw = 1;                 ///< output columns per thread (block::direct_strip::SW)
  bool unrolled = false;      ///< taps unrolled, each input row read once as a run (block::direct_strip::unrolled)
  int filter = 0;             ///< the unrolled filter size (3, 5, 7), 0 for the run-time variant
  int stride = 1;             ///< the unrolled stride (1 or 2, both directions; block::direct_strip::stride), 1 at run time
  std::size_t elem_bytes = 4; ///< sizeof(T)
  int stages = 3;             ///< shared-memory buffers (block::direct_patch_stager::stages)
  /// chunked staging (block::direct_vector_staging: NCHW, W a multiple of the chunk, unrolled, stride 1 or
  /// stride 2 with pad_w even), assuming x
  /// aligned to a chunk (the launch falls back to element copies when it is not)
  bool vector = false;
};

/// @brief The filter sizes the direct kernel unrolls: 3x3, 5x5 and 7x7 with dilation 1 and stride 1 or 2
/// (the same in both directions); 0 for every other problem (the run-time variant).
inline int direct_unrolled_filter(const conv2d_problem& p) {
  const bool strides = p.stride_h == p.stride_w && (p.stride_h == 1 || p.stride_h == 2);
  const bool unit = strides && p.dil_h == 1 && p.dil_w == 1;
  return unit && p.R == p.S && (p.R == 3 || p.R == 5 || p.R == 7) ? static_cast<int>(p.R) : 0;
}

/// @brief The stride of the unrolled variant that serves p: 1 or 2 where direct_unrolled_filter(p) > 0,
/// else 1 (the run-time variant).
inline int direct_unrolled_stride(const conv2d_problem& p) {
  return direct_unrolled_filter(p) > 0 ? static_cast<int>(p.stride_h) : 1;
}

/// @brief The shape of the direct-kernel variant with the taps unrolled for a `filter` x `filter` filter
/// (3, 5 or 7) at stride `stride` (1 or 2), or of the run-time variant (filter 0; stride 1), for element
/// type T (host); `vector` as given.
template <class T>
direct_kernel_shape direct_kernel_shape_of(int filter, bool vector, int stride = 1) {
  direct_kernel_shape k;
  using fixed = block::direct_strip<T, 3, 3>;  // SH, SW are the same for 3x3, 5x5 and 7x7, strides 1 and 2
  using any = block::direct_strip<T, 0, 0>;
  k.unrolled = filter > 0;
  k.filter = k.unrolled ? filter : 0;
  k.stride = k.unrolled ? stride : 1;
  k.sh = k.unrolled ? fixed::SH : any::SH;
  k.sw = k.unrolled ? fixed::SW : any::SW;
  k.elem_bytes = sizeof(T);
  k.stages = block::direct_patch_stager<T>::stages;
  k.vector = vector && k.unrolled;
  return k;
}

/// @brief The shape of the direct-kernel variant that serves p with element type T (host):
/// direct_kernel_shape_of<T>(direct_unrolled_filter(p), block::direct_vector_staging(p, ...),
/// direct_unrolled_stride(p)).
template <class T>
direct_kernel_shape direct_kernel_shape_of(const conv2d_problem& p) {
  const int f = direct_unrolled_filter(p);
  return direct_kernel_shape_of<T>(f, block::direct_vector_staging(p, sizeof(T), f > 0), direct_unrolled_stride(p));
}

/// @brief What choose_direct_config picks: the pixel-thread grid of a tile, the channel groups of a block,
/// the blocks per tile and the channels per stage (block::make_direct_tiling derives the rest), and the
/// model's time.
struct direct_config {
  int tx = 1;          ///< pixel threads across a tile
  int ty = 1;          ///< pixel threads down a tile
  int groups = 1;      ///< channel groups per block (threads = groups * tx * ty)
  int splits = 1;      ///< blocks per tile (a cluster when > 1), each over ceil(groups / splits) groups' channels
  int cb = 1;          ///< input channels per pipeline stage (a multiple of C/groups)
  /// false: no patch fits a buffer (huge strides, dilations or filters): the run-time variant reads x
  /// directly (block::direct_tiling::staged)
  bool staged = true;
  double cycles = 0;   ///< the model's estimate of the kernel's time, in SM clock cycles
};

/// Most blocks per tile (the portable cluster size limit).
inline constexpr int direct_max_splits = 8;
/// Most blocks per tile on devices whose clusters may hold 16 blocks (compute capability 9.0, the H100 and
/// H200: a non-portable cluster size, cudaFuncAttributeNonPortableClusterSizeAllowed; the plan offers it on
/// any device that launches clusters, and a launch refused at 16 runs with 8). choose_direct_config takes
/// more than direct_max_splits for so few tiles that 8 blocks each would leave at least three quarters of
/// the SMs idle (tiles x 8 x 4 <= SMs: depthwise layers on 7 x 7 images at batch 1), and on any tiling from
/// batch direct_wide_cluster_batch on where the estimate is clearly lower (direct_extra_margin).
inline constexpr int direct_max_splits_sm90 = 16;
/// The batch from which choose_direct_config weighs 16 blocks per tile (direct_max_splits_sm90) on any
/// problem. Measured on the H200 (2026-12-05, the tilings of 27 layers: bench/NOTES.md, "Host tools for the
/// planner loop"; rankings under the 3,000-cycle combine of then): where the model ranked a 16-block tiling
/// first it was the faster one at batch 32 (c2304 15 x 15 depthwise 113 -> 103 us, c384 14 x 14 5 x 5 40.3
/// -> 38.8, c2304 19 x 19 5 x 5 316 -> 225 on a tiling the chooser does not offer, two within 1 %) and the
/// slower one at batch 1 on three of four layers (n1 c240 65 x 65 stride 2: 16.4 -> 24.8). Batches between
/// 1 and 32 were not timed.
inline constexpr std::int64_t direct_wide_cluster_batch = 8;
/// How much lower (a factor) choose_direct_config's estimate for a tiling outside its base candidates must be
/// than the base candidates' best for it to be taken: 0.975. Measured on the H200 (2026-12-05; rankings under
/// the 3,000-cycle combine of then): extra tilings
/// the model ranked first by less than 1 % were slower (n1 c240 65x65 stride 2, 5 rows down: 16.4 -> 17.0 us at
/// 0.9 % lower; n1 c144 56x56 stride 2, 3 threads across, a count not offered: 11.9 -> 12.5 at 0.6 %), those
/// ahead by 2.6 % or more faster or level (n32 c384 14x14 5x5: 40.3 -> 38.8 us at 2.6 %; n32 c2304 15x15: 113 ->
/// 103 at 4.4 %; n32 c1152 8x8: 25.5 -> 25.7 at 4.2 %; n32 c24 150x150: 94.7 -> 75.9 at 6.1 %).
inline constexpr double direct_extra_margin = 0.975;
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

/// @brief The constants of choose_direct_config's model (SM cycles, bytes per cycle and SM, issue rates).
/// The defaults were fitted on the H200 (2026-12-05) to 2,107 timed tilings of 27 depthwise, grouped and
/// small-C layers (`family_bench --direct-sweep`, batch 1 and 32): the set that picks, among each layer's
/// timed tilings, the one closest to its fastest (geomean 1.10x the fastest, ties broken by tiling order,
/// against 1.18x for the constants before: a warp issuing every other cycle, a 1,400-cycle round trip,
/// 1,500 to start a block, 800 to combine, 48 L2 bytes per cycle). bench/NOTES.md, "Ping-pong forced, and
/// the direct kernel's tilings measured". The combine then grew with the cluster (`combine` per doubling of
/// its blocks, was 3,000 for any cluster): geomean 1.10 -> 1.05 on the same tilings, the largest miss 1.57x
/// -> 1.22x (n32 c512 14 x 14 groups 32 had taken 8 blocks per tile at 121 us against 2 at 78;
/// bench/NOTES.md, "The direct model's combine grows with the cluster").
struct direct_model_constants {
  double issue_per_warp = 0.25;   ///< instructions a resident warp issues per cycle
  double max_issue = 4;           ///< instructions the SM issues per cycle at most
  double round_trip = 1000;       ///< an L2/DRAM round trip of a stage's copies (cycles)
  double block_start = 3000;      ///< a block's start and first round trip (cycles)
  double combine = 2000;          ///< the cluster's combine of the splits' states, per doubling of its blocks (cycles)
  double dram_bytes = 17;         ///< DRAM bytes per cycle and SM
  double l2_bytes = 32;           ///< L2 bytes per cycle and SM
  double stage_item = 18;         ///< a thread's instructions per staged item (index math, bounds, cp.async)
};

/// @brief Registers per thread of the stride-2 unrolled variants for the 3x3, 5x5 and 7x7 filters (fp32,
/// ptxas -v on sm_90a, op::sum, rounded up to a multiple of 8; the index ops take up to 128 and spill a
/// little at 5x5 and 7x7); grouped: the grouped instantiation.
inline double direct_s2_registers(int filter, bool grouped) {
  if (grouped) return filter == 3 ? 112 : filter == 5 ? 120 : 128;
  return filter == 3 ? 88 : filter == 5 ? 104 : 128;
}

/// @brief Input rows a strip of the stride-2 unrolled variant k reads: (sh - 1) * 2 + R.
inline double direct_s2_rows(const direct_kernel_shape& k, std::int64_t R) { return double((k.sh - 1) * 2 + R); }

/// @brief Elements of one input row a strip of the stride-2 unrolled variant k reads: (sw - 1) * 2 + S.
inline double direct_s2_run(const direct_kernel_shape& k, std::int64_t S) { return double((k.sw - 1) * 2 + S); }

/// @brief Shared-memory wavefronts of one warp's strip convolution of one channel on the stride-2 unrolled
/// variant k with tiling t (its pitch and thread grid): per input row, its whole 16-byte loads
/// (block::direct_strip::load_bytes), each as many wavefronts as the first
/// (block::detail::direct_smem_wavefronts: every load of a row is the first shifted by 16 bytes for every
/// lane). Host only.
inline double direct_s2_wavefronts(const direct_kernel_shape& k, const block::direct_tiling& t, std::int64_t R,
                                   std::int64_t S) {
  const double e = static_cast<double>(k.elem_bytes);
  const double loads = std::ceil(direct_s2_run(k, S) * e / 16);
  const int wf = block::detail::direct_smem_wavefronts(t.pitch, k.elem_bytes, t.tx, t.pixel_threads, 2 * k.sh,
                                                       2 * k.sw, 16);
  return direct_s2_rows(k, R) * loads * wf;
}

/// @brief The estimate of choose_direct_config for one candidate tiling (tx x ty pixel threads, `groups`
/// channel groups, `splits` blocks per tile; the channels per stage derived as there) of problem p on
/// kernel variant k over `sms` SMs (>= 1), with the model's constants `m` (the planner's defaults unless a
/// refit passes others). See choose_direct_config for the model; host only.
inline direct_estimate estimate_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, double sms, int tx,
                                              int ty, int groups, int splits, const direct_model_constants& m = {}) {
  direct_estimate r;
  if (tx < 1 || ty < 1 || groups < 1 || splits < 1 || k.sh < 1 || k.sw < 1) return r;  // (no estimate: as an idle tiling)
  const double e = static_cast<double>(k.elem_bytes);
  const std::int64_t P = p.P(), Q = p.Q(), Kg = p.K_per_group(), R = p.R, S = p.S, RS = R * S;
  const std::int64_t Cg = p.C_per_group(), G = p.groups;
  const bool grouped = Cg > 1;  // work items (group, output channel), whole groups per stage
  const int sh = k.sh, sw = k.sw, pt = tx * ty, threads = pt * groups;
  const std::int64_t units = (G + splits - 1) / splits;  // the problem's groups per split
  const std::int64_t cs = units * Cg;                     // channels per split (ceil(C / splits) when Cg == 1)
  if (groups > (grouped ? units * Kg : cs)) return r;  // idle groups
  const int vec = k.vector ? block::direct_chunk_elements(k.elem_bytes) : 1;
  const std::int64_t shift = block::direct_chunk_shift(p, vec);
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
  // (grouped: the groups holding groups * J items, at least one; one group when even J = 1 is too large)
  std::int64_t cb = 0;
  for (int j = 4; j >= 1 && cb == 0; j /= 2) {
    const std::int64_t c = grouped ? std::min<std::int64_t>((std::int64_t(groups) * j + Kg - 1) / Kg, units) * Cg
                                   : std::min<std::int64_t>(std::int64_t(groups) * j, cs);
    if (k.stages * double(c) * plane * e <= double(direct_stage_smem) || (j == 1 && !grouped)) cb = c;
  }
  if (cb == 0) cb = Cg;
  const double buffers = k.stages * double(cb) * plane * e, park = double(groups) * px * 16;
  if (buffers > double(direct_max_smem) || park > double(direct_max_smem)) return r;
  // the fit, exactly as the kernel lays the patch out (its pitch may be up to 7 units wider than the
  // model's: the fewest bank wavefronts among 8): a candidate that would not fit is never picked
  const block::direct_tiling tiling = block::make_direct_tiling(p, k.elem_bytes, 16, sh, sw, k.unrolled, k.stages, tx,
                                                                ty, groups, splits, static_cast<int>(cb), true, k.vector);
  if (tiling.smem_bytes > direct_max_smem) return r;
  const double smem = std::max(buffers, park);
  // registers per thread (ptxas -v, sm_90a, fp32; double about 1.8x), blocks per SM
  // (the grouped variant: 96 / 110 / 128, its own instantiation; stride 2: direct_s2_registers)
  const double regs = (k.unrolled ? (k.stride == 2 ? direct_s2_registers(k.filter, grouped)
                                     : grouped     ? (k.filter == 3 ? 96 : k.filter == 5 ? 110 : 128)
                                                   : (k.filter == 3 ? 80 : k.filter == 5 ? 96 : 120))
                                  : 128) *
                      (e == 8 ? 1.8 : 1.0);
  const double bps = std::floor(std::min({32.0, 64 / warps, 65536 / (std::min(255.0, regs) * warps * 32),
                                          227.0 * 1024 / (smem + 1024)}));
  if (bps < 1) return r;
  r.ok = true, r.cb = static_cast<int>(cb);
  // per thread and output channel: FMAs, shared-memory loads, weight and bias loads, epilogue + fold, loop
  const double run = double(sw + S - 1);
  const double lds = !k.unrolled     ? double(sh * RS)
                     : k.stride == 1 ? (sh + R - 1) * std::ceil(run * e / std::min(16.0, sw * e))
                                     : direct_s2_rows(k, R) * std::ceil(direct_s2_run(k, S) * e / 16);
  const double per_k = double(sh * sw * RS) + lds + double(RS + 1) + 3.0 * sh * sw + 8;
  const double nst = std::ceil(double(cs) / double(cb));
  const double per_group = std::ceil(double(cb) / groups);  // channels a group computes per stage
  const double items = double(cb) * rows * chunks;
  const double stage_thread = std::ceil(items / threads) * m.stage_item + 30;  // staging + barrier per thread and stage
  // grouped: a group's items per stage, each Cg channels' taps, loads and weights, then one fold
  const double per_item = double(Cg) * (double(sh * sw * RS) + lds + double(RS) + 4) + 1 + 3.0 * sh * sw + 8;
  const double group_items = std::ceil(double(cb / Cg * Kg) / groups);
  const double warp_stage = (grouped ? group_items * per_item : double(Kg) * per_group * per_k) +
                            stage_thread;  // one warp's instructions per stage
  const double store = std::ceil(px * groups / threads) * 10 + std::ceil(px / threads) * (12 + 6 * groups) + 100;
  const double w_blk = warps * (nst * warp_stage + store);
  const double blocks = tiles * splits;
  const double nb = std::max(1.0, std::ceil(blocks / sms));  // blocks on the busiest SM (N = 0: counted as 1)
  const double conc = std::min(nb, bps);              // of them resident at once
  const double ipc = std::min(m.max_issue, m.issue_per_warp * conc * warps);
  r.throughput = nb * w_blk / ipc;
  // stride 2: a warp's row loads (lanes 2 * sw elements apart) conflict in the banks; their wavefronts
  // (direct_s2_wavefronts: the tiling's real pitch) per strip's convolution of one channel
  const double s2_conv = k.unrolled && k.stride == 2 ? direct_s2_wavefronts(k, tiling, R, S) : 0;
  if (grouped) {  // and the strips' shared-memory wavefronts (one per 128 bytes a warp loads), at one per cycle
    const double per_conv = s2_conv > 0    ? s2_conv
                            : k.unrolled ? double(sh + R - 1) * std::ceil(32 * run * e / 128)
                                         : double(sh * RS) * std::ceil(32 * e / 128);
    const double waves = per_conv * double(Cg) * group_items;
    r.throughput = std::max(r.throughput, nb * warps * nst * waves);
  } else if (s2_conv > 0) {  // depthwise at stride 2: each output channel's strip, one wavefront per cycle
    r.throughput = std::max(r.throughput, nb * warps * nst * s2_conv * double(Kg) * per_group);
  }
  const double dram = double(p.x_elements()) * e / (sms * m.dram_bytes);
  const double l2 = nb * double(cs) * rows * chunks * vec * e / m.l2_bytes;
  r.memory = std::max(dram, l2);
  // one block: start and first DRAM round trip, then per stage the longer of its issue (shared with the
  // other resident warps) and the round trip spread over the stages in flight; the cluster's combine
  const double t_blk = m.block_start + nst * std::max(warp_stage * conc * warps / ipc, m.round_trip / (k.stages - 1)) +
                       store * conc * warps / ipc + m.combine * std::log2(double(splits));
  r.latency = std::ceil(nb / bps) * t_blk;
  r.cycles = std::max({r.throughput, r.memory, r.latency}) + 0.05 * (r.throughput + r.memory);
  return r;
}

/// @brief The tiling for problems whose patches fit no stage buffer: unstaged (threads read x
/// directly; the run-time kernel variant), up to 32 x 8 strips of k.sh x k.sw pixels, channel groups and
/// splits (at most `most_splits`) added while they stay within kernel::direct_max_threads, the channel
/// groups' work (C for C/groups == 1, else groups * K/groups items), and about two blocks per SM (`sms`);
/// cb = C/groups (unused unstaged). Host only.
inline direct_config unstaged_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, double sms,
                                            int most_splits) {
  const std::int64_t P = p.P(), Q = p.Q();
  direct_config best;
  best.staged = false;
  best.tx = static_cast<int>(std::min<std::int64_t>(32, (Q + k.sw - 1) / k.sw));
  best.ty = static_cast<int>(std::min<std::int64_t>(8, (P + k.sh - 1) / k.sh));
  const double tiles = double(p.N) * double((P + best.ty * k.sh - 1) / (best.ty * k.sh)) *
                       double((Q + best.tx * k.sw - 1) / (best.tx * k.sw));
  // the channel groups' work: channels (C/groups == 1), else items (group, output channel)
  const std::int64_t work = p.C_per_group() == 1 ? p.C : p.groups * p.K_per_group();
  best.cb = static_cast<int>(p.C_per_group());
  while (best.groups * 2 * best.tx * best.ty <= kernel::direct_max_threads && best.groups * 2 <= work) best.groups *= 2;
  while (best.splits * 2 <= most_splits && best.splits * 2 * best.groups <= work && tiles * best.splits * 2 <= 2 * sms)
    best.splits *= 2;
  best.cycles = 0;
  return best;
}

/// @brief Picks the direct kernel's tiling for a validated problem with C/groups <=
/// block::direct_max_group_channels (host, no CUDA call): the candidate with the least
/// estimate_direct_config (ties: the first found).
///
/// Base candidates: tx in {1, 2, 4, 8, 16, 32} and the counts that cover the output's width (plus the chunk
/// shift) in one or two tiles (at most 32); ty alike for the height (at most 64); channel groups in {1, 2,
/// 4, ..., 32} up to the split's channels (C/groups > 1: its groups * K/groups work items); at most
/// kernel::direct_max_threads threads; splits in {1, 2, 4, 8, 16} up to the problem's groups (C for
/// depthwise) and `max_splits` (1 when clusters cannot be launched; 16 only where the tiles are few, see
/// direct_max_splits_sm90). Extra candidates, taken only where their estimate is below direct_extra_margin
/// times the base candidates' best: ty from 3 to 16 below the strips down, and 16 splits on any tiling from
/// batch direct_wide_cluster_batch on. Channels per stage: groups * J for
/// the largest J in {4, 2, 1} whose buffers fit direct_stage_smem (C/groups > 1: the whole groups holding
/// groups * J items, else one group). The estimate, in SM cycles, is the largest of
///  - throughput: the busiest SM's blocks' warp instructions (per thread and output channel SH*SW*R*S
///    FMAs, the row loads, R*S + 1 weight and bias loads, 3 per pixel for bias, epilogue and fold; per stage
///    18 per staged item and 30 for the barrier; the store) at min(4, resident warps / 4) per cycle; C/groups > 1:
///    per work item C/groups times the taps, loads and R*S weight loads (+4 for the loop), one fold, and
///    at least the strips' shared-memory wavefronts (a warp's row loads, one per 128 bytes, one per
///    cycle: an fp32 3x3 strip loads 24 bytes per row and thread for 18 FMAs, so its loads rather than its
///    FMAs bound it); the stride-2 unrolled variants (rows of 2 * SW + S - 2 elements, whole 16-byte
///    loads, lanes 2 * SW elements apart: 2-way bank conflicts in fp32) count their row loads as such and
///    their wavefronts exactly for the tiling's pitch (direct_s2_wavefronts), depthwise or grouped;
///  - memory: x once from DRAM (17 bytes per cycle and SM: ~4 TB/s on 132 SMs at 1.75 GHz), or the
///    busiest SM's staged bytes from L2 (32 bytes per cycle);
///  - latency: one block's serial time (3,000 cycles to start, per stage the longer of its issue and an
///    L2/DRAM round trip of 1,000 cycles over the stages in flight, the store, 2,000 more per doubling of
///    the cluster to combine splits: 2,000 for 2 blocks per tile, 8,000 for 16) times the waves of blocks
///    on the busiest SM (residency from the registers, 80 / 96 / 120 per thread for the 3x3 / 5x5 / 7x7
///    variants, direct_s2_registers at stride 2, 128 for the run-time one, x1.8 for double, the warps and
///    the shared memory);
/// plus 5% of the throughput and memory terms, so that among latency-bound candidates the cheaper wins.
/// The constants (direct_model_constants) were fitted on the H200 to the measured tilings of 27 layers for
/// the choice, not the time: the measured time is about 2.2x the cycles at 1.98 GHz (rms 0.25 in log;
/// batch-32 layers above that, batch-1 layers below). sm_count <= 0 (unknown): planned as for one SM,
/// never split. `m`: the model's constants (the planner's unless a refit passes others:
/// bench/fit_direct_model.cu).
inline direct_config choose_direct_config(const conv2d_problem& p, const direct_kernel_shape& k, int sm_count,
                                          int max_splits, const direct_model_constants& m = {}) {
  const double sms = sm_count > 0 ? sm_count : 1;
  if (sm_count <= 0) max_splits = 1;
  const std::int64_t P = p.P(), Q = p.Q();
  const int vec = k.vector ? block::direct_chunk_elements(k.elem_bytes) : 1;
  const std::int64_t shift = block::direct_chunk_shift(p, vec);
  // thread counts along one side: the base ones (powers of two up to the count covering `strips`, the
  // counts covering `strips` in one or two tiles), then (`extra`: down, where the measured gains were) each
  // remaining count from 3 to 16 below `strips`; at most `most`; returns the count, the base count in *base
  auto candidates = [](std::int64_t strips, std::int64_t most, bool extra, int* out, int* base) {
    int n = 0;
    auto add = [&](std::int64_t v) {
      if (v < 1 || v > most) return;
      for (int i = 0; i < n; ++i)
        if (out[i] == v) return;
      out[n++] = static_cast<int>(v);
    };
    for (std::int64_t v = 1; v <= most && v < 2 * strips; v *= 2) add(v);
    add(strips), add((strips + 1) / 2);
    *base = n;
    for (std::int64_t v = 3; extra && v <= 16 && v < strips; ++v) add(v);
    return n;
  };
  const int most_splits = static_cast<int>(std::min<std::int64_t>(std::min(max_splits, direct_max_splits_sm90), p.groups));
  int txs[32], tys[32], base_tx = 0, base_ty = 0;
  const int ntx = candidates((Q + shift + k.sw - 1) / k.sw, 32, false, txs, &base_tx);
  const int nty = candidates((P + k.sh - 1) / k.sh, 64, true, tys, &base_ty);
  direct_config best;
  best.cycles = -1;
  // pass 0: the base candidates; pass 1: the others, taken only where they beat pass 0's best by
  // direct_extra_margin
  double base_cycles = -1;
  for (int pass = 0; pass < 2; base_cycles = best.cycles, ++pass)
    for (int a = 0; a < ntx; ++a)
      for (int b = 0; b < nty; ++b)
        for (int groups = 1; groups <= 32; groups *= 2) {
          if (txs[a] * tys[b] * groups > kernel::direct_max_threads) continue;
          for (int splits = 1; splits <= most_splits; splits *= 2) {
            bool extra = a >= base_tx || b >= base_ty;
            if (splits > direct_max_splits) {  // 16-block clusters: base where 8 per tile leave most SMs idle
              const std::int64_t th = std::int64_t(tys[b]) * k.sh, tw = std::int64_t(txs[a]) * k.sw;
              const double tiles = double(p.N) * double((P + th - 1) / th) * double((Q + shift + tw - 1) / tw);
              if (tiles * direct_max_splits * 4 > sms) {
                if (p.N < direct_wide_cluster_batch) continue;
                extra = true;
              }
            }
            if (extra != (pass == 1)) continue;
            const direct_estimate r = estimate_direct_config(p, k, sms, txs[a], tys[b], groups, splits, m);
            // (no base candidate fits: the extra ones compete among themselves)
            const double bar = pass == 0 || base_cycles < 0 ? best.cycles
                                                            : std::min(best.cycles, base_cycles * direct_extra_margin);
            if (r.ok && (best.cycles < 0 || r.cycles < bar)) {
              best.tx = txs[a], best.ty = tys[b], best.groups = groups, best.splits = splits, best.cb = r.cb;
              best.cycles = r.cycles;
            }
          }
        }
  if (best.cycles < 0) best = unstaged_direct_config(p, k, sms, std::min(most_splits, direct_max_splits));  // no patch fits
  return best;
}

/// @brief True if config c can run problem p on the kernel variant k with at most max_splits blocks per
/// tile: C/groups <= block::direct_max_group_channels; 1 <= tx, ty, groups with groups * tx * ty <=
/// kernel::direct_max_threads; 1 <= splits <= min(the problem's groups, max_splits, direct_max_splits_sm90); 1
/// <= cb, a multiple of C/groups; staged: the stage buffers (and 16-byte parked states) within
/// direct_max_smem; unstaged: the run-time variant only.
inline bool direct_config_fits(const conv2d_problem& p, const direct_kernel_shape& k, const direct_config& c,
                               int max_splits) {
  constexpr int most = kernel::direct_max_threads;  // (each factor bounded before their product: no overflow)
  if (c.tx < 1 || c.ty < 1 || c.groups < 1 || c.tx > most || c.ty > most || c.groups > most ||
      c.groups * c.tx * c.ty > most || c.cb < 1 || c.splits < 1 ||
      c.splits > std::min(max_splits, direct_max_splits_sm90) || c.splits > p.groups || c.cb % p.C_per_group() != 0 ||
      p.C_per_group() > block::direct_max_group_channels)
    return false;
  if (!c.staged && k.unrolled) return false;
  const block::direct_tiling t = block::make_direct_tiling(p, k.elem_bytes, 16, k.sh, k.sw, k.unrolled, k.stages, c.tx,
                                                           c.ty, c.groups, c.splits, c.cb, c.staged, k.vector);
  return t.smem_bytes <= direct_max_smem;
}

/// @brief One line for a log: the tile, the strip, the channel groups and the split of a direct tiling,
/// e.g. "8x56-pixel tiles of 2x4-pixel strips, 8 channel groups, 16 channels per stage (16-byte chunks), 4
/// blocks per tile (a cluster, 36 channels each)" (whole groups of the problem per block).
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
                  static_cast<long long>((p.groups + c.splits - 1) / c.splits * p.C_per_group()));
    s += b;
  }
  return s;
}

}  // namespace convred::device
