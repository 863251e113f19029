// convred Python extension: operator schemas (TORCH_LIBRARY), argument checks, the plan cache, the CUDA
// path (through launch.h) and a CPU reference kernel built from ATen ops.
//
// Operators (namespace convred; Python: torch.ops.convred.*):
//   conv2d_reduce(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation,
//                 int groups, float scale, str reduce, str math) -> (Tensor values, Tensor indices)
//   conv2d_reduce_packed(Tensor x, Tensor weight, Tensor packed, Tensor? bias, ...same...) -> (Tensor, Tensor)
//   pack_filter(Tensor weight, int[] x_shape, int[2] stride, int[2] padding, int[2] dilation, int groups,
//               str math, bool channels_last=False) -> Tensor
//   describe(Tensor x, Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int groups, str math)
//            -> str
// reduce: min, max (values and indices, as torch.min(t, dim)), amin, amax (values only, as torch.amin; the
// kernels' value-only ops, no index bookkeeping), sum, mean (values only), argmin, argmax (indices, and the
// values too); a values-only kind returns an empty int64 tensor as its indices.
// math: ieee, tf32, tf32x3, bf16, fp16, accurate (launch.h, math_kind).
// Every CUDA call runs a convred::device::conv2d_reduce_plan, made once per (problem, dtype, math, device)
// and cached (as cudnn.benchmark caches algorithms); its workspace comes from PyTorch's caching allocator
// on the current stream. pack_filter returns the plan's prepared bytes (the packed filter of a wgmma plan,
// else empty) for conv2d_reduce_packed, which then skips the packing kernel.
// The Python package (convred/_ops.py) adds their fake (meta) kernels and autograd.
// Per-operator ATen headers and no pybind11 (the library is loaded with torch.ops.load_library): the
// host compile of this file is a fraction of what <torch/extension.h> costs.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/core/Tensor.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <convred/status.cuh>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "launch.h"

