/// @file block/channel_reduce.cuh
/// @brief Block-level collectives for the standalone reduction across the channel dim of an existing
/// (N, C, H, W) tensor: `y[n,0,h,w] = Op over c of e(x[n,c,h,w], c)` (see device/channel_reduce.cuh).
///
/// Three collectives, each with a nested `TempStorage` that the caller places in shared memory (CUB's
/// pattern), all folding elements as `state = op(state, Op::make(e(to_compute(x), c), c))` in the
/// compute type V = compute_t<T> and combining states only with the op's own functor:
/// - `nchw_channel_reduce`: NCHW, a tile of consecutive pixels per block. Each thread owns a few pixels
///   (one 16-byte vector of consecutive w, or a few scalars striped across the block) and walks its share of
///   the channels with several independent loads in flight; when the channels are split across threads
///   ("slices"), the partial states meet in shared memory and are combined in slice order.
/// - `nhwc_channel_reduce`: NHWC, a logical warp of `Lanes` consecutive lanes per pixel reads the pixel's
///   contiguous channels (16-byte vectors or scalars) and combines with `cub::WarpReduce<state, Lanes>`.
/// - `pixel_channel_reduce`: one block per pixel for few pixels and many channels (either layout: the
///   channel stride is a run-time value); the threads split the channels and combine with
///   `cub::BlockReduce<state, Threads>`.
///
/// Reduction semantics (NaN propagation, lowest index on ties, exact identity) are the op's; see
/// functional.cuh. Combining in any order is exact for min/max/argmin/argmax (a total order) and rounds
/// differently from a sequential loop only for sum/mean (fp32 accumulation, or fp64 for double).
/// Offsets are 64-bit throughout; channel numbers are int (C < 2^30 is validated by the device layer).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/util_type.cuh>
#include <cub/warp/warp_reduce.cuh>

#include <cstdint>
#include <cstring>

#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::block {

/// @brief How the collectives load x (all loads are of data that is read-only for the whole kernel).
enum class load_hint : int {
  cached = 0,    ///< `ld.global`: the default caching (L1 and L2)
  readonly = 1,  ///< `ld.global.nc` (`__ldg`): through the read-only/texture path
  streaming = 2, ///< `ld.global.cs` (`__ldcs`): evict-first, for data used once
  /// `ld.global.nc.L1::no_allocate.L2::256B`: read-only, bypass L1 allocation, and ask L2 to fetch the
  /// surrounding 256-byte block (a prefetch hint for streaming reads; PTX ISA "ld", sm_80+)
  readonly_prefetch = 3
};

/// @brief `N` elements of T loaded or stored as one access of `N * sizeof(T)` bytes (2, 4, 8 or 16).
template <class T, int N>
struct alignas(sizeof(T) * N) vec {
  T v[N];  ///< the elements, lowest address first
};

namespace detail {

/// Unsigned word of each access width.
template <int Bytes>
struct raw;
template <>
struct raw<2> {
  using type = unsigned short;
};
template <>
struct raw<4> {
  using type = unsigned int;
};
template <>
struct raw<8> {
  using type = uint2;
};
template <>
struct raw<16> {
  using type = uint4;
};

/// One load of a 2-, 4-, 8- or 16-byte word with the cache behaviour of `Hint`.
template <load_hint Hint, class R>
__device__ __forceinline__ R load_raw(const R* p) {
  if constexpr (Hint == load_hint::readonly) {
    return __ldg(p);
  } else if constexpr (Hint == load_hint::streaming) {
    return __ldcs(p);
  } else if constexpr (Hint == load_hint::readonly_prefetch) {
    R r;
    if constexpr (sizeof(R) == 16) {
      asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
          : "l"(p));
    } else if constexpr (sizeof(R) == 8) {
      asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    } else if constexpr (sizeof(R) == 4) {
      asm("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];" : "=r"(r) : "l"(p));
    } else {
      asm("ld.global.nc.L1::no_allocate.L2::256B.u16 %0, [%1];" : "=h"(r) : "l"(p));
    }
    return r;
  } else {
    return *p;
  }
}

}  // namespace detail

