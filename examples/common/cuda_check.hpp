/// @file examples/common/cuda_check.hpp
/// @brief CHECK_CUDA for the examples and benchmarks: a failed CUDA runtime call throws
/// std::runtime_error naming the error, the call and the place; device_buffer, device memory that frees
/// itself.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace convred_examples {

/// Throws std::runtime_error if `e` is not cudaSuccess, naming the error, the call text and file:line.
inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ") in " + call + " at " + file + ":" + std::to_string(line));
}

/// Device memory for n elements of T (cudaMalloc), freed when it goes out of scope; not copyable. A plain
/// buffer rather than thrust::device_vector: no fill kernel, and no thrust headers for every translation
/// unit of example 01's runs to parse.
template <class T>
class device_buffer {
 public:
  /// n elements, uninitialised.
  explicit device_buffer(std::size_t n) : n_(n) {
    if (n_ > 0) check_cuda(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc", __FILE__, __LINE__);
  }
  /// A copy of `host` (cudaMemcpy, synchronous).
  explicit device_buffer(const std::vector<T>& host) : device_buffer(host.size()) {
    if (n_ > 0)
      check_cuda(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy", __FILE__, __LINE__);
  }
  ~device_buffer() {
    if (p_) cudaFree(p_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  /// The device pointer (nullptr for 0 elements).
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace convred_examples

/// Evaluates a CUDA runtime call and throws (convred_examples::check_cuda) if it failed.
#define CHECK_CUDA(call) ::convred_examples::check_cuda((call), #call, __FILE__, __LINE__)
