/// @file kernel/group_combine.cuh
/// @brief The last step of a grouped convolution run one group at a time (device::family::grouped): each
/// group's reduced output over its own K/groups channels is combined, per output pixel, into the
/// reduction over all K channels. A reduction over a union of disjoint channel sets is the combine of
/// the reductions over each set (the ops are associative and commutative, functional.cuh), so the
/// result is the op's over all channels; PyTorch's NaN and tie rules carry over because argmin /
/// argmax combine with a total order (NaN first, then value, then the lower channel index).
#pragma once

#include <cstdint>

#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::kernel {

/// @brief y[m] and indices[m] over all channels from the groups' outputs: for each output pixel m of M
/// (grid-stride loop), the states of groups 0..groups-1 are rebuilt from ys[j * M + m] (the group's
/// reduced value: for op::min, max, sum, argmin and argmax the state's value; for op::mean the group's
/// mean) and, for an op with an index, is[j * M + m] + j * kg (the group's channel index made the
/// problem's: group j holds channels [j kg, (j + 1) kg)), combined in group order with op, and written
/// as Op::value(state, groups) (the mean of the equal-sized groups' means for op::mean) and
/// Op::index(state). y or indices nullptr: not written. is may be nullptr for an op without an index.
/// T the element type of y (its values rounded to T as every kernel's), Op one of convred's ops.
template <class T, class Op>
__global__ void group_combine_kernel(const T* __restrict__ ys, const std::int64_t* __restrict__ is, std::int64_t M,
                                     std::int32_t groups, std::int64_t kg, T* __restrict__ y,
                                     std::int64_t* __restrict__ indices, Op op) {
  using V = compute_t<T>;
  using state_t = typename Op::template accum_t<V>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t m = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; m < M; m += step) {
    state_t s = Op::template identity<V>();
    for (std::int32_t j = 0; j < groups; ++j) {
      const V v = to_compute(ys[j * M + m]);
      if constexpr (Op::has_index) {
        s = op(s, state_t{v, static_cast<std::int32_t>(is[j * M + m] + j * kg)});
      } else {
        s = op(s, v);
      }
    }
    if (y) y[m] = from_compute<T>(Op::template value<V>(s, groups));
    if constexpr (Op::has_index) {
      if (indices) indices[m] = Op::template index<V>(s);
    }
  }
}

}  // namespace convred::kernel
