/// @file examples/01_conv_scale_min/main.cu
/// @brief convred example 01: the seed job, `y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)`,
/// as one fused kernel (convred::device::conv2d_reduce), checked against the float64 reference and timed.
///
/// By default it runs the seed case: x (64, 64, 256, 256) fp32 NCHW ~ N(0, 1); W (128, 64, 3, 3) and
/// b (128) uniform in +-1/sqrt(C*R*S), as torch.nn.Conv2d initialises them; scale 2.0; min over the 128
/// output channels; y (64, 1, 254, 254). Every problem parameter, the op, the dtype and the layout are
/// options (`--help`); x, W, b can come from .npy files and y / the indices can be written to .npy.
///
/// Output: the problem, the time (median and min over --iters runs, CUDA events, after warm-up),
/// TFLOP/s, GB/s of least traffic, the error against float64, and as the last line exactly `Passed` or
/// `Failed`. Exit code: 0 Passed; 1 Failed or any error; 2 no usable CUDA device.
///
/// Build (CMake does this): nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --extended-lambda
///   -I include examples/01_conv_scale_min/main.cu -o 01_conv_scale_min

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>
#include <convred/functional.cuh>
#include <convred/numeric.cuh>
#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>
#include <convred/status.cuh>

#include "../common/cuda_check.hpp"
#include "../common/npy.hpp"

namespace {

constexpr const char* kProg = "01_conv_scale_min";

// ------------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------------

/// A bad command line or inconsistent input files (reported with a pointer to --help).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};


// ------------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------------

enum class op_kind { min, max, sum, mean, argmin, argmax };
enum class dtype_kind { f32, f64, f16, bf16 };

const char* op_name(op_kind o) {
  switch (o) {
    case op_kind::min: return "min";
    case op_kind::max: return "max";
    case op_kind::sum: return "sum";
    case op_kind::mean: return "mean";
    case op_kind::argmin: return "argmin";
    case op_kind::argmax: return "argmax";
  }
  return "?";
}

const char* dtype_name(dtype_kind d) {
  switch (d) {
    case dtype_kind::f32: return "float";
    case dtype_kind::f64: return "double";
    case dtype_kind::f16: return "half";
    case dtype_kind::bf16: return "bf16";
  }
  return "?";
}

std::int64_t dtype_bytes(dtype_kind d) { return d == dtype_kind::f64 ? 8 : d == dtype_kind::f32 ? 4 : 2; }

bool is_index_op(op_kind o) { return o == op_kind::argmin || o == op_kind::argmax; }

/// --math: exact (default) or a tensor-core precision through the packed-filter path.
enum class math_kind { ieee, tf32, tf32x3, bf16, fp16 };
const char* math_label(math_kind m) {
  switch (m) {
    case math_kind::ieee: return "ieee";
    case math_kind::tf32: return "tf32";
    case math_kind::tf32x3: return "tf32x3";
    case math_kind::bf16: return "bf16";
    case math_kind::fp16: return "fp16";
  }
  return "?";
}

struct options {
  convred::conv2d_problem p;  ///< the problem (seed case by default, see make_default)
  // Which sizes were given on the command line: input files must agree with them.
  bool set_n = false, set_c = false, set_h = false, set_w = false, set_k = false, set_r = false, set_s = false,
       set_groups = false;
  op_kind op = op_kind::min;
  dtype_kind dtype = dtype_kind::f32;
  math_kind math = math_kind::ieee;
  double scale = 2.0;
  bool bias = true;
  int iters = 50;
  int warmup = 5;
  std::uint64_t seed = 2026;
  std::int64_t verify_pixels = 4096;
  std::string x_file, w_file, b_file, y_out, idx_out;

