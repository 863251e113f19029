/// @file examples/common/verify.hpp
/// @brief Verification against the float64 reference, shared by the examples: the tolerance of each
/// precision, the magnitude bound of a conv output, the choice of pixels to check and an accumulator
/// of errors that decides Passed / Failed.
///
/// The rule (docs/tolerances.md explains it): a value y with float64 reference ref passes when
///     |y - ref| <= tol * |ref| + kFloor * u * mag
/// and all checked values together pass when ||y - ref|| <= tol * ||ref|| + kFloor * u * ||mag||, where tol
/// is the relative tolerance of the precision, u the unit roundoff of the accumulation (2^-24 for fp32,
/// 2^-53 for fp64) and mag the magnitude of the terms behind the value (e.g. sum |x * w| + |b|). The second
/// term covers values near zero through cancellation, where a relative bound alone means nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>

namespace convred_examples {

/// The math precision a run uses (example 01's --math; the examples' policies): convred::math's tags.
/// `accurate` is the planner's default (device::conv2d_reduce_plan): the fastest kernel whose error vs
/// float64 is held to 1e-6 (3xTF32 on sm_80+, exact FMA on older GPUs and for double).
enum class math_kind { ieee, tf32, tf32x3, bf16, fp16, accurate };

/// Name of a math_kind: "ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate".
inline const char* math_label(math_kind m) {
  switch (m) {
    case math_kind::ieee: return "ieee";
    case math_kind::tf32: return "tf32";
    case math_kind::tf32x3: return "tf32x3";
    case math_kind::bf16: return "bf16";
    case math_kind::fp16: return "fp16";
    case math_kind::accurate: return "accurate";
  }
  return "?";
}

/// Margin on the rounding term: about 10 standard deviations of a random-walk fp32 sum's error.
inline constexpr double kFloor = 8.0;

/// Relative tolerance vs float64 (docs/tolerances.md) of math m on element type T: the looser of the
/// math's bound and the element type's. Element types (exact math): 1e-5 for float, 1e-12 for double (so
/// that a double path that silently computed in fp32 fails), 1e-2 for __half / __nv_bfloat16 (y's final
/// rounding). Maths: 1e-6 for accurate on float (the planner's default; on double it is exact fp64, on
/// 16-bit data the element bound holds), 1e-5 for tf32x3, 1e-3 for tf32, 1e-2 for bf16 / fp16.
template <class T>
double tolerance(math_kind m = math_kind::ieee) {
  double elem = 1e-2;
  if constexpr (std::is_same_v<T, double>) elem = 1e-12;
  else if constexpr (std::is_same_v<T, float>) elem = 1e-5;
  switch (m) {
    case math_kind::ieee: return elem;
    case math_kind::accurate: return std::is_same_v<T, float> ? 1e-6 : elem;
    case math_kind::tf32x3: return std::max(elem, 1e-5);
    case math_kind::tf32: return std::max(elem, 1e-3);
    case math_kind::bf16:
    case math_kind::fp16: return std::max(elem, 1e-2);
  }
  return elem;
}

/// Unit roundoff of the accumulation type of T: 2^-53 for double, 2^-24 otherwise (fp32 accumulation).
template <class T>
double unit_roundoff() {
  return std::is_same_v<T, double> ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

/// Sum over the taps of |x * w|, plus |b[k]|: the magnitude that bounds every partial sum a kernel forms
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
/// small (below 2e9 MACs and 2^24 pixels) or has at most `sample` pixels (`all` is then true); otherwise
/// the 4 corners of the first and last images plus uniformly random pixels, `sample` in all.
inline std::vector<std::int64_t> choose_pixels(const convred::conv2d_problem& p, std::int64_t sample,
                                               std::uint64_t seed, bool& all) {
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

/// Accumulates the comparison of computed values with their float64 references under the rule above.
/// A non-finite reference must be matched exactly (NaN by NaN, inf by the same inf).
struct value_check {
  double tol;  ///< relative tolerance
  double u;    ///< unit roundoff of the accumulation
  std::int64_t checked = 0, bad = 0, nonfinite_mismatch = 0;  ///< counts
  double sum_e2 = 0, sum_r2 = 0, sum_m2 = 0;                  ///< squared norms of error, reference, magnitude
  double max_abs = 0, max_rel = 0, worst_ratio = 0;           ///< largest errors; worst error / allowed
  std::int64_t worst = -1;                                    ///< id of the worst value

  /// Compares one value (any id, e.g. its output offset) and records it.
  void add(std::int64_t id, double y, double ref, double mag) {
    ++checked;
    if (!std::isfinite(ref)) {
      if (!(std::isnan(ref) ? std::isnan(y) : y == ref)) ++nonfinite_mismatch;
      return;
    }
    if (!std::isfinite(y)) {  // a finite reference but a NaN or inf result
      ++bad;
      worst_ratio = std::numeric_limits<double>::infinity(), worst = id;
      return;
    }
    const double e = std::fabs(y - ref), allowed = tol * std::fabs(ref) + kFloor * u * mag;
    sum_e2 += e * e, sum_r2 += ref * ref, sum_m2 += mag * mag;
    max_abs = std::max(max_abs, e);
    max_rel = std::max(max_rel, e / std::max(std::fabs(ref), std::numeric_limits<double>::min()));
    const double ratio = allowed > 0 ? e / allowed : (e > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    if (ratio > worst_ratio) worst_ratio = ratio, worst = id;
    if (!(e <= allowed)) ++bad;
  }
  /// ||y - ref|| / ||ref|| over the finite values.
  double rel_norm() const {
    const double e = std::sqrt(sum_e2), r = std::sqrt(sum_r2);
    return r > 0 ? e / r : (e > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  }
  /// The norm-wise rule.
  bool norm_ok() const { return std::sqrt(sum_e2) <= tol * std::sqrt(sum_r2) + kFloor * u * std::sqrt(sum_m2); }
  /// Every value and the norm within their bounds.
  bool ok() const { return checked > 0 && bad == 0 && nonfinite_mismatch == 0 && norm_ok(); }
  /// Prints two summary lines: `what` (the label of the first line), then "bound".
  void print(const char* what) const {
    std::printf("%-9s: %lld values vs float64: max |y-ref| %.3e, max rel %.3e, ||y-ref||/||ref|| %.3e\n", what,
                (long long)checked, max_abs, max_rel, rel_norm());
    std::printf("%-9s: |y-ref| <= %.0e*|ref| + %.0f*u*mag (u = 2^%d); worst value at %.3g of its bound; "
                "%lld outside, %lld non-finite mismatches%s\n",
                "bound", tol, kFloor, static_cast<int>(std::lround(std::log2(u))), worst_ratio, (long long)bad,
                (long long)nonfinite_mismatch, norm_ok() ? "" : "; norm above its bound");
  }
};

/// Prints "Passed" or "Failed" as the last line and returns the exit code (0 or 1).
inline int finish(bool ok) {
  std::printf("%s\n", ok ? "Passed" : "Failed");
  return ok ? 0 : 1;
}

}  // namespace convred_examples
