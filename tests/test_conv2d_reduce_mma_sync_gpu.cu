// GPU tests of the fused conv2d -> epilogue -> channel reduction on tensor cores (mma_sync_policy: math::tf32,
// tf32x3, bf16, fp16), against the float64 reference with docs/tolerances.md's tolerance for each math
// (conv2d_reduce_check.cuh). Inputs float, __half and __nv_bfloat16 (16-bit inputs are widened on chip).
#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
using convred::default_policy_for;
namespace math = convred::math;

namespace {

/// Shapes every math policy is checked on: odd sizes, K in {1, 3, 33, 65, 130}, 1x1 / 3x3 / 5x5 / 3x1,
/// stride 2, dilation 2, padding, groups (2 and depthwise), both layouts.
std::vector<conv2d_problem> tc_shapes() {
  std::vector<conv2d_problem> v;
  for (layout lay : kLayouts) {
    v.push_back(make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(1, 3, 9, 10, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(3, 33, 7, 5, 130, 3, 1, 1, 0, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(1, 65, 12, 12, 65, 5, 5, 2, 2, 2, 2, 1, 1, 1, lay));
    v.push_back(make_problem(2, 8, 13, 17, 3, 3, 3, 2, 1, 1, 2, 2, 2, 1, lay));
    v.push_back(make_problem(1, 6, 9, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2, lay));
    v.push_back(make_problem(1, 7, 8, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, lay));
  }
  return v;
}

template <class Policy, class T>
void sweep(const char* label, std::uint64_t seed) {
  for (const conv2d_problem& p : tc_shapes()) {
    const std::string name = std::string(label) + " " + type_name<T>() + " " + describe(p);
    check_scaled<Policy, T>(name + " min", p, ++seed, op::min{});
    check_scaled<Policy, T>(name + " argmax", p, ++seed, op::argmax{}, -1.5f);
    check_scaled<Policy, T>(name + " mean", p, ++seed, op::mean{}, 2.0f, false);
    check_scaled<Policy, T>(name + " user range op", p, ++seed, range_op{});
  }
}

/// Integer-valued data is exact in every math (small integers are exact in tf32 / bf16 / fp16 and their
/// sums exact in fp32): values and argmin/argmax indices must match the reference exactly, ties included.
template <class Policy, class T>
void exact(const char* label, std::uint64_t seed) {
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(2, 9, 10, 11, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
    const auto d = make_data<T>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    const std::string name = std::string(label) + " exact " + type_name<T>() + " " + lname(lay);
    check_fused<Policy>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    check_fused<Policy>(name + " argmax", p, d, op::argmax{}, epi::identity{}, epi::identity{}, o);
    check_fused<Policy>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
  }
}

template <class Math>
void all_for_math(const char* label, std::uint64_t seed) {
  require_gpu();
  sweep<default_policy_for<Math>, float>(label, seed);
  sweep<small_tc<Math>, float>((std::string(label) + " small-tile").c_str(), seed + 1000);
  sweep<small_tc<Math>, __half>((std::string(label) + " small-tile").c_str(), seed + 2000);
  sweep<small_tc<Math>, __nv_bfloat16>((std::string(label) + " small-tile").c_str(), seed + 3000);
  exact<default_policy_for<Math>, float>(label, seed + 4000);
  exact<small_tc<Math>, __nv_bfloat16>(label, seed + 5000);
}

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce tensor cores: tf32 vs float64 (<= 1e-3)") { all_for_math<math::tf32>("tf32", 100); }
TEST_CASE("conv2d_reduce tensor cores: tf32x3 vs float64 (<= 1e-5)") { all_for_math<math::tf32x3>("tf32x3", 200); }
TEST_CASE("conv2d_reduce tensor cores: bf16 vs float64 (<= 1e-2)") { all_for_math<math::bf16>("bf16", 300); }
TEST_CASE("conv2d_reduce tensor cores: fp16 vs float64 (<= 1e-2)") { all_for_math<math::fp16>("fp16", 400); }

TEST_CASE("conv2d_reduce tensor cores: +-inf and NaN in x, w and bias, exact under every math") {
  require_gpu();
  check_nonfinite<default_policy_for<math::tf32>>("tc tf32", 30000, {layout::nchw, layout::nhwc});
  check_nonfinite<default_policy_for<math::tf32x3>>("tc tf32x3", 31000, {layout::nchw, layout::nhwc});
  check_nonfinite<default_policy_for<math::bf16>>("tc bf16", 32000, {layout::nchw, layout::nhwc});
  check_nonfinite<default_policy_for<math::fp16>>("tc fp16", 33000, {layout::nchw, layout::nhwc});
}

TEST_CASE("conv2d_reduce tensor cores sanitizer: small tf32x3 and bf16, groups, NHWC, K tail") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 6, 7, 9, 10, 3, 3, 1, 1, 2, 1, 1, 1, 2, layout::nhwc);
  check_scaled<small_tc<math::tf32x3>, float>("sanitizer tf32x3", p, 7, op::argmin{});
  check_scaled<default_policy_for<math::bf16>, float>("sanitizer bf16 default", p, 8, op::min{});
}

TEST_CASE("conv2d tensor cores: full output, tf32 and bf16 vs float64") {
  require_gpu();
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
    const auto x = test::random_vector<float>(static_cast<std::size_t>(p.x_elements()), 11);
    const auto w = test::random_vector<float>(static_cast<std::size_t>(p.w_elements()), 12);
    const auto b = test::random_vector<float>(static_cast<std::size_t>(p.K), 13);
    std::vector<double> ref(static_cast<std::size_t>(p.out_elements()));
    convred::reference::conv2d(p, x.data(), w.data(), b.data(), ref.data(), epi::scale<float>{2.0f});
    auto dx = test::to_device(x), dw = test::to_device(w), db = test::to_device(b);
    thrust::device_vector<float> out(ref.size());
    test::poison(out);
    REQUIRE(convred::device::conv2d<default_policy_for<math::tf32>>(p, craw(dx), craw(dw), craw(db), raw(out),
                                                                  epi::scale<float>{2.0f}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(test::rel_norm_error(test::to_host(out), ref) <= test::tol::tf32);
    test::poison(out);
    REQUIRE(convred::device::conv2d<small_tc<math::bf16>>(p, craw(dx), craw(dw), craw(db), raw(out),
                                                         epi::scale<float>{2.0f}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(test::rel_norm_error(test::to_host(out), ref) <= test::tol::bf16);
  }
}
}
