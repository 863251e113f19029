// Must NOT compile: an epilogue that cannot be called as V e(V, int) or V e(V), passed to device::conv2d.
// EXPECT: convred: Epilogue is not an epilogue.
#include <convred/device/conv2d_reduce.cuh>

struct takes_a_pointer {
  __host__ __device__ float operator()(const float* v, int) const { return *v; }
};

convred::status f(const convred::conv2d_problem& p, const float* x, const float* w, float* out) {
  return convred::device::conv2d(p, x, w, nullptr, out, takes_a_pointer{});
}
