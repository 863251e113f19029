// Host tests of the float64 reference (include/convred/reference/conv2d.hpp) against hand-computed
// cases (values checked by hand: cross-correlation, not convolution), an independent explicit-padding
// implementation, layout permutations, and the fused / channel reductions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <convred/reference/conv2d.hpp>

#include "test_util.cuh"

namespace {

using convred::conv2d_problem;
using convred::layout;
namespace ref = convred::reference;
namespace op = convred::op;
namespace epi = convred::epilogue;

/// x[i][j] = 1 + i*W + j for a 1x1xHxW input.
std::vector<double> ramp(std::int64_t H, std::int64_t W) {
  std::vector<double> v(static_cast<std::size_t>(H * W));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = double(i + 1);
  return v;
}

/// An asymmetric 3x3 kernel, so a flipped (true convolution) or transposed kernel gives other numbers.
const std::vector<double> kAsym{1, 2, 0,  //
                                0, 1, 0,  //
                                0, 0, 3};

conv2d_problem single(std::int64_t H, std::int64_t W) {
  conv2d_problem p;
  p.N = 1, p.C = 1, p.H = H, p.W = W, p.K = 1, p.R = 3, p.S = 3;
  return p;
}

std::vector<double> run_conv(const conv2d_problem& p, const std::vector<double>& x, const std::vector<double>& w,
                             const double* b = nullptr) {
  std::vector<double> out(static_cast<std::size_t>(p.out_elements()), std::numeric_limits<double>::quiet_NaN());
  ref::conv2d(p, x.data(), w.data(), b, out.data());
  return out;
}

/// An independent conv2d: copies x into an explicitly zero-padded NCHW buffer first, then slides the
/// dilated window with plain index arithmetic. Output (N,K,P,Q) NCHW.
template <class T>
std::vector<double> padded_conv(const conv2d_problem& p, const std::vector<T>& x, const std::vector<T>& w,
                                const std::vector<T>* b) {
  const std::int64_t Hp = p.H + 2 * p.pad_h, Wp = p.W + 2 * p.pad_w;
  std::vector<double> xp(static_cast<std::size_t>(p.N * p.C * Hp * Wp), 0.0);
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t c = 0; c < p.C; ++c)
      for (std::int64_t h = 0; h < p.H; ++h)
        for (std::int64_t ww = 0; ww < p.W; ++ww) {
          const std::int64_t src = p.x_layout == layout::nchw ? ((n * p.C + c) * p.H + h) * p.W + ww
                                                              : ((n * p.H + h) * p.W + ww) * p.C + c;
          xp[static_cast<std::size_t>(((n * p.C + c) * Hp + h + p.pad_h) * Wp + ww + p.pad_w)] =
              convred::to_double(x[static_cast<std::size_t>(src)]);
        }
  // Output size by counting window positions, not by the library's formula.
  std::int64_t P = 0, Q = 0;
  while (P * p.stride_h + p.dil_h * (p.R - 1) < Hp) ++P;
  while (Q * p.stride_w + p.dil_w * (p.S - 1) < Wp) ++Q;
  REQUIRE(P == p.P());
  REQUIRE(Q == p.Q());
  const std::int64_t Cg = p.C / p.groups, Kg = p.K / p.groups;
  std::vector<double> out(static_cast<std::size_t>(p.N * p.K * P * Q));
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t i = 0; i < P; ++i)
        for (std::int64_t j = 0; j < Q; ++j) {
          double acc = b ? convred::to_double((*b)[static_cast<std::size_t>(k)]) : 0.0;
          const std::int64_t g = k / Kg;
          for (std::int64_t cc = 0; cc < Cg; ++cc)
            for (std::int64_t r = 0; r < p.R; ++r)
              for (std::int64_t s = 0; s < p.S; ++s)
                acc += xp[static_cast<std::size_t>(((n * p.C + g * Cg + cc) * Hp + i * p.stride_h + r * p.dil_h) * Wp +
                                                   j * p.stride_w + s * p.dil_w)] *
                       convred::to_double(w[static_cast<std::size_t>(((k * Cg + cc) * p.R + r) * p.S + s)]);
          out[static_cast<std::size_t>(((n * p.K + k) * P + i) * Q + j)] = acc;
        }
  return out;
}

