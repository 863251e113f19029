/// @file adapter_family_check.cuh
/// @brief Shared checks of the adapter families' GPU tests (test_dilated_gpu.cu, test_grouped_gpu.cu,
/// test_pruned_gpu.cu; test_tiny_gpu.cu and test_grouped_wgmma_gpu.cu use them too): a family that runs
/// another family's kernel on a rewritten problem, tested through the planner. Each check with a Setup
/// template parameter takes a Setup type of the test file:
/// - `static plan_options options()`: the options every plan of these checks is made with;
/// - `static void check_plan(const std::string& description)`: the test's own checks of each plan that
///   adapter_plan_entry runs (e.g. that the family under test was chosen);
/// - `static constexpr bool with_mean`: whether adapter_all_ops checks op::mean too (needed by
///   adapter_all_ops only);
/// - optionally `template <class T, class Math> using families = family::family_list<...>`: the kernel
///   families every plan of these checks chooses from, in place of the planner's default list
///   (family::default_families_t). A plan's run compiles the launch of every family in its list for each
///   op, epilogue, element type and math it is called with: a test of one family names that family and
///   the families the default planner takes instead of it for the test's other problems, and compiles
///   only their kernels. Each such plan must then make the default planner's choice (check_default_choice:
///   the same description, kernel and workspace as conv2d_reduce_plan<T, Math> on the same device), so
///   that the check still runs what the default planner runs. Without the member: the default list.
#pragma once

#include <convred/device/conv2d_reduce_plan.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "conv2d_reduce_check.cuh"

