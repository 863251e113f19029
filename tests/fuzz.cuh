/// @file tests/fuzz.cuh
/// @brief The differential fuzzer of the GPU suite (namespace convred::fuzz): one random case, its
/// one-line reproducer, its data, and the check of every entry point against the float64 reference.
///
/// A case (`fcase`) names an entry point (fused conv2d_reduce, full-output conv2d, channel_reduce, the
/// packed path pack_filter + conv2d_reduce_packed or, with `wks` > 0, the wgmma kernel's partial mode
/// conv2d_reduce_packed_split, the split path conv2d_reduce_split with its GEMM_K split count), an element
/// type, a math, a reduction op, the problem,
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
/// else within the documented tolerance of the math (ieee fp32 1e-5, tf32x3 1e-5, tf32 1e-3, bf16/fp16
/// 1e-2 relative norm) and a per-output bound from Sum|x*w|+|b|. With `run_opts::determinism` the call is
/// repeated on the same stream and on two streams at once, and all outputs must be bitwise identical.
///
/// The runners live in four translation units (test_fuzz_simt.cu: SIMT fused and full conv2d;
/// test_fuzz_mma_sync.cu: mma.sync fused and the packed path; test_fuzz_channel.cu: channel_reduce;
/// test_fuzz_split.cu: the split path), each
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

#include <convred/functional.cuh>
#include <convred/numeric.cuh>
#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>
#include <convred/status.cuh>

#include "test_util.cuh"

namespace convred::fuzz {

/// Entry point of a case.
enum class entry : int { fused, conv2d, channel, packed, split };
/// Element type of a case.
enum class elem : int { f32, f64, f16, bf16 };
/// Math of a case (ieee: the SIMT kernels; the others: tensor cores).
enum class mathk : int { ieee, tf32, tf32x3, bf16, fp16 };
/// Reduction op of a case (range: the user-written test::range_op).
enum class opk : int { min, max, sum, mean, argmin, argmax, range };

inline const char* name(entry e) {
  const char* n[] = {"fused", "conv2d", "channel", "packed", "split"};
  return n[static_cast<int>(e)];
}
inline const char* name(elem e) {
  const char* n[] = {"float", "double", "half", "bf16"};
  return n[static_cast<int>(e)];
}
inline const char* name(mathk e) {
  const char* n[] = {"ieee", "tf32", "tf32x3", "bf16", "fp16"};
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
};

/// True if a case injects NaN or an infinity (outputs may then hold NaN legitimately).
inline bool nonfinite(const fcase& c) { return c.n_nan > 0 || c.n_inf > 0; }

/// The (entry, type, math, op) combinations the runners instantiate (kept few for compile time).
inline bool supported(entry e, elem t, mathk m, opk o) {
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
    if (k == "entry") ok = pick(v, c.e, 5, [](entry x) { return std::string(name(x)); });
    else if (k == "T") ok = pick(v, c.t, 4, [](elem x) { return std::string(name(x)); });
    else if (k == "math") ok = pick(v, c.m, 5, [](mathk x) { return std::string(name(x)); });
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
    else return false;
    if (!ok) return false;
  }
  return true;
}

/// Options of one run.
struct run_opts {
  bool determinism = false;  ///< repeat the launch (same stream, then two streams at once): bitwise equal
};

