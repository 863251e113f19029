// The dilated family (device/family/dilated.cuh): a dilated layer at stride 1 whose padding the dilation
// divides runs on the wgmma kernel as an undilated one over sub-images folded into the batch. Host: which
// problems it serves and what the plan says. GPU: the plan's results against float64 for every op and the
// tensor-core maths over dilations 2-6 (equal, anisotropic, one dimension only), paddings, output sizes
// that the dilation does not divide, K above 128, and smaller splits (a residual dilation 2-4 in the
// sub-images, forced by plan_options::dilated_residual); the plan's run equals a plan restricted to the wgmma
// family on sub-images built on the host from the definition (bitwise); bind with a separate scratch; a
// case for compute-sanitizer; +-inf / NaN weights on taps that read padding, through the default planner
// (whatever family it picks) in tf32, bf16 and math::accurate, exact against float64.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <limits>
#include <string>

#include "adapter_family_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;

namespace {

const device_info h200{9, 0, true, 132};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// served() with the full space-to-batch split forced (undilated sub-images; plan_options::dilated_residual)
convred::device::plan_options full() {
  convred::device::plan_options o = served();
  o.dilated_residual = 1;
  return o;
}

/// adapter_family_check.cuh's setup: plans with full(), so that the dilated family runs its full split;
/// all_ops without op::mean.
struct dilated_setup {
  static convred::device::plan_options options() { return full(); }  ///< the full split where it serves
  static void check_plan(const std::string&) {}                   ///< (the host tests check the plans)
  static constexpr bool with_mean = false;                        ///< op::mean not checked
};

/// Dilated layers (NCHW): make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w).
struct dilated_case {
  const char* name;
  conv2d_problem p;
};
const dilated_case cases[] = {
    {"ASPP-like d6 pad 6", make_problem(2, 16, 29, 29, 33, 3, 3, 6, 6, 1, 1, 6, 6)},
    {"d2 pad 2, K 130 (two channel passes)", make_problem(2, 8, 17, 23, 130, 3, 3, 2, 2, 1, 1, 2, 2)},
    {"d2x1 pad 2x1", make_problem(1, 12, 15, 18, 40, 3, 3, 2, 1, 1, 1, 2, 1)},
    {"d1x3 pad 0x3", make_problem(2, 9, 14, 20, 17, 3, 3, 0, 3, 1, 1, 1, 3)},
    {"d3 no padding", make_problem(1, 5, 20, 19, 24, 3, 3, 0, 0, 1, 1, 3, 3)},
    {"d5 pad 5 on 13x13 (sub-images of 3x3 outputs)", make_problem(3, 32, 13, 13, 64, 3, 3, 5, 5, 1, 1, 5, 5)},
    {"d4 pad 8, 5x5", make_problem(1, 8, 21, 22, 16, 5, 5, 8, 8, 1, 1, 4, 4)},
    {"d2 pad 0, 3x1", make_problem(2, 8, 16, 9, 20, 3, 1, 0, 0, 1, 1, 2, 5)},
};

/// The setup of a smaller split forced: residual dilation K in the sub-images (plan_options::dilated_residual);
/// every plan is the dilated family's and says so (where the build expects the wgmma kernel).
template <int K>
struct residual_setup {
  static convred::device::plan_options options() {
    convred::device::plan_options o = served();
    o.dilated_residual = K;
    return o;
  }
  static void check_plan([[maybe_unused]] const std::string& d) {
#ifdef CONVRED_TEST_EXPECT_WGMMA
    CAPTURE(d);
    CHECK(has(d, ("sub-images of dilation " + std::to_string(K)).c_str()));
#endif
  }
  static constexpr bool with_mean = false;
};

/// Layers for smaller splits: the residual dilation forced, its sub-images still dilated.
struct residual_case {
  const char* name;
  conv2d_problem p;
  int k;  ///< the residual dilation
};
const residual_case residual_cases[] = {
    {"d4 pad 4 split by 2 (residual 2)", make_problem(2, 16, 29, 27, 33, 3, 3, 4, 4, 1, 1, 4, 4), 2},
    {"d6 pad 6 split by 3 (residual 2), K 130", make_problem(1, 8, 31, 29, 130, 3, 3, 6, 6, 1, 1, 6, 6), 2},
    {"d6 pad 6 split by 2 (residual 3)", make_problem(2, 12, 25, 26, 40, 3, 3, 6, 6, 1, 1, 6, 6), 3},
    {"d12 pad 12 split by 3 (residual 4), 40x37", make_problem(1, 8, 40, 37, 24, 3, 3, 12, 12, 1, 1, 12, 12), 4},
    {"d4x2 pad 4x2 split by 2x1 (residual 2x2)", make_problem(2, 9, 21, 18, 17, 3, 3, 4, 2, 1, 1, 4, 2), 2},
    {"d4 pad 8, 5x5, split by 2 (residual 2)", make_problem(1, 8, 24, 22, 16, 5, 5, 8, 8, 1, 1, 4, 4), 2},
};

}  // namespace

