// Must NOT compile: a user reduction op without `make`, passed to device::conv2d_reduce.
// EXPECT: convred: Op is not a reduction op.
#include <convred/device/conv2d_reduce.cuh>

struct sum_without_make {
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

convred::status f(const convred::conv2d_problem& p, const float* x, const float* w, float* y) {
  return convred::device::conv2d_reduce(p, x, w, nullptr, y, nullptr, sum_without_make{});
}
