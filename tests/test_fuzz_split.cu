// Fuzz runner (see fuzz.cuh): the split path, device::conv2d_reduce_split with c.ks GEMM_K splits, on the
// SIMT policy (math ieee: float min/argmax/mean, double sum) and the mma.sync policies (float: tf32
// argmin/sum, tf32x3 argmin/mean, bf16 argmax/range; fp16 math on half argmin). Every launch gets its own
// workspace (launches on two streams run at once in the determinism test), exactly the size asked for,
// one compute-type element past a 256-byte aligned base for odd seeds, poisoned with NaN bytes on the
// launch's stream first. No test cases here: test_fuzz_gpu.cu drives.
#include <convred/device/conv2d_reduce_split.cuh>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

template <class Policy, class T, class Op>
result split(const fcase& c, const run_opts& ro) {
  const std::size_t bytes = device::conv2d_reduce_split_workspace_bytes<T>(c.p, c.ks);
  const std::size_t shift = c.seed % 2 ? sizeof(compute_t<T>) : 0;  // aligned to the partial sums' type only
  std::vector<unsigned char*> owned;
  result r = run_conv<T, Op>(c, ro, false,
                             [&](const T* x, const T* w, const T* b, T* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) {
                               unsigned char* ws = nullptr;
                               if (cudaMalloc(&ws, bytes + shift + 1) != cudaSuccess) return status::cuda_error;
                               owned.push_back(ws);
                               if (cudaMemsetAsync(ws, 0xFF, bytes + shift + 1, s) != cudaSuccess) return status::cuda_error;
                               return device::conv2d_reduce_split<Policy>(c.p, x, w, b, y, i, ws + shift, bytes, c.ks,
                                                                          Op{}, e, s);
                             });
  cudaDeviceSynchronize();
  for (unsigned char* p : owned) cudaFree(p);
  r.kernel = std::string("conv2d_reduce_split ") + (c.m == mathk::ieee ? "simt " : "mma.sync ") + name(c.m) + " " +
             name(c.t) + " " + name(c.o);
  return r;
}

template <class Math>
using dp = default_policy_for<Math>;

}  // namespace

result run_split(const fcase& c, const run_opts& ro) {
  switch (c.m) {
    case mathk::ieee:
      if (c.t == elem::f32) {
        if (c.o == opk::min) return split<default_policy, float, op::min>(c, ro);
        if (c.o == opk::argmax) return split<default_policy, float, op::argmax>(c, ro);
        if (c.o == opk::mean) return split<default_policy, float, op::mean>(c, ro);
      }
      if (c.t == elem::f64 && c.o == opk::sum) return split<default_policy, double, op::sum>(c, ro);
      break;
    case mathk::tf32:
      if (c.t == elem::f32 && c.o == opk::argmin) return split<dp<math::tf32>, float, op::argmin>(c, ro);
      if (c.t == elem::f32 && c.o == opk::sum) return split<dp<math::tf32>, float, op::sum>(c, ro);
      break;
    case mathk::tf32x3:
      if (c.t == elem::f32 && c.o == opk::argmin) return split<dp<math::tf32x3>, float, op::argmin>(c, ro);
      if (c.t == elem::f32 && c.o == opk::mean) return split<dp<math::tf32x3>, float, op::mean>(c, ro);
      break;
    case mathk::bf16:
      if (c.t == elem::f32 && c.o == opk::argmax) return split<dp<math::bf16>, float, op::argmax>(c, ro);
      if (c.t == elem::f32 && c.o == opk::range) return split<dp<math::bf16>, float, test::range_op>(c, ro);
      break;
    case mathk::fp16:
      if (c.t == elem::f16 && c.o == opk::argmin) return split<dp<math::fp16>, __half, op::argmin>(c, ro);
      break;
    case mathk::accurate: break;  // the plan entry's only (test_fuzz_plan.cu)
  }
  result r;
  r.ok = false;
  r.why = "run_split: combination not instantiated";
  return r;
}

}  // namespace convred::fuzz
