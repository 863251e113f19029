/// @file examples/common/cuda_check.hpp
/// @brief CHECK_CUDA for the examples and benchmarks: a failed CUDA runtime call throws
/// std::runtime_error naming the error, the call and the place.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace convred_examples {

/// Throws std::runtime_error if `e` is not cudaSuccess, naming the error, the call text and file:line.
inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ") in " + call + " at " + file + ":" + std::to_string(line));
}

}  // namespace convred_examples

/// Evaluates a CUDA runtime call and throws (convred_examples::check_cuda) if it failed.
#define CHECK_CUDA(call) ::convred_examples::check_cuda((call), #call, __FILE__, __LINE__)
