/// @file examples/02_custom_op_half/main.cu
/// @brief convred example 02: your own epilogue and your own reduction ops, on `__half` tensors.
///
/// convred's fused kernel is a template over the reduction op and the epilogue, so a user type that
/// meets the op interface of convred/functional.cuh plugs into it with no change to the library. This
/// example defines, outside the library,
///   - `leaky_relu`: the epilogue `v < 0 ? slope * v : v` (a plain functor, applied after the bias);
///   - `max_abs`: the reduction "largest absolute value over the channels" (NaN-propagating), and
///   - `logsumexp`: log(sum_k exp(v_k)) with a two-field running state (max, scaled sum), the numerically
///     stable form (the sum is kept relative to the running maximum, so exp never overflows),
/// and runs, on x (2, 24, 33, 33), W (40, 24, 3, 3), b (40), padding 1, all `__half` in NCHW,
///     y1[n,0,p,q] = max_k |leaky_relu(conv2d(x, W, b)[n,k,p,q])|
///     y2[n,0,p,q] = log sum_k exp(leaky_relu(conv2d(x, W, b)[n,k,p,q]))
/// with convred::device::conv2d_reduce. The math is exact fp32 (the inputs are widened on load, the
/// accumulation, the epilogue and the reduction run in fp32); y is rounded to `__half` once at the end.
/// Both results are checked at every pixel against convred::reference (float64, the same op and epilogue
/// instantiated for double) with the tolerance of 16-bit outputs (docs/tolerances.md).
///
/// Usage: 02_custom_op_half [--seed N]   (fresh random data on every run unless --seed is given)
/// Output: the errors, then `Passed` or `Failed` as the last line. Exit code 0 Passed, 1 Failed or error,
/// 2 no usable CUDA device.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/device_vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <convred/device/conv2d_reduce.cuh>
#include <convred/reference/conv2d.hpp>

#include "../common/cli.hpp"
#include "../common/cuda_check.hpp"
#include "../common/host_data.hpp"
#include "../common/verify.hpp"

namespace ex = convred_examples;

/// Epilogue: leaky ReLU, `v` for v >= 0 and `slope * v` below 0 (NaN stays NaN). Takes no channel index,
/// so convred calls it as e(v); V is the compute type (float on the GPU, double in the reference).
struct leaky_relu {
  float slope;  ///< slope below zero
  template <class V>
  __host__ __device__ V operator()(V v) const {
    return v < V(0) ? static_cast<V>(slope) * v : v;
  }
};

/// Reduction op: the largest absolute value over the channels, NaN if any value is NaN.
/// Identity 0 is exact: |v| >= 0 for every v, so max(0, |v|) = |v|.
struct max_abs {
  static constexpr bool has_index = false;  // no index output
  template <class V>
  using accum_t = V;  // the running state is the largest |v| so far
  template <class V>
  __host__ __device__ static V identity() {
    return V(0);
  }
  template <class V>
  __host__ __device__ static V make(V v, int /*channel*/) {
    return v < V(0) ? -v : v;  // |v|, and NaN stays NaN
  }
  template <class V>
  __host__ __device__ V operator()(V a, V b) const {
    if (a != a) return a;  // NaN propagates (as torch.amax does)
    if (b != b) return b;
    return a < b ? b : a;
  }
  template <class V>
  __host__ __device__ static V value(V a, std::int64_t /*count*/) {
    return a;
  }
};

/// The running state of logsumexp: sum_k exp(v_k) = s * exp(m), with m the largest v_k seen so far.
template <class V>
struct lse_state {
  V m;  ///< running maximum (-inf for the empty state)
  V s;  ///< sum of exp(v_k - m) over the values seen (0 for the empty state)
};

/// Reduction op: log(sum_k exp(v_k)), computed stably as m + log(s) (see lse_state). Combining two states
/// rescales the smaller one to the larger maximum, so every exp argument is <= 0. The identity (-inf, 0)
/// is exact: combining it with any state returns that state unchanged.
struct logsumexp {
  static constexpr bool has_index = false;
  template <class V>
  using accum_t = lse_state<V>;
  template <class V>
  __host__ __device__ static lse_state<V> identity() {
    return {-cuda::std::numeric_limits<V>::infinity(), V(0)};
  }
  template <class V>
  __host__ __device__ static lse_state<V> make(V v, int /*channel*/) {
    return {v, V(1)};
  }
  template <class V>
  __host__ __device__ static V exp_(V v) {
    if constexpr (std::is_same_v<V, float>) return expf(v);
    else return ::exp(v);
  }
  template <class V>
  __host__ __device__ lse_state<V> operator()(lse_state<V> a, lse_state<V> b) const {
    if (a.m != a.m) return a;  // NaN propagates
    if (b.m != b.m) return b;
    if (a.s == V(0)) return b;  // the identity (or an empty state) contributes nothing
    if (b.s == V(0)) return a;
    if (a.m < b.m) return {b.m, b.s + a.s * exp_(a.m - b.m)};
    if (b.m < a.m) return {a.m, a.s + b.s * exp_(b.m - a.m)};
    return {a.m, a.s + b.s};  // equal maxima (also both +inf)
  }
  template <class V>
  __host__ __device__ static V value(lse_state<V> a, std::int64_t /*count*/) {
    if constexpr (std::is_same_v<V, float>) return a.m + logf(a.s);
    else return a.m + ::log(a.s);
  }
};

