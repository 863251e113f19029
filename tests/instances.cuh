/// @file instances.cuh
/// @brief The kernels many test files share, compiled once for the whole test binary: explicit
/// instantiations of the host functions that launch them, declared here `extern template` and defined in
/// tests/instances_*.cu.
///
/// A test file that runs device::conv2d_reduce_plan<float, Math>::run with an op and an epilogue compiles
/// the kernels of every family the plan may pick for them (direct, SIMT, mma.sync fused and split in the
/// default and the narrow policies, wgmma in both policies); the entry points' own tests compile some of the same ones again. nvcc compiles each
/// kernel again in every translation unit that instantiates it (about 43 % of the kernels of the test
/// objects were such copies). The functions below hold those launches: an including file only calls them,
/// and each is compiled once, in the instances_*.cu file that defines it (CONVRED_TEST_INSTANCES_* with an
/// empty EXTERN argument). Each is the lowest function that holds a family's launches for one op and
/// epilogue and that every caller shares: the planner's families, the entry points and the tests call them
/// alike.
///
/// The list: float data; the six standard ops with epilogue::scale<float> (the tests' usual epilogue);
/// min and argmax with epilogue::identity (the planner's default epilogue) for the exact kernels and tf32;
/// argmin with epilogue::per_channel_scale<float> for the direct kernel. Only what several test files use
/// (anything else each file instantiates itself, as before), and only types every translation unit names
/// alike: convred's ops and epilogues, never a type of an anonymous namespace or a device lambda. The
/// policies are the resolved ones the planner passes: a test's call with default_policy or
/// default_policy_for<M> is another specialization, compiled in its own file as before.
///
/// Include this header after the convred headers and before any code that calls these functions (an
/// explicit instantiation declaration must precede the first use in a translation unit):
/// conv2d_reduce_check.cuh does (for every test file built on it), and so do test_plan_host.cu,
/// test_split_host.cu and test_validation_host.cu. An entry declared here but defined in no instances_*.cu
/// file is a link error (undefined reference to the function), not a silent recompilation; a file that does
/// not include this header still builds (its own copies, as before).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/conv2d_reduce_direct.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>
#include <convred/device/conv2d_reduce_split.cuh>
#include <convred/functional.cuh>
#include <convred/policy.cuh>

/// The direct kernel (every filter variant and stride it unrolls) for float, op OP, epilogue EPI: the
/// direct family, device::conv2d_reduce_direct and the tests of forced tilings all launch it from here.
#define CONVRED_TEST_DIRECT(EXTERN, OP, EPI)                                                                 \
  EXTERN template convred::status convred::device::detail::conv2d_reduce_direct_with<float, OP, EPI>(         \
      const convred::device::direct_config*, const convred::conv2d_problem&, const float*, const float*,     \
      const float*, float*, std::int64_t*, OP, EPI, cudaStream_t, bool);

/// The fused kernel and the split path (partial sums, then the fixup) with a SIMT or mma.sync policy P.
#define CONVRED_TEST_FUSED_SPLIT(EXTERN, P, OP, EPI)                                                         \
  EXTERN template convred::status convred::device::conv2d_reduce<P, float, OP, EPI>(                          \
      const convred::conv2d_problem&, const float*, const float*, const float*, float*, std::int64_t*, OP,   \
      EPI, cudaStream_t);                                                                                      \
  EXTERN template convred::status convred::device::conv2d_reduce_split<P, float, OP, EPI>(                    \
      const convred::conv2d_problem&, const float*, const float*, const float*, float*, std::int64_t*,       \
      void*, std::size_t, int, OP, EPI, cudaStream_t);

/// The wgmma kernel with policy P: every variant packed_split_run launches (conv2d_reduce_packed_split and
/// the planner's wgmma family; with the fixup and pass-combine kernels) and conv2d_reduce_packed's, whose
/// variants are among them, so that it costs the defining file only its host code.
#define CONVRED_TEST_WGMMA(EXTERN, P, OP, EPI)                                                               \
  EXTERN template convred::status convred::device::detail::packed_split_run<P, float, OP, EPI>(              \
      const convred::device::detail::wgmma_plan_t&, std::size_t, const convred::conv2d_problem&,             \
      const float*, const float*, void*, std::size_t, const float*, float*, std::int64_t*, int, OP, EPI,     \
      cudaStream_t, void*, std::size_t);                                                                       \
  EXTERN template convred::status convred::device::conv2d_reduce_packed<P, float, OP, EPI>(                   \
      const convred::conv2d_problem&, const float*, const float*, const void*, std::size_t, const float*,    \
      float*, std::int64_t*, OP, EPI, cudaStream_t);

namespace convred_test_instances {
/// the narrow family's 32-channel SIMT policy (a name without a comma, for the macros)
using narrow32_simt = convred::narrow_simt_policy<float, 32>::type;
}  // namespace convred_test_instances

