/// @file block/reduce_epilogue.cuh
/// @brief Block-level fused epilogue + reduction across channels of a conv register tile.
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::block {

namespace detail {
/// `__shfl_xor_sync` of any trivially copyable value within segments of Width lanes (all 32 lanes take
/// part): arithmetic types directly, others word by word through memcpy into ceil(size / 4) words, which
/// the compiler folds away (cub::ShuffleIndex casts the address of its argument, which put a 16-byte
/// stack frame into the wgmma kernels).
template <int Width, class T>
__device__ __forceinline__ T shfl_xor(const T& v, int lane_mask) {
  if constexpr (std::is_arithmetic_v<T>) {
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, Width);  // float, double, int: the intrinsic's overloads
  } else {
    constexpr int words = static_cast<int>((sizeof(T) + 3) / 4);
    unsigned int w[words] = {};
    std::memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < words; ++i) w[i] = __shfl_xor_sync(0xffffffffu, w[i], lane_mask, Width);
    T r;
    std::memcpy(&r, w, sizeof(T));
    return r;
  }
}
}  // namespace detail

/// Combines the states of each aligned group of `lanes` consecutive lanes (a power of two <= 32; every
/// lane of the warp takes part) with log2(lanes) xor shuffles: every lane of a group ends with Op over the
/// group's states, combined in a fixed order (deterministic). The split path's fixup kernel, where several
/// lanes share one output pixel's channels, ends with it.
template <class Op, class A>
__device__ __forceinline__ A combine_lanes(A state, int lanes, const Op& op) {
  for (int d = lanes / 2; d >= 1; d /= 2) state = op(state, detail::shfl_xor<32>(state, d));
  return state;
}

/// Writes one pixel's reduced state r: y[m] = Op's value (converted to T; `count` = K for mean) and, for
/// index ops, indices[m] = the channel index; y or indices may be null; m < 0 (a pixel past the tensor's
/// edge) writes nothing. Shared by every fused kernel's store.
template <class Op, class V, class T>
__device__ __forceinline__ void write_reduced(T* y, std::int64_t* indices, std::int64_t m,
                                              const typename Op::template accum_t<V>& r, std::int64_t count) {
  if (m < 0) return;
  if (y) y[m] = from_compute<T>(Op::template value<V>(r, count));
  if constexpr (Op::has_index) {
    if (indices) indices[m] = Op::template index<V>(r);
  }
}