namespace convred_ext {

math_kind effective_math(dtype_kind t, math_kind m) {
  switch (t) {
    case dtype_kind::f64: return math_kind::ieee;
    case dtype_kind::f16:  // 16-bit values are exact in TF32 and in their own type: its own kernel
      return m == math_kind::tf32 || m == math_kind::tf32x3 || m == math_kind::accurate ? math_kind::fp16 : m;
    case dtype_kind::bf16:
      return m == math_kind::tf32 || m == math_kind::tf32x3 || m == math_kind::accurate ? math_kind::bf16 : m;
    case dtype_kind::f32: return m;
  }
  return m;
}

std::unique_ptr<plan> make_plan(dtype_kind t, math_kind m, const convred::conv2d_problem& p) {
  const math_kind e = effective_math(t, m);
  switch (t) {
    case dtype_kind::f32:
      switch (e) {
        case math_kind::ieee: return make_plan_f32_ieee(p);
        case math_kind::tf32: return make_plan_f32_tf32(p);
        case math_kind::tf32x3: return make_plan_f32_tf32x3(p);
        case math_kind::bf16: return make_plan_f32_bf16(p);
        case math_kind::fp16: return make_plan_f32_fp16(p);
        case math_kind::accurate: return make_plan_f32_accurate(p);
      }
      break;
    case dtype_kind::f16:
      if (e == math_kind::ieee) return make_plan_f16_ieee(p);
      if (e == math_kind::bf16) return make_plan_f16_bf16(p);
      return make_plan_f16_fp16(p);
    case dtype_kind::bf16:
      if (e == math_kind::ieee) return make_plan_bf16_ieee(p);
      if (e == math_kind::fp16) return make_plan_bf16_fp16(p);
      return make_plan_bf16_bf16(p);
    case dtype_kind::f64: return make_plan_f64(p);
  }
  return make_plan_f64(p);  // (unreachable: every dtype_kind is listed)
}

namespace {

constexpr const char* kOp = "convred.conv2d_reduce";

// Integers in error messages are formatted here with std::to_string, never by c10::str's stream output:
// on the H200 machine's PyTorch 2.11 build (Python 3.12) an error message with an integer argument
// formatted by c10::str crashed the process (a segmentation fault while raising the ValueError), while
// messages made only of strings raised cleanly.
std::string istr(int64_t v) { return std::to_string(v); }
std::string istr(c10::IntArrayRef v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

reduce_kind parse_reduce(const std::string& s) {
  if (s == "min") return reduce_kind::min;
  if (s == "max") return reduce_kind::max;
  if (s == "amin") return reduce_kind::amin;
  if (s == "amax") return reduce_kind::amax;
  if (s == "sum") return reduce_kind::sum;
  if (s == "mean") return reduce_kind::mean;
  if (s == "argmin") return reduce_kind::argmin;
  if (s == "argmax") return reduce_kind::argmax;
  TORCH_CHECK_VALUE(false, kOp,
                    ": argument 'reduce' must be one of min, max, amin, amax, sum, mean, argmin, argmax, got '", s,
                    "'");
}

math_kind parse_math(const std::string& s) {
  if (s == "ieee") return math_kind::ieee;
  if (s == "tf32") return math_kind::tf32;
  if (s == "tf32x3") return math_kind::tf32x3;
  if (s == "bf16") return math_kind::bf16;
  if (s == "fp16") return math_kind::fp16;
  if (s == "accurate") return math_kind::accurate;
  TORCH_CHECK_VALUE(false, kOp, ": argument 'math' must be one of ieee, tf32, tf32x3, bf16, fp16, accurate, got '", s,
                    "'");
}

/// Whether the reduce kind has an indices output (N, 1, P, Q); otherwise indices is an empty int64 tensor.
bool has_index(reduce_kind r) {
  return r == reduce_kind::min || r == reduce_kind::max || r == reduce_kind::argmin || r == reduce_kind::argmax;
}

void check_pair(c10::IntArrayRef v, const char* name, int64_t lo) {
  TORCH_CHECK_VALUE(v.size() == 2, kOp, ": argument '", name, "' must have 2 elements, got ", istr(static_cast<int64_t>(v.size())));
  TORCH_CHECK_VALUE(v[0] >= lo && v[1] >= lo, kOp, ": argument '", name, "' must be >= ", istr(lo), ", got ", istr(v));
}

/// Everything the kernels need, checked (the same rules as convred/_ops.py's fake kernel).
struct checked {
  convred::conv2d_problem p;
  reduce_kind reduce;
  math_kind math;
};

checked check_args(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                   c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                   const std::string& reduce, const std::string& math) {
  checked c;
  c.reduce = parse_reduce(reduce);
  c.math = parse_math(math);
  TORCH_CHECK_VALUE(x.defined(), kOp, ": argument 'x' is undefined");
  TORCH_CHECK_VALUE(weight.defined(), kOp, ": argument 'weight' is undefined");
  const auto dt = x.scalar_type();
  TORCH_CHECK_TYPE(dt == at::kFloat || dt == at::kHalf || dt == at::kBFloat16 || dt == at::kDouble, kOp,
                   ": argument 'x' must be float32, float16, bfloat16 or float64, got ", dt);
  TORCH_CHECK_VALUE(x.dim() == 4, kOp, ": argument 'x' must be 4-D (N, C, H, W), got ", istr(x.dim()), "-D");
  TORCH_CHECK_VALUE(x.is_contiguous() || x.is_contiguous(at::MemoryFormat::ChannelsLast), kOp,
                    ": argument 'x' must be contiguous (NCHW) or channels_last contiguous (NHWC)");
  TORCH_CHECK_TYPE(weight.scalar_type() == dt, kOp, ": argument 'weight' must have x's dtype ", dt, ", got ",
                   weight.scalar_type());
  TORCH_CHECK_VALUE(weight.device() == x.device(), kOp, ": argument 'weight' must be on x's device ", x.device(),
                    ", got ", weight.device());
  TORCH_CHECK_VALUE(weight.dim() == 4, kOp, ": argument 'weight' must be 4-D (K, C/groups, R, S), got ",
                    istr(weight.dim()), "-D");
  TORCH_CHECK_VALUE(weight.is_contiguous(), kOp, ": argument 'weight' must be contiguous (K, C/groups, R, S)");
  TORCH_CHECK_VALUE(groups >= 1, kOp, ": argument 'groups' must be >= 1, got ", istr(groups));
  check_pair(stride, "stride", 1);
  check_pair(padding, "padding", 0);
  check_pair(dilation, "dilation", 1);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t K = weight.size(0), R = weight.size(2), S = weight.size(3);
  TORCH_CHECK_VALUE(C >= 1 && H >= 1 && W >= 1, kOp, ": argument 'x' must have C, H, W >= 1, got ", istr(x.sizes()));
  TORCH_CHECK_VALUE(K >= 1 && R >= 1 && S >= 1, kOp, ": argument 'weight' must have K, R, S >= 1, got ",
                    istr(weight.sizes()));
  TORCH_CHECK_VALUE(C % groups == 0 && K % groups == 0, kOp, ": argument 'groups' (", istr(groups),
                    ") must divide x's channels (", istr(C), ") and weight's output channels (", istr(K), ")");
  TORCH_CHECK_VALUE(weight.size(1) * groups == C, kOp, ": argument 'weight' must have C/groups = ", istr(C / groups),
                    " input channels, got ", istr(weight.size(1)));
  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    TORCH_CHECK_TYPE(b.scalar_type() == dt, kOp, ": argument 'bias' must have x's dtype ", dt, ", got ",
                     b.scalar_type());
    TORCH_CHECK_VALUE(b.device() == x.device(), kOp, ": argument 'bias' must be on x's device ", x.device(),
                      ", got ", b.device());
    TORCH_CHECK_VALUE(b.dim() == 1 && b.size(0) == K, kOp, ": argument 'bias' must have shape (", istr(K), "), got ",
                      istr(b.sizes()));
    TORCH_CHECK_VALUE(b.is_contiguous(), kOp, ": argument 'bias' must be contiguous");
  }
  TORCH_CHECK_VALUE(dt != at::kDouble || c.math == math_kind::ieee || c.math == math_kind::accurate, kOp,
                    ": argument 'math' must be 'ieee' or 'accurate' for float64 x (tensor cores take 32- and 16-bit "
                    "inputs), got '",
                    math, "'");
  auto& p = c.p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = R, p.S = S;
  p.stride_h = stride[0], p.stride_w = stride[1];
  p.pad_h = padding[0], p.pad_w = padding[1];
  p.dil_h = dilation[0], p.dil_w = dilation[1];
  p.groups = groups;
  p.x_layout = x.is_contiguous() ? convred::layout::nchw : convred::layout::nhwc;
  // validate first: it checks the coordinate limits before it forms P and Q (2 * padding or dilation * (R - 1)
  // near 2^63 would overflow), so P and Q are printed only for its invalid_output_size
  const convred::status s = convred::validate(p, static_cast<int64_t>(x.element_size()));
  TORCH_CHECK_VALUE(s != convred::status::invalid_output_size, kOp,
                    ": arguments 'weight', 'padding', 'dilation': the dilated kernel is larger than the padded "
                    "input (output size ",
                    istr(p.P()), " x ", istr(p.Q()), ")");
  TORCH_CHECK_VALUE(s == convred::status::success, kOp, ": arguments 'x', 'weight', 'stride', 'padding', 'dilation' (sizes ",
                    istr(x.sizes()), ", ", istr(weight.sizes()), ", stride ", istr(stride), ", padding ", istr(padding),
                    ", dilation ", istr(dilation), "): ", convred::to_string(s));
  return c;
}

std::tuple<at::Tensor, at::Tensor> empty_outputs(const at::Tensor& x, const checked& c) {
  const auto& p = c.p;
  at::Tensor y = at::empty({p.N, 1, p.P(), p.Q()}, x.options());
  at::Tensor idx = has_index(c.reduce) ? at::empty({p.N, 1, p.P(), p.Q()}, x.options().dtype(at::kLong))
                                       : at::empty({0}, x.options().dtype(at::kLong));
  return {y, idx};
}

// ----------------------------------------------------------------------------------------------- CUDA

dtype_kind dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return dtype_kind::f16;
    case at::kBFloat16: return dtype_kind::bf16;
    case at::kDouble: return dtype_kind::f64;
    default: return dtype_kind::f32;
  }
}

