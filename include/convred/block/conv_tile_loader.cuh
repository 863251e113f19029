/// @file block/conv_tile_loader.cuh
/// @brief Block-level implicit-GEMM operand loader: streams the im2col slice of x and the matching weight
/// slice of one (BlockM pixels x BlockN channels) tile through multi-stage shared memory (cp.async pipeline; double-buffered for 16-bit inputs).
#pragma once

#include <cstdint>

#include "../detail/load.cuh"
#include "conv_params.cuh"
#include "../numeric.cuh"

namespace convred::block {

/// @brief Shared-memory layout of a BlockK x Cols operand stage with k as the row: offset(k, c) =
/// k * (Cols + Pad) + c (consecutive pixels/channels contiguous: 16-byte vector fragment loads).
template <int Rows, int Cols, int Pad>
struct smem_k_major {
  static constexpr int size = Rows * (Cols + Pad);  ///< elements per stage
  static constexpr bool k_fastest = false;           ///< consecutive elements run along pixels/channels
  /// Offset of element (k, c).
  __host__ __device__ static constexpr int offset(int k, int c) { return k * (Cols + Pad) + c; }
};

/// @brief Shared-memory layout of a BlockK x Cols operand stage with the pixel/channel as the row:
/// offset(k, c) = c * (Rows + Pad) + k (consecutive k contiguous).
template <int Rows, int Cols, int Pad>
struct smem_n_major {
  static constexpr int size = Cols * (Rows + Pad);  ///< elements per stage
  static constexpr bool k_fastest = true;            ///< consecutive elements run along k
  /// Offset of element (k, c).
  __host__ __device__ static constexpr int offset(int k, int c) { return c * (Rows + Pad) + k; }
};

/// @brief Gathers the operands of one implicit-GEMM block tile into shared memory, slice by slice.
///
/// Implicit GEMM (GEMM_M = N*P*Q pixels, GEMM_N = K channels, GEMM_K = (C/groups)*R*S, kk = (c*R + r)*S + s),
/// as in cuDNN's and CUTLASS's implicit-GEMM formulations: the im2col matrix is never materialised. Each
/// slice is BlockK rows of GEMM_K: `a[buf][k][m]` = x at pixel m0 + m, tap kk0 + k (zero for padding taps,
/// pixels past GEMM_M and rows past GEMM_K) and `b[buf][k][n]` = w[k_first + n, kk0 + k] (zero past the
/// group's channels), both in the compute type. Thread t loads pixel `t % BlockM` (decoded once, in the
/// constructor) for rows `t / BlockM + i * (Threads / BlockM)`, and weights of channel `t / (BlockK / eB)`.
/// 4- and 8-byte types are copied with cp.async (no registers held in flight; the next slice is in flight
/// while the current one is consumed); 16-bit types are staged through registers and converted to fp32.
/// ALayout/BLayout place element (k, m) / (k, n) of a stage in shared memory (`smem_k_major` or
/// `smem_n_major`), to suit the consumer's fragment loads.
template <class T, int BlockM, int BlockN, int BlockK, int Threads, class ALayout, class BLayout, int Stages = 2>
struct conv_tile_loader {
  using V = compute_t<T>;  ///< compute type held in shared memory
  /// @var BM
  /// @brief pixels per block tile (GEMM_M rows), BlockM
  /// @var BN
  /// @brief output channels per block tile (GEMM_N columns), BlockN
  /// @var BK
  /// @brief GEMM_K rows per slice (shared-memory stage), BlockK
  /// @var NT
  /// @brief threads per block, Threads
  static constexpr int BM = BlockM, BN = BlockN, BK = BlockK, NT = Threads;
  /// True when elements are copied global -> shared asynchronously (cp.async; T is 4 or 8 bytes and is its
  /// own compute type); 16-bit types are staged through registers and converted to fp32 on the way.
  static constexpr bool async_copy = sizeof(T) == sizeof(V);
  /// Shared-memory stages: Stages for the cp.async path, 2 for the register path.
  static constexpr int S = async_copy ? Stages : 2;
  static_assert(Stages >= 2, "conv_tile_loader: at least two stages");
  static constexpr int A_PER_THREAD = BK * BM / NT;  ///< im2col elements staged per thread per slice
  static constexpr int A_ROW_STEP = NT / BM;          ///< k-row stride between a thread's A elements
  static constexpr int B_PER_THREAD = BK * BN / NT;  ///< weights staged per thread per slice
  static constexpr int B_THREADS_PER_N = BK / B_PER_THREAD;  ///< threads sharing a channel (k-major B)
  /// Weight elements are assigned so that a warp's stores are conflict-free in BLayout: for a k-major
  /// stage consecutive threads take consecutive channels; for an n-major stage (BLayout::k_fastest)
  /// consecutive threads take consecutive k of one channel, which also makes the global reads of a warp
  /// contiguous (128 bytes of one KCRS weight row).
  static constexpr bool b_k_fastest = BLayout::k_fastest;
  static_assert(!b_k_fastest || (NT % BK == 0 && BN % (NT / BK) == 0), "n-major weight stage: threads must tile it");
  static_assert(NT % BM == 0 && (BK * BM) % NT == 0 && (BK * BN) % NT == 0 && BK % B_PER_THREAD == 0,
                "conv_tile_loader: threads must tile the slices evenly");

