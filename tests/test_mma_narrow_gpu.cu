// The narrow tensor-core family (device/family/mma_narrow.cuh): the mma.sync kernel in 128-pixel x 32-channel
// tiles for layers of at most 32 output channels per group under TF32, bf16 and fp16. Host: where the planner
// takes it (an H200's and an A100's description), why it is passed over (3xTF32, math::ieee, K/groups 33, the
// wgmma kernel estimated faster, an unknown SM count, a forced wgmma choice, no tensor cores), its
// description. GPU (sm_80+): through a plan over the family alone (its estimate not weighed: the tests' small
// problems), every op against float64 under TF32 and bf16 (one fp16 case) with the tensor-core maths'
// tolerances, for K 1 to 32, C 1 to 130, groups 1 to 32, strides 1 to 3, dilation 2, NHWC, the split path and
// the fused kernel (each path checked on its plan); 16-bit data, and a case for compute-sanitizer.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <cmath>
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

const device_info h200{9, 0, true, 132}, a100{8, 0, false, 108}, turing{7, 5, false, 40};
constexpr const char* family_tag = "(the narrow tensor-core family)";

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// The narrow tensor-core family wherever K/groups <= 32 on sm_80+, its estimate not weighed (the GPU checks'
/// small problems). Only under TF32, bf16 and fp16 (its launch compiles no kernel under 3xTF32 or math::ieee).
template <class T, class Math>
struct any_narrow : fam::mma_narrow<T, Math> {
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const plan_options&) {
    if (!fam::mma_narrow<T, Math>::available(dev)) return "mma.sync needs sm_80 or newer";
    return p.K_per_group() <= fam::mma_narrow<T, Math>::policy::block_n ? nullptr : "K/groups > 32";
  }
};

/// A plan over any_narrow alone for T's data under Math (on the current device: narrow_entry's).
template <class T, class Math>
using narrow_plan = conv2d_reduce_plan<T, Math, fam::family_list<any_narrow<T, Math>>>;

/// check_fused's tag: narrow_plan<T, Math> on the current device, run with guard bytes after its workspace
/// (run_guarded); Math's tensor-core tolerances.
template <class Math>
struct narrow_entry {
  using math = Math;             ///< the kernel's math (tolerances)
  using self_launching = void;  ///< check_fused calls launch
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    narrow_plan<T, Math> plan(p);
    INFO("plan: " << plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(has(plan.description(), family_tag));
    return run_guarded(plan, x, w, bias, y, indices, op, epi);
  }
};

