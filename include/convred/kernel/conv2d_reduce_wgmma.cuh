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
#include "../detail/tma.cuh"
#include "../functional.cuh"

namespace convred::kernel {

/// @brief Packs KCRS fp32 weights (K <= 128, groups 1) into the wgmma kernel's shared-memory image, one
/// thread per packed element. Layout, in elements: [stage kt][part][tap r*S+s][n/8][c/E][n%8][c%E] with
/// E = 16 / element bytes (one 16-byte core-matrix row), c = channel within the stage's block_c; so each
/// tap's 128 x block_c slice is K-major no-swizzle core matrices (128 B each, 128 B apart along K, 256 B
/// along N). Values: tf32 (round to nearest even), the 3xTF32 big / small parts (part 0 / 1), bf16 or fp16
/// (round to nearest even); zero for n >= K and c >= C.
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
  const std::int64_t kt = rest / Policy::parts;
  const int n = ng * 8 + n8;
  const std::int64_t c = kt * BC + cb * E + ce;
  const int r = tap / S, s = tap % S;
  const float v = (n < K && c < C) ? w[((static_cast<std::int64_t>(n) * C + c) * R + r) * S + s] : 0.f;
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

#ifdef CONVRED_EXP_CLOCKS
/// Diagnosis builds only (bench/wgmma_stages.cu): clock64 cycles summed over the blocks. Consumers
/// (threads 0 and 128): [0] tile mainloop incl. waits, [1] full-barrier waits, [2] epilogue math,
/// [3] reduction and stores, [4] tiles; transform warp 0 lane 0: [5] raw-buffer waits, [6] stage-slot
/// waits, [7] plane conversion.
__device__ unsigned long long exp_clocks[8];
/// Runs stmt and adds its clock64 cycles to clk[slot] (diagnosis builds).
#define CONVRED_EXP_TIME(slot, stmt)      \
  do {                                    \
    const long long t0_ = clock64();      \
    stmt;                                 \
    clk[slot] += clock64() - t0_;         \
  } while (0)
#else
/// Runs stmt (CONVRED_EXP_CLOCKS builds also count its cycles).
#define CONVRED_EXP_TIME(slot, stmt) stmt
#endif

/// @brief Shared memory of conv2d_reduce_wgmma_kernel after its operand stages and raw patch buffers
/// (dynamic): the reduction's storage and the mbarriers.
template <class Policy, class Op>
struct wgmma_tail_storage {
  /// the reduction's shared memory
  typename block::reduce_epilogue<block::conv_mainloop_wgmma<Policy>, Op, false>::TempStorage reduce;
  std::uint64_t full[Policy::stages];           ///< operand stage s ready (transform warps [+ filter bytes])
  std::uint64_t filter_full;                    ///< the resident filter landed (when resident)
  std::uint64_t empty[Policy::stages];          ///< operand stage s consumed (every consumer thread)
  std::uint64_t raw_full[Policy::raw_stages];   ///< raw buffer landed (TMA bytes)
  std::uint64_t raw_empty[Policy::raw_stages];  ///< raw buffer read (every transform thread)
  std::uint64_t order[2];  ///< ping-pong: order[g] completes when the other warpgroup's mainloop turn ended
  float bias[Policy::block_n];  ///< the bias (zeros past K), read once per block
};

/// @brief A position in a ring of `N` buffers: the slot and the phase parity of its mbarriers (flips each
/// time the ring wraps). Producers wait for a slot's release with `phase ^ 1`, consumers for its fill
/// with `phase`; `count` says how many positions came before (the first N fills need no release).
template <int N>
struct pipeline_state {
  int slot = 0;             ///< buffer index
  std::uint32_t phase = 0;  ///< parity of the slot's current mbarrier phase
  std::int64_t count = 0;   ///< positions passed so far
  /// Moves to the next buffer.
  __device__ void advance() {
    ++count;
    if (++slot == N) slot = 0, phase ^= 1;
  }
  /// Waits until the slot's previous contents were released on `bars[slot]` (no wait for the first N).
  __device__ void wait_free(std::uint64_t* bars) const {
    if (count >= N) convred::detail::mbarrier_wait(&bars[slot], phase ^ 1);
  }
  /// Moves to position `pos` (a consumer skipping the positions of tiles another warpgroup consumes).
  __device__ void seek(std::int64_t pos) {
    count = pos;
    slot = static_cast<int>(pos % N);
    phase = static_cast<std::uint32_t>((pos / N) & 1);
  }
  /// Waits until the slot was filled (its `bars[slot]` phase completed).
  __device__ void wait_full(std::uint64_t* bars) const { convred::detail::mbarrier_wait(&bars[slot], phase); }
};

/// @brief Persistent fused kernel: block b computes tiles b, b + gridDim.x, ... of tile_h x 64 output
/// pixels (cooperative: both consumer warpgroups on each tile; ping-pong: the warpgroups take turns).
/// Warpgroup 2 produces (its registers lowered with setmaxnreg): one thread issues the TMA copy of each
/// raw patch buffer (raw_c channels; a stage of block_c channels is block_c / raw_c of them), another the
/// bulk copy of the stage's packed filter slice (or, once, of the whole filter when it is resident, see
/// wgmma_conv_params) (block::conv_patch_loader), each running ahead across tile boundaries as its
/// buffers are released; the other three warps convert each raw buffer into the stage's planes.
/// Warpgroups 0-1 consume: per stage one commit group of wgmmas (block::conv_mainloop_wgmma), released
/// when the next stage's group is issued and the stage's own has completed; per tile, the epilogue
/// e(acc + bias[k], k) and the reduction across the K channels in registers and warp shuffles
/// (block::reduce_epilogue, fold + finish); y and indices written once. Synchronisation is by mbarriers
/// only (no block-wide barrier after the set-up).
/// Diagnosis builds only (bench/wgmma_stages.cu, bench/NOTES.md): `-DCONVRED_EXP_CLOCKS` counts cycles per
/// phase (exp_clocks); wrong results: `-DCONVRED_EXP_NOMMA` skips the consumers' wgmmas (times the
/// producer alone), `-DCONVRED_EXP_NOTRANSFORM` skips the plane conversion, `-DCONVRED_EXP_NOLOAD` skips
/// every copy and the conversion (times the consumers alone).
template <class Policy, class Op, class Epilogue>
__global__ void __launch_bounds__(Policy::threads, 1)
    conv2d_reduce_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, const block::wgmma_conv_params prm, Op op,
                               Epilogue epi, float* y, std::int64_t* indices) {
#if CONVRED_HAS_WGMMA
  using mainloop = block::conv_mainloop_wgmma<Policy>;
  using loader = block::conv_patch_loader<Policy>;
  constexpr int S = Policy::stages, SR = Policy::raw_stages, TW = Policy::tile_w, TH = Policy::tile_h;
  constexpr int transform_threads = 96;  // producer warps 1-3
  constexpr int E = 16 / Policy::filter_elem_bytes, chunks = Policy::block_c / Policy::raw_c;  // raw buffers per stage
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* stages = smem + prm.resident_bytes;  // the resident filter (if any) comes first
  unsigned char* raw = stages + S * prm.stage_bytes;
  auto& tail = *reinterpret_cast<wgmma_tail_storage<Policy, Op>*>(raw + SR * prm.raw_bytes);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      convred::detail::mbarrier_init(&tail.full[s], transform_threads + (prm.resident_bytes ? 0 : 1));
      convred::detail::mbarrier_init(&tail.empty[s], Policy::pingpong ? 128 : Policy::consumer_threads);
    }
    for (int s = 0; s < SR; ++s) {
      convred::detail::mbarrier_init(&tail.raw_full[s], 1);
      convred::detail::mbarrier_init(&tail.raw_empty[s], transform_threads);
    }
    convred::detail::mbarrier_init(&tail.filter_full, 1);
    convred::detail::mbarrier_init(&tail.order[0], 128);
    convred::detail::mbarrier_init(&tail.order[1], 128);
    convred::detail::mbarrier_init_fence();
  }
  for (int i = tid; i < Policy::block_n; i += Policy::threads)
    tail.bias[i] = prm.bias && i < prm.K ? prm.bias[i] : 0.f;
  __syncthreads();
  auto decode = [&](std::int64_t tile, std::int64_t& n, std::int64_t& tp, std::int64_t& tq) {
    tq = tile % prm.tiles_q;
    const std::int64_t rest = tile / prm.tiles_q;
    tp = rest % prm.tiles_p, n = rest / prm.tiles_p;
  };
  pipeline_state<S> st;
  pipeline_state<SR> rs;
