/// @file device/conv2d_reduce_packed.cuh
/// @brief Host entry points of the Hopper packed-filter path: filter packing (a separate, once-per-filter
/// step) and the fused conv2d -> epilogue -> channel reduction on wgmma.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
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
#include "plan_options.cuh"

namespace convred::device {

// The planner's time model of the wgmma kernel (conv2d_reduce_plan): rough rates of the H200
// (bench/NOTES.md), for choosing between the wgmma kernel fused, the wgmma kernel in partial
// (split-K) mode (choose_wgmma_splits) and the mma.sync split path (choose_k_splits) on problems whose
// tiles are too few to fill the GPU. Times are estimates for comparisons, not predictions to the
// microsecond. The partial sums' traffic and the fixup's fixed cost are the split path's:
// split_workspace_bytes_per_s, split_fixed_seconds (conv2d_reduce_split.cuh).

/// The planner's wgmma kernel, FLOP/s per SM under TF32, every computed pixel counted (a tile's tile_h x 64
/// pixels, the dropped columns of narrow tiles and rows past P included): about the seed problem's
/// sustained rate on the H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_wgmma_flops_per_sm = 3.0e12;
/// The planner's wgmma kernel with x gathered by the producer threads (stride 2, W % 4 != 0): its plain
/// loads are slower than TMA, counted as this factor on the time (with a 1x1 filter, one tap per stage, the
/// producer cannot keep up at all: the planner then takes the mma.sync kernel).
inline constexpr double plan_wgmma_gather_slowdown = 2.0;
/// The planner's wgmma kernel on direct tiles at stride 2 (wgmma_conv_params::direct), counted as this
/// factor on the time: TMA cannot skip columns in a box's innermost dimension, so each box carries the odd
/// input columns too (twice the bytes of the pixels used, in a row pitch padded from 2Q - 1 to 8 mod 16
/// floats), and the A fragments' loads of every other column meet 2-way bank conflicts. Fitted on the
/// H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_wgmma_direct_s2_slowdown = 2.5;
/// The planner's mma.sync split path (conv2d_reduce_split), FLOP/s per SM on the useful work, measured on
/// the H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_mma_split_flops_per_sm = 0.34e12;
/// The planner's mma.sync split path, fixed cost beyond its mainloop (seconds): pipeline fills, stores, the
/// fixup. Fitted so that the model's difference to the wgmma kernel's partial mode matches the H200's
/// (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_mma_split_fixed_seconds = 14e-6;

/// Bytes of one reduction state in the wgmma kernel's pass mode (wgmma_conv_params::states): the largest
/// standard op state, argmin's (value, index); an op with a larger state runs fused instead.
inline constexpr std::size_t pass_state_bytes = 8;

/// The planner's packing pass of flat tiles (kernel::pack_x_kernel), bytes per second over x read and the
/// packed planes written: about two thirds of the H200's copy bandwidth (4.2 TB/s), for its strided reads.
inline constexpr double plan_xpack_bytes_per_s = 3.0e12;
/// The packing pass's fixed cost (seconds): its launch and tail.
inline constexpr double plan_xpack_fixed_seconds = 3e-6;

/// @brief Speed of a tensor-core math relative to TF32 in the planner's time model (both the wgmma and the
/// mma.sync rates are scaled by it; the partial sums' traffic is not): bf16 and fp16 1.5, tf32x3 0.36 (three
/// products per term), from the seed problem's times on the H200 (bench/NOTES.md, "Moved from header
/// comments").
template <class Math>
constexpr double plan_math_speed() {
  if constexpr (std::is_same_v<Math, math::bf16> || std::is_same_v<Math, math::fp16>) return 1.5;
  else if constexpr (std::is_same_v<Math, math::tf32x3>) return 0.36;
  else return 1.0;
}

/// @brief The planner's estimates for the wgmma kernel on a problem it serves (choose_wgmma_splits).
struct wgmma_split_estimate {
  int splits = 0;        ///< GEMM_K splits of the partial mode to run, or 0: the fused kernel (or pass mode)
  /// with splits = 0: pass mode (wgmma_conv_params::states) is estimated faster than the fused kernel
  bool pass_mode = false;
  double pass_mode_s = 0;  ///< estimated time of pass mode (0 where it does not apply: one pass, 3xTF32)
  double fused_s = 0;    ///< estimated time of the fused kernel (seconds)
  double split_s = 0;    ///< estimated time of the partial mode with `splits` splits (0 when splits is 0)
  std::int64_t units = 0;  ///< work units of that partial mode: tiles x npass x splits (0 when splits is 0)
  /// with splits = 0: the last tail_tiles tiles run as a split-K tail (a second launch in partial mode:
  /// wgmma_conv_params::tile0) after a head in pass mode (pass_mode) or fused; 0: no tail
  std::int64_t tail_tiles = 0;
  int tail_splits = 0;   ///< GEMM_K splits of the tail's channel passes (0 without a tail)
  double tail_s = 0;     ///< estimated time with that tail (0 without one)
};

/// The planner's cost of a split-K tail's own launch of the wgmma kernel (seconds): the tail's blocks wait
/// for the head's last one (a programmatic dependent launch hides the launch, not that wait) and the chain
/// has one kernel more (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_tail_launch_seconds = 2e-6;

/// @brief The split-K tail's part of choose_wgmma_splits (tiles >= sm_count, the estimate e's fused and
/// pass mode times set; not under 3xTF32, whose consumers spill with the tail's offsets: kernel::conv2d_reduce_wgmma_kernel): for
/// tiles that cover contiguous output pixels (conv_mainloop_wgmma::tail_serves),
/// the last T tiles in partial mode with Z GEMM_K splits (1 <= Z <= kt; Z = 1 only after a fused head of
/// several passes), after a head of the other tiles fused or in pass mode
/// (pass mode where e.pass_mode_s is set). The tail is a second launch of the kernel, after the head's:
/// the time is the head's waves (its units in waves of sm_count: npass pass times each fused, one in pass
/// mode), the tail's (T x npass x Z units of ceil(kt / Z) / kt pass times), plan_tail_launch_seconds,
/// `pre` (flat tiles' packing), the pass head's combine as in pass mode (over the head's pixels), and the
/// tail's fixup as partial mode's (2 x Z x its pixels x K x 4 bytes at split_workspace_bytes_per_s, and
/// split_fixed_seconds), for Z x its pixels x K x 4 bytes within `max_workspace_bytes`. For a head of w
/// waves only the fewest tail tiles are tried (w one to three waves short of the head alone), so the
/// search is a few times kt estimates. The least such time, when below the unsplit estimate, sets
/// e.tail_tiles, e.tail_splits, e.tail_s and (the head's mode) e.pass_mode. `options` (plan_options):
/// tail -1 never, t > 0 the last min(t, tiles - 1) tiles whatever the time and the SM count (its
/// tail_splits, else the best Z in [1, kt]; pass off / on: a fused / pass-mode head, the latter where
/// pass mode applies), where the tiles allow a tail (tail_serves, 2 tiles or more, not 3xTF32).
template <class Policy>
void choose_wgmma_tail(const conv2d_problem& p, const block::wgmma_conv_params& k, int sm_count, double pre,
                       double pass_s, std::size_t max_workspace_bytes, wgmma_split_estimate& e,
                       const plan_options& options = {}) {
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  const plan_options& o = options;
  // (3xTF32: no tail; see kernel::conv2d_reduce_wgmma_kernel)
  if (o.tail < 0 || Policy::parts == 2 || !mainloop::tail_serves(k) || k.tiles < 2) return;
  const std::int64_t M = p.gemm_m(), sms = sm_count;
  double best = e.pass_mode ? e.pass_mode_s : e.fused_s;  // the unsplit choice
  const bool forced = o.tail > 0;
  if (forced) best = std::numeric_limits<double>::infinity();
  // the head's modes: fused, pass mode where it applies (options' pass: off fused only, on pass mode where
  // it applies)
  const bool passes = e.pass_mode_s > 0;
  for (int pass_head = o.pass == wgmma_pass_mode::on && passes ? 1 : 0;
       pass_head <= (passes && o.pass != wgmma_pass_mode::off ? 1 : 0); ++pass_head) {
    const std::int64_t per_head = pass_head ? k.npass : 1;
    const double head_s = pass_head ? pass_s : k.npass * pass_s;
    // Tails to try: for a head of w waves the fewest tail tiles (more only lengthen the tail and its
    // fixup), w = W - 1, W - 2, W - 3 of the W waves the head's units alone would take; or the options'.
    std::int64_t tails[3];
    int n = 0;
    if (forced) {
      tails[n++] = std::min<std::int64_t>(o.tail, k.tiles - 1);
    } else {
      const std::int64_t W = (k.tiles * per_head + sms - 1) / sms;
      for (std::int64_t w = W - 1; w >= W - 3 && w >= 1; --w) {
        const std::int64_t head = std::min<std::int64_t>(w * sms / per_head, k.tiles - 1);
        if (head >= 1) tails[n++] = k.tiles - head;
      }
    }
    for (int i = 0; i < n; ++i) {
      const std::int64_t T = tails[i];
      const std::int64_t pixels = M - mainloop::first_pixel(k, k.tiles - T);  // the tail's
      const double combine = pass_head ? 2.0 * k.npass * static_cast<double>(M - pixels) * pass_state_bytes /
                                                 split_workspace_bytes_per_s +
                                             split_fixed_seconds
                                       : 0.0;
      const int z_lo = forced ? (o.tail_splits > 0 ? std::min(o.tail_splits, k.kt) : 1) : (pass_head || k.npass == 1 ? 2 : 1);
      const int z_hi = forced && o.tail_splits > 0 ? z_lo : k.kt;
      for (int z = z_lo; z <= z_hi; ++z) {
        const double sums = static_cast<double>(z) * static_cast<double>(pixels) * static_cast<double>(p.K) * 4.0;
        if (!forced && sums > static_cast<double>(max_workspace_bytes)) break;
        const double tail_unit = pass_s * static_cast<double>((k.kt + z - 1) / z) / k.kt;
        const double waves = std::ceil(static_cast<double>((k.tiles - T) * per_head) / sms) * head_s +
                             std::ceil(static_cast<double>(T * k.npass * z) / sms) * tail_unit;
        const double t = pre + combine + 2.0 * sums / split_workspace_bytes_per_s + split_fixed_seconds +
                         plan_tail_launch_seconds + waves;
        if (t < best) best = t, e.tail_tiles = T, e.tail_splits = z, e.tail_s = t, e.pass_mode = pass_head != 0;
      }
    }
  }
}

/// @brief The wave model of the wgmma kernel, fused and in partial (split-K) mode, for problem p with the
/// parameters k that block::conv_mainloop_wgmma<Policy>::make_params made for it, on a GPU of `sm_count`
/// SMs, at `speed` times the TF32 rate (plan_math_speed).
///
/// Both run one persistent block per SM over their work units, in waves of sm_count units. A pass of a
/// tile (block_m computed pixels x 128 channels x GEMM_K = C*R*S) takes 2 * block_m * 128 * GEMM_K FLOP
/// at plan_wgmma_flops_per_sm * speed (times plan_wgmma_gather_slowdown when x is gathered). Fused: one
/// unit per tile of npass passes: ceil(tiles / sm_count) waves of npass pass times. Partial mode with Z
/// splits (1 <= Z <= kt): tiles x npass x Z units of ceil(kt / Z) of the pass's kt stages, in
/// ceil(units / sm_count) waves, plus the fixup: 2 x Z * N*P*Q * K * 4 bytes of partial sums written and
/// read at split_workspace_bytes_per_s, and split_fixed_seconds. The split is considered only when the
/// fused kernel has fewer tiles than SMs and for Z whose partial sums fit `max_workspace_bytes` (64 MiB
/// by default, as choose_k_splits); the Z with the least estimate (the smallest on ties) is chosen when
/// it is below the fused estimate. Example (132 SMs, tf32): ResNet-50 layer3 3x3 at batch 32 (x (32,
/// 256, 14, 14), K = 256: 32 tiles of 16 x 16, 2 passes of 32 stages, x gathered (W % 4 != 0), so at
/// plan_wgmma_gather_slowdown): fused 201 us; 2 splits: 128 units in one wave of 50 us, 12.8 MB of partial
/// sums (8.6 us) + 5 us = 64 us (tests/test_plan_host.cu checks these numbers). Flat tiles
/// (wgmma_conv_params::flat) add the packing pass to both: x and the packed planes at
/// plan_xpack_bytes_per_s, plus plan_xpack_fixed_seconds.
/// When the tiles fill the GPU (tiles >= sm_count), only a split-K tail over the last wave's tiles is
/// considered (choose_wgmma_tail: e.tail_tiles, e.tail_splits, e.tail_s), after a fused or pass-mode head.
/// `options` (plan_options) may force these choices: pass, where pass mode applies and sm_count > 0: off
/// never pass mode, on pass mode and no split (a tail only where options' tail forces one); splits and tail
/// as plan_options says.
/// @return splits = 0 (unsplit: fused, pass mode, or a tail after either) when sm_count <= 0 (unknown),
///   the tiles fill the GPU, or no split is estimated faster; fused_s is always set.
template <class Policy>
wgmma_split_estimate choose_wgmma_splits(const conv2d_problem& p, const block::wgmma_conv_params& k, int sm_count,
                                         double speed = 1.0,
                                         std::size_t max_workspace_bytes = default_split_workspace_limit,
                                         const plan_options& options = {}) {
  wgmma_split_estimate e;
  const double rate = plan_wgmma_flops_per_sm * speed / (k.gather ? plan_wgmma_gather_slowdown : 1.0) /
                      (k.direct && k.stride == 2 ? plan_wgmma_direct_s2_slowdown : 1.0);
  const double pass_s = 2.0 * Policy::block_m * Policy::block_n * static_cast<double>(p.gemm_k()) / rate;
  const double sms = sm_count > 0 ? sm_count : 1;
  // flat tiles: the packing pass first (x read, the packed planes written)
  const double pre = k.flat ? plan_xpack_fixed_seconds +
                                  (4.0 * static_cast<double>(p.x_elements()) +
                                   static_cast<double>(block::conv_mainloop_wgmma<Policy>::xpack_bytes(k))) /
                                      plan_xpack_bytes_per_s
                            : 0.0;
  e.fused_s = pre + std::ceil(static_cast<double>(k.tiles) / sms) * k.npass * pass_s;
  // pass mode: tiles x npass units of one pass each, then the combine of npass states per pixel
  if (sm_count > 0 && k.npass > 1 && Policy::parts == 1) {
    e.pass_mode_s = pre + std::ceil(static_cast<double>(k.tiles) * k.npass / sms) * pass_s +
                    2.0 * k.npass * static_cast<double>(p.gemm_m()) * pass_state_bytes / split_workspace_bytes_per_s +
                    split_fixed_seconds;
    e.pass_mode = e.pass_mode_s < e.fused_s;
    const wgmma_pass_mode forced = options.pass;
    if (forced == wgmma_pass_mode::off) e.pass_mode = false;
    if (forced == wgmma_pass_mode::on) {
      e.pass_mode = true;
      if (options.tail > 0) choose_wgmma_tail<Policy>(p, k, sm_count, pre, pass_s, max_workspace_bytes, e, options);
      return e;
    }
  }
  const double plane = static_cast<double>(p.gemm_m()) * static_cast<double>(p.K) * 4.0;  // bytes per split
  auto split_time = [&](int z) {
    const double stages = static_cast<double>((k.kt + z - 1) / z);
    return pre + std::ceil(static_cast<double>(k.tiles * k.npass * z) / sms) * pass_s * stages / k.kt +
           2.0 * z * plane / split_workspace_bytes_per_s + split_fixed_seconds;
  };
  if (const int z = options.splits; z > 0 && k.kt >= 1 && k.tiles > 0) {  // forced
    e.splits = z < k.kt ? z : k.kt, e.split_s = split_time(e.splits), e.units = k.tiles * k.npass * e.splits;
    e.pass_mode = false;
    return e;
  }
  if (sm_count <= 0 || k.tiles <= 0 || k.kt < 1) return e;
  if (k.tiles >= sm_count || options.tail > 0) {  // enough tiles: at most a split-K tail
    choose_wgmma_tail<Policy>(p, k, sm_count, pre, pass_s, max_workspace_bytes, e, options);
    return e;
  }
  const double unsplit = e.pass_mode ? e.pass_mode_s : e.fused_s;
  for (int z = 1; z <= k.kt; ++z) {
    if (static_cast<double>(z) * plane > static_cast<double>(max_workspace_bytes)) break;
    const double t = split_time(z);
    if (t < unsplit && (e.splits == 0 || t < e.split_s)) e.splits = z, e.split_s = t, e.units = k.tiles * k.npass * z;
  }
  if (e.splits > 0) e.pass_mode = false;
  return e;
}



/// @brief The wgmma kernel's parameters for p (block::conv_mainloop_wgmma<Policy>::make_params, with
/// `tail_bytes` of reduction state and `max_smem` bytes of shared memory): tiles of image rows, or, when
/// `allow_flat` and the time model (choose_wgmma_splits on `sm_count` SMs at plan_math_speed) estimates
/// them faster, flat tiles over x packed beforehand (wgmma_conv_params::flat: the packing pass counted).
/// Flat tiles win where row tiles waste most of their pixels or gather x: small images (ResNet-50's 7 x 7
/// and 14 x 14 layers), 1 x 1 stride 2, strides 2 on small inputs; row tiles where x is large against the
/// work (the seed problem: packing would add ~0.5 ms). Then, with `allow_flat`, direct tiles
/// (block::conv_mainloop_wgmma::make_direct_params: tf32 1x1 without padding, x read from NCHW with no
/// packing pass) replace either where they serve and the model estimates them no slower: at stride 1,
/// or at stride 2 (counted plan_wgmma_direct_s2_slowdown times slower) when the model also runs them in
/// partial mode. The choice assumes the model's mode: a caller of conv2d_reduce_packed_split who passes
/// another split count runs the same tiles (correct, but at stride 2 possibly slower than flat ones).
/// `options` (plan_options) may force the tiles where they serve, and reach choose_wgmma_splits's
/// estimates.
/// @return whether the kernel serves p (k and smem then set)
template <class Policy>
bool choose_wgmma_params(const conv2d_problem& p, std::size_t tail_bytes, std::size_t max_smem, int sm_count,
                         bool allow_flat, block::wgmma_conv_params& k, std::size_t& smem,
                         const plan_options& options = {}) {
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  block::wgmma_conv_params rect, flat;
  std::size_t rect_smem = 0, flat_smem = 0;
  const bool has_rect = mainloop::make_params(p, tail_bytes, max_smem, rect, rect_smem);
  const bool has_flat = allow_flat && mainloop::make_params(p, tail_bytes, max_smem, flat, flat_smem, true);
  if (!has_rect && !has_flat) return false;
  auto estimate = [&](const block::wgmma_conv_params& c) {
    return choose_wgmma_splits<Policy>(p, c, sm_count, plan_math_speed<typename Policy::math>(),
                                       default_split_workspace_limit, options);
  };
  auto best = [&](const block::wgmma_conv_params& c) {
    const wgmma_split_estimate e = estimate(c);
    return e.splits > 0 ? e.split_s : e.tail_tiles > 0 ? e.tail_s : e.pass_mode ? e.pass_mode_s : e.fused_s;
  };
  // (a 1 x 1 filter with x gathered leaves the row tiles' producer no time at all: plan_wgmma_gather_slowdown
  // understates it, so flat tiles take it whenever they serve); options' tiles may force either where it
  // serves
  // Two rules measured on the H200, where the wave model's FLOP-rate stages miss the row tiles' own bound
  // (bench/NOTES.md, "Moved from header comments"): flat tiles for a 1x1 filter whose flat stages hold
  // wgmma_max_group slices, or any 1x1 filter under 3xTF32 (row-tile stages of one tap are bound by the
  // transform of x), and for 16-bit math with x gathered at stride 2 (two producer warpgroups converting
  // what they gather); stride 1 with W % 4 != 0 is left to the model
  const bool measured = has_flat && has_rect &&
                        ((p.R * p.S == 1 && (flat.group == block::wgmma_max_group || Policy::parts == 2)) ||
                         (rect.gather && rect.stride == 2 && !Policy::is_tf32));
  const wgmma_tiling forced = options.tiles;
  const bool flat_wins = has_flat && (!has_rect || forced == wgmma_tiling::flat ||
                                      (forced != wgmma_tiling::rows && (measured || (rect.gather && p.R * p.S == 1) ||
                                                                        best(flat) < best(rect))));
  k = flat_wins ? flat : rect, smem = flat_wins ? flat_smem : rect_smem;
  // direct tiles (tf32 1x1, no packing pass) where they serve and the model has them no slower. At stride
  // 2 their boxes carry the odd columns, and each channel pass loads them again: there the model counts
  // them plan_wgmma_direct_s2_slowdown times slower, and they are taken only in partial (split-K) mode,
  // short units on a small problem where the packing pass is a large part of the run; where the units
  // fill the GPU they were slower (bench/NOTES.md, "Moved from header comments")
  block::wgmma_conv_params direct;
  std::size_t direct_smem = 0;
  if (allow_flat && forced != wgmma_tiling::rows && forced != wgmma_tiling::flat &&
      mainloop::make_direct_params(p, tail_bytes, max_smem, direct, direct_smem) &&
      (forced == wgmma_tiling::direct || ((p.stride_h == 1 || estimate(direct).splits > 0) && best(direct) <= best(k))))
    k = direct, smem = direct_smem;
  return true;
}

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
  /// unsplit runs of conv2d_reduce_packed_split take pass mode (choose_wgmma_splits estimates it faster
  /// than the fused kernel; `chosen` plans only); with a tail, the head's mode
  bool pass_mode = false;
  /// unsplit runs of conv2d_reduce_packed_split end with a split-K tail of this many tiles (`chosen`
  /// plans only: choose_wgmma_splits's tail_tiles; 0: none)
  std::int64_t tail_tiles = 0;
  int tail_splits = 0;          ///< GEMM_K splits of the tail
  std::int64_t tail_pixels = 0; ///< output pixels of the tail tiles, N*P*Q - conv_mainloop_wgmma::first_pixel
};

