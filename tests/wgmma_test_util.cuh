// Shared by the wgmma GPU test files (test_conv2d_reduce_wgmma_gpu.cu: the fused kernel;
// test_conv2d_reduce_wgmma_split_gpu.cu: conv2d_reduce_packed_split's modes): the planner options the
// checks force, the Hopper check, the wgmma shapes and the fused sweep.
#pragma once

#include "conv2d_reduce_check.cuh"

using namespace convred_test_fused;
using convred::wgmma_policy;
namespace math = convred::math;

namespace {

template <class Math>
using wg = typename convred::default_wgmma_policy<Math>::type;

/// The planner options (device::plan_options) this file's checks pass to the functions that plan the
/// wgmma kernel (conv2d_reduce_packed_split through forced_entry, packed_split_workspace_bytes,
/// max_packed_k_splits, detail::wgmma_plan): set for a scope by force_choice or force_tail, the defaults
/// (the time model's choices) otherwise.
inline convred::device::plan_options& forced_options() {
  static convred::device::plan_options o;
  return o;
}

/// Forces the tiles and the unsplit mode of conv2d_reduce_packed_split (forced_options()) for its lifetime: tiles
/// 1 rows, 2 flat, 3 direct; pass 1 off, 2 on (the values of device::wgmma_tiling, wgmma_pass_mode).
struct force_choice {
  force_choice(int tiles, int pass) {
    forced_options() = {};
    forced_options().tiles = static_cast<convred::device::wgmma_tiling>(tiles);
    forced_options().pass = static_cast<convred::device::wgmma_pass_mode>(pass);
  }
  ~force_choice() { forced_options() = {}; }
};

/// The options forced_options() holds, for packed_split_entry.
struct forced {
  static convred::device::plan_options get() { return forced_options(); }
};
/// Policy tag of check_fused for conv2d_reduce_packed_split<Policy> with the forced options
/// (packed_split_entry, conv2d_reduce_check.cuh).
template <class Policy>
using forced_entry = packed_split_entry<Policy, forced>;

}  // namespace