/// NCHW -> NHWC permutation of a (N,C,H,W) tensor.
template <class T>
std::vector<T> to_nhwc(const std::vector<T>& x, std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W) {
  std::vector<T> y(x.size());
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w)
          y[static_cast<std::size_t>(((n * H + h) * W + w) * C + c)] =
              x[static_cast<std::size_t>(((n * C + c) * H + h) * W + w)];
  return y;
}

}  // namespace

TEST_SUITE("host") {

TEST_CASE("reference::conv2d: 1-channel 3x3, hand-computed (cross-correlation)") {
  const conv2d_problem p = single(4, 4);
  const auto x = ramp(4, 4);  // 1..16
  // out[i][j] = x[i][j] + 2 x[i][j+1] + x[i+1][j+1] + 3 x[i+2][j+2]
  const auto out = run_conv(p, x, kAsym);
  REQUIRE(out.size() == 4);
  CHECK(out[0] == 44.0);  // 1 + 4 + 6 + 33
  CHECK(out[1] == 51.0);  // 2 + 6 + 7 + 36
  CHECK(out[2] == 72.0);  // 5 + 12 + 10 + 45
  CHECK(out[3] == 79.0);  // 6 + 14 + 11 + 48
  const double b = 0.5;
  const auto outb = run_conv(p, x, kAsym, &b);
  CHECK(outb[0] == 44.5);
  CHECK(outb[3] == 79.5);
  // The _at form agrees.
  CHECK(ref::conv2d_at(p, x.data(), kAsym.data(), &b, 0, 0, 1, 0) == 72.5);
  // An epilogue applies after the bias.
  std::vector<double> oute(4);
  ref::conv2d(p, x.data(), kAsym.data(), &b, oute.data(), epi::scale<double>{-2.0});
  CHECK(oute[0] == -89.0);
  CHECK(oute[1] == -103.0);
}

TEST_CASE("reference::conv2d: padding 1, hand-computed borders") {
  conv2d_problem p = single(4, 4);
  p.pad_h = p.pad_w = 1;
  REQUIRE(p.P() == 4);
  REQUIRE(p.Q() == 4);
  const auto out = run_conv(p, ramp(4, 4), kAsym);
  CHECK(out[0] == 19.0);   // taps inside: w[1][1]*x[0][0] + w[2][2]*x[1][1] = 1 + 18
  CHECK(out[3] == 4.0);    // (0,3): w[1][1]*x[0][3] = 4 only
  CHECK(out[5] == 44.0);   // interior (1,1) equals the unpadded (0,0)
  CHECK(out[12] == 31.0);  // (3,0): rows 2..4, cols -1..1: w[0][1] x[2][0] + w[1][1] x[3][0] = 18 + 13
  CHECK(out[15] == 51.0);  // (3,3): x[2][2] + 2 x[2][3] + x[3][3] = 11 + 24 + 16
  // Asymmetric padding: pad_h = 2, pad_w = 0 with a 3x3 kernel on 4x4 gives 6x2.
  conv2d_problem a = single(4, 4);
  a.pad_h = 2, a.pad_w = 0;
  REQUIRE(a.P() == 6);
  REQUIRE(a.Q() == 2);
  const auto outa = run_conv(a, ramp(4, 4), kAsym);
  CHECK(outa[0] == 9.0);    // (0,0): rows -2..0: only w[2][2] x[0][2] = 3 * 3
  CHECK(outa[1] == 12.0);   // (0,1): only w[2][2] x[0][3] = 3 * 4
  CHECK(outa[4] == 44.0);   // (2,0) is the unpadded (0,0)
  CHECK(outa[11] == 44.0);  // (5,1): rows 3..5: only row 3 of w: x[3][1] + 2 x[3][2] = 14 + 30
}

TEST_CASE("reference::conv2d: stride 2 and dilation 2, hand-computed") {
  conv2d_problem p = single(5, 5);  // x[i][j] = 1 + 5i + j
  p.stride_h = p.stride_w = 2;
  REQUIRE(p.P() == 2);
  const auto out = run_conv(p, ramp(5, 5), kAsym);
  CHECK(out[0] == 51.0);   // x00 + 2 x01 + x11 + 3 x22 = 1 + 4 + 7 + 39
  CHECK(out[1] == 65.0);   // x02 + 2 x03 + x13 + 3 x24 = 3 + 8 + 9 + 45
  CHECK(out[2] == 121.0);  // x20 + 2 x21 + x31 + 3 x42 = 11 + 24 + 17 + 69
  CHECK(out[3] == 135.0);  // x22 + 2 x23 + x33 + 3 x44 = 13 + 28 + 19 + 75
  conv2d_problem d = single(5, 5);
  d.dil_h = d.dil_w = 2;
  REQUIRE(d.P() == 1);
  REQUIRE(d.Q() == 1);
  CHECK(run_conv(d, ramp(5, 5), kAsym)[0] == 95.0);  // x00 + 2 x02 + x22 + 3 x44 = 1 + 6 + 13 + 75
  // Different stride per axis, 3x1 kernel: out[i][j] = x[2i][j] - x[2i+1][j] + 10 x[2i+2][j].
  conv2d_problem s = single(5, 3);
  s.R = 3, s.S = 1, s.stride_h = 2, s.stride_w = 1;
  REQUIRE(s.P() == 2);
  REQUIRE(s.Q() == 3);
  const auto outs = run_conv(s, ramp(5, 3), std::vector<double>{1, -1, 10});
  CHECK(outs[0] == 1.0 - 4.0 + 70.0);   // x00=1, x10=4, x20=7
  CHECK(outs[5] == 9.0 - 12.0 + 150.0);  // i=1, j=2: x22=9, x32=12, x42=15
}

TEST_CASE("reference::conv2d: groups = 2 and multiple channels, hand-computed") {
  conv2d_problem p;
  p.N = 1, p.C = 4, p.H = 1, p.W = 2, p.K = 2, p.R = 1, p.S = 1, p.groups = 2;
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8};  // c0 = [1,2], c1 = [3,4], c2 = [5,6], c3 = [7,8]
  const std::vector<double> w{1, -1,                    // k0 sees c0, c1
                              2, 3};                    // k1 sees c2, c3
  const std::vector<double> b{0.5, -1};
  const auto out = run_conv(p, x, w, b.data());
  CHECK(out[0] == -1.5);  // 1 - 3 + 0.5
  CHECK(out[1] == -1.5);  // 2 - 4 + 0.5
  CHECK(out[2] == 30.0);  // 2*5 + 3*7 - 1
  CHECK(out[3] == 35.0);  // 2*6 + 3*8 - 1
  // Without groups the same weights would be read as (K=2, C=4): different numbers.
  conv2d_problem q = p;
  q.groups = 1;
  q.K = 1;
  const auto full = run_conv(q, x, std::vector<double>{1, -1, 2, 3});
  CHECK(full[0] == 1 - 3 + 10 + 21);
  // groups = 2 with a 2x1 kernel, K = 4 (two output channels per group).
  conv2d_problem g;
  g.N = 1, g.C = 2, g.H = 2, g.W = 1, g.K = 4, g.R = 2, g.S = 1, g.groups = 2;
  const std::vector<double> xg{1, 2,     // c0 column
                               10, 20};  // c1 column
  const std::vector<double> wg{1, 1,     // k0 (group 0): c0[0] + c0[1]
                               1, -1,    // k1 (group 0): c0[0] - c0[1]
                               2, 0,     // k2 (group 1): 2 c1[0]
                               0, 3};    // k3 (group 1): 3 c1[1]
  const auto og = run_conv(g, xg, wg);
  REQUIRE(og.size() == 4);
  CHECK(og[0] == 3.0);
  CHECK(og[1] == -1.0);
  CHECK(og[2] == 20.0);
  CHECK(og[3] == 60.0);
}