  /// Decoded GEMM_K index kk = (c, r, s) of one im2col row: x offset of the tap relative to the pixel's
  /// origin, and the tap's row/column displacement (r*dil_h, s*dil_w; -2^30 marks kk past GEMM_K).
  /// 16 bytes, 16-byte aligned: one shared-memory load (LDS.128, a broadcast: a warp reads one row's tap).
  struct alignas(16) tap {
    std::int64_t delta;  ///< x offset in bytes of channel g*Cg + c at (dh, dw), relative to a_base; 0 past GEMM_K
    /// @var dh
    /// @brief row displacement r*dil_h; invalid_coord (-2^30) for kk past GEMM_K
    std::int32_t dh, dw;  ///< column displacement s*dil_w; 0 past GEMM_K
  };

  /// Shared memory: S stages of the im2col slice (ALayout), of the weight slice (BLayout),
  /// and of the decoded taps of the slice's BK rows (built one slice ahead by the first BK threads, so the
  /// (c, r, s) divisions are done once per row per block instead of once per element).
  struct TempStorage {
    alignas(16) V a[S][ALayout::size];  ///< im2col slice of each stage: BK x BM compute values, placed by ALayout
    alignas(16) V b[S][BLayout::size];  ///< weight slice of each stage: BK x BN compute values, placed by BLayout
    tap taps[S][BK];                    ///< decoded taps of the BK GEMM_K rows of each stage's slice
  };

  static constexpr std::int32_t invalid_coord = -(1 << 30);  ///< fails every bounds check (validated sizes)

  TempStorage& smem;                  ///< the block's shared memory (caller-placed)
  const block::conv_params<T>& prm;  ///< the kernel parameters (referenced, not copied)
  // This thread's im2col row (pixel) for the A loads.
  /// @var a_h0
  /// @brief input row of the top-left tap of this thread's pixel (p*stride_h - pad_h); invalid_coord
  /// past GEMM_M, so every A load of such a thread reads zero
  std::int32_t a_h0, a_w0;  ///< input column of the top-left tap of this thread's pixel (q*stride_w - pad_w)
  /// address of x at (n, channel 0, a_h0, a_w0) in x's layout, as bytes (a tap's delta is added to it; it
  /// may lie outside x: only the addresses of taps inside the image are read); x itself past GEMM_M
  const char* a_base;
  // This thread's weights (set by run() for its channel tile): element v of a slice starting at GEMM_K row
  // kk0 is b_ptr + kk0 + v * b_step, inside the tile's group when v < b_count (n-major: the tile's
  // channels; k-major: the thread's channel) and kk0 + b_k(v) < gemm_k.
  const T* b_ptr = nullptr;     ///< weight of this thread's element 0 at GEMM_K row 0 (may lie outside w: not read then)
  std::int64_t b_step = 0;      ///< distance between this thread's consecutive weight elements (elements)
  int b_count = 0;              ///< elements v < b_count are inside the group's channels (n-major stage)

  /// Decodes the pixel this thread loads for block tile starting at GEMM_M row m0.
  __device__ conv_tile_loader(TempStorage& s, const block::conv_params<T>& p, std::int64_t m0) : smem(s), prm(p) {
    const std::int64_t m = m0 + static_cast<int>(threadIdx.x) % BM;
    const bool valid = m < p.M;
    const std::int64_t mm = valid ? m : 0;
    const std::int64_t n = mm / p.PQ, pq = mm - n * p.PQ;
    const std::int64_t op = pq / p.Q, oq = pq - op * p.Q;
    a_h0 = valid ? static_cast<std::int32_t>(op * p.stride_h - p.pad_h) : invalid_coord;
    a_w0 = static_cast<std::int32_t>(oq * p.stride_w - p.pad_w);
    const std::int64_t hw = std::int64_t(a_h0) * p.W + a_w0;
    const std::int64_t a_off = n * p.C * p.H * p.W + (p.x_layout == layout::nchw ? hw : hw * p.C);
    a_base = reinterpret_cast<const char*>(p.x) + (valid ? a_off * std::int64_t(sizeof(T)) : 0);
  }

