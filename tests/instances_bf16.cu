// The bf16 kernels the test files share, compiled once (instances.cuh, CONVRED_TEST_INSTANCES_BF16): the
// mma.sync kernel, fused and split, in the default and the narrow policy, and the wgmma kernel in its
// cooperative and ping-pong policies, for float.
#include "instances.cuh"

CONVRED_TEST_INSTANCES_BF16()