/// @brief Loads `N` consecutive elements of T at `p` as one access (`p` aligned to `N * sizeof(T)`).
template <load_hint Hint, class T, int N>
__device__ __forceinline__ vec<T, N> load_vec(const T* p) {
  using R = typename detail::raw<static_cast<int>(sizeof(T)) * N>::type;
  const R r = detail::load_raw<Hint>(reinterpret_cast<const R*>(p));
  vec<T, N> out;
  std::memcpy(&out, &r, sizeof(R));
  return out;
}

/// @brief Folds one element into a reduction state: `op(a, Op::make(apply_epilogue(epi, to_compute(x), c), c))`.
template <class Op, class T, class Epilogue, class A>
__device__ __forceinline__ A fold(const Op& op, const Epilogue& epi, A a, T x, int c) {
  using V = compute_t<T>;
  return op(a, Op::template make<V>(apply_epilogue(epi, to_compute(x), c), c));
}

/// @brief Writes one reduced pixel: `y[q] = from_compute<T>(Op::value(a, count))` when y is not null and,
/// for index ops, `indices[q] = Op::index(a)` when indices is not null. `count` is C (for mean).
template <class Op, class T, class A>
__device__ __forceinline__ void store_result(T* y, std::int64_t* indices, std::int64_t q, const A& a,
                                             std::int64_t count) {
  using V = compute_t<T>;
  if (y) y[q] = from_compute<T>(Op::template value<V>(a, count));
  if constexpr (Op::has_index) {
    if (indices) indices[q] = Op::template index<V>(a);
  } else {
    (void)indices;
  }
}

/// @brief NCHW channel reduction of one tile of consecutive pixels by a block of `Threads` threads.
///
/// Data: x is (N, C, H, W) NCHW, so pixel q = n*HW + hw of channel c is at
/// `q + n*(C-1)*HW + c*HW` (`image_skip` = (C-1)*HW). Pixels are grouped into *units* of `Vec`
/// consecutive pixels (one load of `Vec * sizeof(T)` bytes per channel; `Vec > 1` needs x 16-byte aligned
/// and HW % Vec == 0 so a unit never crosses an image: checked by the host). The block's `Threads`
/// threads form `slices` (a run-time power of two dividing Threads) groups of `tp = Threads / slices`
/// threads: thread (slice, pt) owns units `tile*tp*Items + i*tp + pt` (i < Items, striped so that each
/// load instruction of a warp reads consecutive units: coalesced) and channels `slice, slice + slices, ...`.
/// The channel loop issues `Unroll * Items` independent loads before folding them.
///
/// With one slice every thread writes its own pixels. With more, each thread parks its Vec*Items states
/// in shared memory (TempStorage), one barrier, then each of the tile's pixels is combined over the slices
/// in slice order by one thread and written. Units past `units` (the last tile) load unit 0 (always
/// valid memory) and are never written, so the loop has no bounds checks.
///
/// @tparam T      element type (float, double, __half, __nv_bfloat16)
/// @tparam Op     reduction op (functional.cuh); state `Op::accum_t<compute_t<T>>`
/// @tparam Threads block size (a multiple of 32)
/// @tparam Vec    elements per load (1, or 16 / sizeof(T) for 16-byte loads)
/// @tparam Items  units per thread
/// @tparam Unroll channels per thread in flight at once
/// @tparam Hint   load cache hint
template <class T, class Op, int Threads, int Vec, int Items, int Unroll, load_hint Hint>
struct nchw_channel_reduce {
  static_assert(Threads % 32 == 0, "Threads must be a multiple of 32");
  static_assert(Vec >= 1 && Items >= 1 && Unroll >= 1, "Vec, Items, Unroll must be positive");
  static_assert(Vec == 1 || Vec * sizeof(T) == 16, "Vec is 1 or one 16-byte vector");
  using V = compute_t<T>;                           ///< compute type
  using accum_t = typename Op::template accum_t<V>;  ///< reduction state
  static constexpr int elems = Vec * Items;          ///< pixels per thread

