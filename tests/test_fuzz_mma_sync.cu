// Fuzz runner (see fuzz.cuh): fused conv2d_reduce on mma.sync tensor cores (default_policy_for<Math> on
// float: tf32 argmin/sum, tf32x3 argmin/max/mean, bf16 argmax/min, fp16 argmin/range; fp16 math on half
// argmin, bf16 math on bf16 argmax) and the Hopper packed path (pack_filter + conv2d_reduce_packed with
// default_wgmma_policy<Math>, the same float ops; its mma.sync fallback is the fused kernel above), and the
// wgmma kernel's partial mode (pack_filter + conv2d_reduce_packed_split, cases with wks > 0; its fallback the
// mma.sync split path). No test cases here: test_fuzz_gpu.cu drives.
#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>

#include <algorithm>
#include <vector>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

template <class Math, class T, class Op>
result fused_tc(const fcase& c, const run_opts& ro) {
  result r = run_conv<T, Op>(c, ro, false,
                             [&](const T* x, const T* w, const T* b, T* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) {
                               return device::conv2d_reduce<default_policy_for<Math>>(c.p, x, w, b, y, i, Op{}, e, s);
                             });
  r.kernel = std::string("conv2d_reduce mma.sync ") + name(c.m) + " " + name(c.t) + " " + name(c.o);
  return r;
}

template <class Math, class Op>
result packed_split(const fcase& c, const run_opts& ro);

template <class Math, class Op>
result packed(const fcase& c, const run_opts& ro) {
  using P = typename default_wgmma_policy<Math>::type;
  if (c.wks > 0) return packed_split<Math, Op>(c, ro);
  const std::size_t bytes = device::packed_filter_bytes<P, float>(c.p);
  void* pk = nullptr;
  bool done = false, wgmma = false;
  status pack_status = status::success;
  result r = run_conv<float, Op>(
      c, ro, false, [&](const float* x, const float* w, const float* b, float* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) {
        if (!done) {  // pack once, before the first launch, and wait for it (later launches use other streams)
          done = true;
          if (bytes > 0 && cudaMalloc(&pk, bytes) != cudaSuccess) return status::cuda_error;
          pack_status = device::pack_filter<P>(c.p, w, pk, bytes, s);
          if (pack_status != status::success) return pack_status;
          if (cudaStreamSynchronize(s) != cudaSuccess) return status::cuda_error;
          wgmma = bytes > 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
        }
        return device::conv2d_reduce_packed<P>(c.p, x, w, pk, bytes, b, y, i, Op{}, e, s);
      });
  if (pk) cudaFree(pk);
  r.kernel = std::string("conv2d_reduce_packed ") + (wgmma ? "wgmma " : "fallback mma.sync ") + name(c.m) + " " + name(c.o);
  if (!r.ok && pack_status != status::success) r.why = std::string("pack_filter: ") + r.why;
  return r;
}