/// Shared memory after the stages: the reduction state of Op or of argmin (the largest standard state),
/// whichever is larger, so that whether a problem is served does not depend on the standard op.
template <class Policy, class Op>
constexpr std::size_t wgmma_tail_bytes() {
  const std::size_t a = sizeof(kernel::wgmma_tail_storage<Policy, Op>);
  const std::size_t b = sizeof(kernel::wgmma_tail_storage<Policy, op::argmin>);
  return a > b ? a : b;
}

/// Which tiles detail::wgmma_plan considers: `rows` only tiles of image rows (conv2d_reduce_packed, which
/// has no workspace for a packed x); `either` rows where they serve, else flat tiles (the packed filter's
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
    if (tiles == wgmma_tiles::either) {
      plan.served = rows() || flat();
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
/// (rp, block_c * group, tile_rows, 1), and zero fill outside the tensor, encoded with the driver's cuTensorMapEncodeTiled (found through the
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
  const cuuint64_t W = static_cast<cuuint64_t>(k.W), H = static_cast<cuuint64_t>(k.H), C = static_cast<cuuint64_t>(k.C);
  // row tiles: dims (W, H, C, N), box (rp, bh, raw_c, 1); direct tiles: dims (W, C, P rows `stride`
  // input rows apart, N), box (rp, block_c * group, tile_rows, 1), landing as [row][channel][column]
  const cuuint64_t dims[4] = {W, static_cast<cuuint64_t>(k.direct ? k.C : k.H),
                              static_cast<cuuint64_t>(k.direct ? k.P : k.C), static_cast<cuuint64_t>(k.N)};
  const cuuint64_t strides[3] = {k.direct ? W * H * 4 : W * 4, k.direct ? W * 4 * static_cast<cuuint64_t>(k.stride) : W * H * 4,
                                 W * H * C * 4};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(k.rp),
                             static_cast<cuuint32_t>(k.direct ? Policy::block_c * k.group : k.bh),
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
/// work units: first, when `pack_tiles` > 0 (flat tiles), kernel::pack_x_kernel for that many tiles into
/// k.xpack; then the persistent kernel, one block per SM (at most one per unit), in the variant the
/// parameters need (the gathering one also for flat tiles at stride 2, whose taps read stride phases; the
/// direct one for direct tiles), as
/// a programmatic dependent launch of the kernel before it when `dependent` (after the packing pass, or a
/// split-K tail after the head's launch). `refused` is set (and success returned, nothing launched) when
/// the driver refuses x's tensor map: the caller runs its fallback. `Direct` = false (conv2d_reduce_packed,
/// whose parameters are row tiles) leaves the direct tiles' kernel out of the build.
template <class Policy, bool Direct = true, class Op, class Epilogue>
status launch_wgmma(const block::wgmma_conv_params& k, std::size_t smem, std::int64_t units, Op op, Epilogue epi,
                    float* y, std::int64_t* indices, cudaStream_t stream, bool& refused, std::int64_t pack_tiles = 0,
                    bool dependent = false) {
  refused = false;
  CUtensorMap x_map{};  // used by the TMA producer only
  if (!k.gather && !k.flat && !make_x_tensor_map<Policy>(x_map, k.x, k)) {
    refused = true;
    return status::success;
  }
  const bool phased = k.gather || (k.flat && k.stride != 1);
  auto kern = phased ? kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, true>
                     : kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false>;
  if constexpr (Direct && Policy::is_tf32 && Policy::parts == 1) {  // (only tf32 makes direct parameters)
    if (k.direct) kern = kernel::conv2d_reduce_wgmma_kernel<Policy, Op, Epilogue, false, true>;
  }
  if (status s = check_device(kern, smem); s != status::success) return s;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return status::cuda_error;
  if (pack_tiles > 0) {
    auto pack = kernel::pack_x_kernel<Policy>;
    if (status s = check_device(pack); s != status::success) return s;
    // a block row per (tile, stage) block of the packed x, 256 of its first part's 16-byte entries per block
    const dim3 grid(static_cast<unsigned>(pack_tiles * k.kt), static_cast<unsigned>((k.part_bytes / 16 + 255) / 256));
    pack<<<grid, 256, 0, stream>>>(k.x, const_cast<void*>(k.xpack), k);
    if (status s = launch_status(); s != status::success) return s;
  }
  const std::int64_t grid = units < sms ? units : sms;
  const int threads = phased ? kernel::wgmma_block<Policy, true>::threads : kernel::wgmma_block<Policy, false>::threads;
  launch_kernel(dependent || pack_tiles > 0, kern, dim3(static_cast<unsigned>(grid)), dim3(threads), smem, stream, x_map,
                k, op, epi, y, indices);
  return launch_status();
}

/// Offset of the packed x (flat tiles), then of the partial sums, in conv2d_reduce_packed_split's
/// workspace: the packed filter's `packed` bytes rounded up to a multiple of 16 (0 when nothing is packed).
inline std::size_t partial_offset(std::size_t packed) { return (packed + 15) / 16 * 16; }

/// Bytes of pass mode's reduction states (npass x N*P*Q x pass_state_bytes, rounded up to a multiple of
/// 16: the partial sums of a split-K tail follow them); 0 without pass mode.
inline std::int64_t pass_states_bytes(const conv2d_problem& p, bool pass_states) {
  return pass_states ? ((p.K + 127) / 128 * p.gemm_m() * static_cast<std::int64_t>(pass_state_bytes) + 15) / 16 * 16 : 0;
}

/// The size of conv2d_reduce_packed_split's workspace for p on a served plan: partial_offset(packed) +
/// `xpack` bytes of packed x (flat tiles; a multiple of 16) + splits * N*P*Q * K * 4 bytes of partial sums
/// (splits > 0); with splits = 0: pass mode's states (`pass_states`: npass x N*P*Q, pass_states_bytes;
/// a split-K tail's pixels keep theirs unused), then a split-K tail's partial sums (tail_splits x
/// tail_pixels x K x 4 bytes). 0 when it overflows int64. (N*P*Q*K*4 was validated to fit int64: y's and the conv's sizes;
/// splits and tail_splits are at most kt <= C.)
inline std::size_t packed_split_bytes(const conv2d_problem& p, std::size_t packed, std::size_t xpack, int splits,
                                      bool pass_states = false, std::int64_t tail_pixels = 0, int tail_splits = 0) {
  std::int64_t plane = 0, sums = 0;
  const std::int64_t head = static_cast<std::int64_t>(partial_offset(packed) + xpack);
  const std::int64_t pixels = splits > 0 ? p.gemm_m() : tail_pixels, z = splits > 0 ? splits : tail_splits;
  const std::int64_t states = splits > 0 ? 0 : pass_states_bytes(p, pass_states);
  const bool ok = convred::detail::mul_ok(pixels * p.K, 4, plane) && convred::detail::mul_ok(plane, z, sums);
  if (!ok || sums > std::numeric_limits<std::int64_t>::max() - head - states) return 0;
  return static_cast<std::size_t>(head + states + sums);
}

}  // namespace detail

