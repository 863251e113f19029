/// @file block/wgmma_conv_params.cuh
/// @brief The parameter block of the Hopper packed-filter wgmma kernel (wgmma_conv_params), which the host
/// fills (plan::wgmma_params, device::conv2d_reduce_packed_split) and the kernel reads, and the limits of
/// its pipeline.
#pragma once

#include <cstdint>

#include "../detail/fast_divmod.cuh"

namespace convred::block {

/// @brief Parameter block of the packed-filter wgmma kernel (kernel::conv2d_reduce_wgmma_kernel): NCHW fp32 x,
/// any groups with C/groups a multiple of block_c (each group's K/groups channels its own channel passes:
/// conv_groups), stride 1 or 2, dilation 1 (or any along a 1-wide filter dimension; dilated filters at stride
/// 1 on flat and direct tiles: dil_h, dil_w), any K
/// (conv_mainloop_wgmma::make_params decides). A tile is tile_h m64
/// wgmma rows of one image (tile_h 4, or 2 for ping-pong): tile_h output rows x 64 columns, or for narrow
/// images (Q + (S - 1) / stride <= 32) tile_rows = tile_h * 64 / pw output rows of the whole width (pw = 16 or 32
/// plane pitch; an m64 row then spans 4 or 2 output rows, its pixels past Q computed and dropped); tiles
/// run q fastest, then p, then n. Each tile runs `npass` channel passes of 128 output channels (K > 128: the patch is staged again
/// for each pass, the reduction state carried across them), each pass kt stages of block_c input channels.
/// Shared memory: the whole packed filter when it is resident (resident_bytes, else nothing), then
/// `stages` operand stages of stage_bytes (the packed filter slice, b_bytes, unless resident, then the
/// planes of the input patch: parts x part_bytes, see block::conv_patch_loader), then `raw_stages` raw
/// patch buffers of raw_bytes (the TMA box: raw_c channels of bh rows x rp columns), then the tail.
/// Flat tiles (`flat`, below) replace the tiles of image rows by block_m consecutive GEMM rows over a
/// packed x (tiles_p = tiles_q = 1, `tiles` their count, no raw buffers); `partial` and `states` set the
/// kernel's split and pass modes.
struct wgmma_conv_params {
  const float* x = nullptr;       ///< input (N,C,H,W), NCHW fp32
  const void* filter = nullptr;   ///< packed filter (device::pack_filter), 16-byte aligned
  const float* bias = nullptr;    ///< bias (K) or nullptr
  std::int64_t N = 0;             ///< batch
  std::int64_t tiles = 0;         ///< N * tiles_p * tiles_q (flat tiles: their count); a launch's: from tile0 on
  /// @var C
  /// @brief input channels
  /// @var H
  /// @brief input height (direct tiles of a 1x1 filter whose W % 4 != 0: the height H' of the image's H' x W'
  /// view, plan::wgmma_params::viewed_width; P, Q and W are then the view's too)
  /// @var W
  /// @brief input width (of the view, as H)
  /// @var K
  /// @brief output channels (npass passes of 128)
  /// @var P
  /// @brief output height
  /// @var Q
  /// @brief output width
  std::int32_t C = 0, H = 0, W = 0, K = 0, P = 0, Q = 0;
  /// @var R
  /// @brief kernel height
  /// @var S
  /// @brief kernel width
  /// @var pad_h
  /// @brief zero padding rows
  /// @var pad_w
  /// @brief zero padding columns
  std::int32_t R = 0, S = 0, pad_h = 0, pad_w = 0;
  /// @var tiles_p
  /// @brief tiles down the output, ceil(P / tile_rows)
  /// @var tiles_q
  /// @brief tiles across the output, ceil(Q / tile_cols) (1 for narrow tiles)
  /// @var kt
  /// @brief stages per channel pass: ceil(C/groups / block_c)
  /// @var npass
  /// @brief channel passes per tile: ceil(K / 128), or for a grouped convolution groups * ceil(K/groups /
  /// 128) (conv_groups); a tile is npass * kt stages
  std::int32_t tiles_p = 0, tiles_q = 0, kt = 0, npass = 0;
  /// @var rp
  /// @brief raw patch row pitch in floats: the TMA box width (>= pw + col_shift, a multiple of 4)
  /// @var bh
  /// @brief raw patch rows: the TMA box height, ph
  /// @var col_shift
  /// @brief columns between the TMA box's first column and the patch's (q0 - pad_w): the box starts at
  /// q0 - pad_w - col_shift, a multiple of 4, i.e. at a 16-byte aligned address (measured: a box starting
  /// at column -1 stopped the kernel with an illegal-instruction error on the H200)
  std::int32_t rp = 0, bh = 0, col_shift = 0;
  /// @var ph
  /// @brief patch rows, tile_rows + R - 1
  /// @var pw
  /// @brief patch columns, the plane row pitch in 16-byte pixels: 64 + S - 1, or in narrow tiles 16 or 32
  /// (>= Q + S - 1)
  /// @var tile_rows
  /// @brief output rows per tile: tile_h, or in narrow tiles tile_h * 64 / pw (each m64 wgmma row then
  /// spans 64 / pw output rows)
  /// @var tile_cols
  /// @brief output pixels per tile row: 64, or pw in narrow tiles (of which the first Q are outputs, the
  /// rest computed from zeros and dropped)
  /// @var mrow_step
  /// @brief plane pixels between the A operands of consecutive m64 rows: pw (one patch row), or 64 in
  /// narrow tiles
  std::int32_t ph = 0, pw = 0, tile_rows = 0, tile_cols = 0, mrow_step = 0;
  /// @var stride
  /// @brief convolution stride, 1 or 2 (both dimensions)
  /// @var phases_h
  /// @brief row phases of the planes: min(stride, R) (stride 2: even and odd input rows apart, so that
  /// every tap reads its phase's sub-patch at an unstrided shifted start)
  /// @var phases_w
  /// @brief column phases of the planes: min(stride, S)
  /// @var phase_pixels
  /// @brief pixels of one phase's sub-patch in a plane: ph * pw (phase (a, b) at (a * phases_w + b) *
  /// phase_pixels; plane pixel (row, col) of phase (a, b) is input (stride * (p0 + row) + a - pad_h,
  /// stride * (q0 + col) + b - pad_w), so tap (r, s) reads phase (r % stride, s % stride) shifted by
  /// (r / stride, s / stride))
  /// @var gather
  /// @brief 1: the producer threads load x themselves (stride 2, or W not a multiple of 4: no TMA box
  /// serves these), no raw buffers; 0: TMA boxes into raw buffers, then the transform
  std::int32_t stride = 1, phases_h = 1, phases_w = 1, phase_pixels = 0, gather = 0;
  /// @brief operand stages in use: Policy::stages, or fewer (down to 2) when that many do not fit in
  /// shared memory (large stride-2 patches, large filters); flat and direct tiles: more where they fit (up
  /// to wgmma_max_stages)
  std::int32_t stages = 0;
  /// @var raw_copy_bytes
  /// @brief bytes one TMA box writes: raw_c * bh * rp * 4 (raw_c = 8 channels: one raw buffer; a stage
  /// of block_c channels is block_c / raw_c of them); direct tiles: block_c * group * tile_rows * rp * 4,
  /// the stage's box
  /// @var raw_bytes
  /// @brief shared-memory bytes per raw buffer, raw_copy_bytes rounded up to 128
  /// @var plane_bytes
  /// @brief bytes of one plane (E channels of the patch): (phases_h * phases_w * phase_pixels + (S - 1) /
  /// stride) * 16 in narrow tiles (the last m64 row's shifted reads run (S - 1) / stride pixels past its
  /// phase's sub-patch: dropped outputs only), else phases_h * phases_w * phase_pixels * 16
  /// @var part_bytes
  /// @brief bytes of one set of planes (block_c channels, the big or the small parts): block_c / E planes;
  /// direct tiles: the stage's box, raw_copy_bytes rounded up to 128
  std::int32_t raw_copy_bytes = 0, raw_bytes = 0, plane_bytes = 0, part_bytes = 0;
  /// @var b_bytes
  /// @brief packed filter bytes per stage (one pass's 128 channels x block_c input channels): parts * R*S *
  /// 128 * block_c * element bytes; slice `pass * kt + kt_i` of the packed filter
  /// @var stage_bytes
  /// @brief shared-memory bytes per operand stage, a multiple of 128: the filter slice (b_bytes) then the
  /// planes; the planes only when the filter is resident
  /// @var a_offset
  /// @brief offset of the planes in an operand stage: b_bytes, or 0 when the filter is resident
  /// @var resident_bytes
  /// @brief the whole packed filter's slices (npass * kt * b_bytes, not its flag word), resident in shared memory ahead of the operand stages
  /// for the block's lifetime and copied once; 0 when it is streamed with each stage instead
  std::int32_t b_bytes = 0, stage_bytes = 0, a_offset = 0, resident_bytes = 0;
  convred::detail::fast_divmod div_quads;  ///< divides by rp / 4 (transform item -> plane row, 4 raw columns)
  convred::detail::fast_divmod div_ph;     ///< divides by ph (plane row -> plane, patch row)
  /// @brief Partial ("split-K") mode when not null: the raw accumulators (no bias, no epilogue, no
  /// reduction) of every work unit go to `partial`, splits x (M - partial_m0) x K floats laid out [z][m -
  /// partial_m0][k] (z the GEMM_K split, m = (n * P + p) * Q + q the output pixel, k = pass_k0(pass) + c
  /// the output channel, fastest), for
  /// kernel::conv2d_reduce_split_fixup_kernel to sum, add the bias to, apply the epilogue to and reduce. A
  /// work unit is then (tile, channel pass, split z): split z of a pass covers its stages [first, last)
  /// (kernel::split_range over the kt stages); null (the default): fused, a work unit is a whole tile with
  /// all its passes, reduced in registers and written to y. Set by the host entry point
  /// (device::conv2d_reduce_packed_split), not by make_params.
  float* partial = nullptr;
  /// @brief GEMM_K splits of each channel pass in partial mode, 1 <= splits <= kt (every split at least one
  /// stage); 1 in fused mode
  std::int32_t splits = 1;
  /// @brief The first tile of this launch: the kernel runs tiles [tile0, tile0 + tiles) of the problem's
  /// tile order (0: all of them). A split-K tail (the hybrid schedule of Stream-K's "data-parallel +
  /// split-K" variant, Osama et al., PPoPP 2023) runs the last, partly filled wave's tiles as a second
  /// launch in partial mode (tile0 the first of them), after the head's launch over the others fused or in
  /// pass mode, so that the last wave's units are short. Set by the host entry point; ignored under
  /// 3xTF32 (Policy::parts = 2), which runs no tail (its consumers would spill: kernel::conv2d_reduce_wgmma_kernel).
  std::int64_t tile0 = 0;
  /// @brief Partial mode: the output pixel of the partial sums' row 0, whose rows are m - partial_m0 for
  /// this launch's pixels m (0, or a split-K tail's first pixel, conv_mainloop_wgmma::first_pixel of tile0:
  /// its tiles must cover the contiguous pixels [partial_m0, N*P*Q), conv_mainloop_wgmma::tail_serves);
  /// `partial` then holds splits x (N*P*Q - partial_m0) x K floats. Set by the host entry point; ignored
  /// under 3xTF32, as tile0.
  std::int64_t partial_m0 = 0;
  /// @brief Pass mode when not null (and partial null): a work unit is (tile, channel pass), tiles * npass
  /// of them, so that the SMs share out passes rather than whole tiles (a U-Net bottleneck at batch 32: 136
  /// flat tiles x 8 passes on 132 SMs take 9 pass-times, not 16); each unit folds its pass's channels (bias,
  /// epilogue) into the pixels' reduction states, reduces them across the lanes and writes them to
  /// `states`, npass x N*P*Q states of the op (Op::accum_t<float>, [pass][m]), for
  /// kernel::conv2d_reduce_pass_combine_kernel to combine in pass order into y (and indices). Set by the
  /// host entry point (device::conv2d_reduce_packed_split), not by make_params.
  void* states = nullptr;
  /// @brief 1: flat tiles over x packed beforehand (make_params with `flat`). The GEMM rows address x,
  /// converted and zero-padded by kernel::pack_x_kernel, as planes over the whole batch: plane pixel o of
  /// phase (a, b) = (n * flat_rows + row) * pw + col holds input (n, stride * row + a - pad_h, stride * col +
  /// b - pad_w) (zero outside x), so that output (n, p, q) is GEMM row o = (n * flat_rows + p) * pw + q and
  /// filter tap (r, s) reads it at o + (r / stride) * pw + s / stride of phase (r % stride, s % stride),
  /// across image boundaries (a dilated filter, stride 1: at o + r dil_h pw + s dil_w). A tile is block_m
  /// consecutive rows o (the pixels with p >= P or q >= Q computed and dropped), reading a window of
  /// phase_pixels = block_m + ((R - 1) dil_h / stride) * pw + (S - 1) dil_w / stride pixels of each (part,
  /// plane, phase). The packed x holds each tile's windows stage by stage, in the
  /// stage's shared-memory layout ([tile][stage][part][plane][phase][window pixel], the halo pixels repeated
  /// in the next tile's windows), so that a stage's planes are one bulk copy of parts * part_bytes: the copy
  /// engine takes ~270 cycles per bulk copy of up to 4 KB whatever its size (bench/NOTES.md, "Moved from
  /// header comments"). No TMA box, no transform, no gather in the kernel, and no tile shape to fit the image
  /// (7 x 7 images with a 3x3 filter, padding 1: 77% of the computed pixels are outputs, against 19% in 16 x
  /// 16 tiles). The packing pass reads x (the halos twice) and writes xpack_bytes. 0: tiles of image rows.
  std::int32_t flat = 0;
  /// @brief flat: plane rows per image, P + (R - 1) dil_h / stride, less min(pad_h, (R - 1) dil_h) at stride
  /// 1; the pitch pw likewise Q + (S - 1) dil_w / stride, less min(pad_w, (S - 1) dil_w) at stride 1. At stride 1 the zero
  /// columns right of a row are the next row's left padding: a tap reading past column pw - 1 reads
  /// the next row's first columns, which hold input columns < 0 (zero), and the input columns it stands
  /// for are >= W (zero too); rows past flat_rows likewise reach the next image's top padding rows.
  /// (A 3x3 "same" convolution of 14 x 14 images: 15 x 15 plane pixels per image, not 16 x 16.)
  std::int32_t flat_rows = 0;
  /// @brief Slices of block_c input channels per operand stage: 1, or for flat or direct tiles of a 1x1
  /// filter up to wgmma_max_group (3xTF32's flat tiles: up to 2; a divisor of ceil(C / block_c)), so that a stage is group x 4
  /// wgmmas per copy rather than 4 (a one-slice stage's copy takes several times its tensor work:
  /// bench/NOTES.md, "Moved from header comments"). kt then counts stages of group slices, b_bytes and
  /// part_bytes are group slices' bytes, and the packed filter's layout is unchanged (a stage's slices are
  /// consecutive).
  std::int32_t group = 1;
  /// @brief flat: the plane pixels the tiles' windows reach, tiles * block_m + the window's halo (the last
  /// window's end; pixels past the last image are zero)
  std::int64_t flat_pixels = 0;
  /// @brief flat: the packed x (kernel::pack_x_kernel's output, xpack_bytes: [tile][stage][part][plane of E
  /// channels][phase][window pixel] of 16 bytes, the stage's planes as in shared memory), 16-byte aligned
  const void* xpack = nullptr;
  /// @brief 1: x read straight from NCHW (make_direct_params: tf32, 1x1 filter, no padding, stride 1 or 2):
  /// no packing pass and no transform. A tile is tile_rows whole output rows of one image (tile_rows * Q <=
  /// block_m; tile pixel px < tile_rows * Q is output (p0 + px / Q, px % Q), the rest computed and dropped);
  /// per stage one TMA box of x (rp columns x 8 * group channels x tile_rows rows, the rows `stride` input
  /// rows apart) lands in the stage as [row][channel][column] fp32, rp = 8 mod 16 (so that the 4 channels
  /// a quad of lanes reads fall in distinct banks), and the consumers load their wgmma A fragments from it
  /// into registers, rounding to tf32 there (conv_mainloop_wgmma::run_stage_direct); the filter slice is
  /// the shared-memory B operand as in the other tiles; direct_taps (below) generalises it to filters of
  /// several taps, also in bf16 / fp16. Set by make_direct_params.
  std::int32_t direct = 0;
  convred::detail::fast_divmod div_image;  ///< flat: divides by flat_rows * pw (plane pixel -> image)
  convred::detail::fast_divmod div_pw;     ///< flat: divides by pw (pixel within an image -> row, column)
  /// @brief Grouped convolutions (PyTorch's conv2d `groups`, each group its own GEMM: GEMM_N = K/groups,
  /// GEMM_K = C/groups R S): the groups, 1 for a dense one. Group g's output channels [g Kg, (g + 1) Kg)
  /// are channel passes g * group_passes ... (g + 1) * group_passes - 1 (npass = conv_groups *
  /// group_passes), each over the kt stages of the group's own C/groups input channels (C/groups a multiple
  /// of block_c, so that no stage reads another group's channels): the x channels of slice (pass, stage)
  /// are x_stage's, its output channels pass_k0's. The packed filter holds each pass's slices as for a
  /// dense problem of Kg output and C/groups input channels (device::pack_filter). Set by make_params.
  std::int32_t conv_groups = 1;
  /// @brief channel passes per group: ceil(Kg / 128) (npass for a dense convolution)
  std::int32_t group_passes = 1;
  /// @brief output channels per group, K / conv_groups (K for a dense convolution)
  std::int32_t Kg = 0;
  /// @brief 1: direct tiles of a filter with several taps (make_direct_params: any math, stride 1, any R x S,
  /// padding and dilation; DeepLab's ASPP layers; under 3xTF32 also undilated filters too large for its other
  /// stages (any_filter), both parts per stage; bf16 / fp16 read a copy of x as pairs of 16-bit
  /// channels, one 32-bit box entry per pair, 8 per slice of 16): a stage is one filter row r of `group` channel slices,
  /// kt = channel stages x R, stage i of a pass its channel stage i / R and row i % R. Its TMA box holds
  /// tile_rows input rows from p0 + r dil_h - pad_h and rp columns from -col_shift - pad_w, where col_shift
  /// (0-3) aligns the box's start to 16 bytes; tap s of the row reads it at column offset s dil_w + col_shift
  /// (zero outside x: TMA's fill, also past column W of a padded copy, x_pitch). A stage whose
  /// rows all lie outside x (a large dilation's taps into the padding) is skipped by the producer and the
  /// consumers alike (row_live) where every weight is finite (skips_dead_rows); a unit with no live stage in
  /// a pass folds zeros. 0: a 1x1 filter.
  std::int32_t direct_taps = 0;
  /// @var dil_h
  /// @brief vertical dilation (direct_taps, and flat tiles at stride 1: tap (r, s) reads the window r dil_h
  /// plane rows on; 1 where R = 1)
  /// @var dil_w
  /// @brief horizontal dilation (direct_taps; flat tiles: tap s reads the window s dil_w pixels on; 1 where
  /// S = 1)
  std::int32_t dil_h = 1, dil_w = 1;
  /// @brief direct_taps: 32-bit entries per row of the x the TMA box reads: W, or when x is copied
  /// (plan::wgmma_params::x_copied: W % 4 != 0, since TMA row strides are 16-byte multiples, or bf16 / fp16
  /// math, whose copy holds channel pairs) W rounded up to a multiple of 4 (the copy lies in the
  /// workspace's packed-x region: xpack_bytes; written before the kernel by kernel::pitch_x_kernel or
  /// kernel::pack_x_pairs_kernel; the tensor map's rows are W wide, so its extra columns are never read)
  std::int32_t x_pitch = 0;

