// Must NOT compile: a __device__ lambda epilogue with the wrong signature, passed to device::conv2d_reduce
// (nvcc --extended-lambda; the check runs in the device pass, where the lambda's type is real).
// EXPECT: convred: Epilogue is not an epilogue.
#include <convred/device/conv2d_reduce.cuh>

convred::status f(const convred::conv2d_problem& p, const float* x, const float* w, float* y) {
  auto bad = [] __device__(float v, int k, int extra) { return v * float(k + extra); };
  return convred::device::conv2d_reduce(p, x, w, nullptr, y, nullptr, convred::op::min{}, bad);
}