  options() {
    p.N = 64, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3;
    p.pad_h = p.pad_w = 0, p.stride_h = p.stride_w = 1, p.dil_h = p.dil_w = 1, p.groups = 1;
    p.x_layout = convred::layout::nchw;
  }
};

void print_help() {
  std::printf(
      "Usage: %s [options]\n"
      "\n"
      "Computes y[n,0,p,q] = OP over k of scale * (conv2d(x, W)[n,k,p,q] + b[k]) in one fused convred kernel\n"
      "(by default the seed case y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)), checks it against\n"
      "a float64 reference, times it, and prints Passed or Failed as the last line.\n"
      "Exit code: 0 Passed; 1 Failed or an error; 2 no usable CUDA device.\n"
      "\n"
      "Problem (defaults: the seed case; conv2d is PyTorch's, a cross-correlation)\n"
      "  --n N               batch (64)\n"
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
      "  --dtype T           element type of x, W, b, y: float (default), double, half, bf16.\n"
      "                      Math: exact fp32 FMA (fp64 for double); half/bf16 are converted to fp32 on load.\n"
      "                      (PyTorch's default conv2d on GPUs uses TF32, which is less accurate.)\n"
      "  --math M            ieee (default: exact fp32 FMA, conv2d_reduce), or a tensor-core precision run\n"
      "                      through the packed-filter path (pack_filter once, then conv2d_reduce_packed;\n"
      "                      wgmma on sm_90a, else the mma.sync fallback): tf32, tf32x3, bf16, fp16.\n"
      "                      Tolerance vs float64: tf32 1e-3, tf32x3 1e-5, bf16/fp16 1e-2. --dtype float only\n"
      "  --scale S           epilogue scale factor, applied in fp32 as epilogue::scale<float> (2.0)\n"
      "  --no-bias           no bias term\n"
      "\n"
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
      "  --idx-out F.npy     write the argmin/argmax indices as (N, 1, P, Q) int64\n"
      "\n"
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

std::int64_t parse_int(const std::string& key, const std::string& v) {
  if (v.empty()) throw usage_error(key + " needs an integer value");
  char* end = nullptr;
  errno = 0;
  const long long r = std::strtoll(v.c_str(), &end, 10);
  if (errno == ERANGE || end == v.c_str() || *end != '\0')
    throw usage_error(key + ": '" + v + "' is not an integer in range");
  return r;
}

bool looks_like_int(const std::string& v) {
  if (v.empty()) return false;
  std::size_t i = (v[0] == '-' || v[0] == '+') ? 1 : 0;
  if (i == v.size()) return false;
  for (; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

int parse_count(const std::string& key, const std::string& v) {
  const std::int64_t r = parse_int(key, v);
  if (r < 0 || r > 1000000) throw usage_error(key + " must be between 0 and 1000000, got " + v);
  return static_cast<int>(r);
}

double parse_real(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double r = std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !std::isfinite(r))
    throw usage_error(key + ": '" + v + "' is not a finite number");
  return r;
}

options parse_args(int argc, char** argv, bool& help) {
  options o;
  help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      help = true;
      return o;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) throw usage_error("unexpected argument '" + a + "'");
    std::string key = a, val;
    bool inline_val = false;
    if (const auto eq = a.find('='); eq != std::string::npos) {
      key = a.substr(0, eq);
      val = a.substr(eq + 1);
      inline_val = true;
    }
    auto value = [&]() -> std::string {
      if (inline_val) return val;
      if (i + 1 >= argc) throw usage_error(key + " needs a value");
      return argv[++i];
    };
    auto flag = [&]() {
      if (inline_val) throw usage_error(key + " takes no value");
    };
    auto& p = o.p;
    if (key == "--n") p.N = parse_int(key, value()), o.set_n = true;
    else if (key == "--c") p.C = parse_int(key, value()), o.set_c = true;
    else if (key == "--h" || key == "--height") p.H = parse_int(key, value()), o.set_h = true;
    else if (key == "--width") p.W = parse_int(key, value()), o.set_w = true;
    else if (key == "--w") {
      // --w is both the input width (an integer) and the weights file (anything else); --width and
      // --weights are the unambiguous spellings.
      const std::string v = value();
      const bool npy_name = v.size() > 4 && v.compare(v.size() - 4, 4, ".npy") == 0;
      if (looks_like_int(v))
        p.W = parse_int(key, v), o.set_w = true;
      else if (npy_name || std::ifstream(v).good())
        o.w_file = v;
      else
        throw usage_error("--w '" + v + "' is neither an integer width nor an existing weights file "
                          "(use --width N or --weights FILE.npy to be explicit)");
    } else if (key == "--k") p.K = parse_int(key, value()), o.set_k = true;
    else if (key == "--r") p.R = parse_int(key, value()), o.set_r = true;
    else if (key == "--s") p.S = parse_int(key, value()), o.set_s = true;
    else if (key == "--pad") p.pad_h = p.pad_w = parse_int(key, value());
    else if (key == "--pad-h") p.pad_h = parse_int(key, value());
    else if (key == "--pad-w") p.pad_w = parse_int(key, value());
    else if (key == "--stride") p.stride_h = p.stride_w = parse_int(key, value());
    else if (key == "--stride-h") p.stride_h = parse_int(key, value());
    else if (key == "--stride-w") p.stride_w = parse_int(key, value());
    else if (key == "--dilation") p.dil_h = p.dil_w = parse_int(key, value());
    else if (key == "--dilation-h") p.dil_h = parse_int(key, value());
    else if (key == "--dilation-w") p.dil_w = parse_int(key, value());
    else if (key == "--groups") p.groups = parse_int(key, value()), o.set_groups = true;
    else if (key == "--layout") {
      const std::string v = value();
      if (v == "nchw" || v == "NCHW") p.x_layout = convred::layout::nchw;
      else if (v == "nhwc" || v == "NHWC" || v == "channels_last") p.x_layout = convred::layout::nhwc;
      else throw usage_error("--layout must be nchw or nhwc, got '" + v + "'");
    } else if (key == "--op") {
      const std::string v = value();
      if (v == "min") o.op = op_kind::min;
      else if (v == "max") o.op = op_kind::max;
      else if (v == "sum") o.op = op_kind::sum;
      else if (v == "mean") o.op = op_kind::mean;
      else if (v == "argmin") o.op = op_kind::argmin;
      else if (v == "argmax") o.op = op_kind::argmax;
      else throw usage_error("--op must be min, max, sum, mean, argmin or argmax, got '" + v + "'");
    } else if (key == "--dtype") {
      const std::string v = value();
      if (v == "float" || v == "fp32" || v == "float32") o.dtype = dtype_kind::f32;
      else if (v == "double" || v == "fp64" || v == "float64") o.dtype = dtype_kind::f64;
      else if (v == "half" || v == "fp16" || v == "float16") o.dtype = dtype_kind::f16;
      else if (v == "bf16" || v == "bfloat16") o.dtype = dtype_kind::bf16;
      else throw usage_error("--dtype must be float, double, half or bf16, got '" + v + "'");
    } else if (key == "--math") {
      const std::string v = value();
      if (v == "ieee") o.math = math_kind::ieee;
      else if (v == "tf32") o.math = math_kind::tf32;
      else if (v == "tf32x3") o.math = math_kind::tf32x3;
      else if (v == "bf16") o.math = math_kind::bf16;
      else if (v == "fp16") o.math = math_kind::fp16;
      else throw usage_error("--math must be ieee, tf32, tf32x3, bf16 or fp16, got '" + v + "'");
    } else if (key == "--scale") o.scale = parse_real(key, value());
    else if (key == "--no-bias") flag(), o.bias = false;
    else if (key == "--iters") o.iters = parse_count(key, value());
    else if (key == "--warmup") o.warmup = parse_count(key, value());
    else if (key == "--seed") {
      const std::string v = value();
      if (!looks_like_int(v) || v[0] == '-')
        throw usage_error("--seed must be a non-negative integer, got '" + v + "'");
      errno = 0;
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
      if (errno == ERANGE) throw usage_error("--seed out of range: '" + v + "'");
    } else if (key == "--verify-pixels") o.verify_pixels = parse_int(key, value());
    else if (key == "--x" || key == "--input") o.x_file = value();
    else if (key == "--weights") o.w_file = value();
    else if (key == "--b" || key == "--bias") o.b_file = value();
    else if (key == "--y-out") o.y_out = value();
    else if (key == "--idx-out") o.idx_out = value();
    else throw usage_error("unknown option '" + key + "'");
  }
  if (o.iters != 0 && o.iters < 20)
    throw usage_error("--iters must be at least 20 for a meaningful median (or 0 to skip timing), got " +
                      std::to_string(o.iters));
  if (o.verify_pixels < 1) throw usage_error("--verify-pixels must be at least 1");
  if (!o.idx_out.empty() && !is_index_op(o.op))
    throw usage_error("--idx-out needs --op argmin or argmax (op " + std::string(op_name(o.op)) + " has no index)");
  if (!o.bias && !o.b_file.empty()) throw usage_error("--no-bias and --b/--bias FILE contradict each other");
  return o;
}

/// Throws unless a .npy header holds floating data of the expected rank.
void require_float_tensor(const npy::header& h, const std::string& path, const char* what, std::size_t rank,
                          const char* dims) {
  if (!npy::is_floating(h.type))
    throw usage_error(path + ": " + what + " must hold floating data (float32), but the file holds " +
                      npy::name(h.type));
  if (h.shape.size() != rank)
    throw usage_error(path + ": " + what + " must be " + std::to_string(rank) + "-D " + dims + ", got shape " +
                      npy::shape_string(h.shape));
}

/// Sets a size from a file, or throws if an option gave a different value.
void take_size(std::int64_t& field, bool set_by_option, std::int64_t from_file, const char* option,
               const std::string& path, const npy::header& h, const char* dim) {
  if (set_by_option && field != from_file)
    throw usage_error(std::string(option) + " " + std::to_string(field) + " disagrees with " + path + " of shape " +
                      npy::shape_string(h.shape) + " (" + dim + " = " + std::to_string(from_file) + ")");
  field = from_file;
}

/// Reads the headers of the input files (cheap) and takes the problem sizes from them, checking that the
/// files agree with each other and with the options.
void resolve_problem(options& o) {
  auto& p = o.p;
  if (!o.x_file.empty()) {
    const npy::header h = npy::read_header(o.x_file);
    require_float_tensor(h, o.x_file, "x", 4, "(N, C, H, W)");
    take_size(p.N, o.set_n, h.shape[0], "--n", o.x_file, h, "N");
    take_size(p.C, o.set_c, h.shape[1], "--c", o.x_file, h, "C");
    take_size(p.H, o.set_h, h.shape[2], "--h", o.x_file, h, "H");
    take_size(p.W, o.set_w, h.shape[3], "--w", o.x_file, h, "W");
  }
  if (!o.w_file.empty()) {
    const npy::header h = npy::read_header(o.w_file);
    require_float_tensor(h, o.w_file, "W", 4, "(K, C/groups, R, S)");
    take_size(p.K, o.set_k, h.shape[0], "--k", o.w_file, h, "K");
    take_size(p.R, o.set_r, h.shape[2], "--r", o.w_file, h, "R");
    take_size(p.S, o.set_s, h.shape[3], "--s", o.w_file, h, "S");
    const std::int64_t cg = h.shape[1];
    if (cg < 1) throw usage_error(o.w_file + ": W has C/groups = 0 (shape " + npy::shape_string(h.shape) + ")");
    const bool c_known = !o.x_file.empty() || o.set_c;
    if (!c_known) {
      p.C = cg * p.groups;
    } else if (o.set_groups) {
      if (p.C != cg * p.groups)
        throw usage_error(o.w_file + ": W of shape " + npy::shape_string(h.shape) + " has C/groups = " +
                          std::to_string(cg) + ", but C = " + std::to_string(p.C) + " with --groups " +
                          std::to_string(p.groups) + " needs C/groups = " +
                          (p.groups > 0 ? std::to_string(p.C / p.groups) : std::string("?")));
    } else {
      if (p.C % cg != 0)
        throw usage_error(o.w_file + ": W of shape " + npy::shape_string(h.shape) + " has C/groups = " +
                          std::to_string(cg) + ", which does not divide C = " + std::to_string(p.C));
      p.groups = p.C / cg;
    }
  }
  if (!o.b_file.empty()) {
    const npy::header h = npy::read_header(o.b_file);
    require_float_tensor(h, o.b_file, "b", 1, "(K,)");
    if (h.shape[0] != p.K)
      throw usage_error(o.b_file + ": b must have shape (" + std::to_string(p.K) + ",) to match K = " +
                        std::to_string(p.K) + ", got " + npy::shape_string(h.shape));
  }
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

// ------------------------------------------------------------------------------------------------------
// Host helpers: threads, random data, conversions
// ------------------------------------------------------------------------------------------------------

/// Calls f(i) for i in [0, count) on all host cores (dynamic schedule). f must not throw.
template <class F>
void parallel_for(std::size_t count, F&& f) {
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t nt = std::min<std::size_t>(std::min<std::size_t>(hw, 64), count);
  if (nt <= 1) {
    for (std::size_t i = 0; i < count; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(nt);
  for (std::size_t t = 0; t < nt; ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) f(i);
    });
  for (auto& th : pool) th.join();
}

/// double -> element type T (round to nearest; half and bf16 via float, which is exact for random data).
template <class T>
T to_elem(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return convred::from_compute<T>(static_cast<float>(v));
  }
}

/// Fills v with i.i.d. N(0,1) (normal) or U(-bound, bound) values. Deterministic for (seed, tensor_id)
/// whatever the number of threads: each chunk of 2^16 elements has its own seeded engine.
template <class T>
void fill_random(std::vector<T>& v, bool normal, double bound, std::uint64_t seed, std::uint32_t tensor_id) {
  constexpr std::size_t chunk = std::size_t(1) << 16;
  const std::size_t chunks = (v.size() + chunk - 1) / chunk;
  parallel_for(chunks, [&](std::size_t c) {
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), tensor_id,
                      static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(std::uint64_t(c) >> 32)};
    std::mt19937_64 eng(seq);
    std::normal_distribution<double> nd(0.0, 1.0);
    std::uniform_real_distribution<double> ud(-bound, bound);
    const std::size_t end = std::min(v.size(), (c + 1) * chunk);
    for (std::size_t i = c * chunk; i < end; ++i) v[i] = to_elem<T>(normal ? nd(eng) : ud(eng));
  });
}