  /// Shared layout: partial[(slice * elems + e) * tp + pt] for pixel e of thread pt of a slice.
  struct storage_t {
    accum_t partial[Threads * elems];  ///< the threads' partial states, slice-major
  };
  /// Caller-placed shared memory (only touched when slices > 1): Threads * Vec * Items states.
  struct TempStorage : cub::Uninitialized<storage_t> {};

  storage_t& temp;  ///< the block's shared memory

  /// Binds the caller-placed shared memory.
  __device__ __forceinline__ explicit nchw_channel_reduce(TempStorage& t) : temp(t.Alias()) {}

  /// Reduces tile `tile` (units [tile*tp*Items, (tile+1)*tp*Items)) and writes its pixels.
  /// Must be called by all threads of the block (a barrier when slices > 1).
  /// @param x            input (N, C, H, W) NCHW
  /// @param y            output (N, 1, H, W), or nullptr (index ops writing indices only)
  /// @param indices      index output (N, 1, H, W) for index ops, or nullptr
  /// @param tile         tile number (the kernel's block index)
  /// @param units        number of units, N*H*W / Vec
  /// @param hw           H*W (channel stride in elements)
  /// @param image_skip   (C-1)*H*W
  /// @param C            channels
  /// @param slices_log2  log2 of the number of channel slices (0 .. log2(min(32, Threads/8)) by the host rule)
  /// @param op           reduction op
  /// @param epi          epilogue, applied to each element before it is folded
  template <class Epilogue>
  __device__ __forceinline__ void reduce_tile(const T* x, T* y, std::int64_t* indices, std::int64_t tile,
                                              std::int64_t units, std::int64_t hw, std::int64_t image_skip, int C,
                                              int slices_log2, const Op& op, const Epilogue& epi) {
    const int tid = static_cast<int>(threadIdx.x);
    const int slices = 1 << slices_log2;
    const int tp = Threads >> slices_log2;
    const int slice = tid / tp;
    const int pt = tid - slice * tp;
    const std::int64_t first_unit = tile * tp * Items;

    const T* p[Items];
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::int64_t u = first_unit + i * tp + pt;
      const std::int64_t q = (u < units ? u : 0) * Vec;  // first pixel of the unit
      p[i] = x + (q + (q / hw) * image_skip + slice * hw);
    }
    accum_t acc[Items][Vec];
#pragma unroll
    for (int i = 0; i < Items; ++i)
#pragma unroll
      for (int j = 0; j < Vec; ++j) acc[i][j] = Op::template identity<V>();

    const std::int64_t step = hw << slices_log2;  // elements between a thread's consecutive channels
    int c = slice;
    for (; c + (Unroll - 1) * slices < C; c += Unroll * slices) {
      vec<T, Vec> r[Unroll][Items];
#pragma unroll
      for (int u = 0; u < Unroll; ++u)
#pragma unroll
        for (int i = 0; i < Items; ++i) r[u][i] = load_vec<Hint, T, Vec>(p[i] + u * step);
#pragma unroll
      for (int u = 0; u < Unroll; ++u)
#pragma unroll
        for (int i = 0; i < Items; ++i)
#pragma unroll
          for (int j = 0; j < Vec; ++j) acc[i][j] = fold(op, epi, acc[i][j], r[u][i].v[j], c + u * slices);
#pragma unroll
      for (int i = 0; i < Items; ++i) p[i] += Unroll * step;
    }
    for (; c < C; c += slices) {
      vec<T, Vec> r[Items];
#pragma unroll
      for (int i = 0; i < Items; ++i) r[i] = load_vec<Hint, T, Vec>(p[i]);
#pragma unroll
      for (int i = 0; i < Items; ++i) {
#pragma unroll
        for (int j = 0; j < Vec; ++j) acc[i][j] = fold(op, epi, acc[i][j], r[i].v[j], c);
        p[i] += step;
      }
    }

