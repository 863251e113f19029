/// @file block/conv_mainloop_wgmma.cuh
/// @brief Block-level Hopper (sm_90a) implicit-GEMM conv mainloop: wgmma with both operands in shared
/// memory, A (the input patch planes) read at a shifted descriptor per filter tap, B the packed filter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../plan/wgmma_params.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../warp/mma.cuh"
#include "../warpgroup/wgmma.cuh"
#include "conv_mainloop_wgmma_direct.cuh"
#include "wgmma_conv_params.cuh"

namespace convred::block {

/// @brief Accumulates one stage of a tile_h x 64 pixel x 128-channel tile on tensor cores with wgmma.
///
/// Warpgroup g (threads 128g..128g+127) owns output rows 2g and 2g+1 of the tile (cooperative; ping-pong:
/// rows 0 and 1 of its own tile) (accumulators d[0], d[1]:
/// one m64 tile each, 64 fp32 per thread, the wgmma D fragment, see warpgroup/wgmma.cuh). Per stage it
/// issues, for every filter tap (r, s) and both rows, one m64n128 wgmma whose A descriptor starts in the
/// stage's planes (block::conv_patch_loader) at pixel ((row + r) * pw + s): the 64 pixels of an output row
/// segment read with the tap's shift, no data moved. GEMM_K is ordered (r, s, c) within a stage. All of
/// a stage's wgmmas (2 R S) form one commit group, so the tensor pipe sees one long queue per stage
/// instead of a round trip per tap; under 3xTF32 (3 R S per row, small terms first, as CUTLASS orders
/// them) one group per row, or in the tap-loop variant one per tap and row (see run_stage).
///
/// Accumulator shape for block::reduce_epilogue: acc[i][j] with i = 2 * row + half (TM = 4 pixels per
/// thread: columns 16w + g and 16w + g + 8 of rows 2g and 2g+1) and j = 2 * n8 + e (TN = 32 channels:
/// 8 n8 + 2t + e); lanes 4g'..4g'+3 share pixels (`lanes_per_pixel` = 4), one warp per pixel.
///
/// Its host side, the shape rules and the parameters' construction (cannot_implement, make_params,
/// make_direct_params, xpack_bytes, packed_bytes, tail_serves, first_pixel), is plan::wgmma_params<Policy>,
/// inherited so that conv_mainloop_wgmma<Policy>::make_params and the others name it here too. Its direct
/// tiles' stage (direct_offsets, run_stage_direct: A from registers, loaded from a TMA box of x) is
/// block::conv_mainloop_wgmma_direct (conv_mainloop_wgmma_direct.cuh), inherited the same way.
template <class Policy>
struct conv_mainloop_wgmma : plan::wgmma_params<Policy>,
                             conv_mainloop_wgmma_direct<Policy, conv_mainloop_wgmma<Policy>> {
  using V = float;                                     ///< accumulator type
  using math_t = typename Policy::math;                ///< precision tag
  static constexpr int BM = Policy::block_m;           ///< pixels per tile (tile_h x tile_w)
  static constexpr int NT = Policy::consumer_threads;  ///< consumer threads (256)
  static constexpr int TM = 4;                         ///< accumulator pixel rows per thread
  static constexpr int TN = 32;                        ///< accumulator channels per thread
  static constexpr int lanes_per_pixel = 4;            ///< lanes 4g..4g+3 hold the same pixels
  static constexpr int warps_per_pixel = 1;            ///< one warp holds all 128 channels of its pixels
  static constexpr bool x3 = Policy::parts == 2;       ///< 3xTF32: big and small parts
  /// 3xTF32: run_stage accumulates each row of the stage (the TapLoop variant: each tap of a row) in a
  /// fresh register tile, waits for it and adds it to d with IEEE adds (promotion), so
  /// the stage is complete (its slot free) when run_stage returns. The tensor cores' own fp32 accumulation
  /// is not IEEE-rounded (bench/NOTES.md: 3.6e-6 vs float64 on the seed problem with all 1,728 products of
  /// a pixel in one accumulator); chains of one stage (216 products) bring it under 1e-6, as the mma.sync
  /// 3xTF32 kernels do.
  static constexpr bool promotes = x3;
  /// wgmma kind of warpgroup::mma_ss_m64n128: 0 tf32, 1 bf16, 2 fp16
  static constexpr int kind = Policy::is_tf32 ? 0 : (std::is_same_v<math_t, math::bf16> ? 1 : 2);
  /// bytes of one filter tap's 128 x block_c slice in shared memory
  static constexpr std::uint32_t tap_bytes = 128u * Policy::block_c * Policy::filter_elem_bytes;
  /// Direct tiles: 32-bit entries per pixel of a slice in a stage's box of x, 8: block_c fp32 channels
  /// (tf32), or block_c / 2 pairs of 16-bit channels (bf16, fp16: x copied as pairs, wgmma_params::x_copied)
  static constexpr int box_c = plan::wgmma_params<Policy>::box_c;
  static_assert(TM == conv_mainloop_wgmma_direct<Policy, conv_mainloop_wgmma>::TM,
                "conv_mainloop_wgmma: direct_offsets holds one offset per accumulator pixel row");
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
  /// @param out   device pointer to channel 0 of this pass in pixel row 0 of the plane (k =
  ///   wgmma_conv_params::pass_k0(pass): pass * 128 for a dense convolution)
  /// @param ldk   floats between consecutive pixels of the plane (K)
  /// @param valid channels of this pass inside the output (wgmma_conv_params::pass_channels: min(128, K - pass *
  ///   128) for a dense convolution)
  /// @param vec   4: out 16-byte aligned, ldk and valid multiples of 4 (16-byte stores); 2: out 8-byte
  ///   aligned, ldk and valid even (3xTF32: 8-byte pair stores; the other policies then store 4 bytes at a
  ///   time, as for 1)
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

  /// Issues the wgmmas of one stage into d as one commit group (not waited for): `filter` is the stage's
  /// packed filter slice (b_bytes), `planes` its input planes (parts x part_bytes). `first`: the first
  /// stage of a tile, whose first wgmma per row overwrites d (scale-d = 0) instead of adding.
  /// 3x3 and 1x1 filters run a fully unrolled tap loop (no loop-carried accumulators for ptxas to fence).
  /// 3xTF32 (`promotes`): one group per row into a fresh tile, waited for and added to d (see promotes),
  /// for 3x3 filters at stride 1 and 1x1 filters (at stride 2 on flat tiles only, whose one tap reads phase
  /// 0); any other filter or stride 2 in the TapLoop variant: for each
  /// tap (a run-time loop) and row, its three wgmmas into a fresh tile (issue_tap), waited for and added to
  /// d. (The two in one kernel made ptxas spill ~2.5 KB in the 3xTF32 consumers, each alone nothing; groups
  /// of two or three taps per wait spilled 150-1,200 bytes: sm_90a, nvcc 13.0. On the H200 the tap loop runs
  /// the seed's 3x3 layer at half the stage-row rate: bench/NOTES.md.)
  /// Gather: the kernel variant of the gathering producer, whose planes may hold stride-2 phases (the
  /// TMA variant is compiled without those tap loops).
  template <bool Gather, bool TapLoop = false>
  __device__ static void run_stage(const unsigned char* filter, const unsigned char* planes, float (&d)[2][64],
                                   bool first, const wgmma_conv_params& p) {
    if constexpr (promotes && TapLoop) {  // a group per tap and row (a run-time loop: nothing loop-carried)
#pragma unroll 1
      for (int tap = 0; tap < p.R * p.S; ++tap) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          float part[64];
          issue_tap(filter, planes, part, mt, tap, p);
          warpgroup::wait<0>();
#pragma unroll
          for (int i = 0; i < 64; ++i) {
            fence_operand(part[i]);
            d[mt][i] = first && tap == 0 ? part[i] : d[mt][i] + part[i];
          }
        }
      }
    } else if constexpr (promotes) {  // 3x3 at stride 1, 1x1: a group per stage row
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
  /// issue for the filter size: 3x3 and 1x1 unrolled, others a run-time tap loop (not under 3xTF32, 3x3
  /// at stride 1 and 1x1 only: a tap loop around its promoted stage rows made ptxas serialise every wgmma
  /// of the kernel, warning C7520; the TapLoop variant serves the others). Under 3xTF32 a 1x1 stage holds
  /// p.group slices, 1 or 2 (wgmma_params::make_params allows no more): 2 runs issue<..., 2>, any other
  /// value one slice.
  template <bool Gather, int Rows>
  __device__ static void dispatch(const unsigned char* filter, const unsigned char* planes, float (&d)[Rows][64],
                                  int row, bool first, const wgmma_conv_params& p) {
    if (Gather && !promotes && p.stride == 2) {  // taps read the stride phases (3xTF32: the TapLoop variant)
      if (p.R == 3 && p.S == 3)
        issue<3, 3, Rows, 2>(filter, planes, d, row, first, p);
      else if (p.R == 1 && p.S == 1)
        issue<1, 1, Rows, 2>(filter, planes, d, row, first, p);
      else
        issue<0, 0, Rows, 2>(filter, planes, d, row, first, p);
    } else if (p.R == 3 && p.S == 3) {
      issue<3, 3, Rows, 1>(filter, planes, d, row, first, p);
    } else if (promotes) {  // 1x1 here (the TapLoop variant serves others): flat stages of 1 or 2 slices
      if (p.group == 2)
        issue<1, 1, Rows, 1, 2>(filter, planes, d, row, first, p);
      else
        issue<1, 1, Rows, 1, 1>(filter, planes, d, row, first, p);
    } else if (p.R == 1 && p.S == 1) {
      issue<1, 1, Rows, 1>(filter, planes, d, row, first, p);
    } else {
      issue<0, 0, Rows, 1>(filter, planes, d, row, first, p);
    }
  }

  /// 3xTF32's TapLoop variant (any filter, stride 1 or 2): one commit group of tap `tap`'s three wgmmas
  /// (small x big, big x small, big x big) for the warpgroup's m64 row `row` into a fresh tile d (its first
  /// wgmma overwrites it); the tap's phase and shift at run time, as in issue.
  __device__ static void issue_tap(const unsigned char* filter, const unsigned char* planes, float (&d)[64], int row,
                                   int tap, const wgmma_conv_params& p) {
    const int r = tap / p.S, s = tap - r * p.S, st = p.stride;
    const int phase = (r % st) * p.phases_w + s % st;
    const std::uint64_t a = warpgroup::make_smem_desc(planes + (wg_row0() + row) * p.mrow_step * 16, p.plane_bytes, 128) +
                            static_cast<std::uint64_t>(phase) * static_cast<std::uint64_t>(p.phase_pixels) +
                            static_cast<std::uint64_t>(r / st) * static_cast<std::uint64_t>(p.pw * p.dil_h) +
                            static_cast<std::uint64_t>((s / st) * p.dil_w);
    const std::uint64_t b = warpgroup::make_smem_desc(filter, 128, 256) + ((static_cast<std::uint64_t>(tap) * tap_bytes) >> 4);
    const std::uint64_t a_small = static_cast<std::uint64_t>(p.part_bytes) >> 4;
    const std::uint64_t b_small = (static_cast<std::uint64_t>(p.R * p.S) * tap_bytes) >> 4;
    warpgroup::fence();
    warpgroup::mma_ss_m64n128<kind>(d, a + a_small, b, false);
    warpgroup::mma_ss_m64n128<kind>(d, a, b + b_small);
    warpgroup::mma_ss_m64n128<kind>(d, a, b);
    warpgroup::commit();
  }

  /// One commit group of the stage's wgmmas for an R x S filter known at compile time (FR, FS > 0) or at
  /// run time (FR = FS = 0) and stride ST (tap (r, s) reads phase (r % ST, s % ST) at (r / ST, s / ST)):
  /// rows row .. row + Rows - 1 of the warpgroup's, into d[0 .. Rows - 1]. G > 0: the stage's slices
  /// (wgmma_conv_params::group) known at compile time and unrolled (3xTF32's flat 1x1 stages of 1 or 2
  /// slices: its promoted stages spilled ~370 bytes with the run-time loop); G = 0: p.group slices for a
  /// 1x1 filter in a run-time loop (not 3xTF32), else 1.
  template <int FR, int FS, int Rows, int ST, int G = 0>
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
    // one patch row (flat tiles of a dilated filter: dil_h plane rows; tap s dil_w pixels on), in 16-byte units
    const std::uint64_t row_step = static_cast<std::uint64_t>(p.pw * p.dil_h), col_step = static_cast<std::uint64_t>(p.dil_w);
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
                                static_cast<std::uint64_t>(r / ST) * row_step + static_cast<std::uint64_t>(s / ST) * col_step;
        // 1x1 filters: the stage's `group` slices of block_c channels, slice g's planes g * J planes on
        // and its filter slice g * parts * tap_bytes on (wgmma_conv_params::group); the small parts
        // (3xTF32) part_bytes and R * S taps after the big ones, as for one slice
        auto slice = [&](int g) {
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
        };
        if constexpr (G > 0) {
#pragma unroll
          for (int g = 0; g < G; ++g) slice(g);
        } else {
          const int group = FR == 1 && FS == 1 && !x3 ? p.group : 1;
#pragma unroll 1
          for (int g = 0; g < group; ++g) slice(g);
        }
      }
    warpgroup::commit();
  }
};

}  // namespace convred::block
