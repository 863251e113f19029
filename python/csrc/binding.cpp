// convred Python extension: operator schemas (TORCH_LIBRARY), argument checks, the CUDA kernels (through
// launch.h) and a CPU reference kernel built from ATen ops.
//
// Operators (namespace convred; Python: torch.ops.convred.*):
//   conv2d_reduce(Tensor x, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, int[2] dilation,
//                 int groups, float scale, str reduce, str math) -> (Tensor values, Tensor indices)
//   conv2d_reduce_packed(Tensor x, Tensor weight, Tensor packed, Tensor? bias, ...same...) -> (Tensor, Tensor)
//   pack_filter(Tensor weight, int[] x_shape, int[2] stride, int[2] padding, int[2] dilation, int groups,
//               str math) -> Tensor
// reduce: min, max (values and indices, as torch.min(t, dim)), amin, amax (values only, as torch.amin; the
// kernels' value-only ops, no index bookkeeping), sum, mean (values only), argmin, argmax (indices, and the
// values too); a values-only kind returns an empty int64 tensor as its indices.
// The Python package (convred/_ops.py) adds their fake (meta) kernels and autograd.
// Per-operator ATen headers and no pybind11 (the library is loaded with torch.ops.load_library): the
// host compile of this file is a fraction of what <torch/extension.h> costs.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <string>

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

#include <string>
#include <tuple>

#include "launch.h"

