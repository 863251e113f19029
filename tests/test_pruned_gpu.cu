// The pruned family (device/family/pruned.cuh): a layer whose outer filter taps read only padding for every
// output runs on the wgmma kernel as the smaller convolution of the other taps. Host: the live-tap range
// against a brute-force count over every small geometry; which layers it serves and what the plan says.
// GPU: the plan against float64 under tf32, bf16 and math::accurate, each with an index op and a value op
// and every op under some math (DeepLab's ASPP at dilation >= the image: a 1x1; rows only; a 7x7 filter on
// a 3x3 image: a 5x5; NHWC, stride 2 and tiny problems, which other families serve); non-finite weights on
// a dropped tap (NaN for that channel everywhere, as PyTorch); the plan equals the wgmma family's plan on
// the 1x1 of the centre weights, bitwise; bind with a separate scratch; a case for compute-sanitizer. The
// GPU checks' plans choose from the pruned family and the families the default planner takes for the
// other problems here (pruned_setup: only their kernels are compiled), each checked to be the default
// planner's choice.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <limits>
#include <string>
#include <vector>

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

using pruned_t = fam::pruned<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>, fam::mma_sync<float, math::tf32>>;

/// adapter_family_check.cuh's setup: plans with served(), so that the pruned family runs wherever it serves
/// (no with_mean: adapter_all_ops is not used here, adapter_some_ops names its ops).
struct pruned_setup {
  static convred::device::plan_options options() { return served(); }  ///< the pruned family where it serves
  static void check_plan(const std::string&) {}                   ///< (the host tests check the plans)
  /// The plans choose from the default list less the families that serve none of the problems here
  /// (direct: C/groups == 1 or grouped; tiny: at most 32 pixels and 512 im2col values; grouped; SIMT:
  /// math::ieee, or math::accurate below sm_80): the pruned family, then what the default planner takes
  /// where it does not serve (with served()'s forced choice the wgmma kernel's direct tiles of filter rows
  /// for the 5x5 d4 case in bf16 and 3xTF32, mma.sync for the others; wgmma ahead
  /// of mma.sync so that its rejection is named as in the default plan's description), in the default
  /// order. Each plan is checked to be the default planner's choice (check_default_choice, and the host
  /// test "... the GPU checks' family list makes the default planner's choice" for every problem and
  /// math below). A run of a default-list plan would compile the launch of all nine default families for
  /// each op and math (the direct family's alone: about 150 kernels in this file). The wgmma family's
  /// launch already holds the mma.sync kernels (its fallback), so mma.sync costs nothing more, and the
  /// dilated family adds two copy kernels. (The wgmma kernels, up to six per op and math, are most of the
  /// rest of the compile time: hence the ops per math of the GPU checks below.)
  template <class T, class Math>
  using families = fam::family_list<fam::pruned<fam::wgmma<T, Math, fam::wgmma_role::adapter>, fam::mma_sync<T, Math>>,
                                    fam::dilated<fam::wgmma<T, Math, fam::wgmma_role::adapter>, fam::mma_sync<T, Math>>,
                                    fam::wgmma<T, Math>, fam::mma_sync<T, Math>>;
};

struct pruned_case {
  const char* name;
  conv2d_problem p;
  bool wgmma;  ///< the pruned family serves it on an H200 in TF32 with served() (else another family runs the whole filter)
};
// make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, layout)
const pruned_case cases[] = {
    {"ASPP d36 pad 36 on 33x33: the centre tap alone", make_problem(2, 16, 33, 33, 40, 3, 3, 36, 36, 1, 1, 36, 36), true},
    {"d12 pad 12 on 9x11, K 130 (two channel passes)", make_problem(1, 24, 9, 11, 130, 3, 3, 12, 12, 1, 1, 12, 12), true},
    {"rows only: d21 pad 21 x d1 pad 1 on 20x24 (a 1x3)", make_problem(2, 8, 20, 24, 36, 3, 3, 21, 1, 1, 1, 21, 1), true},
    {"7x7 pad 3 on 3x3 images (a 5x5)", make_problem(8, 8, 3, 3, 33, 7, 7, 3, 3), true},
    {"5x5 d4 pad 8 on 6x7 (its middle 3x3, still dilated: the wgmma kernel's dilated tiles)",
     make_problem(3, 12, 6, 7, 20, 5, 5, 8, 8, 1, 1, 4, 4), true},
    {"ASPP d36 NHWC", make_problem(1, 16, 33, 33, 24, 3, 3, 36, 36, 1, 1, 36, 36, 1, convred::layout::nhwc), false},
    {"stride 2, d6 pad 6 on 5x5 (an 18-pixel 1x1)", make_problem(2, 8, 5, 5, 17, 3, 3, 6, 6, 2, 2, 6, 6), true},
    {"stride 2 on 1-row images: 3x3 -> 1x3", make_problem(4, 16, 1, 32, 40, 3, 3, 1, 1, 2, 2), true},
    {"5x5 stride 2 on 2-row images (cut on one side: 2x5)", make_problem(2, 16, 2, 64, 40, 5, 5, 2, 2, 2, 2), true},
    {"rows only at stride 2: d21 pad 21 x d1 pad 1", make_problem(2, 8, 20, 24, 36, 3, 3, 21, 1, 2, 2, 21, 1), true},
};
/// the sanitizer case's problem
const conv2d_problem sanitizer_problem = make_problem(2, 4, 9, 11, 10, 3, 3, 12, 12, 1, 1, 12, 12);

