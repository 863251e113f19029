/// @file kernel/wgmma_consumer.cuh
/// @brief The persistent wgmma kernel's consumer warpgroups: the mainloop of each work unit (wgmma per
/// stage) and its epilogue (the fused reduction, pass mode's states or partial mode's raw sums).
#pragma once

#include <cstdint>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../block/wgmma_conv_params.cuh"
#include "../detail/tma.cuh"
#include "../warpgroup/wgmma.cuh"
#include "wgmma_pipeline.cuh"

namespace convred::kernel {

/// @brief A consumer warpgroup's work: per stage one commit group of wgmmas (block::conv_mainloop_wgmma),
/// the stage released when the next stage's group is issued and its own has completed (3xTF32 and direct
/// tiles: when run_stage returns, the stage complete); the first stage of each pass of a unit starts the accumulators
/// (scale-d = 0). A pass's output channels are wgmma_conv_params::pass_k0 on (pass_channels of them: 128
/// per pass of a dense convolution, a group's Kg in passes of up to 128 of a grouped one).
/// Fused mode: per channel pass of 128 output channels (npass of them, K > 128), the
/// epilogue e(acc + bias[k], k) folded into the pixels' reduction states in registers
/// (block::reduce_epilogue::fold), which carry over to the next pass; per tile, the reduction across the
/// lanes in warp shuffles (finish) and y and indices written once. Partial mode (prm.partial): a unit is
/// one pass's GEMM_K range, and at its end the raw accumulators go to partial[z][m - partial_m0][pass * 128 + c]
/// (conv_mainloop_wgmma::store_raw: pixels inside the output, channels < K). Cooperative: both
/// warpgroups consume every unit of the block; ping-pong: warpgroup g the block's units g, g + 2, ... (its
/// stages at the ring positions after the stages of the units before it, the other warpgroup's
/// skipped), the two taking turns at issuing their mainloops (order[]): a warpgroup starts unit i's
/// mainloop once the other has issued unit i - 1's, so it never waits on a stage barrier more than one
/// phase ahead (the parity waits would alias) and its epilogue runs under the other's wgmmas.
template <class Policy, class Op, class Epilogue, bool Gather, bool Direct = false, bool TapLoop = false>
__device__ __forceinline__ void consume(const block::wgmma_conv_params& prm, const wgmma_smem<Policy, Op>& sm,
                                        const tile_scheduler& sched, Op op, Epilogue epi, float* y,
                                        std::int64_t* indices) {
  CONVRED_WGMMA_PROBE(threadIdx.x == 0 || threadIdx.x == 128);
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  using epilogue_t = block::reduce_epilogue<mainloop, Op, false>;  // states in registers
  auto& tail = sm.tail;
  epilogue_t red(tail.reduce, op);
  pipeline_state st(prm.stages);
  float d[2][64];
  int prev = -1;
  int off[mainloop::TM] = {};  // direct tiles: this thread's pixels in a stage's box of x
  if constexpr (Direct) mainloop::direct_offsets(prm, off);
  const bool skip = Direct && prm.skips_dead_rows();  // dead filter rows' stages skipped (as the producer)
  if (prm.resident_bytes) convred::detail::mbarrier_wait(&tail.filter_full, 0);
  // the bias: the block's copy of the first 128 channels, or (several passes) read where it lies
  const float* bias = prm.bias ? (prm.npass == 1 ? tail.bias : prm.bias) : nullptr;
  const int wg = static_cast<int>(threadIdx.x) / 128, first_i = Policy::pingpong ? wg : 0;
  constexpr int step = Policy::pingpong ? 2 : 1;
  // ping-pong: the ring positions of the other warpgroup's units are skipped (st.seek past their stages):
  // warpgroup 1 starts after the block's unit 0
  if (Policy::pingpong && wg == 1 && sched.first() < sched.units) st.seek(sched.stages(sched.first()));
  int turns = wg;  // ping-pong: the order[] waits so far (warpgroup 0's first unit waits for none)
  for (std::int64_t unit = sched.first(first_i); unit < sched.units; unit = sched.next(unit, step)) {
    int first, last;
    sched.slices(unit, first, last);
    if (Policy::pingpong) {
      if (turns > 0) convred::detail::mbarrier_wait(&tail.order[wg], static_cast<std::uint32_t>((turns - 1) & 1));
      ++turns;
    }
    CONVRED_WGMMA_UNIT_BEGIN();
    typename epilogue_t::accum_t state[mainloop::TM];
#pragma unroll
    for (int r = 0; r < mainloop::TM; ++r) state[r] = Op::template identity<float>();
    tile_scheduler::coord t{};
    // the tile pixel (row * 64 + column) -> output pixel m, or -1 outside the output; flat tiles: GEMM row
    // o = tile * block_m + px of the packed planes (coord n is the tile)
    auto pixel = [&](int px) {
      if constexpr (Direct) {  // the tile's pixels past tile_rows whole rows are dropped
        if (px >= prm.tile_rows * prm.tile_cols) return std::int64_t(-1);
      }
      if (prm.flat) {  // (o < flat_pixels < 2^31: int32)
        const std::int32_t o = static_cast<std::int32_t>(t.n) * Policy::block_m + px;
        std::int32_t n, r, p, q;
        prm.div_image.divmod(o, n, r);
        prm.div_pw.divmod(r, p, q);
        return n < prm.N && p < prm.P && q < prm.Q ? (n * std::int64_t(prm.P) + p) * prm.Q + q : std::int64_t(-1);
      }
      const std::int64_t p = t.tp * prm.tile_rows + px / prm.tile_cols, q = t.tq * prm.tile_cols + px % prm.tile_cols;
      return p < prm.P && q < prm.Q ? (t.n * prm.P + p) * prm.Q + q : std::int64_t(-1);
    };
    // direct_taps: the tile's first output row, against which its filter rows are live (row_live)
    const int p0 = Direct ? static_cast<int>(sched.decode(unit).tp) * prm.tile_rows : 0;
    for (int sl = first; sl < last;) {  // one channel pass (partial mode: one pass's GEMM_K range)
      const int pass = sl / prm.kt, pass_end = min(last, (pass + 1) * prm.kt);
      bool started = false;  // a stage of the pass has run (direct_taps skip the dead rows' stages)
      for (int s = sl; s < pass_end; ++s) {
        if (skip && !prm.row_live(prm.stage_row(s), p0)) continue;  // as the producer: not staged
        CONVRED_WGMMA_PHASE(1, st.wait_full(tail.full));
        const unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
        if constexpr (Direct) {  // the stage's filter row of its group slices: streamed, or in the resident filter
          // a slice's S taps of one row (of every part; part_row: of one), its small part's offset (3xTF32)
          const int R = prm.row_stages(), row = prm.b_bytes / prm.group, part_row = row / Policy::parts;
          const unsigned char* filter = prm.resident_bytes ? sm.base + static_cast<std::int64_t>(s / R) * R * prm.b_bytes +
                                                                 static_cast<std::int64_t>(prm.stage_row(s)) * part_row
                                                           : stage;
          mainloop::run_stage_direct(filter, prm.resident_bytes ? R * row : row, prm.resident_bytes ? R * part_row : part_row,
                                     stage + prm.a_offset, d, !started, prm, off, prm.pass_channels(pass));
        } else {
          const unsigned char* filter = prm.resident_bytes ? sm.base + static_cast<std::int64_t>(s) * prm.b_bytes : stage;
          mainloop::template run_stage<Gather, TapLoop>(filter, stage + prm.a_offset, d, s == sl, prm);
        }
        started = true;
        if constexpr (mainloop::promotes || Direct) {  // the stage has completed (run_stage_direct waits): release it now
          convred::detail::mbarrier_arrive(&tail.empty[st.slot]);
          st.advance();
          continue;
        }
        warpgroup::wait<1>();  // the previous stage's group has completed: release its slot
        if (prev >= 0) convred::detail::mbarrier_arrive(&tail.empty[prev]);
        prev = st.slot;
        st.advance();
      }
      const bool done = pass_end == last;
      if (Policy::pingpong && done) convred::detail::mbarrier_arrive(&tail.order[wg ^ 1]);  // the other's turn
      if (done) t = sched.decode(unit);  // worked out while the last wgmmas run
      warpgroup::wait<0>();
      mainloop::fence_acc(d);
      CONVRED_WGMMA_UNIT_END(done);
      if constexpr (Direct) {
        if (!started) {  // every stage of the range read only padding: the products are zero
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int i = 0; i < 64; ++i) d[mt][i] = 0.f;
        }
      }
      if constexpr (!mainloop::promotes && !Direct) convred::detail::mbarrier_arrive(&tail.empty[prev]);
      prev = -1;
      const int k0 = prm.pass_k0(pass), valid = prm.pass_channels(pass);  // the pass's output channels
      if (prm.partial) {  // partial mode (one pass per unit: done): the raw sums of split z, rows m - partial_m0
        const std::int64_t m0 = mainloop::promotes ? 0 : prm.partial_m0, plane = (prm.N * prm.P * prm.Q - m0) * prm.K;
        float* out = prm.partial + sched.split_of(unit) * plane + k0;
        // the rows' alignment: 16 bytes where every row and pass starts 16-byte aligned and the pass's
        // channels come in whole quads, else 8 where even
        // (a grouped pass may start at an odd channel: g * Kg with Kg odd)
        const auto at = reinterpret_cast<std::uintptr_t>(out);
        const int vec = prm.K % 4 == 0 && valid % 4 == 0 && at % 16 == 0 ? 4
                        : prm.K % 2 == 0 && valid % 2 == 0 && at % 8 == 0 ? 2
                                                                          : 1;
        CONVRED_WGMMA_PHASE(3, mainloop::store_raw(d, out, prm.K, valid, vec, [&](int px) {
                                                  const std::int64_t m = pixel(px);
                                                  return m < 0 ? m : m - m0;
                                                }));
      } else {  // the pass complete: its 128 channels folded into the states
        float acc[mainloop::TM][mainloop::TN];
        mainloop::to_tile(d, acc);
        CONVRED_WGMMA_PHASE(2, red.fold(acc, bias, epi, k0, valid, mainloop::tile_n, state));
      }
      sl = pass_end;
    }
    if constexpr (mainloop::promotes) {  // (no pass mode under 3xTF32: its consumers would spill ~290 bytes)
      if (!prm.partial) CONVRED_WGMMA_PHASE(3, red.finish(state, y, indices, prm.K, mainloop::tile_m, pixel));
    } else if (!prm.partial) {  // y and indices, or in pass mode the unit's (one pass's) states for the combine
      using accum_t = typename epilogue_t::accum_t;
      int f = 0, l = 0;
      if (prm.states) sched.slices(unit, f, l);
      accum_t* states = prm.states ? static_cast<accum_t*>(prm.states) + static_cast<std::int64_t>(f / prm.kt) * prm.N * prm.P * prm.Q
                                   : nullptr;
      CONVRED_WGMMA_PHASE(3, red.finish_each(state, mainloop::tile_m, pixel, [&](std::int64_t m, const accum_t& r) {
        if (states) {
          if (m >= 0) states[m] = r;
        } else {
          block::write_reduced<Op, float>(y, indices, m, r, prm.K);
        }
      }));
    }
    if (Policy::pingpong) {  // past the other warpgroup's next unit, which comes before this one's next
      const std::int64_t other = sched.next(unit);
      if (other < sched.units) st.seek(st.count + sched.stages(other));
    }
  }
}

}  // namespace convred::kernel
