/// @file block/conv_direct.cuh
/// @brief Tiled direct convolution for problems whose output channels each read few input channels
/// (C/groups == 1: depthwise, with any channel multiplier K/groups; up to block::direct_max_group_channels
/// for grouped problems), exact FMA on the CUDA cores: the tile geometry (direct_tiling, built on the host)
/// and the tile and channel share a block owns (direct_tile_at) are in direct_tiling.cuh; here the
/// per-thread strip of outputs computed from a staged input patch (direct_strip), and the tile's store
/// (direct_store_tile: the states of the block's channel groups, then of the blocks sharing a tile,
/// combined in a fixed order, and y written once per pixel). The stager that fills the patches is
/// block::direct_patch_stager (direct_patch_stager.cuh); the grouped work items are direct_grouped.cuh's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../detail/fast_divmod.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"
#include "../problem.cuh"
#include "conv_params.cuh"
#include "direct_tiling.cuh"
#include "reduce_epilogue.cuh"

namespace convred::block {

namespace detail {
/// A read-only load of an operand every thread of a block reads (weights, bias): __ldg on the device.
template <class T>
__host__ __device__ __forceinline__ T ld_ro(const T* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

/// a * b + c with one rounding (fma), the same on host and device.
template <class V>
__host__ __device__ __forceinline__ V fmadd(V a, V b, V c) {
#ifdef __CUDA_ARCH__
  return fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// An unsigned type of `Bytes` bytes (2, 4, 8 or 16): one shared-memory load of a run.
template <int Bytes>
struct chunk_type;
/// 16 bytes
template <>
struct chunk_type<16> {
  using type = uint4;  ///< uint4
};
/// 8 bytes
template <>
struct chunk_type<8> {
  using type = uint2;  ///< uint2
};
/// 4 bytes
template <>
struct chunk_type<4> {
  using type = unsigned int;  ///< unsigned int
};
/// 2 bytes
template <>
struct chunk_type<2> {
  using type = unsigned short;  ///< unsigned short
};

/// The largest chunk (16, 8, 4 or 2 bytes) that is at most Align bytes, fits in Total - Offset bytes and
/// is aligned at Offset.
template <int Offset, int Total, int Align>
__host__ __device__ constexpr int run_chunk() {
  for (int c = 16; c >= 2; c /= 2)
    if (c <= Align && Offset + c <= Total && Offset % c == 0) return c;
  return 2;
}

/// The number of bits set in v (0 <= v < 16): the 8-, 4-, 2- and 1-byte pieces of a run's tail of v bytes.
__host__ __device__ constexpr int popcount_small(int v) { return (v & 1) + (v >> 1 & 1) + (v >> 2 & 1) + (v >> 3 & 1); }

/// Copies bytes [Offset, Total) of a run at src (aligned to Align bytes) into dst in chunks of run_chunk.
template <int Offset, int Total, int Align>
__host__ __device__ __forceinline__ void copy_run(const unsigned char* src, unsigned char* dst) {
  if constexpr (Offset < Total) {
    constexpr int c = run_chunk<Offset, Total, Align>();
#ifdef __CUDA_ARCH__
    const auto v = *reinterpret_cast<const typename chunk_type<c>::type*>(src + Offset);
    std::memcpy(dst + Offset, &v, c);
#else
    std::memcpy(dst + Offset, src + Offset, c);
#endif
    copy_run<Offset + c, Total, Align>(src, dst);
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Barrier of every thread of the cluster, with release / acquire of memory (barrier.cluster, sm_90).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/// Reads the value at the shared-memory address of `local` in the block of cluster rank `rank`
/// (mapa + ld.shared::cluster, sm_90), in 4-byte words and then bytes.
template <class A>
__device__ __forceinline__ A cluster_load(const A* local, int rank) {
  const auto own = static_cast<std::uint32_t>(__cvta_generic_to_shared(local));
  std::uint32_t addr;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(addr) : "r"(own), "r"(rank));
  unsigned char bytes[sizeof(A)];
#pragma unroll
  for (int i = 0; i + 4 <= static_cast<int>(sizeof(A)); i += 4) {
    std::uint32_t v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr + i) : "memory");
    std::memcpy(bytes + i, &v, 4);
  }
#pragma unroll
  for (int i = static_cast<int>(sizeof(A)) / 4 * 4; i < static_cast<int>(sizeof(A)); ++i) {
    unsigned short v;
    asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(addr + i) : "memory");
    bytes[i] = static_cast<unsigned char>(v);
  }
  A r;
  std::memcpy(&r, bytes, sizeof(A));
  return r;
}
#endif
}  // namespace detail

/// @brief One thread's strip of SH x SW adjacent output pixels of a tile, each the exact-FMA direct
/// convolution of one output channel k over a staged patch of its input channel c = k / (K/groups)
/// (PyTorch's depthwise conv2d with channel multiplier K/groups), then bias, epilogue and the fold into the
/// pixel's reduction state; for grouped problems (C/groups > 1) conv_taps adds one input channel's
/// contribution at a time (block::direct_grouped_stage sums a group's channels, then folds).
///
/// FR x FS > 0 (3x3, 5x5, 7x7 in the kernel): stride ST (1 or 2, both directions) and dilation 1, taps
/// unrolled, a strip of SH = 2 rows x SW = 4 columns; each of the (SH - 1) * ST + FR input rows the strip
/// needs is read once from shared memory as one run of (SW - 1) * ST + FS elements (SW + FS - 1 at stride
/// 1, 2 * SW + FS - 2 at stride 2; 16-byte loads where aligned; at stride 2 the run starts on a 16-byte
/// boundary, and its tail is read as one 16-byte load, up to 14 bytes past its end within the row's pitch,
/// where it would take more: load_bytes) and
/// used for every output and tap it feeds (output column j, tap s: run element ST * j + s); the channel's
/// FR x FS weights sit in registers (read-only loads, the same address for every thread of a group). FR =
/// FS = 0 (ST = 1): any R, S, stride and dilation at run time, SH = 2 rows x SW = 1 column, one
/// shared-memory load per tap and row. Either way the sum runs over taps in the order r, s with
/// one fma per tap from 0 (padded taps read the zeros the stager wrote: 0 * w, NaN for a non-finite weight,
/// as PyTorch's padded GEMM paths and the float64 reference), then the bias is added (direct_strip::fold).
/// Host and device (the host suite runs it on patches staged on the host).
/// @tparam T  element type (float, double, __half, __nv_bfloat16); sums in compute_t<T>
/// @tparam FR filter height the taps are unrolled for, or 0 (run time)
/// @tparam FS filter width the taps are unrolled for, or 0 (run time); 0 exactly when FR is
/// @tparam ST the stride the taps are unrolled for (1 or 2, both directions; 1 for the run-time variant)
template <class T, int FR, int FS, int ST = 1>
struct direct_strip {
  static_assert((FR > 0) == (FS > 0), "direct_strip: FR and FS are both fixed or both 0 (run time)");
  static_assert(ST == 1 || (ST == 2 && FR > 0), "direct_strip: stride 1, or 2 with the taps unrolled");
  using V = compute_t<T>;  ///< compute type: float, or double for double data
  static constexpr bool unrolled = FR > 0;  ///< taps unrolled (stride ST, dilation 1)
  static constexpr int stride = ST;            ///< the unrolled stride (1 for the run-time variant)
  static constexpr int SW = unrolled ? 4 : 1;  ///< output columns per thread
  static constexpr int SH = 2;                 ///< output rows per thread
  /// elements of one input row a thread reads (unrolled): (SW - 1) * ST + FS
  static constexpr int run = (SW - 1) * ST + (FS > 0 ? FS : 1);
  /// input rows a strip reads (unrolled): (SH - 1) * ST + FR
  static constexpr int in_rows = (SH - 1) * ST + (FR > 0 ? FR : 1);
  /// bytes of a row load: the run's; at stride 2 (runs start on a 16-byte boundary) rounded up to a
  /// multiple of 16 where the run's tail past its last whole 16 bytes would take more than one load (8-,
  /// 4- and 2-byte pieces), so that it takes one
  static constexpr int load_bytes = ST == 2 && detail::popcount_small((run * int(sizeof(T))) % 16) > 1
                                        ? (run * int(sizeof(T)) + 15) / 16 * 16
                                        : run * int(sizeof(T));
  /// alignment of a run's first byte: SW * ST elements apart, at most 16 bytes
  static constexpr int load_align = SW * ST * int(sizeof(T)) < 16 ? SW * ST * int(sizeof(T)) : 16;

