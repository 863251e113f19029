#include "dispatch.cuh"
namespace convred_ext {
std::unique_ptr<plan> make_plan_f32_fp16(const convred::conv2d_problem& p) { return make_plan_of<float, convred::math::fp16>(p); }
}  // namespace convred_ext
