/// @file examples/04_custom_kernel/main.cu
/// @brief convred example 04: write your own fused kernel from convred's block-level pieces.
///
/// The library's kernels (convred/kernel/) are thin: a block-wide conv mainloop accumulates a tile of
/// conv outputs in registers, a block-wide reduction epilogue folds each channel tile into per-pixel
/// states, and a final store writes the reduced values. This example builds a kernel of its own from the
/// same pieces, the way a user who needs a different output would:
///   - `my_tile_policy`: a tile policy written as a plain type (64 pixels x 32 channels per block,
///     4 x 4 per thread, 128 threads, GEMM_K staged 8 deep in two stages) -- no convred template needed;
///   - convred::block::conv_mainloop_simt<my_tile_policy, float>: the exact-fp32 (SIMT) implicit-GEMM mainloop;
///   - convred::block::reduce_epilogue: bias + epilogue + op::max fused into the register tile;
///   - a custom store: the reduced (N, 1, P, Q) map is written straight into channel `slot` of a larger
///     (N, out_channels, P, Q) tensor (e.g. the buffer of a later torch.cat), with no copy afterwards.
/// It computes, for x (2, 16, 21, 26), W (48, 16, 3, 3), b (48), stride 2 and padding 1,
///     out[n, slot, p, q] = max_k relu(conv2d(x, W, b)[n, k, p, q])   (other channels untouched)
/// and checks every pixel against convred::reference (float64) with the fp32 tolerance, and that the
/// other channels of `out` still hold their sentinel.
///
/// Usage: 04_custom_kernel [--seed N]   (fresh random data unless --seed is given)
/// Output: the error, then `Passed` or `Failed`. Exit code 0 Passed, 1 Failed or error, 2 no device.
#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <convred/block/conv_mainloop_simt.cuh>
#include <convred/block/reduce_epilogue.cuh>
#include <convred/functional.cuh>
#include <convred/block/conv_params.cuh>
#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>

#include "../common/cli.hpp"
#include "../common/cuda_check.hpp"
#include "../common/host_data.hpp"
#include "../common/verify.hpp"

namespace ex = convred_examples;

/// A tile policy for block::conv_mainloop_simt, written by hand: the members the SIMT mainloop reads.
struct my_tile_policy {
  static constexpr int block_m = 64;                            // output pixels per block (GEMM_M tile)
  static constexpr int block_n = 32;                            // output channels per channel tile (GEMM_N)
  static constexpr int block_k = 8;                             // GEMM_K depth of one shared-memory stage
  static constexpr int thread_m = 4;                            // pixels per thread
  static constexpr int thread_n = 4;                            // channels per thread
  static constexpr int stages = 2;                              // shared-memory stages
  static constexpr int channel_groups = block_n / thread_n;     // 8 lanes share a pixel row (a logical warp)
  static constexpr int pixel_groups = block_m / thread_m;       // 16
  static constexpr int threads = channel_groups * pixel_groups; // 128 threads per block
};

/// Epilogue: ReLU.
struct relu {
  template <class V>
  __host__ __device__ V operator()(V v) const {
    return v < V(0) ? V(0) : v;  // NaN passes through (v < 0 is false)
  }
};

/// The user's kernel: one block per 64 output pixels. For every 32-channel tile of the K channels, the
/// mainloop computes the conv tile into registers and the epilogue folds bias + relu + max into per-pixel
/// states (kept in shared memory between tiles); the final store writes each pixel's max to
/// out[n, slot, p, q] of an (N, out_channels, P, Q) tensor.
__global__ void __launch_bounds__(my_tile_policy::threads)
    conv_relu_max_into_slot(const convred::block::conv_params<float> prm, float* out, int out_channels, int slot) {
  using mainloop = convred::block::conv_mainloop_simt<my_tile_policy, float>;
  using epilogue = convred::block::reduce_epilogue<mainloop, convred::op::max>;
  // The pieces take caller-placed shared memory (CUB's TempStorage convention); here it is static.
  __shared__ struct {
    mainloop::TempStorage main;
    epilogue::TempStorage reduce;
  } smem;

  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * my_tile_policy::block_m;  // first pixel
  mainloop ml(smem.main, prm, m0);
  epilogue red(smem.reduce, convred::op::max{});
  float acc[mainloop::TM][mainloop::TN];
  for (std::int32_t n0 = 0; n0 < prm.K; n0 += my_tile_policy::block_n) {  // groups = 1: one channel range
    ml.run(/*group=*/0, /*k_first=*/n0, acc);
    const int valid = min(my_tile_policy::block_n, static_cast<int>(prm.K) - n0);  // channels in this tile
    red.accumulate(acc, prm.bias, relu{}, n0, valid, mainloop::tile_n, /*first=*/n0 == 0);
  }
  // Custom store: tile pixel -> offset in `out` (or -1 past the last pixel).
  red.store(out, static_cast<std::int64_t*>(nullptr), prm.K, mainloop::tile_m, [&](int p) -> std::int64_t {
    const std::int64_t m = m0 + p;
    if (m >= prm.M) return -1;
    const std::int64_t n = m / prm.PQ, pq = m - n * prm.PQ;
    return (n * out_channels + slot) * prm.PQ + pq;
  });
}

