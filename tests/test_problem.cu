// Host tests of the problem types (include/convred/problem.cuh): output size against PyTorch's
// formula and an independent count, every validation status, fast_divmod, and status to_string.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>

#include <convred/detail/fast_divmod.cuh>
#include <convred/problem.cuh>
#include <convred/status.cuh>

namespace {

using convred::conv2d_problem;
using convred::layout;
using convred::status;

/// A valid base problem (the seed case's shape, scaled down).
conv2d_problem base() {
  conv2d_problem p;
  p.N = 2, p.C = 4, p.H = 10, p.W = 12, p.K = 6, p.R = 3, p.S = 3;
  return p;
}

/// PyTorch's documented output size: floor((H + 2*pad - dil*(R-1) - 1) / stride) + 1.
std::int64_t torch_out(std::int64_t H, std::int64_t pad, std::int64_t dil, std::int64_t R, std::int64_t stride) {
  const std::int64_t num = H + 2 * pad - dil * (R - 1) - 1;
  return num < 0 ? 0 : num / stride + 1;
}

/// Independent count: the number of window start positions p*stride (p >= 0) such that the last tap
/// p*stride + dil*(R-1) still lies inside the padded input [0, H + 2*pad).
std::int64_t count_out(std::int64_t H, std::int64_t pad, std::int64_t dil, std::int64_t R, std::int64_t stride) {
  std::int64_t n = 0;
  for (std::int64_t start = 0; start + dil * (R - 1) < H + 2 * pad; start += stride) ++n;
  return n;
}

}  // namespace

