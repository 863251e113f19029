// math::ieee for float x, and the exact-FMA kernels (SIMT fused and split, depthwise direct) that every math's
// plan for float may run, compiled here once for the whole extension (dispatch.cuh, CONVRED_EXT_EXACT_KERNELS).
#define CONVRED_EXT_INSTANTIATE_EXACT
#include "dispatch.cuh"
CONVRED_EXT_EXACT_ALL_OPS(, float)
namespace convred_ext {
std::unique_ptr<plan> make_plan_f32_ieee(const convred::conv2d_problem& p) { return make_plan_of<float, convred::math::ieee>(p); }
}  // namespace convred_ext
