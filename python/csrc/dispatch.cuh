// Shared by the CUDA translation units of the extension: plan_impl<T, Math> wraps one
// convred::device::conv2d_reduce_plan; its run instantiates the plan's kernels for the six ops (argmin,
// argmax, min, max, sum, mean) with the scale epilogue (scale 1 is the identity).
#pragma once

#include <convred/convred.cuh>

#include <memory>
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

/// convred::device::conv2d_reduce_plan<T, Math> behind convred_ext::plan.
template <class T, class Math>
class plan_impl final : public plan {
 public:
  explicit plan_impl(const convred::conv2d_problem& p) : plan_(p) {}
  int state() const override { return static_cast<int>(plan_.state()); }
  const std::string& description() const override { return plan_.description(); }
  std::size_t workspace_bytes() const override { return plan_.workspace_bytes(); }
  std::size_t prepared_bytes() const override { return plan_.prepared_bytes(); }
  int prepare(const void* w, void* workspace, std::size_t bytes, cudaStream_t stream) override {
    return static_cast<int>(plan_.prepare(static_cast<const T*>(w), workspace, bytes, stream));
  }
  std::size_t scratch_bytes() const override { return plan_.scratch_bytes(); }
  int bind(const void* w, const void* prepared, std::size_t prepared_size, void* scratch,
           std::size_t scratch_size) override {
    return static_cast<int>(plan_.bind(static_cast<const T*>(w), prepared, prepared_size, scratch, scratch_size));
  }
  int run(reduce_kind r, const run_args& a) override {
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const scale_epi<T> epi{static_cast<S>(a.scale)};
    return static_cast<int>(by_op(r, [&](auto op) {
      using Op = decltype(op);
      return plan_.run(static_cast<const T*>(a.x), static_cast<const T*>(a.bias), static_cast<T*>(a.y),
                       Op::has_index ? a.indices : nullptr, op, epi, a.stream);
    }));
  }

 private:
  convred::device::conv2d_reduce_plan<T, Math> plan_;
};

/// The exact-FMA kernels every math's plan of one element type T may run (the SIMT kernel, fused and
/// split, in the default and the narrow policy, and the depthwise direct kernel, with the plan's tiling or its own) are compiled once, in T's ieee translation unit
/// (CONVRED_EXT_INSTANTIATE_EXACT); the other translation units of T only declare them (extern template).
#define CONVRED_EXT_EXACT_KERNELS(EXTERN, T, OP)                                                                 \
  EXTERN template convred::status convred::device::conv2d_reduce<typename convred::default_simt_policy<T>::type,  \
                                                                 T, OP, convred_ext::scale_epi<T>>(                \
      const convred::conv2d_problem&, const T*, const T*, const T*, T*, std::int64_t*, OP, convred_ext::scale_epi<T>, \
      cudaStream_t);                                                                                              \
  EXTERN template convred::status                                                                                 \
  convred::device::conv2d_reduce_split<typename convred::default_simt_policy<T>::type, T, OP, convred_ext::scale_epi<T>>( \
      const convred::conv2d_problem&, const T*, const T*, const T*, T*, std::int64_t*, void*, std::size_t, int, OP,  \
      convred_ext::scale_epi<T>, cudaStream_t);                                                                   \
  EXTERN template convred::status convred::device::conv2d_reduce<typename convred::narrow_simt_policy<T>::type,   \
                                                                 T, OP, convred_ext::scale_epi<T>>(                \
      const convred::conv2d_problem&, const T*, const T*, const T*, T*, std::int64_t*, OP, convred_ext::scale_epi<T>, \
      cudaStream_t);                                                                                              \
  EXTERN template convred::status                                                                                 \
  convred::device::conv2d_reduce_split<typename convred::narrow_simt_policy<T>::type, T, OP, convred_ext::scale_epi<T>>( \
      const convred::conv2d_problem&, const T*, const T*, const T*, T*, std::int64_t*, void*, std::size_t, int, OP,  \
      convred_ext::scale_epi<T>, cudaStream_t);                                                                   \
  EXTERN template convred::status convred::device::conv2d_reduce_direct<T, OP, convred_ext::scale_epi<T>>(        \
      const convred::conv2d_problem&, const T*, const T*, const T*, T*, std::int64_t*, OP, convred_ext::scale_epi<T>, \
      cudaStream_t);                                                                                              \
  EXTERN template convred::status convred::device::detail::conv2d_reduce_direct_with<T, OP, convred_ext::scale_epi<T>>( \
      const convred::device::direct_config*, const convred::conv2d_problem&, const T*, const T*, const T*, T*,      \
      std::int64_t*, OP, convred_ext::scale_epi<T>, cudaStream_t, bool);
#define CONVRED_EXT_EXACT_ALL_OPS(EXTERN, T)                 \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::argmin)  \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::argmax)  \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::min)     \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::max)     \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::sum)     \
  CONVRED_EXT_EXACT_KERNELS(EXTERN, T, convred::op::mean)
}  // namespace convred_ext
#ifndef CONVRED_EXT_INSTANTIATE_EXACT
CONVRED_EXT_EXACT_ALL_OPS(extern, float)
CONVRED_EXT_EXACT_ALL_OPS(extern, __half)
CONVRED_EXT_EXACT_ALL_OPS(extern, __nv_bfloat16)
#endif
namespace convred_ext {

template <class T, class Math>
std::unique_ptr<plan> make_plan_of(const convred::conv2d_problem& p) {
  return std::make_unique<plan_impl<T, Math>>(p);
}

}  // namespace convred_ext
