/// @file detail/pdl.cuh
/// @brief Programmatic dependent launch (PDL, sm_90 and later), device side: a kernel launched with the
/// programmatic stream serialization attribute (device::detail::launch_kernel) may start while the kernel
/// before it in the stream is still running; it must wait for that kernel's completion and memory
/// (griddepcontrol.wait) before it reads what that kernel wrote or writes what that kernel reads. CUDA C++
/// Programming Guide, "Programmatic Dependent Launch and Synchronization"; PTX ISA, "griddepcontrol".
#pragma once

namespace convred::detail {

/// @brief Blocks until the grids this one depends on programmatically have completed and their memory
/// operations are visible. A no-op in a grid launched without the PDL attribute and below sm_90.
__device__ __forceinline__ void wait_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// @brief Lets the grid launched after this one with the PDL attribute start (its blocks take SMs as they
/// free up, then wait in wait_prior_grids), instead of after this grid's last block has exited. A no-op
/// below sm_90 and when no such grid follows.
__device__ __forceinline__ void launch_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace convred::detail
