// Fuzz runner (see fuzz.cuh): fused conv2d_reduce with the SIMT policies (math ieee: float every op,
// double argmin/sum, half argmax/mean, bf16 min/argmin) and full-output conv2d (every element type with
// ieee; tf32, tf32x3, bf16, fp16 on float, fp16 on half). No test cases here: test_fuzz_gpu.cu drives.
#include <convred/device/conv2d_reduce.cuh>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

template <class T, class Op>
result fused_simt(const fcase& c, const run_opts& ro) {
  result r = run_conv<T, Op>(c, ro, false,
                             [&](const T* x, const T* w, const T* b, T* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) {
                               return device::conv2d_reduce(c.p, x, w, b, y, i, Op{}, e, s);
                             });
  r.kernel = std::string("conv2d_reduce simt ") + name(c.t) + " " + name(c.o);
  return r;
}

template <class Policy, class T>
result full(const fcase& c, const run_opts& ro) {
  result r = run_conv<T, op::min>(c, ro, true,
                                  [&](const T* x, const T* w, const T* b, T* y, std::int64_t*, fuzz_epi e, cudaStream_t s) {
                                    return device::conv2d<Policy>(c.p, x, w, b, y, e, s);
                                  });
  r.kernel = std::string("conv2d ") + (c.m == mathk::ieee ? "simt " : "mma.sync ") + name(c.m) + " " + name(c.t);
  return r;
}

template <class Math>
using dp = default_policy_for<Math>;

}  // namespace

result run_simt_or_conv2d(const fcase& c, const run_opts& ro) {
  if (c.e == entry::conv2d) {
    switch (c.m) {
      case mathk::ieee:
        switch (c.t) {
          case elem::f32: return full<default_policy, float>(c, ro);
          case elem::f64: return full<default_policy, double>(c, ro);
          case elem::f16: return full<default_policy, __half>(c, ro);
          case elem::bf16: return full<default_policy, __nv_bfloat16>(c, ro);
        }
        break;
      case mathk::tf32: return full<dp<math::tf32>, float>(c, ro);
      case mathk::tf32x3: return full<dp<math::tf32x3>, float>(c, ro);
      case mathk::bf16: return full<dp<math::bf16>, float>(c, ro);
      case mathk::fp16:
        return c.t == elem::f16 ? full<dp<math::fp16>, __half>(c, ro) : full<dp<math::fp16>, float>(c, ro);
      case mathk::accurate: break;  // the plan entry's only (test_fuzz_plan.cu)
    }
  } else {
    switch (c.t) {
      case elem::f32:
        switch (c.o) {
          case opk::min: return fused_simt<float, op::min>(c, ro);
          case opk::max: return fused_simt<float, op::max>(c, ro);
          case opk::sum: return fused_simt<float, op::sum>(c, ro);
          case opk::mean: return fused_simt<float, op::mean>(c, ro);
          case opk::argmin: return fused_simt<float, op::argmin>(c, ro);
          case opk::argmax: return fused_simt<float, op::argmax>(c, ro);
          case opk::range: return fused_simt<float, test::range_op>(c, ro);
        }
        break;
      case elem::f64:
        if (c.o == opk::argmin) return fused_simt<double, op::argmin>(c, ro);
        if (c.o == opk::sum) return fused_simt<double, op::sum>(c, ro);
        break;
      case elem::f16:
        if (c.o == opk::argmax) return fused_simt<__half, op::argmax>(c, ro);
        if (c.o == opk::mean) return fused_simt<__half, op::mean>(c, ro);
        break;
      case elem::bf16:
        if (c.o == opk::min) return fused_simt<__nv_bfloat16, op::min>(c, ro);
        if (c.o == opk::argmin) return fused_simt<__nv_bfloat16, op::argmin>(c, ro);
        break;
    }
  }
  result r;
  r.ok = false;
  r.why = "run_simt_or_conv2d: combination not instantiated";
  return r;
}

}  // namespace convred::fuzz