  /// acc[i][j] = sum over taps r, s of patch(row, col) * w[k, 0, r, s] for tile pixel (ty * SH + i, tx * SW
  /// + j), where patch(row, col) = plane[row * t.pitch + col], row = (ty * SH + i) * stride_h + r * dil_h,
  /// col = (tx * SW + j) * stride_w + s * dil_w. acc must hold zeros on entry. plane: the channel's staged
  /// patch (shared memory, or host memory on the host) aligned to 16 bytes; prm.w: the (K, 1, R, S) weights
  /// (C/groups == 1). conv_taps with wk = prm.w + k * R * S.
  __host__ __device__ static void conv(const T* plane, const direct_tiling& t, const conv_params<T>& prm, int ty, int tx,
                                       std::int64_t k, V (&acc)[SH][SW]) {
    conv_taps(plane, t, prm, ty, tx, prm.w + k * (unrolled ? FR * FS : std::int64_t(prm.R) * prm.S), acc);
  }

  /// acc[i][j] += sum over taps r, s of patch(row, col) * wk[r * S + s], in the order r, s with one fma per
  /// tap (patch, row and col as for conv): the strip's share of one input channel's contribution to one
  /// output channel, whose R x S weights start at wk (for grouped problems w + (k * C/groups + c) * R * S:
  /// KCRS weights of output channel k and input channel c of its group; block::direct_grouped_stage sums
  /// the C/groups channels into one acc this way).
  __host__ __device__ static void conv_taps(const T* plane, const direct_tiling& t, const conv_params<T>& prm, int ty,
                                            int tx, const T* wk, V (&acc)[SH][SW]) {
    if constexpr (unrolled) {
      V w[FR][FS];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int r = 0; r < FR; ++r)
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int s = 0; s < FS; ++s) w[r][s] = static_cast<V>(to_compute(detail::ld_ro(wk + r * FS + s)));
      const T* base = plane + static_cast<std::int64_t>(ty) * SH * ST * t.pitch + tx * SW * ST;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int ir = 0; ir < in_rows; ++ir) {
        T raw[load_bytes / sizeof(T)];
        detail::copy_run<0, load_bytes, load_align>(reinterpret_cast<const unsigned char*>(base + ir * t.pitch),
                                                    reinterpret_cast<unsigned char*>(raw));
        V row[run];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int e = 0; e < run; ++e) row[e] = static_cast<V>(to_compute(raw[e]));
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int i = 0; i < SH; ++i) {
          const int r = ir - i * ST;  // the filter row input row ir is for output row i
          if (r < 0 || r >= FR) continue;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
          for (int s = 0; s < FS; ++s)
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
            for (int j = 0; j < SW; ++j) acc[i][j] = detail::fmadd(row[j * ST + s], w[r][s], acc[i][j]);
        }
      }
    } else {
      const int R = prm.R, S = prm.S;
      const std::int64_t row_step = std::int64_t(prm.stride_h) * t.pitch;  // patch elements between output rows
      const T* base = plane + std::int64_t(ty) * SH * row_step + static_cast<std::int64_t>(tx) * prm.stride_w;
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) {
          const V wv = static_cast<V>(to_compute(detail::ld_ro(wk + r * S + s)));
          const T* tap = base + std::int64_t(r) * prm.dil_h * t.pitch + std::int64_t(s) * prm.dil_w;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
          for (int i = 0; i < SH; ++i) acc[i][0] = detail::fmadd(static_cast<V>(to_compute(tap[i * row_step])), wv, acc[i][0]);
        }
    }
  }

  /// conv without staging (the run-time variant only, direct_tiling::staged == 0): the same sums, in the
  /// same order, read from x itself: tap (r, s) of tile pixel (ty * SH + i, tx) of tile b reads x[n, c, h,
  /// w] with h = (p0 + ty * SH + i) * stride_h - pad_h + r * dil_h, w = (q0 + tx) * stride_w - pad_w + s *
  /// dil_w, or 0 outside x (then 0 * w, as the staged path), c = k / (K/groups) (C/groups == 1).
  __host__ __device__ static void conv_global(const direct_tiling& t, const direct_tile& b, const conv_params<T>& prm,
                                              int ty, int tx, std::int64_t k, V (&acc)[SH][SW]) {
    conv_global_taps(t, b, prm, ty, tx, k / prm.Kg, prm.w + k * prm.R * prm.S, acc);
  }

  /// conv_taps without staging (the run-time variant only): acc += input channel c's taps read from x as
  /// in conv_global, times the R x S weights at wk.
  __host__ __device__ static void conv_global_taps(const direct_tiling& t, const direct_tile& b,
                                                   const conv_params<T>& prm, int ty, int tx, std::int64_t c,
                                                   const T* wk, V (&acc)[SH][SW]) {
    static_assert(!unrolled, "direct_strip::conv_global: the run-time variant only");
    (void)t;
    const int R = prm.R, S = prm.S;
    const bool nchw = prm.x_layout == layout::nchw;
    const T* xc = prm.x + (nchw ? (b.n * prm.C + c) * prm.H * prm.W : b.n * prm.H * prm.W * prm.C + c);
    const std::int64_t col = nchw ? 1 : prm.C, row = prm.W * col;
    const std::int64_t h0 = (std::int64_t(b.p0) + std::int64_t(ty) * SH) * prm.stride_h - prm.pad_h;
    const std::int64_t w = (std::int64_t(b.q0) + tx) * prm.stride_w - prm.pad_w;
    for (int r = 0; r < R; ++r)
      for (int s = 0; s < S; ++s) {
        const V wv = static_cast<V>(to_compute(detail::ld_ro(wk + r * S + s)));
        const std::int64_t ws = w + std::int64_t(s) * prm.dil_w;
        const bool col_in = ws >= 0 && ws < prm.W;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int i = 0; i < SH; ++i) {
          const std::int64_t h = h0 + std::int64_t(i) * prm.stride_h + std::int64_t(r) * prm.dil_h;
          const V xv = col_in && h >= 0 && h < prm.H ? static_cast<V>(to_compute(xc[h * row + ws * col])) : V(0);
          acc[i][0] = detail::fmadd(xv, wv, acc[i][0]);
        }
      }
  }

  /// Folds output channel k of the strip into its states: v = acc + bias[k] (bias may be nullptr: v = acc),
  /// state = op(state, Op::make(e(v, k), k)).
  template <class Op, class Epilogue>
  __host__ __device__ static void fold(const Op& op, const Epilogue& epi, const V (&acc)[SH][SW], const T* bias,
                                       std::int64_t k, typename Op::template accum_t<V> (&state)[SH][SW]) {
    const V b = bias ? static_cast<V>(to_compute(detail::ld_ro(bias + k))) : V(0);
    const int kk = static_cast<int>(k);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < SH; ++i) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int j = 0; j < SW; ++j) {
        const V v = bias ? acc[i][j] + b : acc[i][j];
        state[i][j] = op(state[i][j], Op::template make<V>(apply_epilogue(epi, v, kk), kk));
      }
    }
  }
};

