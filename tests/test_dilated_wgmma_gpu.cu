// The wgmma kernel's dilated tiles (block::wgmma_conv_params::direct_taps): a dilated filter at stride 1
// runs as direct tiles of whole output rows, a stage per filter row whose TMA box is the tile's rows
// shifted by the row's taps, the filter rows that read only padding skipped. Host: the parameters (stages,
// box, column shift, x's padded pitch, the live rows) and the packed sizes. GPU: every op against float64
// in tf32 through a plan over the wgmma family alone, fused, in pass mode, in partial mode and with a
// split-K tail, over dilations 2-12 (equal, anisotropic, one dimension only), W a multiple of 4 (x read
// from NCHW) and not (x copied with a padded pitch), tiles whose every filter row is dead (zero products:
// the bias alone), K above 128, several slices per stage; the same in bf16 (and fp16 on three layers): the
// tiles over a copy of x as pairs of 16-bit channels; under 3xTF32 (both parts of each filter row, every
// m64 row's stage promoted), also for undilated 5x5 and 7x7 filters too large for other stages; a case for
// compute-sanitizer. Flat tiles of a dilated filter (wgmma_conv_params::flat with dil_h, dil_w: the taps
// as offsets into the packed window, whose halo is the dilated reach): the parameters, and every op against
// float64 in tf32, bf16, fp16 and 3xTF32 over dilations 2-6, paddings below, at and above half the reach,
// wide rows (W 250) the direct tiles do not take, and a grouped layer.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <limits>
#include <string>

#include "adapter_family_check.cuh"
#include "wgmma_mode_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;

