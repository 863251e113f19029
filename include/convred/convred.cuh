/// @file convred.cuh
/// @brief Umbrella header: everything public in convred.
#pragma once

#include "version.cuh"

#include "functional.cuh"
#include "numeric.cuh"
#include "policy.cuh"
#include "problem.cuh"
#include "status.cuh"
#include "device/channel_reduce.cuh"
#include "device/conv2d_reduce.cuh"
#include "device/conv2d_reduce_packed.cuh"
#include "device/conv2d_reduce_split.cuh"
#include "device/conv2d_reduce_plan.cuh"
#include "reference/conv2d.hpp"
