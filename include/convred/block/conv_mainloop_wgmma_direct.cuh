/// @file block/conv_mainloop_wgmma_direct.cuh
/// @brief The direct tiles' stage of the Hopper (sm_90a) wgmma mainloop (wgmma_conv_params::direct): wgmma
/// with A from registers, loaded from the stage's TMA box of x, B the packed filter in shared memory.
#pragma once

#include <cstdint>

#include "../warp/mma.cuh"
#include "../warpgroup/wgmma.cuh"
#include "wgmma_conv_params.cuh"

namespace convred::block {

/// @brief Direct tiles (wgmma_conv_params::direct) of block::conv_mainloop_wgmma<Policy>, which inherits
/// this so that conv_mainloop_wgmma<Policy>::direct_offsets and run_stage_direct name it there too.
///
/// A stage of direct tiles is one TMA box of x (bf16 / fp16: of x's copy as channel pairs; [row][entry]
/// [column] of 32-bit entries, rp columns per box row); each consumer thread loads its A fragments from it
/// into registers (direct_offsets: where its accumulator rows' pixels lie) and issues m64n128 wgmmas
/// (3xTF32: m64n64, promoted) with B the stage's packed filter, into the mainloop's accumulators d[2][64]
/// (conv_mainloop_wgmma's class comment gives their shape). `Mainloop` is conv_mainloop_wgmma<Policy>
/// (CRTP): its thread layout (lane, tile_m), fence_operand and constants (kind, tap_bytes, box_c, x3) are
/// named in function bodies only, where it is complete.
template <class Policy, class Mainloop>
struct conv_mainloop_wgmma_direct {
  /// Offsets per thread in direct_offsets' `off`: one per accumulator pixel row (conv_mainloop_wgmma::TM;
  /// a static_assert there checks that the two agree).
  static constexpr int TM = 4;

  /// Direct tiles (wgmma_conv_params::direct): the offsets, in 32-bit entries within a stage's box, of entry 0
  /// at this consumer thread's accumulator rows' pixels (tile_m(i): box row px / Q, column stride * (px %
  /// Q) + col_shift, direct_taps' tap 0; 0 for the pixels past tile_rows * Q, computed and dropped). The
  /// same for every tile and stage.
  __device__ static void direct_offsets(const wgmma_conv_params& p, int (&off)[TM]) {
    const int row_floats = p.rp * Mainloop::box_c * p.group, used = p.tile_rows * p.tile_cols;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int px = Mainloop::tile_m(i);
      off[i] = px < used ? px / p.tile_cols * row_floats + p.stride * (px % p.tile_cols) + p.col_shift : 0;
    }
  }

  /// Direct tiles: issues one stage's wgmmas (group k8 slices x the warpgroup's two m64 rows; direct_taps:
  /// x the S taps of the stage's filter row, each reading the box shifted by s dil_w columns) with A from
  /// registers, loaded from the stage's box (`box`, [row][entry][column] of 32-bit entries, direct_offsets
  /// `off`: fp32 channels rounded to tf32 there (warp::to_tf32, as the packing of the other tiles), or the
  /// bf16 / fp16 channel pairs of x's copy as they are), B the stage's packed filter:
  /// slice j's taps at `filter` + j `slice_bytes` (direct_taps: its row's S taps, one after another;
  /// 3xTF32: the small part's `small_bytes` after the big part's); `first` starts d (scale-d = 0). Waits for
  /// the wgmmas before it returns (their A registers are then free), so the stage is complete. 3xTF32
  /// (direct_taps only) promotes: each m64 row's stage runs into a fresh tile that is then added to d
  /// (issue_direct_taps_x3), and only the channel halves the pass computes: `valid`, the pass's output
  /// channels (wgmma_conv_params::pass_channels; 64 or fewer: the upper half's products skipped, its
  /// accumulators zero). Other maths compute all 128 channels in one m64n128 wgmma (valid unused).
  __device__ static void run_stage_direct(const unsigned char* filter, int slice_bytes, int small_bytes,
                                          const unsigned char* box, float (&d)[2][64], bool first,
                                          const wgmma_conv_params& p, const int (&off)[TM], int valid = 128) {
    // (3xTF32 direct tiles are always direct_taps: make_direct_params refuses its 1x1 ones)
    if constexpr (Mainloop::x3) {
      return issue_direct_taps_x3(filter, slice_bytes, small_bytes, box, d, first, p, off, valid > 64 ? 2 : 1);
    } else {
      (void)small_bytes, (void)valid;
      if (p.direct_taps) return issue_direct_taps(filter, slice_bytes, box, d, first, p, off);
      switch (p.group) {
        case 4: issue_direct<4>(filter, slice_bytes, box, d, first, p, off); break;
        case 3: issue_direct<3>(filter, slice_bytes, box, d, first, p, off); break;
        case 2: issue_direct<2>(filter, slice_bytes, box, d, first, p, off); break;
        default: issue_direct<1>(filter, slice_bytes, box, d, first, p, off); break;
      }
    }
  }

