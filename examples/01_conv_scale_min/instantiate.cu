/// @file examples/01_conv_scale_min/instantiate.cu
/// @brief Example 01's runs, for a build without CMake: `nvcc ... main.cu instantiate.cu` gives the main
/// job's binary with the seed set (float data: every op under the default math, the seed's op under every
/// math) from this one translation unit (about 2 minutes of one core).
///
/// CMake builds the same set from several smaller translation units that it generates (CMakeLists.txt,
/// `ex01_runs`, the single place that lists what each binary holds), so that they compile in parallel; it
/// does not compile this file. Either way each translation unit only says which runs it instantiates:
/// CONVRED_EX01_RUNS(element type, math, ops...) (run.cuh).
#include "run.cuh"

CONVRED_EX01_RUNS(float, accurate, convred::op::min, convred::op::max, convred::op::sum, convred::op::mean,
                  convred::op::argmin, convred::op::argmax)
CONVRED_EX01_RUNS(float, ieee, convred::op::min)
CONVRED_EX01_RUNS(float, tf32, convred::op::min)
CONVRED_EX01_RUNS(float, tf32x3, convred::op::min)
CONVRED_EX01_RUNS(float, bf16, convred::op::min)
CONVRED_EX01_RUNS(float, fp16, convred::op::min)