/// @brief Bytes of the packed filter that conv2d_reduce_packed needs for problem p on the current device.
///
/// Zero when the wgmma kernel cannot serve p, in tiles of image rows or flat tiles (then
/// conv2d_reduce_packed and conv2d_reduce_packed_split run `Policy::fallback`, the mma.sync tensor-core
/// kernel with the same math, on the KCRS weights w, and need no packed filter). The packed filter does not
/// depend on the tiles.
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
  return detail::packed_bytes<Policy>(detail::wgmma_plan<Policy, T, op::argmin>(p, detail::wgmma_tiles::either));
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
/// This entry point has no workspace for a packed x, so it runs tiles of image rows only. When they do
/// not serve p (packed_filter_bytes<Policy, T>(p) is 0, or > 0 only because flat tiles fit, which
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
/// 0 (the fused kernel) and 1 to the stages per channel pass of the tiles it runs (kt: ceil(C / block_c),
/// or for flat or direct tiles of a 1x1 filter, whose stages hold wgmma_conv_params::group slices of block_c
/// channels, that over the group), when the wgmma kernel serves p (every split at least one stage); 0 to
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
/// (conv2d_reduce_split_workspace_bytes<T>(p, splits); 0 for splits = 0). Example: ResNet-50 layer3 3x3, x
/// (32, 256, 14, 14), K = 256, tf32, 2 splits: 2,359,296 bytes of packed filter, the packed x if flat, then
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
  if (!plan.served) return splits == 0 ? 0 : conv2d_reduce_split_workspace_bytes<T>(p, splits);
  if (splits > plan.k.kt) return 0;
  return detail::packed_split_bytes(p, detail::packed_bytes<Policy>(plan),
                                    block::conv_mainloop_wgmma<Policy>::xpack_bytes(plan.k), splits,
                                    splits == 0 && plan.pass_mode, plan.tail_pixels, plan.tail_splits);
}

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
/// @return status::success after the launches (or for N = 0, with no launch); otherwise the first problem
///   found, with nothing launched: validate(p)'s codes; indices_not_supported; invalid_argument (splits
///   outside [0, kt]); null_pointer (x, w or workspace null, or both y and indices); misaligned_pointer (a
///   pointer not aligned to its element type, the workspace not to 16 bytes); size_overflow (the workspace
///   size overflows int64, or the fixup's grid is above 2^31 - 1 blocks); workspace_too_small
///   (workspace_bytes below packed_split_workspace_bytes); overlapping_buffers (y, indices, the packed x or
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
                                  cudaStream_t stream = nullptr, const plan_options& options = {}) {
  static_assert(is_supported_element_v<T>, "convred: T must be float, double, __half or __nv_bfloat16");
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
  const std::size_t off = detail::partial_offset(packed);
  // the mma.sync path, its partial sums after the packed filter (none when not served)
  auto fallback = [&] {
    if (splits == 0) return conv2d_reduce<typename Policy::fallback>(p, x, w, bias, y, indices, op, epi, stream);
    void* part = workspace ? static_cast<unsigned char*>(workspace) + off : nullptr;
    return conv2d_reduce_split<typename Policy::fallback>(p, x, w, bias, y, indices, part,
                                                          workspace_bytes > off ? workspace_bytes - off : 0, splits,
                                                          op, epi, stream);
  };
  if (!plan.served) return fallback();
  if constexpr (!Op::has_index) {
    if (indices) return status::indices_not_supported;
  }
  if (splits < 0 || splits > plan.k.kt) return status::invalid_argument;
  // TMA reads x from a 16-byte aligned base: any other x (legal for float) takes the fallback too
  if (!plan.k.gather && !plan.k.flat && reinterpret_cast<std::uintptr_t>(x) % 16 != 0) return fallback();
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t ny = p.y_elements();
    if (ny == 0) return status::success;
    if (!x || !w || !workspace || (!y && !indices)) return status::null_pointer;
    if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0) return status::misaligned_pointer;
    const std::size_t xbytes = block::conv_mainloop_wgmma<Policy>::xpack_bytes(plan.k);
    using state_t = typename Op::template accum_t<float>;
    const bool pass = splits == 0 && plan.pass_mode && sizeof(state_t) <= pass_state_bytes;
    // partial sums: of every pixel (splits > 0), of a split-K tail's [m0, ny) (splits = 0), or none
    const bool tail = splits == 0 && plan.tail_tiles > 0 && Policy::parts == 1;  // (never under 3xTF32)
    const int zs = splits > 0 ? splits : tail ? plan.tail_splits : 0;
    const std::int64_t sum_pixels = splits > 0 ? ny : tail ? plan.tail_pixels : 0, m0 = ny - sum_pixels;
    const std::size_t need = detail::packed_split_bytes(p, packed, xbytes, splits, pass, tail ? plan.tail_pixels : 0,
                                                        tail ? plan.tail_splits : 0);
    if (need == 0) return status::size_overflow;
    if (workspace_bytes < need) return status::workspace_too_small;
    const std::int64_t fixup_blocks = std::max<std::int64_t>(zs > 0 ? kernel::split_fixup_blocks(sum_pixels, p.K) : 0,
                                                             (m0 + 255) / 256);
    unsigned char* xpack = static_cast<unsigned char*>(workspace) + off;
    auto* states = reinterpret_cast<state_t*>(xpack + xbytes);  // pass mode's states, then the partial sums
    float* partial = reinterpret_cast<float*>(xpack + xbytes + detail::pass_states_bytes(p, pass));
    const detail::buffer_arg args[] = {
        detail::input(x, p.x_elements()), detail::input(w, p.w_elements()), detail::input(bias, p.K),
        detail::input(static_cast<const unsigned char*>(workspace), static_cast<std::int64_t>(packed)),
        detail::output(y, ny), detail::output(indices, ny),
        detail::output(xpack, static_cast<std::int64_t>(xbytes)),
        detail::output(partial, std::int64_t(zs) * sum_pixels * p.K),
        detail::output(states, pass ? std::int64_t(plan.k.npass) * ny : 0)};
    if (status s = detail::check_buffers(args, fixup_blocks); s != status::success) return s;
    block::wgmma_conv_params k = plan.k;
    k.x = x, k.filter = workspace, k.xpack = xbytes ? xpack : nullptr;
    k.bias = splits == 0 ? bias : nullptr;  // partial mode: the bias is the fixup's
    if (splits > 0) k.partial = partial, k.splits = splits;
    if (pass) k.states = states;
    auto fixup_kern = kernel::conv2d_reduce_split_fixup_kernel<T, Op, Epilogue, float>;
    auto combine_kern = kernel::conv2d_reduce_pass_combine_kernel<T, Op>;
    if (zs > 0)
      if (status s = detail::check_device(fixup_kern); s != status::success) return s;
    if (pass)
      if (status s = detail::check_device(combine_kern); s != status::success) return s;
    // the head: every tile, or all but a split-K tail's (fused: y and indices written by the kernel)
    const std::int64_t head_tiles = k.tiles - (tail ? plan.tail_tiles : 0);
    block::wgmma_conv_params head = k;
    head.tiles = head_tiles;
    const std::int64_t head_units = splits > 0 ? k.tiles * splits * k.npass : pass ? head_tiles * k.npass : head_tiles;
    const bool direct = splits == 0 && !pass;
    bool refused = false;
    status s = detail::launch_wgmma<Policy>(head, plan.smem_bytes, head_units, op, epi, direct ? y : static_cast<float*>(nullptr),
                                            direct ? indices : static_cast<std::int64_t*>(nullptr), stream, refused,
                                            k.flat ? k.tiles : 0);  // (the packing pass: every tile's)
    if (refused) return fallback();  // the driver refused x's tensor map
    if (s != status::success) return s;
    if (tail) {  // the last tiles in partial mode, right after the head (a programmatic dependent launch)
      block::wgmma_conv_params last = k;
      last.tile0 = head_tiles, last.tiles = plan.tail_tiles, last.states = nullptr, last.bias = nullptr;
      last.partial = partial, last.splits = zs, last.partial_m0 = m0;
      s = detail::launch_wgmma<Policy>(last, plan.smem_bytes, plan.tail_tiles * zs * k.npass, op, epi, static_cast<float*>(nullptr),
                                       static_cast<std::int64_t*>(nullptr), stream, refused, 0, true);
      if (s != status::success || refused) return refused ? status::cuda_error : s;  // (the same map was accepted)
    }
    if (direct && !tail) return s;
    if (pass)  // the head's pixels [0, m0)
      detail::launch_kernel(true, combine_kern, dim3(static_cast<unsigned>((m0 + 255) / 256)), dim3(256), 0, stream,
                            states, k.npass, m0, ny, p.K, op, y, indices);
    if (zs > 0)  // the partial sums' pixels [m0, ny)
      detail::launch_split_fixup(static_cast<const float*>(partial), zs, sum_pixels, static_cast<std::int32_t>(p.K), bias,
                                 op, epi, y ? y + m0 : y, indices ? indices + m0 : indices, stream);
    return detail::launch_status();
  } else {
    return fallback();  // unreachable: only float is served
  }
}

}  // namespace convred::device