    if (slices == 1) {
#pragma unroll
      for (int i = 0; i < Items; ++i) {
        const std::int64_t u = first_unit + i * tp + pt;
        if (u < units) {
#pragma unroll
          for (int j = 0; j < Vec; ++j) store_result<Op>(y, indices, u * Vec + j, acc[i][j], C);
        }
      }
      return;
    }

    const int outputs = tp * elems;  // pixels of the tile
#pragma unroll
    for (int i = 0; i < Items; ++i)
#pragma unroll
      for (int j = 0; j < Vec; ++j) temp.partial[slice * outputs + (i * Vec + j) * tp + pt] = acc[i][j];
    __syncthreads();
    for (int o = tid; o < outputs; o += Threads) {
      accum_t a = temp.partial[o];
      for (int s = 1; s < slices; ++s) a = op(a, temp.partial[s * outputs + o]);
      const int e = o / tp, opt = o - e * tp;
      const int i = e / Vec, j = e - i * Vec;
      const std::int64_t u = first_unit + i * tp + opt;
      if (u < units) store_result<Op>(y, indices, u * Vec + j, a, C);
    }
  }
};

/// @brief NHWC channel reduction: a logical warp of `Lanes` consecutive lanes per pixel.
///
/// Data: x is (N, H, W, C) NHWC, so pixel q's channels are the contiguous `x[q*C, q*C + C)`. The block's
/// `Threads / Lanes` logical warps take pixels `tile * (Threads / Lanes) + group`; lane l reads channels
/// `[l*Vec + k*Lanes*Vec, ... + Vec)` for k = 0, 1, ... (`Vec > 1` needs x 16-byte aligned and C % Vec == 0:
/// checked by the host), `Unroll` loads in flight, then `cub::WarpReduce<state, Lanes>` combines the
/// lanes and lane 0 writes. Pixels past `pixels` read pixel 0 and are never written.
///
/// @tparam Lanes  threads per pixel: a power of two <= 32 (CUB logical warp)
/// Other parameters as nchw_channel_reduce.
template <class T, class Op, int Threads, int Lanes, int Vec, int Unroll, load_hint Hint>
struct nhwc_channel_reduce {
  static_assert(Threads % 32 == 0, "Threads must be a multiple of 32");
  static_assert(Lanes >= 1 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "Lanes: a power of two <= 32");
  static_assert(Vec == 1 || Vec * sizeof(T) == 16, "Vec is 1 or one 16-byte vector");
  using V = compute_t<T>;                            ///< compute type
  using accum_t = typename Op::template accum_t<V>;  ///< reduction state
  using warp_reduce = cub::WarpReduce<accum_t, Lanes>;  ///< the lanes' combine
  static constexpr int pixels_per_block = Threads / Lanes;  ///< pixels per tile

  /// Caller-placed shared memory: one WarpReduce storage per logical warp.
  struct TempStorage {
    typename warp_reduce::TempStorage warp[pixels_per_block];  ///< per logical warp
  };

  TempStorage& temp;  ///< the block's shared memory

  /// Binds the caller-placed shared memory.
  __device__ __forceinline__ explicit nhwc_channel_reduce(TempStorage& t) : temp(t) {}

