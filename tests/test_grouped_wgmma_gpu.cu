// The wgmma kernel's grouped passes (block::wgmma_conv_params::conv_groups): a grouped convolution with
// C/groups a multiple of the policy's block_c runs in one launch, each group's K/groups output channels its
// own channel passes over the group's own input channels. Host: the parameters (passes, stages, packed
// sizes) and which layers the planner sends there on an H200 (the grouped family yielding to it). GPU:
// every op against float64 in tf32, bf16 and math::accurate through a plan over the wgmma family alone,
// in each of the kernel's tiles (image rows, flat, direct) and modes (fused, pass mode, partial mode, a
// split-K tail); the plan equals the wgmma plans of each group's dense sub-problem combined on the host,
// bitwise; a case for compute-sanitizer.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <iterator>
#include <string>
#include <vector>

#include "adapter_family_check.cuh"
#include "wgmma_mode_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;
using convred::device::plan_options;
using convred::device::wgmma_pass_mode;

namespace {

const device_info h200{9, 0, true, 132};

/// The grouped passes' checks of the GPU cases (wgmma_mode_check.cuh).
struct grouped_passes {
  static constexpr const char* fragment = " groups as channel passes (";
  static constexpr const char* partial_name = "partial mode (GEMM_K splits forced to 2, at most the stages per pass)";
  static constexpr bool pass_described = true;
};

/// Grouped layers (NCHW): make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w,
/// groups). C/groups a multiple of 16 (block_c of bf16; 8 for tf32) except where marked.
struct grouped_case {
  const char* name;
  conv2d_problem p;
  bool bf16;      ///< C/groups a multiple of 16: served in bf16 too
  bool accurate;  ///< 3xTF32's two-part stages fit
};
const grouped_case cases[] = {
    {"g2 Cg 8 Kg 32 3x3", make_problem(2, 16, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2), false, true},
    {"g32 Cg 16 Kg 16 (ResNeXt)", make_problem(2, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32), true, true},
    {"g2 1x1 Cg 32 Kg 130 (two passes per group)", make_problem(3, 64, 12, 12, 260, 1, 1, 0, 0, 1, 1, 1, 1, 2), true, true},
    {"g4 Cg 16 Kg 24 stride 2", make_problem(2, 64, 15, 17, 96, 3, 3, 1, 1, 2, 2, 1, 1, 4), true, false},
    {"g3 Cg 16 Kg 8 batch 1", make_problem(1, 48, 13, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1, 3), true, true},
    {"g2 Cg 32 Kg 64 3x1", make_problem(2, 64, 10, 8, 128, 3, 1, 1, 0, 1, 1, 1, 1, 2), true, true},
    // odd K/groups above 128: group 1's passes start at the odd channel 129 (8-byte pair stores misaligned)
    {"g2 Cg 16 Kg 129 (odd, two passes per group)", make_problem(2, 32, 9, 9, 258, 3, 3, 1, 1, 1, 1, 1, 1, 2), true, true},
};

}  // namespace

