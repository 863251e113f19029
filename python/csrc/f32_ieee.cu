#include "dispatch.cuh"
namespace convred_ext {
std::unique_ptr<plan> make_plan_f32_ieee(const convred::conv2d_problem& p) { return make_plan_of<float, convred::math::ieee>(p); }
}  // namespace convred_ext
