/// @file examples/01_conv_scale_min/run.cuh
/// @brief Example 01's run of one element type, op and math, `run<T, Op, Math>(options)`: the problem on
/// the current device through the planner (convred::device::conv2d_reduce_plan<T, Math>), checked against
/// the float64 reference and timed; and its registration in the binary's table (example01.hpp).
///
/// Included only by the translation units that instantiate runs (instantiate.cu, and the ones
/// CMakeLists.txt generates): each run instantiates the planner's kernels for its T, Op and Math, which is
/// what takes the build time.
///
///     CONVRED_EX01_RUNS(float, tf32, convred::op::min, convred::op::max)  // run<float, op, math::tf32>, both ops
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/reference/conv2d.hpp>

#include "../common/cuda_check.hpp"
#include "../common/host_data.hpp"
#include "../common/npy.hpp"
#include "../common/verify.hpp"
#include "example01.hpp"

namespace ex01 {

namespace ex = convred_examples;

inline std::string problem_string(const convred::conv2d_problem& p, const char* dtype) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "x (%lld, %lld, %lld, %lld) %s %s, W (%lld, %lld, %lld, %lld), pad %lldx%lld, stride %lldx%lld, "
                "dilation %lldx%lld, groups %lld",
                (long long)p.N, (long long)p.C, (long long)p.H, (long long)p.W, dtype,
                p.x_layout == convred::layout::nchw ? "NCHW" : "NHWC", (long long)p.K, (long long)p.C_per_group(),
                (long long)p.R, (long long)p.S, (long long)p.pad_h, (long long)p.pad_w, (long long)p.stride_h,
                (long long)p.stride_w, (long long)p.dil_h, (long long)p.dil_w, (long long)p.groups);
  return buf;
}

