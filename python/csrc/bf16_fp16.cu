#include "dispatch.cuh"
namespace convred_ext {
std::unique_ptr<plan> make_plan_bf16_fp16(const convred::conv2d_problem& p) { return make_plan_of<__nv_bfloat16, convred::math::fp16>(p); }
}  // namespace convred_ext
