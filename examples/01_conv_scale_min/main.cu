/// @file examples/01_conv_scale_min/main.cu
/// @brief convred example 01: the seed job, `y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)`,
/// as one fused kernel, run through the planner (convred::device::conv2d_reduce_plan<T, Math>) with its
/// default math (math::accurate: the fastest kernel whose error vs float64 is held to 1e-6), checked
/// against the float64 reference and timed.
///
/// By default it runs the seed case: x (64, 64, 256, 256) fp32 NCHW ~ N(0, 1); W (128, 64, 3, 3) and
/// b (128) uniform in +-1/sqrt(C*R*S), as torch.nn.Conv2d initialises them; scale 2.0; min over the 128
/// output channels; y (64, 1, 254, 254). Every problem parameter, the op, the dtype and the layout are
/// options (`--help`); x, W, b can come from .npy files and y / the indices can be written to .npy.
/// Everything that can be checked without a GPU (options, input files and their sizes, output folders,
/// the problem, the dtype and math combination) is checked before the device is touched.
///
/// Every --math (accurate, the default; ieee, tf32, tf32x3, bf16, fp16) runs through the planner: it picks
/// the kernel for the problem, the element type, the math and the GPU (wgmma on sm_90a, mma.sync on sm_80+,
/// the SIMT kernel for ieee), and the example prints which and why. prepare() (packing the filter for the
/// wgmma kernel) runs once, untimed; the timed loop calls plan.run.
///
/// Output: the problem, the math and the kernel picked, the time (median and min over --iters runs, CUDA
/// events, after warm-up), TFLOP/s, GB/s of least traffic, the error against float64, and as the last line exactly `Passed` or
/// `Failed`. Exit code: 0 Passed; 1 Failed or any error; 2 no usable CUDA device.
/// The command line, random data and verification helpers are shared with the other examples
/// (examples/common/).
#include <cuda_runtime.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/reference/conv2d.hpp>

#include "../common/cli.hpp"
#include "../common/cuda_check.hpp"
#include "../common/host_data.hpp"
#include "../common/npy.hpp"
#include "../common/verify.hpp"

