/// @file kernel/screen.cuh
/// @brief Certified screening (docs/screening.md): the pieces of a min / max / argmin / argmax whose result
/// is that of an exact fp32 computation of every channel, from a 16-bit tensor-core pass.
///
/// - Pass 1 is any fused conv-reduce kernel in a low precision (fp16 on the tensor cores) run with the
///   reduction op screen_op<Max>: per output pixel it keeps the two best channels of the low-precision
///   values yhat and how far the 2nd and 3rd best lie behind the best (rounded down), packed into the
///   pixel's value and index outputs (screen_state, screen_op::value / index).
/// - screen_stats_kernel: per run, max_k ||w_k||_2^2, max_k |b_k| and whether w, b are finite and in the
///   pass-1 precision's range (screen_stats).
/// - Pass 2 (kernel/screen_recompute.cuh), screen_recompute_kernel: per pixel the error bound E >= |yhat_k - y32_k| for every channel k
///   (screen_bound; y32_k: channel k's value in exact fp32 FMA, in the SIMT kernel's order), then y32 of the
///   best channel and, when its gap is <= 2E, of the second; when the 3rd best is within 2E too, or the
///   bound is not finite (a NaN, inf or huge value in x, w, b or the scale, or x or w outside the pass-1
///   precision's range), screen_full_kernel computes y32 of every channel. Any channel left out has y32
///   strictly worse than the result, so the output equals the reduction of y32 over all K channels, bit
///   for bit: the unsplit SIMT kernel's result (math::ieee's fused kernel) for the same Op and epilogue.
///
/// Maths: the bound is the standard forward error analysis of a dot product (Higham, "Accuracy and
/// Stability of Numerical Algorithms", 2nd ed., 2002, sec. 3.1, gamma_n = n u / (1 - n u)) with the
/// operand rounding of the pass-1 precision (unit roundoff u, subnormal spacing eta) and, for the tensor
/// cores' fp32 accumulation, which truncates instead of rounding and normalises once per block (Fasi,
/// Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Computer Science 7:e330,
/// 2021), twice the recursive-summation bound with a full ulp (2^-23) lost per addition.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include <cub/block/block_reduce.cuh>

#include "../functional.cuh"
#include "../numeric.cuh"
#include "../policy.cuh"
#include "../problem.cuh"

namespace convred::kernel {

/// Channel index of an empty slot of screen_state (K < 2): channels are < 65535 (screen_max_channels).
inline constexpr std::uint16_t screen_empty = 0xFFFF;
/// The largest K screening serves: two 16-bit channel indices share the 64-bit index output.
inline constexpr std::int64_t screen_max_channels = 0xFFFF;
/// The largest GEMM_K screening serves (the bound's gamma_n needs n * 2^-23 well below 1).
inline constexpr std::int64_t screen_max_gemm_k = std::int64_t{1} << 20;

/// @brief Pass 1's running state: the best channel k1 of yhat with its value, a second channel k2 with
/// its value, and the best value of all the other channels. For Min (Max mirrors it):
/// - v1 = yhat[k1], the smallest value, ties to the lower channel (-0 == +0); a NaN never takes slot 1;
/// - v2 = yhat[k2] >= v1, the smallest value of the channels other than k1 (ties: any of them); a NaN
///   only while v3 is NaN too;
/// - v3 = the smallest value of the channels other than k1 and k2 (the exact 3rd best value); NaN once
///   any channel was NaN (the pixel is then recomputed in full: screen_op::value);
/// - an empty slot (fewer channels) holds the op's worst value (+inf for Min) and channel screen_empty,
///   which sorts after every real channel of that value.
/// 20 bytes for float: the fused kernels keep one per accumulator row and thread in registers, across the
/// conv mainloop. The channels in words of their own, not two 16-bit halves of one: the fold's insert is
/// then 10 instructions on sm_90a instead of 12 (no shifts and masks), and ptxas spills a little less in
/// the fp16 wgmma kernel (docs/screening.md, "Pass 1's state").
template <class V>
struct screen_state {
  V v1;              ///< the best value: channel k1's
  V v2;              ///< channel k2's value: the best of the channels other than k1
  V v3;              ///< the best value of the channels other than k1 and k2 (NaN: a NaN channel seen)
  std::uint32_t k1;  ///< the best channel (screen_empty: none)
  std::uint32_t k2;  ///< the second channel (screen_empty: none)
};

/// @brief One channel (value v, channel k < screen_empty), as screen_op::make gives it: the fold's
/// op(state, make(v, k)) inserts it into the state directly (screen_op::insert, no empty slots to skip),
/// and it converts to the screen_state of that one channel.
template <class V, bool Max>
struct screen_entry {
  V v;              ///< the value
  std::uint32_t k;  ///< the channel
  /// the state of this channel alone (a NaN: slot 1 stays empty, see screen_state)
  __host__ __device__ operator screen_state<V>() const;
};

/// @brief Reduction op of pass 1 (functional.cuh's reduction-op requirements, make returning a
/// screen_entry that converts to the state): keeps per pixel the best channel (Max: largest, else
/// smallest; ties to the lower channel), a second channel with the best value among the others, and the
/// 3rd best value (screen_state), and packs them for pass 2: value() = the bits of bf16(gap2) |
/// bf16(gap3) << 16 as a float, index() = k1 | k2 << 16, each gap = |v_i - v_1| rounded down (towards
/// zero), a NaN gap stays NaN. The contract pass 2 relies on: k1 the best channel; gap2 <= |yhat[k2] -
/// yhat[k1]| and gap3 <= |yhat[c] - yhat[k1]| for every other channel c, or NaN (recompute); k2 =
/// screen_empty only with fewer than two channels (or a NaN channel: gap3 NaN). Only for
/// screen_recompute_kernel: the outputs are not a min or an index.
///
/// The fold's hot path, one insert per element, is branch-free: 10 instructions on sm_90a (three for the
/// tie-aware compare with slot 1, one for slot 2, two NaN-propagating min / max for v3, four selects).
template <bool Max>
struct screen_op {
  static constexpr bool has_index = true;  ///< the packed channels travel in the index output
  /// the running state
  template <class V>
  using accum_t = screen_state<V>;

