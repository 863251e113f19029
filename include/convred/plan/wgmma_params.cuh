/// @file plan/wgmma_params.cuh
/// @brief Host planning of the Hopper packed-filter wgmma kernel's parameters: its shape rules (which
/// problems the mainloop implements) and the construction of its parameter block (block::wgmma_conv_params)
/// for tiles of image rows, flat tiles and direct tiles, with their shared-memory layout and sizes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "../block/wgmma_conv_params.cuh"
#include "../detail/fast_divmod.cuh"
#include "../problem.cuh"

namespace convred::plan {

using block::wgmma_conv_params;
using block::wgmma_max_group;
using block::wgmma_max_stages;

/// @brief The host side of block::conv_mainloop_wgmma<Policy> (which inherits it): whether its mainloop
/// serves a problem, and the parameters and shared memory of the kernel for it. Host only, no CUDA call.
template <class Policy>
struct wgmma_params {
 private:
  static constexpr bool x3 = Policy::parts == 2;  ///< 3xTF32: big and small parts
  static constexpr bool promotes = x3;            ///< 3xTF32's promoted stages (conv_mainloop_wgmma::promotes)

 public:
  /// Direct tiles: 32-bit entries per pixel of one slice of block_c input channels in a stage's box of x:
  /// 8 fp32 channels (tf32), or 8 pairs of 16-bit channels (bf16, fp16: block_c = 16, x copied as pairs).
  static constexpr int box_c = Policy::block_c * Policy::filter_elem_bytes / 4;
  static_assert(box_c == 8, "wgmma_params: a slice's box entries are the 8 k-columns of one wgmma step");

  /// @brief Whether a problem of parameters k runs the kernel's TapLoop variant: 3xTF32 with a filter
  /// other than 3x3 and 1x1, or at stride 2 (block::conv_mainloop_wgmma::run_stage) except flat tiles of a
  /// 1x1 filter (their one tap reads phase 0 at offset 0, as at stride 1, so they run the 1x1 stages of 1
  /// or 2 slices); never direct tiles, which promote each stage's rows themselves (run_stage_direct).
  static constexpr bool tap_loop(const wgmma_conv_params& k) {
    return x3 && !k.direct &&
           !((k.stride == 1 && k.R == 3 && k.S == 3) || (k.R == 1 && k.S == 1 && (k.stride == 1 || k.flat)));
  }

  /// Whether flat parameters k of a dilated filter have a window of more than 3.5 tiles (block_m pixels each):
  /// the halo of a large dilation. The time model, which counts a flat stage's tensor work and not its
  /// bytes, was within 5 % up to 3.2 tiles (dilation 4 on 65x65) and 55 % optimistic at 5.3 (dilation 12 on
  /// 33x33: 1.93 ms against 1.25 estimated, direct tiles 0.92; H100, bench/NOTES.md), so the planner takes
  /// such tiles only where no direct tiles serve (choose_wgmma_params) and space to batch does not yield to
  /// them (family::dilated).
  static constexpr bool wide_dilated_window(const wgmma_conv_params& k) {
    return k.flat && (k.dil_h > 1 || k.dil_w > 1) && 2 * static_cast<std::int64_t>(k.phase_pixels) > 7 * Policy::block_m;
  }

  /// Whether p has a dilation above 1 along a filter dimension above 1 (flat tiles at stride 1 and direct
  /// tiles serve it; tiles of image rows do not).
  static bool dilated(const conv2d_problem& p) { return (p.dil_h != 1 && p.R > 1) || (p.dil_w != 1 && p.S > 1); }

  /// Whether direct tiles of filter rows (wgmma_conv_params::direct_taps) may serve p under this policy:
  /// make_direct_params' rule (a dilated filter; with `any_filter`, which its callers pass for 3xTF32 only,
  /// any filter of several taps). device::pack_filter writes the non-finite flag, which only those tiles
  /// read, where this holds.
  static bool direct_taps_may_serve(const conv2d_problem& p) { return dilated(p) || (Policy::parts == 2 && p.R * p.S > 1); }