namespace {

const device_info h200{9, 0, true, 132};

using mainloop = convred::block::conv_mainloop_wgmma<fam::wgmma<float, math::tf32>::policy>;

/// The dilated tiles' checks of the GPU cases (wgmma_mode_check.cuh; pass mode's description not checked):
/// direct tiles forced (the model may take flat tiles for these layers).
struct dilated_tiles {
  static constexpr const char* fragment = "a stage per filter row";
  static constexpr const char* partial_name = "partial mode (2 GEMM_K splits)";
  static constexpr bool pass_described = false;
  static constexpr convred::device::wgmma_tiling tiles = convred::device::wgmma_tiling::direct;
};

/// The flat tiles' checks of dilated layers: flat tiles forced, the dilation in the description.
struct dilated_flat_tiles {
  static constexpr const char* fragment = "as tap offsets";
  static constexpr const char* partial_name = "partial mode (2 GEMM_K splits)";
  static constexpr bool pass_described = true;
  static constexpr convred::device::wgmma_tiling tiles = convred::device::wgmma_tiling::flat;
};

/// Dilated layers (NCHW): make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w).
struct dilated_case {
  const char* name;
  conv2d_problem p;
};
const dilated_case cases[] = {
    {"d6 pad 6, W 29 (x copied, pitch 32)", make_problem(2, 16, 29, 29, 33, 3, 3, 6, 6, 1, 1, 6, 6)},
    {"d2 pad 2, W 24 (x from NCHW), K 130 (two passes)", make_problem(2, 8, 17, 24, 130, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"d12 pad 12 on 13x13 (dilation >= the image)", make_problem(2, 24, 13, 13, 64, 3, 3, 12, 12, 1, 1, 12, 12)},
    {"d1x3 pad 0x3, C 9", make_problem(2, 9, 14, 20, 17, 3, 3, 0, 3, 1, 1, 1, 3)},
    {"2x3 d10x2 pad 12x2 (tiles with every filter row dead)", make_problem(2, 16, 5, 60, 40, 2, 3, 12, 2, 1, 1, 10, 2)},
    {"5x5 d4 pad 8", make_problem(1, 8, 21, 22, 16, 5, 5, 8, 8, 1, 1, 4, 4)},
    {"d3 pad 3, C 64, K 256 (slices per stage, two passes)", make_problem(1, 64, 20, 20, 256, 3, 3, 3, 3, 1, 1, 3, 3)},
    {"d2x5 pad 0, 3x1", make_problem(2, 8, 16, 9, 20, 3, 1, 0, 0, 1, 1, 2, 5)},
    {"d5 pad 5 (the box 3 columns left of the padding)", make_problem(2, 16, 15, 21, 20, 3, 3, 5, 5, 1, 1, 5, 5)},
    {"1x3 d6 pad 0x6 (one filter row), C 256 K 256 (filter streamed)", make_problem(2, 256, 12, 40, 256, 1, 3, 0, 6, 1, 1, 1, 6)},
    {"3x1 d2 on 16x5, C 96 (4 slices per stage)", make_problem(2, 96, 16, 5, 20, 3, 1, 2, 0, 1, 1, 2, 1)},
    {"d2 on 6x200 (one output row per tile, a 216-column box)", make_problem(1, 16, 6, 200, 40, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"d6 on 13x13, C 128 K 256 (filter streamed, x copied)", make_problem(2, 128, 13, 13, 256, 3, 3, 6, 6, 1, 1, 6, 6)},
    {"d2, K 300 (three passes)", make_problem(1, 32, 20, 20, 300, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"d2 on 9x13, N 5, C 260 (x copied: several images, channels past 256)",
     make_problem(5, 260, 9, 13, 40, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"d12 on 33x33, N 3, C 136 (DeepLab's ASPP on a small image: x copied, pitch 36)",
     make_problem(3, 136, 33, 33, 48, 3, 3, 12, 12, 1, 1, 12, 12)},
};

/// Dilated layers of flat tiles (the window's halo (R - 1) dil_h plane rows, (S - 1) dil_w pixels; the pitch
/// and the rows per image merged with the padding up to min(pad, reach)).
const dilated_case flat_cases[] = {
    {"flat d2 pad 2, 20x23, K 40", make_problem(2, 16, 20, 23, 40, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"flat d4 pad 4, C 64, K 256 (two passes)", make_problem(1, 64, 24, 24, 256, 3, 3, 4, 4, 1, 1, 4, 4)},
    {"flat d1x3 pad 0x3, C 9", make_problem(2, 9, 14, 20, 17, 3, 3, 0, 3, 1, 1, 1, 3)},
    {"flat 2x3 d3x2 pad 1x2 (padding below the reach)", make_problem(2, 16, 11, 17, 33, 2, 3, 1, 2, 1, 1, 3, 2)},
    {"flat 1x5 d2 pad 0x4, K 130 (3xTF32: the tap loop)", make_problem(1, 8, 18, 18, 130, 1, 5, 0, 4, 1, 1, 1, 2)},
    {"flat d2 pad 0 (no padding)", make_problem(2, 24, 15, 15, 20, 3, 3, 0, 0, 1, 1, 2, 2)},
    {"flat d3 pad 5 (padding above half the reach)", make_problem(1, 16, 14, 14, 20, 3, 3, 5, 5, 1, 1, 3, 3)},
    {"flat d6 pad 6 on 29x29", make_problem(2, 16, 29, 29, 33, 3, 3, 6, 6, 1, 1, 6, 6)},
    {"flat d2 on 6x250 (wider than direct tiles take)", make_problem(1, 8, 6, 250, 40, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"flat d2 groups 2, C 32, K 64", make_problem(2, 32, 12, 12, 64, 3, 3, 2, 2, 1, 1, 2, 2, 2)},
    {"flat 3x1 d2 on 16x5, C 96", make_problem(2, 96, 16, 5, 20, 3, 1, 2, 0, 1, 1, 2, 1)},
};

}  // namespace

TEST_SUITE("host") {
TEST_CASE("wgmma flat tiles of a dilated filter: the window's halo, the merged pitch and the tap offsets") {
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<fam::wgmma<float, math::tf32>::policy, op::argmin>(),
                    smem_max = convred::device::detail::max_smem_per_block;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  // d2 pad 2 on 20x23: reach 4 rows and 4 pixels; pitch Q + 4 - min(2, 4) = 25, rows per image 22
  REQUIRE(mainloop::make_params(flat_cases[0].p, tail, smem_max, k, smem, true));
  CHECK(k.flat == 1);
  CHECK((k.dil_h == 2 && k.dil_w == 2));
  CHECK(k.pw == 25);
  CHECK(k.flat_rows == 22);
  CHECK(k.phase_pixels == 256 + 4 * 25 + 4);
  // rows: not for dilation
  CHECK_FALSE(mainloop::make_params(flat_cases[0].p, tail, smem_max, k, smem));
  // 2x3 d3x2 pad 1x2: reach 3 rows, 4 pixels; merged 1 row and 2 columns
  REQUIRE(mainloop::make_params(flat_cases[3].p, tail, smem_max, k, smem, true));
  CHECK((k.dil_h == 3 && k.dil_w == 2));
  CHECK(k.pw == 19);         // Q = 17 + 2 x 2 - 4 = 17, the pitch Q + 4 - 2
  CHECK(k.flat_rows == 12);  // P = 11 + 2 x 1 - 3 = 10, the rows P + 3 - 1
  // a dilation along a 1-wide dimension moves no tap: 1 there (no reach)
  conv2d_problem one_wide = flat_cases[10].p;
  one_wide.dil_w = 3;
  REQUIRE(mainloop::make_params(one_wide, tail, smem_max, k, smem, true));
  CHECK((k.dil_h == 2 && k.dil_w == 1));
  CHECK(k.phase_pixels == 256 + 4 * k.pw);
  // 3xTF32 (two parts of the window per stage): the GPU cases but d6 on 29x29 and the 250-wide rows
  using x3 = convred::plan::wgmma_params<fam::wgmma<float, math::tf32x3>::policy>;
  const std::size_t tail3 = convred::device::detail::wgmma_tail_bytes<fam::wgmma<float, math::tf32x3>::policy, op::argmin>();
  for (const dilated_case& c : flat_cases) {
    CAPTURE(c.name);
    CHECK(x3::make_params(c.p, tail3, smem_max, k, smem, true) == (&c != &flat_cases[7] && &c != &flat_cases[8]));
  }
  // DeepLab's d36 on 65 x 65: the window (256 + 72 x 101 + 72 pixels per plane) does not fit
  CHECK_FALSE(mainloop::make_params(make_problem(32, 2048, 65, 65, 256, 3, 3, 36, 36, 1, 1, 36, 36), tail, smem_max, k,
                                    smem, true));
  // the wgmma family alone, flat tiles forced: described with the dilation
  convred::device::plan_options o = served();
  o.tiles = convred::device::wgmma_tiling::flat;
  CHECK(has(wgmma_plan<math::tf32>(flat_cases[8].p, h200, o).description(), "dilation 2x2 as tap offsets"));
}

TEST_CASE("wgmma dilated tiles: the parameters, the live rows and the packed sizes") {
  // the kernel's own shared-memory budget (as the wgmma family's plans: the argmin tail)
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<fam::wgmma<float, math::tf32>::policy, op::argmin>(),
                    smem_max = convred::device::detail::max_smem_per_block;
  // DeepLab's ASPP at batch 32: 2048 -> 256 channels on 65x65, dilation 36
  const conv2d_problem p = make_problem(32, 2048, 65, 65, 256, 3, 3, 36, 36, 1, 1, 36, 36);
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  CHECK_FALSE(mainloop::make_params(p, tail, smem_max, k, smem));        // no row tiles for dilation
  CHECK_FALSE(mainloop::make_params(p, tail, smem_max, k, smem, true));  // nor flat ones
  REQUIRE(mainloop::make_direct_params(p, tail, smem_max, k, smem));
  CHECK(k.direct == 1);
  CHECK(k.direct_taps == 1);
  CHECK(k.tile_rows == 3);  // floor(256 / 65) whole rows: 22 tiles of 3 rows per image
  CHECK(k.tiles_p == 22);
  CHECK(k.tiles == 32 * 22);
  CHECK(k.col_shift == 0);  // pad 36: the box starts at column -36, 16-byte aligned
  CHECK(k.rp == 152);       // 65 + 2 * 36 = 137 columns, rounded up to 8 mod 16
  CHECK(k.x_pitch == 68);   // W = 65: x copied with rows of 68 floats
  CHECK(mainloop::xpack_bytes(k) == std::size_t(32) * 2048 * 65 * 68 * 4);
  CHECK(k.kt == 2048 / 8 / k.group * 3);  // a stage per (channel stage, filter row)
  CHECK(k.row_stages() == 3);
  CHECK(k.b_bytes == k.group * 3 * 128 * 8 * 4);  // the stage's filter row: S taps of its slices
  CHECK(mainloop::packed_bytes(k) == std::size_t(2) * 2048 * 9 * 128 * 4 + 256);  // the whole filter, 2 passes, the flag
  // live filter rows: output rows 0-2 read input rows -36..-34 through filter row 0 (dead), 0..2 and 36..38
  // through rows 1 and 2; output rows 33-35 read -3..-1 through row 0 (dead); 36-38 read 0..2 (live); output
  // rows 30-32 read 66..68 through row 2 (dead), 27-29 read 63..65 (two of them inside: live)
  CHECK_FALSE(k.row_live(0, 0));
  CHECK(k.row_live(1, 0));
  CHECK(k.row_live(2, 0));
  CHECK_FALSE(k.row_live(0, 33));
  CHECK(k.row_live(0, 36));
  CHECK_FALSE(k.row_live(2, 30));  // rows 30..32 + 36 = 66..68 >= 65
  CHECK(k.row_live(2, 27));        // rows 63, 64 live
  CHECK(k.stage_row(k.kt + 4) == 1);
  // W a multiple of 4: read from NCHW, no copy
  convred::block::wgmma_conv_params k2;
  REQUIRE(mainloop::make_direct_params(cases[1].p, tail, smem_max, k2, smem));
  CHECK(k2.x_pitch == 24);
  CHECK(k2.col_shift == 2);  // pad 2: the box starts at column -4
  CHECK(mainloop::xpack_bytes(k2) == 0u);
  // not served by the dilated tiles: stride 2, groups, rows wider than a TMA box, 3xTF32
  conv2d_problem s2 = cases[0].p, g2 = cases[0].p, wide = cases[0].p;
  s2.stride_h = s2.stride_w = 2;
  g2.groups = 2, g2.K = 32;
  wide.W = 250;
  CHECK_FALSE(mainloop::make_direct_params(s2, tail, smem_max, k2, smem));
  CHECK_FALSE(mainloop::make_direct_params(g2, tail, smem_max, k2, smem));
  CHECK_FALSE(mainloop::make_direct_params(wide, tail, smem_max, k2, smem));
  CHECK(wgmma_plan<math::tf32>(cases[0].p, h200).state() == status::success);
  using x3 = convred::plan::wgmma_params<fam::wgmma<float, math::tf32x3>::policy>;
  using b16 = convred::plan::wgmma_params<fam::wgmma<float, math::bf16>::policy>;
  CHECK(x3::cannot_implement(cases[0].p) == nullptr);   // 3xTF32: promoted rows (below)
  CHECK(b16::cannot_implement(cases[0].p) == nullptr);  // bf16: the same tiles over pairs of channels (below)
  CHECK(std::string(b16::cannot_implement(s2)) == "dilation != 1 at stride 2 (the wgmma kernel's dilated tiles: stride 1)");
  // (nor flat tiles: d6 on rows of 250, the window of 256 + 12 x 256 + 12 pixels does not fit two stages)
  CHECK(has(wgmma_plan<math::tf32>(wide, h200).description(), "dilation != 1 not served by its dilated tiles here"));
  // the shapes the GPU cases cover: the box's column shift 3, one filter row, 4 slices per stage, a streamed
  // filter with x copied, one output row per tile
  REQUIRE(mainloop::make_direct_params(cases[8].p, tail, smem_max, k2, smem));
  CHECK(k2.col_shift == 3);
  REQUIRE(mainloop::make_direct_params(cases[9].p, tail, smem_max, k2, smem));
  CHECK((k2.row_stages() == 1 && k2.resident_bytes == 0));
  REQUIRE(mainloop::make_direct_params(cases[10].p, tail, smem_max, k2, smem));
  CHECK(k2.group == 4);
  REQUIRE(mainloop::make_direct_params(cases[11].p, tail, smem_max, k2, smem));
  CHECK((k2.tile_rows == 1 && k2.rp == 216));
  REQUIRE(mainloop::make_direct_params(cases[12].p, tail, smem_max, k2, smem));
  CHECK((k2.resident_bytes == 0 && k2.x_pitch == 16 && k2.npass == 2));
}

TEST_CASE("wgmma dilated tiles in bf16 and fp16: channel pairs of x's copy, the same boxes") {
  using b16 = convred::block::conv_mainloop_wgmma<fam::wgmma<float, math::bf16>::policy>;
  using f16 = convred::block::conv_mainloop_wgmma<fam::wgmma<float, math::fp16>::policy>;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<fam::wgmma<float, math::bf16>::policy, op::argmin>(),
                    smem_max = convred::device::detail::max_smem_per_block;
  const conv2d_problem p = make_problem(32, 2048, 65, 65, 256, 3, 3, 36, 36, 1, 1, 36, 36);
  convred::block::wgmma_conv_params k, t;
  std::size_t smem = 0, tsmem = 0;
  REQUIRE(b16::make_direct_params(p, tail, smem_max, k, smem));
  REQUIRE(mainloop::make_direct_params(p, tail, smem_max, t, tsmem));
  // a slice is 16 channels, 8 pairs: a box entry per pair, so the box has the tf32 tiles' geometry
  CHECK(b16::box_c == 8);
  CHECK(k.direct_taps == 1);
  CHECK(k.tile_rows == 3);
  CHECK(k.rp == 152);
  CHECK(k.x_pitch == 68);
  CHECK(k.kt == 2048 / 16 / k.group * 3);
  CHECK(k.raw_copy_bytes == 152 * 8 * k.group * 3 * 4);
  CHECK(k.b_bytes == k.group * 3 * 128 * 16 * 2);  // the row's S taps of 16 channels in bf16: tf32's bytes
  CHECK(b16::packed_bytes(k) == std::size_t(2) * 2048 * 9 * 128 * 2 + 256);
  // x always copied (pairs converted to bf16), ceil(C / 2) pair planes of rows x_pitch entries
  CHECK(b16::x_copied(k));
  CHECK(b16::x_copy_channels(k) == 1024);
  CHECK(b16::xpack_bytes(k) == std::size_t(32) * 1024 * 65 * 68 * 4);
  // W a multiple of 4: still copied under bf16 (tf32 reads NCHW); C = 8 is one pair slice of 16 channels
  REQUIRE(b16::make_direct_params(cases[1].p, tail, smem_max, k, smem));
  CHECK(k.x_pitch == 24);
  CHECK(b16::x_copied(k));
  CHECK((k.kt == 3 && k.group == 1));
  CHECK(b16::xpack_bytes(k) == std::size_t(2) * 4 * 17 * 24 * 4);
  REQUIRE(mainloop::make_direct_params(cases[1].p, tail, smem_max, t, tsmem));
  CHECK_FALSE(mainloop::x_copied(t));
  // C = 9: 5 pairs, the last one's high half zero
  REQUIRE(f16::make_direct_params(cases[3].p, tail, smem_max, k, smem));
  CHECK(f16::x_copy_channels(k) == 5);
  // 16-bit math takes no 1x1 direct tiles (they read NCHW fp32 without a copy) and no ping-pong
  CHECK_FALSE(b16::make_direct_params(make_problem(2, 64, 16, 16, 64, 1, 1, 0, 0, 1, 1, 1, 1), tail, smem_max, k, smem));
  using b16pp = convred::block::conv_mainloop_wgmma<convred::wgmma_pingpong<fam::wgmma<float, math::bf16>::policy>::type>;
  CHECK_FALSE(b16pp::make_direct_params(p, tail, smem_max, k, smem));
}

TEST_CASE("wgmma dilated tiles under 3xTF32: both parts of each filter row, and undilated filters too large for other stages") {
  using x3 = convred::block::conv_mainloop_wgmma<fam::wgmma<float, math::tf32x3>::policy>;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<fam::wgmma<float, math::tf32x3>::policy, op::argmin>(),
                    smem_max = convred::device::detail::max_smem_per_block;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(x3::make_direct_params(cases[0].p, tail, smem_max, k, smem));
  CHECK(k.direct_taps == 1);
  CHECK(k.b_bytes == k.group * 2 * 3 * 128 * 8 * 4);  // the row's S taps of both parts
  CHECK(x3::packed_bytes(k) == std::size_t(2) * 16 * 9 * 128 * 4 + 256);  // 2 parts of C 16, K 33 in one pass
  CHECK_FALSE(x3::tap_loop(k));  // direct tiles promote themselves
  // undilated: only as the fallback (any_filter), never for 1x1 or where other stages fit
  const conv2d_problem c5 = make_problem(2, 16, 13, 14, 40, 5, 5, 2, 2, 1, 1, 1, 1);
  CHECK_FALSE(x3::make_params(c5, tail, smem_max, k, smem));
  CHECK_FALSE(x3::make_params(c5, tail, smem_max, k, smem, true));
  CHECK_FALSE(x3::make_direct_params(c5, tail, smem_max, k, smem));
  REQUIRE(x3::make_direct_params(c5, tail, smem_max, k, smem, true));
  // (2 slices of 8 channels, one per stage: two would need 4 x 2 x (5 taps x 2 parts x 4 KB + the box)
  // bytes; so kt = 2 channel stages x 5 filter rows)
  CHECK((k.direct_taps == 1 && k.dil_h == 1 && k.dil_w == 1 && k.group == 1 && k.kt == 10));
  // a 1x1 never: the other tiles serve it
  CHECK_FALSE(x3::make_direct_params(make_problem(2, 16, 13, 14, 40, 1, 1, 0, 0, 1, 1, 1, 1), tail, smem_max, k, smem, true));
  CHECK(wgmma_plan<math::tf32x3>(c5, h200, served()).state() == status::success);
  CHECK(has(wgmma_plan<math::tf32x3>(c5, h200, served()).description(), "tiles of a 5x5 filter, a stage per filter row"));
  // where pack_filter writes the non-finite flag: wherever these tiles may serve (a dilated filter; under
  // 3xTF32 also an undilated filter of several taps), not for a 1x1 nor for an undilated TF32 filter
  const conv2d_problem c1 = make_problem(2, 16, 13, 14, 40, 1, 1, 0, 0, 1, 1, 1, 1);
  CHECK((x3::direct_taps_may_serve(cases[0].p) && x3::direct_taps_may_serve(c5) && !x3::direct_taps_may_serve(c1)));
  CHECK((mainloop::direct_taps_may_serve(cases[0].p) && !mainloop::direct_taps_may_serve(c5)));
  for (const dilated_case& c : cases) CHECK(mainloop::direct_taps_may_serve(c.p));
}

TEST_CASE("wgmma dilated tiles: which DeepLab layers the planner gives them on an H200") {
  // space to batch (family::dilated) yields to these tiles only where they are estimated below 0.85 of the
  // full split's time, or where a smaller split is not below 0.85 of theirs (to flat tiles of windows up to
  // 3.5 tiles wherever they are estimated faster: none of these); the full split's sub-images of fewer than
  // 3 rows (a dilation of a third of the image or more) are not taken in TF32
  const conv2d_problem d36 = make_problem(32, 2048, 65, 65, 256, 3, 3, 36, 36, 1, 1, 36, 36),
                       d24 = make_problem(32, 2048, 65, 65, 256, 3, 3, 24, 24, 1, 1, 24, 24),
                       d12 = make_problem(32, 2048, 65, 65, 256, 3, 3, 12, 12, 1, 1, 12, 12),
                       c960 = make_problem(32, 960, 33, 33, 256, 3, 3, 24, 24, 1, 1, 24, 24),
                       n1 = make_problem(1, 2048, 65, 65, 256, 3, 3, 36, 36, 1, 1, 36, 36);
  for (const conv2d_problem& p : {d36, d24, c960, n1}) {
    CAPTURE(describe(p));
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(p, h200).description(), "a stage per filter row"));
  }
  // (d12 at batch 32: estimated 7.2 ms against the full split's 7.4 and the split by 6 x 6's 6.5, whose
  // flat sub-images measured 8.2 ms on the H100 against these tiles' 7.36: a smaller split must be estimated
  // below 0.85 of them)
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(d12, h200).description(), "a stage per filter row"));
  // bf16 and 3xTF32 run them too: bf16 over x's channel pairs (its space to batch's sub-images of 2 rows
  // measured 2.6x slower at d36 on the H100: 7.69 ms against 2.99), 3xTF32 with its stages promoted (n32 d36
  // 21.2 ms against the mma.sync kernel's 29.2 on the H100)
  for (const conv2d_problem& p : {d36, d24, c960, n1}) {
    CAPTURE(describe(p));
    CHECK(has(conv2d_reduce_plan<float, math::bf16>(p, h200).description(), "16-bit pairs"));
    // (3xTF32 at d24 on 65 x 65: estimated at plan_wgmma_direct_x3_slowdown 23.0 ms, not below 0.85 of space
    // to batch's; the tiles measured 30.1 ms on the H100, space to batch 24.4 on the H200)
    const bool d24_on_65 = p.H == 65 && p.dil_h == 24;
    CHECK(has(conv2d_reduce_plan<float, math::accurate>(p, h200).description(), "a stage per filter row") ==
          !d24_on_65);
    // the wgmma family alone, its choice forced (the GPU cases' plans)
    CHECK(has(wgmma_plan<math::bf16>(p, h200, served()).description(), "16-bit pairs"));
    const std::string forced = wgmma_plan<math::accurate>(p, h200, served()).description();
    CHECK(has(forced, "wgmma tf32x3"));
    CHECK(has(forced, "a stage per filter row"));
  }
  // 3xTF32 at d12 and d24 on 65 x 65 keep space to batch (d12 measured 19.3 ms against these tiles' 30.4 on
  // the H100), split by 6 x 6 into sub-images of dilation 2 and 4 on flat tiles (estimated 15.9 and 21.2 ms
  // against the full split's 18.3 and 23.1)
  for (const conv2d_problem& p : {d12, d24}) {
    CAPTURE(describe(p));
    CHECK(has(conv2d_reduce_plan<float, math::accurate>(p, h200).description(), "space to batch by 6x6"));
  }
  // an undilated 5x5 whose 3xTF32 row and flat stages do not fit (two parts of 25 taps of 8 x 128 weights
  // per slice): the direct tiles of filter rows (Inception's 5x5 at batch 32: 0.313 ms against the mma.sync
  // kernel's 0.348 on the H100)
  const conv2d_problem c48 = make_problem(32, 48, 35, 35, 64, 5, 5, 2, 2, 1, 1, 1, 1);
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(c48, h200).description(), "tiles of a 5x5 filter"));
  CHECK(has(wgmma_plan<math::accurate>(c48, h200, served()).description(), "tiles of a 5x5 filter, a stage per filter row"));
}
}