  /// Reduces and writes the pixels [tile * pixels_per_block, ...) that are < `pixels` (= N*H*W).
  /// Must be called by all threads of the block.
  template <class Epilogue>
  __device__ __forceinline__ void reduce_tile(const T* x, T* y, std::int64_t* indices, std::int64_t tile,
                                              std::int64_t pixels, int C, const Op& op, const Epilogue& epi) {
    const int tid = static_cast<int>(threadIdx.x);
    const int group = tid / Lanes;
    const int lane = tid - group * Lanes;
    const std::int64_t q = tile * pixels_per_block + group;
    const T* p = x + (q < pixels ? q : 0) * static_cast<std::int64_t>(C) + lane * Vec;

    accum_t acc[Vec];
#pragma unroll
    for (int j = 0; j < Vec; ++j) acc[j] = Op::template identity<V>();
    constexpr int step = Lanes * Vec;
    int c = lane * Vec;
    for (; c + (Unroll - 1) * step < C; c += Unroll * step) {
      vec<T, Vec> r[Unroll];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) r[u] = load_vec<Hint, T, Vec>(p + u * step);
#pragma unroll
      for (int u = 0; u < Unroll; ++u)
#pragma unroll
        for (int j = 0; j < Vec; ++j) acc[j] = fold(op, epi, acc[j], r[u].v[j], c + u * step + j);
      p += Unroll * step;
    }
    for (; c < C; c += step) {
      const vec<T, Vec> r = load_vec<Hint, T, Vec>(p);
#pragma unroll
      for (int j = 0; j < Vec; ++j) acc[j] = fold(op, epi, acc[j], r.v[j], c + j);
      p += step;
    }
#pragma unroll
    for (int j = 1; j < Vec; ++j) acc[0] = op(acc[0], acc[j]);
    const accum_t a = warp_reduce(temp.warp[group]).Reduce(acc[0], op);
    if (lane == 0 && q < pixels) store_result<Op>(y, indices, q, a, C);
  }
};

/// @brief One pixel's channels reduced by a whole block: thread t folds channels t, t + Threads, ...
/// (`Unroll` loads in flight), then `cub::BlockReduce<state, Threads>` combines; the result is valid in
/// thread 0. For few pixels with many channels, in either layout: NCHW passes `stride` = H*W, NHWC 1.
///
/// @tparam Threads block size (a multiple of 32)
/// Other parameters as nchw_channel_reduce (scalar loads).
template <class T, class Op, int Threads, int Unroll, load_hint Hint>
struct pixel_channel_reduce {
  static_assert(Threads % 32 == 0, "Threads must be a multiple of 32");
  using V = compute_t<T>;                            ///< compute type
  using accum_t = typename Op::template accum_t<V>;  ///< reduction state
  using block_reduce = cub::BlockReduce<accum_t, Threads>;  ///< the threads' combine
  /// Caller-placed shared memory: cub::BlockReduce's.
  using TempStorage = typename block_reduce::TempStorage;

  TempStorage& temp;  ///< the block's shared memory

  /// Binds the caller-placed shared memory.
  __device__ __forceinline__ explicit pixel_channel_reduce(TempStorage& t) : temp(t) {}

  /// Reduces `C` channels at `base + c * stride` (c in [0, C)); returns the state in thread 0 (other
  /// threads' return values are unspecified). Must be called by all threads of the block.
  template <class Epilogue>
  __device__ __forceinline__ accum_t reduce(const T* base, std::int64_t stride, int C, const Op& op,
                                            const Epilogue& epi) {
    const int tid = static_cast<int>(threadIdx.x);
    accum_t acc[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) acc[u] = Op::template identity<V>();
    const T* p = base + tid * stride;
    const std::int64_t step = stride * Threads;
    int c = tid;
    for (; c + (Unroll - 1) * Threads < C; c += Unroll * Threads) {
      vec<T, 1> r[Unroll];
#pragma unroll
      for (int u = 0; u < Unroll; ++u) r[u] = load_vec<Hint, T, 1>(p + u * step);
#pragma unroll
      for (int u = 0; u < Unroll; ++u) acc[u] = fold(op, epi, acc[u], r[u].v[0], c + u * Threads);
      p += Unroll * step;
    }
    for (; c < C; c += Threads) {
      acc[0] = fold(op, epi, acc[0], load_vec<Hint, T, 1>(p).v[0], c);
      p += step;
    }
#pragma unroll
    for (int u = 1; u < Unroll; ++u) acc[0] = op(acc[0], acc[u]);
    return block_reduce(temp).Reduce(acc[0], op);
  }
};

}  // namespace convred::block
