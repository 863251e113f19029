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
/// Everything that can be checked without a GPU (options, input files and their sizes, output paths, the
/// problem and its size, the dtype and math combination, whether this binary holds the run) is checked
/// before the device is touched.
///
/// This file is the command line; run.cuh is the run itself (`run<T, Op, Math>`), compiled in separate
/// translation units (instantiate.cu, or those CMakeLists.txt generates) and found in the binary's table
/// (example01.hpp): `01_conv_scale_min` holds float data with every op under the default math and the
/// seed's op (min) under every math; `01_conv_scale_min_all` holds every element type, op and math.
///
/// Output: the problem, the math and the kernel picked, the time (median and min over --iters runs, CUDA
/// events, after warm-up), TFLOP/s, GB/s of least traffic, the error against float64, and as the last line
/// exactly `Passed` or `Failed`. Exit code: 0 Passed; 1 Failed, or an error (a bad command line or input is
/// reported without `Failed`: nothing ran); 2 no usable CUDA device.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <convred/problem.cuh>
#include <convred/status.cuh>

#include "../common/cli.hpp"
#include "../common/npy.hpp"
#include "../common/verify.hpp"
#include "example01.hpp"

namespace ex01 {
namespace {

namespace ex = convred_examples;
using ex::usage_error;

/// The runs this binary holds, for --help and for the message about a run it lacks: per element type and
/// math its ops, maths with the same ops merged, e.g. "float accurate: min max sum mean argmin argmax;
/// float ieee/tf32/tf32x3/bf16/fp16: min".
std::string built_runs() {
  static const math_kind maths[] = {math_kind::accurate, math_kind::ieee, math_kind::tf32,
                                    math_kind::tf32x3,   math_kind::bf16, math_kind::fp16};
  std::string out;
  for (int d = 0; d < 4; ++d) {
    std::vector<std::pair<std::string, std::string>> groups;  // (maths, ops)
    for (math_kind m : maths) {
      std::string ops;
      for (int k = 0; k < 6; ++k)
        if (find_run(static_cast<dtype_kind>(d), static_cast<op_kind>(k), m))
          ops += std::string(ops.empty() ? "" : " ") + op_name(static_cast<op_kind>(k));
      if (ops.empty()) continue;
      auto g = groups.begin();
      while (g != groups.end() && g->second != ops) ++g;
      if (g == groups.end()) groups.push_back({ex::math_label(m), ops});
      else g->first += std::string("/") + ex::math_label(m);
    }
    for (const auto& g : groups)
      out += std::string(out.empty() ? "" : "; ") + dtype_name(static_cast<dtype_kind>(d)) + " " + g.first + ": " +
             g.second;
  }
  return out.empty() ? "none" : out;
}

void print_help() {
  std::printf(
      "Usage: %s [options]\n\n"
      "Computes y[n,0,p,q] = OP over k of scale * (conv2d(x, W)[n,k,p,q] + b[k]) in one fused convred kernel\n"
      "(by default the seed case y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)), checks it against\n"
      "a float64 reference, times it, and prints Passed or Failed as the last line.\n"
      "Exit code: 0 Passed; 1 Failed or an error (a bad command line or input: a message, no Failed);\n"
      "2 no usable CUDA device. Each option may be given once.\n\n"
      "Problem (defaults: the seed case; conv2d is PyTorch's, a cross-correlation)\n"
      "  --n N               batch, at least 1 (64)\n"
      "  --c C               input channels (64)\n"
      "  --height H, --h H   input height (256)\n"
      "  --width W           input width (256) (--w is refused: it read as the width or the weights)\n"
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
      "  --x F.npy, --input F.npy   x as an (N, C, H, W) array (logical NCHW, C order, also with --layout nhwc)\n"
      "  --weights F.npy            W as (K, C/groups, R, S)\n"
      "  --b F.npy, --bias F.npy    b as (K,)\n"
      "                      float32 files (float64 and float16 are accepted too); they set the sizes, and sizes\n"
      "                      also given as options must agree. Values are converted to --dtype on load\n"
      "                      (bfloat16 has no NumPy dtype: bf16 runs take float32 files).\n"
      "  --y-out F.npy       write y as (N, 1, P, Q) float32 (float64 for --dtype double)\n"
      "  --idx-out F.npy     write the argmin/argmax indices as (N, 1, P, Q) int64\n"
      "                      (the two outputs must be different files, and neither an input file)\n\n"
      "Run\n"
      "  --iters N           timed runs, median and min reported (50); at least 20, or 0 to skip timing\n"
      "                      (e.g. under compute-sanitizer)\n"
      "  --warmup N          untimed runs before timing (5)\n"
      "  --verify-pixels N   pixels checked against float64 for large problems (4096, always including the\n"
      "                      4 corners of the first and last images); problems below 2e9 MACs (and 2^24\n"
      "                      pixels) check every pixel\n"
      "  -h, --help          this text\n",
      prog.c_str());
  if (runs().size() >= 120)  // 4 element types x 6 ops x 6 maths, double with 2 of them
    std::printf("\nBuilt into this binary: every element type, op and math (double: accurate and ieee).\n");
  else
    std::printf("\nBuilt into this binary (--dtype --math: --op), to keep the main job's build short:\n  %s\n"
                "01_conv_scale_min_all (same options; built on request: CMake target 01_conv_scale_min_all) holds\n"
                "every combination.\n",
                built_runs().c_str());
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
  constexpr long long kMax = std::numeric_limits<long long>::max();
  static const char* const layouts[] = {"nchw|NCHW", "nhwc|NHWC|channels_last"};
  static const char* const ops[] = {"min", "max", "sum", "mean", "argmin", "argmax"};
  static const char* const dtypes[] = {"float|fp32|float32", "double|fp64|float64", "half|fp16|float16",
                                       "bf16|bfloat16"};
  static const char* const maths[] = {"ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate"};  // math_kind's order
  options o;
  auto& p = o.p;
  help = false;
  // What each option sets (aliases and --pad / --pad-h set the same fields): a field set twice is an error
  // that names both options, so that no value is silently overridden.
  std::map<std::string, std::string> set_by;
  std::string k;
  auto claim = [&](const char* field) {
    const auto [it, fresh] = set_by.emplace(field, k);
    if (fresh) return;
    if (it->second == k) throw usage_error(k + " is given twice (each option at most once)");
    throw usage_error(k + " and " + it->second + " both set the " + field + " (give it once)");
  };
  for (ex::arg_reader a(argc, argv); a.next();) {
    k = a.key();
    if (a.help()) return help = true, o;
    // sizes: any int64 here (out of range: the parser's message); each is checked by name in check_on_host
    auto size = [&](std::int64_t& field, const char* what, bool* set = nullptr) {
      claim(what);
      field = ex::parse_int(k, a.value(), -kMax, kMax);
      if (set) *set = true;
    };
    auto pair = [&](std::int64_t& h, std::int64_t& w, const char* what_h, const char* what_w) {
      claim(what_h), claim(what_w);
      h = w = ex::parse_int(k, a.value(), -kMax, kMax);
    };
    if (k == "--n") size(p.N, "batch N", &o.set_n);
    else if (k == "--c") size(p.C, "input channels C", &o.set_c);
    else if (k == "--h" || k == "--height") size(p.H, "input height H", &o.set_h);
    else if (k == "--width") size(p.W, "input width W", &o.set_w);
    else if (k == "--w")
      throw usage_error("--w is ambiguous (the input width or the weights file): use --width N or --weights FILE.npy");
    else if (k == "--k") size(p.K, "output channels K", &o.set_k);
    else if (k == "--r") size(p.R, "kernel height R", &o.set_r);
    else if (k == "--s") size(p.S, "kernel width S", &o.set_s);
    else if (k == "--pad") pair(p.pad_h, p.pad_w, "padding height", "padding width");
    else if (k == "--pad-h") size(p.pad_h, "padding height");
    else if (k == "--pad-w") size(p.pad_w, "padding width");
    else if (k == "--stride") pair(p.stride_h, p.stride_w, "stride height", "stride width");
    else if (k == "--stride-h") size(p.stride_h, "stride height");
    else if (k == "--stride-w") size(p.stride_w, "stride width");
    else if (k == "--dilation") pair(p.dil_h, p.dil_w, "dilation height", "dilation width");
    else if (k == "--dilation-h") size(p.dil_h, "dilation height");
    else if (k == "--dilation-w") size(p.dil_w, "dilation width");
    else if (k == "--groups") size(p.groups, "groups", &o.set_groups);
    else if (k == "--layout") claim("layout"), p.x_layout = pick<convred::layout>(k, a.value(), layouts, "nchw or nhwc");
    else if (k == "--op") claim("op"), o.op = pick<op_kind>(k, a.value(), ops, "min, max, sum, mean, argmin or argmax");
    else if (k == "--dtype") claim("dtype"), o.dtype = pick<dtype_kind>(k, a.value(), dtypes, "float, double, half or bf16");
    else if (k == "--math")
      claim("math"), o.math = pick<math_kind>(k, a.value(), maths, "accurate, ieee, tf32, tf32x3, bf16 or fp16");
    else if (k == "--scale") claim("scale"), o.scale = ex::parse_real(k, a.value());
    else if (k == "--no-bias") claim("bias"), a.flag(), o.bias = false;
    else if (k == "--iters") claim("timed runs"), o.iters = static_cast<int>(ex::parse_int(k, a.value(), 0, 1000000));
    else if (k == "--warmup") claim("warm-up runs"), o.warmup = static_cast<int>(ex::parse_int(k, a.value(), 0, 1000000));
    else if (k == "--seed") claim("seed"), o.seed = ex::parse_seed(k, a.value());
    else if (k == "--verify-pixels") claim("pixels to verify"), o.verify_pixels = ex::parse_int(k, a.value(), 1, kMax);
    else if (k == "--x" || k == "--input") claim("x file"), o.x_file = a.value();
    else if (k == "--weights") claim("weights file"), o.w_file = a.value();
    else if (k == "--b" || k == "--bias") claim("bias"), o.b_file = a.value();
    else if (k == "--y-out") claim("y output"), o.y_out = a.value();
    else if (k == "--idx-out") claim("index output"), o.idx_out = a.value();
    else a.unknown();
  }
  if (o.iters != 0 && o.iters < 20)
    throw usage_error("--iters must be at least 20 for a meaningful median (or 0 to skip timing), got " +
                      std::to_string(o.iters));
  if (!o.idx_out.empty() && !is_index_op(o.op))
    throw usage_error("--idx-out needs --op argmin or argmax (op " + std::string(op_name(o.op)) + " has no index)");
  // The planner takes every math on float, half and bf16 data; double runs accurate or ieee (exact fp64).
  if (o.dtype == dtype_kind::f64 && o.math != math_kind::accurate && o.math != math_kind::ieee)
    throw usage_error(std::string("--math ") + ex::math_label(o.math) +
                      " is a tensor-core math and takes --dtype float, half or bf16; --dtype double runs --math "
                      "accurate or ieee (exact fp64)");
  if (!find_run(o.dtype, o.op, o.math))
    throw usage_error("--dtype " + std::string(dtype_name(o.dtype)) + " --op " + op_name(o.op) + " --math " +
                      ex::math_label(o.math) + " is not built into " + prog + ", which holds (--dtype --math: --op) " +
                      built_runs() + ". 01_conv_scale_min_all holds every combination, with the same options: "
                      "cmake --build build --target 01_conv_scale_min_all, then build/examples/01_conv_scale_min_all");
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

/// Each size of the problem in its range, named, with where it came from: "K must be >= 1 (output
/// channels, --k), got 0", or "(output channels, from w.npy's shape)" when an input file set it.
void check_dimensions(const options& o) {
  const convred::conv2d_problem& p = o.p;
  constexpr std::int64_t big = std::int64_t(1) << 40;  // convred::validate's largest extent
  auto from = [](const std::string& file, bool by_option, const char* option) {
    return !file.empty() && !by_option ? "from " + file + "'s shape" : std::string(option);
  };
  struct rule {
    const char* name;
    std::string what;
    std::int64_t value, lo;
  };
  const rule rules[] = {
      {"N", "the batch, " + from(o.x_file, o.set_n, "--n"), p.N, 1},
      {"C", "input channels, " + from(o.x_file, o.set_c, "--c"), p.C, 1},
      {"H", "input height, " + from(o.x_file, o.set_h, "--height"), p.H, 1},
      {"W", "input width, " + from(o.x_file, o.set_w, "--width"), p.W, 1},
      {"K", "output channels, " + from(o.w_file, o.set_k, "--k"), p.K, 1},
      {"R", "kernel height, " + from(o.w_file, o.set_r, "--r"), p.R, 1},
      {"S", "kernel width, " + from(o.w_file, o.set_s, "--s"), p.S, 1},
      {"the padding height", "--pad or --pad-h", p.pad_h, 0},
      {"the padding width", "--pad or --pad-w", p.pad_w, 0},
      {"the stride height", "--stride or --stride-h", p.stride_h, 1},
      {"the stride width", "--stride or --stride-w", p.stride_w, 1},
      {"the dilation height", "--dilation or --dilation-h", p.dil_h, 1},
      {"the dilation width", "--dilation or --dilation-w", p.dil_w, 1},
      {"groups", "--groups", p.groups, 1},
  };
  for (const rule& r : rules) {
    if (r.value < r.lo)
      throw usage_error(std::string(r.name) + " must be >= " + std::to_string(r.lo) + " (" + r.what + "), got " +
                        std::to_string(r.value));
    if (r.value > big)
      throw usage_error(std::string(r.name) + " must be <= 2^40 = " + std::to_string(big) + " (" + r.what + "), got " +
                        std::to_string(r.value));
  }
}

/// Bytes of physical memory of this machine (0 when unknown).
double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

/// Everything checkable without a GPU: the input files (whole, not only their headers) and the sizes
/// they set, each dimension, the problem, its size against this machine's memory, and the output paths.
/// Throws usage_error or npy::error.
void check_on_host(options& o) {
  auto& p = o.p;
  if (!o.x_file.empty()) {
    const npy::header h = check_input(o.x_file, "x", 4, "(N, C, H, W)");
    take_size(p.N, o.set_n, h.shape[0], "--n", o.x_file, h, "N");
    take_size(p.C, o.set_c, h.shape[1], "--c", o.x_file, h, "C");
    take_size(p.H, o.set_h, h.shape[2], "--height", o.x_file, h, "H");
    take_size(p.W, o.set_w, h.shape[3], "--width", o.x_file, h, "W");
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
  if (!o.bias && !o.b_file.empty()) throw usage_error("--no-bias and --b/--bias FILE contradict each other");
  if (!o.b_file.empty()) {
    const npy::header h = check_input(o.b_file, "b", 1, "(K,)");
    if (h.shape[0] != p.K)
      throw usage_error(o.b_file + ": b must have shape (" + std::to_string(p.K) + ",) to match K = " +
                        std::to_string(p.K) + ", got " + npy::shape_string(h.shape));
  }
  check_dimensions(o);
  if (const convred::status st = convred::validate(p, dtype_bytes(o.dtype)); st != convred::status::success)
    throw usage_error(std::string("invalid problem: ") + convred::to_string(st));
  // The size: the example holds x, W, b and y on the host (random or read inputs, y for the float64 check)
  // as well as on the device, so a problem larger than this machine's memory cannot run here; the device's
  // memory is compared once it is known (run.cuh).
  const double need = tensor_bytes(o), have = host_memory_bytes();
  if (have > 0 && need > have)
    throw usage_error("the problem is too large: x, W, b and y" + std::string(is_index_op(o.op) ? " and the indices" : "") +
                      " take " + bytes_string(need) + " in " + dtype_name(o.dtype) +
                      ", more than this machine's memory (" + bytes_string(have) +
                      "); the example holds them on the host and on the GPU");
  // Outputs: writable, not a folder, not the same file twice, not an input.
  if (!o.y_out.empty()) ex::require_writable_path("--y-out", o.y_out);
  if (!o.idx_out.empty()) ex::require_writable_path("--idx-out", o.idx_out);
  if (!o.y_out.empty() && !o.idx_out.empty() && ex::same_file(o.y_out, o.idx_out))
    throw usage_error("--y-out and --idx-out name the same file '" + o.idx_out + "' (each output needs its own file)");
  const std::pair<const char*, const std::string*> inputs[] = {{"--x", &o.x_file}, {"--weights", &o.w_file},
                                                               {"--b", &o.b_file}};
  const std::pair<const char*, const std::string*> outputs[] = {{"--y-out", &o.y_out}, {"--idx-out", &o.idx_out}};
  for (const auto& out : outputs)
    for (const auto& in : inputs)
      if (!out.second->empty() && !in.second->empty() && ex::same_file(*out.second, *in.second))
        throw usage_error(std::string(out.first) + " '" + *out.second + "' is the input file of " + in.first +
                          " (the output would overwrite it)");
}

/// A bad command line or input: the message and a pointer to --help; nothing ran, so no `Failed`.
int usage_failure(const std::string& msg, bool hint) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), msg.c_str());
  if (hint) std::fprintf(stderr, "(run %s --help for the options)\n", prog.c_str());
  return 1;
}

}  // namespace
}  // namespace ex01

int main(int argc, char** argv) {
  using namespace ex01;
  if (argc > 0 && argv[0] && *argv[0]) {
    const std::string a = argv[0];
    prog = a.substr(a.find_last_of('/') == std::string::npos ? 0 : a.find_last_of('/') + 1);
  }
  options o;
  try {  // everything that needs no GPU first: options, files, the problem and its size, output paths
    bool help = false;
    o = parse_args(argc, argv, help);
    if (help) return print_help(), 0;
    check_on_host(o);
  } catch (const convred_examples::usage_error& e) {
    return usage_failure(e.what(), true);
  } catch (const std::exception& e) {  // npy::error: a bad input file
    return usage_failure(e.what(), false);
  }
  const run_fn run = find_run(o.dtype, o.op, o.math);  // (parse_args checked that there is one)
  int count = 0;
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 8) {
    std::fprintf(stderr, "%s: no CUDA device found (%s); this example needs an NVIDIA GPU (sm_80+)\n", prog.c_str(),
                 e != cudaSuccess ? cudaGetErrorString(e) : count == 0 ? "the device count is 0" : prop.name);
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& ex) {  // CUDA errors (allocations too), file errors: the run failed
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), ex.what());
    return convred_examples::finish(false);
  }
}
