/// @file device/plan_options.cuh
/// @brief The planner's options: choices of the wgmma kernel's time model that a caller (a test, a
/// benchmark's diagnosis run) may force instead. Plain data; the default is the planner's own choice.
#pragma once

#include <cstdint>

namespace convred::device {

/// @brief Tiles of the wgmma kernel (plan_options::tiles; applied by choose_wgmma_params).
enum class wgmma_tiling : int {
  model = 0,   ///< the time model's choice: tiles of image rows, flat tiles or direct tiles
  rows = 1,    ///< tiles of image rows, where they serve (else flat tiles)
  flat = 2,    ///< flat tiles over a packed x (wgmma_conv_params::flat), where they serve (else rows)
  direct = 3,  ///< direct tiles (wgmma_conv_params::direct), where they serve (else the model's rows or flat)
};

/// @brief Pass mode of the wgmma kernel (plan_options::pass; applied by choose_wgmma_splits and
/// choose_wgmma_tail where pass mode applies: several channel passes, not 3xTF32, an SM count known).
enum class wgmma_pass_mode : int {
  model = 0,  ///< the time model's choice
  off = 1,    ///< never pass mode (a split-K tail's head: fused)
  on = 2,     ///< pass mode wherever it applies, unsplit (a split-K tail only where `tail` forces one)
};

/// @brief The wgmma family's ping-pong policy (plan_options::pingpong; applied by
/// family::wgmma::choose_pingpong).
enum class wgmma_pingpong_mode : int {
  model = 0,  ///< the family's rule (ping-pong where it replaces a split-K fixup of two ranges)
  off = 1,    ///< never the ping-pong policy
  /// the ping-pong policy wherever it serves unsplit, in pass mode where it has several channel passes
  /// and with no split-K tail whatever `pass` and `tail` say (not under 3xTF32, only with an SM count
  /// known and no forced `splits`, and only where the wgmma family is chosen at all: the standalone family
  /// still weighs itself against mma.sync first). For the standard ops: an op whose reduction state is
  /// larger than argmin's re-plans at run time (family::wgmma::launch) with the options as given
  on = 2,
};

/// @brief Options of the planner's wgmma choices, passed explicitly to conv2d_reduce_plan (which keeps
/// them, so that its runs make the same choices) and to the functions that make those choices
/// (choose_wgmma_params, choose_wgmma_splits, choose_wgmma_tail, conv2d_reduce_packed_split,
/// packed_split_workspace_bytes, max_packed_k_splits). Every default is the time model's own choice;
/// the other values force a choice for tests and diagnosis runs, not for speed.
///
/// choose_wgmma_params compares row and flat tiles through choose_wgmma_splits, so forced `splits` can
/// change the tiles too (force them with `tiles`), and pass mode `on` takes precedence over `splits`
/// (pass mode runs unsplit).
struct plan_options {
  wgmma_tiling tiles = wgmma_tiling::model;  ///< the wgmma kernel's tiles
  wgmma_pass_mode pass = wgmma_pass_mode::model;  ///< the wgmma kernel's pass mode
  /// GEMM_K splits: 0 the time model; -1 the wgmma kernel wherever it serves (the mma.sync kernel not
  /// weighed against it, and family::pruned, family::dilated and family::grouped taken wherever they
  /// serve); z > 0 that, in partial mode with min(z, stages per pass) GEMM_K ranges, whatever the
  /// workspace (max_workspace_bytes is not applied), where its work units (tiles x channel passes x ranges)
  /// stay below 2^40 and its workspace's size fits int64 (else the wgmma family does not serve the plan)
  int splits = 0;
  /// split-K tail (applied by choose_wgmma_splits where the tiles allow one and no split is forced): 0 the
  /// time model; -1 never; t > 0 the last min(t, tiles - 1) tiles, whatever the time and the SM count
  /// (with tail_splits GEMM_K ranges, or the model's best for them), where min(t, tiles) x channel passes x
  /// stages per pass stays below 2^40 (else the wgmma family does not serve the plan)
  std::int64_t tail = 0;
  int tail_splits = 0;  ///< with tail > 0: min(z, stages per pass) GEMM_K splits of the tail (0: the model's)
  /// the ping-pong policy (128-pixel tiles) instead of the cooperative one: the family's rule, never, or
  /// wherever it serves unsplit
  wgmma_pingpong_mode pingpong = wgmma_pingpong_mode::model;
  /// family::dilated's space-to-batch split (stride-1 dilated layers): 0 the time model; k > 0 the split that
  /// leaves a residual dilation k in the sub-images (factors dilation / k; 1: the full split, undilated
  /// sub-images), where it serves (on whatever tiles the inner family picks, except flat tiles of a wide
  /// dilated window), and taken wherever it serves and no family before it in the list takes the layer (the
  /// inner family on the whole problem and the mma.sync kernel not weighed against it); -1 never (space to
  /// batch not taken)
  int dilated_residual = 0;
};

}  // namespace convred::device