/// @brief Index of tile pixel (ty * sh + i, tx * sw + j) of channel group g among the block's parked
/// states: g * tile_pixels + the pixel's row-major index in the tile.
__host__ __device__ inline std::int32_t direct_park_index(const direct_tiling& t, int g, int ty, int tx, int i, int j) {
  return g * t.tile_pixels() + (ty * t.sh + i) * t.tile_w + tx * t.sw + j;
}

/// @brief The output offset n * P * Q + p * Q + q of tile pixel `pixel` (row-major in the tile) of tile
/// b, or -1 when the pixel lies outside the output (a tile tail, or one of the `shift` columns left of
/// column 0).
template <class T>
__host__ __device__ inline std::int64_t direct_output_offset(const direct_tiling& t, const direct_tile& b,
                                                             const conv_params<T>& prm, std::int32_t pixel) {
  const std::int32_t i = pixel / t.tile_w, j = pixel - i * t.tile_w;
  const std::int64_t p = b.p0 + i, q = std::int64_t(b.q0) + j;
  return p < prm.P && q >= 0 && q < prm.Q ? (b.n * prm.P + p) * prm.Q + q : std::int64_t(-1);
}

/// @brief The combination order of a tile pixel's states (host and device, so that the host suite
/// combines exactly as the kernel): the block's channel groups 0, 1, ..., groups - 1 in turn (park holds
/// groups * tile_pixels states, direct_park_index), returned for `pixel`.
template <class Op, class A>
__host__ __device__ inline A direct_combine_groups(const direct_tiling& t, const Op& op, const A* park, std::int32_t pixel) {
  A r = park[pixel];
  for (int g = 1; g < t.groups; ++g) r = op(r, park[g * t.tile_pixels() + pixel]);
  return r;
}

