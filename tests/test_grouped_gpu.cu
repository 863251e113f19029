// The grouped family (device/family/grouped.cuh): a grouped layer with wide groups runs on the wgmma kernel
// one group at a time, the groups' reductions combined per pixel. Host: which layers the planner sends to
// it on an H200 (the torchvision sweep's grouped layers) and what the plan says. GPU: the plan's results
// against float64 for every op and the tensor-core maths (forced with plan_options::splits = -1 on
// problems small enough for the host reference), batch 1 in place and copied, K/groups above 128, stride
// 2, 1x1 and 3x1 filters; convred's epilogues with a channel index (their channels moved per group) and a
// user lambda with one (the mma.sync kernel instead); the plan equals the wgmma family's plans on each
// group's sub-problem combined on the host, bitwise; bind with a separate scratch; a case for
// compute-sanitizer.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <iterator>
#include <string>

#include "adapter_family_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;
using convred::device::plan_options;

namespace {

const device_info h200{9, 0, true, 132};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// adapter_family_check.cuh's setup: plans with the grouped family forced, each saying so where the
/// wgmma kernel is expected; all_ops with op::mean.
struct grouped_setup {
  static plan_options options() { return served(); }  ///< served()
  /// the plan runs the groups one at a time (where the build expects the wgmma kernel)
  static void check_plan([[maybe_unused]] const std::string& description) {
#ifdef CONVRED_TEST_EXPECT_WGMMA
    CHECK(has(description, "one at a time"));
#endif
  }
  static constexpr bool with_mean = true;  ///< op::mean checked too
};
using tf32_entry = adapter_plan_entry<grouped_setup, math::tf32>;  ///< check_fused's tag for the planner in tf32

/// Grouped layers (NCHW): make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w,
/// groups).
struct grouped_case {
  const char* name;
  conv2d_problem p;
  bool accurate;  ///< 3xTF32 on the wgmma kernel serves each group (its two-part stages fit)
};
const grouped_case cases[] = {
    {"g2 Cg 8 Kg 32", make_problem(2, 16, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2), true},
    {"g3 batch 1 in place", make_problem(1, 24, 13, 12, 96, 3, 3, 1, 1, 1, 1, 1, 1, 3), true},
    {"g2 batch 1, groups not 16-byte aligned (copied)", make_problem(1, 6, 7, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2), true},
    {"g2 1x1, K/groups 130 (two channel passes)", make_problem(3, 64, 12, 10, 260, 1, 1, 0, 0, 1, 1, 1, 1, 2), true},
    {"g2 stride 2", make_problem(2, 32, 15, 17, 64, 3, 3, 1, 1, 2, 2, 1, 1, 2), false},  // 3x3 stride 2: too large
    {"g4 3x1", make_problem(2, 16, 10, 8, 128, 3, 1, 1, 0, 1, 1, 1, 1, 4), true},  // 3xTF32's tap-loop variant
};

/// The channel-indexed epilogues: per_channel_scale and its compose (channels moved per group), and a
/// user lambda reading the channel (the mma.sync kernel on the whole problem). A namespace-scope
/// function: it hosts an extended lambda.
void channel_epilogues(const conv2d_problem& p, std::uint64_t seed) {
  const auto hs = test::random_vector<float>(static_cast<std::size_t>(p.K), seed, -2, 2);
  const auto ds = test::to_device(hs);
  double smax = 0;
  for (float v : hs) smax = std::max(smax, double(std::abs(v)));
  const epi::per_channel_scale<float> dev_pcs{craw(ds)}, host_pcs{hs.data()};
  auto lam = [] __host__ __device__(float v, int k) { return (k % 3 ? 3.0f : -0.5f) * v; };
  const auto d = make_data<float>(p, seed + 1, data_kind::real);
  opts o;
  o.gain = smax;
  check_fused<tf32_entry>("per-channel scale argmin", p, d, op::argmin{}, dev_pcs, host_pcs, o);
  o.gain = 1.5 * smax;
  check_fused<tf32_entry>("compose(per-channel, scale -1.5) max", p, d, op::max{},
                          epi::make_compose(dev_pcs, epi::scale<float>{-1.5f}),
                          epi::make_compose(host_pcs, epi::scale<float>{-1.5f}), o);
  o.gain = 3;
  check_fused<tf32_entry>("lambda with a channel argmax", p, d, op::argmax{}, lam, lam, o);
}

/// Whether the grouped family hands an extended __device__ lambda reading the channel to the inner family
/// with its channels moved: never (nvcc's host pass cannot see its signature; both passes must agree), so
/// it runs the mma.sync kernel. A namespace-scope function: it hosts an extended lambda.
template <class Lambda>
bool shifts(Lambda) {
  return fam::detail::channel_shift<Lambda, float>::ok;
}
bool device_lambda_shifts() {
  return shifts([] __device__(float v, int k) { return v * static_cast<float>(k); });
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("grouped family: device lambdas run on the mma.sync kernel; images of 2 GiB or more are not served") {
  CHECK_FALSE(device_lambda_shifts());
  CHECK(fam::detail::channel_shift<epi::per_channel_scale<float>, float>::ok);
  CHECK(fam::detail::channel_shift<epi::compose<epi::per_channel_scale<float>, epi::scale<float>>, float>::ok);
  using G = fam::grouped<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>, fam::mma_sync<float, math::tf32>>;
  // C H W x 4 bytes >= 2^31: cudaMemcpy2DAsync's pitch limit
  const conv2d_problem big = make_problem(2, 64, 2900, 2900, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2);
  CHECK(std::string(G::can_implement(big, h200, served())) == "an image of x of 2 GiB or more (the group copy's pitch)");
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(big, h200).description(), "one at a time"));
  conv2d_problem fits = big;
  fits.H = fits.W = 2800;  // 2.0e9 bytes per image
  CHECK(G::can_implement(fits, h200, served()) == nullptr);
}

