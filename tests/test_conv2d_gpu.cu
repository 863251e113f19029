// GPU tests of conv2d with epilogue writing the full output, device::conv2d.
//
// Every case: build a problem, fresh random data (a fixed but different seed per case), copy to the
// device, poison the output (NaN), call the device API, require status::success, copy back, require
// every element written and the inputs unmodified, and compare with the float64 reference
// (reference::conv2d, same layout: (N,K,P,Q) for NCHW, (N,P,Q,K) for NHWC): exactly for integer-valued
// data (NaN, infinities), else ‖out−ref‖/‖ref‖ ≤ tol::ieee<T>() and, per element,
// |out−ref| ≤ acc_tol·(gain·(Σ|x·w|+|b|) + |ref|) plus T's final rounding. Test cases named
// "*sanitizer*" are small, for compute-sanitizer; the "large" case has more than 2^31 input and output
// elements.
// The problem, data, poisoning and comparison helpers are shared with the fused tests (conv2d_reduce_check.cuh).
#include "conv2d_reduce_check.cuh"

namespace convred_test_conv {

using convred::conv2d_problem;
using convred::layout;
using convred::status;
using convred::test::craw;
using convred::test::describe;
using convred::test::kLayouts;
using convred::test::lname;
using convred::test::raw;
using convred::test::type_name;
using convred_test_fused::abs_of;
using convred_test_fused::acc_tol;
using convred_test_fused::base;
using convred_test_fused::bytes_equal;
using convred_test_fused::count_unwritten;
using convred_test_fused::data_kind;
using convred_test_fused::for_each_case_layout;
using convred_test_fused::geom;
using convred_test_fused::half_minus_quarter;
using convred_test_fused::hash_uniform;
using convred_test_fused::host_data;
using convred_test_fused::is_nan_f;
using convred_test_fused::make_data;
using convred_test_fused::make_problem;
using convred_test_fused::misaligned;
using convred_test_fused::opts;
using convred_test_fused::picker;
using convred_test_fused::poison_output;
using convred_test_fused::random_problem;
using convred_test_fused::require_gpu;
using convred_test_fused::same_value;
namespace epi = convred::epilogue;
namespace test = convred::test;

/// The whole check of one full-output conv call (see the file comment).
template <class Policy = convred::default_policy, class T, class DevEpi, class HostEpi>
void check_conv(const std::string& name, const conv2d_problem& p, const host_data<T>& d, DevEpi de, HostEpi he,
                opts o) {
  INFO("case: " << name);
  INFO("problem: " << describe(p));
  INFO("T=" << type_name<T>() << (o.bias ? " bias" : " no-bias")
            << (std::is_same_v<Policy, convred::default_policy> ? " default-policy" : " custom-policy"));
  REQUIRE(convred::validate(p, sizeof(T)) == status::success);
  const auto no = static_cast<std::size_t>(p.out_elements());
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<T> dout(no);
  poison_output(dout, o.nan_expected);

  const T* dbias = o.bias ? craw(db) : nullptr;
  const status s = convred::device::conv2d<Policy>(p, craw(dx), craw(dw), dbias, raw(dout), de);
  INFO("status: " << std::string(convred::to_string(s)));
  REQUIRE(s == status::success);
  const cudaError_t e = cudaDeviceSynchronize();
  INFO("CUDA: " << std::string(cudaGetErrorString(e)));
  REQUIRE(e == cudaSuccess);

  const auto out = test::to_host(dout);
  CHECK(bytes_equal(test::to_host(dx), d.x));  // inputs are never modified
  CHECK(bytes_equal(test::to_host(dw), d.w));
  CHECK(bytes_equal(test::to_host(db), d.b));
  const std::size_t unwritten = count_unwritten(out, o.nan_expected);
  CHECK(unwritten == 0);

  const T* hbias = o.bias ? d.b.data() : nullptr;
  std::vector<double> ref(no);
  convred::reference::conv2d(p, d.x.data(), d.w.data(), hbias, ref.data(), he);

  std::size_t bad = 0;
  std::ostringstream first;
  auto note = [&](std::size_t i, double got, double want, double bound) {
    if (first.tellp() == 0)
      first << "element " << i << ": out=" << got << " ref=" << want << " (bound " << bound << ")";
  };
  if (o.exact) {
    for (std::size_t i = 0; i < no; ++i) {
      const double got = convred::to_double(out[i]), want = convred::to_double(convred::from_compute<T>(ref[i]));
      if (!same_value(got, want)) {
        note(i, got, want, 0);
        ++bad;
      }
    }
    INFO("first mismatch: " << first.str());
    CHECK(bad == 0);
    return;
  }

  CHECK(test::rel_norm_error(out, ref) <= test::tol::ieee<T>());
  const auto ax = abs_of(d.x), aw = abs_of(d.w), ab = abs_of(d.b);
  std::vector<double> A(no);
  convred::reference::conv2d(p, ax.data(), aw.data(), o.bias ? ab.data() : static_cast<const double*>(nullptr),
                             A.data());
  const double ta = acc_tol<T>(), uT = test::tol::unit_roundoff<T>();
  for (std::size_t i = 0; i < no; ++i) {
    const double got = convred::to_double(out[i]), want = ref[i];
    const double delta = ta * (o.gain * A[i] + std::abs(want));
    const double bound = delta + uT * (std::abs(want) + delta);
    if (!(std::abs(got - want) <= bound)) {
      note(i, got, want, bound);
      ++bad;
    }
  }
  INFO("first mismatch: " << first.str());
  CHECK(bad == 0);
}

template <class Policy = convred::default_policy, class T = float>
void check_scaled(const std::string& name, const conv2d_problem& p, std::uint64_t seed, float s = 2.0f,
                  bool bias = true) {
  const auto d = make_data<T>(p, seed, data_kind::real);
  opts o;
  o.bias = bias;
  o.gain = std::abs(s);
  check_conv<Policy>(name, p, d, epi::scale<float>{s}, epi::scale<float>{s}, o);
}

/// Every epilogue kind on one problem, both layouts, with and without bias (namespace scope: it hosts an
/// extended __host__ __device__ lambda).
template <class T>
void check_epilogues(std::uint64_t& seed) {
  auto lam = [] __host__ __device__(float v, int k) { return (k % 2 ? 3.0f : -0.5f) * v; };
  for (layout lay : kLayouts)
    for (bool bias : {true, false}) {
      const conv2d_problem p = make_problem(2, 5, 9, 11, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
      const std::string tail = std::string(" ") + type_name<T>() + " " + lname(lay) + (bias ? " bias" : " no-bias");
      const auto hs = test::random_vector<float>(static_cast<std::size_t>(p.K), ++seed, -2, 2);
      const auto ds = test::to_device(hs);
      double smax = 0;
      for (float v : hs) smax = std::max(smax, double(std::abs(v)));
      const epi::per_channel_scale<float> dev_pcs{craw(ds)}, host_pcs{hs.data()};
      const auto d = make_data<T>(p, ++seed, data_kind::real);
      opts o;
      o.bias = bias;
      o.gain = 1;
      check_conv("identity" + tail, p, d, epi::identity{}, epi::identity{}, o);
      o.gain = 2;
      check_conv("scale 2" + tail, p, d, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      o.gain = 1.5;
      check_conv("scale -1.5" + tail, p, d, epi::scale<double>{-1.5}, epi::scale<double>{-1.5}, o);
      o.gain = smax;
      check_conv("per-channel scale" + tail, p, d, dev_pcs, host_pcs, o);
      o.gain = 1.5 * smax;
      check_conv("compose(per-channel, scale -1.5)" + tail, p, d, epi::make_compose(dev_pcs, epi::scale<float>{-1.5f}),
                 epi::make_compose(host_pcs, epi::scale<float>{-1.5f}), o);
      o.gain = 0.5;
      check_conv("user functor" + tail, p, d, half_minus_quarter{}, half_minus_quarter{}, o);
      o.gain = 3;
      check_conv("extended lambda" + tail, p, d, lam, lam, o);
    }
}

}  // namespace convred_test_conv

using namespace convred_test_conv;

TEST_SUITE("gpu") {

TEST_CASE("conv2d: C x K sweep {1,3,7,33,65,130}^2, both layouts") {
  require_gpu();
  std::uint64_t seed = 21000;
  for (std::int64_t C : {1, 3, 7, 33, 65, 130})
    for (std::int64_t K : {1, 3, 7, 33, 65, 130})
      for (layout lay : kLayouts) {
        conv2d_problem p = base(lay);
        p.C = C, p.K = K;
        check_scaled("C=" + std::to_string(C) + " K=" + std::to_string(K) + " " + lname(lay), p, ++seed);
      }
}

TEST_CASE("conv2d: kernels, stride, dilation, padding, groups, odd shapes, batch (both layouts)") {
  require_gpu();
  const geom cases[] = {
      {"1x1 kernel", make_problem(2, 7, 11, 13, 33, 1, 1)},
      {"1x1 kernel pad 1 (border = bias only)", make_problem(2, 7, 11, 13, 33, 1, 1, 1, 1)},
      {"3x3 no pad", make_problem(2, 7, 11, 13, 33, 3, 3)},
      {"5x5 pad 2", make_problem(2, 7, 11, 13, 33, 5, 5, 2, 2)},
      {"3x1 kernel", make_problem(2, 7, 11, 13, 33, 3, 1, 1, 0)},
      {"1x3 kernel", make_problem(2, 7, 11, 13, 33, 1, 3, 0, 1)},
      {"2x2 kernel", make_problem(2, 7, 11, 13, 33, 2, 2)},
      {"stride 2", make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 2, 2)},
      {"stride 1,3", make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 3)},
      {"dilation 2", make_problem(2, 7, 11, 13, 33, 3, 3, 2, 2, 1, 1, 2, 2)},
      {"dilation 2,1 stride 2", make_problem(2, 7, 15, 14, 33, 3, 3, 1, 1, 2, 2, 2, 1)},
      {"asymmetric padding 2,0", make_problem(2, 7, 11, 13, 33, 3, 3, 2, 0)},
      {"asymmetric padding 0,3", make_problem(2, 7, 11, 13, 33, 3, 3, 0, 3)},
      {"groups 2", make_problem(2, 6, 11, 13, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
      {"groups 3 K=33", make_problem(2, 9, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 3)},
      {"depthwise C=K=groups=7", make_problem(2, 7, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7)},
      {"depthwise x2 C=4 K=8", make_problem(2, 4, 11, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4)},
      {"groups 2 K=130", make_problem(2, 6, 9, 11, 130, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
      {"groups 2 stride 2 dilation 2", make_problem(2, 6, 13, 12, 10, 3, 3, 2, 2, 2, 2, 2, 2, 2)},
      {"1x1 input 1x1 kernel", make_problem(1, 7, 1, 1, 33, 1, 1)},
      {"1x1 input 3x3 kernel pad 1", make_problem(3, 7, 1, 1, 33, 3, 3, 1, 1)},
      {"7x5 input", make_problem(2, 7, 7, 5, 33, 3, 3, 1, 1)},
      {"13x17 input", make_problem(2, 7, 13, 17, 33, 3, 3)},
      {"1x17 input", make_problem(2, 7, 1, 17, 33, 3, 3, 1, 1)},
      {"N=1", make_problem(1, 7, 11, 13, 33, 3, 3, 1, 1)},
      {"N=3", make_problem(3, 7, 11, 13, 33, 3, 3, 1, 1)},
      {"N=3 37x29 (many blocks)", make_problem(3, 5, 37, 29, 7, 3, 3, 1, 1)},
  };
  std::uint64_t seed = 22000;
  for_each_case_layout(cases, [&](const conv2d_problem& p, const std::string& name) {
    for (bool bias : {true, false}) check_scaled(name + (bias ? " bias" : " no-bias"), p, ++seed, 2.0f, bias);
  });
}

TEST_CASE("conv2d: every dtype (float, double, half, bf16), both layouts, default and custom policies") {
  require_gpu();
  using p_64x32 = convred::simt_policy<64, 32, 8, 4, 4>;
  using p_32x64 = convred::simt_policy<32, 64, 8, 4, 4>;
  std::uint64_t seed = 23000;
  for (layout lay : kLayouts) {
    const conv2d_problem cases[] = {base(lay), make_problem(2, 6, 13, 12, 130, 3, 3, 2, 1, 2, 1, 2, 1, 2, lay),
                                    make_problem(3, 3, 7, 5, 1, 5, 5, 2, 2)};
    for (const auto& p0 : cases) {
      conv2d_problem p = p0;
      p.x_layout = lay;
      const std::string tail = std::string(" ") + lname(lay) + " K=" + std::to_string(p.K);
      check_scaled<convred::default_policy, float>("float" + tail, p, ++seed);
      check_scaled<convred::default_policy, double>("double" + tail, p, ++seed);
      check_scaled<convred::default_policy, __half>("half" + tail, p, ++seed);
      check_scaled<convred::default_policy, __nv_bfloat16>("bf16" + tail, p, ++seed);
      check_scaled<p_64x32, float>("float simt<64,32,8,4,4>" + tail, p, ++seed);
      check_scaled<p_32x64, double>("double simt<32,64,8,4,4>" + tail, p, ++seed);
      check_scaled<p_64x32, __nv_bfloat16>("bf16 simt<64,32,8,4,4>" + tail, p, ++seed, -1.5f, false);
    }
  }
}

TEST_CASE("conv2d: epilogues (identity, scale 2, scale -1.5, per-channel, compose, functor, lambda)") {
  require_gpu();
  std::uint64_t seed = 24000;
  check_epilogues<float>(seed);
  check_epilogues<double>(seed);
  check_epilogues<__nv_bfloat16>(seed);
}

TEST_CASE("conv2d: exact integer data, NaN and +-inf inputs, every dtype") {
  require_gpu();
  std::uint64_t seed = 25000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T nan = convred::from_compute<T>(std::numeric_limits<double>::quiet_NaN());
    const T inf = convred::from_compute<T>(std::numeric_limits<double>::infinity());
    for (layout lay : kLayouts) {
      const conv2d_problem p = make_problem(2, 6, 9, 10, 33, 3, 3, 1, 1, 1, 1, 1, 1, 3, lay);
      opts o;
      o.exact = true;
      const std::string tail = std::string(" ") + type_name<T>() + " " + lname(lay);
      auto d = make_data<T>(p, ++seed, data_kind::integer);
      check_conv("integer data" + tail, p, d, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 3, 5, 6))] = nan;
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 0, 0, 0))] = inf;
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 1, 0, 1))] = convred::from_compute<T>(-1e300);
      d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 5, 8, 9))] = inf;
      d.b[7] = nan;
      o.nan_expected = true;
      check_conv("NaN and inf" + tail, p, d, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d: random combinations of shape, layout and dtype") {
  require_gpu();
  picker pick{std::mt19937_64(535353)};
  std::uint64_t seed = 26000;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (int t = 0; t < 8; ++t) {
      const conv2d_problem p = random_problem(pick, sizeof(T));
      check_scaled<convred::default_policy, T>(std::string("random #") + std::to_string(t) + " " + type_name<T>(), p,
                                               ++seed, pick(0, 1) ? 2.0f : -1.5f, pick(0, 1) == 1);
    }
  };
  test::for_each_type(run);
}