/// Loads a float .npy file as element type T (float64 files for double runs keep full precision).
template <class T>
std::vector<T> load_tensor(const std::string& path) {
  using L = std::conditional_t<std::is_same_v<T, double>, double, float>;
  npy::array<L> a = npy::load<L>(path);
  if constexpr (std::is_same_v<T, L>) {
    return std::move(a.data);
  } else {
    std::vector<T> out(a.data.size());
    parallel_for((out.size() + 65535) / 65536, [&](std::size_t c) {
      const std::size_t end = std::min(out.size(), (c + 1) * 65536);
      for (std::size_t i = c * 65536; i < end; ++i) out[i] = to_elem<T>(a.data[i]);
    });
    return out;
  }
}

/// Reorders a logical (N, C, H, W) C-order tensor into NHWC storage.
template <class T>
std::vector<T> nchw_to_nhwc(const std::vector<T>& src, std::int64_t N, std::int64_t C, std::int64_t H,
                            std::int64_t W) {
  std::vector<T> dst(src.size());
  parallel_for(static_cast<std::size_t>(N * H), [&](std::size_t nh) {
    const std::int64_t n = static_cast<std::int64_t>(nh) / H, h = static_cast<std::int64_t>(nh) % H;
    for (std::int64_t w = 0; w < W; ++w)
      for (std::int64_t c = 0; c < C; ++c) dst[((n * H + h) * W + w) * C + c] = src[((n * C + c) * H + h) * W + w];
  });
  return dst;
}