/// Outcome of one run: ok, else the first problem found; `kernel` names the kernel (path) that ran.
struct result {
  bool ok = true;
  std::string why;
  std::string kernel;
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

/// Largest |per-channel scale| times |scale|: the epilogue's gain (for the error bounds).
inline double gain(const fcase& c, const std::vector<float>& pcs) {
  double m = 0;
  for (float v : pcs) m = std::max(m, double(std::abs(v)));
  return m * std::abs(double(c.scale));
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

/// Tolerances of a run: per-output accumulation bound (relative to gain*Sum|x*w|+|b| + |v|) and
/// relative-norm bound, by element type and math (test::tol).
struct tols {
  double acc = 0, rel = 0, uT = 0;
};
inline tols tolerances(elem t, mathk m) {
  tols r;
  const double u[] = {std::numeric_limits<float>::epsilon() / 2, std::numeric_limits<double>::epsilon() / 2,
                      test::tol::unit_roundoff<__half>(), test::tol::unit_roundoff<__nv_bfloat16>()};
  const double ieee_rel[] = {test::tol::ieee<float>(), test::tol::ieee<double>(), test::tol::ieee<__half>(),
                             test::tol::ieee<__nv_bfloat16>()};
  r.uT = u[static_cast<int>(t)];
  r.acc = t == elem::f64 ? 1e-12 : test::tol::ieee_fp32;
  r.rel = ieee_rel[static_cast<int>(t)];
  const double mt[] = {0, test::tol::tf32, test::tol::tf32x3, test::tol::bf16, test::tol::fp16};
  r.acc = std::max(r.acc, mt[static_cast<int>(m)]);
  r.rel = std::max(r.rel, mt[static_cast<int>(m)]);
  return r;
}

inline bool same_value(double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  return got == want;
}

/// Smallest positive subnormal of T (absolute slack for results rounded into T's subnormal range).
template <class T>
double tiny() {
  if constexpr (std::is_same_v<T, __half>) return std::ldexp(1.0, -24);
  else return static_cast<double>(std::numeric_limits<std::conditional_t<std::is_same_v<T, double>, double, float>>::denorm_min());
}

/// True for integer data with an exact epilogue, no huge values and an op without a division: every
/// result is then exact (the only rounding is the final conversion to T).
inline bool exact_case(const fcase& c) { return c.integer && c.n_huge == 0 && c.o != opk::mean; }

/// How per-channel errors combine into the reduced value's error.
inline double combine_err(opk o, double emax, double esum, std::int64_t count) {
  switch (o) {
    case opk::sum: return esum;
    case opk::mean: return esum / double(count);
    case opk::range: return 2 * emax;
    default: return emax;
  }
}

/// Checks reduced outputs y (and idx for index ops) of a conv case against the float64 reference: vals
/// (the reference conv with epilogue, full output), A (the conv of |x|, |w|, |b|). Returns "" or the
/// first mismatch.
template <class T, class Op>
std::string check_reduced(const fcase& c, const std::vector<T>& y, const std::vector<std::int64_t>& idx,
                          const std::vector<double>& vals, const std::vector<double>& A, double g) {
  const conv2d_problem& p = c.p;
  const tols t = tolerances(c.t, c.m);
  const bool exact = exact_case(c);
  const std::int64_t P = p.P(), Q = p.Q();
  std::vector<double> yref(y.size());
  std::size_t bad = 0;
  std::ostringstream first;
  auto note = [&](std::int64_t m, const char* what, double got, double want, std::int64_t gi, std::int64_t wi) {
    if (bad++ == 0)
      first << what << " at pixel " << m << ": got " << got << " want " << want << " (index " << gi << ", reference "
            << wi << ")";
  };
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t i = 0; i < P; ++i)
      for (std::int64_t j = 0; j < Q; ++j) {
        const std::int64_t m = (n * P + i) * Q + j;
        auto at = [&](std::int64_t k) { return static_cast<std::size_t>(reference::out_offset(p, n, k, i, j)); };
        const reference::reduced r = reference::reduce_values(Op{}, p.K, [&](std::int64_t k) { return vals[at(k)]; });
        yref[static_cast<std::size_t>(m)] = r.value;
        const double got = to_double(y[static_cast<std::size_t>(m)]);
        const std::int64_t gi = Op::has_index ? idx[static_cast<std::size_t>(m)] : -1;
        if (exact || !std::isfinite(r.value)) {
          // exact data, or a non-finite result: the value rounded to T and the index exactly
          const double want = exact ? to_double(from_compute<T>(r.value)) : r.value;
          if (!same_value(got, want)) note(m, "value", got, want, gi, r.index);
          else if (Op::has_index && gi != r.index) note(m, "index", got, want, gi, r.index);
          continue;
        }
        double emax = 0, esum = 0;
        for (std::int64_t k = 0; k < p.K; ++k) {
          const double v = vals[at(k)];
          if (!std::isfinite(v)) continue;  // cannot be selected against a finite result
          const double err = t.acc * (g * A[at(k)] + std::abs(v));
          emax = std::max(emax, err);
          esum += err;
        }
        const double delta = combine_err(c.o, emax, esum, p.K);
        const double bound = delta + t.uT * (std::abs(r.value) + delta) + 2 * tiny<T>();
        if (!(std::abs(got - r.value) <= bound)) {
          note(m, "value", got, r.value, gi, r.index);
          continue;
        }
        if constexpr (Op::has_index) {
          if (gi < 0 || gi >= p.K) {
            note(m, "index out of range", got, r.value, gi, r.index);
            continue;
          }
          const double vsel = vals[at(gi)];
          // the chosen channel's true value is within 2 delta of the true extreme, and y is its value
          if (!(std::abs(vsel - r.value) <= 2 * emax + 2 * tiny<T>() &&
                std::abs(got - vsel) <= emax + t.uT * (std::abs(vsel) + emax) + 2 * tiny<T>()))
            note(m, "index (value of the chosen channel)", got, r.value, gi, r.index);
        }
      }
  if (bad == 0) {
    const double rel = test::rel_norm_error(y, yref);
    if (!(rel <= t.rel)) {
      std::ostringstream s;
      s << "relative norm error " << rel << " > " << t.rel;
      return s.str();
    }
    return "";
  }
  std::ostringstream s;
  s << bad << " pixel(s) wrong; first: " << first.str();
  return s.str();
}

/// Checks a full conv output against the reference vals (same layout), A as in check_reduced.
template <class T>
std::string check_full(const fcase& c, const std::vector<T>& out, const std::vector<double>& vals,
                       const std::vector<double>& A, double g) {
  const tols t = tolerances(c.t, c.m);
  const bool exact = c.integer && c.n_huge == 0;
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t e = 0; e < out.size(); ++e) {
    const double got = to_double(out[e]), want = vals[e];
    bool ok;
    if (exact || !std::isfinite(want)) {
      ok = same_value(got, exact ? to_double(from_compute<T>(want)) : want);
    } else {
      const double delta = t.acc * (g * A[e] + std::abs(want));
      ok = std::abs(got - want) <= delta + t.uT * (std::abs(want) + delta) + 2 * tiny<T>();
    }
    if (!ok && bad++ == 0) first << "element " << e << ": got " << got << " want " << want;
  }
  if (bad) {
    std::ostringstream s;
    s << bad << " element(s) wrong; first: " << first.str();
    return s.str();
  }
  const double rel = test::rel_norm_error(out, vals);
  if (!(rel <= t.rel)) {
    std::ostringstream s;
    s << "relative norm error " << rel << " > " << t.rel;
    return s.str();
  }
  return "";
}

