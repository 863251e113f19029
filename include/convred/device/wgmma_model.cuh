/// @file device/wgmma_model.cuh
/// @brief The planner's time model of the Hopper wgmma kernel (host only, no CUDA call; its rates in
/// cost_model.cuh): the estimates of its fused, pass and partial (split-K) modes and of a split-K tail (choose_wgmma_splits,
/// choose_wgmma_tail), and the choice of its tiles (choose_wgmma_params).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../block/wgmma_conv_params.cuh"
#include "../plan/wgmma_params.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "conv2d_reduce_split.cuh"
#include "cost_model.cuh"
#include "plan_options.cuh"

namespace convred::device {

// The planner's time model of the wgmma kernel (conv2d_reduce_plan), for choosing between the wgmma
// kernel's modes (fused, pass mode, partial (split-K) mode: choose_wgmma_splits, a split-K tail) and, with
// plan_wgmma_fixed_seconds added (family::wgmma), against the mma.sync kernel's model
// (plan_conv2d_reduce_seconds). Times are estimates for comparisons, not predictions to the microsecond.
// Its rates (plan_wgmma_*, plan_xpack_*, plan_math_speed, its partial sums' split_workspace_bytes_per_s
// and split_fixed_seconds, ...) are in cost_model.cuh.

/// Bytes of one reduction state in the wgmma kernel's pass mode (wgmma_conv_params::states): the largest
/// standard op state, argmin's (value, index); an op with a larger state runs fused instead.
inline constexpr std::size_t pass_state_bytes = 8;

/// The most GEMM_K ranges the time model weighs for a split (partial mode, a split-K tail) unless a count is
/// forced. A pass's kt stages exceed it only where C/groups x R is above 32,768 (C = 8192 with 11 filter
/// rows on the direct tiles: kt = 11,264), and more ranges than 4096 keep their partial sums within the
/// 64 MiB cap only where GEMM_M x K is below 4096: splits that fine never pay. It bounds the planner's search
/// on input near validate()'s limits.
inline constexpr int wgmma_max_k_ranges = 4096;


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


/// @brief The split-K tail's part of choose_wgmma_splits (tiles >= sm_count, or fewer tiles whose pass-mode
/// units fill the SMs; the estimate e's fused and pass mode times set; not under 3xTF32, whose consumers spill with the tail's offsets: kernel::conv2d_reduce_wgmma_kernel): for
/// tiles that cover contiguous output pixels (conv_mainloop_wgmma::tail_serves),
/// the last T tiles in partial mode with Z GEMM_K splits (1 <= Z <= min(kt, wgmma_max_k_ranges); Z = 1 only after a fused head of
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
/// tail_splits, else the best Z in [1, min(kt, wgmma_max_k_ranges)]; pass off / on: a fused / pass-mode head, the latter where
/// pass mode applies), where the tiles allow a tail (tail_serves, 2 tiles or more, not 3xTF32).
template <class Policy>
void choose_wgmma_tail(const conv2d_problem& p, const block::wgmma_conv_params& k, int sm_count, double pre,
                       double pass_s, std::size_t max_workspace_bytes, wgmma_split_estimate& e,
                       const plan_options& options = {}) {
  using mainloop = plan::wgmma_params<Policy>;
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
      const int z_hi = forced && o.tail_splits > 0 ? z_lo : std::min(k.kt, wgmma_max_k_ranges);
      for (int z = z_lo; z <= z_hi; ++z) {
        const double sums = static_cast<double>(z) * static_cast<double>(pixels) * static_cast<double>(p.K) * 4.0;
        if (!forced && sums > static_cast<double>(max_workspace_bytes)) break;
        const double tail_unit = pass_s * static_cast<double>((k.kt + z - 1) / z) / k.kt;
        const double waves = std::ceil(static_cast<double>((k.tiles - T) * per_head) / sms) * head_s +
                             std::ceil(static_cast<double>(T) * k.npass * z / sms) * tail_unit;
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
/// tile (block_m computed pixels x 128 channels x GEMM_K = C'*R*S, C' = C rounded up to whole stages:
/// kt x group x block_c) takes 2 * block_m * 128 * GEMM_K FLOP at plan_wgmma_flops_per_sm * speed (times
/// plan_wgmma_gather_slowdown when x is gathered), or on row tiles the producer's conversion of the pass's
/// raw patch (ph x pw pixels x C' x 4 bytes at plan_wgmma_convert_bytes_per_sm) where that is longer. Fused: one
/// unit per tile of npass passes: ceil(tiles / sm_count) waves of npass pass times. Partial mode with Z
/// splits (1 <= Z <= min(kt, wgmma_max_k_ranges), or a forced Z up to kt): tiles x npass x Z units of ceil(kt / Z) of the pass's kt stages, in
/// ceil(units / sm_count) waves, plus the fixup: 2 x Z * N*P*Q * K * 4 bytes of partial sums written and
/// read at split_workspace_bytes_per_s, and split_fixed_seconds. The split is considered only when the
/// fused kernel has fewer tiles than SMs and for Z whose partial sums fit `max_workspace_bytes` (64 MiB
/// by default, as choose_k_splits; under 3xTF32, which has no pass mode, x's size where that is larger); the Z with the least estimate (the smallest on ties) is chosen when
/// it is below the fused estimate. Example (132 SMs, tf32): ResNet-50 layer3 3x3 at batch 32 (x (32,
/// 256, 14, 14), K = 256: 32 tiles of 16 x 16, 2 passes of 32 stages, x gathered (W % 4 != 0), so at
/// plan_wgmma_gather_slowdown): fused 201 us; 2 splits: 128 units in one wave of 50 us, 12.8 MB of partial
/// sums (8.6 us) + 5 us = 64 us (tests/test_plan_host.cu checks these numbers). Flat tiles
/// (wgmma_conv_params::flat) add the packing pass to both: x and the packed planes at
/// plan_xpack_bytes_per_s, plus plan_xpack_fixed_seconds (direct_taps tiles that read a copy of x likewise:
/// W % 4 != 0, or bf16 / fp16 channel pairs; plan::wgmma_params::x_copied). Direct_taps tiles (dilated
/// filters; 3xTF32 filters too large for other stages) run only their live stages (the share of (tile, filter
/// row) pairs that read x: wgmma_conv_params::row_live), a pass the longer of their tensor work and their
/// bytes at plan_wgmma_direct_feed_bytes_per_sm.
/// When the tiles fill the GPU (tiles >= sm_count), only a split-K tail over the last wave's tiles is
/// considered (choose_wgmma_tail: e.tail_tiles, e.tail_splits, e.tail_s), after a fused or pass-mode head;
/// with fewer tiles whose pass-mode units fill it (tiles x npass >= sm_count), a tail after a pass-mode head
/// is weighed against partial mode too (the least estimate wins).
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
  // a pass computes and converts C rounded up to whole stages: kt stages of group x block_c channels (a
  // C = 3 stem computes 8 channels in TF32, 16 in bf16)
  const double channels = static_cast<double>(k.kt / k.row_stages()) * k.group * Policy::block_c;
  // row tiles (not gathered): the producer converts each pass's raw patch of x, ph x pw pixels of those
  // channels in fp32, at plan_wgmma_convert_bytes_per_sm, while the consumers multiply: a pass takes the
  // longer of the two (1x1 filters at 16-bit speed are bound by it)
  const double convert_s =
      !k.flat && !k.direct && !k.gather ? 4.0 * k.ph * k.pw * channels / plan_wgmma_convert_bytes_per_sm : 0.0;
  // direct_taps: the live share of the (tile, filter row) stages (row_live; the rest are skipped), and
  // their bytes at plan_wgmma_direct_feed_bytes_per_sm (a fitted rate; L2 is not the bound: NOTES)
  double live = 1.0, feed_s = 0.0;
  if (k.direct_taps) {
    // filter row r is live for the tiles tp with -rows < tp rows + r dil_h - pad_h < H (row_live)
    auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
    std::int64_t n = 0;
    const std::int64_t rows = k.tile_rows;
    for (std::int32_t r = 0; r < k.R; ++r) {
      const std::int64_t off = std::int64_t(r) * k.dil_h - k.pad_h;
      const std::int64_t lo = std::max<std::int64_t>(0, floor_div(-rows - off, rows) + 1);
      const std::int64_t hi = std::min<std::int64_t>(k.tiles_p - 1, floor_div(k.H - off - 1, rows));
      n += hi >= lo ? hi - lo + 1 : 0;
    }
    live = static_cast<double>(n) / (static_cast<double>(k.tiles_p) * k.R);
    feed_s = live * k.kt * static_cast<double>(k.raw_copy_bytes + (k.resident_bytes ? 0 : k.b_bytes)) /
             plan_wgmma_direct_feed_bytes_per_sm;
  }
  // 3xTF32 direct_taps compute a pass of <= 64 output channels as one m64n64 half (issue_direct_taps_x3):
  // counted for single-pass layers (the last pass of several also has its half, not counted)
  const double half = Policy::parts == 2 && k.direct_taps && k.npass == 1 && k.Kg <= 64 ? 0.5 : 1.0;
  const double pass_s = std::max({half * live * 2.0 * Policy::block_m * Policy::block_n * channels *
                                      static_cast<double>(p.R * p.S) / rate,
                                  convert_s, feed_s});
  const double sms = sm_count > 0 ? sm_count : 1;
  // flat tiles: the packing pass first (x read, the packed planes written); direct_taps tiles that read a
  // copy of x (W % 4 != 0, or 16-bit pairs), likewise
  const double xpack = static_cast<double>(plan::wgmma_params<Policy>::xpack_bytes(k));
  const double pre = k.flat || xpack > 0
                         ? plan_xpack_fixed_seconds + (4.0 * static_cast<double>(p.x_elements()) + xpack) / plan_xpack_bytes_per_s
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
    return pre + std::ceil(static_cast<double>(k.tiles) * k.npass * z / sms) * pass_s * stages / k.kt +
           2.0 * z * plane / split_workspace_bytes_per_s + split_fixed_seconds;
  };
  if (const int z = options.splits; z > 0 && k.kt >= 1 && k.tiles > 0) {  // forced
    e.splits = z < k.kt ? z : k.kt, e.pass_mode = false;
    if (!convred::detail::product_below({k.tiles, k.npass, e.splits}, std::int64_t(1) << 40)) {  // (the family refuses it)
      e.split_s = std::numeric_limits<double>::infinity(), e.units = std::numeric_limits<std::int64_t>::max();
      return e;
    }
    e.split_s = split_time(e.splits), e.units = k.tiles * k.npass * e.splits;
    return e;
  }
  if (sm_count <= 0 || k.tiles <= 0 || k.kt < 1) return e;
  if (k.tiles >= sm_count || options.tail > 0) {  // enough tiles: at most a split-K tail
    choose_wgmma_tail<Policy>(p, k, sm_count, pre, pass_s, max_workspace_bytes, e, options);
    return e;
  }
  // fewer tiles than SMs but pass mode's units fill the GPU (a few tiles of many channel passes: K > 1024
  // on 7x7 images): its last wave may be mostly empty, and a split-K tail over the last tiles' passes fills
  // it (choose_wgmma_tail, weighed below against partial mode)
  wgmma_split_estimate tail = e;
  if (e.pass_mode_s > 0 && k.tiles * k.npass >= sm_count && options.pass != wgmma_pass_mode::off)
    choose_wgmma_tail<Policy>(p, k, sm_count, pre, pass_s, max_workspace_bytes, tail, options);
  const double unsplit = e.pass_mode ? e.pass_mode_s : e.fused_s;
  // 3xTF32 has no pass mode (its consumers would spill): where a layer's few tiles hold many channel passes
  // (K = 7392 on 12 x 12 images: 18 tiles of 58 passes), partial mode is its only way to fill the GPU, so
  // its partial sums may take up to x's size when that is above max_workspace_bytes
  const double cap = Policy::parts == 2 ? std::max(static_cast<double>(max_workspace_bytes), 4.0 * p.x_elements())
                                        : static_cast<double>(max_workspace_bytes);
  for (int z = 1; z <= std::min(k.kt, wgmma_max_k_ranges); ++z) {
    if (static_cast<double>(z) * plane > cap) break;
    const double t = split_time(z);
    if (t < unsplit && (e.splits == 0 || t < e.split_s)) e.splits = z, e.split_s = t, e.units = k.tiles * k.npass * z;
  }
  if (tail.tail_tiles > 0 && (e.splits == 0 || tail.tail_s < e.split_s)) return tail;
  if (e.splits > 0) e.pass_mode = false;
  return e;
}

/// @brief The measured factors on the wave model's estimate of parameters k under Policy (the estimate past
/// plan_wgmma_fixed_seconds is multiplied by it, in the family and in choose_wgmma_params): 3xTF32's tap loop, plan_wgmma_tap_loop_slowdown; 3xTF32's direct tiles,
/// whose stages each wait four times for their promoted fresh tiles, plan_wgmma_direct_x3_slowdown; its flat
/// tiles of a 1x1 filter, plan_wgmma_x3_flat_1x1_slowdown; direct tiles of an image viewed as H' x W' (k's
/// width not p's), plan_wgmma_direct_view_slowdown; else 1 (a factor >= 1 on an estimate in seconds;
/// host only, no errors). choose_wgmma_params compares tiles with it, so that its choice and the family's
/// estimate agree.
template <class Policy>
double wgmma_slowdown(const conv2d_problem& p, const block::wgmma_conv_params& k) {
  return plan::wgmma_params<Policy>::tap_loop(k)                   ? plan_wgmma_tap_loop_slowdown
         : k.direct && Policy::parts == 2                          ? plan_wgmma_direct_x3_slowdown
         : k.flat && Policy::parts == 2 && p.R * p.S == 1          ? plan_wgmma_x3_flat_1x1_slowdown
         : k.direct && !k.direct_taps && k.W != p.W                ? plan_wgmma_direct_view_slowdown
                                                                   : 1.0;
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
  using mainloop = plan::wgmma_params<Policy>;
  block::wgmma_conv_params rect, flat;
  std::size_t rect_smem = 0, flat_smem = 0;
  const bool has_rect = mainloop::make_params(p, tail_bytes, max_smem, rect, rect_smem);
  const bool has_flat = allow_flat && mainloop::make_params(p, tail_bytes, max_smem, flat, flat_smem, true);
  const wgmma_tiling forced = options.tiles;
  // dilated problems, and under 3xTF32 those whose row and flat stages do not fit (5x5 filters: two parts
  // of 25 taps per slice): direct tiles of filter rows only
  if (!has_rect && !has_flat)
    return allow_flat && forced != wgmma_tiling::rows && forced != wgmma_tiling::flat &&
           (mainloop::dilated(p) || Policy::parts == 2) &&
           mainloop::make_direct_params(p, tail_bytes, max_smem, k, smem, Policy::parts == 2);
  auto estimate = [&](const block::wgmma_conv_params& c) {
    return choose_wgmma_splits<Policy>(p, c, sm_count, plan_math_speed<typename Policy::math>(),
                                       default_split_workspace_limit, options);
  };
  auto best = [&](const block::wgmma_conv_params& c) {  // (with the measured factors the family applies)
    const wgmma_split_estimate e = estimate(c);
    return (e.splits > 0 ? e.split_s : e.tail_tiles > 0 ? e.tail_s : e.pass_mode ? e.pass_mode_s : e.fused_s) *
           wgmma_slowdown<Policy>(p, c);
  };
  // (a 1 x 1 filter with x gathered leaves the row tiles' producer no time at all: plan_wgmma_gather_slowdown
  // understates it, so flat tiles take it whenever they serve); options' tiles may force either where it
  // serves
  // Rules measured where the wave model's FLOP-rate stages miss the row tiles' own bound (bench/NOTES.md,
  // "Moved from header comments", "The wgmma choices forced"): flat tiles for a 1x1 filter whose flat
  // stages hold wgmma_max_group slices, or any 1x1 filter under 3xTF32 (row-tile stages of one tap are
  // bound by the transform of x); with x gathered at stride 2, for filters of at most 4 taps in any math
  // (a 2x2 filter's raw patch serves only 4 taps: 1.37x slower gathered in TF32 and bf16; 3xTF32, already
  // on flat tiles for 1x1 filters, takes the rule unmeasured) and for 16-bit
  // math from 64 channels (two producer warpgroups converting what they gather; at C = 32 the packing
  // pass costs more than the gather saves: rows 1.64x faster); stride 1 with W % 4 != 0 is left to the model
  const bool measured = has_flat && has_rect &&
                        ((p.R * p.S == 1 && (flat.group == block::wgmma_max_group || Policy::parts == 2)) ||
                         (rect.gather && rect.stride == 2 && (p.R * p.S <= 4 || (!Policy::is_tf32 && p.C >= 64))));
  const bool flat_wins = has_flat && (!has_rect || forced == wgmma_tiling::flat ||
                                      (forced != wgmma_tiling::rows && (measured || (rect.gather && p.R * p.S == 1) ||
                                                                        best(flat) < best(rect))));
  k = flat_wins ? flat : rect, smem = flat_wins ? flat_smem : rect_smem;
  // direct tiles (tf32 1x1, no packing pass; dilated filters) where they serve and the model has them no
  // slower, or instead of dilated flat tiles of a window above 3.5 tiles (wide_dilated_window). At stride
  // 2 their boxes carry the odd columns, and each channel pass loads them again: there the model counts
  // them plan_wgmma_direct_s2_slowdown times slower, and they are taken only in partial (split-K) mode,
  // short units on a small problem where the packing pass is a large part of the run; where the units
  // fill the GPU they were slower (bench/NOTES.md, "Moved from header comments")
  block::wgmma_conv_params direct;
  std::size_t direct_smem = 0;
  if (allow_flat && forced != wgmma_tiling::rows && forced != wgmma_tiling::flat &&
      mainloop::make_direct_params(p, tail_bytes, max_smem, direct, direct_smem) &&
      (forced == wgmma_tiling::direct || mainloop::wide_dilated_window(k) ||
       ((p.stride_h == 1 || estimate(direct).splits > 0) && best(direct) <= best(k))))
    k = direct, smem = direct_smem;
  return true;
}

}  // namespace convred::device