void check_status(int s, const char* what) {
  const auto st = static_cast<convred::status>(s);
  if (st == convred::status::success) return;
  if (st == convred::status::cuda_error) C10_CUDA_CHECK(cudaGetLastError());
  TORCH_CHECK(false, kOp, ": ", what, " failed: ", convred::to_string(st));
}

/// One cached plan and the lock that keeps its bind/prepare and run together.
struct plan_entry {
  std::mutex mu;
  std::unique_ptr<plan> p;
};

/// The plan for (problem, dtype, math) on the current device, made on first use and kept for the
/// process's lifetime (host memory only: the plans own no device memory). Keyed by every field the plan
/// depends on, the effective math (effective_math) and the device index, so a plan made on one device
/// never runs on another.
plan_entry& cached_plan(dtype_kind t, math_kind m, const convred::conv2d_problem& p) {
  int device = -1;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  const math_kind e = effective_math(t, m);
  // math::accurate and tf32x3 make different plans for float x (their descriptions differ)
  const std::array<std::int64_t, 18> key{static_cast<std::int64_t>(t), static_cast<std::int64_t>(e), device,
                                         p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.pad_h, p.pad_w, p.stride_h,
                                         p.stride_w, p.dil_h, p.dil_w, p.groups, static_cast<std::int64_t>(p.x_layout)};
  static std::mutex mu;
  static std::map<std::array<std::int64_t, 18>, std::unique_ptr<plan_entry>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<plan_entry>& slot = cache[key];
  if (!slot) {
    auto entry = std::make_unique<plan_entry>();
    entry->p = make_plan(t, m, p);
    slot = std::move(entry);
  }
  return *slot;
}

