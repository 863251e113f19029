// Tests of the direct (depthwise) path: block::direct_conv_at on the host against the float64 reference
// (host suite), and device::conv2d_reduce_direct against float64 for every op, both layouts, strides,
// dilations, paddings, channel multipliers, non-finite values and the element types (gpu suite); its
// argument errors; and the planner's choice of it.
#include <convred/device/conv2d_reduce_plan.cuh>

#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;

namespace {

/// Depthwise problems (groups = C, K = multiplier * C) over strides, dilations, paddings, odd sizes, and
/// one with C = 1, groups = 1 (a single input channel: also C/groups == 1).
std::vector<conv2d_problem> direct_shapes(layout lay) {
  return {
      make_problem(2, 7, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, lay),        // depthwise 3x3, pad 1
      make_problem(1, 5, 20, 17, 15, 7, 7, 3, 3, 1, 1, 1, 1, 5, lay),       // 7x7 pad 3, multiplier 3
      make_problem(3, 6, 15, 16, 6, 3, 3, 1, 1, 2, 2, 1, 1, 6, lay),        // stride 2
      make_problem(1, 4, 13, 12, 8, 3, 2, 2, 0, 1, 2, 2, 1, 4, lay),        // dilation, uneven stride
      make_problem(2, 1, 9, 10, 33, 5, 5, 2, 2, 1, 1, 1, 1, 1, lay),        // C = 1, groups = 1
      make_problem(1, 33, 4, 5, 33, 1, 1, 0, 0, 1, 1, 1, 1, 33, lay),       // 1x1 depthwise
  };
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("direct_conv_at equals the float64 reference conv (float and double, both layouts)") {
  std::uint64_t seed = 51000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : direct_shapes(lay)) {
      INFO(describe(p));
      const auto d = make_data<double>(p, ++seed, data_kind::real);
      std::vector<double> ref(static_cast<std::size_t>(p.out_elements()));
      convred::reference::conv2d(p, d.x.data(), d.w.data(), d.b.data(), ref.data());
      const auto prm = convred::block::make_conv_params(p, d.x.data(), d.w.data(), d.b.data());
      const auto df = make_data<float>(p, seed, data_kind::integer);  // integers: exact in float too
      std::vector<double> reff(ref.size());
      convred::reference::conv2d(p, df.x.data(), df.w.data(), df.b.data(), reff.data());
      const auto prmf = convred::block::make_conv_params(p, df.x.data(), df.w.data(), df.b.data());
      std::size_t bad = 0, badf = 0;
      for (std::int64_t n = 0; n < p.N; ++n)
        for (std::int64_t k = 0; k < p.K; ++k)
          for (std::int64_t i = 0; i < p.P(); ++i)
            for (std::int64_t j = 0; j < p.Q(); ++j) {
              const auto o = static_cast<std::size_t>(convred::reference::out_offset(p, n, k, i, j));
              const double got = convred::block::direct_conv_at<double>(prm, n, k, i, j);
              bad += std::abs(got - ref[o]) > 1e-12 * (1 + std::abs(ref[o]));
              badf += convred::block::direct_conv_at<float>(prmf, n, k, i, j) != static_cast<float>(reff[o]);
              // the unrolled variants the kernel runs for 3x3, 5x5 and 7x7 (same order: bitwise equal)
              if (p.R == 3 && p.S == 3) bad += convred::block::direct_conv_at<double, 3, 3>(prm, n, k, i, j) != got;
              if (p.R == 7 && p.S == 7) bad += convred::block::direct_conv_at<double, 7, 7>(prm, n, k, i, j) != got;
              if (p.R == 5 && p.S == 5) bad += convred::block::direct_conv_at<double, 5, 5>(prm, n, k, i, j) != got;
            }
      CHECK(bad == 0);
      CHECK(badf == 0);
    }
}

TEST_CASE("direct_conv_at: infinite and NaN filter values meet the zero padding as 0 * w (NaN), as in PyTorch") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(1, 3, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, lay);
    host_data<float> d = make_data<float>(p, 56000, data_kind::integer);
    d.w[0] = static_cast<float>(inf);       // channel 0, tap (0, 0): padding above / left of row 0, column 0
    d.w[9 + 8] = static_cast<float>(-inf);  // channel 1, tap (2, 2)
    d.w[18 + 4] = static_cast<float>(nan);  // channel 2, centre tap
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 3, 3))] = static_cast<float>(inf);
    std::vector<double> ref(static_cast<std::size_t>(p.out_elements()));
    convred::reference::conv2d(p, d.x.data(), d.w.data(), d.b.data(), ref.data());
    const auto prm = convred::block::make_conv_params(p, d.x.data(), d.w.data(), d.b.data());
    std::size_t bad = 0, nans = 0;
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t i = 0; i < p.P(); ++i)
        for (std::int64_t j = 0; j < p.Q(); ++j) {
          const double want = ref[static_cast<std::size_t>(convred::reference::out_offset(p, 0, k, i, j))];
          const float got = convred::block::direct_conv_at<float, 3, 3>(prm, 0, k, i, j);
          nans += std::isnan(want);
          bad += !(got == static_cast<float>(want) || (std::isnan(got) && std::isnan(want)));
        }
    CHECK(nans > 0);
    CHECK(bad == 0);
  }
}
}  // TEST_SUITE("host")

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_direct: every op vs float64, both layouts, strides, dilation, multipliers") {
  require_gpu();
  std::uint64_t seed = 52000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : direct_shapes(lay)) {
      const std::string name = "direct " + describe(p);
      for_each_op([&](auto o) { check_scaled<direct_entry, float>(name, p, ++seed, o); });
      check_scaled<direct_entry, double>(name + " double argmin", p, ++seed, op::argmin{});
      check_scaled<direct_entry, __half>(name + " half min", p, ++seed, op::min{});
      check_scaled<direct_entry, __nv_bfloat16>(name + " bf16 argmax", p, ++seed, op::argmax{}, -1.5f);
      check_scaled<direct_entry, float>(name + " no bias mean", p, ++seed, op::mean{}, 2.0f, false);
    }
  // integer data: exact values and argmin indices (ties: lowest k)
  const conv2d_problem p = make_problem(2, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8);
  const auto d = make_data<float>(p, ++seed, data_kind::integer);
  opts o;
  o.exact = true;
  check_fused<direct_entry>("direct exact argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  check_fused<direct_entry>("direct exact sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
}

