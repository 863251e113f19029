// Must NOT compile: an op that says has_index but has no `index`, passed to device::channel_reduce.
// EXPECT: convred: Op is not a reduction op.
#include <convred/device/channel_reduce.cuh>

struct argmax_without_index {
  static constexpr bool has_index = true;
  template <class V>
  using accum_t = convred::arg_value<V>;
  template <class V>
  __host__ __device__ static accum_t<V> identity() { return {V(-1e30), 0}; }
  template <class V>
  __host__ __device__ static accum_t<V> make(V v, int k) { return {v, k}; }
  template <class V>
  __host__ __device__ accum_t<V> operator()(accum_t<V> a, accum_t<V> b) const { return b.value > a.value ? b : a; }
  template <class V>
  __host__ __device__ static V value(accum_t<V> a, std::int64_t) { return a.value; }
};

convred::status f(const convred::channel_reduce_problem& p, const __half* x, __half* y, std::int64_t* i) {
  return convred::device::channel_reduce(p, x, y, i, argmax_without_index{});
}