TEST_SUITE("host") {
TEST_CASE("dilated family: which layers run on the wgmma kernel as undilated sub-images, and the plan says so") {
  for (const dilated_case& c : cases) {
    CAPTURE(c.name);
    conv2d_reduce_plan<float, math::tf32> plan(c.p, h200, full());
    CAPTURE(plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), "undilated sub-images per image"));
    // the workspace holds the sub-images (x's copy) and the sub-problem's outputs after the wgmma
    // kernel's own
    const auto s = fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>::sub_problem(c.p);
    CHECK(plan.workspace_bytes() >= static_cast<std::size_t>(s.x_elements() + 3 * s.gemm_m()) * 4);
    CHECK(s.P() * fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>::factor_h(c.p) >= c.p.P());
    CHECK(s.Q() * fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>::factor_w(c.p) >= c.p.Q());
  }
  const conv2d_problem aspp = cases[0].p;
  {
    conv2d_reduce_plan<float, math::tf32> plan(aspp, h200, full());
    CHECK(has(plan.description(), "dilation 6x6 at stride 1 as 36 undilated sub-images per image (space to batch: "
                                  "batch 72, 5x5 pixels, padding 1x1"));
  }
  // math::accurate (3xTF32 on the wgmma kernel) and bf16
  CHECK(conv2d_reduce_plan<float, math::accurate>(aspp, h200, served()).kernel() == kernel_kind::wgmma);
  CHECK(conv2d_reduce_plan<float, math::bf16>(aspp, h200, served()).kernel() == kernel_kind::wgmma);
  // the time model: on this small layer the copies and the wgmma kernel's launch cost more than the
  // mma.sync kernel's whole run (which then runs it, or the wgmma kernel's direct tiles of filter rows,
  // estimated about as fast); on DeepLab's ASPP at batch 32 (2048 -> 256 channels, 65x65, dilation 12) the
  // space-to-batch plan is estimated faster under 3xTF32, split by 6 x 6 into sub-images of dilation 2 (the
  // full split's 6 x 6 sub-images hold 36 outputs in 7 x 7 packed pixels); in TF32 the wgmma kernel's direct
  // tiles of the whole problem (estimated 7.2 ms, the split 6.5: within the 0.85 margin of a smaller split)
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(aspp, h200).description(), "sub-images"));
  const conv2d_problem deeplab = make_problem(32, 2048, 65, 65, 256, 3, 3, 12, 12, 1, 1, 12, 12);
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(deeplab, h200).description(),
            "dilation 12x12 at stride 1 as 36 sub-images of dilation 2x2 per image (space to batch by 6x6: batch 1152, "
            "11x11 pixels, padding 2x2"));
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(deeplab, h200).description(), "a stage per filter row"));
  // not served by the full split: a padding the dilation does not divide, a stride above 1, NHWC x, 16-bit
  // x, groups, no sm_90a code; the mma.sync kernel then, and the wgmma family's reason
  conv2d_problem pad = aspp, stride = aspp, nhwc = aspp, groups = aspp, wide = aspp;
  pad.pad_h = 5;
  wide.dil_w = wide.pad_w = 18;  // sub-images of 2 output columns: more padding than outputs in the tiles
  stride.stride_h = stride.stride_w = 2;
  nhwc.x_layout = convred::layout::nhwc;
  groups.groups = 2, groups.C = 64, groups.K = 32;  // (C/groups 32: not the direct family's; K/groups 16)
  for (const conv2d_problem& p : {pad, stride, nhwc, groups, wide}) {
    CAPTURE(describe(p));
    conv2d_reduce_plan<float, math::tf32> plan(p, h200, full());
    CAPTURE(plan.description());
    CHECK_FALSE(has(plan.description(), "sub-images"));
    // (pad and wide in TF32: the wgmma kernel's direct tiles of filter rows serve them too, estimated about
    // as fast as the mma.sync kernel on these small layers, and its flat tiles, the taps as offsets, serve
    // wide and groups: test_dilated_wgmma_gpu.cu)
    CHECK((plan.kernel() == kernel_kind::mma_sync || has(plan.description(), "a stage per filter row") ||
           has(plan.description(), "as tap offsets")));
  }
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(pad, h200, full()).description(), "a stage per filter row"));
  // 3xTF32 too (test_dilated_wgmma_gpu.cu); sub-images of 2 output columns: left to the wgmma kernel's
  // dilated tiles in tf32 and 3xTF32, served under bf16 (measured faster)
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(pad, h200, full()).description(), "a stage per filter row"));
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(wide, h200, full()).description(), "a stage per filter row"));
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(wide, h200, full()).description(), "undilated sub-images"));
  CHECK(conv2d_reduce_plan<__half, math::fp16>(aspp, h200, full()).kernel() == kernel_kind::mma_sync);
  CHECK(conv2d_reduce_plan<float, math::tf32>(aspp, device_info{9, 0, false, 132}, full()).kernel() ==
        kernel_kind::mma_sync);
  CHECK(conv2d_reduce_plan<float, math::ieee>(aspp, h200).kernel() == kernel_kind::simt);
  // a dilation along a 1-wide filter dimension moves no tap: the wgmma kernel serves it as it is (3x1
  // dilated down the rows: the dilated family; 1x3 with a dilation down the rows only: wgmma itself)
  conv2d_problem col = make_problem(2, 16, 20, 24, 32, 1, 3, 0, 1, 1, 1, 5, 1);
  conv2d_reduce_plan<float, math::tf32> pc(col, h200, served());
  CHECK(pc.kernel() == kernel_kind::wgmma);
  CHECK_FALSE(has(pc.description(), "sub-images"));
  CHECK(convred::plan::wgmma_params<conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t>::cannot_implement(col) ==
        nullptr);
  col.dil_w = 2;  // a dilation along the 3-wide dimension: only the direct tiles of filter rows serve it
  CHECK(convred::plan::wgmma_params<conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t>::cannot_implement(col) ==
        nullptr);
  CHECK(convred::plan::wgmma_params<conv2d_reduce_plan<float, math::accurate>::wgmma_policy_t>::cannot_implement(col) ==
        nullptr);
  col.stride_h = col.stride_w = 2;  // not at stride 2
  CHECK(convred::plan::wgmma_params<conv2d_reduce_plan<float, math::accurate>::wgmma_policy_t>::cannot_implement(col) !=
        nullptr);
  col.stride_h = col.stride_w = 1;
  // a 1x1 filter's dilation moves no tap: the wgmma kernel serves it as it is
  conv2d_problem one = aspp;
  one.R = one.S = 1, one.pad_h = one.pad_w = 0;
  conv2d_reduce_plan<float, math::tf32> p1(one, h200, served());
  CHECK(p1.kernel() == kernel_kind::wgmma);
  CHECK_FALSE(has(p1.description(), "sub-images"));
  // a depthwise dilated layer stays with the direct family
  conv2d_problem dw = make_problem(2, 16, 29, 29, 16, 3, 3, 2, 2, 1, 1, 2, 2, 16);
  CHECK(conv2d_reduce_plan<float, math::tf32>(dw, h200).kernel() == kernel_kind::direct);
}
}