  /// The stage of x (its channels [x_stage * group * block_c, ...) of the image) that packed filter slice
  /// `slice` (pass * kt + stage of the pass) multiplies: the pass's group's kt stages, kt per group.
  __host__ __device__ std::int32_t x_stage(std::int32_t slice) const {
    return slice / (kt * group_passes) * kt + slice % kt;
  }
  /// Stages of x per tile: kt per group (the packed x's (tile, stage) blocks, xpack_bytes).
  __host__ __device__ std::int32_t x_stages() const { return kt * conv_groups; }
  /// Stages per channel stage of a pass: R for direct_taps (one per filter row), else 1.
  __host__ __device__ std::int32_t row_stages() const { return direct_taps ? R : 1; }
  /// direct_taps: the filter row of slice `slice`.
  __host__ __device__ std::int32_t stage_row(std::int32_t slice) const { return direct_taps ? slice % R : 0; }
  /// Byte offset from `filter` of the packed filter's non-finite flag (device::pack_filter: a 32-bit word,
  /// nonzero when some weight is +-inf or NaN), just past its npass * kt slices of b_bytes. The slices'
  /// total, ceil(C/groups / block_c) * R * S slices per pass, is the same for every tiling of a problem.
  __host__ __device__ std::int64_t filter_flag_offset() const {
    return static_cast<std::int64_t>(npass) * kt * b_bytes;
  }
  /// direct_taps: whether the stages of dead filter rows (row_live) may be skipped: only where every
  /// weight is finite (the packed filter's flag, read after the packing kernel has completed). A padding
  /// zero times an infinite or NaN weight is NaN in PyTorch's convolution, so with such a weight every
  /// stage runs and multiplies the zeros TMA fills in for the padding, as the other tiles do. The producer
  /// thread and each consumer thread read it once per block, into a register (one read shared through shared
  /// memory measured up to 2.6 % slower, bench/NOTES.md); they agree because the prepared bytes do not change
  /// during a run (the plans' contract).
  __device__ bool skips_dead_rows() const {
    if (!direct_taps) return false;
    return *reinterpret_cast<const int*>(static_cast<const unsigned char*>(filter) + filter_flag_offset()) == 0;
  }
  /// direct_taps: whether filter row r reads any row of x for the tile of output rows [p0, p0 + tile_rows)
  /// (those past P included); a dead row's stage is all zeros and is skipped (where skips_dead_rows).
  /// Always true otherwise.
  __host__ __device__ bool row_live(std::int32_t r, std::int32_t p0) const {
    if (!direct_taps) return true;
    const std::int32_t h = p0 + r * dil_h - pad_h;
    return h < H && h + tile_rows > 0;
  }
  /// The first output channel of channel pass `pass`: its group's first plus 128 per earlier pass of the group.
  __host__ __device__ std::int32_t pass_k0(std::int32_t pass) const {
    return pass / group_passes * Kg + pass % group_passes * 128;
  }
  /// The output channels of channel pass `pass`: min(128, Kg - its first within the group).
  __host__ __device__ std::int32_t pass_channels(std::int32_t pass) const {
    const std::int32_t left = Kg - pass % group_passes * 128;
    return left < 128 ? left : 128;
  }
};

/// Operand stages at most in a wgmma kernel's pipeline (its mbarrier arrays): Policy::stages, or for flat
/// tiles as many more as fit (wgmma_conv_params::stages).
inline constexpr int wgmma_max_stages = 8;

/// Slices of block_c input channels per stage at most (wgmma_conv_params::group).
inline constexpr int wgmma_max_group = 4;

}  // namespace convred::block
