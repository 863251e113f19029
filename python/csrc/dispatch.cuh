// Shared by the CUDA translation units of the extension: one instantiation per (policy, element type,
// op), chosen at run time. The epilogue is always convred::epilogue::scale (scale 1 is the identity).
#pragma once

#include <convred/convred.cuh>

#include <type_traits>

#include "launch.h"

namespace convred_ext {

/// The scale epilogue in the compute type (fp64 for double, so that float64 stays exact).
template <class T>
using scale_epi = convred::epilogue::scale<std::conditional_t<std::is_same_v<T, double>, double, float>>;

/// Calls `call(op)` with the convred op of a reduce kind (6 instantiations: argmin, argmax, min, max, sum,
/// mean). min/max return indices too (as torch.min(t, dim)), so they run the index ops; amin/amax (values
/// only) run the value ops.
template <class Call>
convred::status by_op(reduce_kind r, Call&& call) {
  switch (r) {
    case reduce_kind::min:
    case reduce_kind::argmin: return call(convred::op::argmin{});
    case reduce_kind::max:
    case reduce_kind::argmax: return call(convred::op::argmax{});
    case reduce_kind::amin: return call(convred::op::min{});
    case reduce_kind::amax: return call(convred::op::max{});
    case reduce_kind::sum: return call(convred::op::sum{});
    case reduce_kind::mean: return call(convred::op::mean{});
  }
  return convred::status::invalid_argument;
}

/// convred::device::conv2d_reduce<Policy> for element type T.
template <class Policy, class T>
int run_plain(reduce_kind r, const launch_args& a) {
  using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const scale_epi<T> epi{static_cast<S>(a.scale)};
  const auto s = by_op(r, [&](auto op) {
    using Op = decltype(op);
    return convred::device::conv2d_reduce<Policy>(a.p, static_cast<const T*>(a.x), static_cast<const T*>(a.w),
                                                  static_cast<const T*>(a.bias), static_cast<T*>(a.y),
                                                  Op::has_index ? a.indices : nullptr, op, epi, a.stream);
  });
  return static_cast<int>(s);
}

/// convred::device::conv2d_reduce_packed with the default wgmma policy of Math, float x.
template <class Math>
int run_packed(reduce_kind r, const launch_args& a) {
  using Pol = typename convred::default_wgmma_policy<Math>::type;
  const scale_epi<float> epi{static_cast<float>(a.scale)};
  const auto s = by_op(r, [&](auto op) {
    using Op = decltype(op);
    return convred::device::conv2d_reduce_packed<Pol>(
        a.p, static_cast<const float*>(a.x), static_cast<const float*>(a.w), a.packed, a.packed_bytes,
        static_cast<const float*>(a.bias), static_cast<float*>(a.y), Op::has_index ? a.indices : nullptr, op, epi,
        a.stream);
  });
  return static_cast<int>(s);
}

template <class Math>
std::size_t packed_bytes_for(const convred::conv2d_problem& p) {
  using Pol = typename convred::default_wgmma_policy<Math>::type;
  return convred::device::packed_filter_bytes<Pol, float>(p);
}

template <class Math>
int pack_for(const convred::conv2d_problem& p, const float* w, void* packed, std::size_t bytes, cudaStream_t stream) {
  using Pol = typename convred::default_wgmma_policy<Math>::type;
  return static_cast<int>(convred::device::pack_filter<Pol>(p, w, packed, bytes, stream));
}

}  // namespace convred_ext
