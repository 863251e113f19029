// GPU tests of device::conv2d_reduce_packed_split on the Hopper wgmma kernel: partial (split-K) mode,
// flat tiles, pass mode, split-K tails and direct tiles, forced through device::plan_options, against the
// float64 reference with each math's documented tolerance (conv2d_reduce_check.cuh); the fused kernel's
// tests are test_conv2d_reduce_wgmma_gpu.cu (split from it to keep each translation unit's compile short).
#include "wgmma_test_util.cuh"

TEST_SUITE("gpu") {

// ---- the partial (split-K) mode: device::conv2d_reduce_packed_split ---------------------------------------

namespace {

/// A problem of the partial mode's sweep and whether the wgmma kernel serves it (else
/// conv2d_reduce_packed_split runs the mma.sync split path: its fallback, checked too).
struct split_shape {
  conv2d_problem p;
  bool tf32;    ///< served under tf32 and bf16
  bool tf32x3;  ///< served under 3xTF32 (where its two-part stages fit; filters other than 3x3 and 1x1, and
                ///< stride 2, in its tap-loop variant; at stride 1 larger filters on its direct tiles of
                ///< filter rows)
};

/// Shapes of the partial mode: C and K from {7, 33, 65, 130, 257} (channel tails in a stage, 1 to 3
/// channel passes, a 2-channel last pass), 3x3, 1x1 and 5x5 filters, padding 0-2, stride 1 and 2 (the
/// gathering producer, also for W % 4 != 0), narrow images (Q <= 30: tiles of pitch 16 or 32, dropped
/// columns) and wide ones (Q > 64: two column tiles, the last partial), and one problem with more units
/// than SMs (several units per persistent block: the pipeline crossing unit boundaries).
std::vector<split_shape> split_shapes() {
  return {
      {make_problem(2, 7, 9, 12, 33, 3, 3, 1, 1), true, true},             // kt = 1: the passes alone
      {make_problem(1, 33, 10, 70, 7, 3, 3, 0, 0), true, true},            // wide (Q = 68), W % 4 != 0
      {make_problem(1, 65, 8, 20, 130, 3, 3, 2, 2), true, true},           // narrow (pitch 32), 2 passes, pad 2
      {make_problem(2, 130, 6, 16, 65, 1, 1), true, true},                 // 1x1, resident filter
      {make_problem(1, 257, 5, 8, 257, 3, 3, 1, 1), true, true},           // 3 passes, kt 33 (tf32)
      {make_problem(2, 33, 7, 7, 257, 3, 3, 1, 1), true, true},            // 7 x 7 (ResNet layer4-like), gathered
      {make_problem(2, 33, 15, 18, 130, 3, 3, 1, 1, 2, 2), true, false},   // stride 2, narrow (Q = 9)
      {make_problem(1, 65, 9, 140, 33, 3, 3, 1, 1, 2, 2), true, false},    // stride 2, wide (Q = 70)
      {make_problem(1, 130, 10, 12, 33, 1, 1, 0, 0, 2, 2), true, true},    // 1x1 stride 2 (gathered; 3xTF32: tap loop)
      {make_problem(1, 7, 9, 16, 65, 5, 5, 2, 2), true, true},             // 5x5 (C <= 8: fits, kt = 1; 3xTF32: direct tiles of filter rows)
      {make_problem(1, 33, 9, 16, 65, 5, 5, 2, 2), true, true},            // 5x5, C = 33: only flat tiles fit (3xTF32: direct tiles)
      {make_problem(8, 33, 30, 28, 130, 3, 3, 1, 1), true, true},          // 32 tiles x 2 passes x splits > 132 units
  };
}

/// One conv2d_reduce_packed_split run against float64 on fresh real data (seed), `splits` GEMM_K splits:
/// run number `which` picks the op (min, argmin, mean in turn), the scale's sign (2 or -1.5 every two runs)
/// and the bias (every other run).
template <class Policy>
void check_split_run(const std::string& name, const conv2d_problem& p, int splits, int which, std::uint64_t seed) {
  opts o;
  o.splits = splits;
  o.bias = which % 2 == 0;
  const float sc = which % 4 < 2 ? 2.0f : -1.5f;
  o.gain = std::abs(sc);
  const auto d = make_data<float>(p, seed, data_kind::real);
  const epi::scale<float> e{sc};
  switch (which % 3) {
    case 0: check_fused<forced_entry<Policy>>(name + " min", p, d, op::min{}, e, e, o); break;
    case 1: check_fused<forced_entry<Policy>>(name + " argmin", p, d, op::argmin{}, e, e, o); break;
    default: check_fused<forced_entry<Policy>>(name + " mean", p, d, op::mean{}, e, e, o); break;
  }
}

/// The split counts tried for kt stages per pass: all of 1..kt for kt <= 9, else 1, 2, 3, kt / 2, kt - 1, kt.
std::vector<int> split_counts(int kt) {
  std::vector<int> v;
  if (kt <= 9) {
    for (int z = 1; z <= kt; ++z) v.push_back(z);
  } else {
    v = {1, 2, 3, kt / 2, kt - 1, kt};
  }
  return v;
}

/// The partial mode under Policy against float64 (check_fused with forced_entry): every shape of
/// split_shapes, every split count of split_counts (the mma.sync fallback: 1 to 3), ops min / argmin / mean
/// in turn with a scale epilogue of either sign, with and without bias in turn, fresh random data per run;
/// then exact integer data (values and argmin ties exactly) with the most splits.
template <class Policy>
void split_sweep(const char* label, std::uint64_t seed, int max_runs_per_shape = 1000) {
  require_gpu();
  const bool hopper = on_hopper();
  int which = 0;
  for (const split_shape& c : split_shapes()) {
    const conv2d_problem& p = c.p;
    const bool served = Policy::parts == 2 ? c.tf32x3 : c.tf32;
    // the stages per pass of the tiles the run takes: the slices of block_c channels, or for flat 1x1
    // tiles that over their group of slices per stage
    const int slices = static_cast<int>((p.C + Policy::block_c - 1) / Policy::block_c);
    int kt = slices;
    if (hopper) {
      CHECK((convred::device::packed_filter_bytes<Policy, float>(p) > 0) == served);
      const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
      if (plan.served) {
        kt = plan.k.kt;
        CHECK(plan.k.kt / plan.k.row_stages() * plan.k.group == slices);  // (direct tiles: a stage per filter row)
      }
      CHECK(convred::device::max_packed_k_splits<Policy, float>(p, forced_options()) == (served ? kt : convred::device::max_k_splits));
    }
    const std::vector<int> counts = hopper && served ? split_counts(kt) : std::vector<int>{1, 2, 3};
    int runs = 0;
    for (int z : counts) {
      if (++runs > max_runs_per_shape) break;
      const std::string name = std::string(label) + " split " + std::to_string(z) + " " + describe(p);
      check_split_run<Policy>(name, p, z, which++, ++seed);
    }
    // integer data: exact in every math, whatever the split (values, and argmin's lowest index on ties)
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    o.splits = counts.back();
    check_fused<forced_entry<Policy>>(std::string(label) + " split exact argmin " + describe(p), p, d, op::argmin{},
                                      epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  }
}

}  // namespace

TEST_CASE("conv2d_reduce_packed_split wgmma partial mode: tf32 vs float64 (<= 1e-3)") {
  split_sweep<wg<math::tf32>>("wgmma tf32", 40000);
}
TEST_CASE("conv2d_reduce_packed_split wgmma partial mode: bf16 vs float64 (<= 1e-2)") {
  split_sweep<wg<math::bf16>>("wgmma bf16", 41000);
}
TEST_CASE("conv2d_reduce_packed_split wgmma partial mode: tf32x3 vs float64 (<= 1e-5)") {
  split_sweep<wg<math::tf32x3>>("wgmma tf32x3", 42000);
}
// The ping-pong schedule in partial mode: each warpgroup skips the other's units by their stage counts
// (units of different lengths when kt is not a multiple of the split count).
TEST_CASE("conv2d_reduce_packed_split wgmma partial mode: tf32 and bf16 ping-pong") {
  split_sweep<wgmma_policy<math::tf32, 4, 2, true>>("wgmma tf32 pp", 43000, 3);
  split_sweep<wgmma_policy<math::bf16, 4, 2, true>>("wgmma bf16 pp", 44000, 3);
  // many more units than SMs, of unequal lengths (kt 5 for tf32 and 3 for bf16 over 2 splits: units of
  // 2 and 3, or 1 and 2 stages), so that each block's two warpgroups take many turns and seek past units
  // of both lengths: 64 images x 2 narrow tiles x 2 passes x 2 splits = 512 units (review, session 9)
  const conv2d_problem p = make_problem(64, 40, 14, 12, 130, 3, 3, 1, 1);
  std::uint64_t seed = 45000;
  auto many = [&](auto policy, const char* name) {
    using Policy = decltype(policy);
    opts o;
    o.splits = 2;
    o.gain = 2.0;
    const auto d = make_data<float>(p, ++seed, data_kind::real);
    const epi::scale<float> e{2.0f};
    check_fused<forced_entry<Policy>>(std::string(name) + " 512 units min", p, d, op::min{}, e, e, o);
    const auto di = make_data<float>(p, ++seed, data_kind::integer);
    opts oi = o;
    oi.exact = true;
    check_fused<forced_entry<Policy>>(std::string(name) + " 512 units exact argmin", p, di, op::argmin{}, e, e, oi);
  };
  many(wgmma_policy<math::tf32, 4, 2, true>{}, "wgmma tf32 pp");
  many(wgmma_policy<math::bf16, 4, 2, true>{}, "wgmma bf16 pp");
}

TEST_CASE("conv2d_reduce_packed_split wgmma sanitizer: partial mode, every math, narrow, wide, gathered") {
  require_gpu();
  auto run = [](auto policy, const char* name, const conv2d_problem& p, int splits, std::uint64_t seed, auto op) {
    using Policy = decltype(policy);
    const auto d = make_data<float>(p, seed, data_kind::real);
    opts o;
    o.splits = on_hopper() ? splits : 2;
    o.gain = 2;
    check_fused<forced_entry<Policy>>(name, p, d, op, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  };
  run(wg<math::tf32>{}, "sanitizer split tf32 narrow K=130", make_problem(1, 33, 6, 12, 130, 3, 3, 1, 1), 3, 50, op::argmin{});
  run(wg<math::bf16>{}, "sanitizer split bf16 wide", make_problem(1, 40, 5, 68, 40, 3, 3, 1, 1), 2, 51, op::min{});
  run(wg<math::tf32x3>{}, "sanitizer split tf32x3", make_problem(1, 17, 6, 12, 33, 3, 3, 1, 1), 3, 52, op::mean{});
  run(wg<math::tf32>{}, "sanitizer split tf32 stride 2", make_problem(1, 20, 11, 19, 40, 3, 3, 1, 1, 2, 2), 2, 53,
      op::min{});
  run(wg<math::tf32>{}, "sanitizer split tf32 W=7", make_problem(2, 9, 7, 7, 140, 3, 3, 1, 1), 2, 54, op::argmin{});
}

TEST_CASE("conv2d_reduce_packed_split: argument errors, nothing launched") {
  require_gpu();
  using P = wg<math::tf32>;
  const conv2d_problem p = make_problem(1, 20, 8, 8, 130, 3, 3, 1, 1);  // kt = 3, 2 passes
  const std::size_t packed = convred::device::packed_filter_bytes<P, float>(p);
  if (on_hopper()) REQUIRE(packed > 0);
  if (packed == 0) return;  // no wgmma kernel on this device: conv2d_reduce_split's own errors apply
  REQUIRE(convred::device::max_packed_k_splits<P, float>(p) == 3);
  const std::size_t bytes = convred::device::packed_split_workspace_bytes<P, float>(p, 2);
  // splits = 0 (fused): the packed filter and, for flat tiles, the packed x; each split adds a partial plane
  const std::size_t fused = convred::device::packed_split_workspace_bytes<P, float>(p, 0);
  CHECK(fused >= (packed + 15) / 16 * 16);
  CHECK(bytes == fused + 2u * 64u * 130u * 4u);
  CHECK(convred::device::packed_split_workspace_bytes<P, float>(p, -1) == 0u);
  CHECK(convred::device::packed_split_workspace_bytes<P, float>(p, 4) == 0u);  // more splits than stages
  conv2d_problem empty = p;
  empty.N = 0;
  CHECK(convred::device::packed_split_workspace_bytes<P, float>(empty, 2) == 0u);
  thrust::device_vector<float> w(static_cast<std::size_t>(p.w_elements()), 1.f), x(static_cast<std::size_t>(p.x_elements()), 1.f);
  thrust::device_vector<unsigned char> ws(bytes + 16);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  REQUIRE(convred::device::pack_filter<P>(p, craw(w), raw(ws), bytes) == status::success);
  auto run = [&](void* wk, std::size_t n, float* out, int splits) {
    return convred::device::conv2d_reduce_packed_split<P>(p, craw(x), craw(w), wk, n, nullptr, out, nullptr, splits,
                                                          op::min{}, convred::epilogue::identity{}, nullptr, forced_options());
  };
  CHECK(run(raw(ws), bytes, raw(y), -1) == status::invalid_argument);
  CHECK(run(raw(ws), bytes, raw(y), 4) == status::invalid_argument);
  CHECK(run(nullptr, bytes, raw(y), 2) == status::null_pointer);
  CHECK(run(raw(ws), bytes, nullptr, 2) == status::null_pointer);
  CHECK(run(raw(ws) + 8, bytes, raw(y), 2) == status::misaligned_pointer);
  CHECK(run(raw(ws), bytes - 4, raw(y), 2) == status::workspace_too_small);
  CHECK(run(raw(ws), packed, raw(y), 2) == status::workspace_too_small);
  CHECK(run(raw(ws), bytes, reinterpret_cast<float*>(raw(ws)), 2) == status::overlapping_buffers);  // y on the filter
  CHECK(run(raw(ws), bytes, reinterpret_cast<float*>(raw(ws) + bytes - 64), 2) == status::overlapping_buffers);  // y on the sums
  CHECK(convred::device::conv2d_reduce_packed_split<P>(p, craw(x), craw(w), raw(ws), bytes, nullptr, raw(y), raw(idx), 2,
                                                       op::min{}) == status::indices_not_supported);
  CHECK(convred::device::conv2d_reduce_packed_split<P>(empty, craw(x), craw(w), nullptr, 0, nullptr, static_cast<float*>(nullptr),
                                                       nullptr, 2, op::min{}) == status::success);  // N = 0: nothing to do
  CHECK(run(raw(ws), bytes, raw(y), 2) == status::success);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  // x all ones, w all ones, no bias: every output channel is the window sum: 2 x 2 x 20 = 80 at (0, 0)
  CHECK(test::to_host(y)[0] == doctest::Approx(80.0));
  thrust::fill(y.begin(), y.end(), -1.f);
  CHECK(run(raw(ws), fused, raw(y), 0) == status::success);  // fused, in the workspace of splits = 0
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(y)[0] == doctest::Approx(80.0));
  {  // flat tiles (forced): the workspace must hold the packed x too
    const force_choice forced(2, 1);
    const std::size_t flat = convred::device::packed_split_workspace_bytes<P, float>(p, 0, forced_options());
    REQUIRE(flat > (packed + 15) / 16 * 16);
    thrust::device_vector<unsigned char> wf(flat);
    REQUIRE(convred::device::pack_filter<P>(p, craw(w), raw(wf), flat) == status::success);
    CHECK(run(raw(wf), flat - 16, raw(y), 0) == status::workspace_too_small);
    thrust::fill(y.begin(), y.end(), -1.f);
    CHECK(run(raw(wf), flat, raw(y), 0) == status::success);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(test::to_host(y)[0] == doctest::Approx(80.0));
  }
}

// ---- flat tiles over a packed x (wgmma_conv_params::flat), conv2d_reduce_packed_split ---------------------

namespace {

/// Shapes for flat tiles (forced in the sweep; tests/test_wgmma_params_host.cu checks the time model's own
/// choice for the real layers): 7 x 7 images (3 per 256-pixel tile, tiles across images), 14 x 14, 1x1 stride 2 (the
/// row tiles would gather x with one tap per stage), 3x3 stride 2 (four phase planes), Q = 32 (pitch 34),
/// K = 1 with padding 2, 3 channel passes, 1x1 stages of several slices (wgmma_conv_params::group), stride-1
/// paddings below, at and above the filter's halo, unequal per dimension; C and K with channel tails.
std::vector<conv2d_problem> flat_shapes() {
  return {
      make_problem(4, 33, 7, 7, 257, 3, 3, 1, 1),          // ResNet-50 layer4-like, 3 passes
      make_problem(3, 20, 14, 14, 130, 3, 3, 1, 1),        // layer3-like, 2 passes
      make_problem(4, 40, 28, 28, 65, 1, 1, 0, 0, 2, 2),   // 1x1 stride 2 (projection-like)
      make_problem(3, 96, 14, 14, 150, 1, 1, 0, 0, 2, 2),  // 1x1 stride 2, stages of 4 (tf32) or 3 (bf16) slices, 2 passes
      make_problem(2, 64, 9, 11, 33, 1, 1),                // 1x1 stride 1, stages of 4 slices (tf32: 2 stages; bf16: 1)
      make_problem(2, 17, 15, 18, 33, 3, 3, 1, 1, 2, 2),   // 3x3 stride 2, odd H, four phases
      make_problem(2, 9, 30, 32, 7, 3, 3, 1, 1),           // Q = 32: pitch 34, small K
      make_problem(5, 3, 5, 6, 1, 3, 3, 2, 2),             // K = 1, padding 2, tiny images
      // stride 1 shares min(pad, halo) zero rows / columns between neighbours (wgmma_conv_params::flat_rows):
      make_problem(3, 11, 9, 10, 20, 3, 5, 0, 2),          // 3x5, pad (0, 2): columns shared, rows not
      make_problem(2, 5, 6, 7, 9, 3, 3, 3, 3),             // padding 3 > halo 2: two shared, one computed
      make_problem(4, 6, 8, 5, 12, 2, 2, 1, 1),            // 2x2 (even filter), padding 1
      make_problem(2, 9, 8, 12, 20, 3, 3, 2, 0),           // 3x3, pad (2, 0): rows shared, columns not
  };
}

/// Flat tiles (forced) under Policy against float64: every shape of flat_shapes, unsplit (splits 0) fused and
/// in pass mode (several channel passes; not under 3xTF32) and in partial mode (2 splits, or 1 when kt =
/// 1), ops min / argmin / mean in turn with a scale epilogue of either sign, with and without bias; then
/// exact integer data with argmin (ties: the lowest index), in pass mode where it applies.
template <class Policy>
void flat_sweep(const char* label, std::uint64_t seed, bool stride2) {
  require_gpu();
  int which = 0;
  for (const conv2d_problem& p : flat_shapes()) {
    if (p.stride_h != 1 && !stride2) continue;
    const std::size_t packed = convred::device::packed_filter_bytes<Policy, float>(p);
    // 3xTF32 where its two-part flat stages fit (filters other than 3x3 and 1x1, and stride 2: the tap loop;
    // a packed filter alone may be the direct tiles')
    if (Policy::parts == 2 && packed == 0) continue;
    if constexpr (Policy::parts == 2) {
      convred::block::wgmma_conv_params fk;
      std::size_t fsmem = 0;
      if (!convred::plan::wgmma_params<Policy>::make_params(
              p, convred::device::detail::wgmma_tail_bytes<Policy, op::argmin>(), convred::device::detail::max_smem_per_block,
              fk, fsmem, true))
        continue;
    }
    int kt = static_cast<int>((p.C + Policy::block_c - 1) / Policy::block_c);  // slices of block_c channels
    if (on_hopper()) {  // stages per pass of the flat tiles (1x1: group slices per stage)
      const force_choice forced(2, 1);
      kt = convred::device::max_packed_k_splits<Policy, float>(p, forced_options());
    }
    const bool passes = p.K > 128 && Policy::parts == 1;  // pass mode applies
    struct run_kind {
      int splits, pass;
    };
    std::vector<run_kind> runs = {{0, 1}, {kt > 1 ? 2 : 1, 1}};
    if (passes) runs.push_back({0, 2});
    for (const run_kind& rk : runs) {
      const force_choice forced(2, rk.pass);
      if (on_hopper()) {  // flat: the workspace holds a packed x after the filter
        INFO(describe(p));
        const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
        CHECK(plan.k.flat == 1);
        CHECK(plan.pass_mode == (rk.pass == 2));
        CHECK(convred::device::packed_split_workspace_bytes<Policy, float>(p, rk.splits, forced_options()) > (packed + 15) / 16 * 16);
      }
      const std::string name = std::string(label) + " flat split " + std::to_string(rk.splits) +
                               (rk.pass == 2 ? " pass mode " : " ") + describe(p);
      check_split_run<Policy>(name, p, rk.splits, which++, ++seed);
    }
    const force_choice forced(2, passes ? 2 : 1);
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    o.splits = 0;
    check_fused<forced_entry<Policy>>(std::string(label) + " flat exact argmin " + describe(p), p, d, op::argmin{},
                                      epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  }
}

}  // namespace

TEST_CASE("conv2d_reduce_packed_split wgmma flat tiles: tf32 and bf16 vs float64") {
  flat_sweep<wg<math::tf32>>("wgmma tf32", 46000, true);
  flat_sweep<wg<math::bf16>>("wgmma bf16", 46100, true);
}
TEST_CASE("conv2d_reduce_packed_split wgmma flat tiles: tf32x3 and ping-pong vs float64") {
  flat_sweep<wg<math::tf32x3>>("wgmma tf32x3", 46300, true);
  flat_sweep<wgmma_policy<math::tf32, 4, 2, true>>("wgmma tf32 pp", 46400, true);
}
// Pass mode on tiles of image rows (forced): K > 128, wide and narrow tiles, the TMA and gathering variants;
// K = 1300: 11 passes to combine.
TEST_CASE("conv2d_reduce_packed_split wgmma pass mode on row tiles: tf32 and bf16 vs float64") {
  require_gpu();
  const conv2d_problem shapes[] = {make_problem(2, 7, 10, 20, 130, 3, 3, 1, 1), make_problem(1, 33, 9, 68, 257, 3, 3, 1, 1),
                                   make_problem(2, 9, 15, 18, 300, 3, 3, 1, 1, 2, 2),
                                   make_problem(1, 5, 6, 10, 1300, 3, 3, 1, 1)};
  std::uint64_t seed = 46500;
  auto run = [&](auto policy, const char* label) {
    using Policy = decltype(policy);
    const force_choice forced(1, 2);
    for (const conv2d_problem& p : shapes) {
      if (on_hopper()) {
        const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
        CHECK(plan.k.flat == 0);
        CHECK(plan.pass_mode);
      }
      opts o;
      o.splits = 0;
      o.gain = 2;
      const auto d = make_data<float>(p, ++seed, data_kind::real);
      const epi::scale<float> e{2.0f};
      check_fused<forced_entry<Policy>>(std::string(label) + " rows pass mode min " + describe(p), p, d, op::min{}, e, e, o);
      const auto di = make_data<float>(p, ++seed, data_kind::integer);
      opts oi = o;
      oi.exact = true;
      check_fused<forced_entry<Policy>>(std::string(label) + " rows pass mode exact argmin " + describe(p), p, di,
                                        op::argmin{}, e, e, oi);
    }
  };
  run(wg<math::tf32>{}, "wgmma tf32");
  run(wg<math::bf16>{}, "wgmma bf16");
}

namespace {

/// Forces a split-K tail (forced_options()) for its lifetime: tiles 1 rows / 2 flat / 3 direct, the head's mode
/// (pass 1 fused, 2 pass mode), the last `tail` tiles with `splits` GEMM_K ranges (0: the model's).
struct force_tail {
  force_tail(int tiles, int pass, std::int64_t tail, int splits) {
    convred::device::plan_options& o = forced_options();
    o = {};
    o.tiles = static_cast<convred::device::wgmma_tiling>(tiles);
    o.pass = static_cast<convred::device::wgmma_pass_mode>(pass);
    o.tail = tail, o.tail_splits = splits;
  }
  ~force_tail() { forced_options() = {}; }
};

/// A split-K tail run: the shape, the tiles, the head's mode, tail tiles and splits.
struct tail_case {
  conv2d_problem p;
  int tiles;  ///< 1 rows (whole-row tiles: tiles_q = 1), 2 flat
  int pass;   ///< 1 fused head, 2 pass-mode head
  std::int64_t tail;
  int splits;
};

/// Split-K tails (forced) under Policy against float64: flat tiles at stride 1 and 2 (the gathering
/// variant), narrow row tiles (whole rows: tiles_q = 1), fused and pass-mode heads, a head of one tile
/// (tail = tiles - 1, more asked), one split per stage (splits = kt), K with a channel tail and odd K (the
/// fixup's scalar loads, the raw store's single channels), the head's pixels ending mid-image and
/// mid-row; ops min / argmin / mean in turn, a scale epilogue of either sign, bias on and off, then exact
/// integer argmin (ties: the lowest index). Checks the plan's tail (tiles, splits, pixels against
/// conv_mainloop_wgmma::first_pixel) on the device, and that wide row tiles (tiles_q > 1) refuse a tail.
template <class Policy>
void tail_sweep(const char* label, std::uint64_t seed) {
  require_gpu();
  using mainloop = convred::block::conv_mainloop_wgmma<Policy>;
  const tail_case cases[] = {
      {make_problem(6, 20, 14, 14, 257, 3, 3, 1, 1), 2, 1, 2, 2},          // flat, 3 passes, fused head
      {make_problem(6, 20, 14, 14, 257, 3, 3, 1, 1), 2, 2, 3, 3},          // the same, pass-mode head
      {make_problem(5, 17, 15, 18, 33, 3, 3, 1, 1, 2, 2), 2, 1, 1, 2},     // flat stride 2 (phases)
      {make_problem(3, 9, 28, 28, 130, 3, 3, 1, 1), 1, 1, 5, 0},           // whole-row tiles, model's splits
      {make_problem(3, 9, 28, 28, 130, 3, 3, 1, 1), 1, 2, 4, 2},           // the same, pass-mode head
      {make_problem(4, 33, 9, 12, 65, 1, 1), 2, 1, 100, 1000},             // 1x1: head of one tile, splits = kt
      {make_problem(7, 12, 10, 11, 7, 3, 3, 0, 0), 2, 1, 2, 2},            // K = 7 (odd), no padding
  };
  int which = 0;
  for (const tail_case& c : cases) {
    const conv2d_problem& p = c.p;
    const force_tail forced(c.tiles, c.pass, c.tail, c.splits);
    if (on_hopper()) {
      INFO(describe(p));
      const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
      REQUIRE(plan.served);
      CHECK(plan.k.flat == (c.tiles == 2));
      REQUIRE(plan.k.tiles >= 2);
      CHECK(plan.tail_tiles == std::min<std::int64_t>(c.tail, plan.k.tiles - 1));
      if (c.splits > 0) CHECK(plan.tail_splits == std::min(c.splits, plan.k.kt));
      CHECK(plan.tail_splits >= 1);
      CHECK(plan.pass_mode == (c.pass == 2));
      CHECK(plan.tail_pixels == p.gemm_m() - mainloop::first_pixel(plan.k, plan.k.tiles - plan.tail_tiles));
      CHECK(plan.tail_pixels > 0);
      CHECK(plan.tail_pixels < p.gemm_m());
    }
    for (int r = 0; r < 3; ++r)
      check_split_run<Policy>(std::string(label) + " tail " + std::to_string(c.tail) + ":" + std::to_string(c.splits) +
                                  (c.pass == 2 ? " pass head " : " fused head ") + describe(p),
                              p, 0, which++, ++seed);
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    o.splits = 0;
    check_fused<forced_entry<Policy>>(std::string(label) + " tail exact argmin " + describe(p), p, d, op::argmin{},
                                      epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  }
  if (on_hopper()) {  // wide row tiles (Q > 64: two column tiles) cover no contiguous pixel range: no tail
    const force_tail forced(1, 1, 2, 2);
    const conv2d_problem p = make_problem(2, 9, 12, 140, 33, 3, 3, 1, 1);
    const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
    CHECK(plan.k.tiles_q > 1);
    CHECK(plan.tail_tiles == 0);
  }
}

}  // namespace

TEST_CASE("conv2d_reduce_packed_split wgmma split-K tail: tf32 and bf16 vs float64") {
  tail_sweep<wg<math::tf32>>("wgmma tf32", 47000);
  tail_sweep<wg<math::bf16>>("wgmma bf16", 47100);
}

// ---- direct tiles (wgmma_conv_params::direct: tf32 1x1, x read from NCHW, A from registers) -------------

namespace {

/// Shapes for direct tiles: ResNet-50's projections (layer1.0: 2 channel passes, 4-slice stages; layer3.0
/// at stride 2: 8 passes, 2-slice stages), C with a channel tail (17: 3-slice stages; 3: one stage of a
/// partial slice), tiles of several whole rows with dropped pixels (Q = 20: 12 rows = 240 of 256; Q = 100:
/// 2 rows; Q = 4: 16 rows = 64), odd H at stride 2, W % 4 != 0 at stride 2 (s * W % 4 = 0), W % 4 != 0 at
/// stride 1 (the image viewed as H' x W': one tile per image, or several of whole view rows), K = 7, 513;
/// then C and K through 1, 3, 7, 33, 65, 130, 257 and 513 (K odd or 2 mod 4: the partial sums' 4-byte
/// stores; K = 1: one valid channel of 128).
std::vector<conv2d_problem> direct_shapes() {
  return {
      make_problem(1, 64, 56, 56, 256, 1, 1),             // ResNet-50 layer1.0 projection
      make_problem(1, 512, 28, 28, 1024, 1, 1, 0, 0, 2, 2),  // layer3.0 projection, stride 2
      make_problem(3, 40, 28, 28, 65, 1, 1, 0, 0, 2, 2),  // one 14 x 14 tile per image
      make_problem(2, 17, 12, 20, 130, 1, 1),             // 12 rows of 20 per tile, 2 passes
      make_problem(2, 9, 6, 100, 33, 1, 1),               // Q = 100: 2-row tiles, 3 per image
      make_problem(3, 8, 16, 4, 7, 1, 1),                 // Q = 4: one 64-pixel tile per image
      make_problem(2, 24, 15, 20, 40, 1, 1, 0, 0, 2, 2),  // stride 2, odd H (P = 8, Q = 10)
      make_problem(2, 10, 14, 14, 20, 1, 1, 0, 0, 2, 2),  // stride 2, W = 14 (Q = 7)
      // W % 4 != 0 at stride 1, H * W % 4 == 0: the image viewed as H' x W' (viewed_width)
      make_problem(2, 20, 14, 14, 140, 1, 1),             // 14 x 14 as 1 x 196, 2 passes
      make_problem(3, 9, 10, 14, 33, 1, 1),               // 10 x 14 as 1 x 140
      make_problem(1, 24, 30, 30, 65, 1, 1),              // 30 x 30 as 25 x 36: 4 tiles of 7 rows (the last 4)
      make_problem(1, 3, 8, 8, 513, 1, 1),                // C = 3, 5 passes
      // C and K through {1, 3, 7, 33, 65, 130, 257, 513}, at stride 1 and 2
      make_problem(1, 1, 8, 8, 257, 1, 1),                 // C = 1: one slice of 1 channel
      make_problem(2, 7, 12, 12, 3, 1, 1, 0, 0, 2, 2),     // K = 3
      make_problem(1, 33, 8, 8, 1, 1, 1),                  // K = 1
      make_problem(2, 65, 12, 12, 7, 1, 1, 0, 0, 2, 2),
      make_problem(1, 130, 8, 8, 33, 1, 1),
      make_problem(1, 257, 12, 12, 65, 1, 1, 0, 0, 2, 2),
      make_problem(1, 513, 8, 8, 130, 1, 1),
      make_problem(1, 3, 12, 12, 513, 1, 1, 0, 0, 2, 2),
  };
}

/// Direct tiles (forced) under the tf32 policy against float64: every shape of direct_shapes fused, in
/// partial mode (2 splits, or 1), in pass mode (K > 128) and with a split-K tail (shapes of several
/// tiles), ops min / argmin / mean in turn with a scale epilogue of either sign, with and without bias;
/// exact integer data with argmin; and the shapes direct tiles do not serve (padding, H * W % 4 != 0)
/// forced to them run other tiles.
template <class Policy>
void direct_sweep(const char* label, std::uint64_t seed, const std::vector<conv2d_problem>& shapes = direct_shapes()) {
  require_gpu();
  int which = 0;
  for (const conv2d_problem& p : shapes) {
    INFO(describe(p));
    int kt = 1;
    std::int64_t tiles = 1;
    if (on_hopper()) {
      const force_choice forced(3, 1);
      const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
      REQUIRE(plan.k.direct == 1);
      CHECK(plan.k.flat == 0);
      kt = convred::device::max_packed_k_splits<Policy, float>(p, forced_options());
      tiles = plan.k.tiles;
      // the driver takes the direct tensor map, or the runs below would be the fallback's
      thrust::device_vector<float> xs(static_cast<std::size_t>(p.x_elements()));
      CUtensorMap map{};
      CHECK(convred::device::detail::make_x_tensor_map<Policy>(map, raw(xs), plan.k));
    }
    std::vector<std::pair<int, int>> runs = {{0, 1}, {kt > 1 ? 2 : 1, 1}};  // (splits, pass)
    if (p.K > 128) runs.push_back({0, 2});
    for (const auto& [splits, pass] : runs) {
      const force_choice forced(3, pass);
      check_split_run<Policy>(std::string(label) + " direct split " + std::to_string(splits) + (pass == 2 ? " pass mode " : " ") +
                                  describe(p),
                              p, splits, which++, ++seed);
    }
    if (tiles > 1) {
      const force_tail forced(3, 1, 1, 2);
      check_split_run<Policy>(std::string(label) + " direct tail " + describe(p), p, 0, which++, ++seed);
    }
    const force_choice forced(3, 1);
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    opts o;
    o.exact = true;
    o.splits = 0;
    check_fused<forced_entry<Policy>>(std::string(label) + " direct exact argmin " + describe(p), p, d, op::argmin{},
                                      epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  }
  // not served by direct tiles (padding; H * W % 4 != 0; a 3x3 filter): forced, the plan takes other tiles
  for (const conv2d_problem& p : {make_problem(2, 8, 12, 12, 20, 1, 1, 1, 1), make_problem(2, 8, 7, 7, 20, 1, 1),
                                  make_problem(2, 8, 12, 12, 20, 3, 3, 1, 1)}) {
    const force_choice forced(3, 1);
    if (on_hopper()) {
      const auto plan = convred::device::detail::wgmma_plan<Policy, float, op::argmin>(p, convred::device::detail::wgmma_tiles::chosen, forced_options());
      CHECK(plan.k.direct == 0);
    }
    check_split_run<Policy>(std::string(label) + " not direct " + describe(p), p, 0, which++, ++seed);
  }
}

}  // namespace

TEST_CASE("conv2d_reduce_packed_split wgmma direct tiles: tf32 vs float64") { direct_sweep<wg<math::tf32>>("wgmma tf32", 48000); }
// the ping-pong policy's direct tiles (128 pixels) on viewed images: 14 x 14 as 7 x 28 (tiles of 4 and 3 rows),
// 10 x 14 as 7 x 20, 30 x 30 as 45 x 20 (the planner takes ping-pong where it replaces a fixup)
TEST_CASE("conv2d_reduce_packed_split wgmma direct tiles of a viewed image: tf32 ping-pong vs float64") {
  direct_sweep<wgmma_policy<math::tf32, 4, 2, true>>(
      "wgmma tf32 pp", 48500,
      {make_problem(2, 20, 14, 14, 140, 1, 1), make_problem(3, 9, 10, 14, 33, 1, 1), make_problem(1, 24, 30, 30, 65, 1, 1)});
}

TEST_CASE("conv2d_reduce_packed_split wgmma sanitizer: direct tiles") {
  require_gpu();
  auto run = [](const char* name, const conv2d_problem& p, int splits, int pass, std::uint64_t seed, auto op) {
    const force_choice forced(3, pass);
    const auto d = make_data<float>(p, seed, data_kind::real);
    opts o;
    o.splits = splits;
    o.gain = 2;
    check_fused<forced_entry<wg<math::tf32>>>(name, p, d, op, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  };
  run("sanitizer direct tf32 stride 1 fused", make_problem(2, 17, 12, 20, 130, 1, 1), 0, 1, 64, op::argmin{});
  run("sanitizer direct tf32 stride 2 pass mode", make_problem(2, 24, 15, 20, 140, 1, 1, 0, 0, 2, 2), 0, 2, 65, op::min{});
  run("sanitizer direct tf32 split", make_problem(1, 64, 16, 16, 40, 1, 1), 2, 1, 66, op::mean{});
  run("sanitizer direct tf32 viewed 30x30 as 25x36", make_problem(2, 24, 30, 30, 140, 1, 1), 0, 2, 67, op::argmin{});
}

TEST_CASE("conv2d_reduce_packed_split wgmma sanitizer: split-K tail") {
  require_gpu();
  auto run = [](auto policy, const char* name, const conv2d_problem& p, int tiles, int pass, auto op) {
    using Policy = decltype(policy);
    const force_tail forced(tiles, pass, 2, 2);
    const auto d = make_data<float>(p, 63, data_kind::real);
    opts o;
    o.splits = 0;
    o.gain = 2;
    check_fused<forced_entry<Policy>>(name, p, d, op, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  };
  run(wg<math::tf32>{}, "sanitizer tail tf32 flat pass head", make_problem(9, 20, 7, 7, 140, 3, 3, 1, 1), 2, 2, op::argmin{});
  run(wg<math::bf16>{}, "sanitizer tail bf16 rows fused head", make_problem(3, 9, 20, 20, 33, 3, 3, 1, 1), 1, 1, op::min{});
}

TEST_CASE("conv2d_reduce_packed_split wgmma sanitizer: flat tiles") {
  require_gpu();
  auto run = [](auto policy, const char* name, const conv2d_problem& p, int splits, std::uint64_t seed, auto op) {
    using Policy = decltype(policy);
    const force_choice forced(2, p.K > 128 ? 2 : 1);  // flat tiles; pass mode with several passes
    const auto d = make_data<float>(p, seed, data_kind::real);
    opts o;
    o.splits = splits;
    o.gain = 2;
    check_fused<forced_entry<Policy>>(name, p, d, op, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  };
  run(wg<math::tf32>{}, "sanitizer flat tf32 7x7", make_problem(3, 20, 7, 7, 140, 3, 3, 1, 1), 0, 60, op::argmin{});
  run(wg<math::bf16>{}, "sanitizer flat bf16 stride 2", make_problem(2, 20, 11, 13, 40, 3, 3, 1, 1, 2, 2), 2, 61, op::min{});
  run(wg<math::tf32x3>{}, "sanitizer flat tf32x3 1x1", make_problem(2, 17, 12, 13, 33, 1, 1), 0, 62, op::mean{});
  // stages of two slices (C 32), fused and split; at stride 2 (phase 0 only: the 1x1 stages, not the tap loop)
  run(wg<math::tf32x3>{}, "sanitizer flat tf32x3 1x1 two slices", make_problem(2, 32, 12, 13, 140, 1, 1), 0, 63, op::argmin{});
  run(wg<math::tf32x3>{}, "sanitizer flat tf32x3 1x1 two slices split", make_problem(1, 48, 9, 11, 40, 1, 1), 2, 64, op::sum{});
  // C 28: four slices, the last half padding
  run(wg<math::tf32x3>{}, "sanitizer flat tf32x3 1x1 two slices, C 28", make_problem(2, 28, 10, 12, 20, 1, 1), 0, 66,
      op::min{});
  run(wg<math::tf32x3>{}, "sanitizer flat tf32x3 1x1 stride 2", make_problem(2, 32, 13, 14, 33, 1, 1, 0, 0, 2, 2), 0, 65,
      op::argmax{});
}
}
