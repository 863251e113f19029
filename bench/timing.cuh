/// @file bench/timing.cuh
/// @brief The benchmarks' GPU timing (conv_reduce_bench.cu, family_bench.cu): CUDA events around each run on
/// the default stream; before every timed run the L2 is flushed (cudaMemsetAsync of a buffer the caller
/// sizes, outside the events, as triton.testing.do_bench does) and the GPU is held 0.5 ms by a one-thread
/// spin kernel, so that the run is fully enqueued before its start event is reached (GPU time, without host
/// enqueue gaps; as nvbench's blocking kernel); untimed warm-up runs first. A failed CUDA call throws
/// (CHECK_CUDA). For one translation unit per benchmark executable (the kernel is defined here).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "../examples/common/cuda_check.hpp"

namespace convred_bench {

/// Keeps the GPU busy for `ns` nanoseconds (one thread, %globaltimer), so that work the host enqueues
/// behind it is queued before the GPU reaches it: the events then time GPU work, not host enqueue gaps.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

/// An RAII set of CUDA events.
struct events {
  std::vector<cudaEvent_t> e;  ///< the events
  /// n events (cudaEventCreate).
  explicit events(std::size_t n) : e(n, nullptr) {
    for (auto& ev : e) CHECK_CUDA(cudaEventCreate(&ev));
  }
  events(const events&) = delete;
  events& operator=(const events&) = delete;
  ~events() {
    for (auto ev : e)
      if (ev) cudaEventDestroy(ev);
  }
};

/// The L2 flush before each timed run: a device buffer of the caller's size, overwritten by each flush().
class l2_flush {
 public:
  /// A buffer of `bytes` (conv_reduce_bench: max(256 MiB, 4 x L2); family_bench: 256 MiB).
  explicit l2_flush(std::size_t bytes) : bytes_(bytes) { CHECK_CUDA(cudaMalloc(&p_, bytes_)); }
  l2_flush(const l2_flush&) = delete;
  l2_flush& operator=(const l2_flush&) = delete;
  ~l2_flush() { cudaFree(p_); }
  /// Overwrites the L2 with a memset, then holds the GPU for 0.5 ms (spin_kernel) so that the timed
  /// work is fully enqueued before its start event is reached.
  void flush() {
    CHECK_CUDA(cudaMemsetAsync(p_, (value_++) & 0xff, bytes_, nullptr));
    spin_kernel<<<1, 1>>>(500000ull);
    CHECK_CUDA(cudaGetLastError());
  }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  int value_ = 0;
};

/// Runs f `warmup` times, then `iters` times each after fl.flush() and between two events (default stream);
/// returns the `iters` times in ms, sorted ascending.
template <class F>
std::vector<double> sorted_times(const F& f, int warmup, int iters, l2_flush& fl) {
  for (int i = 0; i < warmup; ++i) f();
  CHECK_CUDA(cudaDeviceSynchronize());
  events ev(2 * static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    fl.flush();
    CHECK_CUDA(cudaEventRecord(ev.e[2 * i], nullptr));
    f();
    CHECK_CUDA(cudaEventRecord(ev.e[2 * i + 1], nullptr));
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, ev.e[2 * i], ev.e[2 * i + 1]));
    t[i] = ms;
  }
  std::sort(t.begin(), t.end());
  return t;
}

}  // namespace convred_bench
