/// @file device/cost_model.cuh
/// @brief The planner's cost model in one place: every rate and fixed cost the kernel families' time
/// estimates use (host only, plain constants), measured or fitted on the H200 (bench/NOTES.md says where
/// each comes from). The estimates themselves stay with the kernels they describe: choose_wgmma_splits /
/// choose_wgmma_params (device/wgmma_model.cuh: the wgmma kernel), choose_direct_config
/// (device/direct_config.cuh: the direct kernel, in SM cycles); one is here, plan_conv2d_reduce_seconds
/// (the mma.sync and SIMT kernels, fused or split: the estimate of family::mma_sync and family::simt and
/// the criterion of choose_k_splits), as five families compare themselves with it (family::wgmma,
/// family::pruned, family::dilated, family::grouped, family::direct). A new architecture's rates go here,
/// beside these.
#pragma once

#include <cmath>
#include <cstdint>

#include <type_traits>

#include "../policy.cuh"
#include "../problem.cuh"

namespace convred::device {

// --- the wgmma kernel's partial sums and fixup (device/wgmma_model.cuh) ------------------------------

/// The rate (bytes/s) at which the wgmma kernel's partial sums (partial mode, a split-K tail) and pass
/// mode's states are written and read back (each byte counted twice; most of the H200's 4.2 TB/s copy
/// rate, the planes partly in L2). The mma.sync and SIMT split path has its own, fitted rate
/// (plan_mma_partial_bytes_per_s: 1.5e12); the two were fitted on different kernels' runs and not yet
/// reconciled (bench/NOTES.md, "One model of the split path").
inline constexpr double split_workspace_bytes_per_s = 3.0e12;
/// The wgmma kernel's fixed cost of a fixup (or combine) after it (seconds): the second kernel's launch
/// and its tail.
inline constexpr double split_fixed_seconds = 5e-6;

// --- the wgmma kernel (choose_wgmma_splits, choose_wgmma_params, choose_wgmma_tail) ------------------

/// The planner's wgmma kernel, FLOP/s per SM under TF32, every computed pixel counted (a tile's tile_h x 64
/// pixels, the dropped columns of narrow tiles and rows past P included): about the seed problem's
/// sustained rate on the H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_wgmma_flops_per_sm = 3.0e12;
/// The planner's wgmma family, fixed cost per run (seconds) beyond its time model: the launches (the
/// filter's packing is done at prepare; x's packing pass has its own plan_xpack_fixed_seconds) and the
/// persistent kernel's start, as a PyTorch op call sees them: the median of measured minus modelled time
/// over the 215 runs under 30 us among 392 of the wgmma family on the H200 through the PyTorch op (TF32 5.8
/// us, bf16 5.1, 3xTF32 6.5), where the mma.sync family's estimate, fixed cost included, is weighed against
/// it (bench/NOTES.md, "One model of the mma.sync kernel").
inline constexpr double plan_wgmma_fixed_seconds = 5.5e-6;
/// The planner's wgmma kernel on row tiles: the rate (bytes per second and SM) at which the producer warps
/// convert a pass's raw patch of x (fp32, as TMA loaded it) into the operand planes; a pass takes at least
/// its patch's bytes at this rate. Fitted on the H200 to the 1x1 layers the sample ran on bf16 row tiles
/// (their conversion, not the tensor cores, bounds them: measured 1.8-4.2x the compute-only model; 11-15
/// GB/s per SM on the four with the largest patches) (bench/NOTES.md, "One model of the mma.sync kernel").
/// Applied to every math: not yet measured for TF32 and 3xTF32 row tiles of 1x1 filters (rarely chosen:
/// direct or flat tiles serve those), whose producers have fewer converting threads than bf16's.
inline constexpr double plan_wgmma_convert_bytes_per_sm = 13e9;
/// The planner's wgmma kernel with x gathered by the producer threads (stride 2, W % 4 != 0): its plain
/// loads are slower than TMA, counted as this factor on the time (with a 1x1 filter, one tap per stage, the
/// producer cannot keep up at all: the planner then takes the mma.sync kernel).
inline constexpr double plan_wgmma_gather_slowdown = 2.0;
/// The planner's wgmma kernel under 3xTF32 in its tap-loop variant (filters other than 3x3 and 1x1, or
/// stride 2 except flat 1x1 tiles: each tap's three wgmmas waited for and promoted on their own), counted as this factor on the
/// family's whole estimate (its split and mode chosen first; plan_wgmma_fixed_seconds added after): fitted
/// on the H200 over the 17 tap-loop layers measured (error rms 0.12 in log; Inception's 1x7 / 7x1 at batch
/// 32: 134 us against 74 us modelled), where it is also weighed against the mma.sync family (bench/NOTES.md,
/// "3xTF32 on the Hopper kernel for any filter" and "One model of the mma.sync kernel").
inline constexpr double plan_wgmma_tap_loop_slowdown = 1.6;
/// The planner's wgmma kernel under 3xTF32 on its direct tiles of filter rows (wgmma_conv_params::direct_taps
/// under a two-part policy: each stage's four promoted m64n64 fresh tiles waited for in turn), counted as this
/// factor on the family's whole estimate (as plan_wgmma_tap_loop_slowdown on the tap loop). Fitted on the
/// H100 over six layers timed on their own through `bench/family_bench` (DeepLab's n32 c2048 65x65 d12 / d36,
/// c960 33x33 d24, n1 c2048 d36, SSD's c512 19x19 d6, Inception's 5x5 at batch 32): 1.6 left them 1.25-1.51x
/// (geomean 1.33x) slower than estimated; with 2.1 each measured within -5 % / +15 % of its estimate (bench/NOTES.md, "The direct tiles of filter
/// rows in bf16 and 3xTF32, measured").
inline constexpr double plan_wgmma_direct_x3_slowdown = 2.1;
/// The wgmma kernel's flat tiles of a 1x1 filter under 3xTF32 (one tap and one or two 8-channel slices per
/// stage, so a stage's bulk copies and its promoted products are short against their fixed costs; at stride
/// 2 too, where flat 1x1 tiles run the same stages, not the tap loop), counted as this factor on the family's whole estimate. With the
/// two-slice stages the estimate / measured on six layers was 0.86-1.04 (bench/NOTES.md, "3xTF32's 1x1
/// stages of two slices"), so the factor was kept. Measured with bench/family_bench --options (H100,
/// 2026-12-06) on 12 layers (C 512-3712, 7x7 to 25x34, batch 1 and 32): the model's estimate was 1.18-1.21x
/// below the measured time on the four smallest (up to 73 us) and up to 2x on the largest; 1.25 moves the
/// four to the mma.sync kernel, measured 1.18-1.32x faster there, and no other (bench/NOTES.md, "The wgmma
/// choices forced").
inline constexpr double plan_wgmma_x3_flat_1x1_slowdown = 1.25;
/// The planner's wgmma kernel on direct tiles at stride 2 (wgmma_conv_params::direct), counted as this
/// factor on the time: TMA cannot skip columns in a box's innermost dimension, so each box carries the odd
/// input columns too (twice the bytes of the pixels used, in a row pitch padded from 2Q - 1 to 8 mod 16
/// floats), and the A fragments' loads of every other column meet 2-way bank conflicts. Fitted on the
/// H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_wgmma_direct_s2_slowdown = 2.5;
/// The planner's wgmma kernel on direct tiles of an image viewed as H' x W' (a 1x1 filter at stride 1 with
/// W % 4 != 0: plan::wgmma_params::viewed_width), counted as this factor on the estimate past
/// plan_wgmma_fixed_seconds (wgmma_slowdown):
/// their tiles stop at each image's end (a 14 x 14 image fills 196 of a tile's 256 pixels), which the wave
/// model's per-tile cost does not see. Fitted on the H100 over seven 14 x 14 layers timed through
/// `bench/family_bench --options` (bench/NOTES.md, session 27, "... direct tiles of an image viewed as H' x W'"): measured
/// 1.14-1.72x their unfactored estimate; the planner's choices against the packed flat tiles and the
/// mma.sync kernel were all right for factors in about (1.19, 1.34) (on the estimate past
/// plan_wgmma_fixed_seconds, as wgmma_slowdown applies it).
inline constexpr double plan_wgmma_direct_view_slowdown = 1.2;
/// The rate at which one SM's direct_taps stages (wgmma_conv_params::direct_taps: dilated filters) arrive,
/// bytes per second: each stage's TMA box of x (raw_copy_bytes, its zero-filled columns included) and its
/// filter row (b_bytes, when streamed); a pass of such a tile takes the longer of its live stages' tensor
/// work and their bytes at this rate. Fitted on the H100 (5 layers of DeepLab's shapes, 21-29e9 each, x's padded copy
/// counted apart at plan_xpack_bytes_per_s): a stage takes about twice its tensor time (bench/NOTES.md,
/// "Dilated layers: direct tiles of filter rows, measured"). A fitted rate, not L2's: ncu on the H200 (n32
/// c2048 65x65 d24) shows L2 at 28 % of its throughput, and three steps in flight instead of two measured
/// the same, so the bound is neither; the stage's bytes stand in for whatever it is (bench/NOTES.md, "What
/// bounds the direct tiles of filter rows", "Three A register sets in the direct tiles").
inline constexpr double plan_wgmma_direct_feed_bytes_per_sm = 25e9;
/// family::dilated (space to batch) yields a layer to the wgmma kernel's direct tiles of filter rows only
/// where their estimate is below this share of its own (to its flat tiles of windows up to 3.5 tiles
/// wherever they are estimated faster: plan::wgmma_params::wide_dilated_window): their model was 14 % pessimistic to 14 % optimistic
/// on the H100's five timed layers, so near ties keep space to batch, the measured path (bench/NOTES.md,
/// "Dilated layers: direct tiles of filter rows, measured"); against a smaller split (sub-images that keep a
/// dilation, on flat tiles) in TF32 and bf16 the other way round: the split runs only where it is estimated
/// below this share of the direct tiles (its c2048 estimates were 10-29 % optimistic: bench/NOTES.md,
/// "Smaller space-to-batch splits").
inline constexpr double plan_dilated_yield_share = 0.85;
/// The fewest output pixels (N*P*Q) the planner gives the wgmma kernel; at 32 or fewer it takes the mma.sync
/// kernel: squeeze-excitation 1x1 convolutions on pooled 1x1 features and 2x2 images, at batch 1 to 32. There the
/// wgmma kernel's packing pass and persistent launch cost more than the whole of the mma.sync kernel's
/// work: on the H200 it was 1.02-2.03x slower in TF32 on 6 of 7 such layers (5 % faster on the 7th) and
/// 1.14-1.39x slower under 3xTF32 on 6 (bench/NOTES.md, "Tiny problems").
inline constexpr std::int64_t plan_wgmma_min_pixels = 33;
/// The planner's packing pass of flat tiles (kernel::pack_x_kernel), bytes per second over x read and the
/// packed planes written: about two thirds of the H200's copy bandwidth (4.2 TB/s), for its strided reads.
inline constexpr double plan_xpack_bytes_per_s = 3.0e12;
/// The packing pass's fixed cost (seconds): its launch and tail.
inline constexpr double plan_xpack_fixed_seconds = 3e-6;

/// @brief Speed of a tensor-core math relative to TF32 in the wgmma kernel's time model (its rates are
/// scaled by it; the partial sums' traffic is not; the mma.sync kernel has its own rates,
/// plan_mma_flops_per_sm): bf16 and fp16 1.5, tf32x3 0.36 (three
/// products per term), from the seed problem's times on the H200 (bench/NOTES.md, "Moved from header
/// comments").
template <class Math>
constexpr double plan_math_speed() {
  if constexpr (std::is_same_v<Math, math::bf16> || std::is_same_v<Math, math::fp16>) return 1.5;
  else if constexpr (std::is_same_v<Math, math::tf32x3>) return 0.36;
  else return 1.0;
}

/// The planner's cost of a split-K tail's own launch of the wgmma kernel (seconds): the tail's blocks wait
/// for the head's last one (a programmatic dependent launch hides the launch, not that wait) and the chain
/// has one kernel more (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_tail_launch_seconds = 2e-6;

// --- the conv2d_reduce kernel (mma.sync and SIMT policies), fused or split: family::mma_sync's and
// family::simt's estimate, choose_k_splits' criterion, and the one other families compare themselves
// with (family::wgmma, the adapters, family::direct) ---------------------------------------------------

/// The conv2d_reduce kernel's fixed cost per run (seconds): the launch and the pipeline's fill, as a
/// PyTorch op call sees it. Fitted with the constants below to 240 runs of the mma.sync kernel on the H200
/// (fused and split; TF32, bf16 and 3xTF32; batch 1 and 32; 9 us to 30 ms) measured through the PyTorch
/// op by bench/fit_mma_model.py: error rms 0.14 in log (bench/NOTES.md, "One model of the mma.sync
/// kernel"). The SIMT policies take the same fixed costs (same launch, same fixup; not fitted on them).
inline constexpr double plan_mma_fixed_seconds = 4.1e-6;
/// The split path's cost beyond the fused kernel's fixed one (seconds): the fixup kernel's launch and tail.
inline constexpr double plan_mma_split_fixed_seconds = 3.0e-6;
/// A block's cost beyond its GEMM_K slices, in slice times: the epilogue (fused) or the store of the
/// partial tile (split).
inline constexpr double plan_mma_overhead_slices = 0.55;
/// The rate (bytes/s) at which the split path's partial sums are written and read back by the fixup (each
/// byte counted twice).
inline constexpr double plan_mma_partial_bytes_per_s = 1.5e12;
/// @brief The mma.sync mainloop's rate per SM (FLOP/s, one resident block: a slice of BlockM x BlockN x
/// BlockK multiply-adds, the tile's empty rows and columns counted) under the kernel math KernelMath: TF32
/// 0.78e12, bf16 and fp16 0.90e12, 3xTF32 0.34e12 (fitted as plan_mma_fixed_seconds says).
template <class KernelMath>
constexpr double plan_mma_flops_per_sm() {
  if constexpr (std::is_same_v<KernelMath, math::bf16> || std::is_same_v<KernelMath, math::fp16>) return 0.90e12;
  else if constexpr (std::is_same_v<KernelMath, math::tf32x3>) return 0.34e12;
  else return 0.78e12;
}
/// The mma.sync mainloop's speed on a dense 1x1 filter at stride 1 over plan_mma_flops_per_sm's, in TF32,
/// bf16 and fp16 (not 3xTF32): its im2col rows are contiguous channels of x, so a slice's loads need no tap
/// arithmetic. Measured with bench/family_bench --options on 14 such layers (H100, 2026-12-06: C 512-3712,
/// K 128-3840, 7x7 to 28x28, batch 1 and 32): the fitted model's estimate over the measured time was
/// 0.72-0.97 (median 0.80) in TF32 and bf16, 0.82-1.02 (median 0.93) under 3xTF32 (bench/NOTES.md, "The
/// wgmma choices forced").
inline constexpr double plan_mma_1x1_speedup = 1.3;
/// The SIMT (math::ieee) mainloop's rate per SM (FLOP/s): the default float policy's on the H200 seed
/// problem (36 TFLOP/s on 132 SMs; bench/NOTES.md, "Split path v2"). Used for double data too, whose fp64
/// FMA runs at about half the rate: its estimates are optimistic (they decide only double's split count).
inline constexpr double plan_simt_flops_per_sm = 0.27e12;
/// family::simt_narrow's time per FMA over plan_simt_flops_per_sm's (narrow_simt_policy: its 4x4
/// accumulators per thread take two 16-byte shared-memory loads per 16 FMAs where the default policy's 8x8
/// take four per 64). Fitted on the H100 to eight layers of 1 to 16 output channels timed on their own
/// (bench/family_bench): estimate / measured 0.79-1.16 on the six above 15 us, 0.66 on an 11 us one
/// (bench/NOTES.md, "The narrow family").
inline constexpr double plan_simt_narrow_slowdown = 2.1;
/// The same for its 32-channel tiles (narrow_simt_policy<T, 32>: 4x8 accumulators per thread, three 16-byte
/// loads per 32 FMAs): 2.1 scaled by the loads per FMA (0.375 against 0.5 words). Checked on the H100 on
/// seven layers of 24 to 32 channels per group timed on their own (bench/family_bench): estimate / measured
/// 0.99-1.06 on four grouped layers at 14-150 us, 1.37 on a 76 us one (g63 c1512 14x14), 0.69-0.76 on two
/// dense 1x1 layers at 13-18 us (bench/NOTES.md, "3xTF32's 1x1 stages of two slices").
inline constexpr double plan_simt_narrow32_slowdown = 1.6;
/// family::mma_narrow's time per slice over plan_mma_flops_per_sm's at its 32-channel tile
/// (narrow_mma_sync_policy: 32 x 32 warp tiles reuse each fragment half as often as the default's 64 x 64,
/// and its 128-thread blocks keep fewer loads in flight).
inline constexpr double plan_mma_narrow_slowdown = 2.0;
/// family::mma_narrow's rate (bytes/s) over its im2col operand: N*P*Q x GEMM_K x groups elements of x, each
/// loaded once (one channel tile per group). Its other bound: with 32 channels a tile's loads are not hidden
/// behind its products. Fitted with plan_mma_narrow_slowdown to 16 layers of K/groups 1-32 timed on their own
/// (H100, bench/family_bench: 3x3 layers of 8-850 MB of operand at 2.3-3.2 TB/s; bench/NOTES.md, "A narrow
/// tensor-core tile").
inline constexpr double plan_mma_narrow_operand_bytes_per_s = 2.5e12;
/// The most GEMM_K values one partial sum of family::simt_narrow runs in sequence under 3xTF32
/// (math::accurate): longer layers are split over GEMM_K (the partial sums added by the fixup). Its
/// unsplit sums, one fp32 FMA after another, measured 1.04e-6 against float64 over 4,608 values (n32
/// c512 38x38 k16 3x3) and 8.4e-7 over 2,304, where 3xTF32's bound is 1e-6 and its blocked sums gave
/// 4.7e-7 and 4.9e-7 (H100, bench/torchvision_sweep.py; bench/NOTES.md, "The narrow family").
inline constexpr std::int64_t plan_narrow_accurate_chain = 1152;

/// @brief The conv2d_reduce kernel's time on problem p in seconds with Policy (an mma_sync_policy or a
/// simt_policy), fused (`splits` = 0) or split into `splits` GEMM_K ranges (conv2d_reduce_split), on
/// `sm_count` SMs (at least 1): a wave model with resident = SMs x max(1, Policy::min_blocks_per_sm)
/// blocks at a time. Fused: ceil(m_tiles / resident) waves of a block's channel_tiles x slices (+
/// plan_mma_overhead_slices) slice times; split: ceil(m_tiles x channel_tiles x splits / resident) waves of
/// ceil(slices / splits) (+ overhead) slice times, plus the partial sums written and read (splits x N*P*Q
/// x K floats, twice, at plan_mma_partial_bytes_per_s) and plan_mma_split_fixed_seconds; m_tiles =
/// ceil(N*P*Q / BlockM), channel_tiles = groups x ceil((K/groups) / BlockN) (split_channel_tiles), slices =
/// ceil(GEMM_K / BlockK), a slice time 2 BlockM BlockN BlockK FLOP at plan_mma_flops_per_sm (tensor-core
/// policies; times plan_mma_1x1_speedup for a dense 1x1 filter at stride 1 outside 3xTF32) or
/// plan_simt_flops_per_sm; plus plan_mma_fixed_seconds. The partial sums are `value_bytes` each
/// (4: the fp32 compute type; choose_k_splits passes sizeof(compute_t<T>), 8 for double). Fitted on the
/// H200 (plan_mma_fixed_seconds says how).
template <class Policy>
double plan_conv2d_reduce_seconds(const conv2d_problem& p, int sm_count, int splits, double value_bytes = 4.0) {
  // (in double: the tile counts' products may pass 2^63 on problems no GPU holds)
  const auto ceil_div = [](double a, double b) { return std::ceil(a / b); };
  const double resident = (sm_count > 1 ? sm_count : 1) * (Policy::min_blocks_per_sm > 1 ? Policy::min_blocks_per_sm : 1);
  const double m_tiles = ceil_div(static_cast<double>(p.gemm_m()), Policy::block_m);
  const double ctiles = static_cast<double>(p.groups) * ceil_div(static_cast<double>(p.K_per_group()), Policy::block_n);
  const double slices = ceil_div(static_cast<double>(p.gemm_k()), Policy::block_k);
  double rate = plan_simt_flops_per_sm;
  if constexpr (Policy::tensor_core) {
    rate = plan_mma_flops_per_sm<typename Policy::math>();
    if (!std::is_same_v<typename Policy::math, math::tf32x3> && p.R * p.S == 1 && p.stride_h == 1 && p.stride_w == 1 &&
        p.groups == 1)
      rate *= plan_mma_1x1_speedup;
  }
  const double slice_s = 2.0 * Policy::block_m * Policy::block_n * Policy::block_k / rate;
  if (splits <= 0)
    return plan_mma_fixed_seconds + ceil_div(m_tiles, resident) * (ctiles * slices + plan_mma_overhead_slices) * slice_s;
  const double partial_bytes = splits * static_cast<double>(p.gemm_m()) * static_cast<double>(p.K) * value_bytes;
  return plan_mma_fixed_seconds + plan_mma_split_fixed_seconds +
         ceil_div(m_tiles * ctiles * splits, resident) * (ceil_div(slices, splits) + plan_mma_overhead_slices) * slice_s +
         2.0 * partial_bytes / plan_mma_partial_bytes_per_s;
}

// --- the direct kernel ------------------------------------------------------------------------------

/// The rate (model cycles per second) that turns choose_direct_config's estimate into seconds for
/// family::direct's comparisons with the tensor-core families: not the clock (the H200's boost clock is
/// ~1.98 GHz) but the cycles per second of measured time, fitted on the H200 to 2,107 timed tilings of 27
/// layers (measured time 2.2x the cycles at 1.98 GHz, geometric mean; batch-32 layers above, batch-1
/// layers below; bench/NOTES.md, "Ping-pong forced, and the direct kernel's tilings measured", refitted with
/// the combine that grows with the cluster: "The direct model's combine grows with the cluster").
inline constexpr double plan_direct_clock_hz = 0.89e9;

// --- screening's pass 2 (family::screen) -------------------------------------------------------------

/// Bytes per second at which pass 2 reads x once (the patch norms and the taps): memory bandwidth.
inline constexpr double screen_x_bytes_per_s = 3.0e12;
/// Shared-memory wavefronts per output pixel and GEMM_K tap of pass 2's tiled recompute: one x load (32
/// consecutive lanes: 1/32) and one filter load gathered by each lane's channel (random channels: about 3.5
/// of 32 banks' worth of conflicts), plus 15 % for the pixels whose second channel is recomputed too. A
/// model (bench/NOTES.md, "Certified screening"), one wavefront per clock and SM at 1.7 GHz.
inline constexpr double screen_wavefronts_per_tap = (1.0 + 3.5) / 32.0 * 1.15;
/// Shared-memory wavefronts per second and SM (one per clock at 1.7 GHz).
inline constexpr double screen_wavefronts_per_sm = 1.7e9;

}  // namespace convred::device