/// The wgmma kernel's partial mode (conv2d_reduce_packed_split) with 1 + (wks - 1) % max_packed_k_splits
/// GEMM_K splits. Every launch gets its own workspace (launches on two streams run at once in the
/// determinism test), exactly the size asked for plus one byte, poisoned with 0xFF (NaN partial sums) on the
/// launch's stream, the filter packed into its start on that stream.
template <class Math, class Op>
result packed_split(const fcase& c, const run_opts& ro) {
  using P = typename default_wgmma_policy<Math>::type;
  const int splits = 1 + (c.wks - 1) % std::max(1, device::max_packed_k_splits<P, float>(c.p));
  const std::size_t packed = device::packed_filter_bytes<P, float>(c.p);
  // N = 0: no partial sums, but pack_filter still wants the packed filter's room
  const std::size_t bytes = std::max(device::packed_split_workspace_bytes<P, float>(c.p, splits), packed);
  std::vector<unsigned char*> owned;
  bool wgmma = false;
  status pack_status = status::success;
  result r = run_conv<float, Op>(
      c, ro, false, [&](const float* x, const float* w, const float* b, float* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) {
        unsigned char* ws = nullptr;
        if (cudaMalloc(&ws, bytes + 1) != cudaSuccess) return status::cuda_error;
        owned.push_back(ws);
        if (cudaMemsetAsync(ws, 0xFF, bytes + 1, s) != cudaSuccess) return status::cuda_error;
        pack_status = device::pack_filter<P>(c.p, w, ws, bytes, s);
        if (pack_status != status::success) return pack_status;
        wgmma = packed > 0 && (reinterpret_cast<std::uintptr_t>(x) % 16 == 0 || c.p.stride_h != 1 || c.p.W % 4 != 0);
        return device::conv2d_reduce_packed_split<P>(c.p, x, w, ws, bytes, b, y, i, splits, Op{}, e, s);
      });
  cudaDeviceSynchronize();
  for (unsigned char* p : owned) cudaFree(p);
  r.kernel = std::string("conv2d_reduce_packed_split ") + (wgmma ? "wgmma partial " : "fallback mma.sync split ") +
             name(c.m) + " " + name(c.o);
  if (!r.ok && pack_status != status::success) r.why = std::string("pack_filter: ") + r.why;
  return r;
}

}  // namespace

result run_tc(const fcase& c, const run_opts& ro) {
  if (c.e == entry::packed) {
    switch (c.m) {
      case mathk::tf32:
        if (c.o == opk::argmin) return packed<math::tf32, op::argmin>(c, ro);
        if (c.o == opk::sum) return packed<math::tf32, op::sum>(c, ro);
        break;
      case mathk::tf32x3:
        if (c.o == opk::argmin) return packed<math::tf32x3, op::argmin>(c, ro);
        if (c.o == opk::max) return packed<math::tf32x3, op::max>(c, ro);
        if (c.o == opk::mean) return packed<math::tf32x3, op::mean>(c, ro);
        break;
      case mathk::bf16:
        if (c.o == opk::argmax) return packed<math::bf16, op::argmax>(c, ro);
        if (c.o == opk::min) return packed<math::bf16, op::min>(c, ro);
        break;
      case mathk::fp16:
        if (c.o == opk::argmin) return packed<math::fp16, op::argmin>(c, ro);
        if (c.o == opk::range) return packed<math::fp16, test::range_op>(c, ro);
        break;
      default: break;
    }
  } else if (c.t == elem::f16) {
    if (c.m == mathk::fp16 && c.o == opk::argmin) return fused_tc<math::fp16, __half, op::argmin>(c, ro);
  } else if (c.t == elem::bf16) {
    if (c.m == mathk::bf16 && c.o == opk::argmax) return fused_tc<math::bf16, __nv_bfloat16, op::argmax>(c, ro);
  } else if (c.t == elem::f32) {
    switch (c.m) {
      case mathk::tf32:
        if (c.o == opk::argmin) return fused_tc<math::tf32, float, op::argmin>(c, ro);
        if (c.o == opk::sum) return fused_tc<math::tf32, float, op::sum>(c, ro);
        break;
      case mathk::tf32x3:
        if (c.o == opk::argmin) return fused_tc<math::tf32x3, float, op::argmin>(c, ro);
        if (c.o == opk::max) return fused_tc<math::tf32x3, float, op::max>(c, ro);
        if (c.o == opk::mean) return fused_tc<math::tf32x3, float, op::mean>(c, ro);
        break;
      case mathk::bf16:
        if (c.o == opk::argmax) return fused_tc<math::bf16, float, op::argmax>(c, ro);
        if (c.o == opk::min) return fused_tc<math::bf16, float, op::min>(c, ro);
        break;
      case mathk::fp16:
        if (c.o == opk::argmin) return fused_tc<math::fp16, float, op::argmin>(c, ro);
        if (c.o == opk::range) return fused_tc<math::fp16, float, test::range_op>(c, ro);
        break;
      default: break;
    }
  }
  result r;
  r.ok = false;
  r.why = "run_tc: combination not instantiated";
  return r;
}

}  // namespace convred::fuzz