  /// @brief The shape rules of the can-implement check (host): nullptr when the mainloop implements p's
  /// layout and shape, else why not (a static string naming the rule, for conv2d_reduce_plan's reason).
  /// Shared-memory fit is checked by make_params. p must be valid (convred::validate). A dilated p passes
  /// at stride 1: flat tiles (make_params with `flat`) and direct tiles (make_direct_params) serve it.
  static const char* cannot_implement(const conv2d_problem& p) {
    if (p.x_layout != layout::nchw) return "x is not NCHW";
    if (p.groups != 1 && p.C_per_group() % Policy::block_c != 0)
      return Policy::block_c == 8 ? "groups != 1 with C/groups not a multiple of 8"
                                  : "groups != 1 with C/groups not a multiple of 16";
    if (p.stride_h != p.stride_w || p.stride_h > 2) return "stride other than 1 or 2 (the same in both dimensions)";
    // (a dilation along a 1-wide filter dimension moves no tap: the kernel, which never reads it, serves it;
    // direct tiles of several taps serve any dilation at stride 1: make_direct_params)
    if (dilated(p) && p.stride_h != 1) return "dilation != 1 at stride 2 (the wgmma kernel's dilated tiles: stride 1)";
    if (p.P() <= 0 || p.Q() <= 0) return "empty output";
    if (p.N > 0x7fffffff || !convred::detail::product_below({p.C, p.H, p.W, 4}, std::int64_t(1) << 40))
      return "N >= 2^31 or an image of 2^40 bytes or more";
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
  /// fits (fewer than 2^31 - 1 (tile, slice) blocks of under 2^24 16-byte entries each), dilated filters
  /// at stride 1 included (tap (r, s) r dil_h plane rows and s dil_w pixels on; the window's halo (R - 1)
  /// dil_h rows and (S - 1) dil_w pixels). Not served: NHWC x, groups != 1 with C/groups not a multiple of
  /// block_c, dilation != 1 along a filter dimension above 1 on tiles of image rows, strides other than 1
  /// or 2 in both dimensions, N >= 2^31 or one image of
  /// 2^40 bytes or more (TMA coordinates and strides), stages larger than the shared memory, a packed filter
  /// of 2^40 bytes or more. p must be valid (convred::validate). Independent of N otherwise (N = 0 is
  /// served, with no tiles; flat tiles then need one image's packed planes below 2^31 pixels).
  static bool make_params(const conv2d_problem& p, std::size_t tail_bytes, std::size_t max_smem,
                          wgmma_conv_params& k, std::size_t& smem_bytes, bool flat = false) {
    if (cannot_implement(p) || (dilated(p) && !flat)) return false;  // (dilated: stride 1, cannot_implement)
    static_assert(Policy::stages <= wgmma_max_stages, "wgmma_policy: at most wgmma_max_stages operand stages");
    constexpr int TH = Policy::tile_h, TW = Policy::tile_w, E = 16 / Policy::filter_elem_bytes, BM = Policy::block_m;
    static_assert(TW == 64, "one m64 wgmma row per 64 tile pixels");
    set_shape(p, k);
    // extra rows, columns: the taps' reach ((R - 1) dil_h at stride 1: flat tiles read tap (r, s) r dil_h
    // rows and s dil_w columns on, as an undilated filter of (R - 1) dil_h + 1 x (S - 1) dil_w + 1 taps
    // would; 1 where the filter dimension is 1 wide)
    const std::int64_t dh = p.R > 1 ? p.dil_h : 1, dw = p.S > 1 ? p.dil_w : 1;
    const std::int64_t halo_h = (p.R - 1) * dh / p.stride_h, halo_w = (p.S - 1) * dw / p.stride_w;
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
      // the packed planes' pixels below 2^31 (checked before the products below, which it bounds)
      if (!convred::detail::product_below({std::max<std::int64_t>(p.N, 1), hs, pw}, std::int64_t(1) << 31)) return false;
      const std::int64_t outputs = p.N == 0 ? 0 : ((p.N - 1) * hs + p.P() - 1) * pw + p.Q();  // past the last output
      const std::int64_t tiles = (outputs + BM - 1) / BM;
      phase_pixels = BM + halo_h * pw + halo_w;  // a tile's window: its rows and the taps' reach
      const std::int64_t pixels = tiles * BM + halo_h * pw + halo_w;
      if (pixels >= (std::int64_t(1) << 31)) return false;
      // the packed x (xpack_bytes, < 2^56) and its packing kernel's grid (a block row per tile and stage:
      // fewer than 2^31 - 1; its first part's 16-byte entries in chunks of 256: fewer than 65,536)
      const std::int64_t slices = (p.C + Policy::block_c - 1) / Policy::block_c;
      const std::int64_t per = (Policy::block_c / E) * wgmma_max_group * k.phases_h * k.phases_w * phase_pixels;
      if (per / 256 >= 65535 || tiles * slices >= (std::int64_t(1) << 31) - 1 ||
          tiles * slices * per >= (std::int64_t(1) << 50))  // (in this order: each bounds the next product)
        return false;
      k.flat = 1, k.flat_rows = static_cast<std::int32_t>(hs), k.flat_pixels = pixels;
      k.dil_h = static_cast<std::int32_t>(dh), k.dil_w = static_cast<std::int32_t>(dw);
      k.div_image = convred::detail::fast_divmod(static_cast<std::int32_t>(hs * pw));
      k.div_pw = convred::detail::fast_divmod(static_cast<std::int32_t>(pw));
      k.tile_rows = 0, k.tile_cols = static_cast<std::int32_t>(pw), k.mrow_step = TW;
      k.tiles_p = 1, k.tiles_q = 1, k.tiles = tiles;
      plane = k.phases_h * k.phases_w * phase_pixels * 16;
    } else {
      // narrow images (Q + S - 1 <= 32): planes of pitch 16 or 32, each m64 row covering 4 or 2 output
      // rows of the whole width; otherwise rows of 64 output pixels, patch rows of 64 + S - 1
      // stride 2 (or W % 4 != 0: TMA rows are 16-byte multiples): the producer threads gather x themselves
      // (3xTF32's tap-loop variant too: it runs the gathering producer, whatever the stride)
      k.gather = (k.stride != 1 || p.W % 4 != 0 || tap_loop(k)) ? 1 : 0;
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
    // flat 1x1: group slices per stage, the most (<= wgmma_max_group, dividing kt; 3xTF32: <= 2, the
    // variants its consumers compile) for which 4 streamed stages fit
    if (flat && p.R == 1 && p.S == 1) {
      for (int g = x3 ? 2 : wgmma_max_group; g > 1; --g) {
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
    if (!convred::detail::product_below({slices, b_bytes}, std::int64_t(1) << 40)) return false;
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

  /// The problem's sizes in k (reset first): shape, stride, phases, kt = ceil(C/groups / block_c), the
  /// groups, Kg = K/groups, group_passes = ceil(Kg / block_n), npass = groups * group_passes.
  static void set_shape(const conv2d_problem& p, wgmma_conv_params& k) {
    k = wgmma_conv_params{};
    k.N = p.N, k.C = static_cast<std::int32_t>(p.C), k.H = static_cast<std::int32_t>(p.H), k.W = static_cast<std::int32_t>(p.W);
    k.K = static_cast<std::int32_t>(p.K), k.P = static_cast<std::int32_t>(p.P()), k.Q = static_cast<std::int32_t>(p.Q());
    k.R = static_cast<std::int32_t>(p.R), k.S = static_cast<std::int32_t>(p.S);
    k.pad_h = static_cast<std::int32_t>(p.pad_h), k.pad_w = static_cast<std::int32_t>(p.pad_w);
    k.stride = static_cast<std::int32_t>(p.stride_h);
    k.phases_h = static_cast<std::int32_t>(p.R < p.stride_h ? p.R : p.stride_h);
    k.phases_w = static_cast<std::int32_t>(p.S < p.stride_w ? p.S : p.stride_w);
    k.kt = static_cast<std::int32_t>((p.C_per_group() + Policy::block_c - 1) / Policy::block_c);
    k.conv_groups = static_cast<std::int32_t>(p.groups), k.Kg = static_cast<std::int32_t>(p.K_per_group());
    k.group_passes = static_cast<std::int32_t>((p.K_per_group() + Policy::block_n - 1) / Policy::block_n);
    k.npass = k.conv_groups * k.group_passes;
  }

  /// @brief Parameters of the direct tiles (wgmma_conv_params::direct: x read by TMA from NCHW or from a copy
  /// of it (x_copied), the A
  /// fragments loaded into registers by the consumers) and their dynamic shared memory (as make_params:
  /// the resident filter when it fits, operand stages, then `tail_bytes`), if they serve p: Q <= block_m
  /// output columns whose box row fits TMA's 256 columns (rp below), and either (tf32 only) a 1x1 filter
  /// without padding at stride 1 or 2 with x rows whose TMA strides are multiples of 16 bytes (H * W and
  /// stride * W multiples of 4; at stride 1 with W % 4 != 0 the tiles are those of the image viewed as H' x
  /// W', viewed_width, and k's shape is the view's), or (direct_taps; any math: tf32, 3xTF32, bf16, fp16) a dilated filter (with
  /// `any_filter`, any filter: the fallback where no other tiles fit; any R x S, padding and dilation) at
  /// stride 1 with groups 1 under the cooperative policy: a stage per filter
  /// row, its box the tile's rows shifted by the row's taps and wide enough for the row's S taps, rp >=
  /// col_shift + (S - 1) dil_w + Q; x copied (x_copied) with a pitch of W rounded up to 4 where W % 4 != 0
  /// (x_pitch), and under bf16 / fp16 always, as pairs of channels converted to the math's type. Tiles of
  /// tile_rows = ceil(P / tiles_p) output rows, tiles_p = ceil(P / floor(block_m / Q)); stages of `group`
  /// slices of block_c channels (the most, up to wgmma_max_group, dividing ceil(C / block_c) for which 4
  /// streamed stages fit; direct_taps outside 3xTF32: 3), so the packed filter is pack_filter's as for the other tiles; a slice's box
  /// holds box_c entries per pixel (8 fp32 channels, or 8 pairs of 16-bit channels). Not served beyond
  /// those: direct_taps filters of more than 4096 rows, x's copy of 2^56 bytes or more, a packed filter of
  /// 2^40 bytes or more. p must be valid.
  static bool make_direct_params(const conv2d_problem& p, std::size_t tail_bytes, std::size_t max_smem,
                                 wgmma_conv_params& k, std::size_t& smem_bytes, bool any_filter = false) {
    if (cannot_implement(p)) return false;
    if (any_filter && !dilated(p) && p.R * p.S == 1) return false;  // (1x1: the other tiles serve it)
    const bool taps = dilated(p) || any_filter;
    if (!taps && (!Policy::is_tf32 || x3 || p.R != 1 || p.S != 1 || p.pad_h != 0 || p.pad_w != 0)) return false;
    if (taps && (p.stride_h != 1 || p.groups != 1 || Policy::pingpong)) return false;
    // a 1x1 filter at stride 1 without padding reads each output pixel's own input pixel, so any H' x W' =
    // H x W view of the image is the same GEMM over the same memory (x NCHW, y N x P x Q): where W % 4 != 0
    // (TMA's row stride) but H * W % 4 == 0, the tiles see the image as viewed_width's H' x W'
    if (!taps && p.stride_h == 1 && p.stride_w == 1 && p.W % 4 != 0 && (p.H * p.W) % 4 == 0) {
      const std::int64_t w2 = viewed_width(p.H * p.W);  // (>= 4: W' = 4 always qualifies)
      if (p.H * p.W / w2 >= (std::int64_t(1) << 30)) return false;  // (k's H' is 32-bit, as validate's H)
      conv2d_problem v = p;
      v.H = p.H * p.W / w2, v.W = w2;
      return make_direct_params(v, tail_bytes, max_smem, k, smem_bytes, any_filter);
    }
    const std::int64_t P = p.P(), Q = p.Q(), s = p.stride_h;
    if (Q > Policy::block_m || (!taps && ((p.H * p.W) % 4 != 0 || (s * p.W) % 4 != 0))) return false;
    // the box's columns: 1x1, the s * (Q - 1) + 1 read; taps, the row's S taps' reach from the 16-byte
    // aligned column -(pad_w + shift); rounded up to 8 mod 16 floats (a box with an element stride of 2,
    // so that only the columns read land, stopped the kernel with an illegal address on the H200)
    const std::int64_t dw = p.S > 1 ? p.dil_w : 1, shift = taps ? (4 - p.pad_w % 4) % 4 : 0;
    const std::int64_t cols = taps ? shift + (p.S - 1) * dw + Q : s * (Q - 1) + 1;
    const std::int64_t rp = (cols + 7) / 16 * 16 + 8;
    if (rp > 256) return false;
    const std::int64_t per = Policy::block_m / Q, tiles_p = (P + per - 1) / per, rows = (P + tiles_p - 1) / tiles_p;
    set_shape(p, k);
    // a stage's packed filter: group slices' taps of one filter row (the whole slice for 1x1), of each part
    // (3xTF32: big and small)
    const std::int64_t tap_b = std::int64_t(Policy::parts) * Policy::block_n * Policy::block_c * Policy::filter_elem_bytes;
    auto a_bytes = [&](int g) { return (rp * box_c * g * rows * 4 + 127) / 128 * 128; };
    // the most slices per stage for which 4 streamed stages fit (direct_taps outside 3xTF32: 3; each stage of
    // a filter row ends in a wait for all its wgmmas, whose A fragments sit in registers, so fewer, larger
    // stages drain the tensor cores less often: n32 c960 33x33 d24 in TF32, 1 slice in 7 stages 0.947 ms, 2
    // slices in 3 stages 0.722 ms on the H100, bench/NOTES.md; 3xTF32's stages wait per m64 row and half
    // anyway, not measured)
    const std::int64_t fit = taps && !x3 ? 3 : 4;
    int g = wgmma_max_group;
    for (; g > 1; --g)
      if (k.kt % g == 0 &&
          fit * (g * p.S * tap_b + a_bytes(g)) + static_cast<std::int64_t>(tail_bytes) <= static_cast<std::int64_t>(max_smem))
        break;
    // (a stage per filter row: kt = stages x R in 32 bits; the time model counts the live rows row by row)
    if (taps && (p.R > 4096 || !convred::detail::product_below({k.kt / g, p.R}, std::int64_t(1) << 30))) return false;
    k.group = g, k.kt = k.kt / g * static_cast<std::int32_t>(taps ? p.R : 1);
    const std::int64_t b_bytes = tap_b * g * p.S, a = a_bytes(g), slices = std::int64_t(k.kt) * k.npass;
    if (!convred::detail::product_below({slices, b_bytes}, std::int64_t(1) << 40) || b_bytes + a >= (std::int64_t(1) << 20))
      return false;
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
    k.raw_copy_bytes = static_cast<std::int32_t>(rp * box_c * g * rows * 4), k.raw_bytes = 0;
    k.part_bytes = static_cast<std::int32_t>(a);
    k.b_bytes = static_cast<std::int32_t>(b_bytes), k.stage_bytes = static_cast<std::int32_t>(stage);
    k.x_pitch = k.W;
    if (taps) {
      k.direct_taps = 1, k.col_shift = static_cast<std::int32_t>(shift);
      k.dil_h = static_cast<std::int32_t>(p.R > 1 ? p.dil_h : 1), k.dil_w = static_cast<std::int32_t>(dw);
      k.x_pitch = (k.W + 3) / 4 * 4;
      // x's copy (x_copied; xpack_bytes) below 2^56 bytes, as the flat tiles' packed x
      if (x_copied(k) && !convred::detail::product_below({p.N, x_copy_channels(k), p.H, k.x_pitch, 4}, std::int64_t(1) << 56))
        return false;
    }
    smem_bytes = static_cast<std::size_t>(smem);
    return true;
  }

  /// The width W' of the H' x W' view of an image of `pixels` = H x W pixels that the direct tiles of a 1x1
  /// filter at stride 1 without padding take where W % 4 != 0 (make_direct_params): a multiple of 4 that
  /// divides `pixels`, at most block_m and with a box row of at most 256 columns, with the fewest tiles per
  /// image (ceil(H' / floor(block_m / W'))), then the smallest box (rp x rows floats per channel: the bytes
  /// each stage's TMA copy moves); 0 where none (pixels % 4 != 0). A 14 x 14 image: 1 x 196 under the
  /// cooperative policy (one 256-pixel tile, a box of 200 floats per channel), 7 x 28 under ping-pong (two
  /// tiles of 4 and 3 rows).
  static std::int64_t viewed_width(std::int64_t pixels) {
    std::int64_t best = 0, best_tiles = 0, best_box = 0;
    for (std::int64_t w = 4; w <= Policy::block_m && w <= pixels; w += 4) {
      const std::int64_t rp = (w + 7) / 16 * 16 + 8;
      if (pixels % w != 0 || rp > 256) continue;
      const std::int64_t h = pixels / w, per = Policy::block_m / w, tiles = (h + per - 1) / per, rows = (h + tiles - 1) / tiles;
      if (best == 0 || tiles < best_tiles || (tiles == best_tiles && rp * rows < best_box))
        best = w, best_tiles = tiles, best_box = rp * rows;
    }
    return best;
  }

  /// Whether direct_taps tiles of parameters k read a copy of x (in the workspace's packed-x region,
  /// written before the kernel) rather than x: where W % 4 != 0 (TMA row strides are 16-byte multiples: rows
  /// of x_pitch floats), and always under bf16 / fp16 (x_copy_channels pairs of channels converted to the
  /// math's type, kernel::pack_x_pairs_kernel, rows of x_pitch pairs).
  static bool x_copied(const wgmma_conv_params& k) { return k.direct_taps && (!Policy::is_tf32 || k.x_pitch != k.W); }

  /// The channel entries of x's copy (x_copied): C fp32 channels, or ceil(C / 2) pairs of 16-bit channels
  /// (the last pair's second half zero when C is odd).
  static std::int64_t x_copy_channels(const wgmma_conv_params& k) { return Policy::is_tf32 ? k.C : (k.C + 1) / 2; }

  /// Bytes of the packed x of flat parameters k (kernel::pack_x_kernel's output: per tile and stage, the
  /// stage's planes, parts * part_bytes), or of direct_taps tiles' copy of x (x_copied: N x
  /// x_copy_channels x H rows of x_pitch 32-bit entries); 0 otherwise.
  static std::size_t xpack_bytes(const wgmma_conv_params& k) {
    if (x_copied(k))
      return static_cast<std::size_t>(k.N) * static_cast<std::size_t>(x_copy_channels(k)) * static_cast<std::size_t>(k.H) *
             static_cast<std::size_t>(k.x_pitch) * 4;
    if (!k.flat) return 0;
    return static_cast<std::size_t>(k.tiles) * static_cast<std::size_t>(k.x_stages()) * static_cast<std::size_t>(Policy::parts) *
           static_cast<std::size_t>(k.part_bytes);
  }

  /// Bytes after the packed filter's slices: the non-finite flag (a 32-bit word at
  /// wgmma_conv_params::filter_flag_offset), padded to 256 so that what a workspace holds after the packed
  /// filter (the packed x, x's copy, partial sums) keeps the 256-byte alignment it had without the flag
  /// (the slices are multiples of 4096 bytes; bulk copies and TMA boxes read those regions).
  static constexpr std::size_t filter_flag_bytes = 256;

  /// Bytes of the packed filter (device::pack_filter) for parameters k from make_params: npass * kt
  /// slices of b_bytes, then filter_flag_bytes (the non-finite flag; the same offset for every tiling of
  /// a problem).
  static std::size_t packed_bytes(const wgmma_conv_params& k) {
    return static_cast<std::size_t>(k.filter_flag_offset()) + filter_flag_bytes;
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
};

}  // namespace convred::plan
