/// @file device/channel_reduce.cuh
/// @brief Host entry point: reduction across the channel dim of an existing (N, C, H, W) tensor.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../functional.cuh"
#include "../problem.cuh"
#include "../status.cuh"

namespace convred::device {

/// @brief y[n,0,h,w] = Op over c in [0,C) of e(x[n,c,h,w], c); for index ops also indices[n,0,h,w].
///
/// TODO(helper): implement (kernel/channel_reduce.cuh + block pieces on cub::BlockReduce/WarpReduce).
template <class T, class Op, class Epilogue = epilogue::identity>
status channel_reduce(const channel_reduce_problem& p, const T* x, T* y, std::int64_t* indices, Op op = {},
                      Epilogue epi = {}, cudaStream_t stream = nullptr);

}  // namespace convred::device
