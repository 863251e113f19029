#include "dispatch.cuh"
namespace convred_ext {
int launch_f16_fp16(reduce_kind r, const launch_args& a) {
  return run_plain<convred::default_policy_for<convred::math::fp16>, __half>(r, a);
}
}  // namespace convred_ext
