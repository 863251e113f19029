// The exact kernels the test files share, compiled once (instances.cuh, CONVRED_TEST_INSTANCES_EXACT): the
// direct kernel and the SIMT kernel, fused and split, for float.
#include "instances.cuh"

CONVRED_TEST_INSTANCES_EXACT()