/// The plan of the GPU checks (over pruned_setup's families) and the default planner's on `dev`: the same
/// choice.
template <class Math>
void check_list_choice(const conv2d_problem& p, const device_info& dev) {
  const setup_plan_t<pruned_setup, float, Math> mine(p, dev, pruned_setup::options());
  const conv2d_reduce_plan<float, Math> def(p, dev, pruned_setup::options());
  CAPTURE(def.description());
  CHECK(def.state() == status::success);
  check_same_choice(def, mine);
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("pruned family: the live-tap range against a brute-force count over small geometries") {
  std::size_t checked = 0;
  for (std::int64_t in = 1; in <= 9; ++in)
    for (std::int64_t k = 1; k <= 7; ++k)
      for (std::int64_t pad = 0; pad <= 12; ++pad)
        for (std::int64_t stride = 1; stride <= 4; ++stride)
          for (std::int64_t dil = 1; dil <= 13; ++dil) {
            const std::int64_t out = conv2d_problem::out_size(in, pad, dil, k, stride);
            if (out < 1) continue;
            const auto t = fam::live_taps::of(in, out, pad, stride, dil, k);
            std::int64_t lo = k, hi = -1;
            for (std::int64_t r = 0; r < k; ++r)
              for (std::int64_t o = 0; o < out; ++o) {
                const std::int64_t row = o * stride - pad + r * dil;
                if (row >= 0 && row < in) lo = std::min(lo, r), hi = std::max(hi, r);
              }
            INFO("in " << in << " k " << k << " pad " << pad << " stride " << stride << " dil " << dil);
            if (hi < 0) {
              if (stride == 1) CHECK(t.count() == 0);  // no tap reads the image (a dilation stepping over it)
            } else {
              CHECK(t.first <= lo);  // every live tap kept
              CHECK(t.last >= hi);
              if (stride == 1) CHECK((t.first == lo && t.last == hi));  // exact at stride 1
            }
            // the taps are dropped symmetrically at stride 1: the sub-problem keeps the output size
            if (stride == 1 && t.count() > 0) {
              const std::int64_t pad2 = pad - t.first * dil;
              CHECK(conv2d_problem::out_size(in, pad2, dil, t.count(), 1) == out);
            }
            ++checked;
          }
  CHECK(checked > 10000);
}

TEST_CASE("pruned family: which layers run as the smaller filter, and the plan says so") {
  for (const pruned_case& c : cases) {
    INFO(c.name);
    conv2d_reduce_plan<float, math::tf32> plan(c.p, h200, served());
    CAPTURE(plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(has(plan.description(), "taps reading only padding pruned") == c.wgmma);
  }
  // the time model (default options): the ASPP layer still pruned; on the 7x7 over 3x3 images the mma.sync
  // kernel on the whole filter is estimated faster than the 5x5 on the wgmma kernel (its launch cost)
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(cases[0].p, h200).description(), "taps reading only padding pruned"));
  CHECK(conv2d_reduce_plan<float, math::tf32>(cases[3].p, h200).kernel() == kernel_kind::mma_sync);
  conv2d_reduce_plan<float, math::tf32> aspp(cases[0].p, h200);
  CHECK(aspp.kernel() == kernel_kind::wgmma);
  CHECK(has(aspp.description(), "taps reading only padding pruned (3x3 -> 1x1 filter, padding 36x36 -> 0x0"));
  {  // the prepared bytes: the kept taps (K x C x 1 x 1 floats, rounded to 16), then the 1x1's packed filter
    using one_t =
        conv2d_reduce_plan<float, math::tf32, fam::family_list<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>>;
    const std::size_t kept = static_cast<std::size_t>(cases[0].p.K * cases[0].p.C) * 4;
    CHECK(aspp.prepared_bytes() ==
          (kept + 15) / 16 * 16 + one_t(pruned_t::sub_problem(cases[0].p), h200).prepared_bytes());
  }
  const conv2d_problem rows = pruned_t::sub_problem(cases[2].p);
  CHECK((rows.R == 1 && rows.S == 3 && rows.pad_h == 0 && rows.pad_w == 1 && rows.dil_h == 1 && rows.dil_w == 1));
  const conv2d_problem big = pruned_t::sub_problem(cases[3].p);
  CHECK((big.R == 5 && big.S == 5 && big.pad_h == 2 && big.pad_w == 2));
  CHECK(conv2d_reduce_plan<float, math::accurate>(cases[0].p, h200).kernel() == kernel_kind::wgmma);
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(cases[0].p, h200).description(), "pruned (3x3 -> 1x1"));
  // not served: every tap live somewhere (d24 on 33: the off-centre taps reach 9 rows), exact math, depthwise,
  // groups, no sm_90a code
  const conv2d_problem d24 = make_problem(2, 16, 33, 33, 40, 3, 3, 24, 24, 1, 1, 24, 24);
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(d24, h200).description(), "pruned"));
  CHECK(conv2d_reduce_plan<float, math::ieee>(cases[0].p, h200).kernel() == kernel_kind::simt);
  const conv2d_problem dw = make_problem(2, 16, 33, 33, 16, 3, 3, 36, 36, 1, 1, 36, 36, 16);
  CHECK(conv2d_reduce_plan<float, math::tf32>(dw, h200).kernel() == kernel_kind::direct);
  const conv2d_problem g2 = make_problem(2, 64, 33, 33, 64, 3, 3, 36, 36, 1, 1, 36, 36, 2);
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(g2, h200).description(), "pruned"));
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(cases[0].p, device_info{9, 0, false, 132}).description(),
                  "pruned"));
  // the reasons
  CHECK(std::string(pruned_t::can_implement(d24, h200, {})) == "no tap reads only padding for every output");
  CHECK(pruned_t::can_implement(cases[0].p, h200, {}) == nullptr);
}