using narrow_case = named_problem;
using convred::layout;
// make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, layout)
const narrow_case cases[] = {
    {"K 1, C 33, 3x3 pad 1", make_problem(2, 33, 11, 13, 1, 3, 3, 1, 1)},
    {"K 3, C 130, 1x1", make_problem(3, 130, 9, 10, 3, 1, 1)},
    {"K 7, C 3, 5x5 stride 2 pad 2", make_problem(2, 3, 19, 17, 7, 5, 5, 2, 2, 2, 2)},
    {"K 16, C 33, 3x3 dilation 2 pad 2 stride 3", make_problem(1, 33, 20, 23, 16, 3, 3, 2, 2, 3, 3, 2, 2)},
    {"K 31, C 3, 3x3 pad 1 (3 pixel tiles, fused)", make_problem(2, 3, 13, 11, 31, 3, 3, 1, 1)},
    {"K 32, C 130, 3x3 pad 1, NHWC", make_problem(2, 130, 9, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc)},
    {"K 1, C 1, 7x1 pad 3x0", make_problem(3, 1, 16, 9, 1, 7, 1, 3, 0)},
    {"groups 2, C 66, K 12 (2 pixel tiles, split)", make_problem(2, 66, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
    {"groups 4, C 132, K 128 (32 per group), NHWC",
     make_problem(2, 132, 8, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 4, layout::nhwc)},
    {"groups 32, C 64, K 96 (2 -> 3 per group), stride 2", make_problem(1, 64, 9, 9, 96, 3, 3, 1, 1, 2, 2, 1, 1, 32)},
    {"batch 1, 5x6, C 130, K 9 (1 pixel tile, split)", make_problem(1, 130, 5, 6, 9, 3, 3, 1, 1)},
    {"K 16, C 33, 3x3 pad 1, NHWC", make_problem(2, 33, 11, 13, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc)},
};
/// 80 pixel tiles, GEMM_K 297: the fused kernel on up to 160 SMs (a split needs fewer pixel tiles than half the
/// SMs), where cases[7] and cases[10] split (GEMM_K 297 and 1,170 in 10 and 37 ranges on 46 to 170 SMs)
const narrow_case many_tiles{"N 4, C 33, 40x64, K 32 (80 pixel tiles, fused)",
                             make_problem(4, 33, 40, 64, 32, 3, 3, 1, 1)};

/// The case reaches its path: narrow_plan<T, Math> for p on the current device runs the split path (`split`)
/// or the fused kernel (k_splits() 0, no GEMM_K splits in its description).
template <class T, class Math>
void check_path(const conv2d_problem& p, bool split) {
  check_split_path<narrow_plan<T, Math>>(p, split);
}

/// One op through narrow_entry<Math> against float64 on the data d (scale 2; max and argmax -0.5).
template <class Math, class Op>
void op_check(const std::string& label, const conv2d_problem& p, const host_data<float>& d, Op o) {
  constexpr bool negative = std::is_same_v<Op, op::max> || std::is_same_v<Op, op::argmax>;
  opts opt;
  opt.gain = negative ? 0.5 : 2;
  const epi::scale<float> s{negative ? -0.5f : 2.0f};
  check_fused<narrow_entry<Math>>(label + " " + math_name<Math>() + " " + test::op_name<Op>(), p, d, o, s, s, opt);
}

/// Every op through narrow_entry<Math> against float64 on real data from `seed`.
template <class Math>
void all_ops(const std::string& label, const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  op_check<Math>(label, p, d, op::min{}), op_check<Math>(label, p, d, op::argmin{});
  op_check<Math>(label, p, d, op::max{}), op_check<Math>(label, p, d, op::argmax{});
  op_check<Math>(label, p, d, op::sum{}), op_check<Math>(label, p, d, op::mean{});
}

/// __half x, w, b under fp16 (argmin and sum) and bf16 ones under bf16 (argmax) against float64 (scale 2), on
/// the path `split` says (check_path).
void sixteen_bit(const std::string& label, const conv2d_problem& p, bool split, std::uint64_t seed) {
  check_path<__half, math::fp16>(p, split);
  check_path<__nv_bfloat16, math::bf16>(p, split);
  opts o;
  o.gain = 2;
  const epi::scale<float> s{2.0f};
  const auto dh = make_data<__half>(p, seed, data_kind::real);
  check_fused<narrow_entry<math::fp16>>("half fp16 argmin " + label, p, dh, op::argmin{}, s, s, o);
  check_fused<narrow_entry<math::fp16>>("half fp16 sum " + label, p, dh, op::sum{}, s, s, o);
  const auto db = make_data<__nv_bfloat16>(p, seed + 1, data_kind::real);
  check_fused<narrow_entry<math::bf16>>("bf16 bf16 argmax " + label, p, db, op::argmax{}, s, s, o);
}

/// require_gpu, then whether the device runs mma.sync (sm_80+); says so where it does not.
bool tensor_cores() {
  require_gpu();
  if (device_info::current().cc_major >= 8) return true;
  MESSAGE("skipped: the narrow tensor-core family needs sm_80 or newer");
  return false;
}

// --- host: the default planner -----------------------------------------------------------------------

/// Layers the default planner gives the family under TF32, bf16 and fp16 on both descriptions.
const narrow_case taken[] = {
    {"pointwise on 1x1 images: N 32, C 96, K 4", make_problem(32, 96, 1, 1, 4, 1, 1)},
    {"N 1, C 192, 75x75, K 32, 1x1", make_problem(1, 192, 75, 75, 32, 1, 1)},
    {"N 32, C 256, 7x9, K 4, 3x3 pad 1 (16 pixel tiles: split)", make_problem(32, 256, 7, 9, 4, 3, 3, 1, 1)},
    {"a stem: N 32, C 3, 320x448, K 16, 3x3 stride 2 pad 1", make_problem(32, 3, 320, 448, 16, 3, 3, 1, 1, 2, 2)},
    {"N 32, C 1512, 14x14, K 1512, 3x3 stride 2 pad 1, groups 63 (K/groups 24)",
     make_problem(32, 1512, 14, 14, 1512, 3, 3, 1, 1, 2, 2, 1, 1, 63)},
};

/// The default planner's plan for p on dev under Math (T's data) is the family's: the mma.sync kernel, its
/// description ("<start> ... (128-pixel x 32-channel tiles...): K/groups <= 32 (the narrow tensor-core
/// family)"), its configure's splits, workspace and estimate, below the tensor-core families'.
template <class T, class Math>
void check_taken(const conv2d_problem& p, const device_info& dev, const char* start) {
  using F = fam::mma_narrow<T, Math>;
  const conv2d_reduce_plan<T, Math> plan(p, dev);
  CAPTURE(plan.description());
  REQUIRE(plan.state() == status::success);
  CHECK(plan.kernel() == kernel_kind::mma_sync);
  CHECK(plan.description().rfind(start, 0) == 0);
  CHECK(has(plan.description(), "128-pixel x 32-channel tiles"));
  CHECK(has(plan.description(), ": K/groups <= 32 (the narrow tensor-core family)"));
  CHECK(F::can_implement(p, dev, {}) == nullptr);
  const convred::device::plan_config c = F::configure(p, dev, {});
  CHECK(plan.k_splits() == c.splits);
  CHECK(has(plan.description(), "GEMM_K splits") == (c.splits > 0));
  CHECK(plan.workspace_bytes() ==
        (c.splits > 0 ? convred::device::conv2d_reduce_split_workspace_bytes<T>(p, c.splits) : std::size_t(0)));
  CHECK(plan.config().seconds == c.seconds);
  CHECK(F::rival_seconds(p, dev) == c.seconds);
  CHECK(c.seconds < fam::direct<T, Math>::tensor_seconds(p, dev));
}

/// The default planner does not take the family for p on dev under Math, whatever it takes instead.
template <class Math>
void check_not_taken(const conv2d_problem& p, const device_info& dev, const plan_options& o = {}) {
  const std::string d = conv2d_reduce_plan<float, Math>(p, dev, o).description();
  CAPTURE(d);
  CHECK_FALSE(has(d, family_tag));
  CHECK_FALSE((has(d, "mma.sync") && has(d, "32-channel tiles")));
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("narrow mma.sync family: where the planner takes it (TF32, bf16, fp16; H200 and A100)") {
  CHECK(fam::mma_narrow<float, math::tf32>::kind == kernel_kind::mma_sync);
  CHECK(std::string(fam::mma_narrow<float, math::tf32>::name) == "narrow mma.sync");
  for (const device_info& dev : {h200, a100})
    for (const narrow_case& c : taken) {
      CAPTURE(c.name);
      CAPTURE(dev.sm_count);
      check_taken<float, math::tf32>(c.p, dev, "mma.sync tf32");
      check_taken<float, math::bf16>(c.p, dev, "mma.sync bf16");
    }
  // fp16, and 16-bit data
  for (const narrow_case& c : {taken[0], taken[2]}) {
    CAPTURE(c.name);
    check_taken<float, math::fp16>(c.p, h200, "mma.sync fp16");
    check_taken<__half, math::fp16>(c.p, h200, "mma.sync fp16");
    check_taken<__nv_bfloat16, math::bf16>(c.p, h200, "mma.sync bf16");
  }
  // fused on few pixels (32), split on 16 pixel tiles (15 GEMM_K ranges on 132 SMs, 12 on 108), the 63 groups'
  // channel tiles split once (13 pixel tiles)
  CHECK(conv2d_reduce_plan<float, math::tf32>(taken[0].p, h200).k_splits() == 0);
  CHECK(conv2d_reduce_plan<float, math::tf32>(taken[2].p, h200).k_splits() == 15);
  CHECK(conv2d_reduce_plan<float, math::tf32>(taken[2].p, a100).k_splits() == 12);
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(taken[4].p, h200).description(),
            "split 63 channel tiles x 1 GEMM_K splits"));
  // the stem under TF32: the direct family now weighs itself against this family too (rival_seconds) and
  // yields; under 3xTF32 (no narrow tensor-core family) it keeps the layer
  const conv2d_problem& stem = taken[3].p;
  for (const device_info& dev : {h200, a100}) {
    CAPTURE(dev.sm_count);
    CHECK(fam::direct<float, math::tf32>::configure(stem, dev, {}).seconds <
          fam::direct<float, math::tf32>::tensor_seconds(stem, dev));
    CHECK(std::string(fam::direct<float, math::tf32>::can_implement(stem, dev, {})) ==
          "a dense convolution of C <= 16: estimated slower than the tensor-core kernels");
    CHECK(conv2d_reduce_plan<float, math::accurate>(stem, dev).kernel() == kernel_kind::direct);
  }
}

TEST_CASE("narrow mma.sync family: where it is passed over, and why") {
  using tf32_family = fam::mma_narrow<float, math::tf32>;
  plan_options forced;
  forced.splits = 2;
  for (const device_info& dev : {h200, a100})
    for (const narrow_case& c : taken) {
      const conv2d_problem& p = c.p;
      CAPTURE(c.name);
      CAPTURE(dev.sm_count);
      // not under 3xTF32 (the exact narrow family takes its narrow layers) nor math::ieee
      check_not_taken<math::accurate>(p, dev);
      check_not_taken<math::ieee>(p, dev);
      const std::string not_math = "not a TF32, bf16 or fp16 math (3xTF32's narrow layers: the exact narrow family)";
      CHECK(std::string(fam::mma_narrow<float, math::accurate>::can_implement(p, dev, {})) == not_math);
      CHECK(std::string(fam::mma_narrow<float, math::tf32x3>::can_implement(p, dev, {})) == not_math);
      CHECK(std::string(fam::mma_narrow<float, math::ieee>::can_implement(p, dev, {})) == not_math);
      CHECK(std::isinf(fam::mma_narrow<float, math::accurate>::rival_seconds(p, dev)));
      // a forced wgmma choice (plan_options::splits)
      for (int s : {-1, 2}) {
        forced.splits = s;
        CHECK(std::string(tf32_family::can_implement(p, dev, forced)) ==
              "a wgmma choice is forced (plan_options::splits)");
        check_not_taken<math::tf32>(p, dev, forced);
      }
      // an unknown SM count: its estimate is per SM
      const device_info unknown{dev.cc_major, dev.cc_minor, dev.wgmma_image, 0};
      CHECK(std::string(tf32_family::can_implement(p, unknown, {})) == "an unknown SM count (its estimate is per SM)");
      CHECK(std::isinf(tf32_family::rival_seconds(p, unknown)));
      check_not_taken<math::tf32>(p, unknown);
      check_not_taken<math::bf16>(p, unknown);
      // no tensor cores
      CHECK(std::string(tf32_family::can_implement(p, turing, {})) == "mma.sync needs sm_80 or newer");
      CHECK(std::isinf(tf32_family::rival_seconds(p, turing)));
    }
  // more than 32 output channels per group (dense, and 2 groups of 33)
  for (const conv2d_problem& p : {make_problem(32, 96, 1, 1, 33, 1, 1), make_problem(32, 256, 7, 9, 33, 3, 3, 1, 1),
                                  make_problem(32, 256, 7, 9, 66, 3, 3, 1, 1, 1, 1, 1, 1, 2)})
    for (const device_info& dev : {h200, a100}) {
      CAPTURE(describe(p));
      CAPTURE(dev.sm_count);
      CHECK(std::string(tf32_family::can_implement(p, dev, {})) == "K/groups > 32");
      CHECK(std::string(fam::mma_narrow<float, math::bf16>::can_implement(p, dev, {})) == "K/groups > 32");
      CHECK(std::isinf(tf32_family::rival_seconds(p, dev)));
      check_not_taken<math::tf32>(p, dev);
      check_not_taken<math::bf16>(p, dev);
    }
  // estimated slower than the wgmma kernel on the H200 (a 3x3 layer of 361 pixel tiles); an A100, without
  // it, takes the family
  const conv2d_problem k16 = make_problem(32, 512, 38, 38, 16, 3, 3, 1, 1);
  const char* slower = tf32_family::can_implement(k16, h200, {});
  REQUIRE(slower != nullptr);
  CHECK(std::string(slower) == "estimated slower than the tensor-core kernels' 128-channel tiles");
  CHECK(tf32_family::configure(k16, h200, {}).seconds >= fam::direct<float, math::tf32>::tensor_seconds(k16, h200));
  CHECK(conv2d_reduce_plan<float, math::tf32>(k16, h200).kernel() == kernel_kind::wgmma);
  check_not_taken<math::tf32>(k16, h200);
  check_taken<float, math::tf32>(k16, a100, "mma.sync tf32");
  // a narrow layer whose off-centre taps read only padding (dilation 12 on 5 x 8): family::pruned, after it in
  // the list, runs the 1x1 of the centre tap on the wgmma kernel, estimated faster in TF32 (it weighs pruned
  // and dilated where they serve)
  const conv2d_problem centre = make_problem(1, 4, 5, 8, 16, 3, 3, 12, 12, 1, 1, 12, 12);
  const conv2d_reduce_plan<float, math::tf32> pr(centre, h200);
  CAPTURE(pr.description());
  CHECK(has(pr.description(), "taps reading only padding pruned"));
  CHECK(std::string(tf32_family::can_implement(centre, h200, {})) ==
        "estimated slower than the tensor-core kernels' 128-channel tiles");
}
}

