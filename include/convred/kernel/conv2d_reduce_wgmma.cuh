/// @file kernel/conv2d_reduce_wgmma.cuh
/// @brief Thin __global__ kernels of the Hopper packed-filter path: the filter packing kernel and the
/// persistent fused conv2d -> epilogue -> channel reduction kernel (wgmma).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../block/conv_mainloop_wgmma.cuh"
#include "../block/conv_patch_loader.cuh"
#include "../warp/mma.cuh"
#include "../block/reduce_epilogue.cuh"
#include "../detail/pdl.cuh"
#include "../detail/tma.cuh"
#include "../functional.cuh"
#include "conv2d_reduce_split.cuh"

namespace convred::kernel {

/// @brief Packs KCRS fp32 weights (groups 1) into the wgmma kernel's shared-memory image, one thread per
/// packed element. Layout, in elements: [pass][stage kt][part][tap r*S+s][n/8][c/E][n%8][c%E] with
/// E = 16 / element bytes (one 16-byte core-matrix row), n = output channel within the pass's 128
/// (channel pass * 128 + n), c = channel within the stage's block_c; so each tap's 128 x block_c slice is
/// K-major no-swizzle core matrices (128 B each, 128 B apart along K, 256 B along N). Values: tf32 (round
/// to nearest even), the 3xTF32 big / small parts (part 0 / 1), bf16 or fp16 (round to nearest even);
/// zero for channels >= K and c >= C.
template <class Policy>
__global__ void pack_filter_kernel(const float* __restrict__ w, void* __restrict__ out, std::int32_t K, std::int32_t C,
                                   std::int32_t R, std::int32_t S, std::int64_t total) {
  constexpr int BC = Policy::block_c, E = 16 / Policy::filter_elem_bytes;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int taps = R * S;
  std::int64_t rest = i;
  const int ce = static_cast<int>(rest % E);
  rest /= E;
  const int n8 = static_cast<int>(rest % 8);
  rest /= 8;
  const int cb = static_cast<int>(rest % (BC / E));
  rest /= BC / E;
  const int ng = static_cast<int>(rest % 16);
  rest /= 16;
  const int tap = static_cast<int>(rest % taps);
  rest /= taps;
  const int part = static_cast<int>(rest % Policy::parts);
  rest /= Policy::parts;
  const std::int64_t kts = (C + BC - 1) / BC;  // stages per pass
  const std::int64_t kt = rest % kts, pass = rest / kts;
  const std::int64_t n = pass * 128 + ng * 8 + n8;
  const std::int64_t c = kt * BC + cb * E + ce;
  const int r = tap / S, s = tap % S;
  const float v = (n < K && c < C) ? w[((n * C + c) * R + r) * S + s] : 0.f;
  if constexpr (Policy::is_tf32) {
    std::uint32_t big, small;
    if constexpr (Policy::parts == 2)
      warp::split_tf32(v, big, small);  // 3xTF32 (safe for +-inf and NaN)
    else
      big = warp::to_tf32(v), small = 0;
    static_cast<std::uint32_t*>(out)[i] = part == 0 ? big : small;
  } else if constexpr (std::is_same_v<typename Policy::math, math::bf16>) {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(out)[i] = __float2half_rn(v);
  }
}

/// @brief Packs x (NCHW fp32) for the flat tiles of the wgmma kernel (wgmma_conv_params::flat), one
/// thread per 16-byte plane pixel of the first part: for each flat tile t and stage s (kt of them), the
/// stage's planes as the kernel's shared memory holds them, one block of parts * part_bytes at (t * kt +
/// s) * parts * part_bytes: [part][plane jj < J = group * block_c / E][phase (a, b)][window pixel w <
/// phase_pixels], the entry holding input (n, stride * row + a - pad_h, stride * col + b - pad_w) of
/// channels (s * J + jj) * E .. + E - 1 (E = 16 / element bytes) for plane pixel o = t * block_m + w = (n *
/// flat_rows + row) * pw + col, converted to the math's operand type as
/// block::conv_patch_loader::pack_entry (tf32 round to nearest even, the 3xTF32 big part 0 / small part 1,
/// bf16 or fp16 pairs); zero outside x, for channels >= C and past the last image. The windows of
/// consecutive tiles overlap by the taps' reach (those pixels are packed twice). Consecutive threads take
/// consecutive window pixels (coalesced stores, loads `stride` elements apart). Grid: x = the (tile,
/// stage) block t * kt + s (tiles * kt of them), y = ceil(part_bytes / 16 / blockDim.x) chunks of its first
/// part's entries.
template <class Policy>
__global__ void pack_x_kernel(const float* __restrict__ x, void* __restrict__ out, const block::wgmma_conv_params k) {
  using loader = block::conv_patch_loader<Policy>;
  constexpr int E = 16 / Policy::filter_elem_bytes, W = Policy::parts == 2 ? 8 : 4;
  convred::detail::launch_dependent_grids();  // the main kernel's set-up overlaps this pass (PDL)
  const std::int32_t per = k.part_bytes / 16;  // entries of one part of a (tile, stage) block
  const std::int32_t rem = static_cast<std::int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  if (rem >= per) return;
  const int phases = k.phases_h * k.phases_w;
  const std::int32_t blk = static_cast<std::int32_t>(blockIdx.x);  // t * kt + s
  const std::int32_t w = rem % k.phase_pixels, pj = rem / k.phase_pixels;
  const int phase = pj % phases, jj = pj / phases;
  const std::int32_t t = blk / k.kt, stage = blk - t * k.kt;
  const std::int32_t o = t * Policy::block_m + w;  // < flat_pixels < 2^31
  std::int32_t n, r, row, col;
  k.div_image.divmod(o, n, r);
  k.div_pw.divmod(r, row, col);
  const int h = k.stride * row + phase / k.phases_w - k.pad_h, wc = k.stride * col + phase % k.phases_w - k.pad_w;
  const bool in = n < k.N && h >= 0 && h < k.H && wc >= 0 && wc < k.W;
  const std::int64_t c0 = (static_cast<std::int64_t>(stage) * (k.part_bytes / k.plane_bytes) + jj) * E,
                     plane = static_cast<std::int64_t>(k.H) * k.W;
  const float* src = x + ((n * static_cast<std::int64_t>(k.C) + c0) * k.H + h) * k.W + wc;
  float f[E];
#pragma unroll
  for (int e = 0; e < E; ++e) f[e] = in && c0 + e < k.C ? src[e * plane] : 0.f;
  std::uint32_t wd[W];
  loader::template pack_entry<W>(f, wd);
  uint4* dst = static_cast<uint4*>(out) + static_cast<std::int64_t>(blk) * Policy::parts * per + rem;
  *dst = make_uint4(wd[0], wd[1], wd[2], wd[3]);
  if constexpr (W == 8) dst[per] = make_uint4(wd[4], wd[5], wd[6], wd[7]);  // the small parts: part 1
}

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

/// @brief The block of conv2d_reduce_wgmma_kernel<Policy, ..., Gather>: two consumer warpgroups and
/// Policy::producer_threads / 128 producer warpgroups in the TMA variant, Policy::gather_producers in the
/// gathering one; the registers each side gets after setmaxnreg (216 / 72 with one producer warpgroup,
/// 184 / 72 with two), and the transform threads: all producer threads but warp 0 in the TMA variant
/// (thread 0 issues the TMA boxes, thread 1 the filter copies: 96 or 224 threads), all of them in the
/// gathering one (thread 0 also copies the filter slices).
template <class Policy, bool Gather>
struct wgmma_block {
  static constexpr int producers = Gather ? Policy::gather_producers : Policy::producer_threads / 128;  ///< producer warpgroups
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
    for (std::int64_t unit = sched.first(); unit < sched.units; unit = sched.next(unit)) {
      const tile_scheduler::coord t = sched.decode(unit);  // flat: coord n is the tile
      int first, last;
      sched.slices(unit, first, last);
      for (int sl = first; sl < last; ++sl, st.advance()) {
        CONVRED_WGMMA_PHASE(6, st.wait_free(tail.empty));
        unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
        if constexpr (Direct)  // a TMA box of x from NCHW
          loader::copy_direct(stage, &tail.full[st.slot], x_map, prm, sl, static_cast<int>(t.n),
                              static_cast<int>(t.tp) * prm.tile_rows);
        else  // the stage's planes of the packed x
          loader::copy_flat(stage, &tail.full[st.slot], prm, sl, t.n);
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
                                                  (sl % prm.kt) * Policy::block_c, pt, transform));
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
      const int kt = sl % prm.kt;                                      // stage kt of the pass
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

/// @brief A consumer warpgroup's work: per stage one commit group of wgmmas (block::conv_mainloop_wgmma),
/// the stage released when the next stage's group is issued and its own has completed (3xTF32: when
/// run_stage returns, the stage complete); the first stage of each pass of a unit starts the accumulators
/// (scale-d = 0). Fused mode: per channel pass of 128 output channels (npass of them, K > 128), the
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
template <class Policy, class Op, class Epilogue, bool Gather, bool Direct = false>
__device__ __forceinline__ void consume(const block::wgmma_conv_params& prm, const wgmma_smem<Policy, Op>& sm,
                                        const tile_scheduler& sched, Op op, Epilogue epi, float* y,
                                        std::int64_t* indices) {
  CONVRED_WGMMA_PROBE(threadIdx.x == 0 || threadIdx.x == 128);
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  using epilogue_t = block::reduce_epilogue<mainloop, Op, false>;  // states in registers
  constexpr int BN = Policy::block_n;
  auto& tail = sm.tail;
  epilogue_t red(tail.reduce, op);
  pipeline_state st(prm.stages);
  float d[2][64];
  int prev = -1;
  int off[mainloop::TM] = {};  // direct tiles: this thread's pixels in a stage's box of x
  if constexpr (Direct) mainloop::direct_offsets(prm, off);
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
    for (int sl = first; sl < last;) {  // one channel pass (partial mode: one pass's GEMM_K range)
      const int pass = sl / prm.kt, pass_end = min(last, (pass + 1) * prm.kt);
      for (int s = sl; s < pass_end; ++s, st.advance()) {
        CONVRED_WGMMA_PHASE(1, st.wait_full(tail.full));
        const unsigned char* stage = sm.stages + st.slot * prm.stage_bytes;
        const unsigned char* filter = prm.resident_bytes ? sm.base + static_cast<std::int64_t>(s) * prm.b_bytes : stage;
        if constexpr (Direct)
          mainloop::run_stage_direct(filter, stage + prm.a_offset, d, s == sl, prm, off);
        else
          mainloop::template run_stage<Gather>(filter, stage + prm.a_offset, d, s == sl, prm);
        if constexpr (mainloop::promotes) {  // the stage has completed: release it now
          convred::detail::mbarrier_arrive(&tail.empty[st.slot]);
          continue;
        }
        warpgroup::wait<1>();  // the previous stage's group has completed: release its slot
        if (prev >= 0) convred::detail::mbarrier_arrive(&tail.empty[prev]);
        prev = st.slot;
      }
      const bool done = pass_end == last;
      if (Policy::pingpong && done) convred::detail::mbarrier_arrive(&tail.order[wg ^ 1]);  // the other's turn
      if (done) t = sched.decode(unit);  // worked out while the last wgmmas run
      warpgroup::wait<0>();
      mainloop::fence_acc(d);
      CONVRED_WGMMA_UNIT_END(done);
      if constexpr (!mainloop::promotes) convred::detail::mbarrier_arrive(&tail.empty[prev]);
      prev = -1;
      const int k0 = pass * BN;
      if (prm.partial) {  // partial mode (one pass per unit: done): the raw sums of split z, rows m - partial_m0
        const std::int64_t m0 = mainloop::promotes ? 0 : prm.partial_m0, plane = (prm.N * prm.P * prm.Q - m0) * prm.K;
        float* out = prm.partial + sched.split_of(unit) * plane + k0;
        // the rows' alignment: 16 bytes where every row and pass starts 16-byte aligned, else 8 where even
        const int vec = prm.K % 4 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0 ? 4 : prm.K % 2 == 0 ? 2 : 1;
        CONVRED_WGMMA_PHASE(3, mainloop::store_raw(d, out, prm.K, min(BN, prm.K - k0), vec, [&](int px) {
                                                  const std::int64_t m = pixel(px);
                                                  return m < 0 ? m : m - m0;
                                                }));
      } else {  // the pass complete: its 128 channels folded into the states
        float acc[mainloop::TM][mainloop::TN];
        mainloop::to_tile(d, acc);
        CONVRED_WGMMA_PHASE(2, red.fold(acc, bias, epi, k0, min(BN, prm.K - k0), mainloop::tile_n, state));
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

/// @brief Persistent fused kernel: block b computes the work units tile_scheduler gives it (tiles of tile_h x
/// 64 output pixels; cooperative: both consumer warpgroups on each unit; ping-pong: the warpgroups take
/// turns). Fused mode (prm.partial null): y (and indices) written, a unit per tile. Partial mode
/// (prm.partial set, prm.splits GEMM_K splits, prm.bias null): a unit per (tile, split, channel pass), the
/// raw accumulators written to prm.partial ([z][m - partial_m0][k], see wgmma_conv_params::partial) and y,
/// indices, op and epi unused; kernel::conv2d_reduce_split_fixup_kernel finishes the job
/// (device::conv2d_reduce_packed_split). A launch runs tiles [tile0, tile0 + tiles) of the problem: a
/// split-K tail is a second launch in partial mode over the last tiles, after the head's fused or pass-mode
/// launch over the others (wgmma_conv_params::tile0, partial_m0).
/// The mode is a run-time parameter: the same instantiation serves both.
/// Warpgroup 2 (and 3: wgmma_block, two producer warpgroups for Policy::producer_threads = 256 and, except
/// under 3xTF32, for the gathering variant) produces (produce; its registers lowered with setmaxnreg),
/// warpgroups 0-1 consume
/// (consume). Synchronisation is by mbarriers only (no block-wide barrier after the set-up).
/// Its phases have probes (CONVRED_WGMMA_PHASE and friends, nothing by default) that a diagnosis build
/// may time (bench/wgmma_clocks.cuh).
/// Direct: the variant for direct tiles (prm.direct: tf32 1x1, x read by TMA from NCHW, the consumers
/// loading the A fragments into registers; produce's and consume's Direct code, compiled out of the others).
/// Gather: the variant for parameters with `gather` set (stride 2, W % 4 != 0; the producer threads load x
/// themselves) and for flat tiles at stride 2 (their taps read stride phases); the TMA variant (Gather =
/// false) is compiled without that code, which would cost its 72-register producer spills. Flat tiles
/// (prm.flat) run in either variant with one producer thread issuing bulk copies of the packed x
/// (conv_patch_loader::copy_flat). Pass mode (prm.states): y and indices unused; each unit's reduction
/// states go to prm.states for kernel::conv2d_reduce_pass_combine_kernel.
template <class Policy, class Op, class Epilogue, bool Gather = false, bool Direct = false>
__global__ void __launch_bounds__(wgmma_block<Policy, Gather>::threads, 1)
    conv2d_reduce_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const block::wgmma_conv_params prm, Op op,
                               Epilogue epi, float* y, std::int64_t* indices) {
#if CONVRED_HAS_WGMMA
  extern __shared__ __align__(128) unsigned char smem[];
  const wgmma_smem<Policy, Op> sm(smem, prm);
  const int tid = static_cast<int>(threadIdx.x);
  // the TMA producer's tensor map, fetched while the block sets up
  if (tid == Policy::consumer_threads && !prm.gather && !prm.flat) convred::detail::prefetch_tensormap(&x_map);
  if (tid == 0) init_barriers<Policy, Op, Gather>(sm.tail, prm);
  using blk = wgmma_block<Policy, Gather>;
  for (int i = tid; i < Policy::block_n; i += blk::threads)
    sm.tail.bias[i] = prm.bias && i < prm.K ? prm.bias[i] : 0.f;
  __syncthreads();
  // launched after kernel::pack_x_kernel with PDL (flat tiles): the packed x is read only past this point
  convred::detail::wait_prior_grids();
  convred::detail::launch_dependent_grids();  // the fixup or combine may take SMs as blocks finish
  // 3xTF32 runs no split-K tail (device::choose_wgmma_tail): its consumers sit at their register limit,
  // where the tail's offsets made ptxas spill ~280 bytes (sm_90a, nvcc 13.0)
  constexpr bool tails = Policy::parts == 1;
  const tile_scheduler sched(prm, tails ? prm.tile0 : 0);
  if (tid >= Policy::consumer_threads) {  // producer warpgroup(s)
    warpgroup::set_max_registers<blk::producer_registers, false>();
    produce<Policy, Op, Gather, Direct>(&x_map, prm, sm, sched, tid - Policy::consumer_threads);
    return;
  }
  warpgroup::set_max_registers<blk::consumer_registers, true>();
  consume<Policy, Op, Epilogue, Gather, Direct>(prm, sm, sched, op, epi, y, indices);
#else
  (void)x_map, (void)prm, (void)op, (void)epi, (void)y, (void)indices;
#endif
}

/// @brief Probe of the image the current device runs, read without a launch (cudaFuncGetAttributes): with
/// Wgmma = true its static shared memory is 4096 bytes in an sm_90a image and 32 otherwise; with Wgmma =
/// false always 32. The difference tells sm_90a apart, whatever the system reserves per block and however
/// the section is rounded (to 128 bytes in some images).
template <bool Wgmma>
__global__ void wgmma_probe_kernel(int* out) {
  constexpr int n = (Wgmma && CONVRED_HAS_WGMMA) ? 1024 : 8;
  __shared__ int s[n];
  volatile int* v = s;
  for (int i = 0; i < n; ++i) v[i] = i;
  if (out) *out = v[static_cast<int>(threadIdx.x) % n];
}

}  // namespace convred::kernel
