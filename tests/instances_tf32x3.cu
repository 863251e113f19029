// The 3xTF32 kernels the test files share, compiled once (instances.cuh, CONVRED_TEST_INSTANCES_TF32X3): the
// mma.sync kernel, fused and split, and the wgmma kernel, for float (math::accurate's kernels).
#include "instances.cuh"

CONVRED_TEST_INSTANCES_TF32X3()
