// GPU test of the launch helpers of device/common.cuh: detail::check_device raises a kernel's dynamic
// shared-memory limit to one value for every caller, so that host threads launching one kernel with
// different shared-memory sizes cannot fail each other's launches (the limit is the function's, shared by
// all host threads: with the limit set to each caller's own size, a thread lowering it between another
// thread's set and launch failed that launch with cudaErrorInvalidValue, once in 400 cases of the fuzz
// test's 16 threads).
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <thread>

#include <convred/device/common.cuh>

#include "test_util.cuh"

namespace convred::test::launch_gpu {

/// Writes `words` ints of dynamic shared memory, reads the last back: +1 to *count when it is right.
__global__ void touch_smem_kernel(int* count, int words) {
  extern __shared__ int smem[];
  for (int i = static_cast<int>(threadIdx.x); i < words; i += static_cast<int>(blockDim.x)) smem[i] = i;
  __syncthreads();
  if (threadIdx.x == 0 && smem[words - 1] == words - 1) atomicAdd(count, 1);
}

TEST_SUITE("gpu") {

TEST_CASE("check_device: two host threads launch one kernel with different shared memory, none fails") {
  REQUIRE_MESSAGE(has_gpu(), "no CUDA device");
  int dev = 0, optin = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess);
  REQUIRE(optin >= 64 * 1024 + 1024);
  // both above the 48 KB default: 56 KB, and the most the device gives the kernel
  const std::size_t sizes[2] = {56 * 1024, static_cast<std::size_t>(optin) / 1024 * 1024 - 1024};
  constexpr int iters = 3000;
  std::atomic<int> refused{0}, failed{0}, launched{0};
  int* counts = nullptr;
  REQUIRE(cudaMalloc(&counts, 2 * sizeof(int)) == cudaSuccess);
  REQUIRE(cudaMemset(counts, 0, 2 * sizeof(int)) == cudaSuccess);
  auto worker = [&](int t) {
    if (cudaSetDevice(dev) != cudaSuccess) return;
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
    for (int i = 0; i < iters; ++i) {
      if (convred::device::detail::check_device(touch_smem_kernel, sizes[t]) != convred::status::success) {
        ++refused;
        cudaGetLastError();  // this thread's error: clear it for the next round
        continue;
      }
      touch_smem_kernel<<<1, 128, sizes[t], s>>>(counts + t, static_cast<int>(sizes[t] / sizeof(int)));
      if (cudaGetLastError() != cudaSuccess) ++failed;  // (the launch's error, cleared)
      else ++launched;
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  CHECK(refused.load() == 0);
  CHECK(failed.load() == 0);
  CHECK(launched.load() == 2 * iters);
  int h[2] = {-1, -1};
  REQUIRE(cudaMemcpy(h, counts, sizeof(h), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(h[0] + h[1] == launched.load());  // every launched block saw its shared memory
  cudaFree(counts);
  CHECK(cudaGetLastError() == cudaSuccess);
}

}  // TEST_SUITE("gpu")

}  // namespace convred::test::launch_gpu