TEST_SUITE("gpu") {
TEST_CASE("wgmma dilated tiles: every op against float64 in tf32, fused, pass mode, partial mode and a split-K tail") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;  // (no wgmma kernel on this GPU)
  std::uint64_t seed = 9900;
  for (const dilated_case& c : cases) {
    all_ops<dilated_tiles, math::tf32, mode::model>(c.name, c.p, ++seed);
    all_ops<dilated_tiles, math::tf32, mode::partial>(c.name, c.p, ++seed);
    all_ops<dilated_tiles, math::tf32, mode::tail_any_tiles>(c.name, c.p, ++seed);
    if (c.p.K > 128) all_ops<dilated_tiles, math::tf32, mode::pass>(c.name, c.p, ++seed);
  }
}

TEST_CASE("wgmma dilated tiles: an infinite or NaN weight in a dead filter row gives NaN where the padding is read") {
  // A dead filter row's stage multiplies padding zeros only; PyTorch's convolution multiplies them too, so
  // an infinite or NaN weight there makes its channel NaN at those outputs. The dead rows' stages run then
  // (block::wgmma_conv_params::skips_dead_rows, the packed filter's flag). Integer data: exact results.
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  opts o;
  o.exact = true, o.nan_expected = true;
  std::uint64_t seed = 9930;
  // cases[4]: tiles of output rows 0-3 (filter row 0 dead), 8-11 (every row dead); d8 on 9x40: tile 0 row 0
  // dead, tile 1 row 2 dead
  for (const conv2d_problem& p : {cases[4].p, make_problem(2, 8, 9, 40, 20, 3, 3, 8, 8, 1, 1, 8, 8)}) {
    auto d = make_data<float>(p, ++seed, data_kind::integer);
    const std::int64_t taps = p.R * p.S, ck = p.gemm_k();
    d.w[static_cast<std::size_t>(5 * ck + 3 * taps + 1)] = static_cast<float>(inf);                  // k 5: row 0
    d.w[static_cast<std::size_t>(17 * ck + (p.R - 1) * p.S + 2)] = static_cast<float>(nan);          // k 17: last row
    d.w[static_cast<std::size_t>(19 * ck + 7 * taps)] = static_cast<float>(-inf);                    // k 19: row 0
    const std::string name = "dead rows, inf / NaN in w " + describe(p);
    auto ops = [&](auto entry) {
      using E = decltype(entry);
      check_fused<E>(name + " min", p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<E>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<E>(name + " argmax", p, d, op::argmax{}, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
      check_fused<E>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    };
    ops(wgmma_mode_entry<dilated_tiles, math::tf32, mode::model>{});
    ops(wgmma_mode_entry<dilated_tiles, math::tf32, mode::partial>{});
    ops(wgmma_mode_entry<dilated_tiles, math::bf16, mode::model>{});
    ops(wgmma_mode_entry<dilated_tiles, math::tf32x3, mode::model>{});
  }
}

TEST_CASE("wgmma dilated tiles in bf16 and fp16: every op against float64 over x's channel pairs") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  std::uint64_t seed = 9950;
  // bf16: every case (odd C: the last pair's high half zero; C 9 < 16: one slice, pairs past C zero-filled)
  for (const dilated_case& c : cases) {
    all_ops<dilated_tiles, math::bf16, mode::model>(c.name, c.p, ++seed);
    all_ops<dilated_tiles, math::bf16, mode::partial>(c.name, c.p, ++seed);
    if (c.p.K > 128) all_ops<dilated_tiles, math::bf16, mode::pass>(c.name, c.p, ++seed);
  }
  all_ops<dilated_tiles, math::bf16, mode::tail_any_tiles>(cases[6].name, cases[6].p, ++seed);
  // fp16: the same tiles with the other conversion and wgmma kind; two ops on three cases
  for (int i : {0, 3, 12}) {
    const auto d = make_data<float>(cases[i].p, ++seed, data_kind::real);
    op_check<dilated_tiles, math::fp16, mode::model>(cases[i].name, cases[i].p, d, op::min{});
    op_check<dilated_tiles, math::fp16, mode::model>(cases[i].name, cases[i].p, d, op::argmax{});
  }
}

TEST_CASE("wgmma dilated tiles under 3xTF32: every op against float64, fused and partial mode") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  std::uint64_t seed = 9980;
  for (const dilated_case& c : cases) {
    all_ops<dilated_tiles, math::tf32x3, mode::model>(c.name, c.p, ++seed);
    all_ops<dilated_tiles, math::tf32x3, mode::partial>(c.name, c.p, ++seed);
  }
  // undilated filters whose row and flat stages do not fit under 3xTF32: 5x5 (W % 4 != 0: x copied), 7x7
  all_ops<dilated_tiles, math::tf32x3, mode::model>("5x5 pad 2, 13x14", make_problem(2, 16, 13, 14, 40, 5, 5, 2, 2, 1, 1, 1, 1), ++seed);
  all_ops<dilated_tiles, math::tf32x3, mode::model>("7x7 pad 3, C 24, K 130", make_problem(1, 24, 16, 20, 130, 7, 7, 3, 3, 1, 1, 1, 1), ++seed);
}

