/// @file device/plan_types.cuh
/// @brief The planner's vocabulary: the kernel families it picks from (kernel_kind) and what it needs to
/// know about a device (device_info).
#pragma once

#include <cuda_runtime.h>

#include "wgmma_launch.cuh"

namespace convred::device {

/// @brief The kernel families a conv2d_reduce_plan chooses from.
enum class kernel_kind {
  simt,      ///< exact CUDA-core FMA kernel (kernel::conv2d_reduce_kernel with a simt_policy): any GPU, any shape
  mma_sync,  ///< tensor-core mma.sync kernel (an mma_sync_policy): sm_80 and newer, any shape and layout
  wgmma,     ///< Hopper packed-filter kernel (conv2d_reduce_packed with a wgmma_policy): sm_90a, see packed_filter_bytes
  direct     ///< exact direct-convolution kernel (conv2d_reduce_direct): C/groups == 1 (depthwise), any GPU
};

/// @brief Name of a kernel_kind ("simt", "mma.sync", "wgmma", "direct").
inline const char* to_string(kernel_kind k) noexcept {
  switch (k) {
    case kernel_kind::simt: return "simt";
    case kernel_kind::mma_sync: return "mma.sync";
    case kernel_kind::wgmma: return "wgmma";
    case kernel_kind::direct: return "direct";
  }
  return "unknown";
}

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
