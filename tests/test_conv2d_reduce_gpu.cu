// GPU tests of the fused conv2d -> epilogue -> channel reduction, device::conv2d_reduce, with the exact
// SIMT policies (math::ieee). The checking machinery is in conv2d_reduce_check.cuh.
#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;

TEST_SUITE("gpu") {

TEST_CASE("conv2d_reduce: C x K sweep {1,3,7,33,65,130}^2, both layouts, min and argmax") {
  require_gpu();
  std::uint64_t seed = 1000;
  for (std::int64_t C : {1, 3, 7, 33, 65, 130})
    for (std::int64_t K : {1, 3, 7, 33, 65, 130})
      for (layout lay : kLayouts) {
        conv2d_problem p = base(lay);
        p.C = C, p.K = K;
        const std::string name = "C=" + std::to_string(C) + " K=" + std::to_string(K) + " " + lname(lay);
        check_scaled(name + " min", p, ++seed, op::min{});
        check_scaled(name + " argmax", p, ++seed, op::argmax{});
      }
}

TEST_CASE("conv2d_reduce: kernels, stride, dilation, padding, odd shapes, batch (both layouts)") {
  require_gpu();
  const geom cases[] = {
      {"1x1 kernel", make_problem(2, 7, 11, 13, 33, 1, 1)},
      {"1x1 kernel pad 1 (border = bias only)", make_problem(2, 7, 11, 13, 33, 1, 1, 1, 1)},
      {"3x3 kernel no pad", make_problem(2, 7, 11, 13, 33, 3, 3)},
      {"5x5 kernel pad 2", make_problem(2, 7, 11, 13, 33, 5, 5, 2, 2)},
      {"5x5 kernel no pad", make_problem(2, 7, 11, 13, 33, 5, 5)},
      {"3x1 kernel", make_problem(2, 7, 11, 13, 33, 3, 1, 1, 0)},
      {"1x3 kernel", make_problem(2, 7, 11, 13, 33, 1, 3, 0, 1)},
      {"2x2 kernel", make_problem(2, 7, 11, 13, 33, 2, 2)},
      {"7x7 kernel pad 3", make_problem(1, 3, 13, 17, 33, 7, 7, 3, 3)},
      {"stride 2", make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 2, 2)},
      {"stride 2,1", make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 2, 1)},
      {"stride 3 5x5", make_problem(2, 7, 17, 16, 33, 5, 5, 2, 2, 3, 3)},
      {"dilation 2", make_problem(2, 7, 11, 13, 33, 3, 3, 2, 2, 1, 1, 2, 2)},
      {"dilation 1,2", make_problem(2, 7, 11, 13, 33, 3, 3, 1, 2, 1, 1, 1, 2)},
      {"dilation 3 stride 2", make_problem(2, 7, 15, 14, 33, 3, 3, 1, 1, 2, 2, 3, 3)},
      {"asymmetric padding 2,0", make_problem(2, 7, 11, 13, 33, 3, 3, 2, 0)},
      {"asymmetric padding 0,3", make_problem(2, 7, 11, 13, 33, 3, 3, 0, 3)},
      {"large padding 4", make_problem(1, 3, 5, 6, 33, 3, 3, 4, 4)},
      {"1x1 input 1x1 kernel", make_problem(1, 7, 1, 1, 33, 1, 1)},
      {"1x1 input 3x3 kernel pad 1", make_problem(3, 7, 1, 1, 33, 3, 3, 1, 1)},
      {"7x5 input", make_problem(2, 7, 7, 5, 33, 3, 3, 1, 1)},
      {"13x17 input", make_problem(2, 7, 13, 17, 33, 3, 3)},
      {"1x17 input", make_problem(2, 7, 1, 17, 33, 3, 3, 1, 1)},
      {"17x1 input", make_problem(2, 7, 17, 1, 33, 3, 3, 1, 1)},
      {"2x3 input", make_problem(2, 7, 2, 3, 33, 3, 3, 1, 1)},
      {"N=1", make_problem(1, 7, 11, 13, 33, 3, 3, 1, 1)},
      {"N=3", make_problem(3, 7, 11, 13, 33, 3, 3, 1, 1)},
      {"N=3 37x29 (many blocks, ragged last block)", make_problem(3, 5, 37, 29, 7, 3, 3, 1, 1)},
      {"N=5 9x9 (blocks span images)", make_problem(5, 4, 9, 9, 33, 3, 3)},
  };
  std::uint64_t seed = 2000;
  for_each_case_layout(cases, [&](const conv2d_problem& p, const std::string& name) {
    check_scaled(name + " min", p, ++seed, op::min{});
    check_scaled(name + " argmin", p, ++seed, op::argmin{});
  });
}

