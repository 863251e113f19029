#include "dispatch.cuh"
namespace convred_ext {
int launch_f32_fp16(reduce_kind r, const launch_args& a) { return run_packed<convred::math::fp16>(r, a); }
std::size_t packed_bytes_fp16(const convred::conv2d_problem& p) { return packed_bytes_for<convred::math::fp16>(p); }
int pack_fp16(const convred::conv2d_problem& p, const float* w, void* packed, std::size_t bytes, cudaStream_t s) {
  return pack_for<convred::math::fp16>(p, w, packed, bytes, s);
}
}  // namespace convred_ext