/// The planner's policies: the exact kernels (direct, SIMT) and, per tensor-core math M, the mma.sync
/// kernel and the wgmma kernel in its cooperative policy (also the wgmma kernel's fallback) and, where the
/// planner may take it (tf32, bf16; not 3xTF32), its ping-pong policy.
#define CONVRED_TEST_EXACT(EXTERN, OP, EPI)                                              \
  CONVRED_TEST_DIRECT(EXTERN, OP, EPI)                                                   \
  CONVRED_TEST_FUSED_SPLIT(EXTERN, convred::default_simt_policy<float>::type, OP, EPI) \
  CONVRED_TEST_FUSED_SPLIT(EXTERN, convred::narrow_simt_policy<float>::type, OP, EPI)    \
  CONVRED_TEST_FUSED_SPLIT(EXTERN, convred_test_instances::narrow32_simt, OP, EPI)
#define CONVRED_TEST_COOPERATIVE(EXTERN, M, OP, EPI)                                    \
  CONVRED_TEST_FUSED_SPLIT(EXTERN, convred::default_mma_sync_policy<M>::type, OP, EPI) \
  CONVRED_TEST_WGMMA(EXTERN, convred::default_wgmma_policy<M>::type, OP, EPI)
#define CONVRED_TEST_PINGPONG(EXTERN, M, OP, EPI) \
  CONVRED_TEST_WGMMA(EXTERN, convred::wgmma_pingpong<convred::default_wgmma_policy<M>::type>::type, OP, EPI)
#define CONVRED_TEST_NARROW(EXTERN, M, OP, EPI) \
  CONVRED_TEST_FUSED_SPLIT(EXTERN, convred::narrow_mma_sync_policy<M>::type, OP, EPI)

/// F(ARGS..., OP, EPI) for the six standard ops with epilogue::scale<float>; ARGS: EXTERN, then M for the
/// macros of one tensor-core math.
#define CONVRED_TEST_SCALED_OPS(F, ...)                                     \
  F(__VA_ARGS__, convred::op::argmin, convred::epilogue::scale<float>)      \
  F(__VA_ARGS__, convred::op::argmax, convred::epilogue::scale<float>)      \
  F(__VA_ARGS__, convred::op::min, convred::epilogue::scale<float>)         \
  F(__VA_ARGS__, convred::op::max, convred::epilogue::scale<float>)         \
  F(__VA_ARGS__, convred::op::sum, convred::epilogue::scale<float>)         \
  F(__VA_ARGS__, convred::op::mean, convred::epilogue::scale<float>)
/// F(ARGS..., OP, EPI) for min and argmax with epilogue::identity.
#define CONVRED_TEST_IDENTITY_OPS(F, ...)                    \
  F(__VA_ARGS__, convred::op::min, convred::epilogue::identity) \
  F(__VA_ARGS__, convred::op::argmax, convred::epilogue::identity)

/// The lists, one per instances_*.cu file (each file defines one).
#define CONVRED_TEST_INSTANCES_EXACT(EXTERN)            \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_EXACT, EXTERN)   \
  CONVRED_TEST_IDENTITY_OPS(CONVRED_TEST_EXACT, EXTERN) \
  CONVRED_TEST_DIRECT(EXTERN, convred::op::argmin, convred::epilogue::per_channel_scale<float>)
#define CONVRED_TEST_INSTANCES_TF32(EXTERN)                                       \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_COOPERATIVE, EXTERN, convred::math::tf32)  \
  CONVRED_TEST_IDENTITY_OPS(CONVRED_TEST_COOPERATIVE, EXTERN, convred::math::tf32)
#define CONVRED_TEST_INSTANCES_TF32_PINGPONG(EXTERN)                            \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_PINGPONG, EXTERN, convred::math::tf32)   \
  CONVRED_TEST_IDENTITY_OPS(CONVRED_TEST_PINGPONG, EXTERN, convred::math::tf32) \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_NARROW, EXTERN, convred::math::tf32)     \
  CONVRED_TEST_IDENTITY_OPS(CONVRED_TEST_NARROW, EXTERN, convred::math::tf32)
#define CONVRED_TEST_INSTANCES_TF32X3(EXTERN) \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_COOPERATIVE, EXTERN, convred::math::tf32x3)
#define CONVRED_TEST_INSTANCES_BF16(EXTERN)                                      \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_COOPERATIVE, EXTERN, convred::math::bf16) \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_PINGPONG, EXTERN, convred::math::bf16)    \
  CONVRED_TEST_SCALED_OPS(CONVRED_TEST_NARROW, EXTERN, convred::math::bf16)

CONVRED_TEST_INSTANCES_EXACT(extern)
CONVRED_TEST_INSTANCES_TF32(extern)
CONVRED_TEST_INSTANCES_TF32_PINGPONG(extern)
CONVRED_TEST_INSTANCES_TF32X3(extern)
CONVRED_TEST_INSTANCES_BF16(extern)
