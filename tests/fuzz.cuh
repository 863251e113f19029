/// @file tests/fuzz.cuh
/// @brief The differential fuzzer of the GPU suite (namespace convred::fuzz): one random case, its
/// one-line reproducer, its data, and the check of every entry point against the float64 reference.
///
/// A case (`fcase`) names an entry point (fused conv2d_reduce, full-output conv2d, channel_reduce, the
/// packed path pack_filter + conv2d_reduce_packed or, with `wks` > 0, the wgmma kernel's partial mode
/// conv2d_reduce_packed_split, the split path conv2d_reduce_split with its GEMM_K split count, or the
/// planner: device::conv2d_reduce_plan<T, Math> with the library's default family list and the case's
/// plan_options, prepared with a lent workspace, whichever family it picks: direct (depthwise, grouped),
/// tiny, narrow simt, narrow mma.sync, pruned, dilated, grouped, wgmma, mma.sync, simt), an element type, a
/// math (`accurate`: the plan's default math::accurate, plan entry only), a reduction op, the problem,
/// the epilogue (scale of either sign or zero, composed with an optional per-channel scale), bias on/off,
/// element offsets of every pointer from an aligned allocation, the data kind (uniform reals, or small
/// integers: exact sums and real ties) and how many NaN / +-inf / +-0 / huge values are injected, plus the
/// data seed. `to_string` writes it as one line of key=value tokens, `parse` reads it back: that line is the
/// reproducer (CONVRED_FUZZ_REPRO='<line>' convred_tests --test-case='fuzz repro*').
///
/// Every run: fresh data from the seed, outputs poisoned (NaN, or a finite sentinel where NaN results are
/// possible; INT64_MIN for indices) inside a larger allocation whose guard elements before and after must
/// stay untouched, inputs checked unmodified, status success required, then every output compared with
/// the float64 reference (reference::conv2d / reduce_values / channel_reduce): exactly for integer data
/// (NaN where the reference has NaN, same infinities, indices exactly: lowest index on ties, first NaN),
/// else within the rigorous per-output bound of the rounding-error model (err_model: operand rounding of
/// the math, fp32 / fp64 accumulation, epilogue and reduction, built from the sums of absolute terms;
/// selections per channel; docs/tolerances.md), then the aggregate ||y - r|| <= tau ||Sum |terms|||
/// (ieee fp32 1e-5, tf32x3 1e-5, tf32 1e-3, bf16/fp16 1e-2). With `run_opts::determinism` the call is
/// repeated on the same stream and on two streams at once, and all outputs must be bitwise identical.
///
/// Plan cases also record the family the plan picked (`result::family`: "direct depthwise", "direct grouped",
/// "tiny", "narrow simt", "narrow mma.sync", "pruned", "dilated", "grouped", "wgmma", "mma.sync" or "simt"; plan_family
/// gives it without a GPU)
/// and check that the lent workspace is not written past its end and that runs leave its prepared bytes unchanged; with
/// `run_opts::determinism` the later launches each bind a scratch of their own (conv2d_reduce_plan::bind).
///
/// The runners live in five translation units (test_fuzz_simt.cu: SIMT fused and full conv2d;
/// test_fuzz_mma_sync.cu: mma.sync fused and the packed path; test_fuzz_channel.cu: channel_reduce;
/// test_fuzz_split.cu: the split path; test_fuzz_plan.cu: the planner), each
/// instantiating only the (type, math, op) combinations of `supported()`: few kernels, so they compile fast.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <convred/device/plan_options.cuh>
#include <convred/functional.cuh>
#include <convred/numeric.cuh>
#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>
#include <convred/status.cuh>

#include "test_util.cuh"