TEST_CASE("wgmma flat tiles of a dilated filter: every op against float64 in tf32, bf16, fp16 and 3xTF32") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  std::uint64_t seed = 12100;
  for (const dilated_case& c : flat_cases) {
    all_ops<dilated_flat_tiles, math::tf32, mode::model>(c.name, c.p, ++seed);
    all_ops<dilated_flat_tiles, math::tf32, mode::partial>(c.name, c.p, ++seed);
    if (c.p.K > 128 && c.p.groups == 1) all_ops<dilated_flat_tiles, math::tf32, mode::pass>(c.name, c.p, ++seed);
    all_ops<dilated_flat_tiles, math::bf16, mode::model>(c.name, c.p, ++seed);
    // 3xTF32: not d6 on 29x29 nor the 250-wide rows, whose windows of both parts do not fit two stages
    if (&c != &flat_cases[7] && &c != &flat_cases[8]) all_ops<dilated_flat_tiles, math::tf32x3, mode::model>(c.name, c.p, ++seed);
  }
  all_ops<dilated_flat_tiles, math::tf32, mode::tail_any_tiles>(flat_cases[1].name, flat_cases[1].p, ++seed);
  all_ops<dilated_flat_tiles, math::tf32x3, mode::partial>(flat_cases[4].name, flat_cases[4].p, ++seed);
  for (int i : {0, 3, 8}) {
    const auto d = make_data<float>(flat_cases[i].p, ++seed, data_kind::real);
    op_check<dilated_flat_tiles, math::fp16, mode::model>(flat_cases[i].name, flat_cases[i].p, d, op::min{});
    op_check<dilated_flat_tiles, math::fp16, mode::model>(flat_cases[i].name, flat_cases[i].p, d, op::argmax{});
  }
}