TEST_SUITE("host") {

TEST_CASE("conv2d_problem: P and Q match PyTorch's formula and an independent count") {
  int checked = 0, invalid = 0, bad_invalid = 0;
  for (std::int64_t H = 1; H <= 19; ++H)
    for (std::int64_t R = 1; R <= 6; ++R)
      for (std::int64_t pad = 0; pad <= 3; ++pad)
        for (std::int64_t stride = 1; stride <= 4; ++stride)
          for (std::int64_t dil = 1; dil <= 3; ++dil) {
            const std::int64_t expect = count_out(H, pad, dil, R, stride);
            if (expect < 1) {
              // The dilated kernel does not fit the padded input: PyTorch refuses, and so must validate
              // (for every stride, also when C++'s truncating division of a negative numerator gives 0).
              conv2d_problem p = base();
              p.H = H, p.R = R, p.pad_h = pad, p.stride_h = stride, p.dil_h = dil;
              const status s = convred::validate(p);
              if (s != status::invalid_output_size && bad_invalid++ < 3) {
                INFO("H=" << H << " R=" << R << " pad=" << pad << " stride=" << stride << " dil=" << dil
                          << ": P() = " << p.P() << ", validate = " << std::string(convred::to_string(s)));
                CHECK(s == status::invalid_output_size);
              }
              ++invalid;
              continue;
            }
            CHECK(torch_out(H, pad, dil, R, stride) == expect);
            conv2d_problem p = base();
            p.H = H, p.R = R, p.pad_h = pad, p.stride_h = stride, p.dil_h = dil;
            // Width uses the same formula with its own parameters; use a different combination.
            p.W = H + 3, p.S = (R % 3) + 1, p.pad_w = 3 - pad, p.stride_w = 5 - stride, p.dil_w = 4 - dil;
            CAPTURE(H);
            CAPTURE(R);
            CAPTURE(pad);
            CAPTURE(stride);
            CAPTURE(dil);
            CHECK(p.P() == expect);
            const std::int64_t qexp = count_out(p.W, p.pad_w, p.dil_w, p.S, p.stride_w);
            if (qexp >= 1) {
              CHECK(p.Q() == qexp);
              CHECK(convred::validate(p) == status::success);
            }
            ++checked;
          }
  CHECK(checked > 1000);
  CHECK(invalid > 100);
  CHECK(bad_invalid == 0);
  // Known PyTorch shapes.
  conv2d_problem seed;
  seed.N = 64, seed.C = 64, seed.H = 256, seed.W = 256, seed.K = 128, seed.R = 3, seed.S = 3;
  CHECK(seed.P() == 254);
  CHECK(seed.Q() == 254);
  CHECK(seed.gemm_m() == 64 * 254 * 254);
  CHECK(seed.gemm_k() == 64 * 9);
  CHECK(seed.flops() == doctest::Approx(608.8e9).epsilon(1e-3));
  CHECK(seed.x_elements() == 64ll * 64 * 256 * 256);
  CHECK(seed.w_elements() == 128ll * 64 * 9);
  CHECK(seed.y_elements() == 64ll * 254 * 254);
  CHECK(seed.out_elements() == 64ll * 128 * 254 * 254);
  conv2d_problem resnet_stem;  // 224x224, 7x7, stride 2, pad 3 -> 112x112
  resnet_stem.N = 1, resnet_stem.C = 3, resnet_stem.H = 224, resnet_stem.W = 224, resnet_stem.K = 64;
  resnet_stem.R = resnet_stem.S = 7, resnet_stem.stride_h = resnet_stem.stride_w = 2;
  resnet_stem.pad_h = resnet_stem.pad_w = 3;
  CHECK(resnet_stem.P() == 112);
  CHECK(resnet_stem.Q() == 112);
  conv2d_problem dilated;  // 3x3 dilation 2 padding 2 keeps the size
  dilated.N = 1, dilated.C = 1, dilated.H = 31, dilated.W = 17, dilated.K = 1, dilated.R = dilated.S = 3;
  dilated.dil_h = dilated.dil_w = 2, dilated.pad_h = dilated.pad_w = 2;
  CHECK(dilated.P() == 31);
  CHECK(dilated.Q() == 17);
  conv2d_problem asym;  // non-square kernel, different strides and paddings per axis
  asym.N = 1, asym.C = 1, asym.H = 9, asym.W = 8, asym.K = 1, asym.R = 3, asym.S = 1;
  asym.pad_h = 0, asym.pad_w = 2, asym.stride_h = 2, asym.stride_w = 3;
  CHECK(asym.P() == 4);  // (9 - 2 - 1) / 2 + 1
  CHECK(asym.Q() == 4);  // (8 + 4 - 0 - 1) / 3 + 1
  conv2d_problem groups;
  groups.C = 12, groups.K = 8, groups.groups = 4, groups.R = 3, groups.S = 5;
  CHECK(groups.C_per_group() == 3);
  CHECK(groups.K_per_group() == 2);
  CHECK(groups.gemm_k() == 45);
  CHECK(groups.w_elements() == 8 * 45);
}

TEST_CASE("validate(conv2d_problem): every status") {
  CHECK(convred::validate(base()) == status::success);
  auto with = [](auto f) {
    conv2d_problem p = base();
    f(p);
    return convred::validate(p);
  };
  // Shapes.
  CHECK(with([](conv2d_problem& p) { p.N = -1; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.N = 0; }) == status::success);  // empty work is valid
  CHECK(with([](conv2d_problem& p) { p.C = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.H = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.W = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.K = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.R = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.S = 0; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.C = -3; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.K = -1; }) == status::invalid_shape);
  CHECK(with([](conv2d_problem& p) { p.H = std::int64_t(1) << 50; }) == status::invalid_shape);
  // Stride, dilation, padding.
  CHECK(with([](conv2d_problem& p) { p.stride_h = 0; }) == status::invalid_stride);
  CHECK(with([](conv2d_problem& p) { p.stride_w = 0; }) == status::invalid_stride);
  CHECK(with([](conv2d_problem& p) { p.stride_w = -2; }) == status::invalid_stride);
  CHECK(with([](conv2d_problem& p) { p.dil_h = 0; }) == status::invalid_dilation);
  CHECK(with([](conv2d_problem& p) { p.dil_w = -1; }) == status::invalid_dilation);
  CHECK(with([](conv2d_problem& p) { p.pad_h = -1; }) == status::invalid_padding);
  CHECK(with([](conv2d_problem& p) { p.pad_w = -5; }) == status::invalid_padding);
  // Groups.
  CHECK(with([](conv2d_problem& p) { p.groups = 0; }) == status::invalid_groups);
  CHECK(with([](conv2d_problem& p) { p.groups = -2; }) == status::invalid_groups);
  CHECK(with([](conv2d_problem& p) { p.groups = 3; }) == status::invalid_groups);  // C = 4
  CHECK(with([](conv2d_problem& p) { p.C = 6, p.K = 4, p.groups = 3; }) == status::invalid_groups);  // K % 3
  CHECK(with([](conv2d_problem& p) { p.C = 4, p.K = 6, p.groups = 4; }) == status::invalid_groups);
  CHECK(with([](conv2d_problem& p) { p.C = 6, p.K = 6, p.groups = 3; }) == status::success);
  CHECK(with([](conv2d_problem& p) { p.C = 6, p.K = 6, p.groups = 6; }) == status::success);  // depthwise
  CHECK(with([](conv2d_problem& p) { p.C = 2, p.K = 8, p.groups = 2; }) == status::success);
  // Kernel larger than the padded input.
  CHECK(with([](conv2d_problem& p) { p.H = 2, p.R = 3; }) == status::invalid_output_size);
  CHECK(with([](conv2d_problem& p) { p.W = 4, p.S = 5; }) == status::invalid_output_size);
  CHECK(with([](conv2d_problem& p) { p.H = 2, p.R = 3, p.pad_h = 1; }) == status::success);
  CHECK(with([](conv2d_problem& p) { p.H = 4, p.R = 3, p.dil_h = 2; }) == status::invalid_output_size);
  CHECK(with([](conv2d_problem& p) { p.H = 4, p.R = 3, p.dil_h = 2, p.pad_h = 1; }) == status::success);
  CHECK(with([](conv2d_problem& p) { p.W = 1, p.S = 2, p.stride_w = 7; }) == status::invalid_output_size);
  // Layout.
  CHECK(with([](conv2d_problem& p) { p.x_layout = static_cast<layout>(2); }) == status::invalid_layout);
  CHECK(with([](conv2d_problem& p) { p.x_layout = static_cast<layout>(-1); }) == status::invalid_layout);
  CHECK(with([](conv2d_problem& p) { p.x_layout = layout::nhwc; }) == status::success);
  // Sizes whose products overflow int64.
  CHECK(with([](conv2d_problem& p) {
          p.N = p.C = p.H = p.W = std::int64_t(1) << 20;
          p.K = 1, p.R = p.S = 1;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // 2^61 elements fit, 2^61 * 4 bytes do not
          p.N = std::int64_t(1) << 21, p.C = std::int64_t(1) << 20, p.H = p.W = std::int64_t(1) << 10;
          p.K = 1, p.R = p.S = 1;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // x fits; full output N*K*P*Q does not
          p.N = std::int64_t(1) << 30, p.C = 1, p.H = p.W = std::int64_t(1) << 10;
          p.K = std::int64_t(1) << 20, p.R = p.S = 1;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // K at 2^30: channel indices are int32
          p.N = 1, p.C = 1, p.H = p.W = 1, p.K = std::int64_t(1) << 30, p.R = p.S = 1;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // GEMM_K = C*R*S at 2^31
          p.N = 1, p.C = std::int64_t(1) << 27, p.H = p.W = 4, p.K = 1, p.R = p.S = 4;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // C at 2^30 (C/groups = 2): channel indices are int32
          p.N = 1, p.C = std::int64_t(1) << 30, p.H = p.W = 1, p.K = std::int64_t(1) << 29, p.R = p.S = 1;
          p.groups = std::int64_t(1) << 29;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) {  // C just below 2^30: valid
          p.N = 1, p.C = (std::int64_t(1) << 30) - 1, p.H = p.W = 1, p.K = 1, p.R = p.S = 1;
        }) == status::success);
  CHECK(with([](conv2d_problem& p) {  // N = 0: one image's x must still fit (2^29 x 2^29 x 2^29 elements do not)
          p.N = 0, p.C = std::int64_t(1) << 29, p.H = p.W = std::int64_t(1) << 29, p.K = 1, p.R = p.S = 1;
        }) == status::size_overflow);
  CHECK(with([](conv2d_problem& p) { p.N = 0, p.C = 64, p.H = p.W = 1024; }) == status::success);
  // Large but representable problems are fine (the >2^31-element GPU case).
  CHECK(with([](conv2d_problem& p) { p.N = 1, p.C = 3, p.H = p.W = 27000, p.K = 4; }) == status::success);
  // Element size matters for the byte count: 2^60 elements fit in 8 bytes each? No: 2^63 overflows.
  conv2d_problem big;
  big.N = std::int64_t(1) << 20, big.C = std::int64_t(1) << 20, big.H = std::int64_t(1) << 10, big.W = 1;
  big.K = 1, big.R = big.S = 1;  // x: 2^50 elements; y: 2^30
  CHECK(convred::validate(big, 4) == status::success);
  CHECK(convred::validate(big, std::int64_t(1) << 13) == status::size_overflow);  // 2^63 bytes
}

TEST_CASE("validate(conv2d_problem): checks are ordered and the first problem is reported") {
  conv2d_problem p = base();
  p.C = 0;
  p.stride_h = 0;
  CHECK(convred::validate(p) == status::invalid_shape);
  p.C = 4;
  CHECK(convred::validate(p) == status::invalid_stride);
  p.stride_h = 1;
  p.groups = 0;
  CHECK(convred::validate(p) == status::invalid_groups);
}

TEST_CASE("validate(channel_reduce_problem): every status") {
  convred::channel_reduce_problem p;
  p.N = 2, p.C = 5, p.H = 3, p.W = 4;
  CHECK(convred::validate(p) == status::success);
  CHECK(p.x_elements() == 120);
  CHECK(p.y_elements() == 24);
  auto with = [&](auto f) {
    convred::channel_reduce_problem q = p;
    f(q);
    return convred::validate(q);
  };
  CHECK(with([](auto& q) { q.N = 0; }) == status::success);
  CHECK(with([](auto& q) { q.N = -1; }) == status::invalid_shape);
  CHECK(with([](auto& q) { q.C = 0; }) == status::invalid_shape);
  CHECK(with([](auto& q) { q.H = 0; }) == status::invalid_shape);
  CHECK(with([](auto& q) { q.W = -1; }) == status::invalid_shape);
  CHECK(with([](auto& q) { q.x_layout = static_cast<layout>(5); }) == status::invalid_layout);
  CHECK(with([](auto& q) { q.x_layout = layout::nhwc; }) == status::success);
  CHECK(with([](auto& q) { q.N = q.C = q.H = q.W = std::int64_t(1) << 20; }) == status::size_overflow);
  CHECK(with([](auto& q) { q.C = std::int64_t(1) << 30; }) == status::size_overflow);
  // N = 0: one image must still fit (2^29 x 2^20 x 2^20 elements do not)
  CHECK(with([](auto& q) { q.N = 0, q.C = std::int64_t(1) << 29, q.H = q.W = std::int64_t(1) << 20; }) ==
        status::size_overflow);
}

TEST_CASE("fast_divmod agrees with / and % for many divisors and numerators up to 2^31-1") {
  std::mt19937_64 gen(31337);
  std::uniform_int_distribution<std::int32_t> num(0, std::numeric_limits<std::int32_t>::max());
  auto check_divisor = [&](std::int32_t d) {
    const convred::detail::fast_divmod f(d);
    CHECK(f.d == d);
    std::int64_t bad = 0;
    auto one = [&](std::int32_t n) {
      std::int32_t q = -1, r = -1;
      f.divmod(n, q, r);
      if (f.div(n) != n / d || q != n / d || r != n % d) {
        if (bad++ < 3) {
          INFO("d = " << d << ", n = " << n << ": got " << q << " r " << r << ", want " << n / d << " r " << n % d);
          CHECK(false);
        }
      }
    };
    // Around multiples of d near zero and near 2^31-1, plus random numerators.
    for (std::int32_t n = 0; n < 64; ++n) one(n);
    for (std::int64_t m : {std::int64_t(1), std::int64_t(2), std::int64_t(3), std::int64_t(1000)}) {
      const std::int64_t base_n = m * d;
      for (std::int64_t e = -2; e <= 2; ++e)
        if (base_n + e >= 0 && base_n + e <= std::numeric_limits<std::int32_t>::max())
          one(static_cast<std::int32_t>(base_n + e));
    }
    const std::int64_t top = std::numeric_limits<std::int32_t>::max();
    const std::int64_t last_multiple = top / d * d;
    for (std::int64_t e = -3; e <= 3; ++e)
      if (last_multiple + e >= 0 && last_multiple + e <= top) one(static_cast<std::int32_t>(last_multiple + e));
    for (std::int64_t e = 0; e < 8; ++e) one(static_cast<std::int32_t>(top - e));
    for (int i = 0; i < 200; ++i) one(num(gen));
    CHECK(bad == 0);
  };
  for (std::int32_t d = 1; d <= 2000; ++d) check_divisor(d);
  for (int s = 0; s <= 30; ++s) {
    const std::int32_t p2 = std::int32_t(1) << s;
    check_divisor(p2);
    if (p2 > 2) check_divisor(p2 - 1);
    if (s < 30) check_divisor(p2 + 1);
  }
  for (std::int32_t d : {(1 << 30) - 3, (1 << 30) + 7, 1500000001, std::numeric_limits<std::int32_t>::max() - 1,
                         std::numeric_limits<std::int32_t>::max(), 9, 25, 49, 576, 1152, 3 * 3 * 64})
    check_divisor(d);
  std::uniform_int_distribution<std::int32_t> div(1, std::numeric_limits<std::int32_t>::max());
  for (int i = 0; i < 300; ++i) check_divisor(div(gen));
  // Exhaustive over all numerators below 2^20 for the divisors the kernels use most (R*S, S).
  for (std::int32_t d : {1, 3, 5, 7, 9, 25}) {
    const convred::detail::fast_divmod f(d);
    std::int64_t bad = 0;
    for (std::int32_t n = 0; n < (1 << 20); ++n) bad += f.div(n) != n / d;
    CAPTURE(d);
    CHECK(bad == 0);
  }
}

TEST_CASE("to_string(status) names every value") {
  std::set<std::string> seen;
  const int last = static_cast<int>(status::not_prepared);
  for (int i = 0; i <= last; ++i) {
    const char* s = convred::to_string(static_cast<status>(i));
    REQUIRE(s != nullptr);
    const std::string text = s;
    CAPTURE(i);
    CAPTURE(text);
    CHECK(std::string(s).find("unknown") == std::string::npos);
    CHECK(std::strlen(s) > 0);
    seen.insert(s);
  }
  CHECK(seen.size() == static_cast<std::size_t>(last + 1));  // all distinct
  CHECK(std::string(convred::to_string(status::success)) == "success");
  // Each text starts with the enumerator's name, so a log line can be grepped.
  CHECK(std::string(convred::to_string(status::size_overflow)).rfind("size_overflow", 0) == 0);
  CHECK(std::string(convred::to_string(status::misaligned_pointer)).rfind("misaligned_pointer", 0) == 0);
  CHECK(std::string(convred::to_string(status::invalid_output_size)).rfind("invalid_output_size", 0) == 0);
  CHECK(std::string(convred::to_string(status::workspace_too_small)).rfind("workspace_too_small", 0) == 0);
  CHECK(std::string(convred::to_string(status::cuda_error)).find("nothing was launched") != std::string::npos);
  CHECK(std::string(convred::to_string(status::not_prepared)).rfind("not_prepared", 0) == 0);
  // The numeric values of the older codes are unchanged (workspace_too_small, then not_prepared appended).
  CHECK(static_cast<int>(status::cuda_error) == 15);
  CHECK(static_cast<int>(status::workspace_too_small) == 16);
  CHECK(static_cast<int>(status::not_prepared) == 17);
  CHECK(std::string(convred::to_string(static_cast<status>(last + 1))).find("unknown") != std::string::npos);
  CHECK(std::string(convred::to_string(static_cast<status>(-1))).find("unknown") != std::string::npos);
}

}  // TEST_SUITE("host")
