// The tiny family (device/family/tiny.cuh): problems of at most 512 im2col values (N*P*Q x GEMM_K) run by one
// exact-FMA kernel sized for them (and a one-block combine where the channels span several blocks). Host: which
// problems it serves, its pixel lanes, blocks and scratch, what the plan says. GPU: every op against float64
// under every math for 1x1 images (one block; many blocks and the combine; 32 pixels), 2x2 and 5x5 images with
// padding, stride and dilation, NHWC, 16-bit data; integer data with ties, +-inf and NaN in x, w
// and b (exact: indices and values equal float64's); repeated runs bitwise equal; bind with a separate
// scratch; a case for compute-sanitizer. The GPU checks' plans choose from the tiny family alone (tiny_setup:
// only its kernels are compiled), each checked to be the default planner's choice.
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

using tiny_t = fam::tiny<float, math::tf32>;

/// adapter_family_check.cuh's setup: default options; the plan must be the tiny family's.
struct tiny_setup {
  static convred::device::plan_options options() { return {}; }  ///< the planner's choice
  static void check_plan(const std::string& d) { CHECK(has(d, "tiny (exact")); }
  static constexpr bool with_mean = true;  ///< op::mean checked too
  /// The plans choose from the tiny family alone: every GPU check here requires the tiny family's plan
  /// (check_plan), and the default planner makes the same choice (check_default_choice; the host test
  /// "... the GPU checks' family list makes the default planner's choice" for every problem and math
  /// below). A run of a default-list plan would compile the launch of all nine default families for each
  /// op and math (the direct family's many kernel variants, wgmma, mma.sync, SIMT); the tiny family's
  /// kernels take neither the math nor a fallback family (the SIMT kernel it calls for an op whose state
  /// exceeds 16 bytes is never compiled for the built-in ops), so this list compiles exactly the kernels
  /// the default plan runs here.
  template <class T, class Math>
  using families = fam::family_list<fam::tiny<T, Math>>;
};

struct tiny_case {
  const char* name;
  conv2d_problem p;
};
// make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, layout)
const tiny_case cases[] = {
    {"SE 1x1 on a pooled image, C 48, K 8 (one block)", make_problem(1, 48, 1, 1, 8, 1, 1)},
    {"C 400, K 264 (33 blocks, the combine)", make_problem(1, 400, 1, 1, 264, 1, 1)},
    {"batch 32 of 1x1 images, C 16, K 300 (32 pixels, 38 blocks)", make_problem(32, 16, 1, 1, 300, 1, 1)},
    {"2x2 image, 3x3 pad 1, C 12, K 40 (4 pixel lanes)", make_problem(1, 12, 2, 2, 40, 3, 3, 1, 1)},
    {"3x3 d2 pad 1 on 5x5, C 2, K 33 (9 pixels)", make_problem(1, 2, 5, 5, 33, 3, 3, 1, 1, 1, 1, 2, 2)},
    {"NHWC, 3x3 stride 2 on 4x5, C 12, K 70", make_problem(2, 12, 4, 5, 70, 3, 3, 0, 0, 2, 2, 1, 1, 1, convred::layout::nhwc)},
    {"K 1 (one channel)", make_problem(4, 9, 2, 2, 1, 1, 1)},
    {"C 4, K 2500 (313 blocks: the combine's lanes take two rounds)", make_problem(1, 4, 1, 1, 2500, 1, 1)},
};
/// the 16-bit data's problem (__half, bf16) and the sanitizer case's problems
const conv2d_problem sixteen_bit = make_problem(1, 6, 2, 2, 40, 3, 3, 1, 1);
const conv2d_problem sanitizer_problems[] = {make_problem(1, 9, 1, 1, 5, 1, 1),
                                             make_problem(2, 4, 2, 2, 70, 3, 3, 1, 1)};