TEST_CASE("reference::conv2d agrees with an independent explicit-padding conv (stride, dilation, groups)") {
  struct geom {
    std::int64_t N, C, H, W, K, R, S, ph, pw, sh, sw, dh, dw, g;
  };
  const geom cases[] = {
      {1, 1, 5, 5, 1, 3, 3, 0, 0, 1, 1, 1, 1, 1},   {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 9, 8, 6, 3, 2, 2, 0, 2, 3, 1, 1, 2},   {1, 6, 11, 10, 6, 3, 3, 2, 2, 1, 1, 2, 2, 6},
      {3, 2, 6, 7, 3, 5, 5, 2, 1, 2, 1, 1, 2, 1},   {1, 8, 13, 17, 4, 1, 1, 0, 0, 2, 2, 1, 1, 4},
      {1, 3, 1, 1, 5, 1, 1, 0, 0, 1, 1, 1, 1, 1},   {2, 5, 4, 9, 10, 3, 1, 1, 0, 1, 2, 2, 1, 5},
      {1, 2, 3, 3, 2, 3, 3, 1, 1, 3, 3, 1, 1, 1},
  };
  std::uint64_t seed = 100;
  for (const auto& c : cases)
    for (layout lay : {layout::nchw, layout::nhwc})
      for (bool with_bias : {false, true}) {
        conv2d_problem p;
        p.N = c.N, p.C = c.C, p.H = c.H, p.W = c.W, p.K = c.K, p.R = c.R, p.S = c.S;
        p.pad_h = c.ph, p.pad_w = c.pw, p.stride_h = c.sh, p.stride_w = c.sw, p.dil_h = c.dh, p.dil_w = c.dw;
        p.groups = c.g, p.x_layout = lay;
        REQUIRE(convred::validate(p) == convred::status::success);
        const auto x = convred::test::random_vector<double>(static_cast<std::size_t>(p.x_elements()), ++seed);
        const auto w = convred::test::random_vector<double>(static_cast<std::size_t>(p.w_elements()), ++seed);
        const auto b = convred::test::random_vector<double>(static_cast<std::size_t>(p.K), ++seed);
        const auto expect = padded_conv(p, x, w, with_bias ? &b : nullptr);
        const auto got = run_conv(p, x, w, with_bias ? b.data() : nullptr);
        CAPTURE(c.C);
        CAPTURE(c.K);
        CAPTURE(c.g);
        CAPTURE(static_cast<int>(lay));
        double worst = 0;
        for (std::int64_t n = 0; n < p.N; ++n)
          for (std::int64_t k = 0; k < p.K; ++k)
            for (std::int64_t i = 0; i < p.P(); ++i)
              for (std::int64_t j = 0; j < p.Q(); ++j) {
                const double e = expect[static_cast<std::size_t>(((n * p.K + k) * p.P() + i) * p.Q() + j)];
                const double g = got[static_cast<std::size_t>(ref::out_offset(p, n, k, i, j))];
                worst = std::max(worst, std::abs(e - g));
              }
        CHECK(worst <= 1e-12);
      }
}