TEST_CASE("grouped family: which layers run on the wgmma kernel one group at a time, and the plan says so") {
  // the sweep's grouped layers at batch 32 that the time model sends to it in bf16 (RegNet: 2-4 groups of
  // 120-264 channels, C/groups not a multiple of bf16's 16-channel stages, so that the wgmma kernel's
  // grouped passes do not serve them; in tf32 they do: test_grouped_wgmma_gpu.cu), and their description
  const conv2d_problem served[] = {
      make_problem(32, 528, 96, 96, 528, 3, 3, 1, 1, 1, 1, 1, 1, 2),
      make_problem(32, 672, 28, 28, 672, 3, 3, 1, 1, 1, 1, 1, 1, 4),
      make_problem(32, 240, 28, 28, 240, 3, 3, 1, 1, 1, 1, 1, 1, 2),
  };
  using G = fam::grouped<fam::wgmma<float, math::bf16, fam::wgmma_role::adapter>, fam::mma_sync<float, math::bf16>>;
  for (const conv2d_problem& p : served) {
    CAPTURE(describe(p));
    conv2d_reduce_plan<float, math::bf16> plan(p, h200);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), " one at a time ("));
    CHECK(has(plan.description(), "x's group copied into the workspace on each run"));
    CHECK(plan.config().seconds < fam::mma_sync<float, math::bf16>::cost(p, h200, convred::device::plan_options{}));
    // G slots of the wgmma family's packed filter of one group
    const conv2d_reduce_plan<float, math::bf16, fam::family_list<fam::wgmma<float, math::bf16, fam::wgmma_role::adapter>>> one(
        G::sub_problem(p), h200);
    CHECK(plan.prepared_bytes() == static_cast<std::size_t>(p.groups) * ((one.prepared_bytes() + 15) / 16 * 16));
    CHECK(plan.workspace_bytes() >= plan.prepared_bytes() + G::extra_bytes(p));
    // tf32 and 3xTF32: the grouped passes (C/groups a multiple of 8)
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(p, h200).description(), " groups as channel passes ("));
  }
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(served[0], h200).description(),
            "groups 2 one at a time (2 dense convolutions of 264 -> 264 channels; "));
  // not served: K/groups below 32 (ResNeXt), depthwise (the direct family), groups 1, NHWC x, 16-bit x, no
  // sm_90a code, math::ieee; and where the model estimates the mma.sync kernel faster (small groups of 48
  // channels at stride 2; batch-1 layers with many groups)
  conv2d_problem resnext = make_problem(32, 512, 28, 28, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                 dw = make_problem(32, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64), dense = served[2],
                 nhwc = served[2], s2 = make_problem(32, 96, 112, 112, 96, 3, 3, 1, 1, 2, 2, 1, 1, 2),
                 b1 = make_problem(1, 1512, 14, 14, 1512, 3, 3, 1, 1, 2, 2, 1, 1, 63);
  dense.groups = 1;
  nhwc.x_layout = convred::layout::nhwc;
  for (const conv2d_problem& p : {resnext, dw, dense, nhwc, s2, b1}) {
    CAPTURE(describe(p));
    const std::string d = conv2d_reduce_plan<float, math::tf32>(p, h200).description();
    CAPTURE(d);
    CHECK_FALSE(has(d, "one at a time"));
  }
  CHECK(G::can_implement(s2, h200, {}) != nullptr);
  CHECK(G::can_implement(s2, h200, convred_test_fused::served()) == nullptr);  // served where forced
  CHECK(conv2d_reduce_plan<__half, math::fp16>(served[0], h200).kernel() == kernel_kind::mma_sync);
  CHECK(conv2d_reduce_plan<float, math::tf32>(served[0], device_info{9, 0, false, 132}).kernel() ==
        kernel_kind::mma_sync);
  CHECK(conv2d_reduce_plan<float, math::ieee>(served[0], h200).kernel() == kernel_kind::simt);
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(served[1], h200).description(), " groups as channel passes ("));
  // the GPU cases below, forced: served in tf32 and bf16; under math::accurate (3xTF32 on the wgmma kernel,
  // whose two-part stages do not fit a 3x3 filter at stride 2) those marked
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const std::string name = cases[i].name;
    CAPTURE(name);
    const conv2d_problem& p = cases[i].p;
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(p, h200, convred_test_fused::served()).description(), "one at a time"));
    CHECK(has(conv2d_reduce_plan<float, math::bf16>(p, h200, convred_test_fused::served()).description(), "one at a time"));
    CHECK(has(conv2d_reduce_plan<float, math::accurate>(p, h200, convred_test_fused::served()).description(), "one at a time") ==
          cases[i].accurate);
  }
}
}

