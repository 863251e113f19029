/// @file kernel/wgmma_producer.cuh
/// @brief The persistent wgmma kernel's producer warpgroup(s): the copies of x (TMA boxes, bulk copies of
/// the packed x, or loads by the threads) and of the packed filter into the operand stages, and the
/// conversion of x into the stages' planes.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "../block/conv_patch_loader.cuh"
#include "../block/wgmma_conv_params.cuh"
#include "../detail/tma.cuh"
#include "wgmma_pipeline.cuh"

namespace convred::kernel {

/// @brief The producer warpgroup(s) (thread pt of wgmma_block<Policy, Gather>::producer_threads). TMA variant: thread 0
/// issues the TMA copy of each raw
/// patch buffer (raw_c channels; a stage of block_c channels is block_c / raw_c of them), thread 1 the
/// bulk copy of each stage's packed filter slice (or, once, of the whole filter when it is resident),
/// the other warps (1-3, or 1-7 with two producer warpgroups) convert each raw buffer into the stage's
/// planes (block::conv_patch_loader); each runs ahead
/// across tile boundaries as its buffers are released. (Converting on all 128 threads, thread 0 issuing
/// the copies between its items, was slower in all: bench/NOTES.md, "Moved from header comments".)
/// Gathering variant (`prm.gather`: stride 2, W % 4 != 0): all producer threads load each stage's planes from
/// x themselves (conv_patch_loader::gather_planes), thread 0 first copying the stage's filter slice.
template <class Policy, class Op, bool Gather, bool Direct = false>
__device__ __forceinline__ void produce(const CUtensorMap* x_map, const block::wgmma_conv_params& prm,
                                        const wgmma_smem<Policy, Op>& sm, const tile_scheduler& sched, int pt) {
  CONVRED_WGMMA_PROBE(pt == 32);
  using loader = block::conv_patch_loader<Policy>;
  constexpr int E = 16 / Policy::filter_elem_bytes, chunks = Policy::block_c / Policy::raw_c;
  constexpr int transform = wgmma_block<Policy, Gather>::transform_threads;
  auto& tail = sm.tail;
  pipeline_state st(prm.stages), rs(Policy::raw_stages);
  if (Direct || prm.flat) {  // flat and direct tiles: thread 0 copies each stage's filter slice and its x
    if (pt != 0) return;
    if (prm.resident_bytes) loader::copy_filter_resident(sm.base, &tail.filter_full, prm);
    const bool skip = Direct && prm.skips_dead_rows();  // (the consumers read the same flag)
    for (std::int64_t unit = sched.first(); unit < sched.units; unit = sched.next(unit)) {
      const tile_scheduler::coord t = sched.decode(unit);  // flat: coord n is the tile
      int first, last;
      sched.slices(unit, first, last);
      const int p0 = static_cast<int>(t.tp) * prm.tile_rows;
      for (int sl = first; sl < last; ++sl) {
        if (skip && !prm.row_live(prm.stage_row(sl), p0)) continue;  // a filter row reading only padding
        CONVRED_WGMMA_PHASE(6, st.wait_free(tail.empty));
        unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
        if constexpr (Direct)  // a TMA box of x from NCHW (or of its copy: padded pitch, 16-bit pairs)
          loader::copy_direct(stage, &tail.full[st.slot], x_map, prm, sl, static_cast<int>(t.n), p0);
        else  // the stage's planes of the packed x
          loader::copy_flat(stage, &tail.full[st.slot], prm, sl, t.n);
        st.advance();
      }
    }
    return;
  }
  if constexpr (Gather) {
    if (pt == 0 && prm.resident_bytes) loader::copy_filter_resident(sm.base, &tail.filter_full, prm);
    for (std::int64_t unit = sched.first(); unit < sched.units; unit = sched.next(unit)) {
      const tile_scheduler::coord t = sched.decode(unit);
      int first, last;
      sched.slices(unit, first, last);
      for (int sl = first; sl < last; ++sl, st.advance()) {  // slice sl: channel pass sl / kt
        unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
        CONVRED_WGMMA_PHASE(6, st.wait_free(tail.empty));
        if (pt == 0 && !prm.resident_bytes) loader::copy_filter(stage, &tail.full[st.slot], prm, sl);
        CONVRED_WGMMA_PHASE(7, loader::gather_planes(prm.x, stage + prm.a_offset, prm, t.n,
                                                  static_cast<int>(t.tp) * prm.tile_rows,
                                                  static_cast<int>(t.tq) * prm.tile_cols,
                                                  prm.x_stage(sl) * Policy::block_c, pt, transform));
        convred::detail::mbarrier_arrive(&tail.full[st.slot]);
      }
    }
    return;
  }
  if (pt == 1 && prm.resident_bytes) {  // the resident filter: copied once
    loader::copy_filter_resident(sm.base, &tail.filter_full, prm);
    return;
  }
  if (pt >= 2 && pt < 32) return;
  for (std::int64_t unit = sched.first(); unit < sched.units; unit = sched.next(unit)) {
    const tile_scheduler::coord t = sched.decode(unit);
    const int h0 = static_cast<int>(t.tp) * prm.tile_rows - prm.pad_h;
    const int w0 = static_cast<int>(t.tq) * prm.tile_cols - prm.pad_w - prm.col_shift;
    int first, last;
    sched.slices(unit, first, last);
    for (int sl = first; sl < last; ++sl, st.advance()) {  // slice sl: channel pass sl / kt
      const int kt = prm.x_stage(sl);                                  // the stage's channels of x
      unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
      if (pt == 1) {  // the filter copier: as soon as the consumers release the stage
        st.wait_free(tail.empty);
        loader::copy_filter(stage, &tail.full[st.slot], prm, sl);
        continue;
      }
      if (pt >= 32) CONVRED_WGMMA_PHASE(6, st.wait_free(tail.empty));
      for (int c = 0; c < chunks; ++c, rs.advance()) {  // the stage's raw buffers of raw_c channels
        unsigned char* rbuf = sm.raw + rs.slot * prm.raw_bytes;
        if (pt == 0) {  // the patch copier: runs up to raw_stages buffers ahead of the transform
          rs.wait_free(tail.raw_empty);
          loader::copy_patch(rbuf, &tail.raw_full[rs.slot], x_map, prm, static_cast<int>(t.n), h0, w0,
                             kt * Policy::block_c + c * Policy::raw_c);
        } else {  // the transform warps
          CONVRED_WGMMA_PHASE(5, rs.wait_full(tail.raw_full));
          CONVRED_WGMMA_PHASE(7, loader::to_planes(reinterpret_cast<const float*>(rbuf),
                                                stage + prm.a_offset + c * (Policy::raw_c / E) * prm.plane_bytes,
                                                prm, pt - 32, transform));
          convred::detail::mbarrier_arrive(&tail.raw_empty[rs.slot]);
        }
      }
      if (pt >= 32) convred::detail::mbarrier_arrive(&tail.full[st.slot]);
    }
  }
}

}  // namespace convred::kernel
