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
  int bind(const void* w, void* workspace, std::size_t bytes) override {
    return static_cast<int>(plan_.bind(static_cast<const T*>(w), workspace, bytes));
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

template <class T, class Math>
std::unique_ptr<plan> make_plan_of(const convred::conv2d_problem& p) {
  return std::make_unique<plan_impl<T, Math>>(p);
}

}  // namespace convred_ext