namespace {

/// True when eligible shapes must take the wgmma kernel: a compute capability 9.0 device and a test
/// binary built with sm_90a code (CONVRED_TEST_EXPECT_WGMMA, set by tests/CMakeLists.txt).
inline bool on_hopper() {
#ifdef CONVRED_TEST_EXPECT_WGMMA
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

/// Shapes the wgmma kernel serves (NCHW fp32, W a multiple of 4): odd C (channel tails inside a stage),
/// K in {1, 17, 33, 100, 128} and K > 128 in several channel passes of 128 (130: a 2-channel last pass;
/// 257; 513 with a 1x1 filter; the reduction state carried across passes), narrow images (Q + S - 1 <=
/// 32: planes of pitch 16 or 32, one m64 row over 4 or 2 output rows, most of the small shapes here), 1x1 / 3x3 / 3x1 / 1x3 (unrolled and run-time tap loops), padding 0-3 (TMA
/// box starts shifted to 16-byte alignment), outputs narrower and wider than the 64-column tile with
/// partial tiles, and one problem with more tiles than SMs (several tiles per persistent block, the
/// pipeline crossing tile boundaries).
inline std::vector<conv2d_problem> wgmma_shapes() {
  return {
      make_problem(2, 7, 11, 16, 33, 3, 3, 1, 1),    //
      make_problem(2, 5, 9, 44, 17, 3, 3, 2, 3),     //
      make_problem(1, 3, 9, 12, 1, 1, 1),            //
      make_problem(3, 33, 7, 8, 128, 3, 1, 1, 0),    //
      make_problem(2, 17, 20, 40, 100, 1, 3, 0, 2),  //
      make_problem(1, 65, 12, 12, 65, 3, 3, 0, 0),   //
      make_problem(1, 12, 7, 132, 40, 3, 3, 1, 1),   // Q = 132: three column tiles, the last of 4 columns
      make_problem(2, 3, 9, 20, 9, 2, 2, 1, 1),      // 2x2: the run-time tap loop
      make_problem(8, 9, 70, 72, 128, 3, 3, 0, 0),   // 272 tiles
      make_problem(2, 7, 10, 20, 130, 3, 3, 1, 1),   // 2 channel passes
      make_problem(1, 33, 9, 68, 257, 3, 3, 1, 1),   // 3 passes, two column tiles
      make_problem(2, 3, 6, 12, 513, 1, 1),          // 5 passes, 1x1
      make_problem(2, 9, 28, 28, 64, 3, 3, 1, 1),    // narrow: pitch 32, 8-row tiles (ResNet layer2-like)
      make_problem(1, 8, 21, 28, 40, 3, 3, 0, 0),    // narrow: pitch 32 (Q = 26), a partial last tile
      // the gathering producer (no TMA): W % 4 != 0, stride 2 (phase planes)
      make_problem(2, 6, 13, 14, 40, 3, 3, 1, 1),              // W = 14
      make_problem(2, 9, 20, 22, 70, 3, 3, 1, 1, 2, 2),        // stride 2, narrow (Q = 11)
      make_problem(1, 5, 9, 150, 33, 3, 3, 1, 1, 2, 2),        // stride 2, two column tiles
      make_problem(2, 17, 14, 14, 200, 1, 1, 0, 0, 2, 2),      // 1x1 stride 2, 2 channel passes
      make_problem(1, 4, 11, 13, 9, 3, 2, 1, 0, 2, 2),         // 3x2 stride 2: run-time taps, phases 2 x 2
      make_problem(1, 3, 10, 10, 16, 2, 2, 0, 0, 2, 2),        // 2x2 stride 2: each tap its own phase
      make_problem(2, 5, 12, 14, 20, 5, 5, 2, 2),              // 5x5 (Inception)
      make_problem(1, 6, 10, 12, 24, 7, 1, 3, 0),              // 7x1 (Inception)
  };
}

template <class Policy>
void sweep(const char* label, std::uint64_t seed) {
  require_gpu();
  const bool hopper = on_hopper();
  for (const conv2d_problem& p : wgmma_shapes()) {
    const std::string name = std::string(label) + " " + describe(p);
    INFO("case: " << name);
    // the wgmma kernel serves every one, 3xTF32 those whose two operand stages fit in shared memory (up
    // to 9 taps at stride 1, fewer than 9 at stride 2) and at stride 1 the others on its direct tiles of
    // filter rows (which conv2d_reduce_packed, row tiles only, leaves to the mma.sync fallback)
    const int taps = static_cast<int>(p.R * p.S);
    const bool served = Policy::parts == 1 || taps < 9 || p.stride_h == 1;
    if (hopper) CHECK((convred::device::packed_filter_bytes<Policy, float>(p) > 0) == served);
    check_scaled<Policy, float>(name + " min", p, ++seed, op::min{});
    check_scaled<Policy, float>(name + " argmax", p, ++seed, op::argmax{}, -1.5f);
    check_scaled<Policy, float>(name + " mean", p, ++seed, op::mean{}, 2.0f, false);
    check_scaled<Policy, float>(name + " user range op", p, ++seed, range_op{});
  }
  // Integer-valued data is exact in every math: values and argmin indices (ties: lowest k) exactly.
  const conv2d_problem p = make_problem(2, 9, 10, 40, 65, 3, 3, 1, 1);
  if (hopper) CHECK(convred::device::packed_filter_bytes<Policy, float>(p) > 0);
  const auto d = make_data<float>(p, ++seed, data_kind::integer);
  opts o;
  o.exact = true;
  check_fused<Policy>(std::string(label) + " exact argmin", p, d, op::argmin{}, epi::scale<float>{2.0f},
                      epi::scale<float>{2.0f}, o);
  check_fused<Policy>(std::string(label) + " exact sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
  // Shapes the wgmma kernel does not serve go to the mma.sync fallback with the same math.
  for (const conv2d_problem& q : {make_problem(2, 8, 13, 17, 3, 3, 3, 2, 1, 1, 2, 2, 2, 1),  // stride, dilation
                                  make_problem(1, 6, 9, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2),   // groups
                                  make_problem(2, 7, 11, 13, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, layout::nhwc),
                                  make_problem(1, 5, 9, 9, 13, 3, 3, 1, 1, 3, 3)}) {  // stride 3
    CHECK(convred::device::packed_filter_bytes<Policy, float>(q) == 0);
    check_scaled<Policy, float>(std::string(label) + " fallback " + describe(q), q, ++seed, op::argmin{});
  }
}

}  // namespace