namespace {

/// Runs y = Op over k of leaky_relu(conv + b) on the GPU, checks every pixel against float64, prints.
template <class Op>
bool run_and_check(const char* name, const convred::conv2d_problem& p, const std::vector<__half>& hx,
                   const std::vector<__half>& hw, const std::vector<__half>& hb, leaky_relu epi) {
  thrust::device_vector<__half> dx(hx.begin(), hx.end()), dw(hw.begin(), hw.end()), db(hb.begin(), hb.end());
  thrust::device_vector<__half> dy(static_cast<std::size_t>(p.y_elements()));
  const convred::status st = convred::device::conv2d_reduce(
      p, thrust::raw_pointer_cast(dx.data()), thrust::raw_pointer_cast(dw.data()),
      thrust::raw_pointer_cast(db.data()), thrust::raw_pointer_cast(dy.data()), nullptr, Op{}, epi, nullptr);
  if (st != convred::status::success) {
    std::printf("%-9s: conv2d_reduce returned %s\n", name, convred::to_string(st));
    return false;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<__half> hy(dy.size());
  thrust::copy(dy.begin(), dy.end(), hy.begin());

  // float64 reference at every pixel; mag = the largest sum |x*w| + |b| over the channels (leaky ReLU
  // and both ops change it by at most a factor of 1, plus rounding of exp/log in fp32).
  const std::int64_t P = p.P(), Q = p.Q();
  std::vector<double> ref(hy.size()), mag(hy.size());
  ex::parallel_for(hy.size(), [&](std::size_t m) {
    const std::int64_t n = m / (P * Q), pp = (m / Q) % P, qq = m % Q;
    ref[m] = convred::reference::conv2d_reduce_at(p, hx.data(), hw.data(), hb.data(), n, pp, qq, Op{}, epi).value;
    for (std::int64_t k = 0; k < p.K; ++k)
      mag[m] = std::max(mag[m], ex::abs_conv_at(p, hx.data(), hw.data(), hb.data(), n, k, pp, qq));
  });
  ex::value_check check{ex::tolerance<__half>(), ex::unit_roundoff<__half>()};
  for (std::size_t m = 0; m < hy.size(); ++m) check.add(static_cast<std::int64_t>(m), convred::to_double(hy[m]), ref[m], mag[m]);
  check.print(name);
  std::printf("%-9s: y[0] = %.5f (float64 %.5f)\n", name, convred::to_double(hy[0]), ref[0]);
  return check.ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = ex::fresh_seed();
  const char* about =
      "User-defined epilogue (leaky ReLU) and reduction ops (max |v|, "
      "log-sum-exp) on __half through convred::device::conv2d_reduce, checked against float64.";
  if (const int rc = ex::parse_seed_only(argc, argv, about, seed); rc >= 0) return rc == 0 ? 0 : ex::finish(false);

  convred::conv2d_problem p;
  p.N = 2, p.C = 24, p.H = 33, p.W = 33, p.K = 40, p.R = 3, p.S = 3, p.pad_h = p.pad_w = 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(p.gemm_k()));  // torch.nn.Conv2d's init bound
  const auto hx = ex::random_vector<__half>(static_cast<std::size_t>(p.x_elements()), 0.0, seed, 1);
  const auto hw = ex::random_vector<__half>(static_cast<std::size_t>(p.w_elements()), bound, seed, 2);
  const auto hb = ex::random_vector<__half>(static_cast<std::size_t>(p.K), bound, seed, 3);
  const leaky_relu epi{0.1f};
  std::printf("02_custom_op_half: x (2, 24, 33, 33) half NCHW, W (40, 24, 3, 3), pad 1, leaky ReLU (slope 0.1); "
              "random data, seed %llu\n", static_cast<unsigned long long>(seed));

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "02_custom_op_half: no CUDA device; this example needs an NVIDIA GPU (sm_80+)\n");
    return 2;
  }
  try {
    const bool ok1 = run_and_check<max_abs>("max_abs", p, hx, hw, hb, epi);
    const bool ok2 = run_and_check<logsumexp>("logsumexp", p, hx, hw, hb, epi);
    return ex::finish(ok1 && ok2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "02_custom_op_half: %s\n", e.what());
    return ex::finish(false);
  }
}
