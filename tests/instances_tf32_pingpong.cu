// The tf32 kernels the test files share, compiled once (instances.cuh, CONVRED_TEST_INSTANCES_TF32_PINGPONG):
// the wgmma kernel in its ping-pong policy and the mma.sync kernel in the narrow policy (fused and split), for
// float.
#include "instances.cuh"

CONVRED_TEST_INSTANCES_TF32_PINGPONG()
