/// @file device/common.cuh
/// @brief Host-side checks shared by the device entry points (alignment, overlap, device presence).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "../status.cuh"

namespace convred::device::detail {

/// Largest dynamic shared memory a block may opt into on the largest target (sm_90: 227 KB; CUDA C++
/// Programming Guide, "Technical Specifications per Compute Capability"). A policy above it cannot launch
/// anywhere and is rejected at compile time; one between the smaller limit of an older GPU and this is
/// refused at run time by check_device (status::cuda_error when the attribute cannot be set).
inline constexpr std::size_t max_smem_per_block = 227 * 1024;

/// True if p is null or aligned to alignof(T).
template <class T>
bool aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

/// A byte range [begin, end) of a buffer; empty when begin == end.
struct span {
  std::uintptr_t begin, end;
};

/// The byte range of n elements at p (empty for null p or n = 0).
template <class T>
span make_span(const T* p, std::int64_t n) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  return p && n > 0 ? span{b, b + static_cast<std::uintptr_t>(n) * sizeof(T)} : span{b, b};
}

/// True if two non-empty ranges share a byte.
inline bool overlap(span a, span b) { return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end; }

/// True if any output overlaps any input or another output (inputs may overlap each other).
template <std::size_t NI, std::size_t NO>
bool any_overlap(const span (&in)[NI], const span (&out)[NO]) {
  for (std::size_t o = 0; o < NO; ++o) {
    for (std::size_t i = 0; i < NI; ++i)
      if (overlap(out[o], in[i])) return true;
    for (std::size_t j = o + 1; j < NO; ++j)
      if (overlap(out[o], out[j])) return true;
  }
  return false;
}

/// @brief One pointer argument of an entry point, for check_buffers: its byte range, the alignment it
/// needs, and whether the call writes it.
struct buffer_arg {
  const void* p;        ///< the pointer (may be null: null checks are the entry point's own)
  std::int64_t count;   ///< elements (0 for a null or empty buffer)
  std::size_t size;     ///< bytes per element
  std::size_t align;    ///< required alignment in bytes
  bool output;          ///< written by the call
};

/// An input buffer of n elements of T (aligned to alignof(T)); null p gives an empty range.
template <class T>
buffer_arg input(const T* p, std::int64_t n) {
  return {p, p ? n : 0, sizeof(T), alignof(T), false};
}
/// An output buffer of n elements of T (aligned to alignof(T)); null p gives an empty range.
template <class T>
buffer_arg output(const T* p, std::int64_t n) {
  return {p, p ? n : 0, sizeof(T), alignof(T), true};
}

/// The pointer and grid checks every entry point makes, in this order: misaligned_pointer (a non-null
/// pointer not aligned as required), overlapping_buffers (an output sharing a byte with an input or
/// another output; inputs may overlap each other), size_overflow (`blocks` above 2^31 - 1, the 1-D grid
/// limit); else success. Null pointers are the caller's check (which may be null differs per entry point).
template <std::size_t N>
status check_buffers(const buffer_arg (&b)[N], std::int64_t blocks = 0) {
  for (const buffer_arg& a : b)
    if (reinterpret_cast<std::uintptr_t>(a.p) % a.align != 0) return status::misaligned_pointer;
  for (std::size_t i = 0; i < N; ++i) {
    if (!b[i].output) continue;
    const span o = make_span(static_cast<const unsigned char*>(b[i].p), b[i].count * static_cast<std::int64_t>(b[i].size));
    for (std::size_t j = 0; j < N; ++j) {
      if (j == i || (b[j].output && j < i)) continue;  // each pair of outputs once
      const span x = make_span(static_cast<const unsigned char*>(b[j].p), b[j].count * static_cast<std::int64_t>(b[j].size));
      if (overlap(o, x)) return status::overlapping_buffers;
    }
  }
  if (blocks > 0x7fffffff) return status::size_overflow;
  return status::success;
}

