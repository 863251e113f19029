// tf32x3 and accurate in one translation unit: math::accurate runs the tf32x3 kernels (the same
// instantiations), so they are compiled once.
#include "dispatch.cuh"
namespace convred_ext {
std::unique_ptr<plan> make_plan_f32_tf32x3(const convred::conv2d_problem& p) { return make_plan_of<float, convred::math::tf32x3>(p); }
std::unique_ptr<plan> make_plan_f32_accurate(const convred::conv2d_problem& p) { return make_plan_of<float, convred::math::accurate>(p); }
}  // namespace convred_ext