/// x, W, b on the host in the element type: from the files or random (x ~ N(0,1), W, b ~ U(+-bound)).
template <class T>
struct host_inputs {
  std::vector<T> x, w, b;
  explicit host_inputs(const options& o) {
    const auto& p = o.p;
    const double bound = 1.0 / std::sqrt(static_cast<double>(p.gemm_k()));  // torch.nn.Conv2d's init bound
    x = load(o.x_file, p.x_elements(), 0.0, o.seed, 1);
    if (p.x_layout == convred::layout::nhwc) x = ex::nchw_to_nhwc(x, p.N, p.C, p.H, p.W);
    w = load(o.w_file, p.w_elements(), bound, o.seed, 2);
    if (o.bias) b = load(o.b_file, p.K, bound, o.seed, 3);
  }
  static std::vector<T> load(const std::string& path, std::int64_t n, double bound, std::uint64_t seed,
                             std::uint32_t id) {
    if (path.empty()) return ex::random_vector<T>(static_cast<std::size_t>(n), bound, seed, id);
    using L = std::conditional_t<std::is_same_v<T, double>, double, float>;  // float64 files keep double exact
    const npy::array<L> a = npy::load<L>(path);
    std::vector<T> out(a.data.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = ex::to_elem<T>(a.data[i]);
    return out;
  }
};

/// Median and min of `iters` timed runs of `launch` on `s` (CUDA events around each, after warm-up).
template <class F>
bool time_runs(const options& o, cudaStream_t s, F&& launch, double& median, double& best) {
  for (int i = 0; i < o.warmup; ++i)
    if (!launch()) return false;
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(o.iters));
  for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  bool ok = true;
  for (int i = 0; i < o.iters && ok; ++i) {
    CHECK_CUDA(cudaEventRecord(ev[2 * i], s));
    ok = launch();
    CHECK_CUDA(cudaEventRecord(ev[2 * i + 1], s));
  }
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<float> ms(static_cast<std::size_t>(o.iters));
  for (int i = 0; i < o.iters && ok; ++i) CHECK_CUDA(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  for (auto e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  median = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  best = ms.front();
  return ok;
}

/// The float64 reference of one checked pixel.
struct ref_row {
  double ref;            // reduced value
  std::int64_t ref_idx;  // argmin/argmax (-1 for other ops)
  double mag;            // magnitude of the terms behind the value (examples/common/verify.hpp)
  double at_idx;         // float64 epilogue value of the channel the GPU returned (index ops)
};

/// Checks y (and the indices) at the chosen pixels against float64; prints the summary; true if passed.
template <class T, class Op>
bool verify(const options& o, const host_inputs<T>& in, const std::vector<T>& hy, const std::vector<std::int64_t>& hidx) {
  using convred::to_double;
  const convred::conv2d_problem& p = o.p;
  const std::int64_t P = p.P(), Q = p.Q(), ny = p.y_elements();
  const convred::epilogue::scale<float> epi{static_cast<float>(o.scale)};
  const bool finite = ex::all_finite(in.x) && ex::all_finite(in.w) && ex::all_finite(in.b);
  const T* hb = o.bias ? in.b.data() : nullptr;
  bool all = false;
  const std::vector<std::int64_t> px = ex::choose_pixels(p, o.verify_pixels, o.seed, all);
  std::vector<ref_row> rows(px.size());
  const auto t0 = std::chrono::steady_clock::now();
  ex::parallel_for(px.size(), [&](std::size_t i) {
    const std::int64_t m = px[i], n = m / (P * Q), pp = (m / Q) % P, qq = m % Q;
    const auto r = convred::reference::conv2d_reduce_at(p, in.x.data(), in.w.data(), hb, n, pp, qq, Op{}, epi);
    double mag = 0.0;
    for (std::int64_t k = 0; k < p.K; ++k) {
      const double a = std::fabs(o.scale) * ex::abs_conv_at(p, in.x.data(), in.w.data(), hb, n, k, pp, qq);
      mag = std::is_same_v<Op, convred::op::sum> || std::is_same_v<Op, convred::op::mean> ? mag + a : std::max(mag, a);
    }
    if constexpr (std::is_same_v<Op, convred::op::mean>) mag /= static_cast<double>(p.K);
    double at = std::numeric_limits<double>::quiet_NaN();
    if constexpr (Op::has_index) {
      const std::int64_t k = hidx[static_cast<std::size_t>(m)];
      if (k >= 0 && k < p.K)
        at = epi(convred::reference::conv2d_at(p, in.x.data(), in.w.data(), hb, n, k, pp, qq), static_cast<int>(k));
    }
    rows[i] = {r.value, r.index, mag, at};
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Values: the per-pixel and norm-wise bound. Indices: the float64 value of the returned channel must be
  // within the same bound of the float64 extreme (fp32 near-ties may pick another channel); NaN: the first.
  ex::value_check values{ex::tolerance<T>(o.math), ex::unit_roundoff<T>()};
  ex::value_check at_idx = values;
  std::int64_t idx_differs = 0, idx_wrong = 0, nan_left = 0, idx_bad = 0;
  for (const T& v : hy) nan_left += std::isnan(to_double(v));
  for (std::int64_t k : hidx) idx_bad += k < 0 || k >= p.K;
  for (std::size_t i = 0; i < px.size(); ++i) {
    const ref_row& r = rows[i];
    values.add(px[i], to_double(hy[static_cast<std::size_t>(px[i])]), r.ref, r.mag);
    if constexpr (Op::has_index) {
      const std::int64_t k = hidx[static_cast<std::size_t>(px[i])];
      if (k < 0 || k >= p.K) continue;  // counted in idx_bad
      idx_differs += k != r.ref_idx;
      if (std::isnan(r.ref)) idx_wrong += k != r.ref_idx;
      else at_idx.add(px[i], r.at_idx, r.ref, r.mag);
    }
  }
  if (all)
    std::printf("verify   : all %lld pixels x %lld channels against the float64 reference (%.1f s on the host)\n",
                (long long)ny, (long long)p.K, secs);
  else
    std::printf("verify   : %zu of %lld pixels (random, seed %llu, incl. the corners of the first and last images) x "
                "%lld channels against the float64 reference (%.1f s on the host)\n",
                px.size(), (long long)ny, (unsigned long long)o.seed, (long long)p.K, secs);
  values.print("error");
  if (values.worst >= 0 && values.worst_ratio > 1.0)
    std::printf("worst    : pixel %lld (n*P + p)*Q + q: y %.9g\n", (long long)values.worst,
                to_double(hy[static_cast<std::size_t>(values.worst)]));
  if constexpr (Op::has_index)
    std::printf("index    : %lld of %zu equal the float64 index; the others are near-ties (value gap at %.3g of "
                "its bound)\n", (long long)(static_cast<std::int64_t>(px.size()) - idx_differs), px.size(),
                at_idx.worst_ratio);
  std::printf("written  : %lld NaN outputs%s, %lld indices outside [0, K)\n", (long long)nan_left,
              finite ? " (inputs finite: must be 0)" : " (inputs hold NaN/inf)", (long long)idx_bad);
  const bool ok = values.ok() && (!Op::has_index || (idx_wrong == 0 && at_idx.bad == 0 && at_idx.nonfinite_mismatch == 0)) &&
                  idx_bad == 0 && (!finite || nan_left == 0);
  if (!ok) std::printf("FAILURE  : outside the bounds above (values, indices or unwritten outputs)\n");
  return ok;
}

/// The math line: what --math means for element type T (accurate: what the default resolves to).
template <class T>
void print_math(math_kind m) {
  constexpr bool dbl = std::is_same_v<T, double>;
  const char* fma = dbl ? "fp64" : "fp32";
  switch (m) {
    case math_kind::accurate:
      if (dbl)
        std::printf("math     : accurate (default): exact fp64 FMA for double data, error vs float64 held to 1e-6 "
                    "(here 1e-12)\n");
      else
        std::printf("math     : accurate (default): fp32-accurate, the fastest kernel whose error vs float64 is held "
                    "to 1e-6 (3xTF32 tensor cores on sm_80+, exact fp32 FMA on older GPUs); PyTorch's default "
                    "conv2d on these GPUs is TF32 (~1e-4)%s\n",
                    std::is_same_v<T, float> ? "" : "; y is rounded to 16 bits, so checked to 1e-2 here");
      break;
    case math_kind::ieee:
      std::printf("math     : ieee (exact %s FMA on the CUDA cores); PyTorch's default conv2d uses TF32 instead\n", fma);
      break;
    case math_kind::tf32:
      std::printf("math     : tf32 tensor cores, fp32 accumulation (PyTorch's default conv2d math, ~1e-4 vs float64)\n");
      break;
    case math_kind::tf32x3:
      std::printf("math     : tf32x3 (3xTF32) tensor cores, fp32 accumulation (fp32-level accuracy)\n");
      break;
    case math_kind::bf16:
    case math_kind::fp16:
      std::printf("math     : %s tensor cores (operands rounded on chip), fp32 accumulation\n", ex::math_label(m));
      break;
  }
}

template <class T, class Op, class Math>
int run(const options& o) {
  const convred::conv2d_problem& p = o.p;
  constexpr bool has_index = Op::has_index;
  const std::int64_t ny = p.y_elements();
  const convred::epilogue::scale<float> epi{static_cast<float>(o.scale)};
  std::printf("%s: convred fused conv2d -> scale -> %s over output channels\n", prog.c_str(), op_name(o.op));
  std::printf("problem  : %s, scale %g%s -> y (%lld, 1, %lld, %lld)%s\n",
              problem_string(p, ex::type_label<T>()).c_str(), o.scale, o.bias ? ", bias" : ", no bias",
              (long long)p.N, (long long)p.P(), (long long)p.Q(), has_index ? " + int64 indices" : "");
  print_math<T>(o.math);
  const host_inputs<T> in(o);
  std::printf("inputs   : x %s, W %s, b %s (random: seed %llu; x ~ N(0,1), W, b ~ U(+-1/sqrt(%lld)))\n",
              o.x_file.empty() ? "random" : o.x_file.c_str(), o.w_file.empty() ? "random" : o.w_file.c_str(),
              !o.bias ? "none" : o.b_file.empty() ? "random" : o.b_file.c_str(), (unsigned long long)o.seed,
              (long long)p.gemm_k());

  int dev = 0;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device   : %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

  // The planner picks the kernel for this problem, T, Math and the current device, and says which and why.
  convred::device::conv2d_reduce_plan<T, Math> plan(p);
  std::printf("kernel   : %s\n", plan.description().c_str());
  std::fflush(stdout);
  if (plan.state() != convred::status::success) {
    std::fprintf(stderr, "%s: the planner found no kernel for this run: %s\n", prog.c_str(), convred::to_string(plan.state()));
    return plan.state() == convred::status::no_device ? 2 : ex::finish(false);
  }
  // The device memory the run needs against the device's: refused before any allocation.
  const double need = tensor_bytes(o) + static_cast<double>(plan.workspace_bytes());
  if (need > static_cast<double>(prop.totalGlobalMem)) {
    std::fprintf(stderr, "%s: error: the problem needs %s of device memory (x, W, b, y%s and the plan's workspace), "
                 "more than the %s of the %s\n", prog.c_str(), bytes_string(need).c_str(), has_index ? ", indices" : "",
                 bytes_string(static_cast<double>(prop.totalGlobalMem)).c_str(), prop.name);
    return 1;
  }
  const ex::device_buffer<T> dx(in.x), dw(in.w), db(in.b), dy(static_cast<std::size_t>(ny));
  const ex::device_buffer<std::int64_t> didx(has_index ? static_cast<std::size_t>(ny) : 0);
  const T* px = dx.get();
  const T* pw = dw.get();
  const T* pb = o.bias ? db.get() : nullptr;
  T* py = dy.get();
  std::int64_t* pidx = has_index ? didx.get() : nullptr;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // prepare, once and untimed: packs W into the plan's own workspace when the wgmma kernel was picked, or
  // allocates the split path's partial sums (the other kernels read W on every run).
  convred::status st = plan.prepare(pw, stream);
  if (plan.workspace_bytes() > 0 && plan.k_splits() > 0)
    std::printf("prepare  : %s (%zu bytes of workspace the plan owns for the %d GEMM_K splits' partial sums; "
                "untimed)\n", convred::to_string(st), plan.workspace_bytes(), plan.k_splits());
  else if (plan.workspace_bytes() > 0)
    std::printf("prepare  : %s (W packed into %zu bytes of workspace the plan owns; untimed)\n", convred::to_string(st),
                plan.workspace_bytes());
  else
    std::printf("prepare  : %s (nothing to pack: the %s kernel reads W on every run)\n", convred::to_string(st),
                convred::device::to_string(plan.kernel()));
  if (st != convred::status::success) {
    std::fprintf(stderr, "%s: conv2d_reduce_plan::prepare failed: %s\n", prog.c_str(), convred::to_string(st));
    return st == convred::status::no_device ? 2 : ex::finish(false);
  }
  auto launch = [&]() {
    st = plan.run(px, pb, py, pidx, Op{}, epi, stream);
    if (st != convred::status::success)
      std::fprintf(stderr, "%s: conv2d_reduce_plan::run (%s kernel) failed: %s\n", prog.c_str(),
                   convred::device::to_string(plan.kernel()), convred::to_string(st));
    return st == convred::status::success;
  };
  // The verified run: outputs poisoned first (all-ones bytes: NaN for every float type, -1 for int64).
  CHECK_CUDA(cudaMemsetAsync(py, 0xFF, static_cast<std::size_t>(ny) * sizeof(T), stream));
  if (has_index) CHECK_CUDA(cudaMemsetAsync(pidx, 0xFF, static_cast<std::size_t>(ny) * sizeof(std::int64_t), stream));
  if (!launch()) {
    if (st == convred::status::no_device)
      std::fprintf(stderr, "%s: this build has no kernel for %s (sm_%d%d); rebuild for its architecture\n", prog.c_str(),
                   prop.name, prop.major, prop.minor);
    return st == convred::status::no_device ? 2 : ex::finish(false);
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaGetLastError());
  std::vector<T> hy(static_cast<std::size_t>(ny));
  std::vector<std::int64_t> hidx(has_index ? static_cast<std::size_t>(ny) : 0);
  CHECK_CUDA(cudaMemcpy(hy.data(), py, hy.size() * sizeof(T), cudaMemcpyDeviceToHost));
  if (has_index) CHECK_CUDA(cudaMemcpy(hidx.data(), pidx, hidx.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));

  if (o.iters > 0) {
    double med = 0, best = 0;
    if (!time_runs(o, stream, launch, med, best)) return ex::finish(false);
    const double bytes = static_cast<double>(p.x_elements()) * sizeof(T) + static_cast<double>(ny) * sizeof(T) +
                         (has_index ? static_cast<double>(ny) * sizeof(std::int64_t) : 0.0);
    std::printf("time     : median %.3f ms, min %.3f ms over %d runs of plan.run (CUDA events, after %d warm-up "
                "runs; prepare not timed)\n", med, best, o.iters, o.warmup);
    std::printf("rate     : %.2f TFLOP/s (%.1f GFLOP = 2*N*P*Q*K*C/G*R*S), %.1f GB/s of least traffic "
                "(%.3f GB: x read once + y%s written)\n", p.flops() / (med * 1e-3) / 1e12, p.flops() / 1e9,
                bytes / (med * 1e-3) / 1e9, bytes / 1e9, has_index ? " and indices" : "");
  } else {
    std::printf("time     : not measured (--iters 0)\n");
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  std::fflush(stdout);

  // Outputs (from the verified run) to files: float32 (exact for half and bf16), float64 for double.
  const std::vector<std::int64_t> shape = {p.N, 1, p.P(), p.Q()};
  if (!o.y_out.empty()) {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    std::vector<F> yf(hy.size());
    for (std::size_t i = 0; i < hy.size(); ++i) yf[i] = static_cast<F>(convred::to_double(hy[i]));
    npy::save(o.y_out, yf, shape);
    std::printf("wrote    : %s (y, %s)\n", o.y_out.c_str(), std::is_same_v<T, double> ? "float64" : "float32");
  }
  if (!o.idx_out.empty()) {
    npy::save(o.idx_out, hidx, shape);
    std::printf("wrote    : %s (indices, int64)\n", o.idx_out.c_str());
  }
  return ex::finish(verify<T, Op>(o, in, hy, hidx));
}


/// The table's key of an element type, op and math tag.
template <class T>
constexpr dtype_kind dtype_of() {
  if constexpr (std::is_same_v<T, float>) return dtype_kind::f32;
  else if constexpr (std::is_same_v<T, double>) return dtype_kind::f64;
  else if constexpr (std::is_same_v<T, __half>) return dtype_kind::f16;
  else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "example 01 runs float, double, __half or __nv_bfloat16");
    return dtype_kind::bf16;
  }
}
template <class Op>
constexpr op_kind op_of() {
  if constexpr (std::is_same_v<Op, convred::op::min>) return op_kind::min;
  else if constexpr (std::is_same_v<Op, convred::op::max>) return op_kind::max;
  else if constexpr (std::is_same_v<Op, convred::op::sum>) return op_kind::sum;
  else if constexpr (std::is_same_v<Op, convred::op::mean>) return op_kind::mean;
  else if constexpr (std::is_same_v<Op, convred::op::argmin>) return op_kind::argmin;
  else {
    static_assert(std::is_same_v<Op, convred::op::argmax>, "example 01 runs min, max, sum, mean, argmin or argmax");
    return op_kind::argmax;
  }
}
template <class Math>
constexpr math_kind math_of() {
  namespace m = convred::math;
  if constexpr (std::is_same_v<Math, m::accurate>) return math_kind::accurate;
  else if constexpr (std::is_same_v<Math, m::ieee>) return math_kind::ieee;
  else if constexpr (std::is_same_v<Math, m::tf32>) return math_kind::tf32;
  else if constexpr (std::is_same_v<Math, m::tf32x3>) return math_kind::tf32x3;
  else if constexpr (std::is_same_v<Math, m::bf16>) return math_kind::bf16;
  else {
    static_assert(std::is_same_v<Math, m::fp16>, "example 01 runs the maths accurate, ieee, tf32, tf32x3, bf16, fp16");
    return math_kind::fp16;
  }
}

/// Instantiates run<T, Op, Math> for each of Ops and adds them to the table (runs()) when constructed:
/// one static registrar per group of runs (CONVRED_EX01_RUNS).
template <class T, class Math, class... Ops>
struct registrar {
  registrar() { (runs().push_back({dtype_of<T>(), op_of<Ops>(), math_of<Math>(), &run<T, Ops, Math>}), ...); }
};

}  // namespace ex01

#define CONVRED_EX01_CAT2(a, b) a##b
#define CONVRED_EX01_CAT(a, b) CONVRED_EX01_CAT2(a, b)
/// CONVRED_EX01_RUNS(T, MATH, Op...): run<T, Op, convred::math::MATH> for each Op, in this binary's table.
#define CONVRED_EX01_RUNS(T, MATH, ...)                                                                      \
  static const ::ex01::registrar<T, ::convred::math::MATH, __VA_ARGS__> CONVRED_EX01_CAT(convred_ex01_runs_, \
                                                                                          __LINE__){};