/// @brief The end of a direct-kernel block: parks the thread's SH x SW states in shared memory (smem:
/// groups * tile pixels states, direct_park_index; it reuses the stage buffers, so every stage must be
/// done), combines each tile pixel's states over the channel groups in group order
/// (direct_combine_groups) into group 0's slot, then, after a barrier (the cluster's when t.splits > 1),
/// over the tile's splits in rank order 0, 1, ... (deterministic; rank r reads rank q's combined states
/// through distributed shared memory, sm_90) and writes y (and the index) once per pixel inside the output
/// with block::write_reduced. Rank r writes pixels [r * ceil(px / splits), ...) of the tile's px pixels,
/// consecutive threads consecutive pixels (coalesced). A final cluster barrier keeps every block's shared
/// memory alive until its readers are done. splits > 1 needs sm_90 code and a cluster launch of `splits`
/// blocks (device::conv2d_reduce_direct checks both); other code traps on it.
template <class Op, class V, class T, int SH, int SW>
__device__ void direct_store_tile(const direct_tiling& t, const direct_tile& b, const conv_params<T>& prm,
                                  const Op& op, const typename Op::template accum_t<V> (&state)[SH][SW], int g, int ty,
                                  int tx, void* smem, T* y, std::int64_t* indices) {
  using accum_t = typename Op::template accum_t<V>;
  accum_t* park = static_cast<accum_t*>(smem);
  __syncthreads();  // every thread is done with the stage buffers
#pragma unroll
  for (int i = 0; i < SH; ++i)
#pragma unroll
    for (int j = 0; j < SW; ++j) park[direct_park_index(t, g, ty, tx, i, j)] = state[i][j];
  __syncthreads();
  const std::int32_t px = t.tile_pixels(), tid = static_cast<std::int32_t>(threadIdx.x);
  if (t.splits == 1) {
    for (std::int32_t p = tid; p < px; p += t.threads)
      write_reduced<Op, V>(y, indices, direct_output_offset(t, b, prm, p), direct_combine_groups(t, op, park, p), prm.K);
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (t.groups > 1)
    for (std::int32_t p = tid; p < px; p += t.threads) park[p] = direct_combine_groups(t, op, park, p);
  detail::cluster_sync();  // every rank's states are combined over its groups
  const std::int32_t per = (px + t.splits - 1) / t.splits, first = b.rank * per;
  const std::int32_t last = first + per < px ? first + per : px;
  for (std::int32_t p = first + tid; p < last; p += t.threads) {
    accum_t r = detail::cluster_load(park + p, 0);
    for (int q = 1; q < t.splits; ++q) r = op(r, detail::cluster_load(park + p, q));
    write_reduced<Op, V>(y, indices, direct_output_offset(t, b, prm, p), r, prm.K);
  }
  detail::cluster_sync();  // no block leaves while another still reads its states
#else
  (void)op;
  __trap();  // a split tiling needs sm_90 code (the host never launches one without it)
#endif
}

}  // namespace convred::block
