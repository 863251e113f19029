/// @file block/conv_mainloop.cuh
/// @brief Block-level SIMT implicit-GEMM conv mainloop: one (BlockM pixels x BlockN channels) tile of
/// conv2d accumulated in registers, GEMM_K staged through double-buffered shared memory.
#pragma once

#include <cstdint>

#include "../detail/load.cuh"
#include "../kernel/params.cuh"
#include "../numeric.cuh"

namespace convred::block {

/// @brief Computes acc[i][j] = sum over GEMM_K of x_im2col[m_i, kk] * w[k_j, kk] for one block tile.
///
/// Implicit GEMM (GEMM_M = N*P*Q pixels, GEMM_N = K channels, GEMM_K = (C/groups)*R*S, kk = (c*R + r)*S + s),
/// as in cuDNN's and CUTLASS's implicit-GEMM formulations: the im2col matrix is never materialised; each
/// thread gathers its share of a BlockK x BlockM slice of it (zero for padding taps and out-of-range
/// pixels/channels) and of the BlockK x BlockN weight slice into shared memory, with cp.async for 4- and
/// 8-byte types and through registers (converted to fp32) for 16-bit types, double-buffered: the next
/// slice is in flight while the current one is multiplied,
/// and each thread multiplies a ThreadM x ThreadN register tile with fp32 (fp64 for double) FMAs.
/// Thread t owns channel group `t % channel_groups` and pixel group `t / channel_groups`; its pixels are
/// `(i/4)*pixel_groups*4 + pg*4 + i%4` and its channels `(j/4)*channel_groups*4 + cg*4 + j%4` (4-wide
/// vector shared-memory loads, conflict-free for the default policy).
///
/// Usage: construct once per block tile (the constructor decodes this thread's pixel), then call `run`
/// for each (group, channel tile); the caller places TempStorage in shared memory.
template <class Policy, class T>
struct conv_mainloop {
  using V = compute_t<T>;  ///< compute/accumulator type
  static constexpr int BM = Policy::block_m, BN = Policy::block_n, BK = Policy::block_k;
  static constexpr int TM = Policy::thread_m, TN = Policy::thread_n, NT = Policy::threads;
  static constexpr int CG = Policy::channel_groups, PG = Policy::pixel_groups;
  static constexpr int A_PER_THREAD = BK * BM / NT;  ///< im2col elements staged per thread per slice
  static constexpr int A_ROW_STEP = NT / BM;          ///< k-row stride between a thread's A elements
  static constexpr int B_PER_THREAD = BK * BN / NT;  ///< weights staged per thread per slice
  static constexpr int B_THREADS_PER_N = BK / B_PER_THREAD;
  static constexpr int B_PAD = 4;  ///< row padding of the weight tile (bank-conflict-free transposed stores)

  /// Decoded GEMM_K index kk = (c, r, s) of one im2col row: x offset of the tap relative to the pixel's
  /// origin, and the tap's row/column displacement (r*dil_h, s*dil_w; -2^30 marks kk past GEMM_K).
  struct tap {
    std::int64_t delta;
    std::int32_t dh, dw;
  };

  /// Shared memory: two stages of the im2col slice [BK][BM], of the weight slice [BK][BN + pad], and of the
  /// decoded taps of the slice's BK rows (built one slice ahead by the first BK threads, so the (c, r, s)
  /// divisions are done once per row per block instead of once per element).
  struct TempStorage {
    alignas(16) V a[2][BK][BM];
    alignas(16) V b[2][BK][BN + B_PAD];
    tap taps[2][BK];
  };

  static constexpr std::int32_t invalid_coord = -(1 << 30);  ///< fails every bounds check (validated sizes)

  TempStorage& smem;
  const kernel::conv_params<T>& prm;
  // This thread's im2col row (pixel) for the A loads.
  std::int32_t a_h0, a_w0;  // top-left input coordinate of the receptive field; invalid_coord past GEMM_M
  std::int64_t a_off;       // x offset of (n, channel 0, a_h0, a_w0) in x's layout

  /// Decodes the pixel this thread loads for block tile starting at GEMM_M row m0.
  __device__ conv_mainloop(TempStorage& s, const kernel::conv_params<T>& p, std::int64_t m0) : smem(s), prm(p) {
    const std::int64_t m = m0 + static_cast<int>(threadIdx.x) % BM;
    const bool valid = m < p.M;
    const std::int64_t mm = valid ? m : 0;
    const std::int64_t n = mm / p.PQ, pq = mm - n * p.PQ;
    const std::int64_t op = pq / p.Q, oq = pq - op * p.Q;
    a_h0 = valid ? static_cast<std::int32_t>(op * p.stride_h - p.pad_h) : invalid_coord;
    a_w0 = static_cast<std::int32_t>(oq * p.stride_w - p.pad_w);
    const std::int64_t hw = std::int64_t(a_h0) * p.W + a_w0;
    a_off = n * p.C * p.H * p.W + (p.x_layout == layout::nchw ? hw : hw * p.C);
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
      e.delta = prm.x_layout == layout::nchw ? cc * prm.H * prm.W + hw : hw * prm.C + cc;
    }
    smem.taps[slot][t] = e;
  }

  /// True when elements are copied global -> shared asynchronously (cp.async; T is 4 or 8 bytes and is its
  /// own compute type); 16-bit types are staged through registers and converted to fp32 on the way.
  static constexpr bool async_copy = sizeof(T) == sizeof(V);
  /// Registers holding one staged slice (register path only).
  struct staging {
    V a[async_copy ? 1 : A_PER_THREAD];
    V b[async_copy ? 1 : B_PER_THREAD];
  };