TEST_SUITE("host") {
TEST_CASE("dilated family: smaller splits leave a residual dilation in the sub-images; the model picks one") {
  using fam_t = fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>;
  // DeepLab's d12 on 65x65 split by 6 x 6: 11 x 11 sub-images (ceil(65 / 6)), padding 2, dilation 2
  const conv2d_problem deeplab = make_problem(32, 2048, 65, 65, 256, 3, 3, 12, 12, 1, 1, 12, 12);
  const conv2d_problem s = fam_t::sub_problem(deeplab, 6, 6);
  CHECK(s.N == 32 * 36);
  CHECK(s.H == 11);
  CHECK(s.W == 11);
  CHECK(s.pad_h == 2);
  CHECK(s.dil_h == 2);
  CHECK(s.dil_w == 2);
  CHECK(s.P() == (deeplab.P() + 5) / 6);  // (every phase's outputs: P' = ceil(P / 6))
  // the full split by default: undilated sub-images
  CHECK(fam_t::sub_problem(deeplab).dil_h == 1);
  CHECK(fam_t::sub_problem(deeplab).H == 6);
  // anisotropic: dilation 4 x 2 split by 2 x 1 (residual 2 in both)
  const conv2d_problem an = residual_cases[4].p, sa = fam_t::sub_problem(an, 2, 1);
  CHECK(sa.dil_h == 2);
  CHECK(sa.dil_w == 2);
  CHECK(sa.pad_w == 2);
  CHECK(sa.W == an.W);
  // forced splits: each residual case's plan says so, in every tensor-core math
  for (const residual_case& c : residual_cases) {
    CAPTURE(c.name);
    convred::device::plan_options o = served();
    o.dilated_residual = c.k;
    const std::string want = "sub-images of dilation " + std::to_string(c.k);
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(c.p, h200, o).description(), want.c_str()));
    CHECK(has(conv2d_reduce_plan<float, math::bf16>(c.p, h200, o).description(), want.c_str()));
    CHECK(has(conv2d_reduce_plan<float, math::accurate>(c.p, h200, o).description(), want.c_str()));
  }
  // a residual that does not divide the dilation: no split (the plan runs another family)
  convred::device::plan_options bad = served();
  bad.dilated_residual = 5;
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(deeplab, h200, bad).description(), "space to batch"));
  const char* why = nullptr;
  fam_t::split_config(deeplab, 5, 5, h200, served(), why);  // (5 does not divide 12: refused)
  CHECK(why != nullptr);
  // the model: the split whose inner flat tiles are estimated fastest (6 x 6 on DeepLab's d12 under
  // 3xTF32); where the inner family's direct tiles of the whole problem are estimated faster than every
  // smaller split (n32 c960 33x33 d12), or, in TF32, within 1 / 0.85 of it, they run
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(deeplab, h200).description(), "space to batch by 6x6"));
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(make_problem(32, 960, 33, 33, 256, 3, 3, 12, 12, 1, 1, 12, 12), h200)
                .description(),
            "a stage per filter row"));
}
}