TEST_CASE("conv2d: bad input returns its status, launches nothing, writes nothing") {
  require_gpu();
  const conv2d_problem good = make_problem(2, 6, 9, 10, 12, 3, 3, 1, 1);
  const auto d = make_data<float>(good, 27001, data_kind::real);
  auto dx = test::to_device(d.x), dw = test::to_device(d.w), db = test::to_device(d.b);
  const auto no = static_cast<std::size_t>(good.out_elements());
  thrust::device_vector<float> dout(no + 16);
  const float* x = craw(dx);
  const float* w = craw(dw);
  const float* b = craw(db);
  float* out = raw(dout);
  auto expect = [&](const char* what, status want, auto call) {
    INFO(std::string(what));
    test::poison(dout);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const status got = call();
    INFO("got: " << std::string(convred::to_string(got)) << ", want: " << std::string(convred::to_string(want)));
    CHECK(got == want);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(test::count_nan(test::to_host(dout)) == dout.size());  // untouched
  };
  auto with = [&](auto f) {
    conv2d_problem p = good;
    f(p);
    return p;
  };
  auto conv = [&](const conv2d_problem& p) { return [&, p] { return convred::device::conv2d(p, x, w, b, out); }; };
  expect("N < 0", status::invalid_shape, conv(with([](auto& p) { p.N = -1; })));
  expect("C = 0", status::invalid_shape, conv(with([](auto& p) { p.C = 0; })));
  expect("K = 0", status::invalid_shape, conv(with([](auto& p) { p.K = 0; })));
  expect("S = 0", status::invalid_shape, conv(with([](auto& p) { p.S = 0; })));
  expect("stride 0", status::invalid_stride, conv(with([](auto& p) { p.stride_h = 0; })));
  expect("dilation -1", status::invalid_dilation, conv(with([](auto& p) { p.dil_w = -1; })));
  expect("negative padding", status::invalid_padding, conv(with([](auto& p) { p.pad_h = -2; })));
  expect("groups not dividing C", status::invalid_groups, conv(with([](auto& p) { p.groups = 4; })));
  expect("groups not dividing K", status::invalid_groups, conv(with([](auto& p) { p.C = 6, p.K = 9, p.groups = 2; })));
  expect("kernel larger than padded input", status::invalid_output_size,
         conv(with([](auto& p) { p.W = 3, p.S = 5, p.pad_w = 0; })));
  expect("bad layout", status::invalid_layout, conv(with([](auto& p) { p.x_layout = static_cast<layout>(7); })));
  expect("int64 overflow", status::size_overflow,
         conv(with([](auto& p) { p.N = p.C = p.H = p.W = std::int64_t(1) << 20, p.K = 1, p.R = p.S = 1; })));
  expect("null x", status::null_pointer,
         [&] { return convred::device::conv2d(good, static_cast<const float*>(nullptr), w, b, out); });
  expect("null w", status::null_pointer,
         [&] { return convred::device::conv2d(good, x, static_cast<const float*>(nullptr), b, out); });
  expect("null out", status::null_pointer,
         [&] { return convred::device::conv2d(good, x, w, b, static_cast<float*>(nullptr)); });
  expect("misaligned x", status::misaligned_pointer,
         [&] { return convred::device::conv2d(good, misaligned(x, 2), w, b, out); });
  expect("misaligned w", status::misaligned_pointer,
         [&] { return convred::device::conv2d(good, x, misaligned(w, 3), b, out); });
  expect("misaligned bias", status::misaligned_pointer,
         [&] { return convred::device::conv2d(good, x, w, misaligned(b, 1), out); });
  expect("misaligned out", status::misaligned_pointer,
         [&] { return convred::device::conv2d(good, x, w, b, misaligned(out, 2)); });
  {
    thrust::device_vector<float> scratch(std::max(no, static_cast<std::size_t>(good.x_elements())) + 64);
    test::poison(scratch);
    float* s = raw(scratch);
    auto expect_overlap = [&](const char* what, auto call) {
      INFO(std::string(what));
      const status got = call();
      INFO("got: " << std::string(convred::to_string(got)));
      CHECK(got == status::overlapping_buffers);
      CHECK(cudaDeviceSynchronize() == cudaSuccess);
      CHECK(test::count_nan(test::to_host(scratch)) == scratch.size());
    };
    expect_overlap("out == x", [&] { return convred::device::conv2d(good, s, w, b, s); });
    expect_overlap("out starts inside x", [&] { return convred::device::conv2d(good, s, w, b, s + 5); });
    expect_overlap("out == w", [&] { return convred::device::conv2d(good, x, s, b, s); });
    expect_overlap("out ends on bias", [&] {
      return convred::device::conv2d(good, x, w, s + no - 1, s);
    });
  }
  expect("N = 0", status::success, conv(with([](auto& p) { p.N = 0; })));
  expect("N = 0, null pointers", status::success, [&] {
    return convred::device::conv2d(with([](auto& p) { p.N = 0; }), static_cast<const float*>(nullptr),
                                   static_cast<const float*>(nullptr), static_cast<const float*>(nullptr),
                                   static_cast<float*>(nullptr));
  });
  CHECK(bytes_equal(test::to_host(dx), d.x));
  CHECK(bytes_equal(test::to_host(dw), d.w));
  CHECK(bytes_equal(test::to_host(db), d.b));
}