template <class T>
bool all_finite(const std::vector<T>& v) {
  for (const T& e : v)
    if (!std::isfinite(convred::to_double(e))) return false;
  return true;
}

/// Sum over the taps of |x * w|, plus |b[k]|: the magnitude that bounds every partial sum the kernel forms
/// for conv output (n, k, op, oq). Mirrors convred::reference::conv2d_at with absolute values.
template <class T>
double abs_conv_at(const convred::conv2d_problem& p, const T* x, const T* w, const T* bias, std::int64_t n,
                   std::int64_t k, std::int64_t op, std::int64_t oq) {
  const std::int64_t cg = p.C_per_group(), g = k / p.K_per_group();
  double acc = 0.0;
  for (std::int64_t c = 0; c < cg; ++c)
    for (std::int64_t r = 0; r < p.R; ++r) {
      const std::int64_t h = op * p.stride_h - p.pad_h + r * p.dil_h;
      if (h < 0 || h >= p.H) continue;
      for (std::int64_t s = 0; s < p.S; ++s) {
        const std::int64_t ww = oq * p.stride_w - p.pad_w + s * p.dil_w;
        if (ww < 0 || ww >= p.W) continue;
        acc += std::fabs(convred::to_double(x[convred::reference::x_offset(p, n, g * cg + c, h, ww)]) *
                         convred::to_double(w[((k * cg + c) * p.R + r) * p.S + s]));
      }
    }
  return bias ? acc + std::fabs(convred::to_double(bias[k])) : acc;
}

/// The output pixels to verify (linear indices (n*P + p)*Q + q, sorted). Every pixel when the problem is
/// small (below 2e9 MACs and 2^24 pixels) or has at most `sample` pixels; otherwise the 4 corners of the
/// first and last images plus uniformly random pixels, `sample` in all.
std::vector<std::int64_t> choose_pixels(const convred::conv2d_problem& p, std::int64_t sample, std::uint64_t seed,
                                        bool& all) {
  const std::int64_t M = p.gemm_m(), P = p.P(), Q = p.Q();
  const double macs = static_cast<double>(M) * static_cast<double>(p.K) * static_cast<double>(p.gemm_k());
  all = (macs < 2e9 && M <= (std::int64_t(1) << 24)) || M <= sample;  // the cap bounds the host memory used
  std::vector<std::int64_t> px;
  if (all) {
    px.resize(static_cast<std::size_t>(M));
    for (std::int64_t i = 0; i < M; ++i) px[static_cast<std::size_t>(i)] = i;
    return px;
  }
  std::unordered_set<std::int64_t> set;
  for (std::int64_t n : {std::int64_t(0), p.N - 1})
    for (std::int64_t i : {std::int64_t(0), P - 1})
      for (std::int64_t j : {std::int64_t(0), Q - 1}) set.insert((n * P + i) * Q + j);
  std::mt19937_64 eng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<std::int64_t> pick(0, M - 1);
  while (static_cast<std::int64_t>(set.size()) < sample) set.insert(pick(eng));
  px.assign(set.begin(), set.end());
  std::sort(px.begin(), px.end());
  return px;
}

// ------------------------------------------------------------------------------------------------------
// Tolerances (DESIGN.md, math::ieee)
// ------------------------------------------------------------------------------------------------------
//
// Each checked pixel must satisfy   |y - ref| <= tol * |ref| + kFloor * u * mag,
// and the checked pixels together   ||y - ref|| <= tol * ||ref|| + kFloor * u * ||mag||,
// where ref is the float64 result, tol the relative tolerance of the precision (DESIGN.md: 1e-5 for
// exact fp32, 1e-2 for 16-bit inputs), u the unit roundoff of the accumulation (2^-24 for fp32, 2^-53 for
// fp64) and mag the magnitude of the terms behind the value: scale * (|b_k| + sum |x * w|) of a channel,
// the largest over k for min/max/argmin/argmax (the value is one channel's), the sum over k for sum (the
// mean of them for mean).
//
// Why the second term: a relative bound alone is meaningless when ref is near zero through cancellation
// (e.g. sum over channels, or a max close to 0): the fp32 result then still carries the absolute rounding
// error of its sum, however small ref is. For a (recursive or blocked) fp32 sum of n random-signed terms
// the rounding errors behave like a random walk, of typical size about u * mag / sqrt(2) (the
// probabilistic analysis of Higham & Mary, 2019); the deterministic worst case is n * u * mag.
// kFloor = 8 leaves a margin of ~10 standard deviations over the typical size, and stays far below the
// error of a real bug: a wrong or missing tap, channel or bias is off by about one term (~mag / sqrt(n)
// for these random data), orders of magnitude above 8 * u * mag.
// For the seed case |ref| ~ 1.7 and mag ~ 12, so the floor (~6e-6) sits below tol * |ref| (~2e-5).
//
// 16-bit runs: the inputs are exact in fp32 and the sums are fp32, so only y's final rounding to half
// (2^-11 relative) or bf16 (2^-8) matters, within tol = 1e-2. double runs use tol = 1e-12 (rather than
// the fp32 1e-5): a double path that silently computed in fp32 would pass 1e-5 but fails 1e-12.
constexpr double kFloor = 8.0;

template <class T>
double tolerance(math_kind m = math_kind::ieee) {
  if (m == math_kind::tf32) return 1e-3;  // DESIGN.md's bounds for the tensor-core precisions
  if (m == math_kind::bf16 || m == math_kind::fp16) return 1e-2;
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 1e-5;  // also tf32x3
  else return 1e-2;
}