TEST_CASE("conv2d_reduce: groups (2, 3, depthwise, channel multiplier, partial tiles per group)") {
  require_gpu();
  const geom cases[] = {
      {"groups 2", make_problem(2, 6, 11, 13, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
      {"groups 3 K=33", make_problem(2, 9, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 3)},
      {"depthwise C=K=groups=7", make_problem(2, 7, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7)},
      {"depthwise C=K=groups=33", make_problem(2, 33, 9, 10, 33, 3, 3, 1, 1, 1, 1, 1, 1, 33)},
      {"depthwise x2 C=4 K=8", make_problem(2, 4, 11, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4)},
      {"groups 2 K=130 (65 per group)", make_problem(2, 6, 9, 11, 130, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
      {"groups 65 C=65 K=130", make_problem(1, 65, 9, 8, 130, 3, 3, 1, 1, 1, 1, 1, 1, 65)},
      {"groups 2 stride 2 dilation 2", make_problem(2, 6, 13, 12, 10, 3, 3, 2, 2, 2, 2, 2, 2, 2)},
      {"groups 3 5x5 stride 2", make_problem(3, 9, 13, 17, 33, 5, 5, 2, 2, 2, 2, 1, 1, 3)},
  };
  std::uint64_t seed = 3000;
  for_each_case_layout(cases, [&](const conv2d_problem& p, const std::string& name) {
    check_scaled(name + " min", p, ++seed, op::min{});
    check_scaled(name + " argmax", p, ++seed, op::argmax{});
    check_scaled(name + " mean", p, ++seed, op::mean{});
  });
}

TEST_CASE("conv2d_reduce: every op (incl. a user op) over K = 1, 3, 33, 65, 130, both layouts, bias or not") {
  require_gpu();
  std::uint64_t seed = 4000;
  for (std::int64_t K : {1, 3, 33, 65, 130})
    for (layout lay : kLayouts)
      for (bool bias : {true, false}) {
        conv2d_problem p = base(lay);
        p.K = K;
        for_each_op([&](auto o) {
          const std::string name = std::string(op_name<decltype(o)>()) + " K=" + std::to_string(K) + " " +
                                   lname(lay) + (bias ? " bias" : " no-bias");
          check_scaled(name, p, ++seed, o, 2.0f, bias);
        });
      }
}

TEST_CASE("conv2d_reduce: every dtype x every op (float, double, half, bf16), both layouts") {
  require_gpu();
  std::uint64_t seed = 5000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (layout lay : kLayouts) {
      const conv2d_problem cases[] = {base(lay), make_problem(2, 6, 13, 12, 130, 3, 3, 2, 1, 2, 1, 2, 1, 2, lay)};
      for (const auto& p : cases)
        for_each_op([&](auto o) {
          const std::string name = std::string(type_name<T>()) + " " + op_name<decltype(o)>() + " " + lname(lay);
          check_scaled<convred::default_policy, T>(name, p, ++seed, o);
        });
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d_reduce: non-default simt policies (every op; float, double, half)") {
  require_gpu();
  using p_64x32 = convred::simt_policy<64, 32, 8, 4, 4>;
  using p_32x128 = convred::simt_policy<32, 128, 8, 4, 4>;
  using p_32x64 = convred::simt_policy<32, 64, 8, 4, 4>;
  std::uint64_t seed = 6000;
  for (std::int64_t K : {1, 7, 33, 130})
    for (layout lay : kLayouts) {
      conv2d_problem p = base(lay);
      p.K = K;
      const std::string tail = " K=" + std::to_string(K) + " " + lname(lay);
      for_each_op([&](auto o) {
        const std::string name = std::string(op_name<decltype(o)>()) + tail;
        check_scaled<p_64x32, float>("float simt<64,32,8,4,4> " + name, p, ++seed, o);
        check_scaled<p_32x64, double>("double simt<32,64,8,4,4> " + name, p, ++seed, o);
      });
      check_scaled<p_32x128, float>("float simt<32,128,8,4,4> min" + tail, p, ++seed, op::min{});
      check_scaled<p_32x128, float>("float simt<32,128,8,4,4> argmin" + tail, p, ++seed, op::argmin{});
      check_scaled<p_64x32, __half>("half simt<64,32,8,4,4> argmax" + tail, p, ++seed, op::argmax{});
      // groups with the small-tile policy
      const conv2d_problem g = make_problem(2, 6, 9, 11, 130, 3, 3, 1, 1, 2, 2, 1, 1, 2, lay);
      check_scaled<p_64x32, float>("float simt<64,32,8,4,4> groups argmin" + tail, g, ++seed, op::argmin{});
    }
}

TEST_CASE("conv2d_reduce: epilogues (identity, scale 2, scale -1.5, per-channel, compose, functor, lambda)") {
  require_gpu();
  std::uint64_t seed = 7000;
  check_epilogues<float>(seed);
  check_epilogues<__half>(seed);
}

TEST_CASE("conv2d_reduce: a negative scale turns min into s*max and argmin into argmax (exact data)") {
  require_gpu();
  std::uint64_t seed = 8000;
  for (layout lay : kLayouts)
    for (std::int64_t K : {3, 33, 130}) {
      conv2d_problem p = base(lay);
      p.K = K;
      INFO(describe(p));
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      const auto ny = static_cast<std::size_t>(p.y_elements());
      auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
      thrust::device_vector<float> ymin(ny), ymax(ny);
      thrust::device_vector<std::int64_t> imin(ny), imax(ny);
      test::poison(ymin), test::poison(ymax), test::poison(imin), test::poison(imax);
      REQUIRE(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(ymin), raw(imin), op::argmin{},
                                             epi::scale<float>{-1.5f}) == status::success);
      REQUIRE(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(ymax), raw(imax), op::argmax{},
                                             epi::identity{}) == status::success);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const auto a = test::to_host(ymin), b = test::to_host(ymax);
      const auto ia = test::to_host(imin), ib = test::to_host(imax);
      std::size_t bad = 0;
      for (std::size_t m = 0; m < ny; ++m) bad += !(a[m] == -1.5f * b[m]) || ia[m] != ib[m];
      CHECK(test::count_nan(a) == 0);
      CHECK(bad == 0);
    }
}

TEST_CASE("conv2d_reduce: exact ties and exact values with integer data (every dtype, every op)") {
  require_gpu();
  std::uint64_t seed = 9000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (layout lay : kLayouts)
      for (std::int64_t K : {3, 33, 130}) {
        conv2d_problem p = base(lay);
        p.K = K;
        for_each_op([&](auto o) {
          const auto d = make_data<T>(p, ++seed, data_kind::integer);
          opts opt;
          opt.exact = true;
          const std::string name = std::string("ties ") + type_name<T>() + " " + op_name<decltype(o)>() + " K=" +
                                   std::to_string(K) + " " + lname(lay);
          check_fused(name + " scale 2", p, d, o, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
          check_fused(name + " scale -1.5", p, d, o, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, opt);
        });
      }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d_reduce: all channels equal -> argmin = argmax = 0, min = max = mean, sum = K v") {
  require_gpu();
  std::uint64_t seed = 10000;
  for (layout lay : kLayouts)
    for (std::int64_t K : {1, 33, 130}) {
      conv2d_problem p = base(lay);
      p.K = K;
      auto d = make_data<float>(p, ++seed, data_kind::integer);
      const std::size_t per_k = static_cast<std::size_t>(p.gemm_k());
      for (std::int64_t k = 1; k < K; ++k) {
        std::copy(d.w.begin(), d.w.begin() + per_k, d.w.begin() + k * per_k);
        d.b[k] = d.b[0];
      }
      opts opt;
      opt.exact = true;
      const std::string tail = " K=" + std::to_string(K) + " " + lname(lay);
      for_each_op([&](auto o) {
        check_fused(std::string("all-equal ") + op_name<decltype(o)>() + tail, p, d, o, epi::scale<float>{2.0f},
                    epi::scale<float>{2.0f}, opt);
      });
      // Direct check of the indices: 0 everywhere.
      auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
      thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
      thrust::device_vector<std::int64_t> idx(y.size());
      test::poison(idx);
      REQUIRE(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(y), raw(idx), op::argmax{}) ==
              status::success);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      const auto hi = test::to_host(idx);
      CHECK(std::count(hi.begin(), hi.end(), std::int64_t(0)) == static_cast<std::ptrdiff_t>(hi.size()));
    }
}

TEST_CASE("conv2d_reduce: NaN propagates (min/max NaN, argmin/argmax first NaN channel), every dtype") {
  require_gpu();
  std::uint64_t seed = 11000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T nan = convred::from_compute<T>(std::numeric_limits<double>::quiet_NaN());
    for (layout lay : kLayouts) {
      // (a) NaN in x, groups = 3: only the channels of that input channel's group turn NaN, so the first
      // NaN channel is the group's first channel (11 or 22), not 0.
      {
        conv2d_problem p = make_problem(2, 6, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 3, lay);
        auto d = make_data<T>(p, ++seed, data_kind::integer);
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 3, 5, 6))] = nan;  // group 1
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 5, 0, 0))] = nan;  // group 2, corner
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 0, 10, 12))] = nan;  // group 0, corner
        opts opt;
        opt.exact = true;
        opt.nan_expected = true;
        for_each_op([&](auto o) {
          check_fused(std::string("NaN in x ") + type_name<T>() + " " + op_name<decltype(o)>() + " " + lname(lay), p,
                      d, o, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
        });
      }
      // (b) NaN in the bias of channels 5 and 9 (every pixel: first NaN channel 5), and in w of channel 2
      // for one pixel's worth of taps (padding 0, so every tap is inside the input).
      {
        conv2d_problem p = make_problem(2, 5, 9, 10, 33, 3, 3, 0, 0, 1, 1, 1, 1, 1, lay);
        auto d = make_data<T>(p, ++seed, data_kind::integer);
        d.b[5] = nan;
        d.b[9] = nan;
        opts opt;
        opt.exact = true;
        opt.nan_expected = true;
        check_fused(std::string("NaN in bias ") + type_name<T>() + " argmin " + lname(lay), p, d, op::argmin{},
                    epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
        check_fused(std::string("NaN in bias ") + type_name<T>() + " max " + lname(lay), p, d, op::max{},
                    epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
        d.w[static_cast<std::size_t>(2 * p.gemm_k() + 4)] = nan;  // channel 2, c=0, r=1, s=1
        check_fused(std::string("NaN in w ") + type_name<T>() + " argmax " + lname(lay), p, d, op::argmax{},
                    epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, opt);
        check_fused(std::string("NaN in w ") + type_name<T>() + " min " + lname(lay), p, d, op::min{},
                    epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, opt);
      }
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d_reduce: +inf / -inf inputs and all-infinite channels (no identity leak)") {
  require_gpu();
  std::uint64_t seed = 12000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T inf = convred::from_compute<T>(std::numeric_limits<double>::infinity());
    const T ninf = convred::from_compute<T>(-std::numeric_limits<double>::infinity());
    for (layout lay : kLayouts) {
      const conv2d_problem p = make_problem(2, 5, 9, 10, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
      // (a) +inf and -inf in x (w has zeros too: inf * 0 = NaN, +inf + -inf = NaN, as in PyTorch).
      {
        auto d = make_data<T>(p, ++seed, data_kind::integer);
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 4, 4))] = inf;
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 2, 4, 5))] = ninf;
        d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 4, 8, 9))] = ninf;
        opts opt;
        opt.exact = true;
        opt.nan_expected = true;
        for_each_op([&](auto o) {
          check_fused(std::string("inf in x ") + type_name<T>() + " " + op_name<decltype(o)>() + " " + lname(lay), p,
                      d, o, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, opt);
        });
      }
      // (b) every channel +inf (bias): min = +inf (not FLT_MAX), argmin 0; with scale -1.5 every channel is
      // -inf: max = -inf, argmax 0.
      {
        auto d = make_data<T>(p, ++seed, data_kind::integer);
        std::fill(d.b.begin(), d.b.end(), inf);
        opts opt;
        opt.exact = true;
        opt.nan_expected = true;
        for_each_op([&](auto o) {
          check_fused(std::string("all +inf ") + type_name<T>() + " " + op_name<decltype(o)>() + " " + lname(lay), p,
                      d, o, epi::identity{}, epi::identity{}, opt);
          check_fused(std::string("all -inf ") + type_name<T>() + " " + op_name<decltype(o)>() + " " + lname(lay), p,
                      d, o, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, opt);
        });
        // Explicitly: y = +inf and index 0 for argmin.
        auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
        thrust::device_vector<T> y(static_cast<std::size_t>(p.y_elements()));
        thrust::device_vector<std::int64_t> idx(y.size());
        test::poison(y), test::poison(idx);
        REQUIRE(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(y), raw(idx), op::argmin{}) ==
                status::success);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        const auto hy = test::to_host(y);
        const auto hi = test::to_host(idx);
        std::size_t bad = 0;
        for (std::size_t m = 0; m < hy.size(); ++m)
          bad += !(convred::to_double(hy[m]) == std::numeric_limits<double>::infinity()) || hi[m] != 0;
        CHECK(bad == 0);
      }
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d_reduce: random combinations of shape, layout, op and dtype") {
  require_gpu();
  picker pick{std::mt19937_64(424242)};
  std::uint64_t seed = 13000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (int t = 0; t < 10; ++t) {
      const conv2d_problem p = random_problem(pick, sizeof(T));
      const int which = static_cast<int>(pick(0, 6));
      check_op_index<T>(which, std::string("random #") + std::to_string(t) + " " + type_name<T>(), p, ++seed);
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d_reduce: indices only (y = nullptr) for argmin") {
  require_gpu();
  const conv2d_problem p = base(layout::nhwc);
  const auto d = make_data<float>(p, 14001, data_kind::integer);
  auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  test::poison(idx);
  REQUIRE(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), static_cast<float*>(nullptr), raw(idx),
                                         op::argmin{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<std::int64_t> iref(idx.size());
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), static_cast<double*>(nullptr), iref.data(),
                                    op::argmin{});
  CHECK(test::to_host(idx) == iref);
}