TEST_CASE("reference: NHWC gives the same numbers as NCHW on permuted data; out_offset follows the layout") {
  conv2d_problem p;
  p.N = 2, p.C = 3, p.H = 6, p.W = 5, p.K = 4, p.R = 3, p.S = 2, p.pad_h = 1, p.stride_w = 2;
  const auto x = convred::test::random_vector<float>(static_cast<std::size_t>(p.x_elements()), 7);
  const auto w = convred::test::random_vector<float>(static_cast<std::size_t>(p.w_elements()), 8);
  const auto b = convred::test::random_vector<float>(static_cast<std::size_t>(p.K), 9);
  std::vector<double> out_nchw(static_cast<std::size_t>(p.out_elements()));
  ref::conv2d(p, x.data(), w.data(), b.data(), out_nchw.data());
  conv2d_problem q = p;
  q.x_layout = layout::nhwc;
  const auto xh = to_nhwc(x, p.N, p.C, p.H, p.W);
  std::vector<double> out_nhwc(static_cast<std::size_t>(q.out_elements()));
  ref::conv2d(q, xh.data(), w.data(), b.data(), out_nhwc.data());
  // The NHWC output is the NCHW output permuted to (N,P,Q,K), value for value (same summation order).
  CHECK(to_nhwc(out_nchw, p.N, p.K, p.P(), p.Q()) == out_nhwc);
  CHECK(ref::x_offset(p, 1, 2, 3, 4) == ((1 * 3 + 2) * 6 + 3) * 5 + 4);
  CHECK(ref::x_offset(q, 1, 2, 3, 4) == ((1 * 6 + 3) * 5 + 4) * 3 + 2);
  CHECK(ref::out_offset(p, 1, 3, 2, 1) == ((1 * 4 + 3) * p.P() + 2) * p.Q() + 1);
  CHECK(ref::out_offset(q, 1, 3, 2, 1) == ((1 * p.P() + 2) * p.Q() + 1) * 4 + 3);
  // The fused reference is layout-independent in its output (N,1,P,Q).
  std::vector<double> y1(static_cast<std::size_t>(p.y_elements())), y2(y1.size());
  std::vector<std::int64_t> i1(y1.size()), i2(y1.size());
  ref::conv2d_reduce(p, x.data(), w.data(), b.data(), y1.data(), i1.data(), op::argmax{});
  ref::conv2d_reduce(q, xh.data(), w.data(), b.data(), y2.data(), i2.data(), op::argmax{});
  CHECK(y1 == y2);
  CHECK(i1 == i2);
}