/// The plan of the GPU checks (over tiny_setup's families) and the default planner's on `dev`: the same
/// choice, the tiny family's.
template <class T, class Math>
void check_list_choice(const conv2d_problem& p, const device_info& dev) {
  const setup_plan_t<tiny_setup, T, Math> mine(p, dev, tiny_setup::options());
  const conv2d_reduce_plan<T, Math> def(p, dev, tiny_setup::options());
  CAPTURE(def.description());
  check_same_choice(def, mine);
  CHECK(mine.kernel() == kernel_kind::tiny);
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("tiny family: which problems it serves, its shape, and what the plan says") {
  for (const tiny_case& c : cases) {
    INFO(c.name);
    conv2d_reduce_plan<float, math::tf32> plan(c.p, h200);
    CAPTURE(plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::tiny);
    CHECK(has(plan.description(), "tiny (exact fp32 FMA, "));
  }
  const conv2d_problem se = cases[0].p, wide = cases[1].p, batch = cases[2].p;
  CHECK(tiny_t::pixel_lanes(se) == 1);
  CHECK(tiny_t::blocks(se) == 1);
  CHECK(conv2d_reduce_plan<float, math::tf32>(se, h200).workspace_bytes() == 0);  // one block: no combine
  CHECK(tiny_t::blocks(wide) == 33);
  CHECK(conv2d_reduce_plan<float, math::tf32>(wide, h200).workspace_bytes() == 33u * 32u * 16u);
  CHECK(tiny_t::pixel_lanes(cases[3].p) == 4);
  CHECK(tiny_t::pixel_lanes(cases[4].p) == 16);
  CHECK(tiny_t::pixel_lanes(batch) == 32);
  CHECK(tiny_t::blocks(batch) == 38);  // 300 channels, 8 per block
  CHECK(tiny_t::row_stride(se) == 49);  // odd
  CHECK(conv2d_reduce_plan<float, math::tf32>(se, h200).description() ==
        "tiny (exact fp32 FMA, 1 output pixel: its im2col row in shared memory, a warp per output channel, 1 "
        "block): at most 512 im2col values, exact for any math");
  // every tensor-core math and 16-bit data; math::ieee keeps its list (direct, narrow simt, simt)
  CHECK(conv2d_reduce_plan<float, math::accurate>(se, h200).kernel() == kernel_kind::tiny);
  CHECK(conv2d_reduce_plan<float, math::bf16>(se, h200).kernel() == kernel_kind::tiny);
  CHECK(conv2d_reduce_plan<__half, math::fp16>(se, h200).kernel() == kernel_kind::tiny);
  CHECK(conv2d_reduce_plan<float, math::ieee>(se, h200).kernel() == kernel_kind::simt);
  // not served: 33 pixels, groups (depthwise: the direct family; grouped: mma.sync), more than 512 im2col values,
  // forced wgmma options
  conv2d_problem px33 = make_problem(33, 16, 1, 1, 24, 1, 1);
  CHECK(conv2d_reduce_plan<float, math::tf32>(px33, h200).kernel() != kernel_kind::tiny);
  CHECK(std::string(tiny_t::can_implement(px33, h200, {})) == "more than 32 output pixels");
  CHECK(conv2d_reduce_plan<float, math::tf32>(make_problem(1, 64, 2, 2, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64), h200).kernel() ==
        kernel_kind::direct);
  CHECK(conv2d_reduce_plan<float, math::tf32>(make_problem(1, 64, 2, 2, 64, 1, 1, 0, 0, 1, 1, 1, 1, 2), h200).kernel() !=
        kernel_kind::tiny);
  const conv2d_problem big = make_problem(1, 513, 1, 1, 64, 1, 1), edge = make_problem(2, 256, 1, 1, 64, 1, 1);
  CHECK(std::string(tiny_t::can_implement(big, h200, {})) ==
        "more than 512 im2col values (N*P*Q x GEMM_K): the tiled kernels are faster there");
  CHECK(conv2d_reduce_plan<float, math::tf32>(big, h200).kernel() == kernel_kind::mma_sync);
  CHECK(tiny_t::can_implement(edge, h200, {}) == nullptr);  // exactly 512
  convred::device::plan_options forced;
  forced.splits = 2;
  CHECK(tiny_t::can_implement(se, h200, forced) != nullptr);
}

TEST_CASE("tiny family: the GPU checks' family list makes the default planner's choice") {
  // every problem and math of the GPU checks, on an H200 and on a GPU without sm_90a code
  for (const device_info& dev : {h200, device_info{8, 0, false, 108}}) {
    CAPTURE(dev.cc_major);
    for (const tiny_case& c : cases) {
      INFO(c.name);
      check_list_choice<float, math::tf32>(c.p, dev);
      check_list_choice<float, math::bf16>(c.p, dev);
      check_list_choice<float, math::accurate>(c.p, dev);
    }
    check_list_choice<__half, math::fp16>(sixteen_bit, dev);
    check_list_choice<__nv_bfloat16, math::bf16>(sixteen_bit, dev);
    for (const conv2d_problem& p : sanitizer_problems) check_list_choice<float, math::tf32>(p, dev);
  }
}
}