template <class T>
double unit_roundoff() {
  return std::is_same_v<T, double> ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

template <class T>
const char* type_label() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, __half>) return "half";
  else return "bf16";
}

template <class Op>
std::string torch_expression() {
  const std::string arg = "(conv2d(x, W, b) * s, dim=1, keepdim=True)";
  if constexpr (std::is_same_v<Op, convred::op::min>) return "torch.min" + arg + ".values";
  else if constexpr (std::is_same_v<Op, convred::op::max>) return "torch.max" + arg + ".values";
  else if constexpr (std::is_same_v<Op, convred::op::sum>) return "torch.sum" + arg;
  else if constexpr (std::is_same_v<Op, convred::op::mean>) return "torch.mean" + arg;
  else if constexpr (std::is_same_v<Op, convred::op::argmin>) return "torch.min" + arg + " (values, indices)";
  else return "torch.max" + arg + " (values, indices)";
}

/// RAII CUDA stream.
struct stream_guard {
  cudaStream_t s = nullptr;
  stream_guard() { CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_guard() {
    if (s) cudaStreamDestroy(s);
  }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
};

/// RAII list of CUDA events.
struct event_list {
  std::vector<cudaEvent_t> ev;
  explicit event_list(std::size_t n) {
    ev.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      cudaEvent_t e;
      CHECK_CUDA(cudaEventCreate(&e));
      ev.push_back(e);
    }
  }
  ~event_list() {
    for (auto e : ev) cudaEventDestroy(e);
  }
  event_list(const event_list&) = delete;
  event_list& operator=(const event_list&) = delete;
};

// ------------------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------------------

