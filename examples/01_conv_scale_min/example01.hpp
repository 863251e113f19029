/// @file examples/01_conv_scale_min/example01.hpp
/// @brief Example 01's shared declarations: the options, the element types and ops it runs, and the table
/// of the runs compiled into the binary (run.cuh defines a run, instantiate.cu and the CMake-generated
/// translation units register them, main.cu looks them up).
///
/// Each run, `run<T, Op, Math>`, instantiates the planner's kernels for one element type, op and math; the
/// whole set (4 element types x 6 ops x 6 maths, double only with accurate and ieee: 120 runs) takes about
/// 14 minutes of one core to compile. So the runs are compiled in several small translation units, and the
/// main job's binary, `01_conv_scale_min`, holds only the seed's element type (float): every op with the
/// default math (accurate) and the seed's op (min) with every math. `01_conv_scale_min_all` (same source,
/// same options; built on request) holds every run. A run that is not in the binary is refused before the
/// device is touched, with a message that names the binary that has it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <convred/problem.cuh>

#include "../common/verify.hpp"

namespace ex01 {

using convred_examples::math_kind;

enum class op_kind { min, max, sum, mean, argmin, argmax };
enum class dtype_kind { f32, f64, f16, bf16 };

/// Option names of the ops and element types, in op_kind's and dtype_kind's order.
inline const char* op_name(op_kind o) {
  static const char* const names[] = {"min", "max", "sum", "mean", "argmin", "argmax"};
  return names[static_cast<int>(o)];
}
inline const char* dtype_name(dtype_kind d) {
  static const char* const names[] = {"float", "double", "half", "bf16"};
  return names[static_cast<int>(d)];
}
inline std::int64_t dtype_bytes(dtype_kind d) { return d == dtype_kind::f64 ? 8 : d == dtype_kind::f32 ? 4 : 2; }
inline bool is_index_op(op_kind o) { return o == op_kind::argmin || o == op_kind::argmax; }

/// The program's name for messages: the basename of argv[0] (01_conv_scale_min or 01_conv_scale_min_all).
inline std::string prog = "01_conv_scale_min";

/// The command line, parsed and checked on the host (main.cu).
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

/// Bytes of the run's tensors in its element type: x, W, b, y and (argmin/argmax) the int64 indices. The
/// example holds each of them once on the host (the inputs, and y for the float64 check) and once on the
/// device. In double: a problem that passes convred::validate fits int64 elements, not necessarily bytes.
inline double tensor_bytes(const options& o) {
  const convred::conv2d_problem& p = o.p;
  const double e = static_cast<double>(dtype_bytes(o.dtype)), y = static_cast<double>(p.N) * p.P() * p.Q();
  return e * (static_cast<double>(p.N) * p.C * p.H * p.W + static_cast<double>(p.K) * p.C_per_group() * p.R * p.S +
              (o.bias ? static_cast<double>(p.K) : 0.0) + y) +
         (is_index_op(o.op) ? 8.0 * y : 0.0);
}

/// A byte count for people: "1.09 GB", "27.5 PB" (powers of 1000).
inline std::string bytes_string(double b) {
  static const char* const units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB", "ZB"};
  int u = 0;
  while (b >= 1000.0 && u < 7) b /= 1000.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", b, units[u]);
  return buf;
}

/// One compiled run: verifies and times the problem of `o` on the current device; returns the exit code.
using run_fn = int (*)(const options& o);

/// A run of the table: element type, op, math and the function.
struct run_entry {
  dtype_kind dtype;
  op_kind op;
  math_kind math;
  run_fn fn;
};

/// The runs compiled into this binary (filled by the registrars of the translation units linked in, before
/// main; a function-local static, so the order of their initialisation does not matter).
inline std::vector<run_entry>& runs() {
  static std::vector<run_entry> table;
  return table;
}

/// The run for (dtype, op, math), or nullptr when this binary was built without it.
inline run_fn find_run(dtype_kind d, op_kind o, math_kind m) {
  for (const run_entry& e : runs())
    if (e.dtype == d && e.op == o && e.math == m) return e.fn;
  return nullptr;
}

}  // namespace ex01