TEST_CASE("pruned family: the GPU checks' family list makes the default planner's choice") {
  // every problem and math of the GPU checks, on an H200 and on a GPU without sm_90a code (mma.sync)
  for (const device_info& dev : {h200, device_info{8, 0, false, 108}}) {
    CAPTURE(dev.cc_major);
    for (const pruned_case& c : cases) {
      INFO(c.name);
      check_list_choice<math::tf32>(c.p, dev);
      check_list_choice<math::bf16>(c.p, dev);
      check_list_choice<math::accurate>(c.p, dev);
    }
    check_list_choice<math::tf32>(sanitizer_problem, dev);
  }
}
}

TEST_SUITE("gpu") {
// Which ops under which math. The pruned family's own code depends on the op only through adapter_checks
// (an index op may take indices, another may not); on the math not at all (prepare copies the kept taps,
// launch hands the inner family the sub-problem, its workspace and the caller's op and epilogue as they
// are). What the math changes is the inner family's configuration of the sub-problem (flat tiles over a
// packed x, row tiles, x gathered, channel passes), whose prepared bytes and scratch the pruned family lays
// out: so every math runs every case, each with an index op (argmin or argmax: the index and value of the
// extreme channel) and a value op (sum, mean, min or max), and each of the six ops runs under some math.
// Every op under every math (the reductions and epilogues themselves) is the wgmma kernel's test
// (test_conv2d_reduce_wgmma_gpu.cu); here each op and math compiled adds up to six wgmma kernels.
TEST_CASE("pruned family: every op and each of tf32, bf16 and math::accurate against float64") {
  require_gpu();
  std::uint64_t seed = 9300;
  for (const pruned_case& c : cases) {
#ifdef CONVRED_TEST_EXPECT_WGMMA
    CHECK(has(conv2d_reduce_plan<float, math::tf32>(c.p, served()).description(), "taps reading only padding pruned") ==
          c.wgmma);
#endif
    adapter_some_ops<pruned_setup, math::tf32, op::argmin, op::sum>(c.name, c.p, ++seed);
    adapter_some_ops<pruned_setup, math::bf16, op::mean, op::argmax>(c.name, c.p, ++seed);
    adapter_some_ops<pruned_setup, math::accurate, op::min, op::argmin, op::max>(c.name, c.p, ++seed);
  }
}

TEST_CASE("pruned family: a non-finite weight on a dropped tap makes its channel NaN everywhere, as PyTorch") {
  require_gpu();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const conv2d_problem p = cases[0].p;  // 3x3 d36 on 33x33: only the centre tap (1, 1) is kept
  using entry = adapter_plan_entry<pruned_setup, math::tf32>;
  auto tap = [&](std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t s) {
    return static_cast<std::size_t>(((k * p.C + c) * p.R + r) * p.S + s);
  };
  std::uint64_t seed = 9400;
  for (int variant = 0; variant < 3; ++variant) {
    host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
    std::string label;
    if (variant == 0) d.w[tap(3, 0, 0, 0)] = static_cast<float>(inf), label = "+inf at (k 3, corner tap)";
    if (variant == 1) d.w[tap(7, 5, 2, 1)] = static_cast<float>(nan), label = "NaN at (k 7, bottom tap)";
    if (variant == 2) {  // -inf on a dropped tap of the last channel, +inf on a kept tap of another
      d.w[tap(p.K - 1, p.C - 1, 1, 2)] = static_cast<float>(-inf), d.w[tap(11, 2, 1, 1)] = static_cast<float>(inf);
      label = "-inf dropped (k K-1), +inf kept (k 11)";
    }
    opts o;
    o.exact = true, o.nan_expected = true;
    // argmax (exact): at every pixel the value NaN and the index of the first NaN channel, the one with
    // the non-finite weight (or channel 11 where its kept +inf meets a zero of x): its channel NaN
    // everywhere. What the pruned family does here (prepare makes that channel's kept taps NaN) does not
    // depend on the op; how min, argmin, max and sum reduce NaN is the wgmma kernel's test
    // (check_nonfinite in test_conv2d_reduce_wgmma_gpu.cu); each further op would compile six more wgmma
    // kernels here.
    check_fused<entry>(label + " argmax", p, d, op::argmax{}, epi::identity{}, epi::identity{}, o);
  }
}

TEST_CASE("pruned family: the plan equals the wgmma family's plan on the 1x1 of the centre weights, bitwise") {
  require_gpu();
  if (!convred::device::detail::wgmma_available()) return;  // (a GPU without the wgmma kernel: nothing to compare)
  const conv2d_problem p = cases[0].p;
  conv2d_problem s = p;
  s.R = s.S = 1, s.pad_h = s.pad_w = 0, s.dil_h = s.dil_w = 1;
  const auto d = make_data<float>(p, 95, data_kind::real);
  std::vector<float> wc(static_cast<std::size_t>(s.w_elements()));
  for (std::int64_t k = 0; k < p.K; ++k)
    for (std::int64_t c = 0; c < p.C; ++c)
      wc[static_cast<std::size_t>(k * p.C + c)] = d.w[static_cast<std::size_t>(((k * p.C + c) * 3 + 1) * 3 + 1)];
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto dwc = test::to_device(wc);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y(ny), y1(ny);
  thrust::device_vector<std::int64_t> idx(ny), idx1(ny);
  test::poison(y), test::poison(y1), test::poison(idx), test::poison(idx1);
  const epi::scale<float> two{2.0f};
  setup_plan_t<pruned_setup, float, math::tf32> plan(p, pruned_setup::options());
  check_default_choice(plan);
  REQUIRE(has(plan.description(), "pruned"));
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::argmin{}, two) == status::success);
  // (the wgmma family as the pruned family runs it: as an adapter's inner family, with the same options)
  conv2d_reduce_plan<float, math::tf32, fam::family_list<fam::wgmma<float, math::tf32, fam::wgmma_role::adapter>>> one(
      s, pruned_setup::options());
  REQUIRE(one.state() == status::success);
  REQUIRE(one.prepare(craw(dwc)) == status::success);
  REQUIRE(one.run(craw(dx), craw(db), raw(y1), raw(idx1), op::argmin{}, two) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(bytes_equal(test::to_host(y), test::to_host(y1)));
  CHECK(test::to_host(idx) == test::to_host(idx1));
  CHECK(test::count_nan(test::to_host(y)) == 0);
}

TEST_CASE("pruned family: bind with a separate scratch gives prepare's results; the prepared bytes are read only") {
  require_gpu();
  check_bind_with_scratch<pruned_setup>(cases[1].p, 96);
}

TEST_CASE("pruned family sanitizer: a small layer whose off-centre taps read only padding, through the plan") {
  require_gpu();
  adapter_sanitizer_case<pruned_setup>("pruned sanitizer", sanitizer_problem, 97);
}
}
