// Must NOT compile: a host-only epilogue functor (nvcc alone only warns, #20011-D, and the kernel would
// call nothing valid), passed to device::conv2d_reduce.
// EXPECT: epilogue_must_be_device_callable
#include <convred/device/conv2d_reduce.cuh>

struct host_only_scale {
  float s;
  float operator()(float v, int) const { return v * s; }  // no __device__
};

convred::status f(const convred::conv2d_problem& p, const float* x, const float* w, float* y) {
  return convred::device::conv2d_reduce(p, x, w, nullptr, y, nullptr, convred::op::min{}, host_only_scale{2.0f});
}