/// The plan's state as an error naming the problem (no kernel serves it here).
void check_plan(const plan& pl) {
  const auto st = static_cast<convred::status>(pl.state());
  TORCH_CHECK(st == convred::status::success, kOp, ": no kernel for this problem on this device: ",
              convred::to_string(st), " (", pl.description(), ")");
}

at::Tensor workspace_tensor(const at::Tensor& like, std::size_t bytes) {
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

std::tuple<at::Tensor, at::Tensor> run_cuda(const at::Tensor& x, const at::Tensor& weight,
                                            const c10::optional<at::Tensor>& bias, const checked& c,
                                            const at::Tensor* packed_in, double scale) {
  auto [y, idx] = empty_outputs(x, c);
  if (c.p.N == 0) return {y, idx};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  plan_entry& e = cached_plan(dtype_of(x.scalar_type()), c.math, c.p);
  const std::lock_guard<std::mutex> lock(e.mu);
  plan& pl = *e.p;
  check_plan(pl);
  at::Tensor ws;  // freed after the launch: the caching allocator keeps it for this stream's next call
  if (packed_in) {  // the caller's prepared bytes (read only) and a scratch of our own
    const std::size_t prep = pl.prepared_bytes(), scratch = pl.scratch_bytes();
    TORCH_CHECK_VALUE(static_cast<std::size_t>(packed_in->numel()) == prep, kOp, ": argument 'packed' has ",
                      istr(packed_in->numel()), " bytes, this problem's plan packs ", std::to_string(prep),
                      " (pack it with pack_filter for this weight, input shape, layout and math)");
    if (scratch > 0) ws = workspace_tensor(x, scratch);
    check_status(pl.bind(weight.data_ptr(), prep ? packed_in->data_ptr() : nullptr, prep,
                         scratch ? ws.data_ptr() : nullptr, scratch),
                 "bind");
  } else {  // one workspace: the filter packed into it on this call, then the scratch
    const std::size_t need = pl.workspace_bytes();
    if (need > 0) ws = workspace_tensor(x, need);
    check_status(pl.prepare(weight.data_ptr(), need ? ws.data_ptr() : nullptr, need, stream), "prepare");
  }
  run_args a;
  a.x = x.data_ptr();
  a.bias = bias.has_value() && bias->defined() ? bias->data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.indices = has_index(c.reduce) ? idx.data_ptr<int64_t>() : nullptr;
  a.scale = scale;
  a.stream = stream;
  check_status(pl.run(c.reduce, a), "run");
  return {y, idx};
}

void check_cuda_device(const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.is_cuda(), kOp, ": argument 'x' must be a CUDA tensor here, got ", x.device());
}

std::tuple<at::Tensor, at::Tensor> conv2d_reduce_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                      const c10::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                      c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                      int64_t groups, double scale, c10::string_view reduce,
                                                      c10::string_view math) {
  check_cuda_device(x);
  const checked c = check_args(x, weight, bias, stride, padding, dilation, groups, std::string(reduce),
                               std::string(math));
  const c10::cuda::CUDAGuard guard(x.device());
  return run_cuda(x, weight, bias, c, nullptr, scale);
}