  /// Starts moving slice kk0 (taps in taps[slot]) into stage `buf`: this thread's A (im2col) and B
  /// (weight) elements; padding taps, pixels past GEMM_M and rows past GEMM_K read zero.
  __device__ void begin_stage(std::int32_t kk0, int slot, int buf, const T* w_row, bool w_valid, staging& st) {
    const int t = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int i = 0; i < A_PER_THREAD; ++i) {
      const int row = t / BM + i * A_ROW_STEP;
      const tap e = smem.taps[slot][row];
      const std::int32_t h = a_h0 + e.dh, w = a_w0 + e.dw;
      const bool ok = static_cast<std::uint32_t>(h) < static_cast<std::uint32_t>(prm.H) &&
                      static_cast<std::uint32_t>(w) < static_cast<std::uint32_t>(prm.W);
      const T* src = prm.x + (ok ? a_off + e.delta : 0);
      if constexpr (async_copy) {
        convred::detail::cp_async_or_zero(&smem.a[buf][row][t % BM], src, ok);
      } else {
        st.a[i] = to_compute(convred::detail::load_or_zero(src, ok));
      }
    }
    const int n = t / B_THREADS_PER_N, kb = (t % B_THREADS_PER_N) * B_PER_THREAD;
#pragma unroll
    for (int v = 0; v < B_PER_THREAD; ++v) {
      const std::int32_t kk = kk0 + kb + v;
      const bool ok = w_valid && kk < prm.gemm_k;
      const T* src = w_row + (ok ? kk : 0);
      if constexpr (async_copy) {
        convred::detail::cp_async_or_zero(&smem.b[buf][kb + v][n], src, ok);
      } else {
        st.b[v] = to_compute(convred::detail::load_or_zero(src, ok));
      }
    }
  }

  /// Completes stage `buf` for this thread (waits for its copies, or stores its staged registers).
  /// A barrier must follow before other threads read the stage.
  __device__ void end_stage(int buf, const staging& st) {
    if constexpr (async_copy) {
      convred::detail::cp_async_wait_all();
    } else {
      const int t = static_cast<int>(threadIdx.x);
#pragma unroll
      for (int i = 0; i < A_PER_THREAD; ++i) smem.a[buf][t / BM + i * A_ROW_STEP][t % BM] = st.a[i];
      const int n = t / B_THREADS_PER_N, kb = (t % B_THREADS_PER_N) * B_PER_THREAD;
#pragma unroll
      for (int v = 0; v < B_PER_THREAD; ++v) smem.b[buf][kb + v][n] = st.b[v];
    }
  }

  /// Loads 4 consecutive compute values from 16-byte (float) / 32-byte (double) aligned shared memory.
  __device__ static void load4(const V* src, V* dst) {
    if constexpr (sizeof(V) == 4) {
      const float4 q = *reinterpret_cast<const float4*>(src);
      dst[0] = q.x, dst[1] = q.y, dst[2] = q.z, dst[3] = q.w;
    } else {
      const double2 q0 = *reinterpret_cast<const double2*>(src);
      const double2 q1 = *reinterpret_cast<const double2*>(src + 2);
      dst[0] = q0.x, dst[1] = q0.y, dst[2] = q1.x, dst[3] = q1.y;
    }
  }

  /// Multiplies shared-memory stage `buf` into the register tile.
  __device__ void mma_stage(int buf, V (&acc)[TM][TN]) const {
    const int t = static_cast<int>(threadIdx.x);
    const int cg = t % CG, pg = t / CG;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      V a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) load4(&smem.a[buf][k][i * PG * 4 + pg * 4], &a[i * 4]);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) load4(&smem.b[buf][k][j * CG * 4 + cg * 4], &b[j * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
  }

  /// Accumulates the conv of this block's pixels with channels [k_first, k_first + BN) of group g
  /// (k_first is the global channel index of tile column 0) into acc (overwritten). Ends with a barrier,
  /// so TempStorage may be reused afterwards.
  __device__ void run(std::int32_t g, std::int64_t k_first, V (&acc)[TM][TN]) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = V(0);
    const int t = static_cast<int>(threadIdx.x);
    const std::int64_t k_mine = k_first + t / B_THREADS_PER_N;  // channel of this thread's weight loads
    const bool w_valid = k_mine < std::int64_t(g + 1) * prm.Kg;
    const T* w_row = prm.w + (w_valid ? k_mine : 0) * std::int64_t(prm.gemm_k);

    build_taps(0, 0, g);
    build_taps(1, BK, g);
    __syncthreads();
    staging st;
    begin_stage(0, 0, 0, w_row, w_valid, st);
    end_stage(0, st);
    __syncthreads();
    const int slices = (prm.gemm_k + BK - 1) / BK;
    for (int sl = 0; sl < slices; ++sl) {
      const bool more = sl + 1 < slices;
      if (more) begin_stage((sl + 1) * BK, (sl + 1) & 1, (sl + 1) & 1, w_row, w_valid, st);
      mma_stage(sl & 1, acc);
      if (more) end_stage((sl + 1) & 1, st);
      build_taps(sl & 1, (sl + 2) * BK, g);  // slot of slice sl, last read while loading slice sl
      __syncthreads();
    }
  }

  /// GEMM_M row (within the tile) of accumulator row i for this thread.
  __device__ static int tile_m(int i) { return (i / 4) * PG * 4 + (static_cast<int>(threadIdx.x) / CG) * 4 + i % 4; }
  /// GEMM_N column (within the tile) of accumulator column j for this thread.
  __device__ static int tile_n(int j) { return (j / 4) * CG * 4 + (static_cast<int>(threadIdx.x) % CG) * 4 + j % 4; }
};

}  // namespace convred::block
