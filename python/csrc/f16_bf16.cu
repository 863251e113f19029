#include "dispatch.cuh"
namespace convred_ext {
std::unique_ptr<plan> make_plan_f16_bf16(const convred::conv2d_problem& p) { return make_plan_of<__half, convred::math::bf16>(p); }
}  // namespace convred_ext