TEST_CASE("conv2d_reduce and conv2d: an explicit non-default stream") {
  require_gpu();
  const conv2d_problem p = make_problem(3, 7, 19, 23, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc);
  const auto d = make_data<float>(p, 14101, data_kind::integer);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements())), out(static_cast<std::size_t>(p.out_elements()));
  thrust::device_vector<std::int64_t> idx(y.size());
  test::poison(y), test::poison(idx), test::poison(out);
  const epi::scale<float> e{-1.5f};
  CHECK(convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(y), raw(idx), op::argmax{}, e, stream) ==
        status::success);
  CHECK(convred::device::conv2d(p, craw(dx), craw(dw), craw(db), raw(out), e, stream) == status::success);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  std::vector<double> yref(y.size()), oref(out.size());
  std::vector<std::int64_t> iref(y.size());
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), yref.data(), iref.data(), op::argmax{}, e);
  convred::reference::conv2d(p, d.x.data(), d.w.data(), d.b.data(), oref.data(), e);
  const auto hy = test::to_host(y), ho = test::to_host(out);
  std::vector<double> dy(hy.begin(), hy.end()), dout(ho.begin(), ho.end());
  CHECK(dy == yref);  // integer data: exact
  CHECK(test::to_host(idx) == iref);
  CHECK(dout == oref);
}

