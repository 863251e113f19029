// A kernel family from outside convred, for tests/test_family_gpu.cu: what adding a family takes (this
// header and one family_list entry; see convred/device/family/family.cuh for the members a family has).
//
// narrow_k: the SIMT kernel with 32-channel tiles for layers of at most 32 output channels and groups 1,
// where the default SIMT policy's 128-channel tile computes mostly padding. Exact FMA, like the SIMT
// family, so it may serve any math; a real family gives a cost model too (convred's own narrow family,
// device/family/simt_narrow.cuh, does, with 16-channel tiles; here: none, seconds 0).
#pragma once

#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/family/family.cuh>

#include <string>

namespace convred_test_family {

using convred::conv2d_problem;
using convred::status;
namespace dev = convred::device;

template <class T>
struct narrow_k : dev::family::family_defaults<narrow_k<T>, T> {  // no cost model, nothing to prepare
  /// 64 pixels x 32 channels per block, 8-deep GEMM_K slices, 4 x 4 accumulators per thread
  using policy = convred::simt_policy<64, 32, 8, 4, 4, 1, 2>;
  static constexpr dev::kernel_kind kind = dev::kernel_kind::user;
  static constexpr const char* name = "narrow-K";

  static bool available(const dev::device_info& d) { return d.cc_major > 0; }
  static const char* can_implement(const conv2d_problem& p, const dev::device_info& d, const dev::plan_options&) {
    if (!available(d)) return "no CUDA device";
    if (p.groups != 1) return "groups != 1";
    return p.K <= policy::block_n ? nullptr : "K above one 32-channel tile";
  }
  static dev::plan_config configure(const conv2d_problem&, const dev::device_info&, const dev::plan_options&) {
    return {};  // no workspace, no splits, no time model
  }
  static std::string describe(const conv2d_problem&, const dev::plan_config&, const dev::device_info&, const std::string&) {
    return "narrow-K simt (exact FMA, 64-pixel x 32-channel tiles): K <= 32";
  }
  template <class Op, class Epilogue>
  static status launch(const conv2d_problem& p, const dev::plan_config&, const dev::run_arguments<T>& a, Op op,
                       Epilogue epi, cudaStream_t stream) {
    return dev::conv2d_reduce<policy>(p, a.x, a.w, a.bias, a.y, a.indices, op, epi, stream);
  }
};

}  // namespace convred_test_family
