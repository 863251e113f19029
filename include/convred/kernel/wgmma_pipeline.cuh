/// @file kernel/wgmma_pipeline.cuh
/// @brief The persistent wgmma kernel's shared pieces: its phase probes, its shared-memory layout and
/// mbarriers, the pipeline state of a ring of buffers, the work-unit scheduler and the block's shape.
#pragma once

#include <cstdint>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../block/wgmma_conv_params.cuh"
#include "../detail/tma.cuh"
#include "../policy.cuh"
#include "conv2d_reduce_split.cuh"

namespace convred::kernel {

// Probes of conv2d_reduce_wgmma_kernel's phases: points where a diagnosis build may time the kernel by
// defining these macros before it includes convred (bench/wgmma_clocks.cuh does). By default they are
// nothing (CONVRED_WGMMA_PHASE: its statement alone), and the kernel's code is the same as without them.
#ifndef CONVRED_WGMMA_PROBE
/// Starts a thread's probes in produce and consume; `on`: the thread's phases are the ones recorded
/// (consumer threads 0 and 128, producer thread 32: transform warp 0, lane 0).
#define CONVRED_WGMMA_PROBE(on) \
  do {                          \
  } while (0)
#endif
#ifndef CONVRED_WGMMA_PHASE
/// Runs stmt, phase `slot` of the kernel: consumers 1 a full-barrier wait, 2 the epilogue math, 3 the
/// reduction and stores; producer 5 a raw-buffer wait, 6 a stage-slot wait, 7 the plane conversion.
#define CONVRED_WGMMA_PHASE(slot, stmt) stmt
#endif
#ifndef CONVRED_WGMMA_UNIT_BEGIN
/// A consumer's work unit starts (the unit's mainloop is phase 0, the units counted in slot 4).
#define CONVRED_WGMMA_UNIT_BEGIN() \
  do {                             \
  } while (0)
#endif
#ifndef CONVRED_WGMMA_UNIT_END
/// A consumer's channel pass has completed its wgmmas; `done`: the unit's last (its mainloop ends).
#define CONVRED_WGMMA_UNIT_END(done) \
  do {                               \
  } while (0)
#endif

/// @brief Shared memory of conv2d_reduce_wgmma_kernel after its operand stages and raw patch buffers
/// (dynamic): the reduction's storage and the mbarriers.
template <class Policy, class Op>
struct wgmma_tail_storage {
  /// the reduction's shared memory
  typename block::reduce_epilogue<block::conv_mainloop_wgmma<Policy>, Op, false>::TempStorage reduce;
  std::uint64_t full[block::wgmma_max_stages];  ///< operand stage s ready (transform threads [+ filter bytes])
  std::uint64_t filter_full;                    ///< the resident filter landed (when resident)
  std::uint64_t empty[block::wgmma_max_stages]; ///< operand stage s consumed (every consumer thread)
  std::uint64_t raw_full[Policy::raw_stages];   ///< raw buffer landed (TMA bytes)
  std::uint64_t raw_empty[Policy::raw_stages];  ///< raw buffer read (every transform thread)
  std::uint64_t order[2];  ///< ping-pong: order[g] completes when the other warpgroup's mainloop turn ended
  float bias[Policy::block_n];  ///< the bias of the first 128 channels (zeros past K), read once per block
};

/// @brief A position in a ring of `n` buffers: the slot and the phase parity of its mbarriers (flips each
/// time the ring wraps). Producers wait for a slot's release with `phase ^ 1`, consumers for its fill
/// with `phase`; `count` says how many positions came before (the first n fills need no release).
struct pipeline_state {
  int n;                    ///< buffers in the ring
  int slot = 0;             ///< buffer index
  std::uint32_t phase = 0;  ///< parity of the slot's current mbarrier phase
  std::int64_t count = 0;   ///< positions passed so far
  /// The first position of a ring of `buffers` buffers.
  __device__ explicit pipeline_state(int buffers) : n(buffers) {}
  /// Moves to the next buffer.
  __device__ void advance() {
    ++count;
    if (++slot == n) slot = 0, phase ^= 1;
  }
  /// Waits until the slot's previous contents were released on `bars[slot]` (no wait for the first n).
  __device__ void wait_free(std::uint64_t* bars) const {
    if (count >= n) convred::detail::mbarrier_wait(&bars[slot], phase ^ 1);
  }
  /// Moves to position `pos` (a consumer skipping the positions of tiles another warpgroup consumes).
  __device__ void seek(std::int64_t pos) {
    count = pos;
    slot = static_cast<int>(pos % n);
    phase = static_cast<std::uint32_t>((pos / n) & 1);
  }
  /// Waits until the slot was filled (its `bars[slot]` phase completed).
  __device__ void wait_full(std::uint64_t* bars) const { convred::detail::mbarrier_wait(&bars[slot], phase); }
};

/// @brief The persistent kernel's work scheduler. The tiles (tile_rows x tile_cols output pixels) form an
/// N x tiles_p x tiles_q grid, ordered q fastest, then p, then n (flat tiles: tiles_p = tiles_q = 1 and
/// coord::n is the flat tile). Pass mode (wgmma_conv_params::states) has partial mode's units with one split. Fused mode: a work unit is a whole tile
/// (its npass channel passes of kt stages each). Partial mode (wgmma_conv_params::partial): a work unit is
/// (tile, GEMM_K split z, channel pass), tiles * splits * npass of them, ordered pass fastest, then z,
/// then the tile, so that a tile's units are adjacent (blocks running them at the same time read the same
/// patch, the same channels of x, from L2); split z of a pass covers its stages [first, last) of
/// split_range(kt, splits, z). Either way a unit is a contiguous range of the packed filter's slices
/// (slice = pass * kt + stage): [0, npass * kt) fused, [pass * kt + first, pass * kt + last) partial.
/// Block b takes units b, b + G, b + 2G, ... (G = gridDim.x). The producer walks that sequence;
/// cooperative consumers too, ping-pong consumer warpgroup g every second unit from its g-th. The launch's
/// tiles are tiles tile0, tile0 + 1, ... of the problem (wgmma_conv_params::tile0: a split-K tail's launch).
struct tile_scheduler {
  /// Where a tile lies.
  struct coord {
    std::int64_t n;   ///< image
    std::int64_t tp;  ///< tile row: output rows tp * tile_rows ...
    std::int64_t tq;  ///< tile column: output columns tq * tile_cols ...
  };
  std::int64_t units;    ///< one past the launch's last unit: (tile0 + tiles) x units per tile
  std::int64_t tiles_p;  ///< tile rows per image
  std::int64_t tiles_q;  ///< tile columns per image
  std::int32_t per_tile; ///< units per tile: 1 (fused), splits * npass (partial)
  std::int32_t npass;    ///< channel passes per tile
  std::int32_t kt;       ///< stages per pass
  std::int32_t splits;   ///< GEMM_K splits per pass (partial mode)
  bool partial;          ///< partial mode
  std::int64_t begin;    ///< the launch's first unit: the first unit of tile tile0
  /// The work of the kernel's parameters, from tile `tile0` on (wgmma_conv_params::tile0, or 0 where the
  /// kernel never runs a split-K tail).
  /// (Pass mode, wgmma_conv_params::states: the units of partial mode with one split.)
  __device__ tile_scheduler(const block::wgmma_conv_params& p, std::int64_t tile0)
      : units(p.partial || p.states ? (tile0 + p.tiles) * p.splits * p.npass : tile0 + p.tiles),
        tiles_p(p.tiles_p),
        tiles_q(p.tiles_q),
        per_tile(p.partial || p.states ? p.splits * p.npass : 1),
        npass(p.npass),
        kt(p.kt),
        splits(p.splits),
        partial(p.partial != nullptr || p.states != nullptr),
        begin(tile0 * per_tile) {}
  /// This block's unit number `skip` (its first when 0); done when >= units.
  __device__ std::int64_t first(int skip = 0) const { return begin + blockIdx.x + skip * std::int64_t(gridDim.x); }
  /// This block's unit `every` units after `unit`.
  __device__ std::int64_t next(std::int64_t unit, int every = 1) const { return unit + every * std::int64_t(gridDim.x); }
  /// The packed filter slices [first, last) of `unit` (see the struct comment).
  __device__ void slices(std::int64_t unit, int& first, int& last) const {
    if (!partial) {
      first = 0, last = npass * kt;
      return;
    }
    const int r = static_cast<int>(unit % per_tile), z = r / npass, pass = r - z * npass;
    std::int32_t a, b;
    split_range(kt, splits, z, a, b);
    first = pass * kt + a, last = pass * kt + b;
  }
  /// The stages of `unit` (last - first of slices).
  __device__ int stages(std::int64_t unit) const {
    int first, last;
    slices(unit, first, last);
    return last - first;
  }
  /// The GEMM_K split of `unit` (0 in fused mode).
  __device__ int split_of(std::int64_t unit) const { return static_cast<int>(unit % per_tile) / npass; }
  /// Where the tile of `unit` lies.
  __device__ coord decode(std::int64_t unit) const {
    const std::int64_t tile = per_tile == 1 ? unit : unit / per_tile;
    coord c;
    c.tq = tile % tiles_q;
    const std::int64_t rest = tile / tiles_q;
    c.tp = rest % tiles_p, c.n = rest / tiles_p;
    return c;
  }
};

/// @brief Shared-memory regions of conv2d_reduce_wgmma_kernel: the resident filter (if any), the operand
/// stages, the raw patch buffers and the tail.
template <class Policy, class Op>
struct wgmma_smem {
  unsigned char* base;                  ///< the dynamic shared memory; the resident filter first
  unsigned char* stages;                ///< operand stage s at stages + s * stage_bytes
  unsigned char* raw;                   ///< raw buffer r at raw + r * raw_bytes
  wgmma_tail_storage<Policy, Op>& tail;  ///< reduction storage, mbarriers, bias
  /// Carves the block's dynamic shared memory as make_params laid it out.
  __device__ wgmma_smem(unsigned char* smem, const block::wgmma_conv_params& prm)
      : base(smem),
        stages(smem + prm.resident_bytes),
        raw(stages + prm.stages * prm.stage_bytes),
        tail(*reinterpret_cast<wgmma_tail_storage<Policy, Op>*>(raw + Policy::raw_stages * prm.raw_bytes)) {}
};

/// @brief The block of conv2d_reduce_wgmma_kernel<Policy, ..., Gather, Direct>: two consumer warpgroups and
/// Policy::producer_threads / 128 producer warpgroups in the TMA variant, Policy::gather_producers in the
/// gathering one, one in the direct one (its thread 0 issues every copy: the bf16 / fp16 policies' second
/// producer warpgroup would only take the consumers' registers); the registers each side gets after
/// setmaxnreg (216 / 72 with one producer warpgroup, 184 / 72 with two), and the transform threads: all
/// producer threads but warp 0 in the TMA variant (thread 0 issues the TMA boxes, thread 1 the filter
/// copies: 96 or 224 threads), all of them in the gathering one (thread 0 also copies the filter slices).
template <class Policy, bool Gather, bool Direct = false>
struct wgmma_block {
  static constexpr int producers = Gather ? Policy::gather_producers : Direct ? 1 : Policy::producer_threads / 128;  ///< producer warpgroups
  static constexpr int producer_threads = 128 * producers;                    ///< 128 or 256
  static constexpr int threads = Policy::consumer_threads + producer_threads;  ///< 384 or 512
  static constexpr int consumer_registers = wgmma_consumer_registers(producers);  ///< after setmaxnreg
  static constexpr int producer_registers = Policy::producer_registers;       ///< after setmaxnreg
  static constexpr int transform_threads = Gather ? producer_threads : producer_threads - 32;  ///< converting threads
};

/// @brief Thread 0's set-up of the mbarriers: a stage is full after the transform threads' arrivals (and
/// the filter slice's bytes when streamed), empty after every consumer thread's (its warpgroup's in
/// ping-pong); a raw buffer is full after its TMA bytes, empty after the transform threads'.
template <class Policy, class Op, bool Gather>
__device__ __forceinline__ void init_barriers(wgmma_tail_storage<Policy, Op>& tail, const block::wgmma_conv_params& prm) {
  constexpr int transform = wgmma_block<Policy, Gather>::transform_threads;
  for (int s = 0; s < prm.stages; ++s) {
    // flat and direct tiles: thread 0's one arrival (its copies' bytes); else the transform threads' (+ the filter's)
    convred::detail::mbarrier_init(&tail.full[s], prm.flat || prm.direct ? 1 : transform + (prm.resident_bytes ? 0 : 1));
    convred::detail::mbarrier_init(&tail.empty[s], Policy::pingpong ? 128 : Policy::consumer_threads);
  }
  for (int s = 0; s < Policy::raw_stages; ++s) {
    convred::detail::mbarrier_init(&tail.raw_full[s], 1);
    convred::detail::mbarrier_init(&tail.raw_empty[s], transform);
  }
  convred::detail::mbarrier_init(&tail.filter_full, 1);
  convred::detail::mbarrier_init(&tail.order[0], 128);
  convred::detail::mbarrier_init(&tail.order[1], 128);
  convred::detail::mbarrier_init_fence();
}

}  // namespace convred::kernel