void check_packed(const at::Tensor& x, const at::Tensor& packed) {
  TORCH_CHECK_TYPE(packed.scalar_type() == at::kByte, kOp, ": argument 'packed' must be uint8, got ",
                   packed.scalar_type());
  TORCH_CHECK_VALUE(packed.dim() == 1 && packed.is_contiguous(), kOp,
                    ": argument 'packed' must be a contiguous 1-D uint8 tensor (pack_filter's output)");
  TORCH_CHECK_VALUE(packed.device() == x.device(), kOp, ": argument 'packed' must be on x's device ", x.device(),
                    ", got ", packed.device());
}

std::tuple<at::Tensor, at::Tensor> conv2d_reduce_packed_cuda(
    const at::Tensor& x, const at::Tensor& weight, const at::Tensor& packed, const c10::optional<at::Tensor>& bias,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, double scale,
    c10::string_view reduce, c10::string_view math) {
  check_cuda_device(x);
  const checked c = check_args(x, weight, bias, stride, padding, dilation, groups, std::string(reduce),
                               std::string(math));
  check_packed(x, packed);
  const c10::cuda::CUDAGuard guard(x.device());
  return run_cuda(x, weight, bias, c, &packed, scale);
}

/// x_shape (N, C, H, W) of the input the filter will be used with, in NCHW order whatever the layout;
/// channels_last: x will be channels_last (NHWC). Checked through the operator's rules on a meta x.
checked check_pack_args(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                        c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                        const std::string& math, bool channels_last) {
  TORCH_CHECK_VALUE(x_shape.size() == 4, "convred.pack_filter: argument 'x_shape' must have 4 elements (N, C, H, W), got ",
                    istr(static_cast<int64_t>(x_shape.size())));
  const at::Tensor x = at::empty(x_shape, weight.options().device(at::kMeta),
                                 channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  return check_args(x, weight.to(at::kMeta), c10::nullopt, stride, padding, dilation, groups, "min", math);
}

at::Tensor pack_filter_cuda(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                            c10::string_view math, bool channels_last) {
  TORCH_CHECK_VALUE(weight.is_cuda(), "convred.pack_filter: argument 'weight' must be a CUDA tensor here, got ",
                    weight.device());
  const checked c = check_pack_args(weight, x_shape, stride, padding, dilation, groups, std::string(math), channels_last);
  const c10::cuda::CUDAGuard guard(weight.device());
  if (c.p.N == 0) return workspace_tensor(weight, 0);
  plan_entry& e = cached_plan(dtype_of(weight.scalar_type()), c.math, c.p);
  const std::lock_guard<std::mutex> lock(e.mu);
  plan& pl = *e.p;
  check_plan(pl);
  const std::size_t need = pl.workspace_bytes(), prep = pl.prepared_bytes();
  if (prep == 0) return workspace_tensor(weight, 0);
  at::Tensor ws = workspace_tensor(weight, need);
  check_status(pl.prepare(weight.data_ptr(), ws.data_ptr(), need, c10::cuda::getCurrentCUDAStream().stream()),
               "pack_filter");
  return need == prep ? ws : ws.narrow(0, 0, static_cast<int64_t>(prep)).clone();
}

// ----------------------------------------------------------------------------------------------- CPU
/// Reference kernel from ATen ops (conv2d in fp32, fp64 for float64 x; then scale and the reduction in that
/// type; values rounded to x's dtype). `math` is checked but the CPU computes exactly.
std::tuple<at::Tensor, at::Tensor> conv2d_reduce_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                     const c10::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                     c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                     int64_t groups, double scale, c10::string_view reduce,
                                                     c10::string_view math) {
  const checked c = check_args(x, weight, bias, stride, padding, dilation, groups, std::string(reduce),
                               std::string(math));
  auto [y, idx] = empty_outputs(x, c);
  if (c.p.N == 0) return {y, idx};
  const auto ct = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  c10::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = bias->to(ct);
  at::Tensor out = at::conv2d(x.to(ct).contiguous(), weight.to(ct), b, stride, padding, dilation, groups);
  out = out.mul(scale);
  switch (c.reduce) {
    case reduce_kind::min:
    case reduce_kind::argmin: {
      auto [v, i] = at::min(out, 1, true);
      y.copy_(v);
      idx.copy_(i);
      break;
    }
    case reduce_kind::max:
    case reduce_kind::argmax: {
      auto [v, i] = at::max(out, 1, true);
      y.copy_(v);
      idx.copy_(i);
      break;
    }
    case reduce_kind::amin: y.copy_(at::amin(out, 1, true)); break;
    case reduce_kind::amax: y.copy_(at::amax(out, 1, true)); break;
    case reduce_kind::sum: y.copy_(out.sum(1, true)); break;
    case reduce_kind::mean: y.copy_(out.mean(1, true)); break;
  }
  return {y, idx};
}