TEST_CASE("conv2d_reduce: bad input returns its status, launches nothing, writes nothing") {
  require_gpu();
  const conv2d_problem good = make_problem(2, 6, 9, 10, 12, 3, 3, 1, 1);
  const auto d = make_data<float>(good, 15001, data_kind::real);
  auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
  const auto ny = static_cast<std::size_t>(good.y_elements());
  thrust::device_vector<float> dy(ny + 16);
  thrust::device_vector<std::int64_t> di(ny + 16);
  const float* x = craw(dx);
  const float* w = craw(dw);
  const float* b = craw(db);
  float* y = raw(dy);
  std::int64_t* idx = raw(di);

  auto expect = [&](const char* what, status want, auto call) {
    INFO(std::string(what));
    test::poison(dy);
    test::poison(di);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const status got = call();
    INFO("got: " << std::string(convred::to_string(got)) << ", want: " << std::string(convred::to_string(want)));
    CHECK(got == want);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
    const auto hy = test::to_host(dy);
    const auto hi = test::to_host(di);
    CHECK(test::count_nan(hy) == hy.size());  // untouched
    CHECK(std::count(hi.begin(), hi.end(), std::numeric_limits<std::int64_t>::min()) ==
          static_cast<std::ptrdiff_t>(hi.size()));
  };
  auto with = [&](auto f) {
    conv2d_problem p = good;
    f(p);
    return p;
  };
  auto fused = [&](const conv2d_problem& p) {
    return [&, p] { return convred::device::conv2d_reduce(p, x, w, b, y, idx, op::argmin{}); };
  };
  // Invalid problems.
  expect("N < 0", status::invalid_shape, fused(with([](auto& p) { p.N = -1; })));
  expect("C = 0", status::invalid_shape, fused(with([](auto& p) { p.C = 0; })));
  expect("H = 0", status::invalid_shape, fused(with([](auto& p) { p.H = 0; })));
  expect("W = 0", status::invalid_shape, fused(with([](auto& p) { p.W = 0; })));
  expect("K = 0", status::invalid_shape, fused(with([](auto& p) { p.K = 0; })));
  expect("R = 0", status::invalid_shape, fused(with([](auto& p) { p.R = 0; })));
  expect("S = 0", status::invalid_shape, fused(with([](auto& p) { p.S = 0; })));
  expect("stride 0", status::invalid_stride, fused(with([](auto& p) { p.stride_w = 0; })));
  expect("dilation 0", status::invalid_dilation, fused(with([](auto& p) { p.dil_h = 0; })));
  expect("negative padding", status::invalid_padding, fused(with([](auto& p) { p.pad_w = -1; })));
  expect("groups 0", status::invalid_groups, fused(with([](auto& p) { p.groups = 0; })));
  expect("groups not dividing C", status::invalid_groups, fused(with([](auto& p) { p.groups = 4; })));
  expect("groups not dividing K", status::invalid_groups, fused(with([](auto& p) { p.K = 9, p.groups = 2; })));
  expect("kernel larger than padded input", status::invalid_output_size,
         fused(with([](auto& p) { p.R = 5, p.pad_h = 0, p.H = 4; })));
  expect("dilated kernel larger than padded input, stride 2", status::invalid_output_size,
         fused(with([](auto& p) { p.H = 2, p.R = 3, p.pad_h = 0, p.stride_h = 2; })));
  expect("bad layout", status::invalid_layout, fused(with([](auto& p) { p.x_layout = static_cast<layout>(3); })));
  expect("int64 overflow", status::size_overflow,
         fused(with([](auto& p) { p.N = p.C = p.H = p.W = std::int64_t(1) << 20, p.K = 1, p.R = p.S = 1; })));
  // Pointers.
  expect("null x", status::null_pointer,
         [&] { return convred::device::conv2d_reduce(good, static_cast<const float*>(nullptr), w, b, y, idx, op::argmin{}); });
  expect("null w", status::null_pointer,
         [&] { return convred::device::conv2d_reduce(good, x, static_cast<const float*>(nullptr), b, y, idx, op::argmin{}); });
  expect("null y for min", status::null_pointer, [&] {
    return convred::device::conv2d_reduce(good, x, w, b, static_cast<float*>(nullptr), nullptr, op::min{});
  });
  expect("null y and indices for argmax", status::null_pointer, [&] {
    return convred::device::conv2d_reduce(good, x, w, b, static_cast<float*>(nullptr), nullptr, op::argmax{});
  });
  expect("indices for sum", status::indices_not_supported,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, y, idx, op::sum{}); });
  expect("indices for min", status::indices_not_supported,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, y, idx, op::min{}); });
  expect("indices for mean", status::indices_not_supported,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, y, idx, op::mean{}); });
  expect("indices for a user op without index", status::indices_not_supported,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, y, idx, range_op{}); });
  expect("misaligned x", status::misaligned_pointer,
         [&] { return convred::device::conv2d_reduce(good, misaligned(x, 2), w, b, y, idx, op::argmin{}); });
  expect("misaligned w", status::misaligned_pointer,
         [&] { return convred::device::conv2d_reduce(good, x, misaligned(w, 1), b, y, idx, op::argmin{}); });
  expect("misaligned bias", status::misaligned_pointer,
         [&] { return convred::device::conv2d_reduce(good, x, w, misaligned(b, 2), y, idx, op::argmin{}); });
  expect("misaligned y", status::misaligned_pointer,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, misaligned(y, 2), idx, op::argmin{}); });
  expect("misaligned indices", status::misaligned_pointer,
         [&] { return convred::device::conv2d_reduce(good, x, w, b, y, misaligned(idx, 4), op::argmin{}); });
  // Overlaps: outputs must not overlap inputs or each other.
  {
    // y on top of x / w / bias: use separate copies as the "input" so the poisoned y buffers stay checkable.
    thrust::device_vector<float> scratch(static_cast<std::size_t>(good.x_elements()) + 64);
    test::poison(scratch);
    float* s = raw(scratch);
    auto expect_overlap = [&](const char* what, auto call) {
      INFO(std::string(what));
      const status got = call();
      INFO("got: " << std::string(convred::to_string(got)));
      CHECK(got == status::overlapping_buffers);
      CHECK(cudaDeviceSynchronize() == cudaSuccess);
      CHECK(test::count_nan(test::to_host(scratch)) == scratch.size());  // untouched
    };
    expect_overlap("y == x", [&] { return convred::device::conv2d_reduce(good, s, w, b, s, nullptr, op::min{}); });
    expect_overlap("y inside x", [&] { return convred::device::conv2d_reduce(good, s, w, b, s + 17, nullptr, op::min{}); });
    expect_overlap("y ends inside x", [&] {
      return convred::device::conv2d_reduce(good, s + ny - 1, w, b, s, nullptr, op::min{});
    });
    expect_overlap("y == w", [&] { return convred::device::conv2d_reduce(good, x, s, b, s, nullptr, op::min{}); });
    expect_overlap("y == bias", [&] { return convred::device::conv2d_reduce(good, x, w, s, s, nullptr, op::min{}); });
    expect_overlap("indices overlap y", [&] {
      return convred::device::conv2d_reduce(good, x, w, b, s, reinterpret_cast<std::int64_t*>(s + 8), op::argmin{});
    });
    expect_overlap("indices overlap x", [&] {
      return convred::device::conv2d_reduce(good, s, w, b, y, reinterpret_cast<std::int64_t*>(s), op::argmin{});
    });
  }
  // Empty work: N = 0 succeeds and writes nothing (also with null pointers).
  expect("N = 0", status::success, fused(with([](auto& p) { p.N = 0; })));
  expect("N = 0, null pointers", status::success, [&] {
    return convred::device::conv2d_reduce(with([](auto& p) { p.N = 0; }), static_cast<const float*>(nullptr),
                                          static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
                                          static_cast<float*>(nullptr), nullptr, op::argmin{});
  });
  // Inputs are never modified by any of the calls above.
  CHECK(bytes_equal(test::to_host(dx), d.x));
  CHECK(bytes_equal(test::to_host(dw), d.w));
  CHECK(bytes_equal(test::to_host(db), d.b));
  // Half precision: misalignment by one byte.
  {
    const auto dh = make_data<__half>(good, 15002, data_kind::real);
    auto hx = test::to_device(dh.x), hw = test::to_device(dh.w);
    thrust::device_vector<__half> hy(ny);
    test::poison(hy);
    CHECK(convred::device::conv2d_reduce(good, misaligned(craw(hx), 1), craw(hw), static_cast<const __half*>(nullptr),
                                         raw(hy), nullptr, op::min{}) == status::misaligned_pointer);
    CHECK(test::count_nan(test::to_host(hy)) == ny);
  }
}

