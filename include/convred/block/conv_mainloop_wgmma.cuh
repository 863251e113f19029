/// @file block/conv_mainloop_wgmma.cuh
/// @brief Block-level Hopper (sm_90a) implicit-GEMM conv mainloop: wgmma with A fragments read from the
/// staged input patch and B (the packed filter) from shared-memory descriptors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../kernel/params.cuh"
#include "../policy.cuh"
#include "../warp/mma.cuh"
#include "../warpgroup/wgmma.cuh"

namespace convred::block {

/// @brief Accumulates one stage of a 256-pixel x 128-channel tile on tensor cores with wgmma.
///
/// Warpgroup g (threads 128g..128g+127) owns tile pixels 128g..128g+127 as two m64 tiles (acc d[0], d[1],
/// 64 fp32 each: the wgmma D fragment, see warpgroup/wgmma.cuh). For every filter tap (r,s) of a stage,
/// each thread reads its A fragment straight from the staged input patch at offset (r,s) from its pixels
/// (implicit im2col: GEMM_K is ordered (r, s, c) within a stage) and converts it on chip: TF32 with
/// round-to-nearest-even (`cvt.rn.tf32.f32`), the 3xTF32 big/small split, or bf16/fp16 pairs. Fragments
/// are double-buffered in registers: those of tap i+1 are read while the wgmmas of tap i run (at most
/// one wgmma batch of this warpgroup is in flight when run_stage returns).
///
/// Shape of the accumulators for block::reduce_epilogue: acc[i][j] with i = 2*mtile + half (TM = 4 pixel
/// rows per thread: 16w + g and 16w + g + 8 of each m64 tile) and j = 2*n8 + e (TN = 32 channels:
/// 8*n8 + 2t + e); lanes 4g..4g+3 share pixels (`lanes_per_pixel` = 4), one warp per pixel.
template <class Policy>
struct conv_mainloop_wgmma {
  using V = float;                                   ///< accumulator type
  using math_t = typename Policy::math;              ///< precision tag
  static constexpr int BM = Policy::block_m;         ///< pixels per tile (256)
  static constexpr int NT = Policy::consumer_threads;  ///< consumer threads (256)
  static constexpr int BC = Policy::block_c;         ///< input channels per stage (the wgmma depth)
  static constexpr int TM = 4;                       ///< accumulator pixel rows per thread
  static constexpr int TN = 32;                      ///< accumulator channels per thread
  static constexpr int lanes_per_pixel = 4;          ///< lanes 4g..4g+3 hold the same pixels
  static constexpr int warps_per_pixel = 1;          ///< one warp holds all 128 channels of its pixels
  static constexpr bool is_tf32 = Policy::is_tf32;   ///< tf32/tf32x3 (one fp32 per k) or 16-bit pairs
  static constexpr bool x3 = Policy::parts == 2;     ///< 3xTF32: big and small parts
  /// bytes of one filter tap's 128 x BC slice in shared memory
  static constexpr std::uint32_t tap_bytes = 128u * BC * Policy::filter_elem_bytes;

  /// A fragments of both m64 tiles for one tap: a (tf32 / bf16 / fp16 or the 3xTF32 big part) and s
  /// (the 3xTF32 small part; unused otherwise).
  struct frags {
    std::uint32_t a[2][4];  ///< a[mtile][register]
    std::uint32_t s[2][4];  ///< 3xTF32 small parts
  };

  int off[2][2];  ///< patch offsets (floats) of this thread's fragment pixels [mtile][half], channel included

  /// Lane in the warp (lane = 4g + t).
  __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
  /// Warp index within its warpgroup (0..3).
  __device__ static int warp_in_group() { return (static_cast<int>(threadIdx.x) / 32) % 4; }
  /// Index of the warp among those sharing its pixels (always 0).
  __device__ static int warp_n() { return 0; }
  /// Tile pixel of accumulator row i.
  __device__ static int tile_m(int i) {
    return (static_cast<int>(threadIdx.x) / 128) * 128 + (i / 2) * 64 + 16 * warp_in_group() + lane() / 4 + 8 * (i % 2);
  }
  /// Output channel of accumulator column j.
  __device__ static int tile_n(int j) { return 8 * (j / 2) + 2 * (lane() % 4) + (j % 2); }

  /// Precomputes this thread's fragment offsets in the patch for the tile shape in `p`.
  __device__ explicit conv_mainloop_wgmma(const kernel::wgmma_conv_params& p) {
    const int t = lane() % 4, ch = is_tf32 ? t : 2 * t, tw_mask = (1 << p.tw_log2) - 1;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = tile_m(i);
      off[i / 2][i % 2] = ch * p.cs + (m >> p.tw_log2) * p.rp + (m & tw_mask) + p.col_shift;
    }
  }

