#include "dispatch.cuh"
namespace convred_ext {
int launch_bf16_ieee(reduce_kind r, const launch_args& a) {
  return run_plain<convred::default_policy_for<convred::math::ieee>, __nv_bfloat16>(r, a);
}
}  // namespace convred_ext