namespace convred::fuzz {

/// Entry point of a case.
enum class entry : int { fused, conv2d, channel, packed, split, plan };
/// Element type of a case.
enum class elem : int { f32, f64, f16, bf16 };
/// Math of a case (ieee: the SIMT kernels; the others: tensor cores; accurate: math::accurate, the plan's
/// default, which runs tf32x3's kernels or exact FMA: entry plan only).
enum class mathk : int { ieee, tf32, tf32x3, bf16, fp16, accurate };
/// Reduction op of a case (range: the user-written test::range_op).
enum class opk : int { min, max, sum, mean, argmin, argmax, range };

inline const char* name(entry e) {
  const char* n[] = {"fused", "conv2d", "channel", "packed", "split", "plan"};
  return n[static_cast<int>(e)];
}
inline const char* name(elem e) {
  const char* n[] = {"float", "double", "half", "bf16"};
  return n[static_cast<int>(e)];
}
inline const char* name(mathk e) {
  const char* n[] = {"ieee", "tf32", "tf32x3", "bf16", "fp16", "accurate"};
  return n[static_cast<int>(e)];
}
inline const char* name(opk e) {
  const char* n[] = {"min", "max", "sum", "mean", "argmin", "argmax", "range"};
  return n[static_cast<int>(e)];
}

/// One fuzz case (see the file comment). For channel cases only N, C, H, W and the layout of `p` count.
struct fcase {
  entry e = entry::fused;
  elem t = elem::f32;
  mathk m = mathk::ieee;
  opk o = opk::min;
  conv2d_problem p;
  bool bias = true;
  float scale = 1.0f;  ///< epilogue scale (any sign, or zero)
  bool pcs = false;    ///< compose a per-channel scale before the scale
  int off_x = 0, off_w = 0, off_b = 0, off_y = 0, off_i = 0;  ///< element offsets from an aligned base
  bool integer = false;                                        ///< small-integer data (exact, ties)
  int n_nan = 0, n_inf = 0, n_zero = 0, n_huge = 0;            ///< injected special values
  std::uint64_t seed = 1;                                      ///< data seed
  int ks = 1;                                                  ///< GEMM_K splits (entry split only)
  /// entry packed only: 0 runs conv2d_reduce_packed (fused); w > 0 the partial mode,
  /// conv2d_reduce_packed_split with 1 + (w - 1) % max_packed_k_splits GEMM_K splits (at most the
  /// problem's stages per pass where the wgmma kernel serves it)
  int wks = 0;
  /// entry plan only: the planner's options (default: its own choices); the runner bounds the error with
  /// the plan's GEMM_K splits (ks set from its configuration)
  device::plan_options po;
};

/// True if a case's plan options are the planner's defaults.
inline bool default_plan_options(const device::plan_options& o) {
  return o.tiles == device::wgmma_tiling::model && o.pass == device::wgmma_pass_mode::model && o.splits == 0 &&
         o.tail == 0 && o.tail_splits == 0 && o.pingpong == device::wgmma_pingpong_mode::model && o.dilated_residual == 0;
}

/// True if a case injects NaN or an infinity (outputs may then hold NaN legitimately).
inline bool nonfinite(const fcase& c) { return c.n_nan > 0 || c.n_inf > 0; }

/// The (entry, type, math, op) combinations the runners instantiate (kept few for compile time).
inline bool supported(entry e, elem t, mathk m, opk o) {
  if (m == mathk::accurate && e != entry::plan) return false;
  switch (e) {
    case entry::fused:
      if (m == mathk::ieee) {
        if (t == elem::f32) return true;  // every op
        if (t == elem::f64) return o == opk::argmin || o == opk::sum;
        if (t == elem::f16) return o == opk::argmax || o == opk::mean;
        return o == opk::min || o == opk::argmin;
      }
      [[fallthrough]];
    case entry::packed:
      if (e == entry::packed && t != elem::f32) return false;
      if (t == elem::f16) return e == entry::fused && m == mathk::fp16 && o == opk::argmin;
      if (t == elem::bf16) return e == entry::fused && m == mathk::bf16 && o == opk::argmax;
      if (t != elem::f32) return false;
      switch (m) {
        case mathk::tf32: return o == opk::argmin || o == opk::sum;
        case mathk::tf32x3: return o == opk::argmin || o == opk::max || o == opk::mean;
        case mathk::bf16: return o == opk::argmax || o == opk::min;
        case mathk::fp16: return o == opk::argmin || o == opk::range;
        default: return false;
      }
    case entry::conv2d:
      if (m == mathk::ieee) return o == opk::min;  // op unused: min stands for "no op"
      if (t == elem::f16) return m == mathk::fp16 && o == opk::min;
      return t == elem::f32 && o == opk::min;
    case entry::split:  // conv2d_reduce_split with the SIMT (ieee) or mma.sync policy
      if (m == mathk::ieee) return (t == elem::f32 && (o == opk::min || o == opk::argmax || o == opk::mean)) ||
                                   (t == elem::f64 && o == opk::sum);
      if (t == elem::f16) return m == mathk::fp16 && o == opk::argmin;
      if (t != elem::f32) return false;
      switch (m) {
        case mathk::tf32: return o == opk::argmin || o == opk::sum;
        case mathk::tf32x3: return o == opk::argmin || o == opk::mean;
        case mathk::bf16: return o == opk::argmax || o == opk::range;
        default: return false;
      }
    case entry::plan:  // conv2d_reduce_plan<T, Math>: every op on some math, the families' kernels per combination
      if (t == elem::f16) return m == mathk::fp16 && o == opk::argmin;
      if (t == elem::bf16) return m == mathk::bf16 && o == opk::argmax;
      if (t != elem::f32) return false;
      switch (m) {
        case mathk::tf32: return o == opk::argmin || o == opk::sum;
        case mathk::accurate: return o == opk::argmax || o == opk::mean;
        case mathk::bf16: return o == opk::max;
        case mathk::ieee: return o == opk::min || o == opk::range;
        default: return false;
      }
    case entry::channel:
      if (m != mathk::ieee) return false;
      if (t == elem::f32) return true;
      if (t == elem::f64) return o == opk::argmin || o == opk::sum;
      if (t == elem::f16) return o == opk::argmax || o == opk::mean;
      return o == opk::min || o == opk::argmin;
  }
  return false;
}

/// The one-line reproducer of a case: key=value tokens, read back by parse().
inline std::string to_string(const fcase& c) {
  std::ostringstream s;
  const conv2d_problem& p = c.p;
  s << "entry=" << name(c.e) << " T=" << name(c.t) << " math=" << name(c.m) << " op=" << name(c.o) << " N=" << p.N
    << " C=" << p.C << " H=" << p.H << " W=" << p.W << " K=" << p.K << " R=" << p.R << " S=" << p.S << " pad=" << p.pad_h
    << ',' << p.pad_w << " stride=" << p.stride_h << ',' << p.stride_w << " dil=" << p.dil_h << ',' << p.dil_w
    << " groups=" << p.groups << " layout=" << (p.x_layout == layout::nhwc ? "nhwc" : "nchw") << " bias=" << c.bias
    << " scale=" << c.scale << " pcs=" << c.pcs << " off=" << c.off_x << ',' << c.off_w << ',' << c.off_b << ','
    << c.off_y << ',' << c.off_i << " data=" << (c.integer ? "int" : "real") << " nan=" << c.n_nan << " inf=" << c.n_inf
    << " zero=" << c.n_zero << " huge=" << c.n_huge << " seed=" << c.seed;
  if (c.e == entry::split) s << " ks=" << c.ks;
  if (c.wks > 0) s << " wks=" << c.wks;
  if (c.e == entry::plan && !default_plan_options(c.po))
    s << " popt=" << c.po.splits << ',' << static_cast<int>(c.po.tiles) << ',' << static_cast<int>(c.po.pass) << ','
      << c.po.tail << ',' << c.po.tail_splits;
  if (c.e == entry::plan && c.po.dilated_residual != 0) s << " dres=" << c.po.dilated_residual;
  return s.str();
}

/// Reads a line written by to_string (tokens in any order; missing ones keep their defaults). False on
/// an unknown key or value.
inline bool parse(const std::string& line, fcase& c) {
  std::istringstream in(line);
  std::string tok;
  auto pick = [](const std::string& v, auto& out, int n, auto namer) {
    for (int i = 0; i < n; ++i)
      if (v == namer(static_cast<std::remove_reference_t<decltype(out)>>(i))) {
        out = static_cast<std::remove_reference_t<decltype(out)>>(i);
        return true;
      }
    return false;
  };
  auto pair = [](const std::string& v, std::int64_t& a, std::int64_t& b) {
    return std::sscanf(v.c_str(), "%lld,%lld", reinterpret_cast<long long*>(&a), reinterpret_cast<long long*>(&b)) == 2;
  };
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) return false;
    const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    auto num = [&] { return std::stoll(v); };
    conv2d_problem& p = c.p;
    bool ok = true;
    if (k == "entry") ok = pick(v, c.e, 6, [](entry x) { return std::string(name(x)); });
    else if (k == "T") ok = pick(v, c.t, 4, [](elem x) { return std::string(name(x)); });
    else if (k == "math") ok = pick(v, c.m, 6, [](mathk x) { return std::string(name(x)); });
    else if (k == "op") ok = pick(v, c.o, 7, [](opk x) { return std::string(name(x)); });
    else if (k == "N") p.N = num();
    else if (k == "C") p.C = num();
    else if (k == "H") p.H = num();
    else if (k == "W") p.W = num();
    else if (k == "K") p.K = num();
    else if (k == "R") p.R = num();
    else if (k == "S") p.S = num();
    else if (k == "pad") ok = pair(v, p.pad_h, p.pad_w);
    else if (k == "stride") ok = pair(v, p.stride_h, p.stride_w);
    else if (k == "dil") ok = pair(v, p.dil_h, p.dil_w);
    else if (k == "groups") p.groups = num();
    else if (k == "layout") p.x_layout = v == "nhwc" ? layout::nhwc : layout::nchw;
    else if (k == "bias") c.bias = num() != 0;
    else if (k == "scale") c.scale = std::stof(v);
    else if (k == "pcs") c.pcs = num() != 0;
    else if (k == "off") ok = std::sscanf(v.c_str(), "%d,%d,%d,%d,%d", &c.off_x, &c.off_w, &c.off_b, &c.off_y, &c.off_i) == 5;
    else if (k == "data") c.integer = v == "int";
    else if (k == "nan") c.n_nan = static_cast<int>(num());
    else if (k == "inf") c.n_inf = static_cast<int>(num());
    else if (k == "zero") c.n_zero = static_cast<int>(num());
    else if (k == "huge") c.n_huge = static_cast<int>(num());
    else if (k == "seed") c.seed = std::stoull(v);
    else if (k == "ks") c.ks = static_cast<int>(num());
    else if (k == "wks") c.wks = static_cast<int>(num());
    else if (k == "popt") {  // splits,tiles,pass,tail,tail_splits (device::plan_options)
      int tiles = 0, pass = 0;
      long long tail = 0;
      int used = -1;  // the whole value must be read: no trailing characters
      ok = std::sscanf(v.c_str(), "%d,%d,%d,%lld,%d%n", &c.po.splits, &tiles, &pass, &tail, &c.po.tail_splits, &used) == 5 &&
           used == static_cast<int>(v.size()) && tiles >= 0 && tiles <= 3 && pass >= 0 && pass <= 2;
      c.po.tiles = static_cast<device::wgmma_tiling>(tiles), c.po.pass = static_cast<device::wgmma_pass_mode>(pass);
      c.po.tail = tail;
    } else if (k == "dres") c.po.dilated_residual = static_cast<int>(num());  // (device::plan_options::dilated_residual)
    else return false;
    if (!ok) return false;
  }
  return true;
}