std::tuple<at::Tensor, at::Tensor> conv2d_reduce_packed_cpu(
    const at::Tensor& x, const at::Tensor& weight, const at::Tensor& packed, const c10::optional<at::Tensor>& bias,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, double scale,
    c10::string_view reduce, c10::string_view math) {
  check_packed(x, packed);  // on the CPU the packed filter is empty and ignored
  return conv2d_reduce_cpu(x, weight, bias, stride, padding, dilation, groups, scale, reduce, math);
}

at::Tensor pack_filter_cpu(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                           c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, c10::string_view math,
                           bool channels_last) {
  check_pack_args(weight, x_shape, stride, padding, dilation, groups, std::string(math), channels_last);
  return at::empty({0}, weight.options().dtype(at::kByte));
}

// ----------------------------------------------------------------------------------------------- info
/// What conv2d_reduce runs for these arguments: the plan's description on a CUDA x (made on x's device;
/// the reason when no kernel serves the problem), the CPU reference otherwise.
std::string describe(const at::Tensor& x, const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
                     c10::IntArrayRef dilation, int64_t groups, c10::string_view math) {
  const checked c = check_args(x, weight, c10::nullopt, stride, padding, dilation, groups, "min", std::string(math));
  if (!x.is_cuda()) return "cpu-reference (ATen conv2d + reduction, exact)";
  const c10::cuda::CUDAGuard guard(x.device());
  plan_entry& e = cached_plan(dtype_of(x.scalar_type()), c.math, c.p);
  const std::lock_guard<std::mutex> lock(e.mu);
  std::string d = e.p->description();
  // TMA reads x from a 16-byte aligned base for tiles of image rows and direct tiles (not flat tiles, which
  // read a packed copy of x, nor direct tiles that read a copy of it, nor gathered x): another x takes the
  // mma.sync fallback (conv2d_reduce_packed_split)
  if (d.rfind("wgmma", 0) == 0 && d.find("flat ") == std::string::npos && d.find("x gathered") == std::string::npos &&
      d.find("from x copied") == std::string::npos && reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 != 0)
    d += "; this x is not 16-byte aligned: runs take the mma.sync fallback";
  return d;
}

}  // namespace
}  // namespace convred_ext

TORCH_LIBRARY(convred, m) {
  m.def(
      "conv2d_reduce(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation, "
      "int groups, float scale, str reduce, str math) -> (Tensor, Tensor)");
  m.def(
      "conv2d_reduce_packed(Tensor x, Tensor weight, Tensor packed, Tensor? bias, int[2] stride, int[2] padding, "
      "int[2] dilation, int groups, float scale, str reduce, str math) -> (Tensor, Tensor)");
  m.def(
      "pack_filter(Tensor weight, int[] x_shape, int[2] stride, int[2] padding, int[2] dilation, int groups, "
      "str math, bool channels_last=False) -> Tensor");
  m.def("describe(Tensor x, Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int groups, str math) -> str");
}

TORCH_LIBRARY_IMPL(convred, CUDA, m) {
  m.impl("describe", &convred_ext::describe);
  m.impl("conv2d_reduce", &convred_ext::conv2d_reduce_cuda);
  m.impl("conv2d_reduce_packed", &convred_ext::conv2d_reduce_packed_cuda);
  m.impl("pack_filter", &convred_ext::pack_filter_cuda);
}

TORCH_LIBRARY_IMPL(convred, CPU, m) {
  m.impl("describe", &convred_ext::describe);
  m.impl("conv2d_reduce", &convred_ext::conv2d_reduce_cpu);
  m.impl("conv2d_reduce_packed", &convred_ext::conv2d_reduce_packed_cpu);
  m.impl("pack_filter", &convred_ext::pack_filter_cpu);
}