 private:
  /// run_stage_direct for G slices per stage: lane 4g + t loads entry 8j + t (a[0], a[1]: rows g, g + 8)
  /// and 8j + t + 4 (a[2], a[3]) of slice j (an entry: a tf32 channel, or a 16-bit channel pair); with rp =
  /// 8 mod 16 entries per box row, the quad's 4 entries lie 8 banks apart and the 8 groups' pixels are
  /// consecutive: one conflict-free load per register at stride 1 (two-way at stride 2). Slice j is its own
  /// commit group, its registers one of two sets: the set is loaded again for slice j + 2 once slice j's
  /// group has completed (wait<1>), so that 16 registers hold the A fragments, not 8 G (8 G spilled ~120
  /// bytes: sm_90a, nvcc 13.0).
  template <int G>
  __device__ static void issue_direct(const unsigned char* filter, int slice_bytes, const unsigned char* box,
                                      float (&d)[2][64], bool first, const wgmma_conv_params& p, const int (&off)[TM]) {
    const float* x = reinterpret_cast<const float*>(box) + (Mainloop::lane() % 4) * p.rp;
    const std::uint64_t b0 = warpgroup::make_smem_desc(filter, 128, 256);
    std::uint32_t a[2][2][4];
#pragma unroll
    for (int j = 0; j < G; ++j) {
      if (j >= 2) warpgroup::wait<1>();  // slice j - 2's group has completed: its registers are free
      direct_step(b0 + ((static_cast<std::uint64_t>(j) * slice_bytes) >> 4), x + Mainloop::box_c * j * p.rp, a[j % 2],
                  d, !(first && j == 0), p, off);
    }
    warpgroup::wait<0>();
  }

  /// The step driver of direct_taps' stages (issue_direct_taps, issue_direct_taps_x3): `steps` (group x S)
  /// steps (j, s) over the group slices j and the row's p.S taps s, s fastest, in a run-time loop of two
  /// steps per trip (the two register sets stay in registers). Step i calls f(r, i, j, s) with r one of two
  /// sets of A fragments (uint32_t[2][4]: issue_direct_taps' two m64 rows, issue_direct_taps_x3's big and
  /// small parts), which issues the step's wgmmas as one commit group (not waited for), as issue_direct's
  /// slices; the set is reused for step i + 2 once step i's group has completed (wait<1>). Returns when
  /// every step's group has completed (wait<0>). (p.S is read from the parameter block at each step, as
  /// the two loops this replaces did: an S passed by value gave the tf32 and bf16 direct kernels 2 more
  /// SASS instructions, at the same registers and spills: sm_90a, nvcc 13.0.)
  template <class F>
  __device__ static void for_each_direct_step(int steps, const wgmma_conv_params& p, F&& f) {
    std::uint32_t a[2][2][4];  // [register set][2][register]
    int j = 0, s = 0;          // the next step's slice and tap
    auto next = [&](std::uint32_t(&r)[2][4], int i) {
      if (i >= 2) warpgroup::wait<1>();  // step i - 2's group has completed: its registers are free
      f(r, i, j, s);
      if (++s == p.S) s = 0, ++j;
    };
#pragma unroll 1
    for (int i = 0; i < steps; i += 2) {
      next(a[0], i);
      if (i + 1 < steps) next(a[1], i + 1);
    }
    warpgroup::wait<0>();
  }

