/// @file bench/wgmma_stages.cu
/// @brief Times the packed-filter wgmma kernel (device::conv2d_reduce_packed) on the seed problem for
/// several wgmma_policy variants, per math, with op::min and op::argmin, on
/// data in [-1, 1) and in [0, 1) (median of CUDA-event timings with the L2 flushed before each run).
/// Usage: wgmma_stages [iters]. Prints one line per variant: math, op, stages, raw buffers, producer warpgroups, whether the
/// filter is resident, median ms, TFLOP/s; exit 2 without a CUDA device or sm_90a image.
#include <convred/convred.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>

#include <thrust/device_vector.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../examples/common/cuda_check.hpp"

namespace {

std::size_t y_size(const convred::conv2d_problem& p) { return static_cast<std::size_t>(p.y_elements()); }

/// Deterministic pseudo-random fill in [-1, 1) by element index (a 64-bit hash).
struct hash_fill {
  unsigned long long seed;
  __host__ __device__ float operator()(long long i) const {
    unsigned long long z = static_cast<unsigned long long>(i) + seed * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / 8388608.0f - 1.0f;
  }
};

/// v -> (v + 1) / 2: [-1, 1) -> [0, 1).
struct half_up {
  __host__ __device__ float operator()(float v) const { return 0.5f * (v + 1.0f); }
};

template <class Policy, class Op = convred::op::min>
void run(const char* label, const convred::conv2d_problem& p, const float* x, const float* w, const float* b,
         float* y, int iters, thrust::device_vector<char>& flush) {
  const std::size_t bytes = convred::device::packed_filter_bytes<Policy, float>(p);
  const auto k = convred::device::detail::wgmma_plan<Policy, float, Op>(p).k;
  const bool resident = k.resident_bytes > 0;
  thrust::device_vector<std::int64_t> idx(Op::has_index ? y_size(p) : 0);
  if (bytes == 0) {
    std::printf("%-8s S=%d R=%d: not served (shared memory or device)\n", label, Policy::stages, Policy::raw_stages);
    return;
  }
  thrust::device_vector<unsigned char> packed(bytes);
  CHECK_CUDA(cudaGetLastError());
  if (convred::device::pack_filter<Policy>(p, w, thrust::raw_pointer_cast(packed.data()), bytes) !=
      convred::status::success)
    throw std::runtime_error("pack_filter failed");
  auto call = [&] {
    return convred::device::conv2d_reduce_packed<Policy>(p, x, w, thrust::raw_pointer_cast(packed.data()), bytes, b, y,
                                                         Op::has_index ? thrust::raw_pointer_cast(idx.data()) : nullptr, Op{},
                                                         convred::epilogue::scale<float>{2.0f});
  };
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
#ifdef CONVRED_EXP_CLOCKS
  unsigned long long clk[8] = {};
  CHECK_CUDA(cudaMemcpyToSymbol(convred::kernel::exp_clocks, clk, sizeof(clk)));
#endif
  for (int i = 0; i < iters + 2; ++i) {
    CHECK_CUDA(cudaMemsetAsync(thrust::raw_pointer_cast(flush.data()), i & 0xff, flush.size()));
    CHECK_CUDA(cudaEventRecord(e0));
    if (call() != convred::status::success) throw std::runtime_error("conv2d_reduce_packed failed");
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2], flop = 2.0 * p.N * p.P() * p.Q() * p.K * p.C * p.R * p.S;
  std::printf("%-16s %-6s S=%d R=%d P=%d %-9s: %.3f ms median (min %.3f), %.1f TFLOP/s\n", label,
              Op::has_index ? "argmin" : "min", Policy::stages, Policy::raw_stages, Policy::producer_threads / 128, resident ? "resident" : "streamed",
              med, ms.front(), flop / (med * 1e-3) / 1e12);
#ifdef CONVRED_EXP_CLOCKS
  // cycles per tile (consumer rows: per warpgroup; producer rows: one transform thread, x2)
  CHECK_CUDA(cudaMemcpyFromSymbol(clk, convred::kernel::exp_clocks, sizeof(clk)));
  const double t = clk[4] ? static_cast<double>(clk[4]) : 1.0;
  std::printf("  cycles/tile: consumer mainloop %.0f (full waits %.0f), epilogue %.0f, reduce+store %.0f; "
              "transform raw waits %.0f, slot waits %.0f, planes %.0f\n",
              clk[0] / t, clk[1] / t, clk[2] / t, clk[3] / t, 2 * clk[5] / t, 2 * clk[6] / t, 2 * clk[7] / t);
#endif
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace convred;
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("wgmma_stages: no CUDA device\n");
    return 2;
  }
  conv2d_problem p;
  p.N = 64, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3;
  thrust::device_vector<float> x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
      b(static_cast<std::size_t>(p.K)), y(static_cast<std::size_t>(p.y_elements()));
  thrust::counting_iterator<long long> it(0);
  thrust::transform(it, it + static_cast<long long>(x.size()), x.begin(), hash_fill{1});
  thrust::transform(it, it + static_cast<long long>(w.size()), w.begin(), hash_fill{2});
  thrust::transform(it, it + static_cast<long long>(b.size()), b.begin(), hash_fill{3});
  thrust::device_vector<char> flush(256u << 20);
  const float* px = thrust::raw_pointer_cast(x.data());
  const float* pw = thrust::raw_pointer_cast(w.data());
  const float* pb = thrust::raw_pointer_cast(b.data());
  float* py = thrust::raw_pointer_cast(y.data());
  try {
    run<wgmma_policy<math::tf32, 4, 2>>("tf32", p, px, pw, pb, py, iters, flush);
    run<wgmma_policy<math::tf32, 4, 2>, op::argmin>("tf32", p, px, pw, pb, py, iters, flush);
    run<default_wgmma_policy<math::bf16>::type>("bf16", p, px, pw, pb, py, iters, flush);
    run<default_wgmma_policy<math::bf16>::type, op::argmin>("bf16", p, px, pw, pb, py, iters, flush);
    run<default_wgmma_policy<math::fp16>::type>("fp16", p, px, pw, pb, py, iters, flush);
    run<wgmma_policy<math::bf16, 4, 2>>("bf16 1 producer", p, px, pw, pb, py, iters, flush);
    run<wgmma_policy<math::bf16, 4, 2, true>>("bf16 pingpong", p, px, pw, pb, py, iters, flush);
    run<wgmma_policy<math::tf32x3, 2, 1>>("tf32x3", p, px, pw, pb, py, iters, flush);
    // the same on x in [0, 1) (torch.rand's range, as the Python KernelBench check uses)
    thrust::transform(x.begin(), x.end(), x.begin(), half_up{});
    run<wgmma_policy<math::tf32, 4, 2>>("tf32 x[0,1)", p, px, pw, pb, py, iters, flush);
    run<default_wgmma_policy<math::bf16>::type>("bf16 x[0,1)", p, px, pw, pb, py, iters, flush);
  } catch (const std::exception& e) {
    std::printf("wgmma_stages: %s\n", e.what());
    return 1;
  }
  return 0;
}
