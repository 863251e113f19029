// math::ieee for __nv_bfloat16 x, and the exact-FMA kernels (SIMT fused and split, depthwise direct) that every math's
// plan for __nv_bfloat16 may run, compiled here once for the whole extension (dispatch.cuh, CONVRED_EXT_EXACT_KERNELS).
#define CONVRED_EXT_INSTANTIATE_EXACT
#include "dispatch.cuh"
CONVRED_EXT_EXACT_ALL_OPS(, __nv_bfloat16)
namespace convred_ext {
std::unique_ptr<plan> make_plan_bf16_ieee(const convred::conv2d_problem& p) { return make_plan_of<__nv_bfloat16, convred::math::ieee>(p); }
}  // namespace convred_ext