namespace convred_test_fused {

/// A GPU case's problem and the name its messages give it.
struct named_problem {
  const char* name;   ///< what the case is, in messages
  conv2d_problem p;   ///< the problem
};

/// The case reaches its path: Plan (a conv2d_reduce_plan) for p on the current device runs the split path
/// (`split`: k_splits() > 0 and "GEMM_K splits" in its description) or the fused kernel (neither).
template <class Plan>
void check_split_path(const conv2d_problem& p, bool split) {
  const Plan plan(p);
  INFO(describe(p) << ": " << plan.description());
  REQUIRE(plan.state() == status::success);
  CHECK((plan.k_splits() > 0) == split);
  CHECK((plan.description().find("GEMM_K splits") != std::string::npos) == split);
}

/// plan_options with `splits` -1: the wgmma kernel and its adapters (pruned, dilated, grouped) wherever they
/// serve, not weighed against the mma.sync kernel, which the time model prefers on many of the tests' small
/// layers (the adapters' copies and the wgmma kernel's launch cost more than their whole work)
inline convred::device::plan_options served() {
  convred::device::plan_options o;
  o.splits = -1;
  return o;
}

/// The kernel families of Setup's plans for element type T and math Math: Setup::families<T, Math> where
/// Setup names them, else the planner's default list.
template <class Setup, class T, class Math, class = void>
struct setup_families {
  using type = convred::device::family::default_families_t<T, Math>;  ///< the default list
};
template <class Setup, class T, class Math>
struct setup_families<Setup, T, Math, std::void_t<typename Setup::template families<T, Math>>> {
  using type = typename Setup::template families<T, Math>;  ///< the test's own list
};
/// The plan type of Setup's checks: conv2d_reduce_plan<T, Math> over setup_families.
template <class Setup, class T, class Math>
using setup_plan_t = convred::device::conv2d_reduce_plan<T, Math, typename setup_families<Setup, T, Math>::type>;

/// Two plans made the same choice: the same state, kernel, description (the family, its tiles, mode and
/// splits, and why a family before it was passed over), workspace, prepared and scratch bytes, splits and
/// ping-pong policy.
template <class PlanA, class PlanB>
void check_same_choice(const PlanA& a, const PlanB& b) {
  CHECK(a.state() == b.state());
  CHECK(a.kernel() == b.kernel());
  CHECK(a.description() == b.description());
  CHECK(a.workspace_bytes() == b.workspace_bytes());
  CHECK(a.prepared_bytes() == b.prepared_bytes());
  CHECK(a.scratch_bytes() == b.scratch_bytes());
  CHECK(a.k_splits() == b.k_splits());
  CHECK(a.config().pingpong == b.config().pingpong);
}

/// A plan over a list other than the default one (a Setup's families): the default planner's plan for the
/// same problem and options on the current device, conv2d_reduce_plan<T, Math> (made only: the default
/// list's kernels are not compiled), made the same choice (check_same_choice). Nothing for a plan over
/// the default list.
template <class T, class Math, class Families>
void check_default_choice(const convred::device::conv2d_reduce_plan<T, Math, Families>& plan) {
  if constexpr (!std::is_same_v<Families, convred::device::family::default_families_t<T, Math>>) {
    INFO("the default planner's choice, against the plan of the test's family list: " << plan.description());
    const convred::device::conv2d_reduce_plan<T, Math> def(plan.problem(), plan.options());
    check_same_choice(def, plan);
  }
}

/// `plan` prepared with the filter w into a lent workspace of its workspace_bytes(), poisoned (0xFF) with 256
/// guard bytes after it, run (op, epi), synchronised; the guard bytes must stay untouched. run's status, or
/// status::cuda_error where it succeeded but the synchronisation failed.
template <class Plan, class T, class Op, class Epi>
status run_guarded(Plan& plan, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices, Op op, Epi epi) {
  constexpr std::size_t guard = 256;
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

/// check_fused's tag for the planner: setup_plan_t<Setup, T, Math>(p, Setup::options()) on the current
/// device (with a Setup's own families: the default planner's choice, check_default_choice),
/// Setup::check_plan on its description, then run_guarded.
template <class Setup, class Math>
struct adapter_plan_entry {
  using math = convred::device::family::kernel_math_t<float, Math>;  ///< the kernels' math (tolerances)
  using self_launching = void;  ///< check_fused calls launch
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    setup_plan_t<Setup, T, Math> plan(p, Setup::options());
    INFO("plan: " << plan.description());
    REQUIRE(plan.state() == status::success);
    check_default_choice(plan);
    Setup::check_plan(plan.description());
    return run_guarded(plan, x, w, bias, y, indices, op, epi);
  }
};

/// One op of adapter_all_ops: "<label> <op>" through the plan in Math (adapter_plan_entry) against
/// float64 on the data d, with the scale 2 epilogue, or -0.5 for max and argmax.
template <class Setup, class Math, class Op>
void adapter_op_check(const std::string& label, const conv2d_problem& p, const host_data<float>& d, Op o) {
  constexpr bool negative = std::is_same_v<Op, op::max> || std::is_same_v<Op, op::argmax>;
  opts opt;
  opt.gain = negative ? 0.5 : 2;
  const epi::scale<float> s{negative ? -0.5f : 2.0f};
  check_fused<adapter_plan_entry<Setup, Math>>(label + " " + test::op_name<Op>(), p, d, o, s, s, opt);
}

/// Every op through the plan in Math against float64 (scale 2 epilogue; max with -0.5); op::mean only
/// where Setup::with_mean.
template <class Setup, class Math>
void adapter_all_ops(const char* label, const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  const std::string l(label);
  adapter_op_check<Setup, Math>(l, p, d, op::min{});
  adapter_op_check<Setup, Math>(l, p, d, op::argmin{});
  adapter_op_check<Setup, Math>(l, p, d, op::sum{});
  if constexpr (Setup::with_mean) adapter_op_check<Setup, Math>(l, p, d, op::mean{});
  adapter_op_check<Setup, Math>(l, p, d, op::max{});
  adapter_op_check<Setup, Math>(l, p, d, op::argmax{});
}

/// adapter_all_ops for the ops Ops only (in that order): the same data from `seed`, epilogues and
/// tolerances. For a test whose family's own code does not depend on the op beyond what these ops
/// cover: each op and math compiled adds the kernels of every family in the plan's list.
template <class Setup, class Math, class... Ops>
void adapter_some_ops(const char* label, const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  const std::string l(label);
  (adapter_op_check<Setup, Math>(l, p, d, Ops{}), ...);
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

/// Bind with a separate scratch gives prepare's results and leaves the prepared bytes as they are (plans
/// of setup_plan_t in tf32, the default planner's choice): plan a prepares and runs argmax; plan b
/// prepares into a lent workspace, its prepared bytes are copied to their own buffer and bound with a
/// scratch of its own (poisoned, 16 bytes past its end), then runs argmax. The prepared bytes unchanged,
/// nothing written past the scratch, b's values and indices equal a's, no NaN.
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
  setup_plan_t<Setup, float, convred::math::tf32> a(p, Setup::options()), b(p, Setup::options());
  check_default_choice(a);
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

/// A grouped layer's plan equals its groups' own plans combined on the host, bitwise. `plan` (float, of a
/// grouped NCHW problem p; made, not prepared) runs argmin with the scale 2 epilogue on real data from
/// `seed`; each group j then runs through a plan over the wgmma family alone (Math, plan's options) on its
/// dense sub-problem (C/groups -> K/groups channels, groups 1): x's channels of group j copied on the host, w's
/// and the bias's slices of group j. Per pixel the least value wins (a tie keeps the earlier group), its
/// index plus j K/groups. Each group's plan must be made and, where `unsplit`, run unsplit (k_splits 0);
/// plan's values must equal the combined ones bytewise and its indices theirs.
template <class Math, class Families>
void check_groups_combined(convred::device::conv2d_reduce_plan<float, Math, Families>& plan, std::uint64_t seed,
                           bool unsplit) {
  namespace fam = convred::device::family;
  using wgmma = fam::wgmma<float, Math, fam::wgmma_role::adapter>;
  using sub_plan = convred::device::conv2d_reduce_plan<float, Math, fam::family_list<wgmma>>;
  const conv2d_problem p = plan.problem();
  conv2d_problem s = p;
  s.C = p.C_per_group(), s.K = p.K_per_group(), s.groups = 1;
  const auto d = make_data<float>(p, seed, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y(ny);
  thrust::device_vector<std::int64_t> idx(ny);
  test::poison(y), test::poison(idx);
  const epi::scale<float> two{2.0f};
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::argmin{}, two) == status::success);
  std::vector<float> best(ny);
  std::vector<std::int64_t> at(ny, -1);
  const std::size_t plane = static_cast<std::size_t>(s.C * p.H * p.W);
  for (std::int64_t j = 0; j < p.groups; ++j) {
    std::vector<float> xs(static_cast<std::size_t>(s.x_elements()));
    for (std::int64_t n = 0; n < p.N; ++n)
      std::copy_n(d.x.begin() + static_cast<std::ptrdiff_t>((n * p.groups + j) * plane), plane,
                  xs.begin() + static_cast<std::ptrdiff_t>(n * plane));
    const std::vector<float> wj(d.w.begin() + j * s.w_elements(), d.w.begin() + (j + 1) * s.w_elements());
    const std::vector<float> bj(d.b.begin() + j * s.K, d.b.begin() + (j + 1) * s.K);
    auto dxs = test::to_device(xs);
    auto dwj = test::to_device(wj);
    auto dbj = test::to_device(bj);
    thrust::device_vector<float> ys(ny);
    thrust::device_vector<std::int64_t> is(ny);
    sub_plan sub(s, plan.options());
    REQUIRE(sub.state() == status::success);
    if (unsplit) REQUIRE(sub.k_splits() == 0);
    REQUIRE(sub.prepare(craw(dwj)) == status::success);
    REQUIRE(sub.run(craw(dxs), craw(dbj), raw(ys), raw(is), op::argmin{}, two) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const auto hy = test::to_host(ys);
    const auto hi = test::to_host(is);
    for (std::size_t q = 0; q < ny; ++q)  // real data: no NaN; a tie keeps the earlier group (lower index)
      if (j == 0 || hy[q] < best[q]) best[q] = hy[q], at[q] = hi[q] + j * s.K;
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(bytes_equal(test::to_host(y), best));
  CHECK(test::to_host(idx) == at);
}

}  // namespace convred_test_fused
