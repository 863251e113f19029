/// @file block/conv_mainloop_wgmma.cuh
/// @brief Block-level Hopper (sm_90a) implicit-GEMM conv mainloop: wgmma with both operands in shared
/// memory, A (the input patch planes) read at a shifted descriptor per filter tap, B the packed filter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../detail/fast_divmod.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../warp/mma.cuh"
#include "../warpgroup/wgmma.cuh"

namespace convred::block {

/// @brief Parameter block of the packed-filter wgmma kernel (kernel::conv2d_reduce_wgmma_kernel): NCHW fp32 x,
/// groups 1, stride 1 or 2, dilation 1, any K (conv_mainloop_wgmma::make_params decides). A tile is tile_h m64
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
  /// @brief input height
  /// @var W
  /// @brief input width
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
  /// @brief stages per channel pass: ceil(C / block_c)
  /// @var npass
  /// @brief channel passes per tile: ceil(K / 128); a tile is npass * kt stages
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
  /// @brief the whole packed filter (npass * kt * b_bytes), resident in shared memory ahead of the operand stages
  /// for the block's lifetime and copied once; 0 when it is streamed with each stage instead
  std::int32_t b_bytes = 0, stage_bytes = 0, a_offset = 0, resident_bytes = 0;
  convred::detail::fast_divmod div_quads;  ///< divides by rp / 4 (transform item -> plane row, 4 raw columns)
  convred::detail::fast_divmod div_ph;     ///< divides by ph (plane row -> plane, patch row)
  /// @brief Partial ("split-K") mode when not null: the raw accumulators (no bias, no epilogue, no
  /// reduction) of every work unit go to `partial`, splits x (M - partial_m0) x K floats laid out [z][m -
  /// partial_m0][k] (z the GEMM_K split, m = (n * P + p) * Q + q the output pixel, k = pass * 128 + c the
  /// output channel, fastest), for
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
  /// across image boundaries. A tile is block_m consecutive rows o (the pixels with p >= P or q >= Q computed
  /// and dropped), reading a window of phase_pixels = block_m + ((R - 1) / stride) * pw + (S - 1) / stride
  /// pixels of each (part, plane, phase). The packed x holds each tile's windows stage by stage, in the
  /// stage's shared-memory layout ([tile][stage][part][plane][phase][window pixel], the halo pixels repeated
  /// in the next tile's windows), so that a stage's planes are one bulk copy of parts * part_bytes: the copy
  /// engine takes ~270 cycles per bulk copy of up to 4 KB whatever its size (bench/NOTES.md, "Moved from
  /// header comments"). No TMA box, no transform, no gather in the kernel, and no tile shape to fit the image
  /// (7 x 7 images with a 3x3 filter, padding 1: 77% of the computed pixels are outputs, against 19% in 16 x
  /// 16 tiles). The packing pass reads x (the halos twice) and writes xpack_bytes. 0: tiles of image rows.
  std::int32_t flat = 0;
  /// @brief flat: plane rows per image, P + (R - 1) / stride, less min(pad_h, R - 1) at stride 1; the
  /// pitch pw likewise Q + (S - 1) / stride, less min(pad_w, S - 1) at stride 1. At stride 1 the zero
  /// columns right of a row are the next row's left padding: a tap reading past column pw - 1 reads
  /// the next row's first columns, which hold input columns < 0 (zero), and the input columns it stands
  /// for are >= W (zero too); rows past flat_rows likewise reach the next image's top padding rows.
  /// (A 3x3 "same" convolution of 14 x 14 images: 15 x 15 plane pixels per image, not 16 x 16.)
  std::int32_t flat_rows = 0;
  /// @brief Slices of block_c input channels per operand stage: 1, or for flat or direct tiles of a 1x1
  /// filter (not 3xTF32) up to wgmma_max_group (a divisor of ceil(C / block_c)), so that a stage is group x 4
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
  /// the shared-memory B operand as in the other tiles. Set by make_direct_params.
  std::int32_t direct = 0;
  convred::detail::fast_divmod div_image;  ///< flat: divides by flat_rows * pw (plane pixel -> image)
  convred::detail::fast_divmod div_pw;     ///< flat: divides by pw (pixel within an image -> row, column)
};

/// Operand stages at most in a wgmma kernel's pipeline (its mbarrier arrays): Policy::stages, or for flat
/// tiles as many more as fit (wgmma_conv_params::stages).
inline constexpr int wgmma_max_stages = 8;

/// Slices of block_c input channels per stage at most (wgmma_conv_params::group).
inline constexpr int wgmma_max_group = 4;