#ifdef CONVRED_EXP_CLOCKS
  unsigned long long clk[8] = {};
  struct flush_clocks {  // adds this thread's counts at every exit
    unsigned long long* c;
    bool on;
    __device__ ~flush_clocks() {
      if (on)
        for (int i = 0; i < 8; ++i) atomicAdd(&exp_clocks[i], c[i]);
    }
  } flush_{clk, tid == 0 || tid == 128 || tid == Policy::consumer_threads + 32};
#endif

  if (tid >= Policy::consumer_threads) {  // producer warpgroup
    warpgroup::set_max_registers<Policy::producer_registers, false>();
    const int pt = tid - Policy::consumer_threads;
    if (pt == 1 && prm.resident_bytes) {  // the resident filter: copied once
      loader::copy_filter_resident(smem, &tail.filter_full, prm);
    } else if (pt < 2 || pt >= 32) {
      for (std::int64_t tile = blockIdx.x; tile < prm.tiles; tile += gridDim.x) {
        std::int64_t n, tp, tq;
        decode(tile, n, tp, tq);
        const int h0 = static_cast<int>(tp) * TH - prm.pad_h;
        const int w0 = static_cast<int>(tq) * TW - prm.pad_w - prm.col_shift;
        for (int kt = 0; kt < prm.kt; ++kt, st.advance()) {
          unsigned char* stage = stages + st.slot * prm.stage_bytes;
          if (pt == 1) {  // the filter copier: as soon as the consumers release the stage
            st.wait_free(tail.empty);
            loader::copy_filter(stage, &tail.full[st.slot], prm, kt);
            continue;
          }
          if (pt >= 32) CONVRED_EXP_TIME(6, st.wait_free(tail.empty));
          for (int c = 0; c < chunks; ++c, rs.advance()) {  // the stage's raw buffers of raw_c channels
            unsigned char* rbuf = raw + rs.slot * prm.raw_bytes;
            if (pt == 0) {  // the patch copier: runs up to raw_stages buffers ahead of the transform
              rs.wait_free(tail.raw_empty);
              loader::copy_patch(rbuf, &tail.raw_full[rs.slot], &x_map, prm, static_cast<int>(n), h0, w0,
                                 kt * Policy::block_c + c * Policy::raw_c);
            } else {  // the transform warps
              CONVRED_EXP_TIME(5, rs.wait_full(tail.raw_full));
              CONVRED_EXP_TIME(7, loader::to_planes(reinterpret_cast<const float*>(rbuf),
                                                    stage + prm.a_offset + c * (Policy::raw_c / E) * prm.plane_bytes,
                                                    prm, pt - 32, transform_threads));
              convred::detail::mbarrier_arrive(&tail.raw_empty[rs.slot]);
            }
          }
          if (pt >= 32) convred::detail::mbarrier_arrive(&tail.full[st.slot]);
        }
      }
    }
    return;
  }

  warpgroup::set_max_registers<Policy::consumer_registers, true>();
  using epilogue_t = block::reduce_epilogue<mainloop, Op, false>;  // one channel tile: states in registers
  epilogue_t red(tail.reduce, op);
  float d[2][64];
  int prev = -1;
  if (prm.resident_bytes) convred::detail::mbarrier_wait(&tail.filter_full, 0);
  // cooperative: both warpgroups consume every tile of the block; ping-pong: warpgroup g the block's
  // tiles g, g + 2, ... (its stages at ring positions i * kt ..., the other warpgroup's skipped), the
  // two taking turns at issuing their mainloops (order[]): a warpgroup starts tile i's mainloop once the
  // other has issued tile i - 1's, so it never waits on a stage barrier more than one phase ahead (the
  // parity waits would alias) and its epilogue runs under the other's wgmmas
  constexpr int step = Policy::pingpong ? 2 : 1;
  const int wg = tid / 128, first_i = Policy::pingpong ? wg : 0;
  for (std::int64_t i = first_i, tile = blockIdx.x + first_i * std::int64_t(gridDim.x); tile < prm.tiles;
       i += step, tile += step * std::int64_t(gridDim.x)) {
    if (Policy::pingpong) {
      if (i > 0) convred::detail::mbarrier_wait(&tail.order[wg], static_cast<std::uint32_t>(((i - 1) / 2) & 1));
      st.seek(i * prm.kt);
    }
#ifdef CONVRED_EXP_CLOCKS
    const long long tile_t0 = clock64();
    ++clk[4];
#endif
    for (int kt = 0; kt < prm.kt; ++kt, st.advance()) {
      CONVRED_EXP_TIME(1, st.wait_full(tail.full));
#ifndef CONVRED_EXP_NOMMA
      const unsigned char* stage = stages + st.slot * prm.stage_bytes;
      mainloop::run_stage(prm.resident_bytes ? smem + kt * prm.b_bytes : stage, stage + prm.a_offset, d, kt == 0, prm);
#else
      if (kt == 0) for (int e = 0; e < 64; ++e) d[0][e] = d[1][e] = 0.f;
#endif
      if constexpr (mainloop::promotes) {  // the stage has completed: release it now
        convred::detail::mbarrier_arrive(&tail.empty[st.slot]);
        continue;
      }
      warpgroup::wait<1>();  // the previous stage's group has completed: release its slot
      if (prev >= 0) convred::detail::mbarrier_arrive(&tail.empty[prev]);
      prev = st.slot;
    }
    if (Policy::pingpong) convred::detail::mbarrier_arrive(&tail.order[wg ^ 1]);  // the other's turn
    std::int64_t n, tp, tq;  // the tile's image and position, worked out while the last wgmmas run
    decode(tile, n, tp, tq);
    warpgroup::wait<0>();
    mainloop::fence_acc(d);
#ifdef CONVRED_EXP_CLOCKS
    clk[0] += clock64() - tile_t0;
#endif
    if constexpr (!mainloop::promotes) convred::detail::mbarrier_arrive(&tail.empty[prev]);
    prev = -1;
    // tile complete: epilogue + reduction
    float acc[mainloop::TM][mainloop::TN];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[2 * mt + e / 2][2 * j + e % 2] = d[mt][4 * j + e];
    typename epilogue_t::accum_t state[mainloop::TM];
#pragma unroll
    for (int i = 0; i < mainloop::TM; ++i) state[i] = Op::template identity<float>();
    CONVRED_EXP_TIME(2, red.fold(acc, prm.bias ? tail.bias : nullptr, epi, 0, prm.K, mainloop::tile_n, state));
    const std::int64_t p0 = tp * TH, q0 = tq * TW;
    CONVRED_EXP_TIME(3, red.finish(state, y, indices, prm.K, mainloop::tile_m, [&](int px) {
      const std::int64_t p = p0 + px / TW, q = q0 + px % TW;
      return p < prm.P && q < prm.Q ? (n * prm.P + p) * prm.Q + q : std::int64_t(-1);
    }));
  }
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
