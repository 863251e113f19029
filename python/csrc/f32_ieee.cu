#include "dispatch.cuh"
namespace convred_ext {
int launch_f32_ieee(reduce_kind r, const launch_args& a) {
  return run_plain<convred::default_policy_for<convred::math::ieee>, float>(r, a);
}
}  // namespace convred_ext