/// @brief Folds a ThreadM x ThreadN conv accumulator tile into per-pixel reduction states, then reduces
/// across the block's channel groups (warp shuffles, or cub::WarpReduce) and writes y (and indices).
///
/// With `Park` (kernels that visit several channel tiles: accumulate, then store), the states are parked
/// in shared memory between channel tiles (TempStorage::state, thread index fastest: conflict-free), so no
/// reduction state occupies registers while the conv mainloop runs. Kernels whose tile holds every
/// channel call fold and finish on register states instead, and `Park = false` drops that storage.
/// Per element: v = e(acc + bias[k], k) in the compute type, then state = op(state, Op::make(v, k));
/// channels past the tile's valid count are skipped (never an identity leak: the identity is exact and
/// only ever combined, see functional.cuh). The `Mainloop::lanes_per_pixel` consecutive lanes holding the
/// same pixels form a logical warp. The cross-thread step: when each lane holds a multiple of the logical
/// warp's width in pixel rows (the tensor-core tiles: 4 lanes, 4 or 8 rows), a transposing reduction —
/// at each of log2(CG) steps a lane keeps half of its rows and trades the other half with its partner
/// (a shuffle), so that CG rows cost CG - 1 shuffles instead of CG log2(CG), no lane idles and
/// lane l ends with rows l * TM / CG ... (l + 1) * TM / CG - 1 to write; otherwise one cub::WarpReduce
/// per pixel row. Op must be associative and commutative (the order of combination is not fixed; the
/// ops of functional.cuh are, sum and mean up to rounding). When `Mainloop::warps_per_pixel` > 1
/// (mma.sync tiles), the warps' partials are combined through shared memory before y is written.
template <class Mainloop, class Op, bool Park = true>
struct reduce_epilogue {
  using V = typename Mainloop::V;  ///< compute type (the mainloop's accumulator type)
  /// @var TM
  /// @brief accumulator rows (pixels) per thread, Mainloop::TM
  /// @var TN
  /// @brief accumulator columns (channels) per thread, Mainloop::TN
  /// @var NT
  /// @brief threads per block, Mainloop::NT
  /// @var BM
  /// @brief pixels per block tile, Mainloop::BM
  static constexpr int TM = Mainloop::TM, TN = Mainloop::TN, NT = Mainloop::NT, BM = Mainloop::BM;
  /// @var CG
  /// @brief logical warp width: consecutive lanes holding the same pixels, Mainloop::lanes_per_pixel
  /// @var WPP
  /// @brief warps holding the same pixels, Mainloop::warps_per_pixel (> 1: partials combined in shared memory)
  static constexpr int CG = Mainloop::lanes_per_pixel, WPP = Mainloop::warps_per_pixel;
  using accum_t = typename Op::template accum_t<V>;  ///< running state (value, or value + index)
  using warp_reduce = cub::WarpReduce<accum_t, CG>;  ///< reduction across the CG lanes of a logical warp
  /// the transposing reduction (each lane holds a multiple of CG rows), else cub::WarpReduce per row
  static constexpr bool transposing = CG > 1 && TM % CG == 0;
  /// log2(CG), the transposing reduction's steps (CG is a power of two)
  static constexpr int log2_cg = CG >= 32 ? 5 : CG >= 16 ? 4 : CG >= 8 ? 3 : CG >= 4 ? 2 : CG >= 2 ? 1 : 0;
  /// Shared memory: the parked per-thread states, the warp reductions' storage and the per-warp partials.
  struct TempStorage {
    accum_t state[Park ? TM : 1][Park ? NT : 1];      ///< parked states: state[i][t] of thread t, accumulator row i
    typename warp_reduce::TempStorage warp[transposing ? 1 : NT / CG];  ///< cub::WarpReduce storage, one per logical warp
    accum_t partial[WPP][WPP > 1 ? BM : 1];           ///< partial[w][p]: result of warp_n() == w for tile pixel p (WPP > 1)
  };

  TempStorage& temp;  ///< the caller-placed shared memory
  Op op;              ///< the reduction op (combines states)

  /// Binds the caller-placed shared memory.
  __device__ reduce_epilogue(TempStorage& t, Op o) : temp(t), op(o) {}

  /// Folds channels [0, valid) of the tile (tile column n maps to global channel k_first + n, column of
  /// accumulator j given by `tile_n(j)`) into the register states `state` (one per accumulator row).
  /// bias may be nullptr.
  template <class T, class Epilogue, class TileN>
  __device__ void fold(const V (&acc)[TM][TN], const T* bias, const Epilogue& epi, std::int64_t k_first, int valid,
                       TileN tile_n, accum_t (&state)[TM]) const {
    // a thread whose columns are all valid (every thread of a full channel tile) takes the branch-free
    // loop: with the per-column `n < valid` test inside it, each column was its own divergent branch
    // (32 BSSY / BSYNC pairs in the wgmma kernel's epilogue), which kept ptxas from interleaving the
    // columns' independent adds, epilogues and combines
    bool all_valid = true;
#pragma unroll
    for (int j = 0; j < TN; ++j) all_valid = all_valid && tile_n(j) < valid;
    if (all_valid)
      fold_columns<true>(acc, bias, epi, k_first, valid, tile_n, state);
    else
      fold_columns<false>(acc, bias, epi, k_first, valid, tile_n, state);
  }

  /// fold on the parked states (Park): `first` starts them at the op's identity. Each thread touches only
  /// its own parked states: no barrier needed.
  template <class T, class Epilogue, class TileN>
  __device__ void accumulate(const V (&acc)[TM][TN], const T* bias, const Epilogue& epi, std::int64_t k_first,
                             int valid, TileN tile_n, bool first) {
    static_assert(Park, "reduce_epilogue: accumulate parks states in shared memory (Park = true)");
    const int t = static_cast<int>(threadIdx.x);
    accum_t state[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) state[i] = first ? Op::template identity<V>() : temp.state[i][t];
    fold(acc, bias, epi, k_first, valid, tile_n, state);
#pragma unroll
    for (int i = 0; i < TM; ++i) temp.state[i][t] = state[i];
  }