TEST_CASE("reference::conv2d_reduce equals reducing the reference conv2d output, for every op") {
  conv2d_problem p;
  p.N = 2, p.C = 5, p.H = 7, p.W = 6, p.K = 9, p.R = 3, p.S = 3, p.pad_h = 1, p.pad_w = 1;
  // Integer-valued data: many exact ties across channels.
  const auto x = convred::test::random_int_vector<float>(static_cast<std::size_t>(p.x_elements()), 21, -2, 2);
  const auto w = convred::test::random_int_vector<float>(static_cast<std::size_t>(p.w_elements()), 22, -1, 1);
  const auto b = convred::test::random_int_vector<float>(static_cast<std::size_t>(p.K), 23, -1, 1);
  const epi::scale<float> e{-1.5f};
  std::vector<double> full(static_cast<std::size_t>(p.out_elements()));
  ref::conv2d(p, x.data(), w.data(), b.data(), full.data(), e);
  std::vector<double> y(static_cast<std::size_t>(p.y_elements()));
  std::vector<std::int64_t> idx(y.size());
  auto check_op = [&](auto o, const char* name) {
    const std::string op_name = name;
    CAPTURE(op_name);
    using Op = decltype(o);
    std::fill(y.begin(), y.end(), std::numeric_limits<double>::quiet_NaN());
    std::fill(idx.begin(), idx.end(), std::int64_t(-7));
    ref::conv2d_reduce(p, x.data(), w.data(), b.data(), y.data(), idx.data(), o, e);
    int ties = 0;
    for (std::int64_t n = 0; n < p.N; ++n)
      for (std::int64_t i = 0; i < p.P(); ++i)
        for (std::int64_t j = 0; j < p.Q(); ++j) {
          // Independent reduction of the full output at this pixel.
          double mn = full[static_cast<std::size_t>(ref::out_offset(p, n, 0, i, j))], mx = mn, sum = 0;
          std::int64_t amin = 0, amax = 0;
          for (std::int64_t k = 0; k < p.K; ++k) {
            const double v = full[static_cast<std::size_t>(ref::out_offset(p, n, k, i, j))];
            if (v < mn) mn = v, amin = k;
            if (v > mx) mx = v, amax = k;
            sum += v;
          }
          for (std::int64_t k = amin + 1; k < p.K; ++k)
            ties += full[static_cast<std::size_t>(ref::out_offset(p, n, k, i, j))] == mn;
          const std::size_t o_ = static_cast<std::size_t>((n * p.P() + i) * p.Q() + j);
          if constexpr (std::is_same_v<Op, op::min>) CHECK(y[o_] == mn);
          if constexpr (std::is_same_v<Op, op::max>) CHECK(y[o_] == mx);
          if constexpr (std::is_same_v<Op, op::sum>) CHECK(y[o_] == sum);
          if constexpr (std::is_same_v<Op, op::mean>) CHECK(y[o_] == doctest::Approx(sum / double(p.K)));
          if constexpr (std::is_same_v<Op, op::argmin>) {
            CHECK(y[o_] == mn);
            CHECK(idx[o_] == amin);
          }
          if constexpr (std::is_same_v<Op, op::argmax>) {
            CHECK(y[o_] == mx);
            CHECK(idx[o_] == amax);
          }
          if constexpr (!Op::has_index) CHECK(idx[o_] == -1);
          // The _at form agrees.
          const auto r = ref::conv2d_reduce_at(p, x.data(), w.data(), b.data(), n, i, j, o, e);
          CHECK(r.value == y[o_]);
        }
    if constexpr (std::is_same_v<Op, op::argmin>) CHECK(ties > 0);  // the data really has ties
  };
  check_op(op::min{}, "min");
  check_op(op::max{}, "max");
  check_op(op::sum{}, "sum");
  check_op(op::mean{}, "mean");
  check_op(op::argmin{}, "argmin");
  check_op(op::argmax{}, "argmax");
  // Null outputs are allowed.
  ref::conv2d_reduce(p, x.data(), w.data(), b.data(), nullptr, nullptr, op::min{}, e);
}