template <class T, class Op>
int run(const options& o) {
  using convred::to_double;
  const convred::conv2d_problem& p = o.p;
  constexpr bool has_index = Op::has_index;
  const std::int64_t P = p.P(), Q = p.Q(), ny = p.y_elements();
  const convred::epilogue::scale<float> epi{static_cast<float>(o.scale)};

  std::printf("%s: convred fused conv2d -> scale -> %s over output channels\n", kProg, op_name(o.op));
  std::printf("problem  : %s, scale %g%s\n", problem_string(p, type_label<T>()).c_str(),
              static_cast<double>(epi.s), o.bias ? ", bias" : ", no bias");
  std::printf("computes : y = %s  ->  y (%lld, 1, %lld, %lld)%s\n", torch_expression<Op>().c_str(), (long long)p.N,
              (long long)P, (long long)Q, has_index ? " + int64 indices" : "");
  if (o.math == math_kind::ieee)
    std::printf("math     : ieee (exact %s FMA; %s); PyTorch's default conv2d uses TF32 instead\n",
                std::is_same_v<T, double> ? "fp64" : "fp32",
                std::is_same_v<T, double> || std::is_same_v<T, float> ? "no conversions"
                                                                      : "16-bit inputs converted to fp32 on load");
  else
    std::printf("math     : %s tensor cores, fp32 accumulation (packed filter, conv2d_reduce_packed)\n",
                math_label(o.math));
  std::fflush(stdout);

  // ---- host inputs (logical NCHW, then reordered for NHWC) ----
  const double bound = 1.0 / std::sqrt(static_cast<double>(p.gemm_k()));  // torch.nn.Conv2d's init bound
  std::vector<T> hx, hw, hb;
  if (!o.x_file.empty()) {
    hx = load_tensor<T>(o.x_file);
  } else {
    hx.resize(static_cast<std::size_t>(p.x_elements()));
    fill_random(hx, true, 0.0, o.seed, 1);
  }
  if (p.x_layout == convred::layout::nhwc) hx = nchw_to_nhwc(hx, p.N, p.C, p.H, p.W);
  if (!o.w_file.empty()) {
    hw = load_tensor<T>(o.w_file);
  } else {
    hw.resize(static_cast<std::size_t>(p.w_elements()));
    fill_random(hw, false, bound, o.seed, 2);
  }
  if (o.bias) {
    if (!o.b_file.empty()) {
      hb = load_tensor<T>(o.b_file);
    } else {
      hb.resize(static_cast<std::size_t>(p.K));
      fill_random(hb, false, bound, o.seed, 3);
    }
  }
  const bool inputs_finite = all_finite(hx) && all_finite(hw) && all_finite(hb);
  if (o.x_file.empty() || o.w_file.empty() || (o.bias && o.b_file.empty()))
    std::printf("inputs   : random (seed %llu): x ~ N(0,1); W, b ~ U(+-1/sqrt(%lld)) as torch.nn.Conv2d%s\n",
                (unsigned long long)o.seed, (long long)p.gemm_k(),
                o.x_file.empty() && o.w_file.empty() && o.b_file.empty() ? "" : " (where no file was given)");
  if (!o.x_file.empty() || !o.w_file.empty() || !o.b_file.empty())
    std::printf("files    : x %s, W %s, b %s\n", o.x_file.empty() ? "(random)" : o.x_file.c_str(),
                o.w_file.empty() ? "(random)" : o.w_file.c_str(),
                !o.bias ? "(none)" : o.b_file.empty() ? "(random)" : o.b_file.c_str());
  if (!inputs_finite) std::printf("note     : the inputs contain NaN or inf\n");

  // ---- device buffers ----
  int dev = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device   : %s (sm_%d%d, %d SMs, %.1f GiB)\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  std::fflush(stdout);

  thrust::device_vector<T> dx(hx.begin(), hx.end());
  thrust::device_vector<T> dw(hw.begin(), hw.end());
  thrust::device_vector<T> db(hb.begin(), hb.end());
  thrust::device_vector<T> dy(static_cast<std::size_t>(ny));
  thrust::device_vector<std::int64_t> didx(has_index ? static_cast<std::size_t>(ny) : 0);
  CHECK_CUDA(cudaDeviceSynchronize());  // thrust works on the legacy default stream; ours is non-blocking
  const T* px = thrust::raw_pointer_cast(dx.data());
  const T* pw = thrust::raw_pointer_cast(dw.data());
  const T* pb = o.bias ? thrust::raw_pointer_cast(db.data()) : nullptr;
  T* py = thrust::raw_pointer_cast(dy.data());
  std::int64_t* pidx = has_index ? thrust::raw_pointer_cast(didx.data()) : nullptr;

  stream_guard stream;
  // --math other than ieee: the filter is packed once (its own, separately timed step), then every run is
  // conv2d_reduce_packed (wgmma where the device and the problem allow, the mma.sync fallback otherwise).
  thrust::device_vector<unsigned char> packed;
  auto packed_launch = [&](auto policy) {
    using Pol = decltype(policy);
    return convred::device::conv2d_reduce_packed<Pol>(p, px, pw, thrust::raw_pointer_cast(packed.data()), packed.size(), pb, py, pidx,
                                                      Op{}, epi, stream.s);
  };
  auto pack = [&](auto policy) {
    using Pol = decltype(policy);
    const std::size_t bytes = convred::device::packed_filter_bytes<Pol, T>(p);
    packed.resize(bytes > 0 ? bytes : 16);
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventRecord(e0, stream.s));
    const convred::status st =
        convred::device::pack_filter<Pol>(p, pw, thrust::raw_pointer_cast(packed.data()), packed.size(), stream.s);
    CHECK_CUDA(cudaEventRecord(e1, stream.s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    std::printf("packing  : %s; pack_filter %s, %.3f ms (once per filter, not in the times below)\n",
                bytes > 0 ? "wgmma kernel (sm_90a)" : "not served by the wgmma kernel: mma.sync fallback on W",
                convred::to_string(st), static_cast<double>(t));
    return st;
  };
  using wg_tf32 = convred::default_wgmma_policy<convred::math::tf32>::type;
  using wg_tf32x3 = convred::default_wgmma_policy<convred::math::tf32x3>::type;
  using wg_bf16 = convred::default_wgmma_policy<convred::math::bf16>::type;
  using wg_fp16 = convred::default_wgmma_policy<convred::math::fp16>::type;
  if constexpr (std::is_same_v<T, float>) {
    convred::status st = convred::status::success;
    switch (o.math) {
      case math_kind::ieee: break;
      case math_kind::tf32: st = pack(wg_tf32{}); break;
      case math_kind::tf32x3: st = pack(wg_tf32x3{}); break;
      case math_kind::bf16: st = pack(wg_bf16{}); break;
      case math_kind::fp16: st = pack(wg_fp16{}); break;
    }
    if (st != convred::status::success) {
      std::printf("Failed\n");
      return 1;
    }
  }
  auto launch = [&]() {
    if constexpr (std::is_same_v<T, float>) {
      switch (o.math) {
        case math_kind::ieee: break;
        case math_kind::tf32: return packed_launch(wg_tf32{});
        case math_kind::tf32x3: return packed_launch(wg_tf32x3{});
        case math_kind::bf16: return packed_launch(wg_bf16{});
        case math_kind::fp16: return packed_launch(wg_fp16{});
      }
    }
    return convred::device::conv2d_reduce(p, px, pw, pb, py, pidx, Op{}, epi, stream.s);
  };
  auto launch_checked = [&](const char* which) {
    const convred::status st = launch();
    if (st != convred::status::success) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s: convred::device::conv2d_reduce failed (%s run): %s\n", kProg, which,
                   convred::to_string(st));
      return st;
    }
    return st;
  };

  // ---- the verified run: outputs poisoned first (all-ones bytes: NaN for every float type, -1 for int64) ----
  CHECK_CUDA(cudaMemsetAsync(py, 0xFF, static_cast<std::size_t>(ny) * sizeof(T), stream.s));
  if (has_index) CHECK_CUDA(cudaMemsetAsync(pidx, 0xFF, static_cast<std::size_t>(ny) * sizeof(std::int64_t), stream.s));
  if (const convred::status st = launch_checked("verified"); st != convred::status::success) {
    if (st == convred::status::no_device) {
      std::fprintf(stderr, "%s: this build has no kernel for %s (sm_%d%d); rebuild for its architecture\n", kProg,
                   prop.name, prop.major, prop.minor);
      return 2;
    }
    std::printf("Failed\n");
    return 1;
  }
  CHECK_CUDA(cudaStreamSynchronize(stream.s));
  CHECK_CUDA(cudaGetLastError());
  std::vector<T> hy(static_cast<std::size_t>(ny));
  std::vector<std::int64_t> hidx(has_index ? static_cast<std::size_t>(ny) : 0);
  CHECK_CUDA(cudaMemcpy(hy.data(), py, hy.size() * sizeof(T), cudaMemcpyDeviceToHost));
  if (has_index) CHECK_CUDA(cudaMemcpy(hidx.data(), pidx, hidx.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost));

  // ---- timing: CUDA events around each run, after warm-up ----
  std::vector<float> ms;
  if (o.iters > 0) {
    for (int i = 0; i < o.warmup; ++i)
      if (launch_checked("warm-up") != convred::status::success) {
        std::printf("Failed\n");
        return 1;
      }
    event_list start(static_cast<std::size_t>(o.iters)), stop(static_cast<std::size_t>(o.iters));
    for (int i = 0; i < o.iters; ++i) {
      CHECK_CUDA(cudaEventRecord(start.ev[static_cast<std::size_t>(i)], stream.s));
      if (launch_checked("timed") != convred::status::success) {
        std::printf("Failed\n");
        return 1;
      }
      CHECK_CUDA(cudaEventRecord(stop.ev[static_cast<std::size_t>(i)], stream.s));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream.s));
    CHECK_CUDA(cudaGetLastError());
    ms.resize(static_cast<std::size_t>(o.iters));
    for (int i = 0; i < o.iters; ++i)
      CHECK_CUDA(cudaEventElapsedTime(&ms[static_cast<std::size_t>(i)], start.ev[static_cast<std::size_t>(i)],
                                      stop.ev[static_cast<std::size_t>(i)]));
    std::sort(ms.begin(), ms.end());
    const double med = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
    const double least_bytes = static_cast<double>(p.x_elements()) * sizeof(T) + static_cast<double>(ny) * sizeof(T) +
                               (has_index ? static_cast<double>(ny) * sizeof(std::int64_t) : 0.0);
    std::printf("time     : median %.3f ms, min %.3f ms over %d runs (CUDA events, after %d warm-up runs)\n", med,
                static_cast<double>(ms.front()), o.iters, o.warmup);
    std::printf("rate     : %.2f TFLOP/s (%.1f GFLOP = 2*N*P*Q*K*C/G*R*S), %.1f GB/s of least traffic "
                "(%.3f GB: x read once + y%s written)\n",
                p.flops() / (med * 1e-3) / 1e12, p.flops() / 1e9, least_bytes / (med * 1e-3) / 1e9, least_bytes / 1e9,
                has_index ? " and indices" : "");
  } else {
    std::printf("time     : not measured (--iters 0)\n");
  }
  std::fflush(stdout);

  // ---- outputs to files (from the verified run) ----
  if (!o.y_out.empty()) {
    const std::vector<std::int64_t> shape = {p.N, 1, P, Q};
    if constexpr (std::is_same_v<T, double>) {
      npy::save(o.y_out, hy, shape);
    } else {
      std::vector<float> yf(hy.size());
      for (std::size_t i = 0; i < hy.size(); ++i) yf[i] = static_cast<float>(to_double(hy[i]));  // exact
      npy::save(o.y_out, yf, shape);
    }
    std::printf("wrote    : %s (y, %s)\n", o.y_out.c_str(), std::is_same_v<T, double> ? "float64" : "float32");
  }
  if (!o.idx_out.empty()) {
    npy::save(o.idx_out, hidx, {p.N, 1, P, Q});
    std::printf("wrote    : %s (indices, int64)\n", o.idx_out.c_str());
  }

  // ---- verification against the float64 reference ----
  std::vector<std::string> failures;
  // Every output written: no NaN poison left (only decidable when the inputs are all finite), and every
  // index in [0, K) (the poison is -1).
  std::int64_t nan_left = 0, idx_bad = 0;
  for (const T& v : hy)
    if (std::isnan(to_double(v))) ++nan_left;
  for (std::int64_t k : hidx)
    if (k < 0 || k >= p.K) ++idx_bad;
  if (inputs_finite && nan_left > 0)
    failures.push_back(std::to_string(nan_left) + " of " + std::to_string(ny) +
                       " outputs are NaN with finite inputs (not written: poison left)");
  if (idx_bad > 0)
    failures.push_back(std::to_string(idx_bad) + " indices outside [0, K) (-1 = not written)");

  bool all = false;
  const std::vector<std::int64_t> pixels = choose_pixels(p, o.verify_pixels, o.seed, all);
  struct row {
    double ref;            // float64 reduced value
    std::int64_t ref_idx;  // float64 argmin/argmax (-1 for other ops)
    double mag;            // magnitude of the terms behind the value (see the tolerance comment)
    double at_idx;         // float64 epilogue value of the channel the GPU returned (index ops)
  };
  std::vector<row> rows(pixels.size());
  const T* hbp = o.bias ? hb.data() : nullptr;
  const double abs_s = std::fabs(static_cast<double>(epi.s));
  const auto t0 = std::chrono::steady_clock::now();
  parallel_for(pixels.size(), [&](std::size_t i) {
    const std::int64_t m = pixels[i], n = m / (P * Q), pq = m % (P * Q), pp = pq / Q, qq = pq % Q;
    const convred::reference::reduced r =
        convred::reference::conv2d_reduce_at(p, hx.data(), hw.data(), hbp, n, pp, qq, Op{}, epi);
    double mag = 0.0;
    for (std::int64_t k = 0; k < p.K; ++k) {
      const double a = abs_s * abs_conv_at(p, hx.data(), hw.data(), hbp, n, k, pp, qq);
      if constexpr (std::is_same_v<Op, convred::op::sum> || std::is_same_v<Op, convred::op::mean>)
        mag += a;
      else
        mag = std::max(mag, a);
    }
    if constexpr (std::is_same_v<Op, convred::op::mean>) mag /= static_cast<double>(p.K);
    double at = std::numeric_limits<double>::quiet_NaN();
    if constexpr (has_index) {
      const std::int64_t k = hidx[static_cast<std::size_t>(m)];
      if (k >= 0 && k < p.K)
        at = convred::apply_epilogue(epi, convred::reference::conv2d_at(p, hx.data(), hw.data(), hbp, n, k, pp, qq),
                                     static_cast<int>(k));
    }
    rows[i] = {r.value, r.index, mag, at};
  });
  const double ref_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double tol = tolerance<T>(o.math), u = unit_roundoff<T>();
  double sum_e2 = 0, sum_r2 = 0, sum_m2 = 0, max_abs = 0, max_rel = 0, worst_ratio = 0;
  double max_gap = 0, worst_gap_ratio = 0;
  std::int64_t bad = 0, worst_px = -1, nan_mismatch = 0, idx_differs = 0, idx_wrong = 0;
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    const row& r = rows[i];
    const std::size_t m = static_cast<std::size_t>(pixels[i]);
    const double y = to_double(hy[m]);
    // values
    if (std::isnan(r.ref) || std::isinf(r.ref)) {
      const bool same = std::isnan(r.ref) ? std::isnan(y) : y == r.ref;
      if (!same) ++nan_mismatch;
    } else if (!std::isfinite(y)) {
      ++bad;  // a finite reference but a NaN or inf result
      if (worst_px < 0 || worst_ratio < std::numeric_limits<double>::infinity()) {
        worst_ratio = std::numeric_limits<double>::infinity();
        worst_px = pixels[i];
      }
    } else {
      const double e = std::fabs(y - r.ref), allowed = tol * std::fabs(r.ref) + kFloor * u * r.mag;
      sum_e2 += e * e, sum_r2 += r.ref * r.ref, sum_m2 += r.mag * r.mag;
      max_abs = std::max(max_abs, e);
      max_rel = std::max(max_rel, e / std::max(std::fabs(r.ref), std::numeric_limits<double>::min()));
      const double ratio = allowed > 0 ? e / allowed : (e > 0 ? std::numeric_limits<double>::infinity() : 0.0);
      if (ratio > worst_ratio) worst_ratio = ratio, worst_px = pixels[i];
      if (e > allowed) ++bad;
    }
    // indices: the reference value at the returned channel must be within the bound of the reference
    // extreme (fp32 near-ties may legally pick another channel than float64 does); a NaN result must
    // point at the first NaN channel.
    if constexpr (has_index) {
      const std::int64_t k = hidx[m];
      if (k < 0 || k >= p.K) continue;  // counted above
      if (k != r.ref_idx) ++idx_differs;
      if (std::isnan(r.ref)) {
        if (k != r.ref_idx) ++idx_wrong;
      } else if (std::isinf(r.ref)) {
        if (r.at_idx != r.ref) ++idx_wrong;
      } else {
        const double gap = std::fabs(r.at_idx - r.ref), allowed = tol * std::fabs(r.ref) + kFloor * u * r.mag;
        max_gap = std::max(max_gap, gap);
        const double ratio = allowed > 0 ? gap / allowed : (gap > 0 ? std::numeric_limits<double>::infinity() : 0.0);
        worst_gap_ratio = std::max(worst_gap_ratio, ratio);
        if (!(gap <= allowed)) ++idx_wrong;
      }
    }
  }
  const double norm_e = std::sqrt(sum_e2), norm_r = std::sqrt(sum_r2), norm_m = std::sqrt(sum_m2);
  const double rel_norm = norm_r > 0 ? norm_e / norm_r : (norm_e > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  const bool norm_ok = norm_e <= tol * norm_r + kFloor * u * norm_m;

  const std::int64_t corners = p.N > 1 ? 8 : 4;
  if (all)
    std::printf("verify   : all %lld pixels x %lld channels against the float64 reference (%.1f s on the host)\n",
                (long long)ny, (long long)p.K, ref_seconds);
  else
    std::printf("verify   : %zu of %lld pixels (random, seed %llu, incl. the %lld corners of the first and last "
                "images) x %lld channels against the float64 reference (%.1f s on the host)\n",
                pixels.size(), (long long)ny, (unsigned long long)o.seed, (long long)corners, (long long)p.K,
                ref_seconds);
  std::printf("error    : max |y-ref| %.3e, max rel %.3e, rel norm ||y-ref||/||ref|| %.3e  (vs float64)\n", max_abs,
              max_rel, rel_norm);
  std::printf("bound    : |y-ref| <= %.0e*|ref| + %.0f*u*mag per pixel and in norm (u = 2^%d); worst pixel at "
              "%.3g of its bound\n",
              tol, kFloor, std::is_same_v<T, double> ? -53 : -24, worst_ratio);
  if (worst_px >= 0 && worst_ratio > 1.0) {
    const std::int64_t n = worst_px / (P * Q), pp = (worst_px % (P * Q)) / Q, qq = worst_px % Q;
    const auto it = std::lower_bound(pixels.begin(), pixels.end(), worst_px);
    const row& r = rows[static_cast<std::size_t>(it - pixels.begin())];
    std::printf("worst    : pixel (n %lld, p %lld, q %lld): y %.9g, ref %.9g, mag %.3g\n", (long long)n, (long long)pp,
                (long long)qq, to_double(hy[static_cast<std::size_t>(worst_px)]), r.ref, r.mag);
  }
  if (has_index)
    std::printf("index    : %lld of %zu equal the float64 arg%s; the others are near-ties (largest value gap %.3e, "
                "%.3g of its bound)\n",
                (long long)(static_cast<std::int64_t>(pixels.size()) - idx_differs), pixels.size(),
                std::is_same_v<Op, convred::op::argmin> ? "min" : "max", max_gap, worst_gap_ratio);
  if (inputs_finite)
    std::printf("written  : %s\n",
                nan_left == 0 && idx_bad == 0
                    ? ("every one of the " + std::to_string(ny) + " outputs (no NaN poison left)").c_str()
                    : "NOT all outputs (see below)");
  else
    std::printf("written  : %lld NaN outputs; with non-finite inputs only the checked pixels tell (see above)\n",
                (long long)nan_left);

  if (bad > 0)
    failures.push_back(std::to_string(bad) + " of " + std::to_string(pixels.size()) +
                       " checked pixels outside the error bound");
  if (!norm_ok) failures.push_back("relative norm error above the bound");
  if (nan_mismatch > 0)
    failures.push_back(std::to_string(nan_mismatch) + " pixels where the reference is NaN/inf and y is not the same");
  if (idx_wrong > 0)
    failures.push_back(std::to_string(idx_wrong) + " indices whose channel value is not the reference extreme");
  for (const auto& f : failures) std::printf("FAILURE  : %s\n", f.c_str());
  std::printf("%s\n", failures.empty() ? "Passed" : "Failed");
  return failures.empty() ? 0 : 1;
}