  /// Threads [0, BK) decode the taps of slice kk0 (rows kk0 .. kk0+BK-1) of group g into taps[slot].
  __device__ void build_taps(int slot, std::int32_t kk0, std::int32_t g) {
    const int t = static_cast<int>(threadIdx.x);
    if (t >= BK) return;
    const std::int32_t kk = kk0 + t;
    tap e{0, invalid_coord, 0};
    if (kk < prm.gemm_k) {
      std::int32_t c, rs, r, s;
      prm.div_rs.divmod(kk, c, rs);
      prm.div_s.divmod(rs, r, s);
      e.dh = r * prm.dil_h, e.dw = s * prm.dil_w;
      const std::int64_t cc = std::int64_t(g) * prm.Cg + c, hw = std::int64_t(e.dh) * prm.W + e.dw;
      e.delta = (prm.x_layout == layout::nchw ? cc * prm.H * prm.W + hw : hw * prm.C + cc) * std::int64_t(sizeof(T));
    }
    smem.taps[slot][t] = e;
  }

  /// Registers holding one staged slice (register path only).
  struct staging {
    V a[async_copy ? 1 : A_PER_THREAD];  ///< this thread's A_PER_THREAD im2col values (1, unused, on the cp.async path)
    V b[async_copy ? 1 : B_PER_THREAD];  ///< this thread's B_PER_THREAD weights (1, unused, on the cp.async path)
  };

  /// Taps read from shared memory together before the copies that use them are issued: the copies write
  /// shared memory, so neither compiler may move a later tap load above them (SASS before: one tap load
  /// latency per element). 8 when A_PER_THREAD is a multiple of 8 (the tensor-core policies: 16 or 32
  /// elements per thread), else 1: the SIMT policies stage 2 or 4 elements per slice, and their 16-bit
  /// register path at 128 registers spilled 40 bytes with 4 taps held (8 with 1; 24 before this change).
  static constexpr int TAP_BATCH = A_PER_THREAD % 8 == 0 ? 8 : 1;

  /// Slice row of this thread's i-th im2col element.
  __device__ static int a_row(int i) { return static_cast<int>(threadIdx.x) / BM + i * A_ROW_STEP; }

  /// Starts moving slice kk0 (taps in taps[slot]) into stage `buf`: this thread's A (im2col) and B
  /// (weight) elements; padding taps, pixels past GEMM_M and rows past GEMM_K read zero. Their copies
  /// read nothing (cp.async with src-size 0, or the predicated-off load of the register path), so their
  /// address is left as computed, possibly outside x or w (as CUTLASS's implicit-GEMM iterators do): two
  /// integer adds per element instead of a 64-bit select and a shift.
  __device__ void begin_stage(std::int32_t kk0, int slot, int buf, staging& st) {
    const int t = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int i0 = 0; i0 < A_PER_THREAD; i0 += TAP_BATCH) {
      tap e[TAP_BATCH];
#pragma unroll
      for (int j = 0; j < TAP_BATCH; ++j) e[j] = smem.taps[slot][a_row(i0 + j)];
#pragma unroll
      for (int j = 0; j < TAP_BATCH; ++j) {
        const int i = i0 + j, row = a_row(i);
        const std::int32_t h = a_h0 + e[j].dh, w = a_w0 + e[j].dw;
        const bool ok = static_cast<std::uint32_t>(h) < static_cast<std::uint32_t>(prm.H) &&
                        static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(prm.W);
        const T* src = reinterpret_cast<const T*>(a_base + e[j].delta);  // read only when ok
        if constexpr (async_copy) {
          convred::detail::cp_async_or_zero(&smem.a[buf][ALayout::offset(row, t % BM)], src, ok);
        } else {
          st.a[i] = to_compute(convred::detail::load_or_zero(src, ok));
        }
      }
    }
    const T* bp = b_ptr + kk0;
#pragma unroll
    for (int v = 0; v < B_PER_THREAD; ++v, bp += (b_k_fastest ? b_step : 1)) {
      int n, k;
      b_coord(v, n, k);
      const bool ok = (b_k_fastest ? v < b_count : b_count > 0) && kk0 + k < prm.gemm_k;
      if constexpr (async_copy) {
        convred::detail::cp_async_or_zero(&smem.b[buf][BLayout::offset(k, n)], bp, ok);  // bp read only when ok
      } else {
        st.b[v] = to_compute(convred::detail::load_or_zero(bp, ok));
      }
    }
  }

  /// Tile channel n and slice row k of this thread's v-th weight element.
  __device__ static void b_coord(int v, int& n, int& k) {
    const int t = static_cast<int>(threadIdx.x);
    if constexpr (b_k_fastest) {
      n = t / BK + v * (NT / BK), k = t % BK;
    } else {
      n = t / B_THREADS_PER_N, k = (t % B_THREADS_PER_N) * B_PER_THREAD + v;
    }
  }

