// GPU tests of device::conv2d_reduce_plan: on the current device it picks the kernel its host rules say,
// and its run gives bitwise the result of calling that kernel's entry point directly (the kernels are
// deterministic), for owned and borrowed workspaces, value and index ops; the kernels themselves are
// checked against float64 in their own suites.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <algorithm>

#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
using convred::device::conv2d_reduce_plan;
using convred::device::kernel_kind;

namespace {

/// conv2d_reduce<Policy>, or with k_splits > 0 conv2d_reduce_split<Policy> with that many splits and a
/// workspace of its own (synchronised before it is freed).
template <class Policy, class T, class Op, class Epi>
status unsplit_or_split(int k_splits, const conv2d_problem& p, const T* x, const T* w, const T* b, T* y,
                        std::int64_t* indices, Op op, Epi e) {
  if (k_splits == 0) return convred::device::conv2d_reduce<Policy>(p, x, w, b, y, indices, op, e);
  const std::size_t bytes = convred::device::conv2d_reduce_split_workspace_bytes<T>(p, k_splits);
  thrust::device_vector<unsigned char> ws(bytes);
  const status s = convred::device::conv2d_reduce_split<Policy>(p, x, w, b, y, indices, raw(ws), bytes, k_splits, op, e);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return s;
}

/// Runs plan (prepared) and the direct entry point of its kernel (split as the plan says) on the same
/// data; CHECKs equal y and indices.
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
  if constexpr (!std::is_same_v<typename PlanT::kernel_math_t, math::ieee>) {
    if (plan.kernel() == kernel_kind::wgmma && plan.k_splits() > 0) {  // the wgmma kernel's partial mode
      using P = typename PlanT::wgmma_policy_t;
      const std::size_t bytes = convred::device::packed_split_workspace_bytes<P, T>(p, plan.k_splits());
      REQUIRE(bytes == plan.workspace_bytes());
      thrust::device_vector<unsigned char> ws(bytes);
      REQUIRE(convred::device::pack_filter<P>(p, craw(dw), raw(ws), bytes) == status::success);
      s = convred::device::conv2d_reduce_packed_split<P>(p, craw(dx), craw(dw), raw(ws), bytes, craw(db), raw(y2),
                                                         Op::has_index ? raw(i2) : nullptr, plan.k_splits(), op, e);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    } else if (plan.kernel() == kernel_kind::wgmma) {
      using P = typename PlanT::wgmma_policy_t;
      const std::size_t bytes = convred::device::packed_filter_bytes<P, T>(p);
      thrust::device_vector<unsigned char> packed(bytes);
      REQUIRE(convred::device::pack_filter<P>(p, craw(dw), raw(packed), bytes) == status::success);
      s = convred::device::conv2d_reduce_packed<P>(p, craw(dx), craw(dw), raw(packed), bytes, craw(db), raw(y2),
                                                   Op::has_index ? raw(i2) : nullptr, op, e);
    } else {
      REQUIRE(plan.kernel() == kernel_kind::mma_sync);
      s = unsplit_or_split<typename PlanT::mma_sync_policy_t>(plan.k_splits(), p, craw(dx), craw(dw), craw(db), raw(y2),
                                                              Op::has_index ? raw(i2) : nullptr, op, e);
    }
  } else {
    REQUIRE(plan.kernel() == kernel_kind::simt);
    s = unsplit_or_split<typename PlanT::simt_policy_t>(plan.k_splits(), p, craw(dx), craw(dw), craw(db), raw(y2),
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

/// The checks of a plan that runs conv2d_reduce_packed_split<Policy> with splits = 0 (a split-K tail, the
/// ping-pong policy): its workspace is that entry point's, the entry point (which makes the same choice on
/// this device) holds min to float64, and the plan's argmin run equals the entry point's bitwise (values
/// and indices).
template <class Policy, class Plan>
void plan_equals_packed_split(Plan& plan, const conv2d_problem& p, std::uint64_t seed, const char* label) {
  CHECK(plan.k_splits() == 0);
  REQUIRE(plan.workspace_bytes() == convred::device::packed_split_workspace_bytes<Policy, float>(p, 0));
  const auto d = make_data<float>(p, seed, data_kind::real);
  opts o;
  o.splits = 0;
  o.gain = 2;
  check_fused<packed_split_entry<Policy>>(label, p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements()), bytes = plan.workspace_bytes();
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(ny), i2(ny);
  test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}) == status::success);
  thrust::device_vector<unsigned char> ws(bytes, static_cast<unsigned char>(0xFF));
  REQUIRE(convred::device::pack_filter<Policy>(p, craw(dw), raw(ws), bytes) == status::success);
  REQUIRE(convred::device::conv2d_reduce_packed_split<Policy>(p, craw(dx), craw(dw), raw(ws), bytes, craw(db), raw(y2),
                                                              raw(i2), 0, op::argmin{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto a = test::to_host(y1), b = test::to_host(y2);
  CHECK(test::count_nan(a) == 0);
  CHECK(bytes_equal(a, b));
  CHECK(test::to_host(i1) == test::to_host(i2));
}

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_plan: the kernel the device rules pick, same result as calling it directly") {
  require_gpu();
  const convred::device::device_info dev = convred::device::device_info::current();
  const conv2d_problem served = make_problem(2, 9, 10, 40, 65, 3, 3, 1, 1);       // the wgmma kernel's shape
  // K > 128, 1 tile of 2 passes: on an H200 the wgmma kernel's partial mode in tf32 (estimated 20 % faster
  // than the mma.sync split; bf16 and 3xTF32 may take the mma.sync split)
  const conv2d_problem k_large = make_problem(1, 256, 6, 8, 130, 3, 3, 1, 1);
  const conv2d_problem nhwc = make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc);
  // 49 pixels, NHWC (not the wgmma kernel's): the mma.sync split path (NCHW on an H200: the wgmma kernel's
  // partial mode, measured faster there: bench/NOTES.md, session 13)
  const conv2d_problem deep = make_problem(1, 64, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc);
  {
    conv2d_reduce_plan<float, math::tf32> plan(served);
    const bool hopper = dev.cc_major == 9 && dev.cc_minor == 0 && dev.wgmma_image;
    CHECK(plan.kernel() == (hopper ? kernel_kind::wgmma : kernel_kind::mma_sync));
    {
      conv2d_reduce_plan<float, math::tf32> large(k_large);
      CAPTURE(large.description());
      CHECK(large.kernel() == (hopper ? kernel_kind::wgmma : kernel_kind::mma_sync));
      if (hopper) {  // the wgmma kernel's partial mode: as choose_wgmma_splits says for this device's SM count
        using P = conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t;
        convred::block::wgmma_conv_params k;
        std::size_t smem = 0;
        REQUIRE(convred::block::conv_mainloop_wgmma<P>::make_params(
            k_large, convred::device::detail::wgmma_tail_bytes<P, op::argmin>(), convred::device::detail::max_smem_per_block, k,
            smem));
        const int splits = convred::device::choose_wgmma_splits<P>(k_large, k, dev.sm_count).splits;
        CHECK(large.k_splits() == splits);
        CHECK(splits > 0);
      }
    }
    CHECK(conv2d_reduce_plan<float, math::ieee>(served).kernel() == kernel_kind::simt);
    // math::accurate (3xTF32): on Hopper the wgmma kernel where its estimate is below the mma.sync kernel's
    // (family::wgmma weighs itself against it on every problem), else the mma.sync kernel
    {
      namespace fam = convred::device::family;
      const bool wgmma_faster =
          hopper && fam::wgmma<float, math::accurate, fam::wgmma_role::pass1>::can_implement(served, dev, {}) == nullptr &&
          fam::wgmma<float, math::accurate, fam::wgmma_role::pass1>::cost(served, dev, {}) <
              fam::mma_sync<float, math::accurate>::cost(served, dev, {});
      conv2d_reduce_plan<float> acc(served);
      CAPTURE(acc.description());
      CHECK(acc.kernel() == (wgmma_faster ? kernel_kind::wgmma : kernel_kind::mma_sync));
    }
    // few pixels: split as choose_k_splits says for this device's SM count
    CHECK(dev.sm_count > 0);
    conv2d_reduce_plan<float, math::tf32> split(deep);
    CAPTURE(split.description());
    CHECK(split.kernel() == kernel_kind::mma_sync);
    CHECK(split.k_splits() ==
          convred::device::choose_k_splits<conv2d_reduce_plan<float, math::tf32>::mma_sync_policy_t, float>(deep, dev.sm_count));
    CHECK(split.k_splits() > 0);
    CHECK(conv2d_reduce_plan<float, math::ieee>(deep).k_splits() > 0);
  }
  std::uint64_t seed = 9100;
  for (bool borrow : {false, true}) {
    for (const conv2d_problem& p : {served, k_large, nhwc, deep}) {
      same_as_direct<math::tf32>("tf32 min", p, ++seed, op::min{}, borrow);
      same_as_direct<math::bf16>("bf16 argmin", p, ++seed, op::argmin{}, borrow);
      same_as_direct<math::ieee>("ieee max", p, ++seed, op::max{}, borrow);
      same_as_direct<math::accurate>("accurate argmax", p, ++seed, op::argmax{}, borrow);
    }
  }
}

TEST_CASE("conv2d_reduce_plan from a device_info: prepare accepts a device where the time model chose a split") {
  require_gpu();
  // K > 128 on 1 tile: the wgmma kernel would serve it fused; the plan's time model picks a split (the
  // wgmma kernel's partial mode on an H200, the mma.sync split off Hopper); prepare
  // on the current device (described with its SM count) must accept that choice
  const conv2d_problem p = make_problem(1, 256, 6, 8, 130, 3, 3, 1, 1);
  const convred::device::device_info dev = convred::device::device_info::current();
  thrust::device_vector<float> w(static_cast<std::size_t>(p.w_elements()), 1.f);
  {
    conv2d_reduce_plan<float, math::tf32> plan(p, dev);
    CAPTURE(plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(plan.k_splits() > 0);
    CHECK(plan.prepare(craw(w)) == status::success);
  }
  {
    conv2d_reduce_plan<float, math::tf32x3> plan(p, dev);
    CAPTURE(plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(plan.prepare(craw(w)) == status::success);
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

namespace {
/// A plan the ping-pong rule applies to on an H200 (choose_pingpong: the cooperative policy would split
/// GEMM_K in 2, the ping-pong one runs pass mode: tf32 on 4 x 32 row tiles, bf16 on flat tiles): against
/// float64 through the ping-pong entry point, and the plan's run bitwise the entry point's.
template <class Math>
void pingpong_plan(const conv2d_problem& p, std::uint64_t seed) {
  using plan_t = conv2d_reduce_plan<float, Math>;
  plan_t plan(p);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  if (plan.kernel() != kernel_kind::wgmma || plan.description().find("ping-pong") == std::string::npos) {
    MESSAGE("not an sm_90a device of 132 SMs where the plan takes the ping-pong policy: nothing to check");
    return;
  }
  using PP = typename plan_t::wgmma_pingpong_policy_t;
  static_assert(PP::pingpong && PP::block_m == 128, "the ping-pong sibling");
  CHECK(plan.description().find("in pass mode") != std::string::npos);
  plan_equals_packed_split<PP>(plan, p, seed, "plan ping-pong min");
}
}  // namespace

TEST_CASE("conv2d_reduce_plan ping-pong where it replaces a split-K fixup: float64, and the plan equals the entry point") {
  require_gpu();
  pingpong_plan<math::tf32>(make_problem(4, 64, 28, 28, 256, 3, 3, 1, 1), 9800);
  pingpong_plan<math::bf16>(make_problem(16, 128, 14, 14, 256, 3, 3, 1, 1), 9810);
}
}  // TEST_SUITE("gpu")

namespace {

/// Relative norm error vs float64 of `y = min_k 2 * conv2d(x, w, b)` for a plan of Math, or (Policy not
/// void) of that policy's entry point, on data drawn as PyTorch draws the seed case's: x = torch.rand
/// (uniform [0, 1)), w and b uniform in +-1/sqrt(C R S) (nn.Conv2d's default initialisation). All-positive
/// x makes the accumulation long and one-signed: where the tensor cores' fp32 accumulation (not
/// IEEE-rounded) shows.
template <class Math, class Policy = void>
double seed_like_error(const conv2d_problem& p, const char* label) {
  std::mt19937_64 gen(2027);
  std::uniform_real_distribution<float> ux(0.f, 1.f);
  const float bound = 1.f / std::sqrt(static_cast<float>(p.C * p.R * p.S));
  std::uniform_real_distribution<float> uw(-bound, bound);
  std::vector<float> x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
      b(static_cast<std::size_t>(p.K));
  for (auto& v : x) v = ux(gen);
  for (auto& v : w) v = uw(gen);
  for (auto& v : b) v = uw(gen);
  auto dx = test::to_device(x);
  auto dw = test::to_device(w);
  auto db = test::to_device(b);
  thrust::device_vector<float> dy(static_cast<std::size_t>(p.y_elements()));
  test::poison(dy);
  const epi::scale<float> e{2.0f};
  status s = status::success;
  if constexpr (std::is_void_v<Policy>) {
    conv2d_reduce_plan<float, Math> plan(p);
    MESSAGE(std::string(label) << ": " << plan.description());
    REQUIRE(plan.prepare(craw(dw)) == status::success);
    s = plan.run(craw(dx), craw(db), raw(dy), nullptr, op::min{}, e);
    REQUIRE(s == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  } else if constexpr (is_split_entry<Policy>::value) {
    s = Policy::launch(p, craw(dx), craw(dw), craw(db), raw(dy), nullptr, op::min{}, e);
  } else if constexpr (convred::is_wgmma_policy_v<Policy>) {
    const std::size_t bytes = convred::device::packed_filter_bytes<Policy, float>(p);
    thrust::device_vector<unsigned char> packed(bytes ? bytes : 16);
    REQUIRE(convred::device::pack_filter<Policy>(p, craw(dw), raw(packed), packed.size()) == status::success);
    s = convred::device::conv2d_reduce_packed<Policy>(p, craw(dx), craw(dw), raw(packed), packed.size(), craw(db),
                                                      raw(dy), nullptr, op::min{}, e);
  } else {
    s = convred::device::conv2d_reduce<Policy>(p, craw(dx), craw(dw), craw(db), raw(dy), nullptr, op::min{}, e);
  }
  REQUIRE(s == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<double> ref(static_cast<std::size_t>(p.y_elements()));
  convred::reference::conv2d_reduce(p, x.data(), w.data(), b.data(), ref.data(),
                                    static_cast<std::int64_t*>(nullptr), op::min{}, e);
  const double err = test::rel_norm_error(test::to_host(dy), ref);
  MESSAGE(std::string(label) << ": relative norm error vs float64 " << err);
  return err;
}

}  // namespace

TEST_SUITE("gpu") {
TEST_CASE("math::accurate (the planner's default) holds the error vs float64 to 1e-6 on seed-like data") {
  require_gpu();
  // the seed's channels and filter (C R S = 576 products per output channel) on a smaller image
  const conv2d_problem p = make_problem(2, 64, 40, 40, 128, 3, 3, 0, 0);
  CHECK(seed_like_error<math::accurate>(p, "plan<float> (math::accurate)") <= test::tol::accurate);
  // both 3xTF32 kernels the plan may pick, directly
  CHECK(seed_like_error<math::tf32x3, convred::default_wgmma_policy<math::tf32x3>::type>(p, "wgmma tf32x3") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::tf32x3, convred::default_mma_sync_policy<math::tf32x3>::type>(p, "mma.sync tf32x3") <=
        test::tol::accurate);
  // a 1x1 (the other filter the wgmma 3xTF32 kernel serves) with a long channel sum, and a 5x5 (mma.sync)
  CHECK(seed_like_error<math::accurate>(make_problem(1, 576, 12, 16, 128, 1, 1), "plan 1x1 C=576") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::accurate>(make_problem(1, 24, 20, 20, 96, 5, 5, 2, 2), "plan 5x5") <=
        test::tol::accurate);
  // the wgmma 3xTF32 kernel's tap loop (any filter, stride 2): Inception's 7x1, a 1x1 and a 2x2 at stride 2
  using wg3 = convred::default_wgmma_policy<math::tf32x3>::type;
  CHECK(seed_like_error<math::tf32x3, wg3>(make_problem(1, 96, 17, 17, 96, 7, 1, 3, 0), "wgmma tf32x3 7x1") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::tf32x3, wg3>(make_problem(1, 256, 14, 14, 128, 1, 1, 0, 0, 2, 2), "wgmma tf32x3 1x1 s2") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::tf32x3, wg3>(make_problem(2, 128, 28, 28, 128, 2, 2, 0, 0, 2, 2), "wgmma tf32x3 2x2 s2") <=
        test::tol::accurate);
  // the split path (3xTF32 on mma.sync) on deep, small layers: ResNet-50 layer4 and layer3 at batch 1, 1 to
  // 36 GEMM_K splits, and through the plan (which splits them on this GPU)
  const conv2d_problem layer4 = make_problem(1, 512, 7, 7, 512, 3, 3, 1, 1);
  const conv2d_problem layer3 = make_problem(1, 256, 14, 14, 256, 3, 3, 1, 1);
  using tf32x3_mma = convred::default_policy_for<math::tf32x3>;
  CHECK(seed_like_error<math::tf32x3, split_entry<tf32x3_mma, 1>>(layer4, "split tf32x3 layer4, 1 split") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::tf32x3, split_entry<tf32x3_mma, 6>>(layer4, "split tf32x3 layer4, 6 splits") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::tf32x3, split_entry<tf32x3_mma, 36>>(layer4, "split tf32x3 layer4, 36 splits") <=
        test::tol::accurate);
  CHECK(seed_like_error<math::accurate>(layer4, "plan layer4 (split)") <= test::tol::accurate);
  CHECK(seed_like_error<math::accurate>(layer3, "plan layer3 (split)") <= test::tol::accurate);
  CHECK(conv2d_reduce_plan<float>(layer4).k_splits() > 0);
  // TF32 does not hold it (the check can tell the maths apart)
  CHECK(seed_like_error<math::tf32>(p, "plan tf32") > test::tol::accurate);
}
}  // TEST_SUITE("gpu")

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_plan split: prepare checks the workspace, owned and borrowed workspaces agree") {
  require_gpu();
  // 49 pixels, NHWC: the mma.sync split on any GPU
  const conv2d_problem p = make_problem(1, 64, 7, 7, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc);
  conv2d_reduce_plan<float, math::tf32> plan(p);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  REQUIRE(plan.k_splits() > 0);
  const std::size_t need = plan.workspace_bytes();
  REQUIRE(need == convred::device::conv2d_reduce_split_workspace_bytes<float>(p, plan.k_splits()));
  const auto d = make_data<float>(p, 9500, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<unsigned char> lent(need + 16, static_cast<unsigned char>(0xFF));
  CHECK(plan.prepare(craw(dw), nullptr, need) == status::null_pointer);
  CHECK(plan.prepare(craw(dw), raw(lent), need - 4) == status::workspace_too_small);
  CHECK(plan.prepare(craw(dw), raw(lent) + 4, need) == status::misaligned_pointer);
  CHECK(plan.prepare(craw(dw), const_cast<float*>(craw(dw)), need) == status::overlapping_buffers);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(ny), i2(ny);
  test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
  CHECK(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}) == status::not_prepared);
  REQUIRE(plan.prepare(craw(dw), raw(lent), need) == status::success);  // borrowed, poisoned (NaN partials)
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}) == status::success);
  REQUIRE(plan.prepare(craw(dw)) == status::success);  // owned
  REQUIRE(plan.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmin{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto a = test::to_host(y1), b = test::to_host(y2);
  CHECK(test::count_nan(a) == 0);
  CHECK(bytes_equal(a, b));
  CHECK(test::to_host(i1) == test::to_host(i2));
  // against float64 through the split entry point's own check
  check_scaled<split_entry<conv2d_reduce_plan<float, math::tf32>::mma_sync_policy_t, 3>, float>("plan-sized split", p,
                                                                                               9501, op::argmin{});
}

TEST_CASE("conv2d_reduce_plan wgmma split: prepare checks the whole workspace, owned and borrowed workspaces agree") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 256, 6, 8, 130, 3, 3, 1, 1);  // 1 tile, 2 passes: split on an H200
  conv2d_reduce_plan<float, math::tf32> plan(p);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  if (plan.kernel() != kernel_kind::wgmma || plan.k_splits() == 0) {
    MESSAGE("not an sm_90a device with the wgmma kernel's partial mode chosen: nothing to check");
    return;
  }
  using P = conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t;
  const std::size_t need = plan.workspace_bytes(), packed = convred::device::packed_filter_bytes<P, float>(p);
  REQUIRE(need == convred::device::packed_split_workspace_bytes<P, float>(p, plan.k_splits()));
  REQUIRE(need > packed);
  const auto d = make_data<float>(p, 9600, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<unsigned char> lent(need + 16, static_cast<unsigned char>(0xFF));
  CHECK(plan.prepare(craw(dw), nullptr, need) == status::null_pointer);
  CHECK(plan.prepare(craw(dw), raw(lent), packed) == status::workspace_too_small);  // the packed filter's room only
  CHECK(plan.prepare(craw(dw), raw(lent), need - 4) == status::workspace_too_small);
  CHECK(plan.prepare(craw(dw), raw(lent) + 4, need) == status::misaligned_pointer);
  CHECK(plan.prepare(craw(dw), const_cast<float*>(craw(dw)), need) == status::overlapping_buffers);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(ny), i2(ny);
  test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
  REQUIRE(plan.prepare(craw(dw), raw(lent), need) == status::success);  // borrowed, poisoned (NaN partials)
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}) == status::success);
  REQUIRE(plan.prepare(craw(dw)) == status::success);  // owned
  REQUIRE(plan.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmin{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto a = test::to_host(y1), b = test::to_host(y2);
  CHECK(test::count_nan(a) == 0);
  CHECK(bytes_equal(a, b));
  CHECK(test::to_host(i1) == test::to_host(i2));
}
// A split-K tail the time model picks (not forced) on a GPU of 132 SMs (an H200): 152 images of 14 x 14, 2
// channel passes: 134 flat tiles, the first 132 fused in one full wave, the last 2 split.
TEST_CASE("conv2d_reduce_plan wgmma split-K tail the model picks: float64, and the plan equals the entry point") {
  require_gpu();
  const conv2d_problem p = make_problem(152, 32, 14, 14, 130, 3, 3, 1, 1);
  conv2d_reduce_plan<float, math::tf32> plan(p);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  if (plan.kernel() != kernel_kind::wgmma || plan.description().find("split-K tail") == std::string::npos) {
    MESSAGE("not an sm_90a device of 132 SMs with the model's split-K tail: nothing to check");
    return;
  }
  // against float64 (conv2d_reduce_packed_split, splits = 0, takes the same tail on this device), and the
  // plan's run bitwise the entry point's
  plan_equals_packed_split<conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t>(plan, p, 9700, "plan tail tf32 min");
}

// bind: the prepared bytes of one plan's prepare (read only) and a separate scratch, on a second, equal
// plan: the same bits as the plan that packed, the prepared bytes untouched by the runs, and the argument
// checks. Problems whose plans on an H200 are: the wgmma kernel split (scratch: partial sums), in pass mode
// with flat tiles, fused (no scratch), the mma.sync split (no prepared bytes); any plan elsewhere.
TEST_CASE("conv2d_reduce_plan bind: prepared bytes read only, a separate scratch, the same result as prepare") {
  require_gpu();
  // what each problem's tf32 plan is on an H200 (132 SMs, sm_90a): a description fragment, checked there
  struct named {
    conv2d_problem p;
    const char* h200;
  };
  const named problems[] = {{make_problem(1, 256, 6, 8, 130, 3, 3, 1, 1), "split into"},
                            {make_problem(32, 256, 14, 14, 256, 3, 3, 1, 1), "ping-pong"},
                            {make_problem(2, 32, 20, 24, 64, 3, 3, 1, 1), "wgmma tf32"},
                            {make_problem(152, 32, 14, 14, 130, 3, 3, 1, 1), "split-K tail"},
                            {make_problem(1, 512, 1, 1, 1030, 1, 1, 0, 1), ""}};
  const convred::device::device_info here = convred::device::device_info::current();
  const bool h200 = here.cc_major == 9 && here.cc_minor == 0 && here.wgmma_image && here.sm_count == 132;
  std::uint64_t seed = 9700;
  for (const auto& [p, fragment] : problems) {
    conv2d_reduce_plan<float, math::tf32> a(p), b(p);
    CAPTURE(a.description());
    REQUIRE(a.state() == status::success);
    if (h200) CHECK(a.description().find(fragment) != std::string::npos);
    const std::size_t need = a.workspace_bytes(), pre = a.prepared_bytes(), scr = a.scratch_bytes();
    REQUIRE(pre <= need);
    REQUIRE(scr <= need);
    CHECK(scr == (need == 0 ? 0 : need - (pre ? (pre + 15) / 16 * 16 : 0)));
    const auto d = make_data<float>(p, seed++, data_kind::real);
    auto dx = test::to_device(d.x);
    auto dw = test::to_device(d.w);
    auto db = test::to_device(d.b);
    thrust::device_vector<unsigned char> ws(need + 16), scratch(scr + 16, static_cast<unsigned char>(0xFF));
    REQUIRE(a.prepare(craw(dw), need ? static_cast<void*>(raw(ws)) : nullptr, ws.size()) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const std::vector<unsigned char> packed_before = test::to_host(ws);
    void* pp = pre ? static_cast<void*>(raw(ws)) : nullptr;
    void* sp = scr ? static_cast<void*>(raw(scratch)) : nullptr;
    if (scr > 0) {
      CHECK(b.bind(craw(dw), pp, pre, nullptr, scr) == status::null_pointer);
      CHECK(b.bind(craw(dw), pp, pre, raw(scratch) + 4, scr) == status::misaligned_pointer);
      CHECK(b.bind(craw(dw), pp, pre, sp, scr - 4) == status::workspace_too_small);
      if (pre > 0) CHECK(b.bind(craw(dw), pp, pre, pp, scr) == status::overlapping_buffers);
    }
    if (pre > 0) {
      CHECK(b.bind(craw(dw), nullptr, pre, sp, scr) == status::null_pointer);
      CHECK(b.bind(craw(dw), pp, pre - 4, sp, scr) == status::workspace_too_small);
    }
    const std::size_t ny = static_cast<std::size_t>(p.y_elements());
    thrust::device_vector<float> y1(ny), y2(ny);
    thrust::device_vector<std::int64_t> i1(ny), i2(ny);
    test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
    CHECK(b.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmin{}) == status::not_prepared);
    REQUIRE(b.bind(craw(dw), pp, pre, sp, scr) == status::success);
    REQUIRE(b.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmin{}) == status::success);
    REQUIRE(b.run(craw(dx), craw(db), raw(y2), raw(i2), op::argmin{}) == status::success);  // twice: scratch reused
    REQUIRE(a.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const auto ya = test::to_host(y1), yb = test::to_host(y2);
    CHECK(test::count_nan(yb) == 0);
    CHECK(bytes_equal(ya, yb));
    CHECK(test::to_host(i1) == test::to_host(i2));
    // b's runs wrote only its scratch: the prepared bytes are as prepare left them
    const std::vector<unsigned char> after = test::to_host(ws);
    CHECK(std::equal(packed_before.begin(), packed_before.begin() + static_cast<std::ptrdiff_t>(pre), after.begin()));
  }
}
}  // TEST_SUITE("gpu")