TEST_SUITE("gpu") {
TEST_CASE("dilated family: smaller splits, every op against float64 in tf32, bf16 and math::accurate") {
  require_gpu();
  std::uint64_t seed = 9300;
  for (const residual_case& c : residual_cases) {
    switch (c.k) {
      case 2:
        adapter_all_ops<residual_setup<2>, math::tf32>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<2>, math::bf16>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<2>, math::accurate>(c.name, c.p, ++seed);
        break;
      case 3:
        adapter_all_ops<residual_setup<3>, math::tf32>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<3>, math::bf16>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<3>, math::accurate>(c.name, c.p, ++seed);
        break;
      default:
        adapter_all_ops<residual_setup<4>, math::tf32>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<4>, math::bf16>(c.name, c.p, ++seed);
        adapter_all_ops<residual_setup<4>, math::accurate>(c.name, c.p, ++seed);
        break;
    }
  }
}

TEST_CASE("dilated family sanitizer: a smaller split (residual dilation 2) through the plan") {
  require_gpu();
  adapter_sanitizer_case<residual_setup<2>>("dilated residual sanitizer", make_problem(1, 4, 13, 11, 10, 3, 3, 4, 4, 1, 1, 4, 4), 80);
}

TEST_CASE("dilated family: every op against float64 in tf32, bf16 and math::accurate") {
  require_gpu();
  std::uint64_t seed = 9100;
  for (const dilated_case& c : cases) {
#ifdef CONVRED_TEST_EXPECT_WGMMA
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(c.p, full()).description(), "undilated sub-images"));
#endif
    adapter_all_ops<dilated_setup, math::tf32>(c.name, c.p, ++seed);
    adapter_all_ops<dilated_setup, math::bf16>(c.name, c.p, ++seed);
    adapter_all_ops<dilated_setup, math::accurate>(c.name, c.p, ++seed);
  }
}

