// Must NOT compile: a plain (host) lambda as the epilogue of device::channel_reduce.
// EXPECT: epilogue_must_be_device_callable
#include <convred/device/channel_reduce.cuh>

convred::status f(const convred::channel_reduce_problem& p, const float* x, float* y) {
  auto twice = [](float v) { return 2 * v; };
  return convred::device::channel_reduce(p, x, y, nullptr, convred::op::max{}, twice);
}