/// @brief Accumulates one stage of a tile_h x 64 pixel x 128-channel tile on tensor cores with wgmma.
///
/// Warpgroup g (threads 128g..128g+127) owns output rows 2g and 2g+1 of the tile (cooperative; ping-pong:
/// rows 0 and 1 of its own tile) (accumulators d[0], d[1]:
/// one m64 tile each, 64 fp32 per thread, the wgmma D fragment, see warpgroup/wgmma.cuh). Per stage it
/// issues, for every filter tap (r, s) and both rows, one m64n128 wgmma whose A descriptor starts in the
/// stage's planes (block::conv_patch_loader) at pixel ((row + r) * pw + s): the 64 pixels of an output row
/// segment read with the tap's shift, no data moved. GEMM_K is ordered (r, s, c) within a stage. All of
/// a stage's wgmmas (2 R S, or 6 R S for 3xTF32: small terms first, as CUTLASS orders them) form one
/// commit group, so the tensor pipe sees one long queue per stage instead of a round trip per tap.
///
/// Accumulator shape for block::reduce_epilogue: acc[i][j] with i = 2 * row + half (TM = 4 pixels per
/// thread: columns 16w + g and 16w + g + 8 of rows 2g and 2g+1) and j = 2 * n8 + e (TN = 32 channels:
/// 8 n8 + 2t + e); lanes 4g'..4g'+3 share pixels (`lanes_per_pixel` = 4), one warp per pixel.
template <class Policy>
struct conv_mainloop_wgmma {
  using V = float;                                     ///< accumulator type
  using math_t = typename Policy::math;                ///< precision tag
  static constexpr int BM = Policy::block_m;           ///< pixels per tile (tile_h x tile_w)
  static constexpr int NT = Policy::consumer_threads;  ///< consumer threads (256)
  static constexpr int TM = 4;                         ///< accumulator pixel rows per thread
  static constexpr int TN = 32;                        ///< accumulator channels per thread
  static constexpr int lanes_per_pixel = 4;            ///< lanes 4g..4g+3 hold the same pixels
  static constexpr int warps_per_pixel = 1;            ///< one warp holds all 128 channels of its pixels
  static constexpr bool x3 = Policy::parts == 2;       ///< 3xTF32: big and small parts
  /// 3xTF32: run_stage accumulates each row of the stage in a fresh register tile, waits for it and adds
  /// it to d with IEEE adds (promotion), so the stage is complete (its slot free) when run_stage returns.
  /// The tensor cores' own fp32 accumulation is not IEEE-rounded (bench/NOTES.md: 3.6e-6 vs float64 on
  /// the seed problem with all 1,728 products of a pixel in one accumulator); chains of one stage (216
  /// products) bring it under 1e-6, as the mma.sync 3xTF32 kernels do.
  static constexpr bool promotes = x3;
  /// wgmma kind of warpgroup::mma_ss_m64n128: 0 tf32, 1 bf16, 2 fp16
  static constexpr int kind = Policy::is_tf32 ? 0 : (std::is_same_v<math_t, math::bf16> ? 1 : 2);
  /// bytes of one filter tap's 128 x block_c slice in shared memory
  static constexpr std::uint32_t tap_bytes = 128u * Policy::block_c * Policy::filter_elem_bytes;
  static_assert(Policy::tile_w == 64 && Policy::tile_h == (Policy::pingpong ? 2 : 4),
                "conv_mainloop_wgmma: tiles are 4 rows (cooperative) or 2 rows (ping-pong) of 64 pixels");
  /// First tile row of this thread's warpgroup: 2g cooperative, 0 ping-pong (its own tile).
  __device__ static int wg_row0() { return Policy::pingpong ? 0 : 2 * (static_cast<int>(threadIdx.x) / 128); }

  /// Lane in the warp (lane = 4g + t).
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
  /// Warp index within its warpgroup (0..3).
  __device__ static int warp_in_group() { return (static_cast<int>(threadIdx.x) / 32) % 4; }
  /// Tile pixel (row * 64 + column) of accumulator row i.
  __device__ static int tile_m(int i) {
    return (wg_row0() + i / 2) * 64 + 16 * warp_in_group() + lane() / 4 + 8 * (i % 2);
  }
  /// Output channel of accumulator column j.
  __device__ static int tile_n(int j) { return 8 * (j / 2) + 2 * (lane() % 4) + (j % 2); }

