/// @file device/cost_model.cuh
/// @brief The planner's cost model in one place: every rate and fixed cost the kernel families' time
/// estimates use (host only, plain constants), measured or fitted on the H200 (bench/NOTES.md says where
/// each comes from). The estimates themselves stay with the kernels they describe: choose_k_splits
/// (device/conv2d_reduce_split.cuh: the SIMT and mma.sync split path), choose_wgmma_splits /
/// choose_wgmma_params (device/wgmma_model.cuh: the wgmma kernel), choose_direct_config
/// (device/direct_config.cuh: the direct kernel, in SM cycles), family::mma_sync::split_seconds (the
/// coarser model of the split path the wgmma family compares itself with); one is here,
/// plan_mma_fused_seconds (the mma.sync kernel unsplit on a grouped problem), as two families compare
/// themselves with it (family::grouped, family::direct). A new architecture's rates go here, beside these.
#pragma once

#include <cstdint>

#include <type_traits>

#include "../policy.cuh"
#include "../problem.cuh"

namespace convred::device {

// --- the SIMT and mma.sync split path (choose_k_splits) -----------------------------------------------

/// choose_k_splits' cost of a block beyond its slices, in slices: the pipeline's fill (Stages - 1 slices
/// loaded before the first is multiplied) and the store of its partial tile.
inline constexpr int split_block_overhead_slices = 2;

/// choose_k_splits' mainloop rate per SM (FLOP/s) of the tensor-core (mma.sync) policies: the default
/// tf32 policy's 256 x 128 x 32 slice in ~2.8 us on an H200, an estimate (bench/NOTES.md, "Split path v2"
/// and "Moved from header comments").
inline constexpr double split_tensor_flops_per_sm = 0.75e12;
/// choose_k_splits' mainloop rate per SM (FLOP/s) of the SIMT (math::ieee) policies (H200 seed: 36 TFLOP/s
/// on 132 SMs).
inline constexpr double split_simt_flops_per_sm = 0.27e12;
/// choose_k_splits' rate (bytes/s) at which the partial sums are written by the first kernel and read by
/// the fixup (each byte counted twice; most of the H200's 4.2 TB/s copy rate, the planes partly in L2).
inline constexpr double split_workspace_bytes_per_s = 3.0e12;
/// choose_k_splits' fixed cost of the split path over the fused kernel (seconds): the fixup kernel's launch
/// and its tail.
inline constexpr double split_fixed_seconds = 5e-6;

// --- the wgmma kernel (choose_wgmma_splits, choose_wgmma_params, choose_wgmma_tail) and the comparison
// with the mma.sync split path (family::wgmma, family::mma_sync::split_seconds) -------------------------

/// The planner's wgmma kernel, FLOP/s per SM under TF32, every computed pixel counted (a tile's tile_h x 64
/// pixels, the dropped columns of narrow tiles and rows past P included): about the seed problem's
/// sustained rate on the H200 (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_wgmma_flops_per_sm = 3.0e12;
/// The planner's wgmma kernel with x gathered by the producer threads (stride 2, W % 4 != 0): its plain
/// loads are slower than TMA, counted as this factor on the time (with a 1x1 filter, one tap per stage, the
/// producer cannot keep up at all: the planner then takes the mma.sync kernel).
inline constexpr double plan_wgmma_gather_slowdown = 2.0;
/// The planner's wgmma kernel under 3xTF32 in its tap-loop variant (filters other than 3x3 and 1x1, or
/// stride 2: each tap's three wgmmas waited for and promoted on their own), counted as this factor on the
/// family's whole estimate (its split and mode chosen first): measured 1.5-1.9x the model's estimate on the
/// H200 over 32 layers (Inception's 1x7 / 7x1 at batch 32: 134 us against 74 us modelled), where it is
/// also weighed against the mma.sync split (bench/NOTES.md, "3xTF32 on the Hopper kernel for any filter").
inline constexpr double plan_wgmma_tap_loop_slowdown = 1.8;
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
/// The fewest output pixels (N*P*Q) the planner gives the wgmma kernel; at 32 or fewer it takes the mma.sync
/// kernel: squeeze-excitation 1x1 convolutions on pooled 1x1 features and 2x2 images, at batch 1 to 32. There the
/// wgmma kernel's packing pass and persistent launch cost more than the whole of the mma.sync kernel's
/// work: on the H200 it was 1.02-2.03x slower in TF32 on 6 of 7 such layers (5 % faster on the 7th) and
/// 1.14-1.39x slower under 3xTF32 on 6 (bench/NOTES.md, "Tiny problems").
inline constexpr std::int64_t plan_wgmma_min_pixels = 33;
/// The mma.sync kernel unsplit on a grouped problem (family::grouped's comparison), FLOP/s per SM under
/// TF32 with each group's channels in whole 128-channel tiles (the tiles' empty columns counted): the
/// upper end of the rates measured on the H200 over the torchvision sweep's grouped layers at batch 32
/// (0.62e12 to 0.88e12; bench/NOTES.md, "Reach: grouped convolution").
inline constexpr double plan_mma_fused_flops_per_sm = 0.85e12;

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

/// The planner's cost of a split-K tail's own launch of the wgmma kernel (seconds): the tail's blocks wait
/// for the head's last one (a programmatic dependent launch hides the launch, not that wait) and the chain
/// has one kernel more (bench/NOTES.md, "Moved from header comments").
inline constexpr double plan_tail_launch_seconds = 2e-6;

/// @brief The mma.sync kernel's time on a whole (grouped) problem p, unsplit, in seconds, as family::grouped
/// and family::direct compare themselves with it: each group's K/groups channels in whole 128-channel
/// tiles (the tiles' zero columns computed too: 2 N P Q x groups x ceil(K/groups / 128) x 128 x GEMM_K
/// FLOPs) at plan_mma_fused_flops_per_sm (FLOP/s per SM, measured on the H200 over the torchvision sweep's
/// grouped layers: bench/NOTES.md, "Reach: grouped convolution") scaled by plan_math_speed<KernelMath>(),
/// over `sm_count` SMs (> 0), plus plan_mma_split_fixed_seconds (fitted on the H200: bench/NOTES.md, "Moved
/// from header comments"). KernelMath: the kernel's math (tf32x3 for math::accurate).
template <class KernelMath>
double plan_mma_fused_seconds(const conv2d_problem& p, int sm_count) {
  const std::int64_t kg = p.K_per_group(), tiles = (kg + 127) / 128;
  const double flops = 2.0 * static_cast<double>(p.gemm_m()) * static_cast<double>(p.groups * tiles * 128) *
                       static_cast<double>(p.gemm_k());
  return plan_mma_split_fixed_seconds +
         flops / (plan_mma_fused_flops_per_sm * plan_math_speed<KernelMath>() * sm_count);
}

// --- the direct kernel ------------------------------------------------------------------------------

/// A nominal SM clock (Hz) that turns choose_direct_config's estimate (SM cycles) into seconds for
/// family::direct::cost: for comparisons only (the H200's boost clock is ~1.98 GHz).
inline constexpr double plan_direct_clock_hz = 1.5e9;

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
