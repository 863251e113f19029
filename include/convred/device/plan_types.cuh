/// @file device/plan_types.cuh
/// @brief What the planner needs to know about a device (device_info); the kernel families' kinds
/// (kernel_kind) are in plan_config.cuh, included here.
#pragma once

#include <cuda_runtime.h>

#include "plan_config.cuh"
#include "wgmma_launch.cuh"

namespace convred::device {

// (kernel_kind: device/plan_config.cuh)

/// @brief What the planner needs to know about a device: its compute capability, whether the program
/// carries sm_90a code that runs on it, and its number of SMs. Plain data, so that plans can be made (and
/// tested) for a device other than the current one.
struct device_info {
  int cc_major = 0;          ///< compute capability major (0: no device)
  int cc_minor = 0;          ///< compute capability minor
  bool wgmma_image = false;  ///< an sm_90a image of convred's kernels runs on the device
  /// streaming multiprocessors (cudaDevAttrMultiProcessorCount: 132 on an H200, 108 on an A100); 0:
  /// unknown, and the plan never splits (choose_k_splits)
  int sm_count = 0;

  /// The current device (cudaGetDevice); all zero when there is none. A CUDA error pending from the
  /// caller's own work is left alone; one caused here (no device) is cleared.
  static device_info current() {
    device_info d;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();  // ours: no usable device
      return device_info{};
    }
    d.wgmma_image = detail::wgmma_available();
    return d;
  }
};

}  // namespace convred::device
