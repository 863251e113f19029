// Must NOT compile: an op whose combine is not const (kernels call it on a const op), run through
// conv2d_reduce_plan.
// EXPECT: convred: Op is not a reduction op.
#include <convred/device/conv2d_reduce_plan.cuh>

struct non_const_combine {
  static constexpr bool has_index = false;
  template <class V>
  struct state {
    V lo, hi;
  };
  template <class V>
  using accum_t = state<V>;
  template <class V>
  __host__ __device__ static state<V> identity() { return {V(1e30), V(-1e30)}; }
  template <class V>
  __host__ __device__ static state<V> make(V v, int) { return {v, v}; }
  template <class V>
  __host__ __device__ state<V> operator()(state<V> a, state<V> b) {  // not const
    return {a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
  }
  template <class V>
  __host__ __device__ static V value(state<V> a, std::int64_t) { return a.hi - a.lo; }
};

convred::status f(const convred::device::conv2d_reduce_plan<float>& plan, const float* x, float* y) {
  return plan.run(x, nullptr, y, nullptr, non_const_combine{});
}