TEST_CASE("conv2d_reduce_direct: 1, 2 and 4 lanes per pixel (large images), 7-wide and run-time filters") {
  require_gpu();
  // the host picks lanes from the pixel count (about 2^17 threads): 147,456 pixels -> 1 lane, 40,000 -> 2,
  // 32,400 -> 4; integer data, so values and argmin indices (ties: lowest k) are exact
  std::uint64_t seed = 57000;
  opts o;
  o.exact = true;
  for (const conv2d_problem& p : {make_problem(1, 8, 384, 384, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8),
                                  make_problem(1, 8, 200, 200, 16, 7, 7, 3, 3, 1, 1, 1, 1, 8),
                                  make_problem(1, 8, 180, 180, 8, 5, 5, 2, 2, 1, 1, 1, 1, 8, layout::nhwc)}) {
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    check_fused<direct_entry>("direct lanes argmin " + describe(p), p, d, op::argmin{}, epi::scale<float>{2.0f},
                              epi::scale<float>{2.0f}, o);
    check_fused<direct_entry>("direct lanes sum " + describe(p), p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
  }
}

TEST_CASE("conv2d_reduce_direct: +-inf and NaN in x, w and bias, exact") {
  require_gpu();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  opts o;
  o.exact = true;
  o.nan_expected = true;
  std::uint64_t seed = 53000;
  for (layout lay : kLayouts) {
    // depthwise 3x3, multiplier 2 (channel k reads input channel k / 2), integer data elsewhere
    const conv2d_problem p = make_problem(2, 5, 9, 12, 10, 3, 3, 1, 1, 1, 1, 1, 1, 5, lay);
    host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
    auto all_ops = [&](const std::string& name) {
      INFO("case: " << name << " " << describe(p));
      check_fused<direct_entry>(name + " min", p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " argmax", p, d, op::argmax{}, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
      check_fused<direct_entry>(name + " mean", p, d, op::mean{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    };
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 4, 4))] = static_cast<float>(inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 2, 4, 6))] = static_cast<float>(-inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 4, 8, 11))] = static_cast<float>(-inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 0, 2, 9))] = static_cast<float>(nan);
    all_ops("direct inf/NaN in x");
    d.w[static_cast<std::size_t>(3 * 9 + 4)] = static_cast<float>(inf);    // channel 3
    d.w[static_cast<std::size_t>(6 * 9 + 0)] = static_cast<float>(-inf);   // channel 6
    d.w[static_cast<std::size_t>(8 * 9 + 8)] = static_cast<float>(nan);    // channel 8
    all_ops("direct inf/NaN in x and w");
    d.b[2] = static_cast<float>(-inf), d.b[9] = static_cast<float>(nan);
    all_ops("direct inf/NaN in x, w and bias");
  }
}