  /// run_stage_direct for direct_taps: steps (j, s) over the group slices j and the row's taps s, s
  /// fastest, each its own commit group from one of two register sets as issue_direct's slices (a run-time
  /// loop of two steps per trip: the sets stay in registers; for_each_direct_step).
  __device__ static void issue_direct_taps(const unsigned char* filter, int slice_bytes, const unsigned char* box,
                                           float (&d)[2][64], bool first, const wgmma_conv_params& p,
                                           const int (&off)[TM]) {
    const float* x = reinterpret_cast<const float*>(box) + (Mainloop::lane() % 4) * p.rp;
    const std::uint64_t b0 = warpgroup::make_smem_desc(filter, 128, 256);
    for_each_direct_step(p.group * p.S, p, [&](std::uint32_t(&r)[2][4], int i, int j, int s) {
      direct_step(b0 + ((static_cast<std::uint64_t>(j) * slice_bytes +
                         static_cast<std::uint64_t>(s) * Mainloop::tap_bytes) >> 4),
                  x + Mainloop::box_c * j * p.rp + s * p.dil_w, r, d, !(first && i == 0), p, off);
    });
  }

  /// run_stage_direct for 3xTF32 (direct_taps): for each m64 row mt of the warpgroup and each half nh of
  /// its 128 channels, the steps (j, s) as issue_direct_taps, each loading this lane's four entries of row
  /// mt, splitting them into tf32 big and small parts (warp::split_tf32, as the packing of the other tiles)
  /// and issuing the three m64n64k8 wgmmas (small x big, big x small, big x big: the small terms first, as
  /// conv_mainloop_wgmma::issue) into a fresh tile `part` (32 registers: d, part and two sets of A
  /// fragments fit the consumers' 216 registers, where a whole m64n128 tile spilled ~1.7 KB: sm_90a, nvcc
  /// 13), one commit group per step from one of two register sets (for_each_direct_step); then waits and
  /// adds the tile to d[mt][32 nh ..] with IEEE adds (promotes: a chain of at most group x 8 x S products
  /// per tile under the tensor cores' own accumulation; `first` sets d to it). B: the big part at `filter`
  /// + j slice_bytes + s tap_bytes (channels 64 nh on: 8 nh core matrices along N, 256 bytes each), the
  /// small part `small_bytes` further. `halves` 1 (a pass of 64 or fewer channels): the half nh = 1 is not
  /// computed (half the products) and its accumulators are set to 0 on the first stage, so that no
  /// indeterminate value reaches the epilogue (which drops those channels anyway).
  __device__ static void issue_direct_taps_x3(const unsigned char* filter, int slice_bytes, int small_bytes,
                                              const unsigned char* box, float (&d)[2][64], bool first,
                                              const wgmma_conv_params& p, const int (&off)[TM], int halves = 2) {
    const float* x = reinterpret_cast<const float*>(box) + (Mainloop::lane() % 4) * p.rp;
    const std::uint64_t b_small = static_cast<std::uint64_t>(small_bytes) >> 4;
    const int steps = p.group * p.S, c4 = 4 * p.rp;
#pragma unroll 1
    for (int h = 0; h < 4; ++h) {  // (row mt, half nh) = (h / 2, h % 2), a run-time loop
      const int nh = h % 2, o0 = h < 2 ? off[0] : off[2], o1 = h < 2 ? off[1] : off[3];
      if (nh >= halves) {  // a pass of <= 64 channels: the upper half is padding
        if (first) {
          if (h == 1)
            zero<0, 1>(d);
          else
            zero<1, 1>(d);
        }
        continue;
      }
      const std::uint64_t b0 = warpgroup::make_smem_desc(filter + nh * 2048, 128, 256);
      float part[32];
      // r: [big, small][register]
      for_each_direct_step(steps, p, [&](std::uint32_t(&r)[2][4], int i, int j, int s) {
        const float* c = x + Mainloop::box_c * j * p.rp + s * p.dil_w;
        warp::split_tf32(c[o0], r[0][0], r[1][0]);
        warp::split_tf32(c[o1], r[0][1], r[1][1]);
        warp::split_tf32(c[c4 + o0], r[0][2], r[1][2]);
        warp::split_tf32(c[c4 + o1], r[0][3], r[1][3]);
        const std::uint64_t b = b0 + ((static_cast<std::uint64_t>(j) * slice_bytes +
                                       static_cast<std::uint64_t>(s) * Mainloop::tap_bytes) >> 4);
        warpgroup::fence();
        warpgroup::mma_rs_m64n64_tf32(part, r[1], b, i != 0);
        warpgroup::mma_rs_m64n64_tf32(part, r[0], b + b_small);
        warpgroup::mma_rs_m64n64_tf32(part, r[0], b);
        warpgroup::commit();
      });
      switch (h) {  // (static indices into d)
        case 0: promote<0, 0>(d, part, first); break;
        case 1: promote<0, 1>(d, part, first); break;
        case 2: promote<1, 0>(d, part, first); break;
        default: promote<1, 1>(d, part, first); break;
      }
    }
  }