TEST_CASE("reference::conv2d_reduce: NaN and infinities follow PyTorch") {
  conv2d_problem p;
  p.N = 1, p.C = 1, p.H = 3, p.W = 1, p.K = 4, p.R = 1, p.S = 1;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x{1, 2, 3};
  const std::vector<double> w{1, -1, 2, -2};
  // Bias makes channels 1 and 3 NaN everywhere; pixel values: k0: x, k1: NaN, k2: 2x, k3: NaN.
  const std::vector<double> b{0, nan, 0, nan};
  std::vector<double> y(3);
  std::vector<std::int64_t> idx(3);
  ref::conv2d_reduce(p, x.data(), w.data(), b.data(), y.data(), idx.data(), op::argmin{});
  for (int i = 0; i < 3; ++i) {
    CHECK(std::isnan(y[i]));
    CHECK(idx[i] == 1);  // first NaN channel
  }
  ref::conv2d_reduce(p, x.data(), w.data(), b.data(), y.data(), nullptr, op::min{});
  CHECK(std::isnan(y[0]));
  // All +inf: min is +inf (no identity leak), argmin 0.
  const std::vector<double> binf(4, inf);
  ref::conv2d_reduce(p, x.data(), w.data(), binf.data(), y.data(), idx.data(), op::argmin{});
  CHECK(y[2] == inf);
  CHECK(idx[2] == 0);
  // +inf in x: channel values +inf, -inf, +inf, -inf -> min -inf at channel 1, max +inf at 0.
  const std::vector<double> xi{inf, 1, 1};
  ref::conv2d_reduce(p, xi.data(), w.data(), static_cast<const double*>(nullptr), y.data(), idx.data(), op::argmin{});
  CHECK(y[0] == -inf);
  CHECK(idx[0] == 1);
  CHECK(y[1] == -2);
  CHECK(idx[1] == 3);
  ref::conv2d_reduce(p, xi.data(), w.data(), static_cast<const double*>(nullptr), y.data(), idx.data(), op::argmax{});
  CHECK(y[0] == inf);
  CHECK(idx[0] == 0);
  CHECK(y[1] == 2);
  CHECK(idx[1] == 2);
}

