// Host suite: block::conv_mainloop_wgmma::make_params / cannot_implement (the wgmma kernel's
// can-implement check and shared-memory layout, built on the host) over a sweep of shapes and policies,
// against the layout rules the kernel and its TMA box rely on, worked out here independently.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <convred/device/conv2d_reduce_packed.cuh>

namespace {

using convred::conv2d_problem;
using convred::wgmma_policy;
namespace math = convred::math;

std::int64_t up128(std::int64_t v) { return (v + 127) / 128 * 128; }

template <class Policy>
std::size_t mainloop_xpack(const convred::block::wgmma_conv_params& k) {
  return convred::block::conv_mainloop_wgmma<Policy>::xpack_bytes(k);
}

/// Checks the flat parameter block (make_params with flat) of one accepted problem against its rules,
/// worked out here: plane pitch Q + halo_w, P + halo_h rows per image (at stride 1 less min(pad, halo):
/// the zero columns and rows neighbours share), tiles of block_m consecutive GEMM rows up to the last
/// output, windows of block_m + the taps' reach, the kernel's pixel map (the fast divisions) giving back
/// each output's (n, p, q), and for each tap of those outputs the packed plane pixel it reads holding
/// the input pixel the convolution needs there, or a zero where that is padding (pack_x_kernel's rule).
template <class Policy>
void check_flat(const conv2d_problem& p, const convred::block::wgmma_conv_params& k, std::size_t smem) {
  constexpr int BM = Policy::block_m, E = 16 / Policy::filter_elem_bytes;
  CHECK(smem <= convred::device::detail::max_smem_per_block);
  // a dilation (stride 1 only) along a filter dimension above 1 spaces the taps dh rows, dw pixels apart
  const std::int64_t dh = p.R > 1 ? p.dil_h : 1, dw = p.S > 1 ? p.dil_w : 1;
  const std::int64_t st = p.stride_h, halo_h = (p.R - 1) * dh / st, halo_w = (p.S - 1) * dw / p.stride_w;
  const std::int64_t hs = p.P() + halo_h - (st == 1 ? std::min(p.pad_h, halo_h) : 0),
                     pw = p.Q() + halo_w - (p.stride_w == 1 ? std::min(p.pad_w, halo_w) : 0);
  CHECK(k.flat == 1);
  CHECK(k.dil_h == dh);
  CHECK(k.dil_w == dw);
  CHECK(k.gather == 0);
  CHECK(k.raw_copy_bytes == 0);
  CHECK(k.flat_rows == hs);
  CHECK(k.pw == pw);
  CHECK(k.mrow_step == 64);
  CHECK(k.tiles_p == 1);
  CHECK(k.tiles_q == 1);
  const std::int64_t last = ((p.N - 1) * hs + p.P() - 1) * pw + p.Q() - 1;  // the last output's GEMM row
  CHECK(k.tiles == (p.N == 0 ? 0 : last / BM + 1));
  const std::int64_t window = BM + halo_h * pw + halo_w;
  CHECK(k.phase_pixels == window);
  CHECK(k.flat_pixels == k.tiles * BM + halo_h * pw + halo_w);
  const std::int64_t phases = std::min<std::int64_t>(st, p.R) * std::min<std::int64_t>(st, p.S);
  CHECK(k.plane_bytes == phases * window * 16);
  // 1x1: group slices of block_c channels per stage, a divisor of the slices, at most wgmma_max_group (3xTF32:
  // 2, the stages its consumers compile); otherwise one
  const std::int64_t slices = (p.C + Policy::block_c - 1) / Policy::block_c;
  CHECK(k.group >= 1);
  CHECK(k.group <= (Policy::parts == 2 ? 2 : convred::block::wgmma_max_group));
  if (p.R != 1 || p.S != 1) CHECK(k.group == 1);
  CHECK(static_cast<std::int64_t>(k.kt) * k.group == slices);
  CHECK(k.b_bytes == static_cast<std::int64_t>(k.group) * Policy::parts * p.R * p.S * 128 * Policy::block_c *
                         Policy::filter_elem_bytes);
  CHECK(k.part_bytes == k.plane_bytes * (Policy::block_c / E) * k.group);
  // the packed x: per tile, every stage's planes (all slices, the window of each phase)
  CHECK(mainloop_xpack<Policy>(k) == static_cast<std::size_t>(k.tiles * Policy::parts * slices * (Policy::block_c / E) *
                                                               phases * window * 16));
  // stages: the layout's, then as many more as fit, up to wgmma_max_stages
  const std::int64_t rest = static_cast<std::int64_t>(Policy::raw_stages) * k.raw_bytes +
                            static_cast<std::int64_t>(convred::device::detail::wgmma_tail_bytes<Policy, convred::op::argmin>());
  CHECK(static_cast<std::int64_t>(smem) == k.resident_bytes + static_cast<std::int64_t>(k.stages) * k.stage_bytes + rest);
  CHECK(k.stages >= 2);
  CHECK(k.stages <= convred::block::wgmma_max_stages);
  if (k.stages >= Policy::stages && k.stages < convred::block::wgmma_max_stages)
    CHECK(static_cast<std::int64_t>(smem) + k.stage_bytes > static_cast<std::int64_t>(convred::device::detail::max_smem_per_block));
  // the pixel map of the kernel's consumers: first, last and a middle output, and in each of the first
  // and last 8 images its four corners and the last column of its middle row (row ends, image
  // boundaries, the last tile)
  std::vector<std::int64_t> ms = {0, p.N * p.P() * p.Q() / 2, p.N * p.P() * p.Q() - 1};
  for (std::int64_t n = 0; n < p.N; ++n) {
    if (n == 8 && p.N > 16) n = p.N - 8;
    const std::int64_t base = n * p.P() * p.Q(), P = p.P(), Q = p.Q();
    for (std::int64_t m : {base, base + Q - 1, base + (P - 1) * Q, base + P * Q - 1, base + (P / 2) * Q + Q - 1}) ms.push_back(m);
  }
  for (const std::int64_t m : ms) {
    if (p.N == 0) break;
    const std::int64_t n = m / (p.P() * p.Q()), pp = m / p.Q() % p.P(), q = m % p.Q();
    const std::int64_t o = (n * hs + pp) * pw + q;
    CHECK(o < k.tiles * BM);
    std::int32_t n2, r, p2, q2;
    k.div_image.divmod(static_cast<std::int32_t>(o), n2, r);
    k.div_pw.divmod(r, p2, q2);
    CHECK(n2 == n);
    CHECK(p2 == pp);
    CHECK(q2 == q);
    // every tap: the plane pixel it reads (kernel: o + (r / st) dh pw + (s / st) dw of phase (r % st, s % st))
    // holds, by pack_x_kernel's rule, input (n', st * row + r % st - pad_h, st * col + s % st - pad_w) or
    // zero outside x; the convolution needs input (n, st * pp + r dh - pad_h, st * q + s dw - pad_w) or zero
    for (std::int64_t r0 = 0; r0 < p.R; ++r0)
      for (std::int64_t s0 = 0; s0 < p.S; ++s0) {
        const std::int64_t i = o + (r0 / st) * dh * pw + (s0 / p.stride_w) * dw;
        REQUIRE(i < k.flat_pixels);
        REQUIRE(i - o / BM * BM < k.phase_pixels);  // within the tile's own window
        std::int32_t ni, ri, row, col;
        k.div_image.divmod(static_cast<std::int32_t>(i), ni, ri);
        k.div_pw.divmod(ri, row, col);
        const std::int64_t hp = st * row + r0 % st - p.pad_h, wp = p.stride_w * col + s0 % p.stride_w - p.pad_w;
        const bool packed_in = ni < p.N && hp >= 0 && hp < p.H && wp >= 0 && wp < p.W;
        const std::int64_t hn = st * pp + r0 * dh - p.pad_h, wn = p.stride_w * q + s0 * dw - p.pad_w;
        const bool need_in = hn >= 0 && hn < p.H && wn >= 0 && wn < p.W;
        CAPTURE(r0);
        CAPTURE(s0);
        CHECK(packed_in == need_in);
        if (packed_in && need_in) {
          CHECK(ni == n);
          CHECK(hp == hn);
          CHECK(wp == wn);
        }
      }
  }
}

/// Checks every rule of the parameter block for one accepted problem.
template <class Policy>
void check_layout(const conv2d_problem& p, const convred::block::wgmma_conv_params& k, std::size_t smem,
                  std::size_t tail) {
  constexpr int E = 16 / Policy::filter_elem_bytes, BC = Policy::block_c, RC = Policy::raw_c;
  static_assert(BC % RC == 0 && RC % E == 0, "a stage is whole raw buffers, a raw buffer whole planes");
  CHECK(smem <= convred::device::detail::max_smem_per_block);
  // narrow images (Q + S - 1 <= 32): planes of pitch 16 or 32, one m64 row over 64 / pw output rows
  const std::int64_t st = p.stride_h, halo_h = (p.R - 1) / st, halo_w = (p.S - 1) / st;
  const std::int64_t span = p.Q() + halo_w;
  const bool narrow = span <= 32;
  CHECK(k.stride == st);
  // no TMA box for these (nor for 3xTF32's tap loop: any filter but 3x3 and 1x1)
  const bool taps = Policy::parts == 2 && !((p.R == 3 && p.S == 3) || (p.R == 1 && p.S == 1));
  CHECK(k.gather == (st != 1 || p.W % 4 != 0 || taps ? 1 : 0));
  CHECK(k.phases_h == std::min<std::int64_t>(st, p.R));
  CHECK(k.phases_w == std::min<std::int64_t>(st, p.S));
  CHECK(k.phase_pixels == k.ph * k.pw);
  CHECK(k.pw == (span <= 16 ? 16 : span <= 32 ? 32 : Policy::tile_w + halo_w));
  CHECK(k.pw >= (narrow ? p.Q() + halo_w : 64 + halo_w));  // every tap's columns inside its phase row
  CHECK(k.tile_cols == (narrow ? k.pw : 64));
  CHECK(k.tile_cols >= (narrow ? p.Q() : 64));
  CHECK(k.tile_rows == (narrow ? Policy::tile_h * 64 / k.pw : Policy::tile_h));
  CHECK(k.mrow_step == (narrow ? 64 : k.pw));
  CHECK(k.mrow_step * Policy::tile_h == k.tile_rows * k.pw);  // the tile's m64 rows cover its output rows
  CHECK(k.ph == k.tile_rows + halo_h);
  CHECK(k.bh == k.ph);
  CHECK(k.rp % 4 == 0);                     // TMA rows are 16-byte multiples (unused when gathering)
  CHECK(k.rp >= k.pw + k.col_shift);        // the box covers the patch after the alignment shift
  CHECK(k.rp <= 256);                       // TMA box dimensions
  CHECK(k.ph <= 256);
  CHECK((p.pad_w + k.col_shift) % 4 == 0);  // box start q0 - pad - shift: 16-byte aligned for q0 % 64 == 0
  CHECK(k.col_shift >= 0);
  CHECK(k.col_shift < 4);
  CHECK(k.raw_copy_bytes == (k.gather ? 0 : RC * k.ph * k.rp * 4));  // gathering: no raw buffers
  CHECK(k.raw_bytes == up128(k.raw_copy_bytes));
  // the last m64 row's shifted reads stay inside the plane: (tile_h - 1) * mrow_step + (R - 1) * pw +
  // (S - 1) + 64 pixels
  CHECK(k.plane_bytes == (k.phases_h * k.phases_w * k.phase_pixels + (narrow ? halo_w : 0)) * 16);
  // the last phase's last m64 row, shifted by the largest tap offset, stays inside the plane
  CHECK(((k.phases_h * k.phases_w - 1) * k.phase_pixels + (Policy::tile_h - 1) * k.mrow_step + halo_h * k.pw +
         halo_w + 64) * 16 <= k.plane_bytes);
  CHECK(k.part_bytes == k.plane_bytes * (BC / E));
  CHECK(k.kt == (p.C + BC - 1) / BC);
  CHECK(k.npass == (p.K + 127) / 128);  // channel passes of 128
  CHECK(convred::block::conv_mainloop_wgmma<Policy>::packed_bytes(k) ==
        static_cast<std::size_t>(k.npass) * k.kt * k.b_bytes + 256);  // the slices, the flag word
  CHECK(k.filter_flag_offset() == static_cast<std::int64_t>(k.npass) * k.kt * k.b_bytes);
  CHECK(k.b_bytes == Policy::parts * p.R * p.S * 128 * BC * Policy::filter_elem_bytes);
  CHECK(k.tiles == p.N * ((p.P() + k.tile_rows - 1) / k.tile_rows) * ((p.Q() + k.tile_cols - 1) / k.tile_cols));
  const std::int64_t planes = up128(static_cast<std::int64_t>(Policy::parts) * k.part_bytes);
  const std::int64_t rest = static_cast<std::int64_t>(Policy::raw_stages) * k.raw_bytes + static_cast<std::int64_t>(tail);
  const std::int64_t resident = up128(static_cast<std::int64_t>(k.npass) * k.kt * k.b_bytes);
  const bool resident_fits = resident + Policy::stages * planes + rest <=
                                 static_cast<std::int64_t>(convred::device::detail::max_smem_per_block) &&
                             resident < (std::int64_t(1) << 20);
  CHECK((k.resident_bytes > 0) == resident_fits);  // resident whenever that layout fits
  if (k.resident_bytes > 0) {
    CHECK(k.resident_bytes == resident);
    CHECK(k.a_offset == 0);
    CHECK(k.stage_bytes == planes);
  } else {
    CHECK(k.a_offset == k.b_bytes);
    CHECK(k.stage_bytes == up128(k.b_bytes + static_cast<std::int64_t>(Policy::parts) * k.part_bytes));
  }
  CHECK(k.stage_bytes % 128 == 0);
  CHECK(static_cast<std::int64_t>(smem) == k.resident_bytes + static_cast<std::int64_t>(k.stages) * k.stage_bytes + rest);
  // as many operand stages as fit, at most the policy's, at least 2 (resident: the policy's)
  CHECK(k.stages >= 2);
  CHECK(k.stages <= Policy::stages);
  if (k.resident_bytes > 0) CHECK(k.stages == Policy::stages);
  if (k.stages < Policy::stages)
    CHECK((k.stages + 1) * static_cast<std::int64_t>(k.stage_bytes) + rest >
          static_cast<std::int64_t>(convred::device::detail::max_smem_per_block));
}

/// A sweep of random valid problems the mainloop's shape rules accept (NCHW, groups 1, stride 1 or 2,
/// K up to 600: one to five channel passes, any W) and R, S up to 5: accepted ones must follow every layout rule; rejected ones must be
/// rejected for shared memory only.
template <class Policy>
void sweep(std::uint64_t seed) {
  using mainloop = convred::block::conv_mainloop_wgmma<Policy>;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<Policy, convred::op::argmin>();
  std::mt19937_64 gen(seed);
  auto pick = [&](int lo, int hi) { return static_cast<std::int64_t>(std::uniform_int_distribution<int>(lo, hi)(gen)); };
  int accepted = 0, accepted_flat = 0;
  for (int i = 0; i < 400; ++i) {
    conv2d_problem p;
    p.N = pick(0, 3), p.C = pick(1, 200), p.K = pick(0, 3) == 0 ? pick(129, 600) : pick(1, 128), p.R = pick(1, 5), p.S = pick(1, 5);
    p.pad_h = pick(0, 3), p.pad_w = pick(0, 3);
    p.H = pick(static_cast<int>(p.R), 70), p.W = pick(0, 1) ? 4 * pick(static_cast<int>((p.S + 3) / 4), 70) : pick(static_cast<int>(p.S), 280);
    p.stride_h = p.stride_w = pick(1, 2);
    REQUIRE(convred::validate(p, 4) == convred::status::success);
    const std::string shape = "N " + std::to_string(p.N) + " C " + std::to_string(p.C) + " H " + std::to_string(p.H) +
                              " W " + std::to_string(p.W) + " K " + std::to_string(p.K) + " R " + std::to_string(p.R) +
                              " S " + std::to_string(p.S) + " stride " + std::to_string(p.stride_h) + " pad " + std::to_string(p.pad_h) + "," +
                              std::to_string(p.pad_w);
    CAPTURE(shape);
    // (3xTF32 too: other filters and stride 2 in its tap-loop variant, the same shape rules)
    CHECK(mainloop::cannot_implement(p) == nullptr);
    convred::block::wgmma_conv_params k;
    std::size_t smem = 0;
    convred::block::wgmma_conv_params f;
    std::size_t fsmem = 0;
    if (mainloop::make_params(p, tail, convred::device::detail::max_smem_per_block, f, fsmem, true)) {
      ++accepted_flat;
      check_flat<Policy>(p, f, fsmem);
    }
    if (mainloop::make_params(p, tail, convred::device::detail::max_smem_per_block, k, smem)) {
      ++accepted;
      check_layout<Policy>(p, k, smem, tail);
    } else {
      // only shared memory may refuse it: the streamed layout must not fit
      const std::int64_t st = p.stride_h, hh = (p.R - 1) / st, hw = (p.S - 1) / st;
      const std::int64_t phases = std::min<std::int64_t>(st, p.R) * std::min<std::int64_t>(st, p.S);
      const bool gather = st != 1 || p.W % 4 != 0 || (Policy::parts == 2 && !((p.R == 3 && p.S == 3) || (p.R == 1 && p.S == 1)));
      const std::int64_t span = p.Q() + hw;
      const std::int64_t pw = span <= 16 ? 16 : span <= 32 ? 32 : 64 + hw;
      const std::int64_t ph = (pw <= 32 ? Policy::tile_h * 64 / pw : Policy::tile_h) + hh;
      const std::int64_t rp = (pw + (4 - p.pad_w % 4) % 4 + 3) / 4 * 4;
      const std::int64_t part = (phases * ph * pw + (pw <= 32 ? hw : 0)) * 16 * (Policy::block_c / (16 / Policy::filter_elem_bytes));
      const std::int64_t b = Policy::parts * p.R * p.S * 128 * Policy::block_c * Policy::filter_elem_bytes;
      const std::int64_t streamed = 2 * up128(b + Policy::parts * part) +  // the fewest stages
                                    Policy::raw_stages * up128(gather ? 0 : Policy::raw_c * ph * rp * 4) +
                                    static_cast<std::int64_t>(tail);
      CHECK(streamed > static_cast<std::int64_t>(convred::device::detail::max_smem_per_block));
    }
  }
  CHECK(accepted > (Policy::parts == 2 ? 10 : 100));  // (3xTF32: its two-part stages fit fewer shapes)  // the sweep exercises the accepted path
  CHECK(accepted_flat > (Policy::parts == 2 ? 10 : 100));
  // dilated filters at stride 1 (dilation 1-5 per dimension, also along a 1-wide filter dimension, padding
  // 0-8): flat tiles only, every tap read where the convolution needs it
  int accepted_dilated = 0;
  for (int i = 0; i < 200; ++i) {
    conv2d_problem p;
    p.N = pick(1, 3), p.C = pick(1, 40), p.K = pick(1, 200), p.R = pick(1, 4), p.S = pick(1, 4);
    p.dil_h = pick(1, 5), p.dil_w = pick(1, 5), p.pad_h = pick(0, 8), p.pad_w = pick(0, 8);
    p.H = std::max<std::int64_t>(pick(1, 40), (p.R - 1) * p.dil_h + 1);
    p.W = std::max<std::int64_t>(pick(1, 90), (p.S - 1) * p.dil_w + 1);
    REQUIRE(convred::validate(p, 4) == convred::status::success);
    const std::string shape = "N " + std::to_string(p.N) + " C " + std::to_string(p.C) + " H " + std::to_string(p.H) +
                              " W " + std::to_string(p.W) + " K " + std::to_string(p.K) + " R " + std::to_string(p.R) +
                              " S " + std::to_string(p.S) + " dil " + std::to_string(p.dil_h) + "," + std::to_string(p.dil_w) +
                              " pad " + std::to_string(p.pad_h) + "," + std::to_string(p.pad_w);
    CAPTURE(shape);
    convred::block::wgmma_conv_params f;
    std::size_t fsmem = 0;
    if (mainloop::make_params(p, tail, convred::device::detail::max_smem_per_block, f, fsmem, true)) {
      ++accepted_dilated;
      check_flat<Policy>(p, f, fsmem);
    }
    if (mainloop::dilated(p)) CHECK_FALSE(mainloop::make_params(p, tail, convred::device::detail::max_smem_per_block, f, fsmem));
  }
  CHECK(accepted_dilated > (Policy::parts == 2 ? 20 : 100));
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("wgmma choose_wgmma_params: flat tiles where row tiles waste pixels or gather, 132 SMs") {
  using P = typename convred::default_wgmma_policy<math::tf32>::type;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>();
  // the tiles chosen: 'r' rows, 'f' flat, 'd' direct
  auto tiles = [&](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t K, std::int64_t R, std::int64_t pad,
                   std::int64_t stride) {
    conv2d_problem p;
    p.N = N, p.C = C, p.H = p.W = H, p.K = K, p.R = p.S = R, p.pad_h = p.pad_w = pad, p.stride_h = p.stride_w = stride;
    convred::block::wgmma_conv_params k;
    std::size_t smem = 0;
    REQUIRE(convred::device::choose_wgmma_params<P>(p, tail, convred::device::detail::max_smem_per_block, 132, true, k, smem));
    CHECK(k.flat + k.direct <= 1);
    return k.direct ? 'd' : k.flat ? 'f' : 'r';
  };
  CHECK(tiles(32, 512, 7, 512, 3, 1, 1) == 'f');     // ResNet-50 layer4.1: 7 x 7 (rows: 16 x 16 tiles, x gathered)
  CHECK(tiles(32, 256, 14, 256, 3, 1, 1) == 'f');    // layer3.1: 14 x 14, W % 4 != 0
  CHECK(tiles(64, 64, 256, 128, 3, 0, 1) == 'r');    // the seed: packing x would cost ~0.5 ms
  CHECK(tiles(32, 64, 224, 64, 3, 1, 1) == 'r');     // VGG-16 conv1_2: x large against the work
  // tf32 1x1 without padding: direct tiles (no packing pass) at stride 1; at stride 2 flat tiles (the
  // packing pass subsamples x once, where a direct box carries the odd columns to every channel pass),
  // unless the direct tiles run split (short units on a small problem: the packing pass's share is large)
  CHECK(tiles(32, 512, 28, 1024, 1, 0, 2) == 'f');   // layer3.0.downsample: 1x1 stride 2
  CHECK(tiles(1, 512, 28, 1024, 1, 0, 2) == 'd');
  CHECK(tiles(4, 256, 56, 512, 1, 0, 2) == 'f');     // layer2.0.downsample at batch 4: pass mode
  CHECK(tiles(32, 64, 56, 256, 1, 0, 1) == 'd');     // ResNet-50 layer1.0 projection
  CHECK(tiles(1, 64, 56, 256, 1, 0, 1) == 'd');
  CHECK(tiles(1, 24, 112, 144, 1, 0, 1) == 'd');     // MobileNetV2 expand (C = 24: 3-slice stages)
  // 1x1 with padding (no direct tiles): flat where a flat stage holds 4 slices, row tiles otherwise
  CHECK(tiles(32, 64, 56, 256, 1, 1, 1) == 'f');
  CHECK(tiles(1, 24, 112, 144, 1, 1, 1) == 'r');
}

TEST_CASE("wgmma make_direct_params: tiles of whole rows, boxes of x, what is served") {
  using P = typename convred::default_wgmma_policy<math::tf32>::type;
  using mainloop = convred::block::conv_mainloop_wgmma<P>;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>();
  auto make = [&](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R,
                  std::int64_t pad, std::int64_t stride, convred::block::wgmma_conv_params& k) {
    conv2d_problem p;
    p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = p.S = R, p.pad_h = p.pad_w = pad, p.stride_h = p.stride_w = stride;
    std::size_t smem = 0;
    const bool ok = mainloop::make_direct_params(p, tail, convred::device::detail::max_smem_per_block, k, smem);
    if (ok) CHECK(smem <= convred::device::detail::max_smem_per_block);
    return ok;
  };
  convred::block::wgmma_conv_params k;
  // ResNet-50 layer1.0 projection: 4 rows of 56 per tile (224 of 256 pixels), 14 tiles per image, 4-slice stages
  REQUIRE(make(2, 64, 56, 56, 256, 1, 0, 1, k));
  CHECK(k.direct == 1);
  CHECK(k.flat == 0);
  CHECK(k.tile_rows == 4);
  CHECK(k.tile_cols == 56);
  CHECK(k.tiles_p == 14);
  CHECK(k.tiles == 28);
  CHECK(k.rp == 56);  // 56 = 8 mod 16: the 4 channels of a lane quad 8 banks apart
  CHECK(k.group == 4);
  CHECK(k.kt == 2);
  CHECK(k.npass == 2);
  CHECK(k.raw_copy_bytes == 56 * 32 * 4 * 4);
  CHECK(mainloop::packed_bytes(k) == 2u * 8 * 128 * 8 * 4 + 256);  // pack_filter's layout: npass x ceil(C / 8) slices, the flag
  // layer3.0 at stride 2: one 14 x 14 tile per image, box columns 0 .. 26 read (40 wide)
  REQUIRE(make(1, 512, 28, 28, 1024, 1, 0, 2, k));
  CHECK(k.tile_rows == 14);
  CHECK(k.tile_cols == 14);
  CHECK(k.tiles == 1);
  CHECK(k.rp == 40);
  CHECK(k.raw_copy_bytes == 40 * 8 * k.group * 14 * 4);
  CHECK(k.group * k.kt == 64);
  CHECK(mainloop::packed_bytes(k) == 8u * 64 * 128 * 8 * 4 + 256);
  // balanced row tiles: P = 30 rows of 20 (12 per tile at most) -> 3 tiles of 10 rows
  REQUIRE(make(1, 8, 30, 20, 7, 1, 0, 1, k));
  CHECK(k.tiles_p == 3);
  CHECK(k.tile_rows == 10);
  CHECK(k.rp == 24);
  // C = 17: 3 slices of 8 -> stages of 3
  REQUIRE(make(1, 17, 12, 20, 130, 1, 0, 1, k));
  CHECK(k.group == 3);
  CHECK(k.kt == 1);
  // not served: padding, a 3x3 filter, H * W % 4 != 0, Q > 248 (the box's 256 columns), a 3xTF32 or bf16
  // policy
  CHECK_FALSE(make(1, 8, 12, 12, 20, 1, 1, 1, k));
  CHECK_FALSE(make(1, 8, 12, 12, 20, 3, 0, 1, k));
  CHECK_FALSE(make(1, 8, 7, 7, 20, 1, 0, 1, k));
  CHECK(make(1, 8, 10, 14, 20, 1, 0, 2, k));  // stride 2: 2 * 14 % 4 = 0
  // W % 4 != 0 at stride 1 with H * W % 4 == 0: the tiles of the image viewed as H' x W' (viewed_width: the
  // fewest tiles per image, then the smallest box), k's shape the view's; the output pixels keep their order
  REQUIRE(make(1, 8, 10, 14, 20, 1, 0, 1, k));  // 10 x 14 as 1 x 140
  CHECK(k.H == 1);
  CHECK(k.W == 140);
  CHECK(k.P == 1);
  CHECK(k.Q == 140);
  CHECK(k.tile_rows == 1);
  CHECK(k.tiles == 1);
  CHECK(k.rp == 152);
  REQUIRE(make(2, 24, 30, 30, 65, 1, 0, 1, k));  // 30 x 30 as 25 x 36: 4 tiles of 7 rows per image
  CHECK(k.H == 25);
  CHECK(k.W == 36);
  CHECK(k.tile_rows == 7);
  CHECK(k.tiles_p == 4);
  CHECK(k.tiles == 8);
  CHECK(k.rp == 40);
  CHECK(mainloop::first_pixel(k, 1) == 7 * 36);  // the view's pixels in the image's order
  CHECK(mainloop::first_pixel(k, 4) == 900);     // image 1
  CHECK(mainloop::viewed_width(196) == 196);  // 14 x 14: one 256-pixel tile, a box of 200 floats per channel
  CHECK(convred::block::conv_mainloop_wgmma<convred::wgmma_pingpong<P>::type>::viewed_width(196) == 28);  // 2 tiles of 128
  CHECK(mainloop::viewed_width(900) == 36);
  CHECK(mainloop::viewed_width(49) == 0);
  CHECK(mainloop::viewed_width(4 * 263) == 4);  // (263 prime: W' = 4 only, boxes of 8 columns)
  // a view of 2^30 rows or more is refused (k's H' is 32-bit): 6 x (2^30 - 2) pixels view as 4 wide
  CHECK_FALSE(make(1, 1, (std::int64_t(1) << 30) - 2, 6, 1, 1, 0, 1, k));
  CHECK_FALSE(make(1, 8, 4, 300, 20, 1, 0, 1, k));
  conv2d_problem p;
  p.N = 1, p.C = 64, p.H = p.W = 56, p.K = 256, p.R = p.S = 1;
  std::size_t smem = 0;
  CHECK_FALSE(convred::block::conv_mainloop_wgmma<typename convred::default_wgmma_policy<math::tf32x3>::type>::make_direct_params(
      p, tail, convred::device::detail::max_smem_per_block, k, smem));
  CHECK_FALSE(convred::block::conv_mainloop_wgmma<typename convred::default_wgmma_policy<math::bf16>::type>::make_direct_params(
      p, tail, convred::device::detail::max_smem_per_block, k, smem));
}

TEST_CASE("wgmma choose_wgmma_params: 3xTF32 takes flat tiles for 1x1 filters") {
  using P = typename convred::default_wgmma_policy<math::tf32x3>::type;
  const std::size_t tail = convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>();
  for (const std::int64_t C : {24, 64}) {  // MobileNetV2 expand, ResNet-50 layer1.0 projection
    conv2d_problem p;
    p.N = 1, p.C = C, p.H = p.W = C == 24 ? 112 : 56, p.K = C == 24 ? 144 : 256, p.R = p.S = 1;
    convred::block::wgmma_conv_params k;
    std::size_t smem = 0;
    REQUIRE(convred::device::choose_wgmma_params<P>(p, tail, convred::device::detail::max_smem_per_block, 132, true, k, smem));
    CHECK(k.flat == 1);
    // stages of two slices where the slices are even (C 64: 8 slices), else one (C 24: 3)
    CHECK(k.group == (C == 64 ? 2 : 1));
    CHECK_FALSE(convred::plan::wgmma_params<P>::tap_loop(k));  // the unrolled 1x1 stages
  }
  // at stride 2 flat 1x1 tiles read phase 0 only: the same 1x1 stages, not the tap loop (ResNet-50
  // layer3.0's projection); a 2x2 filter at stride 2 (flat, four taps over the phases) keeps the tap loop
  conv2d_problem s2;
  s2.N = 32, s2.C = 512, s2.H = s2.W = 28, s2.K = 1024, s2.R = s2.S = 1, s2.stride_h = s2.stride_w = 2;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(convred::device::choose_wgmma_params<P>(s2, tail, convred::device::detail::max_smem_per_block, 132, true, k, smem));
  CHECK(k.flat == 1);
  CHECK(k.group == 2);
  CHECK_FALSE(convred::plan::wgmma_params<P>::tap_loop(k));
  s2.R = s2.S = 2, s2.C = 128, s2.H = s2.W = 56, s2.K = 256;
  REQUIRE(convred::device::choose_wgmma_params<P>(s2, tail, convred::device::detail::max_smem_per_block, 132, true, k, smem));
  CHECK(k.flat == 1);
  CHECK(k.group == 1);
  CHECK(convred::plan::wgmma_params<P>::tap_loop(k));
}

TEST_CASE("wgmma choose_wgmma_params: 16-bit math takes flat tiles where row tiles would gather x") {
  using P = typename convred::default_wgmma_policy<math::bf16>::type;
  using T = typename convred::default_wgmma_policy<math::tf32>::type;
  conv2d_problem p;  // ResNet-50 layer2.0 3x3 stride 2 at batch 32 (row tiles gather x at stride 2)
  p.N = 32, p.C = 128, p.H = p.W = 28, p.K = 128, p.R = p.S = 3, p.pad_h = p.pad_w = 1, p.stride_h = p.stride_w = 2;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(convred::device::choose_wgmma_params<P>(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                                  convred::device::detail::max_smem_per_block, 132, true, k, smem));
  CHECK(k.flat == 1);
  CHECK(k.gather == 0);
  // flat tiles must serve it at all for the rule to apply: without them, the gathering row tiles
  REQUIRE(convred::device::choose_wgmma_params<P>(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                                  convred::device::detail::max_smem_per_block, 132, false, k, smem));
  CHECK(k.flat == 0);
  CHECK(k.gather == 1);
  // tf32 keeps the time model's choice (the rule is for 16-bit math only)
  convred::block::wgmma_conv_params kt;
  REQUIRE(convred::device::choose_wgmma_params<T>(p, convred::device::detail::wgmma_tail_bytes<T, convred::op::argmin>(),
                                                  convred::device::detail::max_smem_per_block, 132, true, kt, smem));
  CHECK(kt.gather == (kt.flat ? 0 : 1));
}

TEST_CASE("wgmma make_params: layout rules over random shapes, each default policy and ping-pong") {
  sweep<typename convred::default_wgmma_policy<math::tf32>::type>(11);
  sweep<typename convred::default_wgmma_policy<math::bf16>::type>(12);
  sweep<typename convred::default_wgmma_policy<math::fp16>::type>(13);
  sweep<typename convred::default_wgmma_policy<math::tf32x3>::type>(14);
  sweep<wgmma_policy<math::tf32, 3, 2>>(15);
  sweep<wgmma_policy<math::bf16, 4, 2, true>>(16);
}

TEST_CASE("wgmma cannot_implement names each rule") {
  using mainloop = convred::block::conv_mainloop_wgmma<typename convred::default_wgmma_policy<math::tf32>::type>;
  conv2d_problem base;
  base.N = 2, base.C = 8, base.H = 16, base.W = 16, base.K = 16, base.R = 3, base.S = 3;
  CHECK(mainloop::cannot_implement(base) == nullptr);
  struct row {
    void (*edit)(conv2d_problem&);
    const char* part;
  };
  const row rows[] = {
      {[](conv2d_problem& p) { p.x_layout = convred::layout::nhwc; }, "NCHW"},
      {[](conv2d_problem& p) { p.groups = 2; }, "groups"},
      {[](conv2d_problem& p) { p.stride_w = 2; }, "stride"},
      {[](conv2d_problem& p) { p.stride_h = p.stride_w = 3; }, "stride"},
      {[](conv2d_problem& p) { p.dil_h = 2, p.stride_h = p.stride_w = 2; }, "dilation"},
  };
  for (const row& r : rows) {
    conv2d_problem p = base;
    r.edit(p);
    const char* why = mainloop::cannot_implement(p);
    REQUIRE(why != nullptr);
    CAPTURE(why);
    CHECK(std::string(why).find(r.part) != std::string::npos);
    convred::block::wgmma_conv_params k;
    std::size_t smem = 0;
    CHECK_FALSE(mainloop::make_params(p, 1024, convred::device::detail::max_smem_per_block, k, smem));
  }
  // a dilation at stride 1 in tf32: flat tiles (the taps as offsets into the window) and the direct tiles of
  // filter rows serve it (wgmma_conv_params::direct_taps), tiles of image rows do not
  conv2d_problem d = base;
  d.dil_h = 2, d.pad_h = 2;
  CHECK(mainloop::cannot_implement(d) == nullptr);
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  CHECK_FALSE(mainloop::make_params(d, 1024, convred::device::detail::max_smem_per_block, k, smem));
  CHECK(mainloop::make_params(d, 1024, convred::device::detail::max_smem_per_block, k, smem, true));
  CHECK((k.flat == 1 && k.dil_h == 2 && k.dil_w == 1));
  CHECK(mainloop::make_direct_params(d, 1024, convred::device::detail::max_smem_per_block, k, smem));
  CHECK(k.direct_taps == 1);
}
}  // TEST_SUITE("host")