  /// the worst value (the empty slots')
  template <class V>
  __host__ __device__ static V worst() {
    return Max ? lower_identity<V>() : upper_identity<V>();
  }
  /// Inserts channel k (< screen_empty) of value v into s when `ok` (the invariants: screen_state).
  /// Branch-free: b1 = (v, k) strictly better than slot 1 (exact value compare, ties to the lower
  /// channel), b2 = v not worse than v2 (or NaN: it takes slot 2, and poisons v3); the value that leaves
  /// the two slots (the worse of v and v2) goes to v3, NaN-propagating.
  template <class V>
  __host__ __device__ static void insert(screen_state<V>& s, V v, std::uint32_t k, bool ok = true) {
    // (& and |, not && and ||: a short circuit compiled to a branch around the tie's compares)
    const bool b1 = ok & ((Max ? v > s.v1 : v < s.v1) | ((v == s.v1) & (k < s.k1)));
    const bool b2 = ok & !(Max ? v < s.v2 : v > s.v2);
    const V out = op::detail::nan_extreme<!Max>(v, s.v2);  // the worse of v and v2, a NaN if either is
    s.v3 = ok ? op::detail::nan_extreme<Max>(s.v3, out) : s.v3;
    s.v2 = b1 ? s.v1 : b2 ? v : s.v2;
    s.k2 = b1 ? s.k1 : b2 ? k : s.k2;
    s.v1 = b1 ? v : s.v1;
    s.k1 = b1 ? k : s.k1;
  }

  /// no channel yet
  template <class V>
  __host__ __device__ static screen_state<V> identity() {
    return {worst<V>(), worst<V>(), worst<V>(), screen_empty, screen_empty};
  }
  /// one channel (k < screen_empty)
  template <class V>
  __host__ __device__ static screen_entry<V, Max> make(V v, int k) {
    return {v, static_cast<std::uint32_t>(k)};
  }
  /// a with channel b inserted (the fold's hot path)
  template <class V>
  __host__ __device__ screen_state<V> operator()(screen_state<V> a, const screen_entry<V, Max>& b) const {
    insert(a, b.v, b.k);
    return a;
  }
  /// the union of a and b (of disjoint channels): b's two channels inserted, v3 the better of the two v3s
  template <class V>
  __host__ __device__ screen_state<V> operator()(screen_state<V> a, const screen_state<V>& b) const {
    insert(a, b.v1, b.k1, b.k1 != screen_empty);
    insert(a, b.v2, b.k2, b.k2 != screen_empty);
    a.v3 = op::detail::nan_extreme<Max>(a.v3, b.v3);
    return a;
  }

