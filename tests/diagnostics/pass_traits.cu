// Must compile (without warnings): the checks accept every built-in op and epilogue, user ops and
// epilogues written against functional.cuh, __device__ and __host__ __device__ lambdas; they reject
// what the fail_*.cu cases pass (so a change that weakens them fails here first).
#include <convred/functional.cuh>

#include <cstdint>

namespace {
using convred::detail::is_epilogue_v;
using convred::detail::is_reduction_op_v;
namespace op = convred::op;
namespace epi = convred::epilogue;

struct range_op {  // as tests/test_util.cuh's user op: a two-value state, no index
  template <class V>
  struct state {
    V lo, hi;
  };
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = state<V>;
  template <class V>
  __host__ __device__ static state<V> identity() { return {V(1e30), V(-1e30)}; }
  template <class V>
  __host__ __device__ static state<V> make(V v, int) { return {v, v}; }
  template <class V>
  __host__ __device__ state<V> operator()(state<V> a, state<V> b) const {
    return {a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
  }
  template <class V>
  __host__ __device__ static V value(state<V> a, std::int64_t) { return a.hi - a.lo; }
};
struct no_make {
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = V;
  template <class V>
  __host__ __device__ static V identity() { return V(0); }
  template <class V>
  __host__ __device__ V operator()(V a, V b) const { return a + b; }
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t) { return a; }
};
struct index_without_index {  // claims an index, has no index()
  static constexpr bool has_index = true;
  template <class V>
  using accum_t = convred::arg_value<V>;
  template <class V>
  __host__ __device__ static accum_t<V> identity() { return {V(0), 0}; }
  template <class V>
  __host__ __device__ static accum_t<V> make(V v, int k) { return {v, k}; }
  template <class V>
  __host__ __device__ accum_t<V> operator()(accum_t<V> a, accum_t<V>) const { return a; }
  template <class V>
  __host__ __device__ static V value(accum_t<V> a, std::int64_t) { return a.value; }
};
struct value_only {  // V e(V): the channel index is optional
  __host__ __device__ float operator()(float v) const { return v < 0 ? 0 : v; }
};
struct device_only {
  __device__ float operator()(float v, int k) const { return v + float(k); }
};
struct returns_pointer {
  __host__ __device__ const char* operator()(float, int) const { return nullptr; }
};

static_assert(is_reduction_op_v<op::min, float> && is_reduction_op_v<op::max, double>);
static_assert(is_reduction_op_v<op::sum, float> && is_reduction_op_v<op::mean, double>);
static_assert(is_reduction_op_v<op::argmin, float> && is_reduction_op_v<op::argmax, double>);
static_assert(is_reduction_op_v<range_op, float> && is_reduction_op_v<range_op, double>);
static_assert(!is_reduction_op_v<no_make, float>);
static_assert(!is_reduction_op_v<index_without_index, float>);
static_assert(!is_reduction_op_v<int, float> && !is_reduction_op_v<epi::identity, float>);

using pcs_then_scale = epi::compose<epi::per_channel_scale<float>, epi::scale<float>>;
static_assert(is_epilogue_v<epi::identity, float> && is_epilogue_v<epi::scale<float>, double>);
static_assert(is_epilogue_v<epi::per_channel_scale<float>, float> && is_epilogue_v<pcs_then_scale, double>);
static_assert(is_epilogue_v<value_only, float> && is_epilogue_v<device_only, float>);
static_assert(!is_epilogue_v<returns_pointer, float> && !is_epilogue_v<int, float>);
static_assert(!is_epilogue_v<op::min, float>);
}  // namespace

// Lambdas need an enclosing function (extended lambdas: nvcc --extended-lambda).
void lambdas() {
  [[maybe_unused]] auto dev = [] __device__(float v, int) { return 2 * v; };
  [[maybe_unused]] auto hd = [] __host__ __device__(double v) { return v * v; };
  [[maybe_unused]] auto host_only = [](float v, int) { return v; };
  static_assert(is_epilogue_v<decltype(dev), float> && is_epilogue_v<decltype(hd), double>);
  static_assert(convred::detail::is_epilogue_signature_v<decltype(host_only), float>);  // the probe rejects it
}