namespace convred_ext {

// defined in f32_<math>.cu
std::size_t packed_bytes_tf32(const convred::conv2d_problem& p);
std::size_t packed_bytes_tf32x3(const convred::conv2d_problem& p);
std::size_t packed_bytes_bf16(const convred::conv2d_problem& p);
std::size_t packed_bytes_fp16(const convred::conv2d_problem& p);
int pack_tf32(const convred::conv2d_problem&, const float*, void*, std::size_t, cudaStream_t);
int pack_tf32x3(const convred::conv2d_problem&, const float*, void*, std::size_t, cudaStream_t);
int pack_bf16(const convred::conv2d_problem&, const float*, void*, std::size_t, cudaStream_t);
int pack_fp16(const convred::conv2d_problem&, const float*, void*, std::size_t, cudaStream_t);

std::size_t packed_filter_bytes(math_kind m, const convred::conv2d_problem& p) {
  switch (m) {
    case math_kind::tf32: return packed_bytes_tf32(p);
    case math_kind::tf32x3: return packed_bytes_tf32x3(p);
    case math_kind::bf16: return packed_bytes_bf16(p);
    case math_kind::fp16: return packed_bytes_fp16(p);
    default: return 0;
  }
}

int pack_filter(math_kind m, const convred::conv2d_problem& p, const float* w, void* packed, std::size_t bytes,
                cudaStream_t stream) {
  switch (m) {
    case math_kind::tf32: return pack_tf32(p, w, packed, bytes, stream);
    case math_kind::tf32x3: return pack_tf32x3(p, w, packed, bytes, stream);
    case math_kind::bf16: return pack_bf16(p, w, packed, bytes, stream);
    case math_kind::fp16: return pack_fp16(p, w, packed, bytes, stream);
    default: return 0;
  }
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
  TORCH_CHECK_VALUE(false, kOp, ": argument 'math' must be one of ieee, tf32, tf32x3, bf16, fp16, got '", s, "'");
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
  TORCH_CHECK_VALUE(dt != at::kDouble || c.math == math_kind::ieee, kOp,
                    ": argument 'math' must be 'ieee' for float64 x (tensor cores take 32- and 16-bit inputs), got '",
                    math, "'");
  auto& p = c.p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = R, p.S = S;
  p.stride_h = stride[0], p.stride_w = stride[1];
  p.pad_h = padding[0], p.pad_w = padding[1];
  p.dil_h = dilation[0], p.dil_w = dilation[1];
  p.groups = groups;
  p.x_layout = x.is_contiguous() ? convred::layout::nchw : convred::layout::nhwc;
  TORCH_CHECK_VALUE(p.P() >= 1 && p.Q() >= 1, kOp,
                    ": arguments 'weight', 'padding', 'dilation': the dilated kernel is larger than the padded "
                    "input (output size ",
                    istr(p.P()), " x ", istr(p.Q()), ")");
  const convred::status s = convred::validate(p, static_cast<int64_t>(x.element_size()));
  TORCH_CHECK_VALUE(s == convred::status::success, kOp, ": arguments 'x', 'weight' (sizes ", istr(x.sizes()), ", ",
                    istr(weight.sizes()), "): ", convred::to_string(s));
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

int launch(const at::Tensor& x, const checked& c, launch_args& a) {
  switch (x.scalar_type()) {
    case at::kFloat:
      switch (c.math) {
        case math_kind::ieee: return launch_f32_ieee(c.reduce, a);
        case math_kind::tf32: return launch_f32_tf32(c.reduce, a);
        case math_kind::tf32x3: return launch_f32_tf32x3(c.reduce, a);
        case math_kind::bf16: return launch_f32_bf16(c.reduce, a);
        case math_kind::fp16: return launch_f32_fp16(c.reduce, a);
      }
      break;
    case at::kHalf:
      switch (c.math) {
        case math_kind::ieee: return launch_f16_ieee(c.reduce, a);
        case math_kind::bf16: return launch_f16_bf16(c.reduce, a);
        case math_kind::tf32:    // float16 operands are exact in TF32 and in fp16 alike: the fp16 kernel
        case math_kind::tf32x3:  // multiplies the same exact operands (fp32 accumulation) at twice the depth
        case math_kind::fp16: return launch_f16_fp16(c.reduce, a);
      }
      break;
    case at::kBFloat16:
      switch (c.math) {
        case math_kind::ieee: return launch_bf16_ieee(c.reduce, a);
        case math_kind::tf32:    // bfloat16 operands are exact in TF32 and in bf16 alike: the bf16 kernel
        case math_kind::tf32x3:  // multiplies the same exact operands (fp32 accumulation)
        case math_kind::bf16: return launch_bf16_bf16(c.reduce, a);
        case math_kind::fp16: return launch_bf16_fp16(c.reduce, a);
      }
      break;
    case at::kDouble: return launch_f64(c.reduce, a);
    default: break;
  }
  return static_cast<int>(convred::status::invalid_argument);
}

void check_status(int s, const char* what) {
  const auto st = static_cast<convred::status>(s);
  if (st == convred::status::success) return;
  if (st == convred::status::cuda_error) C10_CUDA_CHECK(cudaGetLastError());
  TORCH_CHECK(false, kOp, ": ", what, " failed: ", convred::to_string(st));
}

/// The packed filter bytes for this call (0 when the wgmma path does not serve it, or x is not float or
/// the math is ieee).
std::size_t packed_bytes_for_call(const at::Tensor& x, const checked& c) {
  if (x.scalar_type() != at::kFloat || c.math == math_kind::ieee) return 0;
  return packed_filter_bytes(c.math, c.p);
}

at::Tensor pack_into_new(const at::Tensor& weight, const checked& c, std::size_t bytes) {
  at::Tensor packed = at::empty({static_cast<int64_t>(bytes)}, weight.options().dtype(at::kByte));
  if (bytes == 0) return packed;
  check_status(pack_filter(c.math, c.p, weight.data_ptr<float>(), packed.data_ptr(), bytes,
                           c10::cuda::getCurrentCUDAStream().stream()),
               "pack_filter");
  return packed;
}

std::tuple<at::Tensor, at::Tensor> run_cuda(const at::Tensor& x, const at::Tensor& weight,
                                            const c10::optional<at::Tensor>& bias, const checked& c,
                                            const at::Tensor* packed_in, double scale) {
  auto [y, idx] = empty_outputs(x, c);
  if (c.p.N == 0) return {y, idx};
  launch_args a;
  a.p = c.p;
  a.x = x.data_ptr();
  a.w = weight.data_ptr();
  a.bias = bias.has_value() && bias->defined() ? bias->data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.indices = has_index(c.reduce) ? idx.data_ptr<int64_t>() : nullptr;
  a.scale = scale;
  a.stream = c10::cuda::getCurrentCUDAStream().stream();
  at::Tensor tmp;
  const std::size_t need = packed_bytes_for_call(x, c);
  if (need > 0) {
    if (packed_in) {
      TORCH_CHECK_VALUE(static_cast<std::size_t>(packed_in->numel()) >= need, kOp,
                        ": argument 'packed' has ", istr(packed_in->numel()), " bytes, this problem needs ", std::to_string(need),
                        " (pack it with pack_filter for this weight, input shape and math)");
      a.packed = packed_in->data_ptr();
      a.packed_bytes = static_cast<std::size_t>(packed_in->numel());
    } else {
      tmp = pack_into_new(weight, c, need);  // per call: a 5 us kernel; the module caches it instead
      a.packed = tmp.data_ptr();
      a.packed_bytes = need;
    }
  }
  check_status(launch(x, c, a), "launch");
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

/// x_shape (N, C, H, W) of the input the filter will be used with, in NCHW order whatever the layout.
checked check_pack_args(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                        c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                        const std::string& math) {
  TORCH_CHECK_VALUE(x_shape.size() == 4, "convred.pack_filter: argument 'x_shape' must have 4 elements (N, C, H, W), got ",
                    istr(static_cast<int64_t>(x_shape.size())));
  // check the problem through the operator's rules on a meta x of that shape
  const at::Tensor x = at::empty(x_shape, weight.options().device(at::kMeta));
  return check_args(x, weight.to(at::kMeta), c10::nullopt, stride, padding, dilation, groups, "min", math);
}

at::Tensor pack_filter_cuda(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                            c10::string_view math) {
  TORCH_CHECK_VALUE(weight.is_cuda(), "convred.pack_filter: argument 'weight' must be a CUDA tensor here, got ",
                    weight.device());
  checked c = check_pack_args(weight, x_shape, stride, padding, dilation, groups, std::string(math));
  const c10::cuda::CUDAGuard guard(weight.device());
  const at::Tensor x_meta = at::empty(x_shape, weight.options().device(at::kMeta));
  return pack_into_new(weight, c, packed_bytes_for_call(x_meta, c));
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
                           c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups, c10::string_view math) {
  check_pack_args(weight, x_shape, stride, padding, dilation, groups, std::string(math));
  return at::empty({0}, weight.options().dtype(at::kByte));
}

// ----------------------------------------------------------------------------------------------- info
/// Which kernel conv2d_reduce runs for these arguments: 0 cpu reference, 1 SIMT fp32, 2 SIMT fp64,
/// 3 mma.sync tensor cores, 4 wgmma (sm_90a packed filter). convred.kernel_name turns it into a name.
int64_t kernel_code(const at::Tensor& x, const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
                    c10::IntArrayRef dilation, int64_t groups, c10::string_view math) {
  const checked c = check_args(x, weight, c10::nullopt, stride, padding, dilation, groups, "min", std::string(math));
  if (!x.is_cuda()) return 0;
  if (c.math == math_kind::ieee) return x.scalar_type() == at::kDouble ? 2 : 1;
  const c10::cuda::CUDAGuard guard(x.device());
  const bool aligned16 = reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0;
  return packed_bytes_for_call(x, c) > 0 && aligned16 ? 4 : 3;
}

/// Packed filter bytes for float x of shape x_shape with this math on weight's CUDA device (0: the wgmma
/// kernel does not serve the problem there; always 0 for CPU weights, other dtypes or math ieee).
int64_t packed_filter_bytes_op(const at::Tensor& weight, c10::IntArrayRef x_shape, c10::IntArrayRef stride,
                               c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                               c10::string_view math) {
  const checked c = check_pack_args(weight, x_shape, stride, padding, dilation, groups, std::string(math));
  if (!weight.is_cuda() || weight.scalar_type() != at::kFloat || c.math == math_kind::ieee) return 0;
  const c10::cuda::CUDAGuard guard(weight.device());
  return static_cast<int64_t>(packed_filter_bytes(c.math, c.p));
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
      "str math) -> Tensor");
  m.def(
      "kernel_code(Tensor x, Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int groups, str math) "
      "-> int");
  m.def(
      "packed_filter_bytes(Tensor weight, int[] x_shape, int[2] stride, int[2] padding, int[2] dilation, "
      "int groups, str math) -> int");
}

TORCH_LIBRARY_IMPL(convred, CUDA, m) {
  m.impl("kernel_code", &convred_ext::kernel_code);
  m.impl("packed_filter_bytes", &convred_ext::packed_filter_bytes_op);
  m.impl("conv2d_reduce", &convred_ext::conv2d_reduce_cuda);
  m.impl("conv2d_reduce_packed", &convred_ext::conv2d_reduce_packed_cuda);
  m.impl("pack_filter", &convred_ext::pack_filter_cuda);
}

TORCH_LIBRARY_IMPL(convred, CPU, m) {
  m.impl("kernel_code", &convred_ext::kernel_code);
  m.impl("packed_filter_bytes", &convred_ext::packed_filter_bytes_op);
  m.impl("conv2d_reduce", &convred_ext::conv2d_reduce_cpu);
  m.impl("conv2d_reduce_packed", &convred_ext::conv2d_reduce_packed_cpu);
  m.impl("pack_filter", &convred_ext::pack_filter_cpu);
}

