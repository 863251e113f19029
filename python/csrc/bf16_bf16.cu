#include "dispatch.cuh"
namespace convred_ext {
int launch_bf16_bf16(reduce_kind r, const launch_args& a) {
  return run_plain<convred::default_policy_for<convred::math::bf16>, __nv_bfloat16>(r, a);
}
}  // namespace convred_ext