  /// Keeps the compiler from moving accesses of r across the wgmma fences and waits (no instruction).
  __device__ static void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
  /// fence_operand on every accumulator.
  __device__ static void fence_acc(float (&d)[2][64]) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(d[m][i]);
  }

  /// The accumulators d in reduce_epilogue's tile shape: acc[2 * row + half][2 * n8 + e] = d[row][4 n8 +
  /// 2 half + e] (see the class comment).
  __device__ static void to_tile(const float (&d)[2][64], float (&acc)[TM][TN]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[2 * mt + e / 2][2 * j + e % 2] = d[mt][4 * j + e];
  }

  /// @brief Partial mode's store of one channel pass (wgmma_conv_params::partial): the raw accumulators d
  /// (no bias, no epilogue) of tile pixel tile_m(i) and channel c = tile_n(j) go to out[m * ldk + c], m =
  /// pixel(tile_m(i)); pixels for which `pixel` returns a negative value (outside the output: the columns
  /// of a narrow tile past Q, the rows of a partial tile past P) and channels c >= valid are skipped, so
  /// that every element of the caller's [m][k] plane is written by exactly one thread.
  /// A thread holds its channels in adjacent pairs (8 n8 + 2t and 8 n8 + 2t + 1: d[row][4 n8 + 2 half] and
  /// d[row][4 n8 + 2 half + 1]); lanes 2u and 2u + 1 of a quad swap one pair per two n8 blocks
  /// (__shfl_xor_sync), so that each holds 4 consecutive channels, stored as one 16-byte store when `vec` = 4
  /// (the caller's guarantee that out is 16-byte aligned and ldk and valid are multiples of 4), else as
  /// 4-byte stores: a warp's store writes 64 contiguous bytes of each of its 8 pixel rows, half the
  /// instructions of 8-byte pairs (bench/NOTES.md, "Moved from header comments"). Under 3xTF32 (promotes) the
  /// pairs are stored as they lie, as 8-byte stores where `vec` >= 2, else element by element: the shuffles
  /// changed ptxas's schedule of that kernel's mainloop, slower on its fused rows.
  /// Every store is predicated (store_if, store4_if), none behind a branch: with branches around them (a pixel
  /// outside the output, a channel past K) ptxas spilled 236 bytes in the 3xTF32 consumer and 240-284
  /// bytes in the ping-pong ones and serialised the ping-pong kernels' wgmmas (warning C7520: a
  /// warpgroup.arrive in a divergent path) (sm_90a, nvcc 13.0). Called by all 32 lanes of the warp.
  /// @param d     the pass's accumulators (fenced: the wgmmas have completed)
  /// @param out   device pointer to channel 0 of this pass in pixel row 0 of the plane (k = pass * 128)
  /// @param ldk   floats between consecutive pixels of the plane (K)
  /// @param valid channels of this pass inside the output, min(128, K - pass * 128)
  /// @param vec   4: out 16-byte aligned, ldk and valid multiples of 4 (16-byte stores); 2: out and ldk
  ///   even (3xTF32: 8-byte pair stores; the other policies then store 4 bytes at a time, as for 1)
  /// @param pixel tile pixel (row * 64 + column, as tile_m) -> plane row m, or negative: skip
  template <class PixelMap>
  __device__ static void store_raw(const float (&d)[2][64], float* out, std::int64_t ldk, int valid, int vec,
                                   PixelMap pixel) {
    if constexpr (promotes) {  // 3xTF32: the pairs as they lie (see above)
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const std::int64_t m = pixel(tile_m(i));
        const bool in = m >= 0;
        // channel 2t of the row, as a global-space address (+ 32 bytes per n8 below)
        const std::uint64_t row = __cvta_generic_to_global(out + (in ? m : 0) * ldk + tile_n(0));
        const int c0 = tile_n(0), mt = i / 2, half = i % 2;
#pragma unroll
        for (int n8 = 0; n8 < 16; ++n8) {
          const int c = c0 + 8 * n8;
          const bool both = in && vec >= 2 && c + 1 < valid;
          store_if(row + 32u * n8, d[mt][4 * n8 + 2 * half], d[mt][4 * n8 + 2 * half + 1], both,
                   in && !both && c < valid, in && !both && c + 1 < valid);
        }
      }
    } else {
      const bool odd = lane() % 2 != 0, quads = vec == 4;
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const std::int64_t m = pixel(tile_m(i));
        const bool in = m >= 0;
        // channel 0 of the row, as a global-space address
        const std::uint64_t row = __cvta_generic_to_global(out + (in ? m : 0) * ldk);
        const int c0 = tile_n(0), mt = i / 2, half = i % 2;
#pragma unroll
        for (int n8 = 0; n8 < 16; n8 += 2) {
          const float a0 = d[mt][4 * n8 + 2 * half], a1 = d[mt][4 * n8 + 2 * half + 1];
          const float b0 = d[mt][4 * n8 + 4 + 2 * half], b1 = d[mt][4 * n8 + 4 + 2 * half + 1];
          // the even lane keeps block n8's pair and takes its partner's (channels c0 .. c0 + 3 of the
          // block), the odd lane keeps block n8 + 1's and takes its partner's (channels c0 - 2 .. c0 + 1 of
          // that one)
          const float r0 = __shfl_xor_sync(0xffffffffu, odd ? a0 : b0, 1);
          const float r1 = __shfl_xor_sync(0xffffffffu, odd ? a1 : b1, 1);
          const int c = odd ? 8 * n8 + 8 + c0 - 2 : 8 * n8 + c0;
          store4_if(row + 4u * c, odd ? r0 : a0, odd ? r1 : a1, odd ? b0 : r0, odd ? b1 : r1,
                    in && quads && c < valid, in && !quads, valid - c);
        }
      }
    }
  }

  /// Predicated stores of one channel pair at global-space address g (predicates, not branches: the
  /// accumulators are read on every path, so that ptxas needs no warpgroup.arrive in a divergent path): v0
  /// and v1 as one 8-byte store when `both` (g 8-byte aligned), else v0 at g when `first` and v1 at g + 4
  /// when `second`.
  __device__ static void store_if(std::uint64_t g, float v0, float v1, bool both, bool first, bool second) {
    asm volatile(
        "{\n"
        " .reg .pred pb, p0, p1;\n"
        " setp.ne.u32 pb, %3, 0;\n"
        " setp.ne.u32 p0, %4, 0;\n"
        " setp.ne.u32 p1, %5, 0;\n"
        " @pb st.global.v2.f32 [%0], {%1, %2};\n"
        " @p0 st.global.f32 [%0], %1;\n"
        " @p1 st.global.f32 [%0+4], %2;\n"
        "}\n" ::"l"(g),
        "f"(v0), "f"(v1), "r"(static_cast<unsigned>(both)), "r"(static_cast<unsigned>(first)),
        "r"(static_cast<unsigned>(second))
        : "memory");
  }

  /// Predicated stores of 4 consecutive channels v0..v3 at global-space address g: one 16-byte store when
  /// `quad` (g 16-byte aligned), else when `single` each v_i with i < n as a 4-byte store at g + 4 i.
  __device__ static void store4_if(std::uint64_t g, float v0, float v1, float v2, float v3, bool quad, bool single,
                                   int n) {
    asm volatile(
        "{\n"
        " .reg .pred pq, ps, p0, p1, p2, p3;\n"
        " setp.ne.u32 pq, %5, 0;\n"
        " setp.ne.u32 ps, %6, 0;\n"
        " setp.gt.and.s32 p0, %7, 0, ps;\n"
        " setp.gt.and.s32 p1, %7, 1, ps;\n"
        " setp.gt.and.s32 p2, %7, 2, ps;\n"
        " setp.gt.and.s32 p3, %7, 3, ps;\n"
        " @pq st.global.v4.f32 [%0], {%1, %2, %3, %4};\n"
        " @p0 st.global.f32 [%0], %1;\n"
        " @p1 st.global.f32 [%0+4], %2;\n"
        " @p2 st.global.f32 [%0+8], %3;\n"
        " @p3 st.global.f32 [%0+12], %4;\n"
        "}\n" ::"l"(g),
        "f"(v0), "f"(v1), "f"(v2), "f"(v3), "r"(static_cast<unsigned>(quad)), "r"(static_cast<unsigned>(single)), "r"(n)
        : "memory");
  }

  /// @brief The shape rules of the can-implement check (host): nullptr when the mainloop implements p's
  /// layout and shape, else why not (a static string naming the rule, for conv2d_reduce_plan's reason).
  /// Shared-memory fit is checked by make_params. p must be valid (convred::validate).
  static const char* cannot_implement(const conv2d_problem& p) {
    if (p.x_layout != layout::nchw) return "x is not NCHW";
    if (p.groups != 1) return "groups != 1";
    if (p.stride_h != p.stride_w || p.stride_h > 2) return "stride other than 1 or 2 (the same in both dimensions)";
    if (p.dil_h != 1 || p.dil_w != 1) return "dilation != 1";
    if (promotes && !((p.R == 3 && p.S == 3) || (p.R == 1 && p.S == 1))) return "3xTF32 with a filter other than 3x3 or 1x1";
    // (the stride-2 tap loops next to the promoted stages pushed ptxas into spilling ~250 bytes)
    if (promotes && p.stride_h != 1) return "3xTF32 with stride 2";
    if (p.P() <= 0 || p.Q() <= 0) return "empty output";
    if (p.N > 0x7fffffff || p.C * p.H * p.W * 4 >= (std::int64_t(1) << 40)) return "N >= 2^31 or an image of 2^40 bytes or more";
    return nullptr;
  }

  /// @brief The mainloop's can-implement check and parameter construction (host): whether the kernel
  /// serves p and, if so, its parameters (x, filter, bias, xpack left null) and dynamic shared memory (the
  /// resident filter, operand stages, raw buffers, then `tail_bytes` of reduction state and barriers),
  /// which must not exceed `max_smem`. The filter is made resident (copied once per block instead of a
  /// slice per stage) whenever that layout fits `max_smem` and is under 2^20 bytes (one mbarrier
  /// transaction count); otherwise it is streamed. Tiles: `flat` = false: of image rows (tile_h rows of
  /// 64 output columns, or for narrow images whole rows); stride 2, or W not a multiple of 4 (TMA rows
  /// are 16-byte multiples), is then served by the gathering producer (`gather`). `flat` = true: flat
  /// tiles of block_m GEMM rows over x packed beforehand (wgmma_conv_params::flat; xpack_bytes), any
  /// stride-1 or stride-2 problem whose packed planes have fewer than 2^31 pixels and whose packing grid
  /// fits (fewer than 2^31 - 1 (tile, slice) blocks of under 2^24 16-byte entries each). Not served: NHWC x,
  /// groups != 1, dilation != 1, strides other than 1 or 2 in both dimensions, N >= 2^31 or one image of
  /// 2^40 bytes or more (TMA coordinates and strides), stages larger than the shared memory. p must be
  /// valid (convred::validate). Independent of N otherwise (N = 0 is served, with no tiles).
  static bool make_params(const conv2d_problem& p, std::size_t tail_bytes, std::size_t max_smem,
                          wgmma_conv_params& k, std::size_t& smem_bytes, bool flat = false) {
    if (cannot_implement(p)) return false;
    static_assert(Policy::stages <= wgmma_max_stages, "wgmma_policy: at most wgmma_max_stages operand stages");
    constexpr int TH = Policy::tile_h, TW = Policy::tile_w, E = 16 / Policy::filter_elem_bytes, BM = Policy::block_m;
    static_assert(TW == 64, "one m64 wgmma row per 64 tile pixels");
    set_shape(p, k);
    const std::int64_t halo_h = (p.R - 1) / p.stride_h, halo_w = (p.S - 1) / p.stride_w;  // extra rows, columns
    std::int64_t ph = 0, pw = 0, rp = 0, raw_copy = 0, phase_pixels = 0, plane = 0;
    if (flat) {
      // flat tiles of BM GEMM rows over the packed planes (pitch pw, flat_rows rows per image). Stride 1:
      // a row's right padding is the next row's left padding (and an image's bottom padding rows the next
      // image's top ones), so up to min(pad, halo) zero columns (rows) are dropped from the pitch (the rows
      // per image): a 3x3 "same" convolution has pitch W + 1, not W + 2 (wgmma_conv_params::flat_rows)
      const std::int64_t merge_h = p.stride_h == 1 ? std::min<std::int64_t>(p.pad_h, halo_h) : 0,
                         merge_w = p.stride_w == 1 ? std::min<std::int64_t>(p.pad_w, halo_w) : 0;
      const std::int64_t hs = p.P() + halo_h - merge_h;
      pw = p.Q() + halo_w - merge_w, ph = hs;
      const std::int64_t outputs = p.N == 0 ? 0 : ((p.N - 1) * hs + p.P() - 1) * pw + p.Q();  // past the last output
      const std::int64_t tiles = (outputs + BM - 1) / BM;
      phase_pixels = BM + halo_h * pw + halo_w;  // a tile's window: its rows and the taps' reach
      const std::int64_t pixels = tiles * BM + halo_h * pw + halo_w;
      if (pixels >= (std::int64_t(1) << 31) || p.N * hs * pw >= (std::int64_t(1) << 31)) return false;
      // the packed x (xpack_bytes, < 2^56) and its packing kernel's grid (a block row per tile and stage:
      // fewer than 2^31 - 1; its first part's 16-byte entries in chunks of 256: fewer than 65,536)
      const std::int64_t slices = (p.C + Policy::block_c - 1) / Policy::block_c;
      const std::int64_t per = (Policy::block_c / E) * wgmma_max_group * k.phases_h * k.phases_w * phase_pixels;
      if (tiles * slices >= (std::int64_t(1) << 31) - 1 || tiles * slices * per >= (std::int64_t(1) << 50) ||
          per / 256 >= 65535)
        return false;
      k.flat = 1, k.flat_rows = static_cast<std::int32_t>(hs), k.flat_pixels = pixels;
      k.div_image = convred::detail::fast_divmod(static_cast<std::int32_t>(hs * pw));
      k.div_pw = convred::detail::fast_divmod(static_cast<std::int32_t>(pw));
      k.tile_rows = 0, k.tile_cols = static_cast<std::int32_t>(pw), k.mrow_step = TW;
      k.tiles_p = 1, k.tiles_q = 1, k.tiles = tiles;
      plane = k.phases_h * k.phases_w * phase_pixels * 16;
    } else {
      // narrow images (Q + S - 1 <= 32): planes of pitch 16 or 32, each m64 row covering 4 or 2 output
      // rows of the whole width; otherwise rows of 64 output pixels, patch rows of 64 + S - 1
      // stride 2 (or W % 4 != 0: TMA rows are 16-byte multiples): the producer threads gather x themselves
      k.gather = (k.stride != 1 || p.W % 4 != 0) ? 1 : 0;
      const std::int64_t span = p.Q() + halo_w;
      pw = span <= 16 ? 16 : span <= 32 ? 32 : TW + halo_w;
      const bool narrow = pw <= 32;
      k.tile_cols = static_cast<std::int32_t>(narrow ? pw : TW);
      k.tile_rows = static_cast<std::int32_t>(narrow ? TH * (TW / pw) : TH);
      k.mrow_step = static_cast<std::int32_t>(narrow ? TW : pw);
      k.tiles_p = (k.P + k.tile_rows - 1) / k.tile_rows, k.tiles_q = (k.Q + k.tile_cols - 1) / k.tile_cols;
      ph = k.tile_rows + halo_h;  // patch rows (of each phase)
      // TMA box (rp x ph per channel; rp a multiple of 4 for 16-byte rows), starting col_shift columns left
      // of the patch so that its first column is 16-byte aligned
      k.col_shift = static_cast<std::int32_t>((4 - p.pad_w % 4) % 4);
      rp = (pw + k.col_shift + 3) / 4 * 4;
      raw_copy = k.gather ? 0 : std::int64_t(Policy::raw_c) * ph * rp * 4;  // gather: no raw buffers
      phase_pixels = ph * pw;
      plane = (k.phases_h * k.phases_w * phase_pixels + (narrow ? halo_w : 0)) * 16;
      // rp and ph: TMA box dimensions are at most 256
      if (rp > 256 || ph > 256) return false;
      k.tiles = p.N * k.tiles_p * k.tiles_q;
    }
    const std::int64_t raw_bytes = (raw_copy + 127) / 128 * 128;
    const std::int64_t slice_part = plane * (Policy::block_c / E);  // one slice's planes
    const std::int64_t slice_b = std::int64_t(Policy::parts) * p.R * p.S * Policy::block_n * Policy::block_c *
                                 Policy::filter_elem_bytes;  // one slice's packed filter
    // flat 1x1: group slices per stage, the most (<= wgmma_max_group, dividing kt) for which 4 streamed stages fit
    if (flat && p.R == 1 && p.S == 1 && !x3) {
      for (int g = wgmma_max_group; g > 1; --g) {
        const std::int64_t st = (g * (slice_b + Policy::parts * slice_part) + 127) / 128 * 128;
        if (k.kt % g == 0 && 4 * st + static_cast<std::int64_t>(tail_bytes) <= static_cast<std::int64_t>(max_smem)) {
          k.group = g;
          break;
        }
      }
      k.kt /= k.group;
    }
    const std::int64_t part = slice_part * k.group, b_bytes = slice_b * k.group;
    // the filter resident (copied once per block: no filter bytes per stage) when it fits, else streamed
    // as a slice per stage
    const std::int64_t rest = Policy::raw_stages * raw_bytes + static_cast<std::int64_t>(tail_bytes);
    const std::int64_t planes = (Policy::parts * part + 127) / 128 * 128;
    const std::int64_t slices = std::int64_t(k.kt) * k.npass;  // packed filter slices of b_bytes
    if (slices * b_bytes >= (std::int64_t(1) << 40)) return false;
    const std::int64_t resident = (slices * b_bytes + 127) / 128 * 128;
    std::int64_t stage = planes, smem = resident + Policy::stages * planes + rest;
    k.stages = Policy::stages;
    if (smem > static_cast<std::int64_t>(max_smem) || resident >= (std::int64_t(1) << 20)) {
      // streamed: as many stages (<= Policy::stages, >= 2) as fit
      stage = (b_bytes + Policy::parts * part + 127) / 128 * 128;
      while (k.stages > 2 && k.stages * stage + rest > static_cast<std::int64_t>(max_smem)) --k.stages;
      smem = k.stages * stage + rest;
      k.resident_bytes = 0, k.a_offset = static_cast<std::int32_t>(b_bytes);
    } else {
      k.resident_bytes = static_cast<std::int32_t>(resident), k.a_offset = 0;
    }
    if (smem > static_cast<std::int64_t>(max_smem)) return false;
    // flat tiles: more stages where they fit (up to wgmma_max_stages). Their stages are small where a
    // stage is little work (1x1: one tap, 4 wgmmas of ~64 cycles per 12 KB copied), so that 4 stages in
    // flight leave the copies' latency exposed
    while (flat && k.stages < wgmma_max_stages && smem + stage <= static_cast<std::int64_t>(max_smem)) ++k.stages, smem += stage;
    k.rp = static_cast<std::int32_t>(rp), k.bh = static_cast<std::int32_t>(flat ? 0 : ph);
    k.ph = static_cast<std::int32_t>(ph), k.pw = static_cast<std::int32_t>(pw);
    k.phase_pixels = static_cast<std::int32_t>(phase_pixels);
    k.raw_copy_bytes = static_cast<std::int32_t>(raw_copy), k.raw_bytes = static_cast<std::int32_t>(raw_bytes);
    k.plane_bytes = static_cast<std::int32_t>(plane), k.part_bytes = static_cast<std::int32_t>(part);
    k.b_bytes = static_cast<std::int32_t>(b_bytes), k.stage_bytes = static_cast<std::int32_t>(stage);
    k.div_quads = convred::detail::fast_divmod(static_cast<std::int32_t>(rp / 4));
    k.div_ph = convred::detail::fast_divmod(static_cast<std::int32_t>(ph));
    smem_bytes = static_cast<std::size_t>(smem);
    return true;
  }

  /// The problem's sizes in k (reset first): shape, stride, phases, kt = ceil(C / block_c), npass.
  static void set_shape(const conv2d_problem& p, wgmma_conv_params& k) {
    k = wgmma_conv_params{};
    k.N = p.N, k.C = static_cast<std::int32_t>(p.C), k.H = static_cast<std::int32_t>(p.H), k.W = static_cast<std::int32_t>(p.W);
    k.K = static_cast<std::int32_t>(p.K), k.P = static_cast<std::int32_t>(p.P()), k.Q = static_cast<std::int32_t>(p.Q());
    k.R = static_cast<std::int32_t>(p.R), k.S = static_cast<std::int32_t>(p.S);
    k.pad_h = static_cast<std::int32_t>(p.pad_h), k.pad_w = static_cast<std::int32_t>(p.pad_w);
    k.stride = static_cast<std::int32_t>(p.stride_h);
    k.phases_h = static_cast<std::int32_t>(p.R < p.stride_h ? p.R : p.stride_h);
    k.phases_w = static_cast<std::int32_t>(p.S < p.stride_w ? p.S : p.stride_w);
    k.kt = (k.C + Policy::block_c - 1) / Policy::block_c;
    k.npass = static_cast<std::int32_t>((p.K + Policy::block_n - 1) / Policy::block_n);
  }

  /// @brief Parameters of the direct tiles (wgmma_conv_params::direct: x read by TMA from NCHW, the A
  /// fragments loaded into registers by the consumers) and their dynamic shared memory (as make_params:
  /// the resident filter when it fits, operand stages, then `tail_bytes`), if they serve p: tf32 math
  /// (one part), a 1x1 filter without padding, stride 1 or 2, Q <= block_m output columns whose box row
  /// fits TMA's 256 (rp below: Q <= 248 at stride 1, 124 at stride 2), and x rows whose
  /// TMA strides are multiples of 16 bytes (H * W and stride * W multiples of 4). Tiles of tile_rows =
  /// ceil(P / tiles_p) output rows, tiles_p = ceil(P / floor(block_m / Q)); stages of `group` slices of
  /// block_c channels (the most, up to wgmma_max_group, dividing ceil(C / block_c) for which 4 streamed
  /// stages fit), so the packed filter is pack_filter's as for the other tiles. p must be valid.
  static bool make_direct_params(const conv2d_problem& p, std::size_t tail_bytes, std::size_t max_smem,
                                 wgmma_conv_params& k, std::size_t& smem_bytes) {
    if constexpr (!Policy::is_tf32 || Policy::parts != 1) {
      (void)p, (void)tail_bytes, (void)max_smem, (void)k, (void)smem_bytes;
      return false;
    } else {
      if (cannot_implement(p) || p.R != 1 || p.S != 1 || p.pad_h != 0 || p.pad_w != 0) return false;
      const std::int64_t P = p.P(), Q = p.Q(), s = p.stride_h;
      if (Q > Policy::block_m || (p.H * p.W) % 4 != 0 || (s * p.W) % 4 != 0) return false;
      // the box's columns: the s * (Q - 1) + 1 read, rounded up to 8 mod 16 floats (a box with an element
      // stride of 2, so that only the columns read land, stopped the kernel with an illegal address on
      // the H200)
      const std::int64_t rp = (s * (Q - 1) + 1 + 7) / 16 * 16 + 8;
      if (rp > 256) return false;
      const std::int64_t per = Policy::block_m / Q, tiles_p = (P + per - 1) / per, rows = (P + tiles_p - 1) / tiles_p;
      set_shape(p, k);
      const std::int64_t slice_b = std::int64_t(Policy::block_n) * Policy::block_c * Policy::filter_elem_bytes;
      auto a_bytes = [&](int g) { return (rp * Policy::block_c * g * rows * 4 + 127) / 128 * 128; };
      int g = wgmma_max_group;
      for (; g > 1; --g)
        if (k.kt % g == 0 && 4 * (g * slice_b + a_bytes(g)) + static_cast<std::int64_t>(tail_bytes) <= static_cast<std::int64_t>(max_smem))
          break;
      k.group = g, k.kt /= g;
      const std::int64_t b_bytes = slice_b * g, a = a_bytes(g), slices = std::int64_t(k.kt) * k.npass;
      if (slices * b_bytes >= (std::int64_t(1) << 40) || b_bytes + a >= (std::int64_t(1) << 20)) return false;
      const std::int64_t resident = (slices * b_bytes + 127) / 128 * 128, rest = static_cast<std::int64_t>(tail_bytes);
      std::int64_t stage = a, smem = resident + 2 * a + rest;
      if (smem > static_cast<std::int64_t>(max_smem) || resident >= (std::int64_t(1) << 20)) {
        stage = b_bytes + a, smem = 2 * stage + rest;  // streamed
        k.resident_bytes = 0, k.a_offset = static_cast<std::int32_t>(b_bytes);
      } else {
        k.resident_bytes = static_cast<std::int32_t>(resident), k.a_offset = 0;
      }
      if (smem > static_cast<std::int64_t>(max_smem)) return false;
      k.stages = 2;  // as many more as fit, up to wgmma_max_stages
      while (k.stages < wgmma_max_stages && smem + stage <= static_cast<std::int64_t>(max_smem)) ++k.stages, smem += stage;
      k.direct = 1;
      k.tile_rows = static_cast<std::int32_t>(rows), k.tile_cols = static_cast<std::int32_t>(Q), k.mrow_step = Policy::tile_w;
      k.tiles_p = static_cast<std::int32_t>(tiles_p), k.tiles_q = 1, k.tiles = p.N * tiles_p;
      k.rp = static_cast<std::int32_t>(rp), k.bh = static_cast<std::int32_t>(rows), k.ph = k.bh;
      k.pw = static_cast<std::int32_t>(Q);
      k.raw_copy_bytes = static_cast<std::int32_t>(rp * Policy::block_c * g * rows * 4), k.raw_bytes = 0;
      k.part_bytes = static_cast<std::int32_t>(a);
      k.b_bytes = static_cast<std::int32_t>(b_bytes), k.stage_bytes = static_cast<std::int32_t>(stage);
      smem_bytes = static_cast<std::size_t>(smem);
      return true;
    }
  }

  /// Direct tiles (wgmma_conv_params::direct): the offsets, in floats within a stage's box, of channel 0
  /// at this consumer thread's accumulator rows' pixels (tile_m(i): box row px / Q, column stride * (px %
  /// Q); 0 for the pixels past tile_rows * Q, computed and dropped). The same for every tile and stage.
  __device__ static void direct_offsets(const wgmma_conv_params& p, int (&off)[TM]) {
    const int row_floats = p.rp * Policy::block_c * p.group, used = p.tile_rows * p.tile_cols;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int px = tile_m(i);
      off[i] = px < used ? px / p.tile_cols * row_floats + p.stride * (px % p.tile_cols) : 0;
    }
  }

  /// Direct tiles: issues one stage's wgmmas (group k8 slices x the warpgroup's two m64 rows) with A from
  /// registers, loaded from the stage's box (`box`, [row][channel][column] fp32, direct_offsets `off`) and
  /// rounded to tf32 (warp::to_tf32, as the packing of the other tiles), B the stage's packed filter
  /// `filter`; `first` starts d (scale-d = 0). Waits for the wgmmas before it returns (their A registers
  /// are then free), so the stage is complete.
  __device__ static void run_stage_direct(const unsigned char* filter, const unsigned char* box, float (&d)[2][64],
                                          bool first, const wgmma_conv_params& p, const int (&off)[TM]) {
    switch (p.group) {
      case 4: issue_direct<4>(filter, box, d, first, p, off); break;
      case 3: issue_direct<3>(filter, box, d, first, p, off); break;
      case 2: issue_direct<2>(filter, box, d, first, p, off); break;
      default: issue_direct<1>(filter, box, d, first, p, off); break;
    }
  }

  /// Bytes of the packed x of flat parameters k (kernel::pack_x_kernel's output: per tile and stage, the
  /// stage's planes, parts * part_bytes); 0 for tiles of image rows.
  static std::size_t xpack_bytes(const wgmma_conv_params& k) {
    if (!k.flat) return 0;
    return static_cast<std::size_t>(k.tiles) * static_cast<std::size_t>(k.kt) * static_cast<std::size_t>(Policy::parts) *
           static_cast<std::size_t>(k.part_bytes);
  }

  /// Bytes of the packed filter (device::pack_filter) for parameters k from make_params: npass * kt
  /// slices of b_bytes.
  static std::size_t packed_bytes(const wgmma_conv_params& k) {
    return static_cast<std::size_t>(k.npass) * static_cast<std::size_t>(k.kt) * static_cast<std::size_t>(k.b_bytes);
  }

  /// Whether the tiles of parameters k from make_params cover contiguous ranges of output pixels m = (n *
  /// P + p) * Q + q in tile order (flat tiles, or tiles of whole rows: tiles_q = 1), so that the last tiles
  /// can run as a split-K tail (wgmma_conv_params::tile0, partial_m0).
  static bool tail_serves(const wgmma_conv_params& k) { return k.flat || k.tiles_q == 1; }

  /// The first output pixel m of tile t (0 <= t <= tiles; N*P*Q for t = tiles) of parameters k for which
  /// tail_serves: tiles t, t + 1, ... cover exactly the pixels [first_pixel(k, t), N*P*Q). Flat tiles:
  /// the first output at or after GEMM row o = t * block_m = (n * flat_rows + row) * pw + col; row tiles:
  /// row t % tiles_p * tile_rows of image t / tiles_p.
  static std::int64_t first_pixel(const wgmma_conv_params& k, std::int64_t t) {
    const std::int64_t PQ = std::int64_t(k.P) * k.Q;
    if (!k.flat) return (t / k.tiles_p * k.P + t % k.tiles_p * k.tile_rows) * k.Q;
    const std::int64_t o = t * Policy::block_m, image = std::int64_t(k.flat_rows) * k.pw;
    const std::int64_t n = o / image, row = o % image / k.pw, col = o % k.pw;
    if (n >= k.N) return k.N * PQ;
    return n * PQ + (row < k.P ? row * k.Q + (col < k.Q ? col : k.Q) : PQ);
  }

  /// Issues the wgmmas of one stage into d as one commit group (not waited for): `filter` is the stage's
  /// packed filter slice (b_bytes), `planes` its input planes (parts x part_bytes). `first`: the first
  /// stage of a tile, whose first wgmma per row overwrites d (scale-d = 0) instead of adding.
  /// 3x3 and 1x1 filters run a fully unrolled tap loop (no loop-carried accumulators for ptxas to fence).
  /// 3xTF32 (`promotes`): one group per row into a fresh tile, waited for and added to d (see promotes).
  /// Gather: the kernel variant of the gathering producer, whose planes may hold stride-2 phases (the
  /// TMA variant is compiled without those tap loops).
  template <bool Gather>
  __device__ static void run_stage(const unsigned char* filter, const unsigned char* planes, float (&d)[2][64],
                                   bool first, const wgmma_conv_params& p) {
    if constexpr (promotes) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        float part[1][64];
        dispatch<Gather>(filter, planes, part, mt, true, p);
        warpgroup::wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          fence_operand(part[0][i]);
          d[mt][i] = first ? part[0][i] : d[mt][i] + part[0][i];
        }
      }
    } else {
      dispatch<Gather>(filter, planes, d, 0, first, p);
    }
  }

 private:
  /// run_stage_direct for G slices per stage: lane 4g + t loads channel 8j + t (a[0], a[1]: rows g, g + 8)
  /// and 8j + t + 4 (a[2], a[3]) of slice j; with rp = 8 mod 16 floats per channel, the quad's 4 channels
  /// lie 8 banks apart and the 8 groups' pixels are consecutive: one conflict-free load per register at
  /// stride 1 (two-way at stride 2). Slice j is its own commit group, its registers one of two sets: the
  /// set is loaded again for slice j + 2 once slice j's group has completed (wait<1>), so that 16
  /// registers hold the A fragments, not 8 G (8 G spilled ~120 bytes: sm_90a, nvcc 13.0).
  template <int G>
  __device__ static void issue_direct(const unsigned char* filter, const unsigned char* box, float (&d)[2][64],
                                      bool first, const wgmma_conv_params& p, const int (&off)[TM]) {
    const float* x = reinterpret_cast<const float*>(box) + (lane() % 4) * p.rp;
    const int c4 = 4 * p.rp;
    const std::uint64_t b0 = warpgroup::make_smem_desc(filter, 128, 256);
    std::uint32_t a[2][2][4];
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (j >= 2) warpgroup::wait<1>();  // slice j - 2's group has completed: its registers are free
      const float* c = x + 8 * j * p.rp;
      std::uint32_t(&r)[2][4] = a[j % 2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        r[mt][0] = warp::to_tf32(c[off[2 * mt]]);
        r[mt][1] = warp::to_tf32(c[off[2 * mt + 1]]);
        r[mt][2] = warp::to_tf32(c[c4 + off[2 * mt]]);
        r[mt][3] = warp::to_tf32(c[c4 + off[2 * mt + 1]]);
      }
      warpgroup::fence();
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        warpgroup::mma_rs_m64n128_tf32(d[mt], r[mt], b0 + ((static_cast<std::uint64_t>(j) * tap_bytes) >> 4),
                                       !(first && j == 0));
      warpgroup::commit();
    }
    warpgroup::wait<0>();
  }

  /// issue for the filter size: 3x3 and 1x1 unrolled, others a run-time tap loop (not with promotes:
  /// ptxas then serialises every wgmma of the kernel, warning C7520; cannot_implement turns them away).
  template <bool Gather, int Rows>
  __device__ static void dispatch(const unsigned char* filter, const unsigned char* planes, float (&d)[Rows][64],
                                  int row, bool first, const wgmma_conv_params& p) {
    if (Gather && !promotes && p.stride == 2) {  // taps read the stride phases (3xTF32: stride 1 only)
      if (p.R == 3 && p.S == 3)
        issue<3, 3, Rows, 2>(filter, planes, d, row, first, p);
      else if (promotes || (p.R == 1 && p.S == 1))
        issue<1, 1, Rows, 2>(filter, planes, d, row, first, p);
      else
        issue<0, 0, Rows, 2>(filter, planes, d, row, first, p);
    } else if (p.R == 3 && p.S == 3) {
      issue<3, 3, Rows, 1>(filter, planes, d, row, first, p);
    } else if (promotes || (p.R == 1 && p.S == 1)) {  // promotes: 1x1 here (cannot_implement)
      issue<1, 1, Rows, 1>(filter, planes, d, row, first, p);
    } else {
      issue<0, 0, Rows, 1>(filter, planes, d, row, first, p);
    }
  }

  /// One commit group of the stage's wgmmas for an R x S filter known at compile time (FR, FS > 0) or at
  /// run time (FR = FS = 0) and stride ST (tap (r, s) reads phase (r % ST, s % ST) at (r / ST, s / ST)):
  /// rows row .. row + Rows - 1 of the warpgroup's, into d[0 .. Rows - 1].
  template <int FR, int FS, int Rows, int ST>
  __device__ static void issue(const unsigned char* filter, const unsigned char* planes, float (&d)[Rows][64],
                               int row, bool first, const wgmma_conv_params& p) {
    const int R = FR > 0 ? FR : p.R, S = FS > 0 ? FS : p.S;
    constexpr int J = Policy::block_c / (16 / Policy::filter_elem_bytes);  // planes per slice of block_c channels
    const int row0 = wg_row0() + row;
    // A: K-major no-swizzle, core matrices 8 pixels x 16 bytes: LBO = one plane (the next E channels),
    // SBO = 128 bytes (the next 8 pixels); B: LBO 128 bytes (next E channels), SBO 256 (next 8 channels)
    const std::uint64_t a0 = warpgroup::make_smem_desc(planes + row0 * p.mrow_step * 16, p.plane_bytes, 128);
    const std::uint64_t b0 = warpgroup::make_smem_desc(filter, 128, 256);
    const std::uint64_t a_small = static_cast<std::uint64_t>(p.part_bytes) >> 4;
    const std::uint64_t b_small = (static_cast<std::uint64_t>(R * S) * tap_bytes) >> 4;
    const std::uint64_t row_step = static_cast<std::uint64_t>(p.pw);         // one patch row, in 16-byte units
    const std::uint64_t m_step = static_cast<std::uint64_t>(p.mrow_step);    // the next m64 row
    warpgroup::fence();
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int tap = r * S + s;
        const std::uint64_t b = b0 + ((static_cast<std::uint64_t>(tap) * tap_bytes) >> 4);
        const int phase = (r % ST) * p.phases_w + s % ST;  // 0 for stride 1
        const std::uint64_t a = a0 + static_cast<std::uint64_t>(phase) * static_cast<std::uint64_t>(p.phase_pixels) +
                                static_cast<std::uint64_t>(r / ST) * row_step + static_cast<std::uint64_t>(s / ST);
            // 1x1 filters: the stage's `group` slices of block_c channels, slice g's planes g * J planes on
        // and its filter slice g * parts * tap_bytes on (wgmma_conv_params::group)
        // (not 3xTF32: its promoted stages spilled ~370 bytes with this loop; make_params keeps it at 1)
        const int group = FR == 1 && FS == 1 && !x3 ? p.group : 1;
#pragma unroll 1
        for (int g = 0; g < group; ++g) {
          const bool acc = !(first && tap == 0 && g == 0);
          const std::uint64_t ag = a + ((static_cast<std::uint64_t>(g) * J * p.plane_bytes) >> 4);
          const std::uint64_t bg = b + ((static_cast<std::uint64_t>(g) * Policy::parts * tap_bytes) >> 4);
#pragma unroll
          for (int mt = 0; mt < Rows; ++mt) {
            const std::uint64_t am = ag + static_cast<std::uint64_t>(mt) * m_step;
            if constexpr (x3) {
              warpgroup::mma_ss_m64n128<kind>(d[mt], am + a_small, bg, acc);
              warpgroup::mma_ss_m64n128<kind>(d[mt], am, bg + b_small);
              warpgroup::mma_ss_m64n128<kind>(d[mt], am, bg);
            } else {
              warpgroup::mma_ss_m64n128<kind>(d[mt], am, bg, acc);
            }
          }
        }
      }
    warpgroup::commit();
  }
};

}  // namespace convred::block