TEST_SUITE("gpu") {
TEST_CASE("narrow mma.sync family: every op against float64 (tf32, bf16; one fp16 case)") {
  if (!tensor_cores()) return;
  check_path<float, math::tf32>(cases[7].p, true);
  check_path<float, math::tf32>(cases[10].p, true);
  check_path<float, math::bf16>(cases[10].p, true);
  check_path<float, math::tf32>(many_tiles.p, false);
  check_path<float, math::bf16>(many_tiles.p, false);
  std::uint64_t seed = 13100;
  for (const narrow_case& c : cases) {
    all_ops<math::tf32>(c.name, c.p, ++seed);
    all_ops<math::bf16>(c.name, c.p, ++seed);
  }
  all_ops<math::tf32>(many_tiles.name, many_tiles.p, ++seed);
  all_ops<math::bf16>(many_tiles.name, many_tiles.p, ++seed);
  // fp16 on float data (x, w rounded to fp16 on chip)
  const auto d = make_data<float>(cases[3].p, ++seed, data_kind::real);
  op_check<math::fp16>(cases[3].name, cases[3].p, d, op::argmin{});
  op_check<math::fp16>(cases[3].name, cases[3].p, d, op::mean{});
}

TEST_CASE("narrow mma.sync family: 16-bit data (half under fp16, bf16 under bf16), split and fused") {
  if (!tensor_cores()) return;
  sixteen_bit(cases[10].name, cases[10].p, true, 13201);
  sixteen_bit(many_tiles.name, many_tiles.p, false, 13203);
}

TEST_CASE("narrow mma.sync sanitizer: the split path and the fused kernel through the plan (tf32 argmin)") {
  if (!tensor_cores()) return;
  // cases[7] splits (2 pixel tiles, 10 GEMM_K ranges), cases[4] runs fused (3 pixel tiles, GEMM_K 27): each
  // path checked on the plan first
  const struct {
    narrow_case c;
    bool split;
  } runs[] = {{cases[7], true}, {cases[4], false}};
  for (const auto& [c, split] : runs) {
    check_path<float, math::tf32>(c.p, split);
    const auto d = make_data<float>(c.p, 13300, data_kind::real);
    opts o;
    o.gain = 2;
    const epi::scale<float> s{2.0f};
    check_fused<narrow_entry<math::tf32>>(std::string("narrow mma.sync sanitizer ") + c.name, c.p, d, op::argmin{}, s,
                                          s, o);
  }
}
}
