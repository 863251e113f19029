/// @file reference/conv2d.hpp
/// @brief Host float64 reference implementations (convred::reference), used by tests and examples.
///
/// Straightforward loops over PyTorch's definitions (see conv2d_problem), accumulating in double,
/// applying the epilogue in double and reducing with the same op semantics (ops instantiated for
/// V = double). They are slow (O(N*K*P*Q*C/g*R*S) on one core): use the `_at` forms to check a sample
/// of pixels of a large problem. All pointers are host pointers; epilogues must be host-callable
/// (e.g. `epilogue::per_channel_scale` over a host array).
#pragma once

#include <cstdint>

#include "../functional.cuh"
#include "../problem.cuh"

namespace convred::reference {

/// @brief Offset of x[n, c, h, w] in the problem's input layout (NCHW or NHWC), 64-bit.
inline std::int64_t x_offset(const conv2d_problem& p, std::int64_t n, std::int64_t c, std::int64_t h,
                             std::int64_t w) {
  return p.x_layout == layout::nchw ? ((n * p.C + c) * p.H + h) * p.W + w : ((n * p.H + h) * p.W + w) * p.C + c;
}

/// @brief Offset of out[n, k, p, q] of a full conv output, in the input's layout (NCHW: (N,K,P,Q);
/// NHWC: (N,P,Q,K)).
inline std::int64_t out_offset(const conv2d_problem& pr, std::int64_t n, std::int64_t k, std::int64_t p,
                               std::int64_t q) {
  return pr.x_layout == layout::nchw ? ((n * pr.K + k) * pr.P() + p) * pr.Q() + q
                                     : ((n * pr.P() + p) * pr.Q() + q) * pr.K + k;
}

/// @brief One conv output in float64: b[k] + sum over the group's c, r, s of x * w, where taps in the
/// padding read x = 0 (so a non-finite weight on a padding tap gives NaN, as on an explicitly padded input).
/// x: (N,C,H,W) in p.x_layout; w: (K, C/groups, R, S) KCRS; bias: (K) or nullptr.
template <class T>
double conv2d_at(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, std::int64_t n, std::int64_t k,
                 std::int64_t op, std::int64_t oq) {
  const std::int64_t cg = p.C_per_group(), g = k / p.K_per_group();
  double acc = 0.0;
  for (std::int64_t c = 0; c < cg; ++c)
    for (std::int64_t r = 0; r < p.R; ++r) {
      const std::int64_t h = op * p.stride_h - p.pad_h + r * p.dil_h;
      for (std::int64_t s = 0; s < p.S; ++s) {
        const std::int64_t ww = oq * p.stride_w - p.pad_w + s * p.dil_w;
        // Zero padding as an explicitly padded input: a padding tap contributes 0 * w (NaN for inf/NaN w).
        const bool inside = h >= 0 && h < p.H && ww >= 0 && ww < p.W;
        const double xv = inside ? to_double(x[x_offset(p, n, g * cg + c, h, ww)]) : 0.0;
        acc += xv * to_double(w[((k * cg + c) * p.R + r) * p.S + s]);
      }
    }
  return bias ? acc + to_double(bias[k]) : acc;
}

/// @brief Full conv with epilogue in float64: out[n,k,p,q] = e(conv2d_at(...), k), written in the input's
/// layout (see out_offset); out holds p.out_elements() doubles.
template <class T, class Epilogue = epilogue::identity>
void conv2d(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, double* out, Epilogue e = {}) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t i = 0; i < p.P(); ++i)
        for (std::int64_t j = 0; j < p.Q(); ++j)
          out[out_offset(p, n, k, i, j)] = apply_epilogue(e, conv2d_at(p, x, w, bias, n, k, i, j), static_cast<int>(k));
}

/// @brief A reduced value and, for index ops, its channel index (else -1).
struct reduced {
  double value;        ///< the reduced value
  std::int64_t index;  ///< argmin/argmax channel, or -1 for ops without an index
};

/// @brief Reduces `count` values given by `f(k)` (k = 0..count-1) with op, in float64.
template <class Op, class F>
reduced reduce_values(Op op, std::int64_t count, F&& f) {
  auto a = Op::template identity<double>();
  for (std::int64_t k = 0; k < count; ++k) a = op(a, Op::template make<double>(f(k), static_cast<int>(k)));
  reduced r{Op::template value<double>(a, count), -1};
  if constexpr (Op::has_index) r.index = Op::template index<double>(a);
  return r;
}

/// @brief The fused result at one pixel: R over k of e(b[k] + conv, k), in float64.
template <class T, class Op, class Epilogue = epilogue::identity>
reduced conv2d_reduce_at(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, std::int64_t n,
                         std::int64_t op_, std::int64_t oq, Op op = {}, Epilogue e = {}) {
  return reduce_values(op, p.K, [&](std::int64_t k) {
    return apply_epilogue(e, conv2d_at(p, x, w, bias, n, k, op_, oq), static_cast<int>(k));
  });
}

/// @brief Fused conv + epilogue + channel reduction in float64 over the whole output: y (N,1,P,Q) and,
/// for index ops, idx (N,1,P,Q) (either may be nullptr).
template <class T, class Op, class Epilogue = epilogue::identity>
void conv2d_reduce(const conv2d_problem& p, const T* x, const T* w, const nondeduced_t<T>* bias, double* y, std::int64_t* idx,
                   Op op = {}, Epilogue e = {}) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t i = 0; i < p.P(); ++i)
      for (std::int64_t j = 0; j < p.Q(); ++j) {
        const reduced r = conv2d_reduce_at(p, x, w, bias, n, i, j, op, e);
        const std::int64_t o = (n * p.P() + i) * p.Q() + j;
        if (y) y[o] = r.value;
        if (idx) idx[o] = r.index;
      }
}

/// @brief Channel reduction of an existing tensor in float64: y[n,0,h,w] = R over c of e(x[n,c,h,w], c);
/// x (N,C,H,W) in p.x_layout; y and idx (N,1,H,W) (either may be nullptr).
template <class T, class Op, class Epilogue = epilogue::identity>
void channel_reduce(const channel_reduce_problem& p, const T* x, double* y, std::int64_t* idx, Op op = {},
                    Epilogue e = {}) {
  conv2d_problem shape;  // reuse the layout arithmetic
  shape.N = p.N, shape.C = p.C, shape.H = p.H, shape.W = p.W, shape.x_layout = p.x_layout;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t h = 0; h < p.H; ++h)
      for (std::int64_t w = 0; w < p.W; ++w) {
        const reduced r = reduce_values(op, p.C, [&](std::int64_t c) {
          return apply_epilogue(e, to_double(x[x_offset(shape, n, c, h, w)]), static_cast<int>(c));
        });
        const std::int64_t o = (n * p.H + h) * p.W + w;
        if (y) y[o] = r.value;
        if (idx) idx[o] = r.index;
      }
}

}  // namespace convred::reference