  /// a - b rounded towards -inf, as the device's __fsub_rd (on the host: the difference in double, its
  /// exact error by TwoSum, then the float at or below it; an overflow gives the largest float, not inf)
  __host__ __device__ static float sub_rd(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rd(a, b);
#else
    const double x = a, y = -static_cast<double>(b), d = x + y;
    if (!std::isfinite(d)) return static_cast<float>(d);  // an infinite or NaN operand: exact
    const double bb = d - x, err = (x - (d - bb)) + (y - bb);  // x + y == d + err exactly
    float f = static_cast<float>(d);
    if (static_cast<double>(f) - d > err) f = std::nextafter(f, -INFINITY);  // (f - d: exact, Sterbenz)
    return f;
#endif
  }
  /// bf16 bits of |a - b| rounded towards zero (NaN stays NaN, inf stays inf)
  template <class V>
  __host__ __device__ static std::uint32_t gap_bits(V best, V other) {
    float g = Max ? sub_rd(static_cast<float>(best), static_cast<float>(other))
                  : sub_rd(static_cast<float>(other), static_cast<float>(best));
    if (g != g) return 0x7FC0u;
    if (g < 0.0f) g = 0.0f;  // never: v1 is the best
    std::uint32_t u;
    std::memcpy(&u, &g, sizeof u);
    return u >> 16;  // truncation: towards zero for a non-negative value
  }
  /// bf16(gap2) | bf16(gap3) << 16, as the bits of a float; gap3 NaN when any channel was NaN
  template <class V>
  __host__ __device__ static V value(const screen_state<V>& s, std::int64_t) {
    const std::uint32_t u = gap_bits(s.v1, s.v2) | (gap_bits(s.v1, s.v3) << 16);
    float f;
    std::memcpy(&f, &u, sizeof f);
    return static_cast<V>(f);
  }
  /// k1 | k2 << 16
  template <class V>
  __host__ __device__ static std::int64_t index(const screen_state<V>& s) {
    return static_cast<std::int64_t>(s.k1 | (s.k2 << 16));
  }
};

template <class V, bool Max>
__host__ __device__ screen_entry<V, Max>::operator screen_state<V>() const {
  screen_state<V> s = screen_op<Max>::template identity<V>();
  screen_op<Max>::insert(s, v, k);
  return s;
}

/// @brief Operand rounding of a pass-1 precision: unit roundoff u, the largest error of a subnormal
/// (half its spacing) eta, and the largest |value| that converts without overflow.
struct screen_precision {
  double u = 0;      ///< unit roundoff (2^-11 for fp16 and tf32, 2^-8 for bf16)
  double eta = 0;    ///< largest rounding error of a subnormal: half the subnormal spacing
  double limit = 0;  ///< largest |value| that converts without overflow
};

/// The pass-1 precision of a tensor-core math (tf32: sm_90's cvt.rna keeps fp32's exponent range; fp16:
/// IEEE binary16, subnormals kept; bf16: fp32's range, 8 significant bits).
template <class Math>
constexpr screen_precision screen_precision_of() {
  if constexpr (std::is_same_v<Math, math::fp16>) return {0x1p-11, 0x1p-25, 65504.0};
  else if constexpr (std::is_same_v<Math, math::bf16>) return {0x1p-8, 0x1p-134, 3.0e38};
  else return {0x1p-11, 0x1p-137, 3.0e38};  // tf32
}

/// @brief Per-run facts of w and b that pass 2's bound needs (device memory, zeroed before
/// screen_stats_kernel; floats as their bits, so that atomicMax orders them).
struct screen_stats {
  unsigned int w_sumsq_max;  ///< bits of max over k of sum_i w_ki^2 (fp32, each sum rounded up)
  unsigned int b_abs_max;    ///< bits of max over k of |b_k|
  unsigned int bad;          ///< nonzero: a w or b that is not finite, or |w| above the precision's limit
  unsigned int pad;          ///< (alignment of `full`)
  unsigned long long full;   ///< pixels pass 2 left to screen_full_kernel (the length of the list)
};

/// @brief One block per output channel k (K = gridDim.x blocks): ||w_k||_2^2 (rounded up), |b_k|, and the
/// range checks, into `stats` (atomics; stats zeroed first); and the filter transposed into `wt` (L x K,
/// wt[kk * K + k] = w[k * L + kk]) for screen_full_kernel. w is KCRS with L = C/groups * R * S values per
/// channel.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    screen_stats_kernel(const float* w, const float* bias, std::int64_t L, float limit, screen_stats* stats, float* wt) {
  using reduce_t = cub::BlockReduce<float, Threads>;
  __shared__ typename reduce_t::TempStorage temp;
  const std::int64_t k = blockIdx.x;
  const float* wk = w + k * L;
  float sumsq = 0.0f;
  unsigned int bad = 0;
  for (std::int64_t i = threadIdx.x; i < L; i += Threads) {
    const float v = wk[i];
    wt[i * gridDim.x + k] = v;
    sumsq = __fmaf_ru(v, v, sumsq);
    bad |= !(fabsf(v) <= limit);  // NaN, inf, or out of range
  }
  const float total = reduce_t(temp).Reduce(sumsq, [](float a, float b) { return __fadd_ru(a, b); });
  if (bad) atomicOr(&stats->bad, 1u);
  if (threadIdx.x == 0) {
    // sum of finite squares can still overflow to inf: that is "bad" too (the bound is not finite)
    if (!(total <= 3.0e38f)) atomicOr(&stats->bad, 1u);
    else atomicMax(&stats->w_sumsq_max, __float_as_uint(total));
    if (bias) {
      const float b = bias[k];
      if (!(fabsf(b) <= 3.0e38f)) atomicOr(&stats->bad, 1u);
      else atomicMax(&stats->b_abs_max, __float_as_uint(fabsf(b)));
    }
  }
}