TEST_SUITE("gpu") {
TEST_CASE("tiny family: every op against float64 under tf32, bf16 and math::accurate") {
  require_gpu();
  std::uint64_t seed = 9500;
  for (const tiny_case& c : cases) {
    adapter_all_ops<tiny_setup, math::tf32>(c.name, c.p, ++seed);
    adapter_all_ops<tiny_setup, math::bf16>(c.name, c.p, ++seed);
    adapter_all_ops<tiny_setup, math::accurate>(c.name, c.p, ++seed);
  }
}

TEST_CASE("tiny family: 16-bit data, ties and non-finite values equal float64 exactly (integer data)") {
  require_gpu();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::uint64_t seed = 9600;
  {  // __half and bf16 x, w, b: exact FMA in fp32 of integers
    const conv2d_problem p = sixteen_bit;
    opts o;
    o.exact = true;
    const auto dh = make_data<__half>(p, ++seed, data_kind::integer);
    check_fused<adapter_plan_entry<tiny_setup, math::fp16>>("half", p, dh, op::argmin{}, epi::identity{}, epi::identity{}, o);
    check_fused<adapter_plan_entry<tiny_setup, math::fp16>>("half", p, dh, op::max{}, epi::identity{}, epi::identity{}, o);
    const auto db = make_data<__nv_bfloat16>(p, ++seed, data_kind::integer);
    check_fused<adapter_plan_entry<tiny_setup, math::bf16>>("bf16", p, db, op::argmax{}, epi::identity{}, epi::identity{}, o);
    check_fused<adapter_plan_entry<tiny_setup, math::bf16>>("bf16", p, db, op::sum{}, epi::identity{}, epi::identity{}, o);
  }
  for (const tiny_case& c : {cases[0], cases[1], cases[4]}) {
    const conv2d_problem p = c.p;
    using entry = adapter_plan_entry<tiny_setup, math::tf32>;
    for (int variant = 0; variant < 4; ++variant) {
      host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
      std::string label = std::string(c.name);
      opts o;
      o.exact = true;
      if (variant == 0) {  // every filter row equal: every channel ties (lowest index wins), then bias ties too
        for (std::int64_t k = 1; k < p.K; ++k)
          for (std::int64_t e = 0; e < p.gemm_k(); ++e)
            d.w[static_cast<std::size_t>(k * p.gemm_k() + e)] = d.w[static_cast<std::size_t>(e)];
        std::fill(d.b.begin(), d.b.end(), 1.0f);
        label += ", all channels tie";
      } else if (variant == 1) {
        d.x[0] = static_cast<float>(inf), d.x[d.x.size() - 1] = static_cast<float>(-inf);
        label += ", +-inf in x", o.nan_expected = true;
      } else if (variant == 2) {
        d.w[static_cast<std::size_t>((p.K / 2) * p.gemm_k())] = static_cast<float>(nan);
        label += ", NaN in w", o.nan_expected = true;
      } else {
        d.b[static_cast<std::size_t>(p.K - 1)] = static_cast<float>(nan), d.b[0] = static_cast<float>(-inf);
        label += ", NaN and -inf in b", o.nan_expected = true;
      }
      check_fused<entry>(label + " min", p, d, op::min{}, epi::identity{}, epi::identity{}, o);
      check_fused<entry>(label + " argmin", p, d, op::argmin{}, epi::identity{}, epi::identity{}, o);
      check_fused<entry>(label + " argmax", p, d, op::argmax{}, epi::identity{}, epi::identity{}, o);
      check_fused<entry>(label + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    }
  }
}

TEST_CASE("tiny family: repeated runs are bitwise equal; bind with a separate scratch gives prepare's results") {
  require_gpu();
  const conv2d_problem p = cases[2].p;  // 38 blocks and the combine
  const auto d = make_data<float>(p, 97, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  setup_plan_t<tiny_setup, float, math::tf32> plan(p);
  check_default_choice(plan);
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  std::vector<float> first;
  std::vector<std::int64_t> first_i;
  for (int rep = 0; rep < 3; ++rep) {
    thrust::device_vector<float> y(ny);
    thrust::device_vector<std::int64_t> idx(ny);
    test::poison(y), test::poison(idx);
    REQUIRE(plan.run(craw(dx), craw(db), raw(y), raw(idx), op::argmin{}) == status::success);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    if (rep == 0) {
      first = test::to_host(y), first_i = test::to_host(idx);
    } else {
      CHECK(bytes_equal(test::to_host(y), first));
      CHECK(test::to_host(idx) == first_i);
    }
  }
  check_bind_with_scratch<tiny_setup>(p, 98);
}

TEST_CASE("tiny family sanitizer: one block, and several blocks with the combine, through the plan") {
  require_gpu();
  for (const conv2d_problem& p : sanitizer_problems) {
    adapter_sanitizer_case<tiny_setup>("tiny sanitizer", p, 99);
    adapter_sanitizer_case<tiny_setup>("tiny sanitizer", p, 99, op::mean{});
  }
}
}