TEST_SUITE("gpu") {
TEST_CASE("grouped family: every op against float64 in tf32, bf16 and math::accurate") {
  require_gpu();
  std::uint64_t seed = 9300;
  for (const grouped_case& c : cases) {
    adapter_all_ops<grouped_setup, math::tf32>(c.name, c.p, ++seed);
    adapter_all_ops<grouped_setup, math::bf16>(c.name, c.p, ++seed);
  }
  for (const grouped_case& c : cases)
    if (c.accurate) adapter_all_ops<grouped_setup, math::accurate>(c.name, c.p, ++seed);
}

TEST_CASE("grouped family: channel-indexed epilogues (moved per group) and a user one (mma.sync) against float64") {
  require_gpu();
  channel_epilogues(cases[0].p, 9400);
  channel_epilogues(cases[3].p, 9410);
}

TEST_CASE("grouped family: the plan equals the wgmma family's plans on each group, combined on the host, bitwise") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;  // (a GPU without the wgmma kernel: nothing to compare)
  for (const grouped_case& c : {cases[0], cases[3]}) {
    const std::string name = c.name;
    CAPTURE(name);
    conv2d_reduce_plan<float, math::tf32> plan(c.p, served());
    check_groups_combined(plan, 81, false);
  }
}

TEST_CASE("grouped family: bind with a separate scratch gives prepare's results; the prepared bytes are read only") {
  require_gpu();
  check_bind_with_scratch<grouped_setup>(cases[3].p, 82);
}

TEST_CASE("grouped family sanitizer: a small grouped layer through the plan, batch 2 and batch 1") {
  require_gpu();
  for (const conv2d_problem& p : {make_problem(2, 8, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2),
                                  make_problem(1, 6, 7, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2)})
    adapter_sanitizer_case<grouped_setup>("grouped sanitizer", p, 83);
}
}