namespace {
/// adapter_family_check.cuh's setup for the default planner: the time model's choice among every family.
struct planner_setup {
  static convred::device::plan_options options() { return {}; }  ///< no choice forced
  static void check_plan(const std::string&) {}                   ///< any family
  static constexpr bool with_mean = false;                        ///< (unused)
};

/// One layer of the non-finite case through the planner in Math: min, argmin, argmax and sum, exact.
template <class Math>
void nonfinite_ops(const std::string& name, const conv2d_problem& p, const host_data<float>& d) {
  opts o;
  o.exact = true, o.nan_expected = true, o.gain = 2;
  const epi::scale<float> two{2.0f}, neg{-0.5f};
  using entry = adapter_plan_entry<planner_setup, Math>;
  check_fused<entry>(name + " min", p, d, op::min{}, two, two, o);
  check_fused<entry>(name + " argmin", p, d, op::argmin{}, two, two, o);
  check_fused<entry>(name + " sum", p, d, op::sum{}, two, two, o);
  o.gain = 0.5;
  check_fused<entry>(name + " argmax", p, d, op::argmax{}, neg, neg, o);
}
}  // namespace

TEST_CASE("dilated layers through the planner: an infinite or NaN weight on a tap that reads padding gives NaN there") {
  // PyTorch's conv2d multiplies the zero padding, so an infinite or NaN weight makes its channel NaN at the
  // outputs whose tap reads padding (and +-inf or NaN where it reads x). Whatever the planner picks for these
  // layers (on an H200 or H100: space to batch, mma.sync, the grouped passes, and for the last layer in
  // TF32 and bf16 the wgmma kernel's direct tiles of filter rows, which skip a tile's dead rows only where
  // every weight is finite), the same must come out. Integer data: exact against float64. Weights: +inf on
  // input channel 0's first tap of output channel 1, NaN on input channel 3's last tap of output channel
  // K - 2, -inf on input channel 0's centre tap of output channel K / 2 (a tap that reads x everywhere).
  require_gpu();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const conv2d_problem layers[] = {
      make_problem(2, 16, 29, 29, 33, 3, 3, 6, 6, 1, 1, 6, 6),         // ASPP-like d6
      make_problem(2, 8, 9, 40, 20, 3, 3, 8, 8, 1, 1, 8, 8),           // d8 on 9 rows: rows dead in some tiles
      make_problem(1, 8, 21, 22, 16, 5, 5, 8, 8, 1, 1, 4, 4),          // 5x5 d4
      make_problem(1, 16, 13, 13, 40, 3, 3, 12, 12, 1, 1, 12, 12),     // d12 on 13x13: outer taps read x at 1 row
      make_problem(2, 64, 17, 17, 64, 3, 3, 4, 4, 1, 1, 4, 4, 2),      // groups 2, d4
      make_problem(1, 256, 33, 33, 128, 3, 3, 24, 24, 1, 1, 24, 24)};  // d24: 7x33 tiles, rows 0 and / or 2 dead
  // the last layer's plan on an H200 (the H100 of the runs plans the same): direct tiles of filter rows
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(layers[5], h200).description(), "a stage per filter row"));
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(layers[5], h200).description(), "a stage per filter row"));
  std::uint64_t seed = 13300;
  for (const conv2d_problem& p : layers) {
    auto d = make_data<float>(p, ++seed, data_kind::integer);
    const std::int64_t taps = p.R * p.S, ck = p.gemm_k();
    d.w[static_cast<std::size_t>(1 * ck)] = inf;                                     // k 1, c 0, tap (0, 0)
    d.w[static_cast<std::size_t>((p.K - 2) * ck + 3 * taps + taps - 1)] = nan;       // k K-2, c 3, tap (R-1, S-1)
    d.w[static_cast<std::size_t>(p.K / 2 * ck + (p.R / 2) * p.S + p.S / 2)] = -inf;  // k K/2, c 0, the centre tap
    const std::string name = "non-finite w, " + describe(p);
    nonfinite_ops<math::tf32>(name + " tf32", p, d);
    nonfinite_ops<math::bf16>(name + " bf16", p, d);
    nonfinite_ops<math::accurate>(name + " accurate", p, d);
  }
}

