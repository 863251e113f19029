/// @file arch.cuh
/// @brief Compile-time guard: convred's device code needs compute capability 8.0 (sm_80) or newer.
///
/// Every kernel path relies on sm_80 instructions (`cp.async` staging, `mma.sync` with tf32/bf16
/// operands). Without this guard a build for an older target (for example nvcc's default architecture,
/// which is what CMake picks when a project names none) fails late with dozens of ptxas errors; with it,
/// the device compilation pass stops at once with the single message below. Host-only compilation
/// (`__CUDA_ARCH__` undefined: the host pass of nvcc, or a C++ compiler reading reference/) is unaffected.
#pragma once

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "convred needs a GPU architecture of sm_80 or newer: compile with -arch=sm_80 (or sm_86, sm_89, sm_90a), e.g. CMake -DCMAKE_CUDA_ARCHITECTURES=90a or set(CMAKE_CUDA_ARCHITECTURES 80) before project()"
#endif