int main(int argc, char** argv) {
  std::uint64_t seed = ex::fresh_seed();
  const char* about =
      "A user kernel from convred's block pieces (conv_mainloop_simt + "
      "reduce_epilogue + custom store), checked against float64.";
  if (const int rc = ex::parse_seed_only(argc, argv, about, seed); rc >= 0) return rc == 0 ? 0 : ex::finish(false);

  convred::conv2d_problem p;
  p.N = 2, p.C = 16, p.H = 21, p.W = 26, p.K = 48, p.R = 3, p.S = 3;
  p.pad_h = p.pad_w = 1, p.stride_h = p.stride_w = 2;
  const int out_channels = 3, slot = 1;
  if (convred::validate(p, sizeof(float)) != convred::status::success) return ex::finish(false);
  const double bound = 1.0 / std::sqrt(static_cast<double>(p.gemm_k()));
  const auto hx = ex::random_vector<float>(static_cast<std::size_t>(p.x_elements()), 0.0, seed, 1);
  const auto hw = ex::random_vector<float>(static_cast<std::size_t>(p.w_elements()), bound, seed, 2);
  const auto hb = ex::random_vector<float>(static_cast<std::size_t>(p.K), bound, seed, 3);
  const std::int64_t P = p.P(), Q = p.Q(), PQ = P * Q;
  std::printf("04_custom_kernel: x (2, 16, 21, 26) float NCHW, W (48, 16, 3, 3), stride 2, pad 1 -> out (2, %d, "
              "%lld, %lld), max over k of relu(conv) into channel %d; random data, seed %llu\n",
              out_channels, (long long)P, (long long)Q, slot, static_cast<unsigned long long>(seed));

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "04_custom_kernel: no CUDA device; this example needs an NVIDIA GPU (sm_80+)\n");
    return 2;
  }
  try {
    thrust::device_vector<float> dx(hx.begin(), hx.end()), dw(hw.begin(), hw.end()), db(hb.begin(), hb.end());
    const float sentinel = -12345.0f;
    thrust::device_vector<float> out(static_cast<std::size_t>(p.N * out_channels * PQ), sentinel);
    // The parameter block the library's own kernels take (sizes, strides, fast divisors), from the problem.
    const auto prm = convred::block::make_conv_params(p, thrust::raw_pointer_cast(dx.data()),
                                                       thrust::raw_pointer_cast(dw.data()),
                                                       thrust::raw_pointer_cast(db.data()));
    const unsigned blocks = static_cast<unsigned>((p.gemm_m() + my_tile_policy::block_m - 1) / my_tile_policy::block_m);
    conv_relu_max_into_slot<<<blocks, my_tile_policy::threads>>>(prm, thrust::raw_pointer_cast(out.data()),
                                                                 out_channels, slot);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    const thrust::host_vector<float> h_out = out;

    ex::value_check check{ex::tolerance<float>(), ex::unit_roundoff<float>()};
    std::int64_t touched = 0;
    for (std::int64_t n = 0; n < p.N; ++n)
      for (std::int64_t c = 0; c < out_channels; ++c)
        for (std::int64_t pq = 0; pq < PQ; ++pq) {
          const float v = h_out[static_cast<std::size_t>((n * out_channels + c) * PQ + pq)];
          if (c != slot) {
            touched += v != sentinel;
            continue;
          }
          const std::int64_t pp = pq / Q, qq = pq % Q;
          const double ref = convred::reference::conv2d_reduce_at(p, hx.data(), hw.data(), hb.data(), n, pp, qq,
                                                                  convred::op::max{}, relu{}).value;
          double mag = 0;
          for (std::int64_t k = 0; k < p.K; ++k)
            mag = std::max(mag, ex::abs_conv_at(p, hx.data(), hw.data(), hb.data(), n, k, pp, qq));
          check.add(n * PQ + pq, v, ref, mag);
        }
    check.print("max relu");
    std::printf("other slots: %lld values changed (must be 0)\n", (long long)touched);
    return ex::finish(check.ok() && touched == 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "04_custom_kernel: %s\n", e.what());
    return ex::finish(false);
  }
}
