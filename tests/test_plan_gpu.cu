// GPU tests of device::conv2d_reduce_plan: on the current device it picks the kernel its host rules say,
// and its run gives bitwise the result of calling that kernel's entry point directly (the kernels are
// deterministic), for owned and borrowed workspaces, value and index ops; the kernels themselves are
// checked against float64 in their own suites.
#include <convred/device/conv2d_reduce_plan.cuh>

#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
using convred::device::conv2d_reduce_plan;
using convred::device::kernel_kind;

namespace {

/// Runs plan (prepared) and the direct entry point of its kernel on the same data; CHECKs equal y and
/// indices.
template <class Math, class Op>
void same_as_direct(const char* label, const conv2d_problem& p, std::uint64_t seed, Op op, bool borrow) {
  using T = float;
  INFO(label << " " << describe(p) << (borrow ? " borrowed workspace" : " owned workspace"));
  const auto d = make_data<T>(p, seed, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<T> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(Op::has_index ? ny : 0), i2(Op::has_index ? ny : 0);
  test::poison(y1), test::poison(y2);
  conv2d_reduce_plan<T, Math> plan(p);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  thrust::device_vector<unsigned char> lent(plan.workspace_bytes() + 16);
  if (borrow)
    REQUIRE(plan.prepare(craw(dw), plan.workspace_bytes() ? static_cast<void*>(raw(lent)) : nullptr, lent.size()) ==
            status::success);
  else
    REQUIRE(plan.prepare(craw(dw)) == status::success);
  const epi::scale<float> e{2.0f};
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), Op::has_index ? raw(i1) : nullptr, op, e) == status::success);
  status s = status::success;
  using PlanT = conv2d_reduce_plan<T, Math>;
  if constexpr (!std::is_same_v<Math, math::ieee>) {
    if (plan.kernel() == kernel_kind::wgmma) {
      using P = typename PlanT::wgmma_policy_t;
      const std::size_t bytes = convred::device::packed_filter_bytes<P, T>(p);
      thrust::device_vector<unsigned char> packed(bytes);
      REQUIRE(convred::device::pack_filter<P>(p, craw(dw), raw(packed), bytes) == status::success);
      s = convred::device::conv2d_reduce_packed<P>(p, craw(dx), craw(dw), raw(packed), bytes, craw(db), raw(y2),
                                                   Op::has_index ? raw(i2) : nullptr, op, e);
    } else {
      REQUIRE(plan.kernel() == kernel_kind::mma_sync);
      s = convred::device::conv2d_reduce<typename PlanT::mma_sync_policy_t>(p, craw(dx), craw(dw), craw(db), raw(y2),
                                                                           Op::has_index ? raw(i2) : nullptr, op, e);
    }
  } else {
    REQUIRE(plan.kernel() == kernel_kind::simt);
    s = convred::device::conv2d_reduce<typename PlanT::simt_policy_t>(p, craw(dx), craw(dw), craw(db), raw(y2),
                                                                     Op::has_index ? raw(i2) : nullptr, op, e);
  }
  REQUIRE(s == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto a = test::to_host(y1), b = test::to_host(y2);
  std::size_t unwritten = 0;
  for (T v : a) unwritten += test::is_poison(v);
  CHECK(unwritten == 0);
  std::size_t diff = 0;
  for (std::size_t i = 0; i < ny; ++i) diff += !(a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]));
  CHECK(diff == 0);
  if constexpr (Op::has_index) CHECK(test::to_host(i1) == test::to_host(i2));
}

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_plan: the kernel the device rules pick, same result as calling it directly") {
  require_gpu();
  const convred::device::device_info dev = convred::device::device_info::current();
  const conv2d_problem served = make_problem(2, 9, 10, 40, 65, 3, 3, 1, 1);       // the wgmma kernel's shape
  const conv2d_problem k_large = make_problem(1, 5, 6, 8, 130, 3, 3, 1, 1);       // K > 128: mma.sync
  const conv2d_problem nhwc = make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc);
  {
    conv2d_reduce_plan<float, math::tf32> plan(served);
    const bool hopper = dev.cc_major == 9 && dev.cc_minor == 0 && dev.wgmma_image;
    CHECK(plan.kernel() == (hopper ? kernel_kind::wgmma : kernel_kind::mma_sync));
    CHECK(conv2d_reduce_plan<float, math::tf32>(k_large).kernel() == kernel_kind::mma_sync);
    CHECK(conv2d_reduce_plan<float>(served).kernel() == kernel_kind::simt);
  }
  std::uint64_t seed = 9100;
  for (bool borrow : {false, true}) {
    for (const conv2d_problem& p : {served, k_large, nhwc}) {
      same_as_direct<math::tf32>("tf32 min", p, ++seed, op::min{}, borrow);
      same_as_direct<math::bf16>("bf16 argmin", p, ++seed, op::argmin{}, borrow);
      same_as_direct<math::ieee>("ieee max", p, ++seed, op::max{}, borrow);
    }
  }
}

TEST_CASE("conv2d_reduce_plan: prepare errors and re-preparing") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 4, 8, 8, 8, 3, 3, 1, 1);
  conv2d_reduce_plan<float, math::tf32> plan(p);
  REQUIRE(plan.state() == status::success);
  thrust::device_vector<float> w(static_cast<std::size_t>(p.w_elements()), 1.f), x(static_cast<std::size_t>(p.x_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  if (plan.workspace_bytes() > 0) {
    thrust::device_vector<unsigned char> small(plan.workspace_bytes() - 16);
    CHECK(plan.prepare(craw(w), raw(small), small.size()) == status::workspace_too_small);
    CHECK(plan.run(craw(x), nullptr, raw(y), nullptr) == status::not_prepared);
    CHECK(plan.prepare(craw(w), nullptr, plan.workspace_bytes()) == status::null_pointer);
  }
  REQUIRE(plan.prepare(craw(w)) == status::success);
  REQUIRE(plan.prepare(craw(w)) == status::success);  // again: the owned workspace is reused
  CHECK(plan.run(craw(x), nullptr, raw(y), nullptr, op::min{}) == status::success);
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  CHECK(plan.run(craw(x), nullptr, raw(y), raw(idx), op::min{}) == status::indices_not_supported);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  conv2d_problem none = p;
  none.N = 0;
  conv2d_reduce_plan<float, math::tf32> empty(none);
  CHECK(empty.prepare(nullptr) == status::success);  // no work: nothing to pack, no weights needed
  CHECK(empty.run(nullptr, nullptr, nullptr, nullptr) == status::success);
  // x and w all ones (C = 4, 3x3 filter, padding 1), no bias: every output channel is the window sum,
  // 2 x 2 x 4 = 16 at the corner (p, q) = (0, 0) and 3 x 3 x 4 = 36 inside, at (1, 1) = index 9
  const auto got = test::to_host(y);
  CHECK(got[0] == doctest::Approx(16.0));
  CHECK(got[9] == doctest::Approx(36.0));
}
}  // TEST_SUITE("gpu")