TEST_CASE("conv2d_reduce_direct sanitizer: depthwise, multiplier, stride, both layouts") {
  require_gpu();
  std::uint64_t seed = 54000;
  for (layout lay : kLayouts) {
    check_scaled<direct_entry, float>("sanitizer direct", make_problem(2, 6, 9, 7, 12, 3, 3, 1, 1, 2, 1, 1, 1, 6, lay),
                                      ++seed, op::argmin{});
    check_scaled<direct_entry, float>("sanitizer direct 1x1", make_problem(1, 5, 4, 6, 5, 1, 1, 0, 0, 1, 1, 1, 1, 5, lay),
                                      ++seed, op::sum{});
  }
}

TEST_CASE("conv2d_reduce_direct: argument errors") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4);
  thrust::device_vector<float> x(static_cast<std::size_t>(p.x_elements()), 1.f), w(static_cast<std::size_t>(p.w_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  using convred::device::conv2d_reduce_direct;
  conv2d_problem dense = p;
  dense.groups = 2;  // C/groups = 2: not served
  CHECK(conv2d_reduce_direct(dense, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{}) == status::invalid_groups);
  conv2d_problem bad = p;
  bad.groups = 3;  // C % groups != 0: validate's own error
  CHECK(conv2d_reduce_direct(bad, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{}) == status::invalid_groups);
  CHECK(conv2d_reduce_direct(p, craw(x), craw(w), nullptr, raw(y), raw(idx), op::min{}) == status::indices_not_supported);
  CHECK(conv2d_reduce_direct(p, static_cast<const float*>(nullptr), craw(w), nullptr, raw(y), nullptr, op::min{}) ==
        status::null_pointer);
  CHECK(conv2d_reduce_direct(p, craw(x), craw(w), nullptr, const_cast<float*>(craw(x)), nullptr, op::min{}) ==
        status::overlapping_buffers);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("conv2d_reduce_plan picks the direct kernel for C/groups == 1 under every math") {
  require_gpu();
  const conv2d_problem dw = make_problem(2, 12, 14, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 12);
  CHECK(convred::device::conv2d_reduce_plan<float>(dw).kernel() == convred::device::kernel_kind::direct);
  CHECK(convred::device::conv2d_reduce_plan<float, math::tf32>(dw).kernel() == convred::device::kernel_kind::direct);
  CHECK(convred::device::conv2d_reduce_plan<__half, math::bf16>(dw).kernel() == convred::device::kernel_kind::direct);
  // the plan's output is the direct entry point's, and within the exact tolerance of float64
  const auto d = make_data<float>(dw, 55001, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw_ = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<float> y1(static_cast<std::size_t>(dw.y_elements())), y2(y1.size());
  thrust::device_vector<std::int64_t> i1(y1.size()), i2(y1.size());
  test::poison(y1), test::poison(y2);
  convred::device::conv2d_reduce_plan<float, math::bf16> plan(dw);
  REQUIRE(plan.prepare(craw(dw_)) == status::success);
  CHECK(plan.workspace_bytes() == 0u);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}, epi::scale<float>{2.0f}) == status::success);
  REQUIRE(convred::device::conv2d_reduce_direct(dw, craw(dx), craw(dw_), craw(db), raw(y2), raw(i2), op::argmin{},
                                                epi::scale<float>{2.0f}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(y1) == test::to_host(y2));
  CHECK(test::to_host(i1) == test::to_host(i2));
}
}  // TEST_SUITE("gpu")