TEST_CASE("wgmma dilated tiles sanitizer: a padded copy of x, dead rows, resident and streamed filters, three modes") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  // (the second: its filter streamed, 1.2 MB)
  for (const conv2d_problem& p : {make_problem(2, 16, 5, 30, 140, 2, 3, 12, 2, 1, 1, 10, 2),
                                  make_problem(1, 128, 5, 13, 256, 3, 3, 6, 6, 1, 1, 6, 6),
                                  make_problem(3, 260, 7, 13, 20, 3, 3, 2, 2, 1, 1, 2, 2)}) {
    const auto d = make_data<float>(p, 99, data_kind::real);
    op_check<dilated_tiles, math::tf32, mode::model>("dilated wgmma sanitizer", p, d, op::argmin{});
    op_check<dilated_tiles, math::tf32, mode::pass>("dilated wgmma sanitizer", p, d, op::argmin{});
    op_check<dilated_tiles, math::tf32, mode::partial>("dilated wgmma sanitizer", p, d, op::argmin{});
    op_check<dilated_tiles, math::bf16, mode::model>("dilated wgmma sanitizer bf16", p, d, op::argmin{});
    op_check<dilated_tiles, math::tf32x3, mode::model>("dilated wgmma sanitizer 3xTF32", p, d, op::argmin{});
  }
  // flat tiles: a window reaching past the last image, and a merged pitch
  for (const conv2d_problem& p : {flat_cases[3].p, flat_cases[4].p}) {
    const auto d = make_data<float>(p, 98, data_kind::real);
    op_check<dilated_flat_tiles, math::tf32, mode::model>("dilated flat sanitizer", p, d, op::argmin{});
    op_check<dilated_flat_tiles, math::bf16, mode::model>("dilated flat sanitizer bf16", p, d, op::argmin{});
    op_check<dilated_flat_tiles, math::tf32x3, mode::model>("dilated flat sanitizer 3xTF32", p, d, op::argmin{});
  }
}
}