/// The float64 reference of a conv case: vals = e(conv(x, w) + b) (full output, x's layout) and
/// A = conv(|x|, |w|) + |b| (for the error bounds).
template <class T, class HostEpi>
void conv_reference(const fcase& c, const host_data<T>& d, HostEpi he, std::vector<double>& vals, std::vector<double>& A) {
  const conv2d_problem& p = c.p;
  vals.assign(static_cast<std::size_t>(p.out_elements()), 0.0);
  A.assign(vals.size(), 0.0);
  reference::conv2d(p, d.x.data(), d.w.data(), c.bias ? d.b.data() : nullptr, vals.data(), he);
  std::vector<double> ax(d.x.size()), aw(d.w.size()), ab(d.b.size());
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::abs(to_double(d.x[i]));
  for (std::size_t i = 0; i < aw.size(); ++i) aw[i] = std::abs(to_double(d.w[i]));
  for (std::size_t i = 0; i < ab.size(); ++i) ab[i] = std::abs(to_double(d.b[i]));
  reference::conv2d(p, ax.data(), aw.data(), c.bias ? ab.data() : static_cast<const double*>(nullptr), A.data());
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
  std::vector<double> vals, A;
  const fuzz_epi he{{d.pcs.data()}, {c.scale}};
  conv_reference(c, d, he, vals, A);
  const double g = gain(c, d.pcs);
  res.why = full ? check_full(c, y, vals, A, g) : check_reduced<T, Op>(c, y, idx, vals, A, g);
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
  if (c.e == entry::conv2d || c.m == mathk::ieee) return run_simt_or_conv2d(c, ro);
  return run_tc(c, ro);
}

}  // namespace convred::fuzz
