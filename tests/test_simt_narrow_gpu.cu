// The narrow family (device/family/simt_narrow.cuh): the exact SIMT kernel in 16-channel tiles for layers
// of at most 16 output channels per group, and in 32-channel tiles for 17 to 32. Host: where the planner takes it (3xTF32 and math::ieee, not
// TF32 or the 16-bit maths), why it is passed over, its description. GPU: through a plan over the family
// alone (its estimate not weighed: the tests' small problems), every op against float64 for K 1 to 16, C 1
// to 513, groups 1 to 32, strides 1 to 3, dilation 2, NHWC, the split path; 16-bit data and a case for
// compute-sanitizer on the split path and the fused kernel (each path checked on its plan); its results bitwise
// equal to the default SIMT policy's (the same FMA order over GEMM_K); on sm_80+ the GEMM_K splits that 3xTF32's
// chains force (plan_narrow_accurate_chain) and math::accurate's 1e-6 against float64.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <string>

#include "adapter_family_check.cuh"

using namespace convred_test_fused;
namespace math = convred::math;
namespace fam = convred::device::family;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;
using convred::device::plan_narrow_accurate_chain;

namespace {

const device_info h200{9, 0, true, 132}, turing{7, 5, false, 40};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// The narrow family in BN-channel tiles wherever K/groups <= BN, its estimate not weighed (the GPU checks'
/// small problems).
template <class T, class Math, int BN = 16>
struct any_narrow : fam::simt_narrow<T, Math, BN> {
  static const char* can_implement(const conv2d_problem& p, const device_info& dev, const convred::device::plan_options&) {
    if (!fam::simt_narrow<T, Math, BN>::available(dev)) return "no CUDA device";
    return p.K_per_group() <= BN ? nullptr : "K/groups above the tile";
  }
};

/// A plan over any_narrow alone for T's data under math::accurate (on the current device: narrow_entry's).
template <class T, int BN = 16>
using narrow_plan =
    conv2d_reduce_plan<T, convred::math::accurate, fam::family_list<any_narrow<T, convred::math::accurate, BN>>>;

/// check_fused's tag: narrow_plan in BN-channel tiles on the current device, run with guard bytes after its
/// workspace (run_guarded); exact FMA's tolerances.
template <int BN>
struct narrow_entry_t {
  using math = convred::math::ieee;  ///< the kernel's math (tolerances)
  using self_launching = void;       ///< check_fused calls launch
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    narrow_plan<T, BN> plan(p);
    INFO("plan: " << plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(has(plan.description(), "(the narrow family)"));
    CHECK(has(plan.description(), BN == 16 ? "x 16-channel tiles" : "x 32-channel tiles"));
    return run_guarded(plan, x, w, bias, y, indices, op, epi);
  }
};
using narrow_entry = narrow_entry_t<16>;    ///< 16-channel tiles
using narrow32_entry = narrow_entry_t<32>;  ///< 32-channel tiles

using narrow_case = named_problem;
using convred::layout;
// make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups, layout)
const narrow_case cases[] = {
    {"K 1, C 33, 3x3 pad 1", make_problem(2, 33, 11, 13, 1, 3, 3, 1, 1)},
    {"K 3, C 130, 1x1", make_problem(3, 130, 9, 10, 3, 1, 1)},
    {"K 7, C 7, 5x5 stride 2 pad 2", make_problem(2, 7, 19, 17, 7, 5, 5, 2, 2, 2, 2)},
    {"K 16, C 65, 3x3 dilation 2 pad 2 stride 3", make_problem(1, 65, 20, 23, 16, 3, 3, 2, 2, 3, 3, 2, 2)},
    {"groups 2, C 66, K 12", make_problem(2, 66, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 2)},
    {"groups 4, C 132, K 16, NHWC", make_problem(2, 132, 8, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 4, layout::nhwc)},
    {"groups 32, C 768 (24 per group), K 32 (1 per group)", make_problem(1, 768, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32)},
    {"K 16, C 33, NHWC", make_problem(2, 33, 11, 13, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc)},
    {"batch 1, 5x6, C 513, K 9 (the split path)", make_problem(1, 513, 5, 6, 9, 3, 3, 1, 1)},
    {"N 4, C 64, 40x41, K 16 (52 tiles)", make_problem(4, 64, 40, 41, 16, 3, 3, 1, 1)},
    {"K 5, C 1, 7x1 pad 3x0", make_problem(3, 1, 16, 9, 5, 7, 1, 3, 0)},
    {"K 16, C 512, 3x3 on 12x12 (GEMM_K 4,608)", make_problem(2, 512, 12, 12, 16, 3, 3, 1, 1)},
};
/// 32-channel tiles: K/groups 17 to 32 (RegNet's 24-channel groups among them), odd C and K, strides,
/// dilation, NHWC, the split path (few pixel tiles) and the fused kernel
const narrow_case cases32[] = {
    {"K 17, C 33, 3x3 pad 1", make_problem(2, 33, 11, 13, 17, 3, 3, 1, 1)},
    {"groups 7, C 168, K 168 (24 per group), 3x3 stride 2", make_problem(2, 168, 14, 14, 168, 3, 3, 1, 1, 2, 2, 1, 1, 7)},
    {"K 32, C 65, 3x3 dilation 2 pad 2 stride 3, NHWC",
     make_problem(1, 65, 20, 23, 32, 3, 3, 2, 2, 3, 3, 2, 2, 1, layout::nhwc)},
    {"groups 2, C 66, K 62 (31 per group), 1x1", make_problem(3, 66, 9, 10, 62, 1, 1, 0, 0, 1, 1, 1, 1, 2)},
    {"batch 1, 5x6, C 513, K 20 (the split path)", make_problem(1, 513, 5, 6, 20, 3, 3, 1, 1)},
    {"N 8, C 64, 64x64, K 24 (256 pixel tiles, fused)", make_problem(8, 64, 64, 64, 24, 3, 3, 1, 1)},
};
/// 256 pixel tiles, GEMM_K 576: the fused kernel (a split needs fewer pixel tiles than half the SMs), where the
/// small cases above split
const narrow_case many_tiles{"N 8, C 64, 64x64, K 16 (256 pixel tiles, fused)",
                             make_problem(8, 64, 64, 64, 16, 3, 3, 1, 1)};

/// The case reaches its path: narrow_plan<T, BN> for p on the current device runs the split path (`split`) or
/// the fused kernel (k_splits() 0, no GEMM_K splits in its description).
template <class T, int BN = 16>
void check_path(const conv2d_problem& p, bool split) {
  check_split_path<narrow_plan<T, BN>>(p, split);
}

/// Every op through Entry (narrow_entry or narrow32_entry) against float64 (scale 2; max and argmax -0.5).
template <class Entry = narrow_entry>
void all_ops(const std::string& label, const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  const auto one = [&](auto o) {
    using Op = decltype(o);
    constexpr bool negative = std::is_same_v<Op, op::max> || std::is_same_v<Op, op::argmax>;
    opts opt;
    opt.gain = negative ? 0.5 : 2;
    const epi::scale<float> s{negative ? -0.5f : 2.0f};
    check_fused<Entry>(label + " " + test::op_name<Op>(), p, d, o, s, s, opt);
  };
  one(op::min{}), one(op::argmin{}), one(op::max{}), one(op::argmax{}), one(op::sum{}), one(op::mean{});
}

/// __half and bf16 x, w, b through the register-staged loader against float64 (argmin and sum on __half, argmax
/// on bf16, scale 2), on the path `split` says (check_path).
void sixteen_bit(const std::string& label, const conv2d_problem& p, bool split, std::uint64_t seed) {
  check_path<__half>(p, split);
  check_path<__nv_bfloat16>(p, split);
  opts o;
  o.gain = 2;
  const epi::scale<float> s{2.0f};
  const auto dh = make_data<__half>(p, seed, data_kind::real);
  check_fused<narrow_entry>("half argmin" + label, p, dh, op::argmin{}, s, s, o);
  check_fused<narrow_entry>("half sum" + label, p, dh, op::sum{}, s, s, o);
  const auto db = make_data<__nv_bfloat16>(p, seed + 1, data_kind::real);
  check_fused<narrow_entry>("bf16 argmax" + label, p, db, op::argmax{}, s, s, o);
}

/// The fused kernel in the narrow policy of BN-channel tiles and in the default SIMT policy on the same fresh
/// data (argmin, scale 2, outputs poisoned first): each channel's sum runs over GEMM_K in the same order, in
/// slices of 8, so values and indices are bitwise the same.
template <int BN>
void bitwise_as_default(const conv2d_problem& p, std::uint64_t seed) {
  CAPTURE(describe(p));
  const auto d = make_data<float>(p, seed, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y1(ny), y2(ny);
  thrust::device_vector<std::int64_t> i1(ny), i2(ny);
  test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
  const epi::scale<float> e{2.0f};
  using narrow = typename convred::narrow_simt_policy<float, BN>::type;
  using wide = convred::default_simt_policy<float>::type;
  REQUIRE(convred::device::conv2d_reduce<narrow>(p, craw(dx), craw(dw), craw(db), raw(y1), raw(i1), op::argmin{}, e) ==
          status::success);
  REQUIRE(convred::device::conv2d_reduce<wide>(p, craw(dx), craw(dw), craw(db), raw(y2), raw(i2), op::argmin{}, e) ==
          status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(bytes_equal(test::to_host(y1), test::to_host(y2)));
  CHECK(test::to_host(i1) == test::to_host(i2));
}

/// math::accurate's goal as tests/test_plan_gpu.cu measures it: the relative norm error vs float64 of min over
/// channels of 2 conv2d(x, w, b), here through narrow_plan (guard bytes after its workspace) on the data d.
double accurate_error(const conv2d_problem& p, const host_data<float>& d) {
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<float> dy(static_cast<std::size_t>(p.y_elements()));
  test::poison(dy);
  const epi::scale<float> e{2.0f};
  narrow_plan<float> plan(p);
  REQUIRE(plan.state() == status::success);
  REQUIRE(run_guarded(plan, craw(dx), craw(dw), craw(db), raw(dy), nullptr, op::min{}, e) == status::success);
  std::vector<double> ref(dy.size());
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), ref.data(),
                                    static_cast<std::int64_t*>(nullptr), op::min{}, e);
  const std::vector<float> y = test::to_host(dy);
  CHECK(test::count_nan(y) == 0);  // every pixel written (the poison is NaN)
  return test::rel_norm_error(y, ref);
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("narrow family: where the planner takes it, and why not elsewhere") {
  // narrow layers of the torchvision sweep that 3xTF32 ran slower than PyTorch's strict fp32
  const conv2d_problem k12 = make_problem(32, 256, 25, 34, 12, 1, 1), k16 = make_problem(32, 512, 38, 38, 16, 3, 3, 1, 1),
                       k1 = make_problem(32, 256, 25, 34, 1, 3, 3, 1, 1);
  for (const conv2d_problem& p : {k12, k16, k1}) {
    CAPTURE(describe(p));
    const conv2d_reduce_plan<float, math::accurate> acc(p, h200);
    CAPTURE(acc.description());
    CHECK(acc.kernel() == kernel_kind::simt);
    CHECK(has(acc.description(), "(exact fp32 FMA, 128-pixel x 16-channel tiles"));
    CHECK(has(acc.description(), "K/groups <= 16 (the narrow family)"));
    // 3xTF32's bound: at most plan_narrow_accurate_chain (1152) GEMM_K values per partial sum (k12: 256, one
    // sum; k1: 2,304, two; k16: 4,608, four); math::ieee keeps the kernel's own order (unsplit here)
    const int chains = static_cast<int>((p.gemm_k() + 1151) / 1152);
    CHECK(acc.k_splits() == (chains > 1 ? chains : 0));
    CHECK(acc.workspace_bytes() ==
          (chains > 1 ? convred::device::conv2d_reduce_split_workspace_bytes<float>(p, chains) : std::size_t(0)));
    CHECK(conv2d_reduce_plan<float, math::ieee>(p, h200).k_splits() == 0);
    // not under TF32 or bf16: their tensor cores are not weighed against it
    CHECK(conv2d_reduce_plan<float, math::tf32>(p, h200).kernel() != kernel_kind::simt);
    CHECK(conv2d_reduce_plan<float, math::bf16>(p, h200).kernel() != kernel_kind::simt);
    CHECK(std::string(fam::simt_narrow<float, math::tf32>::can_implement(p, h200, {})) ==
          "a TF32 or 16-bit math (the tensor-core kernels)");
    // math::ieee: 16-channel tiles in place of the SIMT family's 128
    CHECK(has(conv2d_reduce_plan<float, math::ieee>(p, h200).description(), "(the narrow family)"));
    // a forced wgmma choice
    convred::device::plan_options forced;
    forced.splits = 2;
    CHECK(fam::simt_narrow<float, math::accurate>::can_implement(p, h200, forced) != nullptr);
  }
  // the same under math::ieee without tensor cores, and under math::accurate on such a GPU
  CHECK(has(conv2d_reduce_plan<float, math::ieee>(k12, turing).description(), "(the narrow family)"));
  CHECK(has(conv2d_reduce_plan<float, math::accurate>(k12, turing).description(), "(the narrow family)"));
  // an explicit tensor-core math below sm_80 keeps its own answer (no tensor cores: not served); an unknown SM
  // count leaves 3xTF32's layers to the tensor-core families; math::accurate without tensor cores runs the
  // SIMT family's order (no sums split for 3xTF32's bound)
  CHECK(std::string(fam::simt_narrow<float, math::tf32>::can_implement(k12, turing, {})) ==
        "a TF32 or 16-bit math (the tensor-core kernels)");
  CHECK(std::string(fam::simt_narrow<float, math::tf32x3>::can_implement(k12, turing, {})) ==
        "tf32x3 tensor-core math needs sm_80 or newer");
  CHECK(conv2d_reduce_plan<float, math::tf32x3>(k12, turing).state() != status::success);
  CHECK(std::string(fam::simt_narrow<float, math::accurate>::can_implement(k16, device_info{9, 0, true, 0}, {})) ==
        "an unknown SM count (its estimate is per SM)");
  CHECK(conv2d_reduce_plan<float, math::accurate>(k16, turing).k_splits() ==
        conv2d_reduce_plan<float, math::ieee>(k16, turing).k_splits());
  // 17 to 32 output channels per group: not served by the 16-channel tiles; the 32-channel tiles under
  // math::ieee, which do not serve 16 or fewer, nor more than 32 (the default SIMT policy)
  const conv2d_problem k17 = make_problem(32, 256, 25, 34, 17, 1, 1), k33 = make_problem(32, 256, 25, 34, 33, 1, 1);
  CHECK(std::string(fam::simt_narrow<float, math::ieee>::can_implement(k17, h200, {})) == "K/groups > 16");
  CHECK(has(conv2d_reduce_plan<float, math::ieee>(k17, h200).description(), "128-pixel x 32-channel tiles"));
  CHECK(has(conv2d_reduce_plan<float, math::ieee>(k17, h200).description(), "16 < K/groups <= 32 (the narrow family)"));
  CHECK(std::string(fam::simt_narrow<float, math::ieee, 32>::can_implement(k12, h200, {})) ==
        "K/groups <= 16 (its 16-channel tiles)");
  CHECK(std::string(fam::simt_narrow<float, math::ieee, 32>::can_implement(k33, h200, {})) == "K/groups > 32");
  CHECK(has(conv2d_reduce_plan<float, math::ieee>(k33, h200).description(), "256-pixel x 128-channel tiles"));
  CHECK(std::string(fam::simt_narrow<float, math::bf16, 32>::can_implement(k17, h200, {})) ==
        "a TF32 or 16-bit math (the tensor-core kernels)");
  // under 3xTF32 grouped layers only: RegNet's 24-channel groups at stride 2 (measured 2.1x faster than the
  // mma.sync kernel), not a dense layer of 24 (the mma.sync kernel measured faster on such 1x1 layers)
  const conv2d_problem g7 = make_problem(32, 168, 56, 56, 168, 3, 3, 1, 1, 2, 2, 1, 1, 7),
                       k24 = make_problem(32, 96, 1, 1, 24, 1, 1);
  const conv2d_reduce_plan<float, math::accurate> g7_plan(g7, h200);
  CAPTURE(g7_plan.description());
  CHECK(g7_plan.kernel() == kernel_kind::simt);
  CHECK(has(g7_plan.description(), "128-pixel x 32-channel tiles"));
  CHECK(std::string(fam::simt_narrow<float, math::accurate, 32>::can_implement(k24, h200, {})) ==
        "a dense layer under 3xTF32 (its 32-channel tiles: grouped layers)");
  CHECK(has(conv2d_reduce_plan<float, math::ieee>(k24, h200).description(), "128-pixel x 32-channel tiles"));
  // depthwise and narrow grouped layers stay with the direct family
  CHECK(conv2d_reduce_plan<float, math::accurate>(make_problem(32, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64), h200)
            .kernel() == kernel_kind::direct);
  CHECK(conv2d_reduce_plan<float, math::ieee>(make_problem(2, 16, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2), h200).kernel() ==
        kernel_kind::direct);
}
}

TEST_SUITE("gpu") {
TEST_CASE("narrow family: every op against float64") {
  require_gpu();
  std::uint64_t seed = 12100;
  for (const narrow_case& c : cases) all_ops(c.name, c.p, ++seed);
}

TEST_CASE("narrow family, 32-channel tiles: every op against float64, each path, bitwise equal to the default SIMT policy") {
  require_gpu();
  check_path<float, 32>(cases32[4].p, true);
  check_path<float, 32>(cases32[5].p, false);
  std::uint64_t seed = 12150;
  for (const narrow_case& c : cases32) all_ops<narrow32_entry>(c.name, c.p, ++seed);
  // 16-bit data through the register-staged loader
  const conv2d_problem p = cases32[1].p;
  opts o;
  o.gain = 2;
  const epi::scale<float> s{2.0f};
  check_fused<narrow32_entry>("half argmin 32", p, make_data<__half>(p, 12170, data_kind::real), op::argmin{}, s, s, o);
  check_fused<narrow32_entry>("bf16 argmax 32", p, make_data<__nv_bfloat16>(p, 12171, data_kind::real), op::argmax{}, s, s,
                              o);
  // fused: the default policy's FMA order, so values and indices bitwise the same
  for (const narrow_case& c : {cases32[1], cases32[5]}) bitwise_as_default<32>(c.p, 12180);
}

TEST_CASE("narrow family: 16-bit data, and results bitwise equal to the default SIMT policy's") {
  require_gpu();
  // 16-bit data on the split path (cases[4]: 2 pixel tiles) and through the fused kernel (many_tiles)
  sixteen_bit("", cases[4].p, true, 12201);
  sixteen_bit(std::string(" ") + many_tiles.name, many_tiles.p, false, 12203);
  // fused (no split): each channel's sum runs over GEMM_K in the same order, in slices of 8, as the default
  // policy's, so values and indices are bitwise the same
  for (const narrow_case& c : {cases[0], cases[5], cases[9]}) bitwise_as_default<16>(c.p, 12300);
}

TEST_CASE("narrow family sanitizer: the split path and the fused kernel through the plan") {
  require_gpu();
  // cases[5] and cases[8] split (1 pixel tile), many_tiles fused: each path checked on the plan first
  const struct {
    narrow_case c;
    bool split;
  } runs[] = {{cases[5], true}, {cases[8], true}, {many_tiles, false}};
  opts o;
  o.gain = 2;
  const epi::scale<float> s{2.0f};
  for (const auto& [c, split] : runs) {
    check_path<float>(c.p, split);
    const auto d = make_data<float>(c.p, 12400, data_kind::real);
    check_fused<narrow_entry>(std::string("narrow sanitizer ") + c.name, c.p, d, op::argmin{}, s, s, o);
  }
  // 32-channel tiles: the split path and the fused kernel
  for (const narrow_case& c : {cases32[4], cases32[5]}) {
    const auto d = make_data<float>(c.p, 12410, data_kind::real);
    check_fused<narrow32_entry>(std::string("narrow sanitizer 32 ") + c.name, c.p, d, op::argmin{}, s, s, o);
  }
}

TEST_CASE("narrow family: 3xTF32's chains of at most 1,152 values hold math::accurate's 1e-6 against float64") {
  require_gpu();
  const device_info dev = device_info::current();
  if (dev.cc_major < 8) {
    MESSAGE("skipped: below sm_80 math::accurate runs no 3xTF32 (the narrow family's sums are not chained)");
    return;
  }
  // enough pixel tiles that the split heuristic alone does not split (98 and 213 tiles), GEMM_K above 1,152:
  // the GEMM_K splits plan_narrow_accurate_chain forces (the planner's choice for both on 108-148 SMs)
  const narrow_case chained[] = {
      {"N 16, C 512, 28x28, K 16 (GEMM_K 4,608)", make_problem(16, 512, 28, 28, 16, 3, 3, 1, 1)},
      {"N 32, C 256, 25x34, K 1 (GEMM_K 2,304)", make_problem(32, 256, 25, 34, 1, 3, 3, 1, 1)},
  };
  std::uint64_t seed = 12500;
  for (const narrow_case& c : chained) {
    const conv2d_problem& p = c.p;
    const conv2d_reduce_plan<float, math::accurate> def(p);  // the default planner's choice (made, not run)
    if (!has(def.description(), "(the narrow family)")) {
      MESSAGE("skipped " << c.name << ": the planner takes " << def.description());
      continue;
    }
    const std::int64_t chains = (p.gemm_k() + plan_narrow_accurate_chain - 1) / plan_narrow_accurate_chain;
    const narrow_plan<float> plan(p);
    INFO(std::string(c.name) << ": " << def.description());
    CHECK(def.kernel() == kernel_kind::simt);
    CHECK(def.k_splits() >= chains);
    CHECK(fam::simt_narrow<float, math::ieee>::configure(p, dev, {}).splits < chains);  // forced by the chains
    CHECK(plan.description() == def.description());  // narrow_entry runs the planner's choice
    const auto d = make_data<float>(p, ++seed, data_kind::real);
    opts o;
    o.gain = 2;
    const epi::scale<float> s{2.0f};
    check_fused<narrow_entry>(std::string(c.name) + " argmin", p, d, op::argmin{}, s, s, o);
    const double err = accurate_error(p, d);
    MESSAGE(std::string(c.name) << ": min, relative norm error vs float64 " << err);
    CHECK(err <= test::tol::accurate);
  }
}
}