TEST_CASE("sanitizer: fused min, float, NCHW, scale 2, bias (small)") {
  require_gpu();
  const conv2d_problem p = make_problem(2, 5, 9, 11, 33, 3, 3, 1, 1);
  check_scaled("sanitizer fused min", p, 16001, op::min{});
  check_scaled("sanitizer fused argmin K=130", make_problem(1, 3, 7, 6, 130, 3, 3, 1, 1), 16002, op::argmin{});
}

TEST_CASE("sanitizer: fused argmax with groups, stride 2, dilation, NHWC, half (small)") {
  require_gpu();
  const conv2d_problem p = make_problem(2, 6, 11, 10, 34, 3, 3, 2, 1, 2, 2, 2, 1, 2, layout::nhwc);
  check_scaled<convred::default_policy, __half>("sanitizer fused groups nhwc half", p, 16003, op::argmax{});
  check_scaled<convred::default_policy, float>("sanitizer fused groups nhwc float mean", p, 16004, op::mean{});
  check_scaled<convred::simt_policy<64, 32, 8, 4, 4>, float>("sanitizer fused groups nhwc small policy", p, 16005,
                                                            op::argmin{});
}

namespace {
struct index_out_of_range {
  std::int64_t K;
  __host__ __device__ bool operator()(std::int64_t i) const { return i < 0 || i >= K; }
};
}  // namespace

