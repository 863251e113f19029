// Kernel families as types: a planner whose family_list starts with a family from outside convred
// (tests/narrow_k_family.cuh). Host: select() takes it where it can implement the problem and otherwise
// makes exactly the default list's choice. GPU: the plan's run launches it, with the same result as
// calling its kernel directly.
#include <convred/device/conv2d_reduce_plan.cuh>

#include "conv2d_reduce_check.cuh"
#include "narrow_k_family.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;

namespace {

/// The default list for (float, ieee) with narrow_k in front: one entry.
using with_narrow_k = fam::family_list<convred_test_family::narrow_k<float>, fam::direct<float, math::ieee>,
                                       fam::simt_narrow<float, math::ieee>, fam::simt_narrow<float, math::ieee, 32>,
                                       fam::simt<float, math::ieee>>;
using narrow_plan = conv2d_reduce_plan<float, math::ieee, with_narrow_k>;

const device_info h200{9, 0, true, 132};

}  // namespace

TEST_CASE("family_list: a family from outside convred is chosen where it serves, the default chain elsewhere") {
  const conv2d_problem narrow = make_problem(2, 5, 12, 13, 17, 3, 3, 1, 1);
  narrow_plan plan(narrow, h200);
  REQUIRE(plan.state() == status::success);
  CHECK(plan.kernel() == kernel_kind::user);
  CHECK(plan.config().family == 0);
  CHECK(plan.description() == "narrow-K simt (exact FMA, 64-pixel x 32-channel tiles): K <= 32");
  CHECK(plan.workspace_bytes() == 0);
  // where it does not serve, the plan is the default one: same family, configuration and description
  for (const conv2d_problem& p : {make_problem(2, 5, 12, 13, 33, 3, 3, 1, 1),                    // K > 32
                                  make_problem(1, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2),      // groups 2
                                  make_problem(1, 6, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6)}) {   // depthwise
    CAPTURE(describe(p));
    narrow_plan a(p, h200);
    conv2d_reduce_plan<float, math::ieee> b(p, h200);
    CHECK(a.kernel() == b.kernel());
    CHECK(a.config().family == b.config().family + 1);
    CHECK(a.k_splits() == b.k_splits());
    CHECK(a.workspace_bytes() == b.workspace_bytes());
    CHECK(a.description() == b.description());
  }
  // an invalid problem: validate's code, whatever the list
  conv2d_problem bad = narrow;
  bad.K = 0;
  CHECK(narrow_plan(bad, h200).state() == convred::validate(bad, sizeof(float)));
}

TEST_SUITE("gpu") {
TEST_CASE("family_list: the plan's run launches the outside family's kernel") {
  require_gpu();
  for (const conv2d_problem& p : {make_problem(2, 5, 12, 13, 17, 3, 3, 1, 1), make_problem(3, 7, 9, 20, 32, 1, 1)}) {
    CAPTURE(describe(p));
    const auto d = make_data<float>(p, 4242, data_kind::real);
    auto dx = test::to_device(d.x);
    auto dw = test::to_device(d.w);
    auto db = test::to_device(d.b);
    const std::size_t ny = static_cast<std::size_t>(p.y_elements());
    thrust::device_vector<float> y1(ny), y2(ny);
    thrust::device_vector<std::int64_t> i1(ny), i2(ny);
    test::poison(y1), test::poison(y2);
    narrow_plan plan(p);
    REQUIRE(plan.state() == status::success);
    REQUIRE(plan.kernel() == kernel_kind::user);
    REQUIRE(plan.prepare(craw(dw)) == status::success);
    const epi::scale<float> e{2.0f};
    REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}, e) == status::success);
    using policy = convred_test_family::narrow_k<float>::policy;
    REQUIRE(convred::device::conv2d_reduce<policy>(p, craw(dx), craw(dw), craw(db), raw(y2), raw(i2), op::argmin{}, e) ==
            status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const auto a = test::to_host(y1), b = test::to_host(y2);
    CHECK(bytes_equal(a, b));
    CHECK(test::to_host(i1) == test::to_host(i2));
    // and the family's kernel against float64 (check_fused: poisoned outputs, the documented tolerance)
    check_fused<policy>("narrow-K kernel", p, d, op::argmin{}, e, e, opts{});
  }
}
}