  /// Reduces across the logical warp (and the warps sharing the pixels) and writes y[o] (converted to T)
  /// and, for index ops, indices[o] for each tile pixel p = tile_m(i) with output offset o = out_of(p) >= 0
  /// (out_of returns -1 for pixels past the tensor's edge). `count` is K (for mean).
  /// The parked states (Park) are the input.
  template <class T, class TileM, class OutOf>
  __device__ void store(T* y, std::int64_t* indices, std::int64_t count, TileM tile_m, OutOf out_of) {
    static_assert(Park, "reduce_epilogue: store reads the parked states (Park = true); see finish");
    accum_t state[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) state[i] = temp.state[i][threadIdx.x];
    finish(state, y, indices, count, tile_m, out_of);
  }

  /// store on register states (from fold).
  template <class T, class TileM, class OutOf>
  __device__ void finish(const accum_t (&state)[TM], T* y, std::int64_t* indices, std::int64_t count, TileM tile_m,
                         OutOf out_of) {
    finish_each(state, tile_m, out_of, [&](std::int64_t m, const accum_t& r) { write(y, indices, m, r, count); });
  }

  /// finish with the reduced states given to `out(m, r)` (m = out_of(p), -1 past the tensor's edge)
  /// instead of written as y and indices: a kernel that writes partial states (one channel pass's) for a
  /// later combine.
  template <class TileM, class OutOf, class Out>
  __device__ void finish_each(const accum_t (&state)[TM], TileM tile_m, OutOf out_of, Out out) {
    const int l = static_cast<int>(threadIdx.x) % CG;
    auto emit = [&](int i, const accum_t& r) {  // row i's result, reduced over the logical warp
      if constexpr (WPP == 1)
        out(out_of(tile_m(i)), r);
      else
        temp.partial[Mainloop::warp_n()][tile_m(i)] = r;
    };
    if constexpr (transposing) {
      accum_t s[TM];
#pragma unroll
      for (int i = 0; i < TM; ++i) s[i] = state[i];
#pragma unroll
      for (int step = 0; step < log2_cg; ++step) {
        const int d = CG >> (step + 1), half = TM >> (step + 1);  // partner distance, rows kept
        const bool upper = (l & d) != 0;                           // keeps the upper half of its rows
#pragma unroll
        for (int j = 0; j < half; ++j) {
          const accum_t keep = upper ? s[j + half] : s[j], give = upper ? s[j] : s[j + half];
          s[j] = op(keep, detail::shfl_xor<CG>(give, d));
        }
      }
#pragma unroll
      for (int j = 0; j < TM / CG; ++j) emit(l * (TM / CG) + j, s[j]);
    } else {
      const int lw = static_cast<int>(threadIdx.x) / CG;
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const accum_t r = warp_reduce(temp.warp[lw]).Reduce(state[i], op);
        __syncwarp();  // the logical warp's TempStorage is reused by the next row (CUB's rule)
        if (l == 0) emit(i, r);
      }
    }
    if constexpr (WPP > 1) {
      __syncthreads();
      for (int p = static_cast<int>(threadIdx.x); p < BM; p += NT) {
        accum_t r = temp.partial[0][p];
#pragma unroll
        for (int w = 1; w < WPP; ++w) r = op(r, temp.partial[w][p]);
        out(out_of(p), r);
      }
    }
  }

 private:
  /// fold's loop; `AllValid`: every column of this thread is < valid (no per-column test).
  template <bool AllValid, class T, class Epilogue, class TileN>
  __device__ void fold_columns(const V (&acc)[TM][TN], const T* bias, const Epilogue& epi, std::int64_t k_first,
                               int valid, TileN tile_n, accum_t (&state)[TM]) const {
    // the bias loads first, all of them in flight at once (loaded inside the loop below, behind its
    // branch, each one's latency was exposed in turn)
    V b[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = tile_n(j);
      b[j] = bias && (AllValid || n < valid) ? to_compute(bias[k_first + n]) : V(0);
    }
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = tile_n(j);
      if (!AllValid && n >= valid) continue;
      const int k = static_cast<int>(k_first + n);
#pragma unroll
      for (int i = 0; i < TM; ++i) state[i] = op(state[i], Op::template make<V>(apply_epilogue(epi, acc[i][j] + b[j], k), k));
    }
  }

  template <class T>
  __device__ static void write(T* y, std::int64_t* indices, std::int64_t m, const accum_t& r, std::int64_t count) {
    write_reduced<Op, V>(y, indices, m, r, count);
  }
};

}  // namespace convred::block
