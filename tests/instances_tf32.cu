// The tf32 kernels the test files share, compiled once (instances.cuh, CONVRED_TEST_INSTANCES_TF32): the
// mma.sync kernel, fused and split, and the wgmma kernel in its cooperative policy, for float.
#include "instances.cuh"

CONVRED_TEST_INSTANCES_TF32()