namespace {

namespace ex = convred_examples;
using ex::math_kind;
using ex::usage_error;
constexpr const char* kProg = "01_conv_scale_min";

enum class op_kind { min, max, sum, mean, argmin, argmax };
enum class dtype_kind { f32, f64, f16, bf16 };
const char* const kOpNames[] = {"min", "max", "sum", "mean", "argmin", "argmax"};
const char* op_name(op_kind o) { return kOpNames[static_cast<int>(o)]; }
std::int64_t dtype_bytes(dtype_kind d) { return d == dtype_kind::f64 ? 8 : d == dtype_kind::f32 ? 4 : 2; }
bool is_index_op(op_kind o) { return o == op_kind::argmin || o == op_kind::argmax; }

struct options {
  convred::conv2d_problem p;  // the seed case by default
  bool set_n = false, set_c = false, set_h = false, set_w = false, set_k = false, set_r = false, set_s = false,
       set_groups = false;  // sizes given as options: input files must agree with them
  op_kind op = op_kind::min;
  dtype_kind dtype = dtype_kind::f32;
  math_kind math = math_kind::accurate;  // the planner's default
  double scale = 2.0;
  bool bias = true;
  int iters = 50, warmup = 5;
  std::uint64_t seed = 2026;
  std::int64_t verify_pixels = 4096;
  std::string x_file, w_file, b_file, y_out, idx_out;
  options() { p.N = 64, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3; }
};

void print_help() {
  std::printf(
      "Usage: %s [options]\n\n"
      "Computes y[n,0,p,q] = OP over k of scale * (conv2d(x, W)[n,k,p,q] + b[k]) in one fused convred kernel\n"
      "(by default the seed case y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)), checks it against\n"
      "a float64 reference, times it, and prints Passed or Failed as the last line.\n"
      "Exit code: 0 Passed; 1 Failed or an error; 2 no usable CUDA device.\n\n"
      "Problem (defaults: the seed case; conv2d is PyTorch's, a cross-correlation)\n"
      "  --n N               batch, at least 1 (64)\n"
      "  --c C               input channels (64)\n"
      "  --h H, --height H   input height (256)\n"
      "  --w W, --width W    input width (256); a --w value that is not an integer is the weights file\n"
      "  --k K               output channels, the reduced dim (128)\n"
      "  --r R, --s S        kernel height and width (3, 3)\n"
      "  --pad P             zero padding of both dims (0); --pad-h, --pad-w for one dim\n"
      "  --stride S          stride (1); --stride-h, --stride-w\n"
      "  --dilation D        dilation (1); --dilation-h, --dilation-w\n"
      "  --groups G          groups (1); C and K must be multiples of G\n"
      "  --layout L          memory layout of x: nchw (default) or nhwc (PyTorch's channels_last)\n"
      "  --op OP             reduction over channels: min (default), max, sum, mean, argmin, argmax\n"
      "                      (argmin/argmax also write y, like torch.min(..., dim=1) values and indices)\n"
      "  --dtype T           element type of x, W, b, y: float (default), double, half, bf16\n"
      "                      (half/bf16 are converted to fp32 on load; accumulation in fp32, fp64 for double)\n"
      "  --math M            how the conv multiplies; every math runs through the planner,\n"
      "                      convred::device::conv2d_reduce_plan<T, Math>, which picks the kernel for this GPU\n"
      "                      and problem and says which and why (the 'kernel' line):\n"
      "                        accurate  (default) fp32-accurate: the fastest kernel whose tests hold the error\n"
      "                                  vs float64 to 1e-6: 3xTF32 tensor cores (wgmma on sm_90a, mma.sync on\n"
      "                                  sm_80+), exact FMA on older GPUs and for double\n"
      "                        ieee      exact fp32 FMA on the CUDA cores (fp64 for double)\n"
      "                        tf32      TF32 tensor cores (PyTorch's default conv2d math on these GPUs, ~1e-4)\n"
      "                        tf32x3    3xTF32 tensor cores (what accurate runs on sm_80+)\n"
      "                        bf16, fp16  operands rounded to bf16 / fp16 on chip, fp32 accumulation\n"
      "                      Tensor-core maths (tf32, tf32x3, bf16, fp16) take --dtype float, half or bf16 (the\n"
      "                      wgmma kernel float only) and need sm_80+. Tolerance vs float64 (float data):\n"
      "                      accurate 1e-6, ieee and tf32x3 1e-5, tf32 1e-3, bf16/fp16 1e-2; half/bf16 data 1e-2\n"
      "  --scale S           epilogue scale factor, applied in fp32 as epilogue::scale<float> (2.0)\n"
      "  --no-bias           no bias term\n\n"
      "Data\n"
      "  --seed N            seed of the random inputs and of the verification sample (2026)\n"
      "                      random x ~ N(0,1); W, b ~ U(-1/sqrt(C/G*R*S), +1/sqrt(C/G*R*S)) as torch.nn.Conv2d\n"
      "  --x F.npy, --input F.npy     x as an (N, C, H, W) array (logical NCHW, C order, also with --layout nhwc)\n"
      "  --w F.npy, --weights F.npy   W as (K, C/groups, R, S)\n"
      "  --b F.npy, --bias F.npy      b as (K,)\n"
      "                      float32 files (float64 and float16 are accepted too); they set the sizes, and sizes\n"
      "                      also given as options must agree. Values are converted to --dtype on load\n"
      "                      (bfloat16 has no NumPy dtype: bf16 runs take float32 files).\n"
      "  --y-out F.npy       write y as (N, 1, P, Q) float32 (float64 for --dtype double)\n"
      "  --idx-out F.npy     write the argmin/argmax indices as (N, 1, P, Q) int64\n\n"
      "Run\n"
      "  --iters N           timed runs, median and min reported (50); at least 20, or 0 to skip timing\n"
      "                      (e.g. under compute-sanitizer)\n"
      "  --warmup N          untimed runs before timing (5)\n"
      "  --verify-pixels N   pixels checked against float64 for large problems (4096, always including the\n"
      "                      4 corners of the first and last images); problems below 2e9 MACs (and 2^24\n"
      "                      pixels) check every pixel\n"
      "  -h, --help          this text\n",
      kProg);
}

/// Picks `v` among `names` (aliases separated by '|'); throws usage_error naming the option.
template <class E, std::size_t N>
E pick(const std::string& key, const std::string& v, const char* const (&names)[N], const char* expected) {
  for (std::size_t i = 0; i < N; ++i)
    if (!v.empty() && ("|" + std::string(names[i]) + "|").find("|" + v + "|") != std::string::npos)
      return static_cast<E>(i);
  throw usage_error(key + " must be " + expected + ", got '" + v + "'");
}

options parse_args(int argc, char** argv, bool& help) {
  constexpr long long kMax = std::numeric_limits<long long>::max(), kExtent = 1ll << 40;
  static const char* const layouts[] = {"nchw|NCHW", "nhwc|NHWC|channels_last"};
  static const char* const ops[] = {"min", "max", "sum", "mean", "argmin", "argmax"};
  static const char* const dtypes[] = {"float|fp32|float32", "double|fp64|float64", "half|fp16|float16",
                                       "bf16|bfloat16"};
  static const char* const maths[] = {"ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate"};  // math_kind's order
  options o;
  auto& p = o.p;
  help = false;
  for (ex::arg_reader a(argc, argv); a.next();) {
    const std::string& k = a.key();
    auto size = [&](std::int64_t& field, bool* set = nullptr) {
      field = ex::parse_int(k, a.value(), -kMax, kMax);  // range and sign: convred::validate's job
      if (set) *set = true;
    };
    auto pair = [&](std::int64_t& h, std::int64_t& w) { size(h), w = h; };
    if (a.help()) return help = true, o;
    if (k == "--n") p.N = ex::parse_int(k, a.value(), 1, kExtent), o.set_n = true;  // 0 images is no job
    else if (k == "--c") size(p.C, &o.set_c);
    else if (k == "--h" || k == "--height") size(p.H, &o.set_h);
    else if (k == "--width") size(p.W, &o.set_w);
    else if (k == "--w") {  // the width (an integer) or the weights file (anything else)
      const std::string v = a.value();
      const bool npy_name = v.size() > 4 && v.compare(v.size() - 4, 4, ".npy") == 0;
      if (ex::looks_like_int(v)) p.W = ex::parse_int(k, v, -kMax, kMax), o.set_w = true;
      else if (npy_name || std::ifstream(v).good()) o.w_file = v;
      else
        throw usage_error("--w '" + v + "' is neither an integer width nor an existing weights file "
                          "(use --width N or --weights FILE.npy to be explicit)");
    } else if (k == "--k") size(p.K, &o.set_k);
    else if (k == "--r") size(p.R, &o.set_r);
    else if (k == "--s") size(p.S, &o.set_s);
    else if (k == "--pad") pair(p.pad_h, p.pad_w);
    else if (k == "--pad-h") size(p.pad_h);
    else if (k == "--pad-w") size(p.pad_w);
    else if (k == "--stride") pair(p.stride_h, p.stride_w);
    else if (k == "--stride-h") size(p.stride_h);
    else if (k == "--stride-w") size(p.stride_w);
    else if (k == "--dilation") pair(p.dil_h, p.dil_w);
    else if (k == "--dilation-h") size(p.dil_h);
    else if (k == "--dilation-w") size(p.dil_w);
    else if (k == "--groups") size(p.groups, &o.set_groups);
    else if (k == "--layout") p.x_layout = pick<convred::layout>(k, a.value(), layouts, "nchw or nhwc");
    else if (k == "--op") o.op = pick<op_kind>(k, a.value(), ops, "min, max, sum, mean, argmin or argmax");
    else if (k == "--dtype") o.dtype = pick<dtype_kind>(k, a.value(), dtypes, "float, double, half or bf16");
    else if (k == "--math") o.math = pick<math_kind>(k, a.value(), maths, "accurate, ieee, tf32, tf32x3, bf16 or fp16");
    else if (k == "--scale") o.scale = ex::parse_real(k, a.value());
    else if (k == "--no-bias") a.flag(), o.bias = false;
    else if (k == "--iters") o.iters = static_cast<int>(ex::parse_int(k, a.value(), 0, 1000000));
    else if (k == "--warmup") o.warmup = static_cast<int>(ex::parse_int(k, a.value(), 0, 1000000));
    else if (k == "--seed") o.seed = ex::parse_seed(k, a.value());
    else if (k == "--verify-pixels") o.verify_pixels = ex::parse_int(k, a.value(), 1, kMax);
    else if (k == "--x" || k == "--input") o.x_file = a.value();
    else if (k == "--weights") o.w_file = a.value();
    else if (k == "--b" || k == "--bias") o.b_file = a.value();
    else if (k == "--y-out") o.y_out = a.value();
    else if (k == "--idx-out") o.idx_out = a.value();
    else a.unknown();
  }
  if (o.iters != 0 && o.iters < 20)
    throw usage_error("--iters must be at least 20 for a meaningful median (or 0 to skip timing), got " +
                      std::to_string(o.iters));
  if (!o.idx_out.empty() && !is_index_op(o.op))
    throw usage_error("--idx-out needs --op argmin or argmax (op " + std::string(op_name(o.op)) + " has no index)");
  if (!o.bias && !o.b_file.empty()) throw usage_error("--no-bias and --b/--bias FILE contradict each other");
  // The planner takes every math on float, half and bf16 data; double runs accurate or ieee (exact fp64).
  if (o.dtype == dtype_kind::f64 && o.math != math_kind::accurate && o.math != math_kind::ieee)
    throw usage_error(std::string("--math ") + ex::math_label(o.math) +
                      " is a tensor-core math and takes --dtype float, half or bf16; --dtype double runs --math "
                      "accurate or ieee (exact fp64)");
  return o;
}

/// Checks a whole input file (floating dtype, rank, size matching its header) and returns its header.
npy::header check_input(const std::string& path, const char* what, std::size_t rank, const char* dims) {
  const npy::header h = npy::check_file(path);
  if (!npy::is_floating(h.type))
    throw usage_error(path + ": " + what + " must hold floating data (float32), but the file holds " +
                      npy::name(h.type));
  if (h.shape.size() != rank)
    throw usage_error(path + ": " + what + " must be " + std::to_string(rank) + "-D " + dims + ", got shape " +
                      npy::shape_string(h.shape));
  return h;
}

/// Sets a size from a file, or throws if an option gave a different value.
void take_size(std::int64_t& field, bool set_by_option, std::int64_t from_file, const char* option,
               const std::string& path, const npy::header& h, const char* dim) {
  if (set_by_option && field != from_file)
    throw usage_error(std::string(option) + " " + std::to_string(field) + " disagrees with " + path + " of shape " +
                      npy::shape_string(h.shape) + " (" + dim + " = " + std::to_string(from_file) + ")");
  field = from_file;
}

/// Everything checkable without a GPU: the input files (whole, not only their headers) and the sizes
/// they set, the output folders, and the problem. Throws usage_error or npy::error.
void check_on_host(options& o) {
  auto& p = o.p;
  if (!o.x_file.empty()) {
    const npy::header h = check_input(o.x_file, "x", 4, "(N, C, H, W)");
    take_size(p.N, o.set_n, h.shape[0], "--n", o.x_file, h, "N");
    take_size(p.C, o.set_c, h.shape[1], "--c", o.x_file, h, "C");
    take_size(p.H, o.set_h, h.shape[2], "--h", o.x_file, h, "H");
    take_size(p.W, o.set_w, h.shape[3], "--w", o.x_file, h, "W");
  }
  if (!o.w_file.empty()) {
    const npy::header h = check_input(o.w_file, "W", 4, "(K, C/groups, R, S)");
    take_size(p.K, o.set_k, h.shape[0], "--k", o.w_file, h, "K");
    take_size(p.R, o.set_r, h.shape[2], "--r", o.w_file, h, "R");
    take_size(p.S, o.set_s, h.shape[3], "--s", o.w_file, h, "S");
    const std::int64_t cg = h.shape[1];
    const std::string w_shape = o.w_file + ": W of shape " + npy::shape_string(h.shape) + " has C/groups = " +
                                std::to_string(cg);
    if (cg < 1) throw usage_error(w_shape);
    if (o.x_file.empty() && !o.set_c) p.C = cg * p.groups;
    else if (o.set_groups && p.C != cg * p.groups)
      throw usage_error(w_shape + ", but C = " + std::to_string(p.C) + " with --groups " + std::to_string(p.groups) +
                        " needs C/groups = " + (p.groups > 0 ? std::to_string(p.C / p.groups) : std::string("?")));
    else if (!o.set_groups && p.C % cg != 0)
      throw usage_error(w_shape + ", which does not divide C = " + std::to_string(p.C));
    else if (!o.set_groups) p.groups = p.C / cg;
  }
  if (!o.b_file.empty()) {
    const npy::header h = check_input(o.b_file, "b", 1, "(K,)");
    if (h.shape[0] != p.K)
      throw usage_error(o.b_file + ": b must have shape (" + std::to_string(p.K) + ",) to match K = " +
                        std::to_string(p.K) + ", got " + npy::shape_string(h.shape));
  }
  if (!o.y_out.empty()) ex::require_writable_path("--y-out", o.y_out);
  if (!o.idx_out.empty()) ex::require_writable_path("--idx-out", o.idx_out);
  if (p.N < 1) throw usage_error("the batch must hold at least one image (N >= 1)");
  if (const convred::status st = convred::validate(p, dtype_bytes(o.dtype)); st != convred::status::success)
    throw usage_error(std::string("invalid problem: ") + convred::to_string(st));
}

std::string problem_string(const convred::conv2d_problem& p, const char* dtype) {
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
  std::printf("%s: convred fused conv2d -> scale -> %s over output channels\n", kProg, op_name(o.op));
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
    std::fprintf(stderr, "%s: the planner found no kernel for this run: %s\n", kProg, convred::to_string(plan.state()));
    return plan.state() == convred::status::no_device ? 2 : ex::finish(false);
  }
  thrust::device_vector<T> dx(in.x.begin(), in.x.end()), dw(in.w.begin(), in.w.end()), db(in.b.begin(), in.b.end());
  thrust::device_vector<T> dy(static_cast<std::size_t>(ny));
  thrust::device_vector<std::int64_t> didx(has_index ? static_cast<std::size_t>(ny) : 0);
  CHECK_CUDA(cudaDeviceSynchronize());  // thrust works on the legacy default stream; ours is non-blocking
  const T* px = thrust::raw_pointer_cast(dx.data());
  const T* pw = thrust::raw_pointer_cast(dw.data());
  const T* pb = o.bias ? thrust::raw_pointer_cast(db.data()) : nullptr;
  T* py = thrust::raw_pointer_cast(dy.data());
  std::int64_t* pidx = has_index ? thrust::raw_pointer_cast(didx.data()) : nullptr;
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
    std::fprintf(stderr, "%s: conv2d_reduce_plan::prepare failed: %s\n", kProg, convred::to_string(st));
    return st == convred::status::no_device ? 2 : ex::finish(false);
  }
  auto launch = [&]() {
    st = plan.run(px, pb, py, pidx, Op{}, epi, stream);
    if (st != convred::status::success)
      std::fprintf(stderr, "%s: conv2d_reduce_plan::run (%s kernel) failed: %s\n", kProg,
                   convred::device::to_string(plan.kernel()), convred::to_string(st));
    return st == convred::status::success;
  };
  // The verified run: outputs poisoned first (all-ones bytes: NaN for every float type, -1 for int64).
  CHECK_CUDA(cudaMemsetAsync(py, 0xFF, static_cast<std::size_t>(ny) * sizeof(T), stream));
  if (has_index) CHECK_CUDA(cudaMemsetAsync(pidx, 0xFF, static_cast<std::size_t>(ny) * sizeof(std::int64_t), stream));
  if (!launch()) {
    if (st == convred::status::no_device)
      std::fprintf(stderr, "%s: this build has no kernel for %s (sm_%d%d); rebuild for its architecture\n", kProg,
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

/// The plan's math tag for --math. Only the combinations the planner takes are instantiated: double runs
/// accurate or ieee (parse_args refuses the tensor-core maths with --dtype double before any GPU work).
template <class T, class Op>
int dispatch_math(const options& o) {
  namespace math = convred::math;
  switch (o.math) {
    case math_kind::accurate: return run<T, Op, math::accurate>(o);
    case math_kind::ieee: return run<T, Op, math::ieee>(o);
    case math_kind::tf32:
    case math_kind::tf32x3:
    case math_kind::bf16:
    case math_kind::fp16:
      if constexpr (!std::is_same_v<T, double>) {
        switch (o.math) {
          case math_kind::tf32: return run<T, Op, math::tf32>(o);
          case math_kind::tf32x3: return run<T, Op, math::tf32x3>(o);
          case math_kind::bf16: return run<T, Op, math::bf16>(o);
          default: return run<T, Op, math::fp16>(o);
        }
      }
      break;
  }
  throw std::logic_error(std::string("--math ") + ex::math_label(o.math) + " with --dtype " + ex::type_label<T>() +
                         " is not instantiated");
}

template <class T>
int dispatch_op(const options& o) {
  switch (o.op) {
    case op_kind::min: return dispatch_math<T, convred::op::min>(o);
    case op_kind::max: return dispatch_math<T, convred::op::max>(o);
    case op_kind::sum: return dispatch_math<T, convred::op::sum>(o);
    case op_kind::mean: return dispatch_math<T, convred::op::mean>(o);
    case op_kind::argmin: return dispatch_math<T, convred::op::argmin>(o);
    case op_kind::argmax: return dispatch_math<T, convred::op::argmax>(o);
  }
  return 1;
}

int dispatch(const options& o) {
  switch (o.dtype) {
    case dtype_kind::f32: return dispatch_op<float>(o);
    case dtype_kind::f64: return dispatch_op<double>(o);
    case dtype_kind::f16: return dispatch_op<__half>(o);
    case dtype_kind::bf16: return dispatch_op<__nv_bfloat16>(o);
  }
  return 1;
}

int fail(const std::string& msg, bool hint) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", kProg, msg.c_str());
  if (hint) std::fprintf(stderr, "(run %s --help for the options)\n", kProg);
  return ex::finish(false);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {  // everything that needs no GPU first: options, files, output folders, the problem
    bool help = false;
    o = parse_args(argc, argv, help);
    if (help) return print_help(), 0;
    check_on_host(o);
  } catch (const usage_error& e) {
    return fail(e.what(), true);
  } catch (const std::exception& e) {  // npy::error
    return fail(e.what(), false);
  }
  int count = 0;
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 8) {
    std::fprintf(stderr, "%s: no CUDA device found (%s); this example needs an NVIDIA GPU (sm_80+)\n", kProg,
                 e != cudaSuccess ? cudaGetErrorString(e) : count == 0 ? "the device count is 0" : prop.name);
    return 2;
  }
  try {
    return dispatch(o);
  } catch (const std::exception& ex) {  // CUDA errors, thrust allocation failures, file errors
    return fail(ex.what(), false);
  }
}