TEST_CASE("large: fused argmin with x of more than 2^31 elements (N=1, C=3, 27000x27000, K=4)") {
  require_gpu();
  conv2d_problem p = make_problem(1, 3, 27000, 27000, 4, 3, 3, 1, 1);
  REQUIRE(p.x_elements() > (std::int64_t(1) << 31));
  REQUIRE(convred::validate(p, sizeof(float)) == status::success);
  thrust::device_vector<float> dx(static_cast<std::size_t>(p.x_elements()));
  thrust::tabulate(dx.begin(), dx.end(), hash_uniform{17001});
  const auto w = test::random_vector<float>(static_cast<std::size_t>(p.w_elements()), 17002);
  const auto b = test::random_vector<float>(static_cast<std::size_t>(p.K), 17003);
  auto dw = test::to_device(w), db = test::to_device(b);
  const std::vector<float> hx = test::to_host(dx);
  const auto ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> dy(ny);
  thrust::device_vector<std::int64_t> di(ny);
  const epi::scale<float> e{2.0f};
  for (layout lay : kLayouts) {
    p.x_layout = lay;
    INFO(describe(p));
    test::poison(dy);
    test::poison(di);
    const status s = convred::device::conv2d_reduce(p, craw(dx), craw(dw), craw(db), raw(dy), raw(di), op::argmin{}, e);
    INFO("status: " << std::string(convred::to_string(s)));
    REQUIRE(s == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(thrust::count_if(dy.begin(), dy.end(), is_nan_f{}) == 0);  // every pixel written
    CHECK(thrust::count_if(di.begin(), di.end(), index_out_of_range{p.K}) == 0);
    // Sample: the first and last pixels, the last row, the last column, and random pixels.
    std::vector<std::int64_t> sample;
    const std::int64_t M = p.y_elements(), P = p.P(), Q = p.Q();
    for (std::int64_t m = 0; m < 64; ++m) sample.push_back(m), sample.push_back(M - 1 - m);
    for (std::int64_t j = 0; j < Q; j += 997) sample.push_back((P - 1) * Q + j);
    for (std::int64_t i = 0; i < P; i += 991) sample.push_back(i * Q + Q - 1);
    std::mt19937_64 gen(17004);
    std::uniform_int_distribution<std::int64_t> any(0, M - 1);
    for (int t = 0; t < 1000; ++t) sample.push_back(any(gen));
    std::vector<std::int64_t> bad;
    for (std::int64_t m : sample) {
      const std::int64_t i = m / Q, j = m % Q;
      const auto r = convred::reference::conv2d_reduce_at(p, hx.data(), w.data(), b.data(), 0, i, j, op::argmin{}, e);
      const double got = dy[static_cast<std::size_t>(m)];
      const std::int64_t gi = di[static_cast<std::size_t>(m)];
      // |x|, |w| < 1, so Σ|x·w| + |b| < C*R*S + 1 = 28 per channel; the scale doubles it.
      const double delta = acc_tol<float>() * (2.0 * 28 + std::abs(r.value));
      const double vsel = gi >= 0 && gi < p.K ? 2.0 * convred::reference::conv2d_at(p, hx.data(), w.data(), b.data(), 0,
                                                                                   gi, i, j)
                                              : std::numeric_limits<double>::quiet_NaN();
      const bool ok = std::abs(got - r.value) <= delta + 1e-7 * std::abs(r.value) &&
                      std::abs(vsel - r.value) <= 2 * delta;
      if (!ok) bad.push_back(m);
    }
    INFO("first bad pixel: " << (bad.empty() ? -1 : bad[0]));
    CHECK(bad.empty());
  }
}

}  // TEST_SUITE("gpu")
