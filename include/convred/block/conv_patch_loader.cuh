/// @file block/conv_patch_loader.cuh
/// @brief Producer side of the packed-filter wgmma kernel: the asynchronous copies of a stage (TMA box of
/// the input patch, bulk copy of the packed filter slice) and the transform of the copied patch into the
/// pixel-major "planes" that the wgmma A descriptors read.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../detail/tma.cuh"
#include "conv_mainloop_wgmma.cuh"
#include "../warp/mma.cuh"
#include "../warpgroup/wgmma.cuh"

namespace convred::block {

/// @brief The producer's three jobs for one stage of `block_c` input channels of a tile:
/// - copy_patch: one 4D TMA box of (rp, bh, raw_c, 1) fp32 elements of x at (w0, h0, c0, n) into a raw
///   buffer, laid out [channel][row][column] (raw_c = 8 channels; a stage is block_c / raw_c boxes). Coordinates outside x read as zeros: the conv's zero padding
///   and the channel tail. w0 is a multiple of 4 (TMA reads rows from 16-byte aligned addresses).
/// - copy_filter: the stage's packed filter slice (b_bytes, one bulk copy; device::pack_filter's layout:
///   slice pass * kt + kt_i for channel pass `pass` and stage kt_i of it).
/// - to_planes: each raw buffer rewritten, converted once to the math's operand type, as `raw_c / E`
///   of the stage's `block_c / E` planes of E channels (E = 16 bytes / element: 4 tf32 or 8 bf16/fp16), each plane pixel-major with a
///   16-byte pixel pitch: plane j holds pixel (row, col) of the patch at byte ((row * pw) + col) * 16, channels
///   jE .. jE+E-1 inside it. That is wgmma's K-major no-swizzle layout for any 8 consecutive pixels (one core
///   matrix, 128 contiguous bytes), so the A operand of filter tap (r, s) for an output row segment is the
///   same planes read from a descriptor start shifted by (r * pw + s) * 16 bytes: each input element is
///   converted and stored once per tile, never copied R*S times (no im2col). For 3xTF32 the small parts
///   follow the big parts as a second set of planes (warp::split_tf32).
template <class Policy>
struct conv_patch_loader {
  static constexpr int RC = Policy::raw_c;                  ///< input channels per raw buffer
  static constexpr int E = 16 / Policy::filter_elem_bytes;  ///< channels per 16-byte plane pixel
  static constexpr bool is_tf32 = Policy::is_tf32;          ///< tf32 / tf32x3 operands (else 16-bit pairs)
  static constexpr bool x3 = Policy::parts == 2;            ///< 3xTF32: big and small planes

  /// Copies channels [c0, c0 + raw_c) of the patch at (n, h0, w0) into `raw` (128-byte aligned); `bar`
  /// (armed here with the bytes) completes when they have landed.
  __device__ static void copy_patch(unsigned char* raw, std::uint64_t* bar, const void* x_map,
                                    const wgmma_conv_params& p, int n, int h0, int w0, int c0) {
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(p.raw_copy_bytes));
    convred::detail::tma_load_4d(raw, x_map, w0, h0, c0, n, bar);
  }