TEST_SUITE("host") {
TEST_CASE("wgmma grouped passes: the parameters, the packed sizes and what the plan says") {
  using W = fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>;
  using mainloop = convred::block::conv_mainloop_wgmma<W::policy>;
  // ResNeXt's c2048 7x7 groups 32: 32 groups of 64 channels, one pass each, 8 stages of 8 channels per pass
  const conv2d_problem p = make_problem(32, 2048, 7, 7, 2048, 3, 3, 1, 1, 1, 1, 1, 1, 32);
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(mainloop::make_params(p, 4096, 227 * 1024, k, smem, true));
  CHECK(k.conv_groups == 32);
  CHECK(k.group_passes == 1);
  CHECK(k.npass == 32);
  CHECK(k.Kg == 64);
  CHECK(k.kt == 8);
  CHECK(k.x_stages() == 256);
  // slice (pass, stage): group pass's x stages; output channels 64 per pass
  CHECK(k.x_stage(0) == 0);
  CHECK(k.x_stage(7) == 7);
  CHECK(k.x_stage(8) == 8);
  CHECK(k.x_stage(31 * 8 + 5) == 31 * 8 + 5);
  CHECK(k.pass_k0(5) == 320);
  CHECK(k.pass_channels(5) == 64);
  // the packed x holds every group's stages; the packed filter groups x one pass x 8 stages of slices
  CHECK(mainloop::xpack_bytes(k) == static_cast<std::size_t>(k.tiles) * 256 * k.part_bytes);
  CHECK(mainloop::packed_bytes(k) == 32u * 8u * static_cast<std::size_t>(k.b_bytes) + 256u);  // (+ the flag word)
  // two passes per group (K/groups 130): passes 2g and 2g + 1, channels 130 g and 130 g + 128 (2 of them)
  convred::block::wgmma_conv_params k2;
  REQUIRE(mainloop::make_params(cases[2].p, 4096, 227 * 1024, k2, smem, true));
  CHECK(k2.group_passes == 2);
  CHECK(k2.npass == 4);
  CHECK(k2.pass_k0(3) == 130 + 128);
  CHECK(k2.pass_channels(3) == 2);
  CHECK(k2.pass_channels(2) == 128);
  CHECK(k2.x_stage(3 * k2.kt) == k2.kt);  // pass 3 (group 1), its first stage
  // the packed filter: the groups' dense packings one after another
  const conv2d_problem sub = [&] {
    conv2d_problem s = p;
    s.C = 64, s.K = 64, s.groups = 1;
    return s;
  }();
  const wgmma_plan<math::tf32> whole(p, h200), one(sub, h200);
  CHECK(whole.prepared_bytes() == 32 * (one.prepared_bytes() - 256) + 256);  // (one flag word each)
  // not served: C/groups not a multiple of block_c (8 for tf32, 16 for bf16)
  CHECK(std::string(mainloop::cannot_implement(make_problem(2, 12, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2))) ==
        "groups != 1 with C/groups not a multiple of 8");
  CHECK(wgmma_plan<math::bf16>(cases[0].p, h200).state() != status::success);
  CHECK(wgmma_plan<math::bf16>(cases[1].p, h200).state() == status::success);
}

TEST_CASE("wgmma grouped passes: the planner sends wide-group layers there; the grouped family yields") {
  // ResNeXt and RegNet layers at batch 32 the time model sends to the grouped passes
  const conv2d_problem served[] = {
      make_problem(32, 2048, 7, 7, 2048, 3, 3, 1, 1, 1, 1, 1, 1, 32),
      make_problem(32, 528, 96, 96, 528, 3, 3, 1, 1, 1, 1, 1, 1, 2),
      make_problem(32, 224, 56, 56, 224, 3, 3, 1, 1, 1, 1, 1, 1, 2),
  };
  using G = fam::grouped<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>, fam::mma_sync<float, math::tf32>>;
  for (const conv2d_problem& p : served) {
    CAPTURE(describe(p));
    conv2d_reduce_plan<float, math::tf32> plan(p, h200);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), " groups as channel passes ("));
    CHECK(plan.config().seconds < fam::mma_sync<float, math::tf32>::cost(p, h200, plan_options{}));
    const char* why = G::can_implement(p, h200, plan_options{});
    REQUIRE(why != nullptr);
    CHECK((has(why, "grouped passes") || has(why, "slower than the mma.sync kernel")));
  }
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(served[0], h200).description(),
            "32 groups as channel passes (1 per group of 64 channels)"));
  // not taken where they were measured slower: stride 2, 8 channels per group (served where forced)
  const conv2d_problem s2 = make_problem(32, 1920, 14, 14, 1920, 3, 3, 1, 1, 2, 2, 1, 1, 16),
                       g8 = make_problem(1, 256, 56, 56, 256, 3, 3, 1, 1, 1, 1, 1, 1, 32);
  using W = fam::wgmma<float, math::tf32>;
  CHECK(std::string(W::can_implement(s2, h200, plan_options{})) ==
        "grouped at stride 2 (the grouped passes measured slower than the other paths)");
  CHECK(std::string(W::can_implement(g8, h200, plan_options{})) ==
        "grouped with fewer than 16 channels per group (the grouped passes measured slower)");
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(s2, h200).description(), "groups as channel passes"));
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(g8, h200).description(), "groups as channel passes"));
  CHECK(wgmma_plan<math::tf32>(s2, h200, options_of(mode::model)).state() == status::success);
  // forced wgmma choices (plan_options::splits) keep the groups one at a time where that serves
  plan_options forced;
  forced.splits = -1;
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(served[1], h200, forced).description(), "one at a time"));
}
}