template <class T>
int dispatch_op(const options& o) {
  switch (o.op) {
    case op_kind::min: return run<T, convred::op::min>(o);
    case op_kind::max: return run<T, convred::op::max>(o);
    case op_kind::sum: return run<T, convred::op::sum>(o);
    case op_kind::mean: return run<T, convred::op::mean>(o);
    case op_kind::argmin: return run<T, convred::op::argmin>(o);
    case op_kind::argmax: return run<T, convred::op::argmax>(o);
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
  std::printf("Failed\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    bool help = false;
    o = parse_args(argc, argv, help);
    if (help) {
      print_help();
      return 0;
    }
    resolve_problem(o);
  } catch (const usage_error& e) {
    return fail(e.what(), true);
  } catch (const std::exception& e) {  // npy::error and anything else
    return fail(e.what(), false);
  }

  // The problem is checked on the host before any GPU work (the library would refuse it the same way).
  if (const convred::status st = convred::validate(o.p, dtype_bytes(o.dtype)); st != convred::status::success)
    return fail(std::string("invalid problem (") + problem_string(o.p, dtype_name(o.dtype)) +
                    "): " + convred::to_string(st),
                false);
  if (o.p.N < 1) return fail("the batch must hold at least one image (--n >= 1)", true);
  if (o.math != math_kind::ieee && o.dtype != dtype_kind::f32)
    return fail(std::string("--math ") + math_label(o.math) + " runs with --dtype float only", true);

  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device found (%s); this example needs an NVIDIA GPU (sm_80+)\n", kProg,
                 e != cudaSuccess ? cudaGetErrorString(e) : "the device count is 0");
    return 2;
  }
  try {
    int dev = 0;
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
    if (prop.major < 8) {
      std::fprintf(stderr, "%s: %s is sm_%d%d; this example needs an NVIDIA GPU of sm_80 or newer\n", kProg, prop.name,
                   prop.major, prop.minor);
      return 2;
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "%s: no usable CUDA device (%s)\n", kProg, ex.what());
    return 2;
  }

  try {
    return dispatch(o);
  } catch (const std::exception& ex) {  // CUDA errors, thrust allocation failures, file errors
    return fail(ex.what(), false);
  }
}