  /// Copies packed filter slice `slice` (pass * kt + stage of the pass) into `b` (16-byte aligned); `bar` is
  /// armed with its bytes and this thread's arrival.
  __device__ static void copy_filter(unsigned char* b, std::uint64_t* bar, const wgmma_conv_params& p, int slice) {
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(p.b_bytes));
    const auto* src = static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(slice) * p.b_bytes;
    convred::detail::bulk_copy_g2s(b, src, static_cast<std::uint32_t>(p.b_bytes), bar);
  }

  /// Copies the whole packed filter (npass * kt slices of b_bytes, resident_bytes in all, < 2^20) into `b`
  /// (128-byte aligned) for the block's lifetime; `bar` is armed with its bytes and this thread's arrival.
  __device__ static void copy_filter_resident(unsigned char* b, std::uint64_t* bar, const wgmma_conv_params& p) {
    const int slices = p.npass * p.kt;
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(slices) * static_cast<std::uint32_t>(p.b_bytes));
    for (int i = 0; i < slices; ++i)
      convred::detail::bulk_copy_g2s(b + static_cast<std::int64_t>(i) * p.b_bytes,
                                     static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(i) * p.b_bytes,
                                     static_cast<std::uint32_t>(p.b_bytes), bar);
  }

  /// Flat tiles (wgmma_conv_params::flat): copies the stage of packed filter slice `slice` (pass * kt +
  /// stage of the pass; none when the filter is resident) and the stage's planes of flat tile `tile` (one
  /// bulk copy of parts * part_bytes: the packed x holds them in the stage's layout) into `stage` (16-byte
  /// aligned); `bar` is armed with all their bytes and this thread's arrival, so it completes when they
  /// have landed.
  __device__ static void copy_flat(unsigned char* stage, std::uint64_t* bar, const wgmma_conv_params& p, int slice,
                                   std::int64_t tile) {
    const std::uint32_t planes = static_cast<std::uint32_t>(Policy::parts) * static_cast<std::uint32_t>(p.part_bytes);
    const std::uint32_t filter = p.resident_bytes ? 0u : static_cast<std::uint32_t>(p.b_bytes);
    convred::detail::mbarrier_arrive_expect_tx(bar, filter + planes);
    if (filter)
      convred::detail::bulk_copy_g2s(stage, static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(slice) * p.b_bytes,
                                     filter, bar);
    const std::int64_t block = tile * p.x_stages() + p.x_stage(slice);  // (tile, stage) block of the packed x
    convred::detail::bulk_copy_g2s(stage + p.a_offset, static_cast<const unsigned char*>(p.xpack) + block * planes, planes, bar);
  }

  /// Direct tiles (wgmma_conv_params::direct): copies the stage of packed filter slice `slice` (none when
  /// the filter is resident) and one TMA box of x (the direct tensor map: rp columns from column 0, 8 *
  /// group channels, or under bf16 / fp16 8 * group channel pairs of x's copy, from the stage's first,
  /// tile_rows rows from output row p0, image n) into `stage`
  /// (128-byte aligned); `bar` is armed with all their bytes and this thread's arrival. direct_taps: the
  /// stage's filter row r = stage_row(slice) of its group slices (one bulk copy of S taps per slice and
  /// part, laid out [slice][part][tap]: 3xTF32's small part's S taps after the big part's), and the box
  /// from input row p0 + r dil_h - pad_h, column -(pad_w + col_shift).
  __device__ static void copy_direct(unsigned char* stage, std::uint64_t* bar, const void* x_map, const wgmma_conv_params& p,
                                     int slice, int n, int p0) {
    const std::uint32_t filter = p.resident_bytes ? 0u : static_cast<std::uint32_t>(p.b_bytes);
    convred::detail::mbarrier_arrive_expect_tx(bar, filter + static_cast<std::uint32_t>(p.raw_copy_bytes));
    const auto* packed = static_cast<const unsigned char*>(p.filter);
    const int R = p.row_stages(), r = p.stage_row(slice);
    if (filter && R == 1) {
      convred::detail::bulk_copy_g2s(stage, packed + static_cast<std::int64_t>(slice) * p.b_bytes, filter, bar);
    } else if (filter) {  // slice j's taps (r, 0..S-1) of each part: of its parts x R * S taps, from the channel stage's first slice
      const std::uint32_t row = filter / p.group, part_row = row / Policy::parts;  // S taps of every part, of one
      const std::int64_t first = static_cast<std::int64_t>(slice / R) * R * p.b_bytes + static_cast<std::int64_t>(r) * part_row;
      for (int j = 0; j < p.group; ++j)
#pragma unroll
        for (int q = 0; q < Policy::parts; ++q)
          convred::detail::bulk_copy_g2s(stage + j * row + q * part_row,
                                         packed + first + static_cast<std::int64_t>(j) * R * row + static_cast<std::int64_t>(q) * R * part_row,
                                         part_row, bar);
    }
    // the stage's first entry of x (or of its copy): a channel, or a 16-bit channel pair (8 per slice)
    const int c0 = p.x_stage(slice) / R * plan::wgmma_params<Policy>::box_c * p.group;
    if (p.direct_taps)
      convred::detail::tma_load_4d(stage + p.a_offset, x_map, -(p.pad_w + p.col_shift), c0, p0 + r * p.dil_h - p.pad_h, n,
                                   bar);
    else
      convred::detail::tma_load_4d(stage + p.a_offset, x_map, 0, c0, p0, n, bar);
  }

  /// Rewrites a raw buffer (raw_c channels) as its raw_c / E planes, starting at `planes` (the stage's
  /// planes, offset by the buffer's first plane), work shared by `nthreads` threads of which this is
  /// `t`; ends with the fence that makes the planes visible to wgmma (the async proxy). One work item is
  /// 4 raw columns of one patch row for the E channels of one plane: E 16-byte loads (one per channel),
  /// converted and transposed in registers into the 4 pixels' 16-byte plane entries (those inside the
  /// patch are stored). Lanes store their 4 pixels in a lane-dependent rotation, so that the 8 lanes of a
  /// quarter-warp write 8 distinct 16-byte bank groups (no shared-memory bank conflict).
  __device__ static void to_planes(const float* __restrict__ raw, unsigned char* __restrict__ planes,
                                   const wgmma_conv_params& p, int t, int nthreads) {
    constexpr int W = x3 ? 8 : 4;  // 32-bit words per pixel: the 16-byte entry (and 3xTF32's small parts)
    const int quads = p.rp / 4, items = (RC / E) * p.ph * quads, cstride = p.bh * p.rp;
    for (int it = t; it < items; it += nthreads) {
      std::int32_t jr, q, j, row;  // jr = j * ph + row: plane j, patch row; q: the 4 raw columns 4q..4q+3
      p.div_quads.divmod(it, jr, q);
      p.div_ph.divmod(jr, j, row);
      const float* src = raw + (j * E * p.bh + row) * p.rp + 4 * q;
      float4 v[E];
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = *reinterpret_cast<const float4*>(src + e * cstride);
      std::uint32_t w[4][W];  // w[u]: the plane entry of raw column 4q + u
      pack(v, 0, w[0]), pack(v, 1, w[1]), pack(v, 2, w[2]), pack(v, 3, w[3]);
      store_quad(w, planes + static_cast<std::int64_t>(j) * p.plane_bytes + row * p.pw * 16, 4 * q - p.col_shift, p);
    }
    warpgroup::fence_proxy_async();
  }

  /// The gathering producer (`p.gather`: stride 2, or W not a multiple of 4): writes channels [c0, c0 +
  /// block_c) of the patch of the tile at output (p0, q0) of image n straight from x (NCHW fp32, global
  /// loads, zeros outside x and past C) as the stage's block_c / E planes, each holding phases_h x
  /// phases_w sub-patches of ph x pw pixels (see wgmma_conv_params::phase_pixels); work shared by
  /// `nthreads` threads of which this is `t`; ends with the fence that makes the planes visible to wgmma.
  /// One work item is 4 plane columns of one sub-patch row for the E channels of one plane (consecutive
  /// threads take consecutive columns: coalesced loads): its 4E loads issued together (one round trip to
  /// L2 per item), then each column converted into its 16-byte entry and stored.
  __device__ static void gather_planes(const float* __restrict__ x, unsigned char* __restrict__ planes,
                                       const wgmma_conv_params& p, std::int64_t n, int p0, int q0, int c0, int t,
                                       int nthreads) {
    constexpr int W = x3 ? 8 : 4;
    const int quads = (p.pw + 3) / 4, phases = p.phases_h * p.phases_w;
    const int items = (Policy::block_c / E) * phases * p.ph * quads;
    for (int it = t; it < items; it += nthreads) {
      const int q = it % quads, rest = it / quads, row = rest % p.ph, rest2 = rest / p.ph;
      const int phase = rest2 % phases, j = rest2 / phases;
      const int a = phase / p.phases_w, b = phase % p.phases_w;
      const int h = p.stride * (p0 + row) + a - p.pad_h;
      const int w0 = p.stride * (q0 + 4 * q) + b - p.pad_w;
      const bool row_in = h >= 0 && h < p.H;
      unsigned char* row_base = planes + static_cast<std::int64_t>(j) * p.plane_bytes +
                                (static_cast<std::int64_t>(phase) * p.phase_pixels + row * p.pw) * 16;
      // all 4E loads first (one L2 round trip per item, not one per column), then convert and store;
      // addresses: one pointer (channel c0 + jE, row h, column w0) plus constant channel / column steps
      const std::int64_t plane_stride = static_cast<std::int64_t>(p.H) * p.W;
      const int cj = c0 + j * E;
      const float* src = x + ((n * p.C + cj) * p.H + h) * static_cast<std::int64_t>(p.W) + w0;
      bool col_in[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int w = w0 + u * p.stride;
        col_in[u] = row_in && w >= 0 && w < p.W && 4 * q + u < p.pw;
      }
      float f[4][E];
#pragma unroll
      for (int e = 0; e < E; ++e)
#pragma unroll
        for (int u = 0; u < 4; ++u)
          f[u][e] = col_in[u] && cj + e < p.C ? src[e * plane_stride + u * p.stride] : 0.f;
#pragma unroll
      for (int u = 0; u < 4; ++u) {  // in column order (few registers; the stores' bank conflicts are cheap here)
        if (4 * q + u >= p.pw) continue;
        std::uint32_t wd[W];
        pack_entry(f[u], wd);
        unsigned char* dst = row_base + (4 * q + u) * 16;
        *reinterpret_cast<uint4*>(dst) = make_uint4(wd[0], wd[1], wd[2], wd[3]);
        if constexpr (x3) *reinterpret_cast<uint4*>(dst + p.part_bytes) = make_uint4(wd[4], wd[5], wd[6], wd[7]);
      }
    }
    warpgroup::fence_proxy_async();
  }

  /// The plane entry of one pixel from its E channel values f: W = 4 words (tf32, or bf16/fp16 pairs, round
  /// to nearest even), or 8 for 3xTF32 (big parts in words 0-3, small parts in 4-7).
  template <int W>
  __device__ static void pack_entry(const float (&f)[E], std::uint32_t (&w)[W]) {
    float4 v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = make_float4(f[e], 0.f, 0.f, 0.f);
    pack(v, 0, w);
  }

 private:
  /// Stores the plane entries w[u] of columns col0 + u (u = 0..3) of one plane row at row_base (those in
  /// [0, pw); 3xTF32: the small parts part_bytes further), in a lane-dependent rotation so that the 8
  /// lanes of a quarter-warp write 8 distinct 16-byte bank groups (no shared-memory bank conflict).
  template <int W>
  __device__ static void store_quad(std::uint32_t (&w)[4][W], unsigned char* row_base, int col0,
                                    const wgmma_conv_params& p) {
    const int rot = (static_cast<int>(threadIdx.x) >> 1) & 3;
    rotate<1>(w, rot & 1), rotate<2>(w, rot & 2);  // now w[s] is column col0 + ((s + rot) & 3)
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int col = col0 + ((s + rot) & 3);
      if (col < 0 || col >= p.pw) continue;
      unsigned char* dst = row_base + col * 16;
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[s][0], w[s][1], w[s][2], w[s][3]);
      if constexpr (x3) *reinterpret_cast<uint4*>(dst + p.part_bytes) = make_uint4(w[s][4], w[s][5], w[s][6], w[s][7]);
    }
  }

  /// Component u of a float4.
  __device__ static float comp(const float4& f, int u) { return u == 0 ? f.x : u == 1 ? f.y : u == 2 ? f.z : f.w; }

  /// The plane entry of column u (compile-time after unrolling) of the E loaded channels: tf32 words
  /// (3xTF32: big parts in words 0-3, small parts in 4-7) or bf16/fp16 pairs, round to nearest (even).
  template <int W>
  __device__ static void pack(const float4 (&v)[E], int u, std::uint32_t (&w)[W]) {
    if constexpr (is_tf32) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (x3)
          warp::split_tf32(comp(v[e], u), w[e], w[4 + e]);
        else
          w[e] = warp::to_tf32(comp(v[e], u));
      }
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (std::is_same_v<typename Policy::math, math::bf16>)
          w[e] = warp::pack_bf16x2(comp(v[2 * e], u), comp(v[2 * e + 1], u));
        else
          w[e] = warp::pack_f16x2(comp(v[2 * e], u), comp(v[2 * e + 1], u));
      }
    }
  }

  /// When `on`, rotates the 4 entries left by `by` (w[s] <- w[(s + by) & 3]), with selects (no local memory).
  template <int by, int W>
  __device__ static void rotate(std::uint32_t (&w)[4][W], bool on) {
    std::uint32_t r[4][W];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int i = 0; i < W; ++i) r[s][i] = on ? w[(s + by) & 3][i] : w[s][i];
#pragma unroll
    for (int s = 0; s < 4; ++s)
#pragma unroll
      for (int i = 0; i < W; ++i) w[s][i] = r[s][i];
  }
};

}  // namespace convred::block
