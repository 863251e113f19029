/// @file block/reduce_epilogue.cuh
/// @brief Block-level fused epilogue + reduction across channels of a conv register tile.
#pragma once

#include <cub/warp/warp_reduce.cuh>

#include <cstdint>

#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::block {

/// @brief Folds a ThreadM x ThreadN conv accumulator tile into per-pixel reduction states, then reduces
/// across the block's channel groups with cub::WarpReduce and writes y (and indices).
///
/// Between channel tiles the states are parked in shared memory (TempStorage::state, thread index
/// fastest: conflict-free), so no reduction state occupies registers while the conv mainloop runs.
/// Per element: v = e(acc + bias[k], k) in the compute type, then state = op(state, Op::make(v, k));
/// channels past the tile's valid count are skipped (never an identity leak: the identity is exact and
/// only ever combined, see functional.cuh). The `channel_groups` threads holding one pixel group form a
/// logical warp (consecutive lanes), so the cross-thread step is one cub::WarpReduce per pixel row.
template <class Policy, class V, class Op>
struct reduce_epilogue {
  static constexpr int TM = Policy::thread_m, TN = Policy::thread_n, CG = Policy::channel_groups;
  using accum_t = typename Op::template accum_t<V>;  ///< running state (value, or value + index)
  using warp_reduce = cub::WarpReduce<accum_t, CG>;
  /// Shared memory: the parked per-thread states and the warp reductions' storage.
  struct TempStorage {
    accum_t state[TM][Policy::threads];
    typename warp_reduce::TempStorage warp[Policy::threads / CG];
  };

  TempStorage& temp;
  Op op;

  /// Binds the caller-placed shared memory.
  __device__ reduce_epilogue(TempStorage& t, Op o) : temp(t), op(o) {}

  /// Folds channels [0, valid) of the tile (tile column n maps to global channel k_first + n, column of
  /// accumulator j given by `tile_n(j)`) into the states; `first` starts them at the op's identity.
  /// bias may be nullptr. Each thread touches only its own parked states: no barrier needed.
  template <class T, class Epilogue, class TileN>
  __device__ void accumulate(const V (&acc)[TM][TN], const T* bias, const Epilogue& epi, std::int64_t k_first,
                             int valid, TileN tile_n, bool first) {
    const int t = static_cast<int>(threadIdx.x);
    accum_t state[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) state[i] = first ? Op::template identity<V>() : temp.state[i][t];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = tile_n(j);
      if (n >= valid) continue;
      const int k = static_cast<int>(k_first + n);
      const V b = bias ? to_compute(bias[k]) : V(0);
#pragma unroll
      for (int i = 0; i < TM; ++i) state[i] = op(state[i], Op::template make<V>(apply_epilogue(epi, acc[i][j] + b, k), k));
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) temp.state[i][t] = state[i];
  }

  /// Reduces across the logical warp and, from its lane 0, writes y[m] (converted to T) and, for index
  /// ops, indices[m] for each of the thread's valid pixels m = m_of(i) < M. `count` is K (for mean).
  template <class T, class TileM>
  __device__ void store(T* y, std::int64_t* indices, std::int64_t m0, std::int64_t M, std::int64_t count,
                        TileM tile_m) {
    const int lw = static_cast<int>(threadIdx.x) / CG;
    const bool leader = static_cast<int>(threadIdx.x) % CG == 0;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const accum_t r = warp_reduce(temp.warp[lw]).Reduce(temp.state[i][threadIdx.x], op);
      const std::int64_t m = m0 + tile_m(i);
      if (leader && m < M) {
        if (y) y[m] = from_compute<T>(Op::template value<V>(r, count));
        if constexpr (Op::has_index) {
          if (indices) indices[m] = Op::template index<V>(r);
        }
      }
    }
  }
};

}  // namespace convred::block