TEST_CASE("reference::channel_reduce on a tiny tensor, NCHW and NHWC") {
  convred::channel_reduce_problem p;
  p.N = 1, p.C = 3, p.H = 1, p.W = 2;
  // x[c][w]: c0 = [4, -1], c1 = [2, -1], c2 = [2, 5]
  const std::vector<double> x{4, -1, 2, -1, 2, 5};
  std::vector<double> y(2);
  std::vector<std::int64_t> idx(2);
  ref::channel_reduce(p, x.data(), y.data(), idx.data(), op::argmin{});
  CHECK(y[0] == 2);
  CHECK(idx[0] == 1);  // tie between c1 and c2: lowest
  CHECK(y[1] == -1);
  CHECK(idx[1] == 0);
  ref::channel_reduce(p, x.data(), y.data(), idx.data(), op::argmax{});
  CHECK(y[0] == 4);
  CHECK(idx[0] == 0);
  CHECK(y[1] == 5);
  CHECK(idx[1] == 2);
  ref::channel_reduce(p, x.data(), y.data(), idx.data(), op::sum{});
  CHECK(y[0] == 8);
  CHECK(y[1] == 3);
  CHECK(idx[0] == -1);
  ref::channel_reduce(p, x.data(), y.data(), nullptr, op::mean{});
  CHECK(y[0] == 8.0 / 3);
  CHECK(y[1] == 1);
  // With an epilogue (applied before the reduction): min(-2 x) = -2 max(x).
  ref::channel_reduce(p, x.data(), y.data(), idx.data(), op::argmin{}, epi::scale<double>{-2});
  CHECK(y[0] == -8);
  CHECK(idx[0] == 0);
  CHECK(y[1] == -10);
  CHECK(idx[1] == 2);
  // NHWC: the same tensor stored channel-fastest.
  convred::channel_reduce_problem q = p;
  q.x_layout = layout::nhwc;
  const std::vector<double> xh{4, 2, 2, -1, -1, 5};
  ref::channel_reduce(q, xh.data(), y.data(), idx.data(), op::argmin{});
  CHECK(y[0] == 2);
  CHECK(idx[0] == 1);
  CHECK(y[1] == -1);
  CHECK(idx[1] == 0);
  // N = 2: the second image's pixels follow the first's.
  convred::channel_reduce_problem r = p;
  r.N = 2;
  std::vector<double> x2 = x;
  for (double v : x) x2.push_back(-v);
  std::vector<double> y2(4);
  ref::channel_reduce(r, x2.data(), y2.data(), nullptr, op::max{});
  CHECK(y2[0] == 4);
  CHECK(y2[1] == 5);
  CHECK(y2[2] == -2);
  CHECK(y2[3] == 1);
}

TEST_CASE("reference::conv2d with 16-bit inputs reads their exact values") {
  conv2d_problem p = single(4, 4);
  std::vector<__half> xh;
  std::vector<__nv_bfloat16> xb;
  for (double v : ramp(4, 4)) {
    xh.push_back(__double2half(v));
    xb.push_back(__double2bfloat16(v));
  }
  std::vector<__half> wh;
  std::vector<__nv_bfloat16> wb;
  for (double v : kAsym) {
    wh.push_back(__double2half(v));
    wb.push_back(__double2bfloat16(v));
  }
  std::vector<double> oh(4), ob(4);
  ref::conv2d(p, xh.data(), wh.data(), static_cast<const __half*>(nullptr), oh.data());
  ref::conv2d(p, xb.data(), wb.data(), static_cast<const __nv_bfloat16*>(nullptr), ob.data());
  CHECK(oh == std::vector<double>{44, 51, 72, 79});
  CHECK(ob == std::vector<double>{44, 51, 72, 79});
}

}  // TEST_SUITE("host")