namespace {
/// The plan of p with `o` (the dilated family's split fh x fw forced) against the wgmma family alone on
/// sub-images built on the host from the definition, bitwise (values and argmin indices).
void check_split_bitwise(const conv2d_problem& p, std::int64_t fh, std::int64_t fw,
                         const convred::device::plan_options& o) {
  using plan_t = conv2d_reduce_plan<float, math::tf32>;
  using fam_t = fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>;
  const conv2d_problem s = fam_t::sub_problem(p, fh, fw);
  const auto d = make_data<float>(p, 77, data_kind::real);
  // the sub-images built on the host from the definition
  std::vector<float> xs(static_cast<std::size_t>(s.x_elements()), 0.0f);
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t a = 0; a < fh; ++a)
      for (std::int64_t b = 0; b < fw; ++b)
        for (std::int64_t c = 0; c < p.C; ++c)
          for (std::int64_t i = 0; i < s.H; ++i)
            for (std::int64_t j = 0; j < s.W; ++j) {
              const std::int64_t h = i * fh + a, w = j * fw + b, ns = (n * fh + a) * fw + b;
              if (h < p.H && w < p.W)
                xs[static_cast<std::size_t>(((ns * p.C + c) * s.H + i) * s.W + j)] =
                    d.x[static_cast<std::size_t>(((n * p.C + c) * p.H + h) * p.W + w)];
            }
  auto dx = test::to_device(d.x);
  auto dxs = test::to_device(xs);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements()), nys = static_cast<std::size_t>(s.y_elements());
  thrust::device_vector<float> y(ny), ys(nys);
  thrust::device_vector<std::int64_t> idx(ny), idxs(nys);
  test::poison(y), test::poison(idx);
  const epi::scale<float> two{2.0f};
  plan_t plan(p, o);
  CAPTURE(plan.description());
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::argmin{}, two) == status::success);
  // the sub-problem through the wgmma family's own plan (its launch as the dilated family runs it)
  conv2d_reduce_plan<float, math::tf32, fam::family_list<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>> sub(
      s, served());
  REQUIRE(sub.state() == status::success);
  REQUIRE(sub.prepare(craw(dw)) == status::success);
  REQUIRE(sub.run(craw(dxs), craw(db), raw(ys), raw(idxs), op::argmin{}, two) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto hy = test::to_host(y), hys = test::to_host(ys);
  const auto hi = test::to_host(idx), his = test::to_host(idxs);
  std::size_t diff = 0;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t pp = 0; pp < p.P(); ++pp)
      for (std::int64_t q = 0; q < p.Q(); ++q) {
        const std::int64_t ns = (n * fh + pp % fh) * fw + q % fw;
        const auto m = static_cast<std::size_t>((n * p.P() + pp) * p.Q() + q);
        const auto ms = static_cast<std::size_t>((ns * s.P() + pp / fh) * s.Q() + q / fw);
        diff += !bytes_equal(std::vector<float>{hy[m]}, std::vector<float>{hys[ms]}) || hi[m] != his[ms];
      }
  CHECK(diff == 0);
}
}  // namespace

TEST_CASE("dilated family: the plan equals the wgmma entry point on the space-to-batch sub-problem, bitwise") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;  // (a GPU without the wgmma kernel: nothing to compare)
  using fam_t = fam::dilated<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>;
  check_split_bitwise(cases[0].p, fam_t::factor_h(cases[0].p), fam_t::factor_w(cases[0].p), full());
  // a smaller split: d4 by 2 x 2, sub-images of dilation 2
  check_split_bitwise(residual_cases[0].p, 2, 2, residual_setup<2>::options());
}

TEST_CASE("dilated family: bind with a separate scratch gives prepare's results; the prepared bytes are read only") {
  require_gpu();
  check_bind_with_scratch<dilated_setup>(cases[1].p, 78);
}

TEST_CASE("dilated family sanitizer: a small dilated layer through the plan") {
  require_gpu();
  adapter_sanitizer_case<dilated_setup>("dilated sanitizer", make_problem(1, 4, 9, 11, 10, 3, 3, 2, 2, 1, 1, 2, 2), 79);
}
}