TEST_SUITE("gpu") {
TEST_CASE("wgmma grouped passes: every op against float64 in tf32, every tiling and mode") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;  // (no wgmma kernel on this GPU)
  std::uint64_t seed = 9700;
  for (const grouped_case& c : cases) {
    all_ops<grouped_passes, math::tf32, mode::model>(c.name, c.p, ++seed);
    all_ops<grouped_passes, math::tf32, mode::rows>(c.name, c.p, ++seed);
    all_ops<grouped_passes, math::tf32, mode::flat>(c.name, c.p, ++seed);
    all_ops<grouped_passes, math::tf32, mode::pass>(c.name, c.p, ++seed);
    all_ops<grouped_passes, math::tf32, mode::partial>(c.name, c.p, ++seed);
    all_ops<grouped_passes, math::tf32, mode::tail>(c.name, c.p, ++seed);
  }
  // direct tiles: tf32, 1x1, no padding
  all_ops<grouped_passes, math::tf32, mode::direct>(cases[2].name, cases[2].p, ++seed);
}

TEST_CASE("wgmma grouped passes: every op against float64 in bf16 and math::accurate") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  std::uint64_t seed = 9800;
  for (const grouped_case& c : cases) {
    if (c.bf16) {
      all_ops<grouped_passes, math::bf16, mode::model>(c.name, c.p, ++seed);
      all_ops<grouped_passes, math::bf16, mode::pass>(c.name, c.p, ++seed);
      all_ops<grouped_passes, math::bf16, mode::partial>(c.name, c.p, ++seed);
    }
    if (c.accurate) {
      all_ops<grouped_passes, math::accurate, mode::model>(c.name, c.p, ++seed);
      all_ops<grouped_passes, math::accurate, mode::partial>(c.name, c.p, ++seed);
    }
  }
}

TEST_CASE("wgmma grouped passes: the plan equals the wgmma plans of each group, combined on the host, bitwise") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  // layers whose tiles fill the GPU (the model splits none of them, the whole or a group), fused: each
  // channel's sum the same stages in the same order as its group's own plan
  const grouped_case big[] = {
      {"g2 Cg 8 Kg 32 3x3", make_problem(16, 16, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 2), false, true},
      {"g32 Cg 16 Kg 16", make_problem(16, 512, 56, 56, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32), true, true},
      {"g2 1x1 Cg 32 Kg 130", make_problem(16, 64, 56, 56, 260, 1, 1, 0, 0, 1, 1, 1, 1, 2), true, true},
  };
  for (const grouped_case& c : big) {
    for (mode m : {mode::rows, mode::flat}) {
      const std::string name = std::string(c.name) + ", " + mode_name<grouped_passes>(m);
      CAPTURE(name);
      plan_options o = options_of(m);
      o.pass = wgmma_pass_mode::off, o.tail = -1;  // fused, as the groups' own plans
      wgmma_plan<math::tf32> plan(c.p, o);
      REQUIRE(plan.state() == status::success);
      CAPTURE(plan.description());
      REQUIRE(plan.k_splits() == 0);
      check_groups_combined(plan, 97, true);
    }
  }
}

TEST_CASE("wgmma grouped passes sanitizer: a small grouped layer, fused, pass mode and partial mode") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;
  const conv2d_problem p = make_problem(2, 32, 9, 11, 96, 3, 3, 1, 1, 1, 1, 1, 1, 2);
  const auto d = make_data<float>(p, 99, data_kind::real);
  op_check<grouped_passes, math::tf32, mode::model>("grouped wgmma sanitizer", p, d, op::argmin{});
  op_check<grouped_passes, math::tf32, mode::pass>("grouped wgmma sanitizer", p, d, op::argmin{});
  op_check<grouped_passes, math::tf32, mode::partial>("grouped wgmma sanitizer", p, d, op::argmin{});
}
}