  /// Register path: stores this thread's staged registers into stage `buf` (the cp.async path completes
  /// stages with cp_async_wait in run()). A barrier must follow before other threads read the stage.
  __device__ void end_stage(int buf, const staging& st) {
    static_assert(!async_copy, "end_stage is the register path's second half");
    const int t = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int i = 0; i < A_PER_THREAD; ++i) smem.a[buf][ALayout::offset(a_row(i), t % BM)] = st.a[i];
#pragma unroll
    for (int v = 0; v < B_PER_THREAD; ++v) {
      int n, k;
      b_coord(v, n, k);
      smem.b[buf][BLayout::offset(k, n)] = st.b[v];
    }
  }

  /// Number of BK-row slices of GEMM_K, ceil(gemm_k / BK): the slice indices run and its slice range take.
  __host__ __device__ static constexpr std::int32_t slices_of(std::int32_t gemm_k) { return (gemm_k + BK - 1) / BK; }

  /// Streams slices [first, last) of GEMM_K (slice s is rows s*BK .. s*BK+BK-1; last is clamped to
  /// slices_of(gemm_k); the default is the whole of GEMM_K) of group g for channels [k_first, k_first + BN)
  /// (k_first is the global channel index of tile column 0) through the stages, calling `consume(buf)` once
  /// per slice, in slice order, with stage `buf` complete and visible to the whole block; an empty range
  /// calls it never. cp.async path: Stages-deep pipeline (Stages-1 slices in flight while one is
  /// consumed; one barrier per slice). Register path: double-buffered (the next slice's loads are in
  /// flight in registers while the current one is consumed). Ends with a barrier, so TempStorage may be
  /// reused afterwards.
  template <class Consume>
  __device__ void run(std::int32_t g, std::int64_t k_first, Consume&& consume, std::int32_t first = 0,
                      std::int32_t last = 0x7fffffff) {
    const T* w_tile = prm.w + k_first * std::int64_t(prm.gemm_k);              // weight row of tile column 0
    const int n_valid = static_cast<int>(std::int64_t(g + 1) * prm.Kg - k_first);  // channels of group g left
    {
      int n0, k0;  // this thread's element 0
      b_coord(0, n0, k0);
      b_ptr = w_tile + std::int64_t(n0) * prm.gemm_k + k0;
      if constexpr (b_k_fastest) {  // element v: channel n0 + v * (NT / BK), row k0
        b_step = std::int64_t(NT / BK) * prm.gemm_k;
        b_count = n0 < n_valid ? (n_valid - n0 + NT / BK - 1) / (NT / BK) : 0;
      } else {  // element v: channel n0, row k0 + v
        b_step = 1;
        b_count = n0 < n_valid ? 1 : 0;
      }
    }
    const int slices = min(last, slices_of(prm.gemm_k)) - first;  // slices of the range (<= 0: none)
    const std::int32_t kk_first = first * BK;                     // GEMM_K row of the range's first slice
    staging st;
    if constexpr (async_copy) {
#pragma unroll
      for (int j = 0; j < S; ++j) build_taps(j, kk_first + j * BK, g);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < S - 1; ++j) {
        if (j < slices) begin_stage(kk_first + j * BK, j, j, st);
        convred::detail::cp_async_commit();
      }
      for (int sl = 0; sl < slices; ++sl) {
        convred::detail::cp_async_wait<S - 2>();  // this thread's copies of slice sl have landed
        __syncthreads();                           // everyone's have; stage (sl-1)%S is free again
        const int nxt = sl + S - 1;
        if (nxt < slices) begin_stage(kk_first + nxt * BK, nxt % S, nxt % S, st);
        convred::detail::cp_async_commit();
        consume(sl % S);
        build_taps(sl % S, kk_first + (sl + S) * BK, g);  // slot of slice sl, last read when slice sl was issued
      }
      convred::detail::cp_async_wait<0>();
      __syncthreads();
    } else {
      build_taps(0, kk_first, g);
      build_taps(1, kk_first + BK, g);
      __syncthreads();
      begin_stage(kk_first, 0, 0, st);  // an empty range loads one unused slice (in bounds)
      end_stage(0, st);
      __syncthreads();
      for (int sl = 0; sl < slices; ++sl) {
        const bool more = sl + 1 < slices;
        if (more) begin_stage(kk_first + (sl + 1) * BK, (sl + 1) & 1, (sl + 1) & 1, st);
        consume(sl & 1);
        if (more) end_stage((sl + 1) & 1, st);
        build_taps(sl & 1, kk_first + (sl + 2) * BK, g);  // slot of slice sl, last read while loading slice sl
        __syncthreads();
      }
    }
  }
};

}  // namespace convred::block