  /// issue_direct_taps_x3's skipped half: d[MT][32 NH ..] set to 0.
  template <int MT, int NH>
  __device__ static void zero(float (&d)[2][64]) {
#pragma unroll
    for (int i = 0; i < 32; ++i) d[MT][32 * NH + i] = 0.0f;
  }

  /// issue_direct_taps_x3's promotion of a completed fresh tile `part` into d[MT][32 NH ..] (IEEE adds;
  /// `first`: d set to it).
  template <int MT, int NH>
  __device__ static void promote(float (&d)[2][64], float (&part)[32], bool first) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      Mainloop::fence_operand(part[i]);
      d[MT][32 * NH + i] = first ? part[i] : d[MT][32 * NH + i] + part[i];
    }
  }

  /// One k step of direct tiles (k8 tf32, k16 bf16 / fp16): this lane's A fragments of both m64 rows from
  /// `c` (entry 0 of the step's slice at the step's column shift; entries t and t + 4 at direct_offsets
  /// `off`), rounded to tf32 (16-bit pairs: as they are), and the two m64n128 wgmmas with B at descriptor
  /// `b`, accumulating into d when `acc`; one commit group, not waited for.
  __device__ static void direct_step(std::uint64_t b, const float* c, std::uint32_t (&r)[2][4], float (&d)[2][64], bool acc,
                                     const wgmma_conv_params& p, const int (&off)[TM]) {
    const int c4 = 4 * p.rp;
    auto entry = [](float v) { return Policy::is_tf32 ? warp::to_tf32(v) : __float_as_uint(v); };
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      r[mt][0] = entry(c[off[2 * mt]]);
      r[mt][1] = entry(c[off[2 * mt + 1]]);
      r[mt][2] = entry(c[c4 + off[2 * mt]]);
      r[mt][3] = entry(c[c4 + off[2 * mt + 1]]);
    }
    warpgroup::fence();
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) warpgroup::mma_rs_m64n128<Mainloop::kind>(d[mt], r[mt], b, acc);
    warpgroup::commit();
  }
};

}  // namespace convred::block