TEST_CASE("sanitizer: full conv2d, float NCHW and NHWC with groups/stride, double (small)") {
  require_gpu();
  check_scaled("sanitizer conv nchw", make_problem(2, 5, 9, 11, 33, 3, 3, 1, 1), 28001);
  check_scaled("sanitizer conv nhwc groups stride",
               make_problem(2, 6, 11, 10, 34, 3, 3, 2, 1, 2, 2, 2, 1, 2, layout::nhwc), 28002, -1.5f, false);
  check_scaled<convred::default_policy, double>("sanitizer conv double K=130", make_problem(1, 3, 7, 6, 130, 3, 3, 1, 1),
                                                28003);
}

TEST_CASE("large: full conv2d with x and out of more than 2^31 elements (N=1, C=3, 27000x27000, K=4)") {
  require_gpu();
  conv2d_problem p = make_problem(1, 3, 27000, 27000, 4, 3, 3, 1, 1);
  REQUIRE(p.x_elements() > (std::int64_t(1) << 31));
  REQUIRE(p.out_elements() > (std::int64_t(1) << 31));
  thrust::device_vector<float> dx(static_cast<std::size_t>(p.x_elements()));
  thrust::tabulate(dx.begin(), dx.end(), hash_uniform{29001});
  const auto w = test::random_vector<float>(static_cast<std::size_t>(p.w_elements()), 29002);
  const auto b = test::random_vector<float>(static_cast<std::size_t>(p.K), 29003);
  auto dw = test::to_device(w), db = test::to_device(b);
  const std::vector<float> hx = test::to_host(dx);
  thrust::device_vector<float> dout(static_cast<std::size_t>(p.out_elements()));
  const epi::scale<float> e{2.0f};
  for (layout lay : kLayouts) {
    p.x_layout = lay;
    INFO(describe(p));
    test::poison(dout);
    const status s = convred::device::conv2d(p, craw(dx), craw(dw), craw(db), raw(dout), e);
    INFO("status: " << std::string(convred::to_string(s)));
    REQUIRE(s == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(thrust::count_if(dout.begin(), dout.end(), is_nan_f{}) == 0);  // every element written
    // Sample (n, k, p, q): corners, the last elements of the tensor, and random ones.
    struct at {
      std::int64_t k, i, j;
    };
    std::vector<at> sample;
    const std::int64_t P = p.P(), Q = p.Q();
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t t = 0; t < 16; ++t) {
        sample.push_back({k, 0, t});
        sample.push_back({k, P - 1, Q - 1 - t});
        sample.push_back({k, P - 1 - t, Q - 1});
      }
    std::mt19937_64 gen(29004);
    std::uniform_int_distribution<std::int64_t> ri(0, P - 1), rj(0, Q - 1), rk(0, p.K - 1);
    for (int t = 0; t < 1000; ++t) sample.push_back({rk(gen), ri(gen), rj(gen)});
    std::size_t bad = 0;
    for (const auto& a : sample) {
      const double want = 2.0 * convred::reference::conv2d_at(p, hx.data(), w.data(), b.data(), 0, a.k, a.i, a.j);
      const double got = dout[static_cast<std::size_t>(convred::reference::out_offset(p, 0, a.k, a.i, a.j))];
      // |x|, |w| < 1: Σ|x·w| + |b| < C*R*S + 1 = 28; doubled by the scale.
      bad += !(std::abs(got - want) <= acc_tol<float>() * (2.0 * 28 + std::abs(want)) + 1e-7 * std::abs(want));
    }
    CHECK(bad == 0);
    // The very last element of the output (offset out_elements - 1) is one of the samples in both layouts.
    CHECK(convred::reference::out_offset(p, 0, p.K - 1, P - 1, Q - 1) == p.out_elements() - 1);
  }
}

}  // TEST_SUITE("gpu")