/// True for the errors that mean "this machine cannot run the kernel": no device, a driver older than
/// the runtime, or no kernel image for the device's architecture.
inline bool is_no_device_error(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNoKernelImageForDevice ||
         e == cudaErrorInvalidDeviceFunction;
}

/// The check made before any launch: status::cuda_error if a CUDA error is already pending on this thread
/// (cudaPeekAtLastError; it is left pending for the caller, and nothing is launched on top of an unread
/// error, so a cuda_error status always means that nothing was launched), else success. A pending
/// no-device error (is_no_device_error: no device, no driver, no kernel image; sticky on a machine without
/// a driver) is not counted here: the caller's check_device then reports status::no_device.
inline status pending_status() {
  const cudaError_t e = cudaPeekAtLastError();
  return e == cudaSuccess || is_no_device_error(e) ? status::success : status::cuda_error;
}

/// pending_status() if a CUDA error is already pending (nothing done); status::no_device if there is no
/// usable CUDA device or no kernel image for it (that error is cleared); status::cuda_error for any other
/// CUDA failure (left pending for the caller). When `smem_bytes` is above the 48 KB default, raises the
/// kernel's dynamic shared-memory limit to the most the device gives it (cudaDevAttrMaxSharedMemoryPerBlockOptin
/// less the kernel's static shared memory), the same value for every call, never to `smem_bytes` itself:
/// the limit is the function's, shared by all host threads, and a thread setting a smaller one between
/// another thread's set and launch would fail that launch with cudaErrorInvalidValue (seen in the fuzz
/// test's 16 host threads). status::cuda_error (with cudaErrorInvalidValue pending) if `smem_bytes` is
/// more than that, e.g. more than 163 KB on sm_80.
template <class Kernel>
status check_device(Kernel* k, std::size_t smem_bytes = 0) {
  if (status s = pending_status(); s != status::success) return s;
  int dev = 0;
  cudaFuncAttributes attr;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, k);
  if (e == cudaSuccess && smem_bytes > 48 * 1024) {
    int optin = 0;
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    const std::size_t limit = optin > static_cast<int>(attr.sharedSizeBytes) ? optin - attr.sharedSizeBytes : 0;
    if (e == cudaSuccess && smem_bytes > limit)  // more than the device gives: the driver's own error
      e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    else if (e == cudaSuccess && static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes) < limit)
      e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit));
  }
  if (e == cudaSuccess) return status::success;
  if (is_no_device_error(e)) {
    cudaGetLastError();  // ours, not sticky: clear it
    return status::no_device;
  }
  return status::cuda_error;
}

/// @brief Launches kern<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch (PDL)
/// when `after_prior` and both the device (compute capability 9.0 or later) and the kernel's image
/// (compiled for sm_90 or later, so that its detail::wait_prior_grids is the griddepcontrol.wait
/// instruction) support it: the kernel may then start while the kernel before it in the stream finishes,
/// and must call detail::wait_prior_grids before touching that kernel's outputs. Used for the second and
/// third kernels of convred's own launch chains (packing, main kernel, fixup or combine), whose launch and
/// prologue then overlap the previous kernel's tail. A launch error is left pending (launch_status).
template <class... Params, class... Args>
void launch_kernel(bool after_prior, void (*kern)(Params...), dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, Args... args) {
  if (after_prior) {
    int dev = 0, major = 0;
    cudaFuncAttributes attr{};
    after_prior = cudaGetDevice(&dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9 &&
                  cudaFuncGetAttributes(&attr, kern) == cudaSuccess && attr.ptxVersion >= 90;
  }
  if (!after_prior) {
    kern<<<grid, block, smem, stream>>>(static_cast<Params>(args)...);
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cfg.attrs = attr, cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kern, static_cast<Params>(args)...);
}

/// Status of a launch just made: success unless a CUDA error is pending (left for the caller). Called
/// right after check_device, which returned success only with no error pending, so a pending error here
/// is the launch's own: the kernel was not enqueued.
inline status launch_status() { return cudaPeekAtLastError() == cudaSuccess ? status::success : status::cuda_error; }

}  // namespace convred::device::detail
