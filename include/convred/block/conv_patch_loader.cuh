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
/// - copy_patch: one 4D TMA box of (rp, bh, block_c, 1) fp32 elements of x at (w0, h0, c0, n) into a raw
///   buffer, laid out [channel][row][column]. Coordinates outside x read as zeros: the conv's zero padding
///   and the channel tail. w0 is a multiple of 4 (TMA reads rows from 16-byte aligned addresses).
/// - copy_filter: the stage's packed filter slice (b_bytes, one bulk copy; device::pack_filter's layout).
/// - to_planes: the raw patch rewritten, converted once to the math's operand type, as `block_c / E`
///   planes of E channels (E = 16 bytes / element: 4 tf32 or 8 bf16/fp16), each plane pixel-major with a
///   16-byte pixel pitch: plane j holds pixel (row, col) of the patch at byte ((row * pw) + col) * 16, channels
///   jE .. jE+E-1 inside it. That is wgmma's K-major no-swizzle layout for any 8 consecutive pixels (one core
///   matrix, 128 contiguous bytes), so the A operand of filter tap (r, s) for an output row segment is the
///   same planes read from a descriptor start shifted by (r * pw + s) * 16 bytes: each input element is
///   converted and stored once per tile, never copied R*S times (no im2col). For 3xTF32 the small parts
///   follow the big parts as a second set of planes (warp::split_tf32).
template <class Policy>
struct conv_patch_loader {
  static constexpr int BC = Policy::block_c;                ///< input channels per stage
  static constexpr int E = 16 / Policy::filter_elem_bytes;  ///< channels per 16-byte plane pixel
  static constexpr bool is_tf32 = Policy::is_tf32;          ///< tf32 / tf32x3 operands (else 16-bit pairs)
  static constexpr bool x3 = Policy::parts == 2;            ///< 3xTF32: big and small planes

  /// Copies channels [c0, c0 + block_c) of the patch at (n, h0, w0) into `raw` (128-byte aligned); `bar`
  /// (armed here with the bytes) completes when they have landed.
  __device__ static void copy_patch(unsigned char* raw, std::uint64_t* bar, const void* x_map,
                                    const wgmma_conv_params& p, int n, int h0, int w0, int c0) {
#ifdef CONVRED_EXP_NOLOAD  // diagnosis build (wrong results): no copies, the consumers' time alone
    convred::detail::mbarrier_arrive(bar);
#else
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(p.raw_copy_bytes));
    convred::detail::tma_load_4d(raw, x_map, w0, h0, c0, n, bar);
#endif
  }

  /// Copies stage `kt`'s packed filter slice into `b` (16-byte aligned); `bar` is armed with its bytes and
  /// this thread's arrival.
  __device__ static void copy_filter(unsigned char* b, std::uint64_t* bar, const wgmma_conv_params& p, int kt) {
#ifdef CONVRED_EXP_NOLOAD
    convred::detail::mbarrier_arrive(bar);
    return;
#endif
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(p.b_bytes));
    const auto* src = static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(kt) * p.b_bytes;
    convred::detail::bulk_copy_g2s(b, src, static_cast<std::uint32_t>(p.b_bytes), bar);
  }

  /// Copies the whole packed filter (kt slices of b_bytes, resident_bytes in all, < 2^20) into `b` (128-byte
  /// aligned) for the block's lifetime; `bar` is armed with its bytes and this thread's arrival.
  __device__ static void copy_filter_resident(unsigned char* b, std::uint64_t* bar, const wgmma_conv_params& p) {
    convred::detail::mbarrier_arrive_expect_tx(bar, static_cast<std::uint32_t>(p.kt) * static_cast<std::uint32_t>(p.b_bytes));
    for (int kt = 0; kt < p.kt; ++kt)
      convred::detail::bulk_copy_g2s(b + static_cast<std::int64_t>(kt) * p.b_bytes,
                                     static_cast<const unsigned char*>(p.filter) + static_cast<std::int64_t>(kt) * p.b_bytes,
                                     static_cast<std::uint32_t>(p.b_bytes), bar);
  }

  /// Rewrites the raw patch as planes (see the struct), work shared by `nthreads` threads of which this is
  /// `t`; ends with the fence that makes the planes visible to wgmma (the async proxy). Each thread loads
  /// the E channels of `batch` plane pixels before converting and storing them, so that their
  /// shared-memory latencies overlap.
  __device__ static void to_planes(const float* __restrict__ raw, unsigned char* __restrict__ planes,
                                   const wgmma_conv_params& p, int t, int nthreads) {
#if defined(CONVRED_EXP_NOTRANSFORM) || defined(CONVRED_EXP_NOLOAD)
    return;  // diagnosis builds (wrong results)
#endif
    constexpr int batch = 3;
    const int items = (BC / E) * p.ph * p.pw, cstride = p.bh * p.rp;
    for (int it0 = t; it0 < items; it0 += batch * nthreads) {
      float v[batch][E];
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int it = it0 + u * nthreads;
        std::int32_t j, pix, row, col;
        p.div_pix.divmod(it < items ? it : 0, j, pix);
        p.div_pw.divmod(pix, row, col);
        const float* src = raw + (j * E * p.bh + row) * p.rp + col + p.col_shift;
#pragma unroll
        for (int e = 0; e < E; ++e) v[u][e] = src[e * cstride];
      }
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int it = it0 + u * nthreads;
        if (it < items) store(v[u], planes + static_cast<std::int64_t>(it) * 16, p.part_bytes);
      }
    }
    warpgroup::fence_proxy_async();
  }

 private:
  /// Converts the E channels of one plane pixel and stores them (16 bytes at dst; for 3xTF32 the small
  /// parts 16 bytes at dst + part_bytes).
  __device__ static void store(const float (&v)[E], unsigned char* dst, int part_bytes) {
    if constexpr (is_tf32) {
      std::uint32_t b[4], s[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (x3)
          warp::split_tf32(v[e], b[e], s[e]);
        else
          b[e] = warp::to_tf32(v[e]);
      }
      *reinterpret_cast<uint4*>(dst) = make_uint4(b[0], b[1], b[2], b[3]);
      if constexpr (x3) *reinterpret_cast<uint4*>(dst + part_bytes) = make_uint4(s[0], s[1], s[2], s[3]);
    } else if constexpr (std::is_same_v<typename Policy::math, math::bf16>) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(warp::pack_bf16x2(v[0], v[1]), warp::pack_bf16x2(v[2], v[3]),
                                                  warp::pack_bf16x2(v[4], v[5]), warp::pack_bf16x2(v[6], v[7]));
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(warp::pack_f16x2(v[0], v[1]), warp::pack_f16x2(v[2], v[3]),
                                                  warp::pack_f16x2(v[4], v[5]), warp::pack_f16x2(v[6], v[7]));
    }
  }
};

}  // namespace convred::block