  /// Keeps the compiler from moving accesses of r across the wgmma fences and waits (no instruction).
  __device__ static void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
  /// As fence_operand(float&) for a fragment register.
  __device__ static void fence_operand(std::uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
  /// fence_operand on every accumulator.
  __device__ static void fence_acc(float (&d)[2][64]) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 64; ++i) fence_operand(d[m][i]);
  }

  /// fp32 -> TF32 bit pattern, round to nearest even (sm_90: one F2FP instruction).
  __device__ static std::uint32_t tf32_rn(float v) {
#if CONVRED_HAS_WGMMA
    std::uint32_t r;
    asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return r;
#else
    return __float_as_uint(v);
#endif
  }

  /// Reads and converts the fragments of the tap at patch offset `tap_off` (floats) into f.
  __device__ void load(const float* patch, int tap_off, int cs, frags& f) const {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      const float* p0 = patch + off[mt][0] + tap_off;
      const float* p1 = patch + off[mt][1] + tap_off;
      if constexpr (is_tf32) {
        const float v[4] = {p0[0], p1[0], p0[4 * cs], p1[4 * cs]};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          f.a[mt][e] = tf32_rn(v[e]);
          if constexpr (x3) f.s[mt][e] = tf32_rn(v[e] - __uint_as_float(f.a[mt][e]));
        }
      } else if constexpr (std::is_same_v<math_t, math::bf16>) {
        f.a[mt][0] = warp::pack_bf16x2(p0[0], p0[cs]);
        f.a[mt][1] = warp::pack_bf16x2(p1[0], p1[cs]);
        f.a[mt][2] = warp::pack_bf16x2(p0[8 * cs], p0[9 * cs]);
        f.a[mt][3] = warp::pack_bf16x2(p1[8 * cs], p1[9 * cs]);
      } else {
        f.a[mt][0] = warp::pack_f16x2(p0[0], p0[cs]);
        f.a[mt][1] = warp::pack_f16x2(p1[0], p1[cs]);
        f.a[mt][2] = warp::pack_f16x2(p0[8 * cs], p0[9 * cs]);
        f.a[mt][3] = warp::pack_f16x2(p1[8 * cs], p1[9 * cs]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        fence_operand(f.a[mt][e]);
        if constexpr (x3) fence_operand(f.s[mt][e]);
      }
    }
  }

  /// d += A * B for one m64 tile (the math's wgmma).
  __device__ static void mma(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc) {
    if constexpr (is_tf32) {
      warpgroup::mma_tf32_m64n128k8(d, a, desc);
    } else if constexpr (std::is_same_v<math_t, math::bf16>) {
      warpgroup::mma_bf16_m64n128k16(d, a, desc);
    } else {
      warpgroup::mma_f16_m64n128k16(d, a, desc);
    }
  }

  /// Issues, commits and (leaving this batch in flight) waits for the previous batch of one tap, then
  /// reads the next tap's fragments into the other buffer.
  template <int B, class Release>
  __device__ void step(float (&d)[2][64], frags (&f)[2], std::uint64_t desc, std::uint64_t desc_small, bool more,
                       const float* patch, int next_off, int cs, Release& release) const {
    warpgroup::fence();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      if constexpr (x3) {  // small terms first (CUTLASS's 3xTF32 order)
        mma(d[mt], f[B].s[mt], desc);
        mma(d[mt], f[B].a[mt], desc_small);
      }
      mma(d[mt], f[B].a[mt], desc);
    }
    warpgroup::commit();
    warpgroup::wait<1>();
    release();  // every batch before this one has completed
    if (more) load(patch, next_off, cs, f[B ^ 1]);
  }

  /// Accumulates one staged (filter slice, patch) pair into d. `parity` selects the fragment buffer of
  /// the next tap and persists across stages (the last batch of a stage may still be in flight).
  /// `release()` is called after each tap's wait, when every earlier batch (the previous stage's last
  /// one included) has completed: the caller frees the previous stage's slot on its first call.
  template <class Release>
  __device__ void run_stage(const unsigned char* stage, float (&d)[2][64], frags (&f)[2], int& parity,
                            const kernel::wgmma_conv_params& p, Release&& release) const {
    const float* patch = reinterpret_cast<const float*>(stage + p.b_bytes);
    const std::uint64_t desc0 = warpgroup::make_smem_desc(stage, 128, 256);
    const std::uint64_t desc_small0 = desc0 + ((static_cast<std::uint64_t>(p.R * p.S) * tap_bytes) >> 4);
    const int taps = p.R * p.S, cs = p.cs;
    if (parity)
      load(patch, 0, cs, f[1]);
    else
      load(patch, 0, cs, f[0]);
    int r = 0, s = 0;
    for (int tap = 0; tap < taps; ++tap) {
      if (++s == p.S) s = 0, ++r;
      const bool more = tap + 1 < taps;
      const int next_off = r * p.rp + s;
      const std::uint64_t adv = (static_cast<std::uint64_t>(tap) * tap_bytes) >> 4;
      if (parity)
        step<1>(d, f, desc0 + adv, desc_small0 + adv, more, patch, next_off, cs, release);
      else
        step<0>(d, f, desc0 + adv, desc_small0 + adv, more, patch, next_off, cs, release);
      parity ^= 1;
    }
  }
};

}  // namespace convred::block
