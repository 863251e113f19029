/// @file adapter_family_check.cuh
/// @brief Shared checks of the adapter families' GPU tests (test_dilated_gpu.cu, test_grouped_gpu.cu,
/// test_pruned_gpu.cu; test_tiny_gpu.cu uses them too): a family that runs another family's kernel on a
/// rewritten problem, tested through the planner. Each check takes a Setup type of the test file:
/// - `static plan_options options()`: the options every plan of these checks is made with;
/// - `static void check_plan(const std::string& description)`: the test's own checks of each plan that
///   adapter_plan_entry runs (e.g. that the family under test was chosen);
/// - `static constexpr bool with_mean`: whether adapter_all_ops checks op::mean too.
#pragma once

#include <convred/device/conv2d_reduce_plan.cuh>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conv2d_reduce_check.cuh"

namespace convred_test_fused {

/// check_fused's tag for the planner: conv2d_reduce_plan<T, Math>(p, Setup::options()) on the current
/// device, Setup::check_plan on its description, prepared with a lent workspace poisoned (0xFF) with 256
/// guard bytes after it, run, synchronised; the guard bytes must stay untouched.
template <class Setup, class Math>
struct adapter_plan_entry {
  using math = convred::device::family::kernel_math_t<float, Math>;  ///< the kernels' math (tolerances)
  using self_launching = void;  ///< check_fused calls launch
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    constexpr std::size_t guard = 256;
    convred::device::conv2d_reduce_plan<T, Math> plan(p, Setup::options());
    INFO("plan: " << plan.description());
    REQUIRE(plan.state() == status::success);
    Setup::check_plan(plan.description());
    const std::size_t bytes = plan.workspace_bytes();
    thrust::device_vector<unsigned char> ws(bytes + guard, static_cast<unsigned char>(0xFF));
    REQUIRE(plan.prepare(w, raw(ws), bytes) == status::success);
    const status s = plan.run(x, bias, y, indices, op, epi);
    const cudaError_t e = cudaDeviceSynchronize();
    const std::vector<unsigned char> after = test::to_host(ws);
    std::size_t touched = 0;
    for (std::size_t i = bytes; i < after.size(); ++i) touched += after[i] != 0xFF;
    CHECK(touched == 0);
    return s == status::success && e != cudaSuccess ? status::cuda_error : s;
  }
};

/// Every op through the plan in Math against float64 (scale 2 epilogue; max with -0.5); op::mean only
/// where Setup::with_mean.
template <class Setup, class Math>
void adapter_all_ops(const char* label, const conv2d_problem& p, std::uint64_t seed) {
  using entry = adapter_plan_entry<Setup, Math>;
  const auto d = make_data<float>(p, seed, data_kind::real);
  opts o;
  o.gain = 2;
  const epi::scale<float> two{2.0f};
  const std::string l(label);
  check_fused<entry>(l + " min", p, d, op::min{}, two, two, o);
  check_fused<entry>(l + " argmin", p, d, op::argmin{}, two, two, o);
  check_fused<entry>(l + " sum", p, d, op::sum{}, two, two, o);
  if constexpr (Setup::with_mean) check_fused<entry>(l + " mean", p, d, op::mean{}, two, two, o);
  opts h = o;
  h.gain = 0.5;
  const epi::scale<float> neg{-0.5f};
  check_fused<entry>(l + " max", p, d, op::max{}, neg, neg, h);
  check_fused<entry>(l + " argmax", p, d, op::argmax{}, neg, neg, h);
}

/// The compute-sanitizer case of an adapter family's test (`--test-case='*sanitizer*'`): p through the plan in
/// tf32 with op, real data from `seed`, the scale 2 epilogue, against float64.
template <class Setup, class Op = op::argmin>
void adapter_sanitizer_case(const char* label, const conv2d_problem& p, std::uint64_t seed, Op o = {}) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  opts opt;
  opt.gain = 2;
  const epi::scale<float> two{2.0f};
  check_fused<adapter_plan_entry<Setup, convred::math::tf32>>(label, p, d, o, two, two, opt);
}

/// Bind with a separate scratch gives prepare's results and leaves the prepared bytes as they are: plan a
/// prepares and runs argmax; plan b prepares into a lent workspace, its prepared bytes are copied to their
/// own buffer and bound with a scratch of its own (poisoned, 16 bytes past its end), then runs argmax. The
/// prepared bytes unchanged, nothing written past the scratch, b's values and indices equal a's, no NaN.
template <class Setup>
void check_bind_with_scratch(const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(ny), i2(ny);
  test::poison(y1), test::poison(y2);
  convred::device::conv2d_reduce_plan<float, convred::math::tf32> a(p, Setup::options()), b(p, Setup::options());
  REQUIRE(a.prepare(craw(dw)) == status::success);
  REQUIRE(a.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmax{}) == status::success);
  // b: the prepared bytes of a lent workspace, then a scratch of its own
  thrust::device_vector<unsigned char> ws(b.workspace_bytes());
  REQUIRE(b.prepare(craw(dw), raw(ws), ws.size()) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::size_t pre = b.prepared_bytes();
  thrust::device_vector<unsigned char> prepared(ws.begin(), ws.begin() + static_cast<std::ptrdiff_t>(pre));
  thrust::device_vector<unsigned char> scratch(b.scratch_bytes() + 16, static_cast<unsigned char>(0xFF));
  REQUIRE(b.bind(craw(dw), pre ? static_cast<const void*>(raw(prepared)) : nullptr, pre, raw(scratch),
                 b.scratch_bytes()) == status::success);
  const std::vector<unsigned char> before = test::to_host(prepared);
  REQUIRE(b.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmax{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(prepared) == before);
  const std::vector<unsigned char> sc = test::to_host(scratch);
  std::size_t past = 0;
  for (std::size_t i = b.scratch_bytes(); i < sc.size(); ++i) past += sc[i] != 0xFF;
  CHECK(past == 0);
  CHECK(bytes_equal(test::to_host(y1), test::to_host(y2)));
  CHECK(test::to_host(i1) == test::to_host(i2));
  CHECK(test::count_nan(test::to_host(y1)) == 0);
}

}  // namespace convred_test_fused