/// @brief The bound E >= |yhat_k - y32_k| for every channel k of one pixel, yhat from pass 1 (operands
/// rounded to `pr`, products summed by the tensor cores into fp32, then the fp32 bias add and the
/// epilogue's scale) and y32 from exact fp32 FMA (the same bias add and scale). Host and device; double.
///
///   S   = ||x_patch||_2 * max_k ||w_k||_2   >= sum_i |x_i w_ki|   (Cauchy-Schwarz)
///   X1, W1 = sqrt(L) ||x_patch||_2, sqrt(L) max_k ||w_k||_2   >= sum_i |x_i|, sum_i |w_ki|
///   rounding of the operands   (2u + u^2) S + eta (1 + u)(X1 + W1) + L eta^2
///   St = (1 + u)^2 S + eta (1 + u)(X1 + W1) + L eta^2   >= sum_i |x~_i w~_ki|
///   tensor-core accumulation   2 gamma_{L+1}(2^-23) (St + B)        (B = max_k |b_k|)
///   fp32 FMA of y32            gamma_{L+1}(2^-24) (S + B)
///   bias add and scale, both   2^-21 (St + B)
///   E = lip * (sum of the four) * (1 + 2^-20) + 2^-147,   lip = |scale| (2^-147: four roundings of a
///   subnormal result, absolute)
/// `sumsq_x`: sum of x_patch^2 in fp32 (rounded to nearest; inflated here by gamma_L(2^-24));
/// `wsumsq_max`: max_k ||w_k||^2 rounded up. Returns +inf when an input is not finite or L is too large.
__host__ __device__ inline double screen_bound(double sumsq_x, double wsumsq_max, double b_abs_max, double lip,
                                               std::int64_t L, screen_precision pr) {
  const double Ld = static_cast<double>(L);
  if (!(L >= 1 && L <= screen_max_gemm_k)) return INFINITY;
  auto gamma = [](double n, double v) { return n * v / (1.0 - n * v); };
  const double xn = sqrt(sumsq_x * (1.0 + gamma(Ld + 1.0, 0x1p-24)));
  const double wn = sqrt(wsumsq_max);
  const double S = xn * wn, rl = sqrt(Ld), X1 = rl * xn, W1 = rl * wn, u = pr.u, eta = pr.eta;
  const double sub = eta * (1.0 + u) * (X1 + W1) + Ld * eta * eta;
  const double St = (1.0 + u) * (1.0 + u) * S + sub, B = b_abs_max;
  const double e = (2.0 * u + u * u) * S + sub + 2.0 * gamma(Ld + 1.0, 0x1p-23) * (St + B) +
                   gamma(Ld + 1.0, 0x1p-24) * (S + B) + 0x1p-21 * (St + B);
  // + 2^-147: the roundings of the bias add and the scale are absolute (<= 2^-150 each) for subnormal results
  const double E = lip * e * (1.0 + 0x1p-20) + 0x1p-147;
  return E == E ? E : INFINITY;
}

}  // namespace convred::kernel