/// Options of one run.
struct run_opts {
  bool determinism = false;  ///< repeat the launch (same stream, then two streams at once): bitwise equal
  std::vector<double>* y_out = nullptr;  ///< conv entries: receives y (or the full output) as double
};

/// Outcome of one run: ok, else the first problem found; `kernel` names the kernel (path) that ran.
struct result {
  bool ok = true;
  std::string why;
  std::string kernel;
  std::string family;  ///< entry plan: the family the plan picked (as plan_family names it); else empty
};

// ---- data ------------------------------------------------------------------------------------------

/// The magnitude of an injected "huge" value for element type t and math m: large, yet no product of two
/// of them, nor a sum of a few such products times the epilogue gain, overflows the compute or output
/// type (fp16 operands stop at 65504; __half outputs too).
inline double huge_value(elem t, mathk m, entry e) {
  if (t == elem::f64) return e == entry::channel ? 1e300 : 1e100;
  if (t == elem::f16) return e == entry::channel ? 1024.0 : 64.0;
  if (m == mathk::fp16) return 1024.0;
  return e == entry::channel ? 1e30 : 1e15;
}

/// Host data of a case: x, w (KCRS), b (K), the per-channel scales (K for conv entries, C for channel).
template <class T>
struct host_data {
  std::vector<T> x, w, b;
  std::vector<float> pcs;
};

/// Injects the case's special values at random positions of v (NaN, alternating +inf / -inf, alternating
/// +0 / -0, alternating +huge / -huge), drawn with gen.
template <class T>
void inject(std::vector<T>& v, int nan, int inf, int zero, int huge, double hv, std::mt19937_64& gen) {
  if (v.empty()) return;
  std::uniform_int_distribution<std::size_t> at(0, v.size() - 1);
  for (int i = 0; i < nan; ++i) v[at(gen)] = from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  for (int i = 0; i < inf; ++i) v[at(gen)] = from_compute<T>((i % 2 ? -1 : 1) * std::numeric_limits<double>::infinity());
  for (int i = 0; i < zero; ++i) v[at(gen)] = from_compute<T>(i % 2 ? -0.0 : 0.0);
  for (int i = 0; i < huge; ++i) v[at(gen)] = from_compute<T>((i % 2 ? -hv : hv));
}

/// Fresh data for a case (deterministic in c.seed). Special values go to x, w and b in turn.
template <class T>
host_data<T> make_data(const fcase& c) {
  host_data<T> d;
  const conv2d_problem& p = c.p;
  const bool conv = c.e != entry::channel;
  const std::size_t nx = static_cast<std::size_t>(p.N * p.C * p.H * p.W);
  const std::size_t nw = conv ? static_cast<std::size_t>(p.w_elements()) : 0, nb = conv ? static_cast<std::size_t>(p.K) : 0;
  const std::size_t nc = static_cast<std::size_t>(conv ? p.K : p.C);
  const std::uint64_t s = c.seed * 7919;
  if (c.integer) {
    d.x = test::random_int_vector<T>(nx, s + 1, conv ? -2 : -20, conv ? 2 : 20);
    d.w = test::random_int_vector<T>(nw, s + 2, -1, 1);
    d.b = test::random_int_vector<T>(nb, s + 3, -2, 2);
  } else {
    d.x = test::random_vector<T>(nx, s + 1);
    d.w = test::random_vector<T>(nw, s + 2);
    d.b = test::random_vector<T>(nb, s + 3);
  }
  std::mt19937_64 gen(s + 4);
  d.pcs.assign(nc, 1.0f);
  if (c.pcs) {
    const float exact[] = {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f, 0.0f, 1.5f};
    std::uniform_real_distribution<float> real(-2.0f, 2.0f);
    std::uniform_int_distribution<int> pick(0, 7);
    for (auto& v : d.pcs) v = c.integer ? exact[pick(gen)] : real(gen);
  }
  const double hv = huge_value(c.t, c.m, c.e);
  // split each count over x, w, b (x first): e.g. 3 NaN -> 2 in x, 1 in w
  auto part = [](int n, int i, int parts) { return n / parts + (i < n % parts ? 1 : 0); };
  const int parts = conv ? 3 : 1;
  std::vector<T>* dst[] = {&d.x, &d.w, &d.b};
  for (int i = 0; i < parts; ++i)
    inject(*dst[i], part(c.n_nan, i, parts), part(c.n_inf, i, parts), part(c.n_zero, i, parts), part(c.n_huge, i, parts),
           hv, gen);
  return d;
}

/// The epilogue every fuzz kernel is instantiated with: per_channel_scale (all ones when the case has
/// none) composed with scale.
using fuzz_epi = epilogue::compose<epilogue::per_channel_scale<float>, epilogue::scale<float>>;

// ---- device buffers --------------------------------------------------------------------------------

/// Guard elements before and after every buffer (checked untouched after the call).
inline constexpr std::size_t guard = 64;

/// A device allocation holding `off` + n elements + guards, filled from a host image.
template <class T>
struct dbuf {
  T* base = nullptr;
  std::size_t total = 0;
  std::size_t off = 0;
  dbuf() = default;
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() {
    if (base) cudaFree(base);
  }
  /// Allocates guard + off + n + guard elements and copies `image` (that many elements) in.
  bool init(const std::vector<T>& image, std::size_t offset) {
    off = guard + offset;
    total = image.size();
    if (total == 0) return true;
    if (cudaMalloc(&base, total * sizeof(T)) != cudaSuccess) return false;
    return cudaMemcpy(base, image.data(), total * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  T* ptr() { return base ? base + off : nullptr; }
  std::vector<T> read() const {
    std::vector<T> h(total);
    if (total) cudaMemcpy(h.data(), base, total * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

/// The host image of a buffer: `fill` everywhere, `data` at guard + offset.
template <class T>
std::vector<T> image_of(const std::vector<T>& data, std::size_t n, std::size_t offset, T fill) {
  std::vector<T> v(guard + offset + n + guard, fill);
  std::copy(data.begin(), data.end(), v.begin() + static_cast<std::ptrdiff_t>(guard + offset));
  return v;
}

template <class T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// True if two host images are bitwise equal.
template <class T>
bool equal_images(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Checks that an output image was written exactly in [guard+off, guard+off+n) (no poison left inside, no
/// element outside changed); appends to why on failure.
template <class T>
bool written_exactly(const std::vector<T>& img, std::size_t n, std::size_t offset, T poison, const char* what,
                     std::string& why) {
  const std::size_t b = guard + offset, e = b + n;
  std::size_t outside = 0, unwritten = 0, first_un = 0;
  for (std::size_t i = 0; i < img.size(); ++i) {
    const bool same = same_bytes(img[i], poison);
    if (i < b || i >= e) outside += !same;
    else if (same && unwritten++ == 0) first_un = i - b;
  }
  if (outside == 0 && unwritten == 0) return true;
  std::ostringstream s;
  s << what << ": " << outside << " element(s) written outside the output (guard / offset), " << unwritten
    << " output element(s) left unwritten (first at " << first_un << ")";
  why = s.str();
  return false;
}

// ---- the comparison --------------------------------------------------------------------------------
//
// The error model of docs/tolerances.md. Every finite output is checked against a rigorous worst-case
// bound built from the sums of absolute terms it was computed from (never from |reference|, which
// cancellation can make arbitrarily small): per channel value v_k = e(conv + b) of a pixel,
//
//   |v^_k - v_k| <= e_k = g_k (E_op + gamma(P n + s + 3, u_acc) (Axw + E_op + |b_k|)
//                              + gamma(n + 3, u64) (Axw + |b_k|))
//
// with g_k = |scale * pcs_k|, Axw = conv(|x|, |w|), n taps (C/groups R S), P products per tap (3 for
// tf32x3), s GEMM_K splits, E_op the operand-rounding error (eps_op Axw for normal operands), and the
// reference's own float64 error as the last term; then per op: sums add e_k and the fp32 reduction's
// gamma(K, u), selections take the interval [min_k(v_k - e_k), min_k(v_k + e_k)] (min; max alike), an index
// is accepted when its channel's reference value can be the extreme within the bounds. On top, an aggregate
// check ||y - r||_2 <= tau ||mag||_2 with mag the outputs' absolute-term sums and tau the per-math tolerance.

/// gamma_n(u) = n u / (1 - n u): the bound on |prod (1 + d_i)^(+-1) - 1| for n factors |d_i| <= u (Higham,
/// "Accuracy and Stability of Numerical Algorithms", 2nd ed., Lemma 3.1); +inf when n u >= 1.
inline double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
}

/// Unit roundoffs (half an ulp of 1): fp32, fp64, and the tensor-core operand formats (TF32: 10 stored
/// mantissa bits, as fp16; bf16: 7).
inline constexpr double u_fp32 = 0x1p-24, u_fp64 = 0x1p-53, u_tf32 = 0x1p-11, u_bf16 = 0x1p-8, u_fp16 = 0x1p-11;

/// The rounding-error model of one (element type, math): see docs/tolerances.md for each constant's source.
struct err_model {
  double u_op = 0;           ///< unit roundoff of the operands' rounding to the math's format (0: exact)
  double min_normal_op = 0;  ///< smallest normal number of that format (below it: absolute error eta_op)
  double eta_op = 0;         ///< largest absolute rounding error of an operand below min_normal_op
  double eps_op = 0;         ///< relative error of one product from its operands' rounding (normal operands)
  int products = 1;          ///< products accumulated per tap (3 for tf32x3: big*big, big*small, small*big)
  double u_acc = 0;          ///< relative error charged per addition of the conv accumulation
  double u_c = 0;            ///< unit roundoff of the compute type (bias, epilogue, channel reduction)
  double u_T = 0;            ///< unit roundoff of the output's final rounding to T (0: T is the compute type)
  double eta_T = 0;          ///< absolute slack of that rounding (results in T's subnormal range)
  double tau = 0;            ///< aggregate check: ||y - r||_2 <= tau * ||mag||_2
};

/// Smallest positive subnormal of T (absolute slack for results rounded into T's subnormal range).
template <class T>
double tiny() {
  if constexpr (std::is_same_v<T, __half>) return std::ldexp(1.0, -24);
  else return static_cast<double>(std::numeric_limits<std::conditional_t<std::is_same_v<T, double>, double, float>>::denorm_min());
}

/// The error model of element type t (the C++ type T) under math m (docs/tolerances.md, "The error model").
template <class T>
err_model error_model(elem t, mathk m) {
  err_model e;
  e.u_c = t == elem::f64 ? u_fp64 : u_fp32;
  e.u_acc = e.u_c;  // ieee: FFMA / DFMA chains and fp32 / fp64 adds, round to nearest
  e.u_T = t == elem::f16 ? u_fp16 : t == elem::bf16 ? u_bf16 : 0.0;
  e.eta_T = 2 * tiny<T>();
  const double ieee_rel[] = {test::tol::ieee<float>(), test::tol::ieee<double>(), test::tol::ieee<__half>(),
                             test::tol::ieee<__nv_bfloat16>()};
  const double mt[] = {0, test::tol::tf32, test::tol::tf32x3, test::tol::bf16, test::tol::fp16, test::tol::tf32x3};
  e.tau = std::max(ieee_rel[static_cast<int>(t)], mt[static_cast<int>(m)]);
  if (m == mathk::ieee) return e;
  // tensor cores: products exact, accumulation in fp32 truncating at alignment and normalization (Fasi et
  // al. 2021): at most 2 ulps (2^-22) per term
  e.u_acc = 0x1p-22;
  // operands already exact in the math's format are not rounded (half data under fp16 or tf32 maths,
  // bf16 data under bf16 or tf32 maths)
  const bool exact = (t == elem::f16 && m != mathk::bf16) || (t == elem::bf16 && m != mathk::fp16);
  if (exact) return e;
  switch (m) {
    case mathk::tf32:  // round to nearest to 11 significant bits, fp32's exponent range (flush: eta = 2^-126)
      e.u_op = u_tf32, e.min_normal_op = 0x1p-126, e.eta_op = 0x1p-126;
      break;
    case mathk::bf16:
      e.u_op = u_bf16, e.min_normal_op = 0x1p-126, e.eta_op = 0x1p-126;
      break;
    case mathk::fp16:  // fp16 subnormals are kept (spacing 2^-24, so half of it is the largest error)
      e.u_op = u_fp16, e.min_normal_op = 0x1p-14, e.eta_op = 0x1p-25;
      break;
    case mathk::accurate:  // math::accurate: tf32x3's kernels (or exact FMA, within this bound too)
    case mathk::tf32x3: {  // x = big + small + r, |small| <= u(1+u)|x|, |r| <= u^2 |x|; the dropped
      const double u = u_tf32;  // small*small and the r terms: u^2 (3 + 4u + 2u^2) |x w|
      e.eps_op = u * u * (3 + 4 * u + 2 * u * u);
      e.products = 3;
      return e;
    }
    default: break;
  }
  e.eps_op = e.u_op * (2 + e.u_op);  // |x~ w~ - x w| <= (2u + u^2) |x w|
  return e;
}

/// Bound on |v^ - v| for one channel value v = e(conv + b) of one pixel (see the section comment): g the
/// epilogue's gain |scale * pcs_k|, axw = conv(|x|, |w|), eop the operand-rounding bound (eps_op * axw for
/// normal operands), absb = |b_k| (0 without bias), taps = C/groups * R * S, splits the GEMM_K splits.
inline double channel_error(const err_model& em, double g, double axw, double eop, double absb, double taps,
                            double splits) {
  if (g == 0) return 0;  // v^ = v = 0 exactly (finite conv)
  return g * (eop + gamma_n(em.products * taps + splits + 3, em.u_acc) * (axw + eop + absb) +
              gamma_n(taps + 3, u_fp64) * (axw + absb));
}

/// One channel of one pixel as the oracle sees it: reference value v, error bound e, magnitude mag
/// (g (axw + |b|): the absolute-term sum the error scales with).
struct chan_ref {
  double v = 0, e = 0, mag = 0;
};

inline bool same_value(double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return got == want;
}

/// True for integer data with an exact epilogue, no huge values and an op without a division: every
/// result is then exact (the only rounding is the final conversion to T).
inline bool exact_case(const fcase& c) { return c.integer && c.n_huge == 0 && c.o != opk::mean; }

/// ||got - ref||_2 / ||mag||_2 in float64: as test::rel_norm_error (NaN / inf on one side only: +inf;
/// matching NaN / same infinity: 0) but relative to the magnitudes (absolute-term sums), not to |ref|.
template <class T>
double norm_error_vs_magnitude(const std::vector<T>& got, const std::vector<double>& ref, const std::vector<double>& mag) {
  if (got.size() != ref.size() || mag.size() != ref.size()) return std::numeric_limits<double>::infinity();
  // the squares are summed scaled by the largest term, so that outputs near the double range (huge values
  // in double data: 1e300) do not overflow them (inf / inf was NaN, which failed the check)
  double scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    if (std::isnan(g) || std::isnan(r) || std::isinf(g) || std::isinf(r)) {
      if (same_value(g, r)) continue;
      return std::numeric_limits<double>::infinity();
    }
    scale = std::max({scale, std::abs(g - r), std::isfinite(mag[i]) ? std::abs(mag[i]) : 0.0});
  }
  if (!std::isfinite(scale)) return std::numeric_limits<double>::infinity();  // g - r overflowed
  if (scale == 0) return 0;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    if (std::isnan(g) || std::isnan(r) || std::isinf(g) || std::isinf(r)) continue;  // matched above
    const double d = (g - r) / scale, m = std::isfinite(mag[i]) ? mag[i] / scale : 0.0;
    num += d * d, den += m * m;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num) * scale;
}

/// The interval a reduced output must lie in (before the final rounding to T), and its magnitude.
struct reduced_bound {
  double lo = 0, hi = 0, mag = 0;
};

/// The bound of a reduced output with finite reference value r over K channels at(k) (chan_ref), for op o
/// (see the section comment). Non-finite channels are skipped (they cannot be selected against a finite
/// result; a sum with one is not finite).
template <class At>
reduced_bound reduce_bound(opk o, const err_model& em, std::int64_t K, double r, At&& at) {
  reduced_bound b;
  const double inf = std::numeric_limits<double>::infinity();
  double s_e = 0, s_v = 0, s_mag = 0;
  double min_lo = inf, min_hi = inf, max_lo = -inf, max_hi = -inf, mag_min = 0, mag_max = 0, vmin = inf, vmax = -inf;
  for (std::int64_t k = 0; k < K; ++k) {
    const chan_ref ch = at(k);
    if (!std::isfinite(ch.v)) continue;
    s_e += ch.e, s_v += std::abs(ch.v), s_mag += ch.mag;
    min_lo = std::min(min_lo, ch.v - ch.e), min_hi = std::min(min_hi, ch.v + ch.e);
    max_lo = std::max(max_lo, ch.v - ch.e), max_hi = std::max(max_hi, ch.v + ch.e);
    if (ch.v < vmin) vmin = ch.v, mag_min = ch.mag;  // the reference's extreme (lowest index on ties)
    if (ch.v > vmax) vmax = ch.v, mag_max = ch.mag;
  }
  const double red = gamma_n(double(K), em.u_c + u_fp64);  // the kernel's and the reference's K-term sums
  switch (o) {
    case opk::sum:
    case opk::mean: {
      double B = s_e + red * (s_v + s_e);
      b.mag = s_mag;
      if (o == opk::mean) {  // one more rounding: the division by K (kernel and reference)
        B = B / double(K) * (1 + em.u_c) + (em.u_c + u_fp64) * std::abs(r);
        b.mag /= double(K);
      }
      b.lo = r - B, b.hi = r + B;
      break;
    }
    case opk::min:
    case opk::argmin: b.lo = min_lo, b.hi = min_hi, b.mag = mag_min; break;
    case opk::max:
    case opk::argmax: b.lo = max_lo, b.hi = max_hi, b.mag = mag_max; break;
    case opk::range: {  // max - min, one more rounding (the subtraction)
      const double lo = max_lo - min_hi, hi = max_hi - min_lo, slack = (em.u_c + u_fp64) * std::max(std::abs(lo), std::abs(hi));
      b.lo = lo - slack, b.hi = hi + slack, b.mag = mag_max + mag_min;
      break;
    }
  }
  return b;
}

/// Checks `npix` reduced outputs y (idx for index ops) against the float64 reference: at(m, k) gives
/// the chan_ref of channel k (of K) at pixel m. Exact data (exact_case) and non-finite references must
/// match exactly (indices too: lowest on ties, first NaN); every other output must lie in its bound
/// (reduce_bound, widened by the final rounding to T), an index's channel must be able to be the extreme
/// and carry the returned value; then the aggregate ||y - r|| <= tau ||mag||. Returns "" or the first
/// mismatch.
template <class T, class Op, class At>
std::string check_reduction(const fcase& c, const err_model& em, std::int64_t npix, std::int64_t K, At&& at,
                            const std::vector<T>& y, const std::vector<std::int64_t>& idx) {
  const bool exact = exact_case(c);
  std::vector<double> yref(y.size()), mag(y.size(), 0.0);
  std::size_t bad = 0;
  std::ostringstream first;
  auto note = [&](std::int64_t m, const char* what, double got, double want, std::int64_t gi, std::int64_t wi,
                  double lo = 0, double hi = 0) {
    if (bad++ == 0) {
      first << what << " at pixel " << m << ": got " << got << " want " << want << " (index " << gi << ", reference "
            << wi << ")";
      if (lo < hi) first << ", allowed [" << lo << ", " << hi << "]";
    }
  };
  for (std::int64_t m = 0; m < npix; ++m) {
    const reference::reduced r = reference::reduce_values(Op{}, K, [&](std::int64_t k) { return at(m, k).v; });
    const auto um = static_cast<std::size_t>(m);
    yref[um] = r.value;
    const double got = to_double(y[um]);
    const std::int64_t gi = Op::has_index ? idx[um] : -1;
    if (exact || !std::isfinite(r.value)) {
      // exact data, or a non-finite result: the value rounded to T and the index exactly
      const double want = exact ? to_double(from_compute<T>(r.value)) : r.value;
      yref[um] = want;  // matched exactly: no part in the aggregate
      if (!same_value(got, want)) note(m, "value", got, want, gi, r.index);
      else if (Op::has_index && gi != r.index) note(m, "index", got, want, gi, r.index);
      continue;
    }
    const reduced_bound b = reduce_bound(c.o, em, K, r.value, [&](std::int64_t k) { return at(m, k); });
    mag[um] = b.mag;
    const double slack = em.u_T * std::max(std::abs(b.lo), std::abs(b.hi)) + em.eta_T;
    if (!(got >= b.lo - slack && got <= b.hi + slack)) {
      note(m, "value", got, r.value, gi, r.index, b.lo - slack, b.hi + slack);
      continue;
    }
    if constexpr (Op::has_index) {
      if (gi < 0 || gi >= K) {
        note(m, "index out of range", got, r.value, gi, r.index);
        continue;
      }
      // the chosen channel's reference value can be the extreme (within its own and every other
      // channel's bound), and y is that channel's computed value
      const chan_ref ch = at(m, gi);
      const bool can_be_best = std::is_same_v<Op, op::argmin> ? ch.v - ch.e <= b.hi : ch.v + ch.e >= b.lo;
      if (!(std::isfinite(ch.v) && can_be_best &&
            std::abs(got - ch.v) <= ch.e + em.u_T * (std::abs(ch.v) + ch.e) + em.eta_T))
        note(m, "index (value of the chosen channel)", got, r.value, gi, r.index);
    }
  }
  if (bad) {
    std::ostringstream s;
    s << bad << " pixel(s) wrong; first: " << first.str();
    return s.str();
  }
  const double ne = norm_error_vs_magnitude(y, yref, mag);
  if (!(ne <= em.tau)) {
    std::ostringstream s;
    s << "norm error relative to the absolute-term sums " << ne << " > " << em.tau;
    return s.str();
  }
  return "";
}

/// The float64 reference of a conv case and what its error bounds need (full output, x's layout).
struct conv_ref {
  std::vector<double> vals;  ///< e(conv(x, w) + b)
  std::vector<double> axw;   ///< conv(|x|, |w|) (no bias)
  std::vector<double> eop;   ///< operand-rounding bound per output when an operand is subnormal in the
                             ///< math's format; empty: eps_op * axw
  std::vector<double> gain;  ///< |scale * pcs_k| per channel k
  std::vector<double> absb;  ///< |b_k| per channel (zeros without bias)
  double taps = 0;           ///< C/groups * R * S
  double splits = 0;         ///< GEMM_K splits (split and plan entries: ks; packed partial mode: at most wks)
  /// The chan_ref of full-output element i (channel k).
  chan_ref at(const err_model& em, std::size_t i, std::int64_t k) const {
    const auto uk = static_cast<std::size_t>(k);
    const double op_err = eop.empty() ? em.eps_op * axw[i] : eop[i];
    return {vals[i], channel_error(em, gain[uk], axw[i], op_err, absb[uk], taps, splits), gain[uk] * (axw[i] + absb[uk])};
  }
};

/// The float64 reference of a conv case (he: the host epilogue) with the magnitudes of model em.
template <class T, class HostEpi>
conv_ref conv_reference(const fcase& c, const host_data<T>& d, HostEpi he, const err_model& em) {
  const conv2d_problem& p = c.p;
  conv_ref r;
  r.vals.assign(static_cast<std::size_t>(p.out_elements()), 0.0);
  r.axw.assign(r.vals.size(), 0.0);
  reference::conv2d(p, d.x.data(), d.w.data(), c.bias ? d.b.data() : nullptr, r.vals.data(), he);
  std::vector<double> ax(d.x.size()), aw(d.w.size());
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::abs(to_double(d.x[i]));
  for (std::size_t i = 0; i < aw.size(); ++i) aw[i] = std::abs(to_double(d.w[i]));
  reference::conv2d(p, ax.data(), aw.data(), static_cast<const double*>(nullptr), r.axw.data());
  r.taps = double(p.C / p.groups * p.R * p.S);
  r.splits = double((c.e == entry::split || c.e == entry::plan ? c.ks : 0) + c.wks);
  r.gain.resize(static_cast<std::size_t>(p.K));
  r.absb.assign(static_cast<std::size_t>(p.K), 0.0);
  for (std::size_t k = 0; k < r.gain.size(); ++k) {
    r.gain[k] = std::abs(double(d.pcs[k]) * double(c.scale));
    if (c.bias) r.absb[k] = std::abs(to_double(d.b[k]));
  }
  // an operand below the smallest normal of the math's format: its rounding error is absolute (eta_op),
  // not relative; bound the products' error exactly: conv(|x| + ex, |w| + ew) - conv(|x|, |w|)
  auto sub = [&](double a) { return a != 0 && a < em.min_normal_op; };
  if (em.u_op > 0 && (std::any_of(ax.begin(), ax.end(), sub) || std::any_of(aw.begin(), aw.end(), sub))) {
    auto widen = [&](std::vector<double>& v) {
      for (double& a : v) a += a >= em.min_normal_op || !std::isfinite(a) ? em.u_op * a : std::min(a, em.eta_op);
    };
    widen(ax), widen(aw);
    r.eop.assign(r.vals.size(), 0.0);
    reference::conv2d(p, ax.data(), aw.data(), static_cast<const double*>(nullptr), r.eop.data());
    const double g2 = gamma_n(r.taps, u_fp64);  // both float64 convs' own rounding
    for (std::size_t i = 0; i < r.eop.size(); ++i) r.eop[i] = r.eop[i] - r.axw[i] + g2 * (r.eop[i] + r.axw[i]);
  }
  return r;
}

/// Checks the reduced outputs y (idx for index ops) of a conv case against its reference (conv_reference).
template <class T, class Op>
std::string check_reduced(const fcase& c, const err_model& em, const conv_ref& ref, const std::vector<T>& y,
                          const std::vector<std::int64_t>& idx) {
  const conv2d_problem& p = c.p;
  const std::int64_t P = p.P(), Q = p.Q();
  auto at = [&](std::int64_t m, std::int64_t k) {
    const std::int64_t n = m / (P * Q), i = m / Q % P, j = m % Q;
    return ref.at(em, static_cast<std::size_t>(reference::out_offset(p, n, k, i, j)), k);
  };
  return check_reduction<T, Op>(c, em, p.N * P * Q, p.K, at, y, idx);
}

/// Checks a full conv output (same layout as ref.vals) against its reference: every element within its
/// channel_error (widened by the final rounding to T), exactly for exact data and non-finite references,
/// then the aggregate ||out - vals|| <= tau ||mag||.
template <class T>
std::string check_full(const fcase& c, const err_model& em, const conv_ref& ref, const std::vector<T>& out) {
  const conv2d_problem& p = c.p;
  const bool exact = c.integer && c.n_huge == 0;
  std::vector<double> want_all(ref.vals), mag(out.size(), 0.0);
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t i = 0; i < p.P(); ++i)
        for (std::int64_t j = 0; j < p.Q(); ++j) {
          const auto e = static_cast<std::size_t>(reference::out_offset(p, n, k, i, j));
          const double got = to_double(out[e]), want = ref.vals[e];
          bool ok;
          if (exact || !std::isfinite(want)) {
            want_all[e] = exact ? to_double(from_compute<T>(want)) : want;  // matched exactly: no part in the aggregate
            ok = same_value(got, want_all[e]);
          } else {
            const chan_ref ch = ref.at(em, e, k);
            mag[e] = ch.mag;
            ok = std::abs(got - want) <= ch.e + em.u_T * (std::abs(want) + ch.e) + em.eta_T;
          }
          if (!ok && bad++ == 0) first << "element " << e << ": got " << got << " want " << want;
        }
  if (bad) {
    std::ostringstream s;
    s << bad << " element(s) wrong; first: " << first.str();
    return s.str();
  }
  const double ne = norm_error_vs_magnitude(out, want_all, mag);
  if (!(ne <= em.tau)) {
    std::ostringstream s;
    s << "norm error relative to the absolute-term sums " << ne << " > " << em.tau;
    return s.str();
  }
  return "";
}

/// The poison of an output of T: NaN, or a finite sentinel when NaN results are possible.
template <class T>
T out_poison(const fcase& c) {
  return from_compute<T>(nonfinite(c) ? -4321.25 : std::numeric_limits<double>::quiet_NaN());
}

/// Records in `res` the first failed launch status or the CUDA error `e` after them; false if any.
inline bool launches_ok(const std::vector<status>& sts, cudaError_t e, result& res) {
  for (status s : sts)
    if (s != status::success) {
      res.ok = false, res.why = std::string("status ") + convred::to_string(s);
      const cudaError_t pending = cudaGetLastError();  // the CUDA error behind a cuda_error status, if any
      if (pending != cudaSuccess) res.why += std::string(" (CUDA: ") + cudaGetErrorName(pending) + ")";
      return false;
    }
  if (e != cudaSuccess) {
    res.ok = false, res.why = std::string("CUDA error after the launch: ") + cudaGetErrorString(e);
    return false;
  }
  return true;
}

/// A stream pair for the launches of one run (destroyed with it).
struct streams {
  cudaStream_t s[2] = {nullptr, nullptr};
  streams() {
    cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking);
  }
  ~streams() {
    for (auto& x : s)
      if (x) cudaStreamDestroy(x);
  }
};

/// Runs a conv-like case (fused, packed: reduced output with optional indices; conv2d: full output).
/// launch(x, w, b, y, idx, epi, stream) -> status launches the entry point under test. `full` selects
/// the full-output check. Determinism (run_opts): 4 launches into 4 output buffers (two on stream 0 in
/// turn, then one on each stream at once); all must be bitwise equal.
template <class T, class Op, class Launch>
result run_conv(const fcase& c, const run_opts& ro, bool full, Launch&& launch) {
  result res;
  const conv2d_problem& p = c.p;
  const host_data<T> d = make_data<T>(c);
  const std::size_t ny = static_cast<std::size_t>(full ? p.out_elements() : p.y_elements());
  const bool with_idx = Op::has_index && !full;
  const T nanT = from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  dbuf<T> x, w, b;
  dbuf<float> pcs;
  if (!x.init(image_of(d.x, d.x.size(), c.off_x, nanT), c.off_x) ||
      !w.init(image_of(d.w, d.w.size(), c.off_w, nanT), c.off_w) ||
      !b.init(image_of(d.b, d.b.size(), c.off_b, nanT), c.off_b) || !pcs.init(image_of(d.pcs, d.pcs.size(), 0, 0.0f), 0)) {
    res.ok = false, res.why = "cudaMalloc / cudaMemcpy of the inputs failed";
    return res;
  }
  const int slots = ro.determinism ? 4 : 1;
  const T poisonT = out_poison<T>(c);
  const std::int64_t poisonI = std::numeric_limits<std::int64_t>::min();
  const std::vector<T> y_img = image_of(std::vector<T>(), ny, c.off_y, poisonT);
  const std::vector<std::int64_t> i_img = image_of(std::vector<std::int64_t>(), ny, c.off_i, poisonI);
  std::vector<dbuf<T>> ys(static_cast<std::size_t>(slots));
  std::vector<dbuf<std::int64_t>> is(static_cast<std::size_t>(slots));
  for (int s = 0; s < slots; ++s)
    if (!ys[s].init(y_img, c.off_y) || (with_idx && !is[s].init(i_img, c.off_i))) {
      res.ok = false, res.why = "cudaMalloc / cudaMemcpy of the outputs failed";
      return res;
    }
  cudaDeviceSynchronize();  // the pageable copies above have landed
  const fuzz_epi de{{pcs.ptr()}, {c.scale}};
  streams st;
  auto go = [&](int s, cudaStream_t stream) {
    return launch(x.ptr(), w.ptr(), c.bias ? b.ptr() : nullptr, ys[s].ptr(), with_idx ? is[s].ptr() : nullptr, de, stream);
  };
  std::vector<status> sts;
  sts.push_back(go(0, st.s[0]));
  if (ro.determinism) {
    sts.push_back(go(1, st.s[0]));
    sts.push_back(go(2, st.s[0]));
    sts.push_back(go(3, st.s[1]));
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (!launches_ok(sts, e, res)) return res;
  // inputs unmodified
  if (!equal_images(x.read(), image_of(d.x, d.x.size(), c.off_x, nanT)) ||
      !equal_images(w.read(), image_of(d.w, d.w.size(), c.off_w, nanT)) ||
      !equal_images(b.read(), image_of(d.b, d.b.size(), c.off_b, nanT))) {
    res.ok = false, res.why = "an input buffer was modified";
    return res;
  }
  const std::vector<T> yimg = ys[0].read();
  const std::vector<std::int64_t> iimg = with_idx ? is[0].read() : std::vector<std::int64_t>();
  if (!written_exactly(yimg, ny, c.off_y, poisonT, "y", res.why) ||
      (with_idx && !written_exactly(iimg, ny, c.off_i, poisonI, "indices", res.why))) {
    res.ok = false;
    return res;
  }
  for (int s = 1; s < slots; ++s) {
    if (!equal_images(ys[s].read(), yimg) || (with_idx && !equal_images(is[s].read(), iimg))) {
      res.ok = false;
      res.why = std::string("not deterministic: launch ") + std::to_string(s) +
                (s == 3 ? " (second stream, concurrent)" : " (same stream)") + " differs bitwise from launch 0";
      return res;
    }
  }
  const auto yo = static_cast<std::ptrdiff_t>(guard + c.off_y), io = static_cast<std::ptrdiff_t>(guard + c.off_i);
  const std::vector<T> y(yimg.begin() + yo, yimg.begin() + yo + static_cast<std::ptrdiff_t>(ny));
  std::vector<std::int64_t> idx;
  if (with_idx) idx.assign(iimg.begin() + io, iimg.begin() + io + static_cast<std::ptrdiff_t>(ny));
  const fuzz_epi he{{d.pcs.data()}, {c.scale}};
  const err_model em = error_model<T>(c.t, c.m);
  const conv_ref ref = conv_reference(c, d, he, em);
  if (ro.y_out) {
    ro.y_out->resize(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) (*ro.y_out)[i] = to_double(y[i]);
  }
  res.why = full ? check_full(c, em, ref, y) : check_reduced<T, Op>(c, em, ref, y, idx);
  res.ok = res.why.empty();
  return res;
}

// ---- the runners (one per translation unit) ---------------------------------------------------------

/// Fused conv2d_reduce with the SIMT policy (math ieee) or full-output conv2d (any math): test_fuzz_simt.cu.
result run_simt_or_conv2d(const fcase& c, const run_opts& ro);
/// Fused conv2d_reduce on mma.sync (tensor-core maths), and the packed path (fused, and the partial mode
/// when wks > 0): test_fuzz_mma_sync.cu.
result run_tc(const fcase& c, const run_opts& ro);
/// channel_reduce: test_fuzz_channel.cu.
result run_channel(const fcase& c, const run_opts& ro);
/// conv2d_reduce_split (SIMT and mma.sync policies): test_fuzz_split.cu.
result run_split(const fcase& c, const run_opts& ro);
/// conv2d_reduce_plan<T, Math> (default family list, options c.po) on the current device: test_fuzz_plan.cu.
result run_plan(const fcase& c, const run_opts& ro);

/// A device as the planner sees it (device::device_info's fields), for plan_family.
struct plan_device {
  int cc_major = 9, cc_minor = 0;  ///< compute capability
  bool wgmma_image = true;         ///< the program runs sm_90a code there
  int sm_count = 132;              ///< SMs (132: an H200)
};
/// The family conv2d_reduce_plan picks for plan case c on device d, host only (no CUDA call: the planner's
/// choice from a device description): its name in the default list ("tiny", "narrow simt", "narrow mma.sync",
/// "pruned", "dilated", "grouped", "wgmma", "mma.sync", "simt"; the direct family's "direct depthwise" for
/// C/groups == 1, else "direct grouped"); the
/// plan's description ("none: <why>") when it cannot plan; "" for a combination not instantiated:
/// test_fuzz_plan.cu.
std::string plan_family(const fcase& c, const plan_device& d);

/// Runs any case with its runner.
inline result run(const fcase& c, const run_opts& ro = {}) {
  if (!supported(c.e, c.t, c.m, c.o)) {
    result r;
    r.ok = false;
    r.why = "combination not instantiated by the fuzz runners (see supported())";
    return r;
  }
  if (c.e == entry::channel) return run_channel(c, ro);
  if (c.e == entry::split) return run_split(c, ro);
  if (c.e == entry::plan) return run_plan(c, ro);
  if (c.e == entry::conv2d || c.m == mathk::ieee) return run_simt_or_conv2d(c, ro);
  return run_tc(c, ro);
}

}  // namespace convred::fuzz
