/// @file namespaces.cuh
/// @brief Documentation of convred's namespaces (one namespace per folder and layer); no declarations.
///
/// Included by nothing: the namespace pages of the API reference come from here. docs/architecture.md
/// draws the layers.
#pragma once

/// @brief convred: fused conv2d -> epilogue -> reduction across output channels, header-only CUDA C++.
///
/// Start here:
/// - device::conv2d_reduce: the fused entry point, y = R over k of e(b[k] + conv2d(x, W)[:, k]);
/// - device::conv2d (full conv output) and device::channel_reduce (the reduction of an existing tensor);
/// - device::pack_filter + device::conv2d_reduce_packed: the Hopper (sm_90a) wgmma path;
/// - conv2d_problem / channel_reduce_problem and validate(): shapes and their checks;
/// - op and epilogue: the reduction ops and epilogue functors (or your own types);
/// - simt_policy, mma_sync_policy, default_policy_for and the math tags: how a kernel computes;
/// - status and to_string(): what an entry point returns;
/// - reference: float64 host implementations of everything, for checking.
/// The top-level headers (functional.cuh, numeric.cuh, policy.cuh, problem.cuh, status.cuh, version.cuh)
/// are the vocabulary every layer shares.
namespace convred {

/// @brief Host entry points (device/): validate the arguments, choose a kernel and launch it on a stream;
/// each returns a convred::status and never throws. Layer above kernel.
namespace device {}

/// @brief Thin `__global__` kernels (kernel/) built from the block pieces, and the parameter blocks the
/// host fills for them. Launched by the device layer; usable directly with your own policy.
namespace kernel {}

/// @brief Host planning of kernel parameters (plan/): which problems a kernel's mainloop implements and
/// its parameter block and shared-memory layout for one (plan::wgmma_params); host only, no CUDA call.
/// Used by the device layer; the block collective a plan is for inherits it as its static interface.
namespace plan {}

/// @brief Block-wide collectives (block/): conv mainloops (SIMT, mma.sync, wgmma) with their operand
/// loaders, the fused reduction epilogue and the channel-reduction collectives. Each takes caller-placed
/// shared memory (`TempStorage`, as in CUB); compose them into your own kernel (examples/04_custom_kernel).
namespace block {}

/// @brief Warp-level tensor-core pieces (warp/): `mma.sync` wrappers and operand conversions (sm_80+).
namespace warp {}

/// @brief Warpgroup-level pieces (warpgroup/): `wgmma.mma_async` wrappers and fences (sm_90a).
namespace warpgroup {}

/// @brief float64 host implementations (reference/) of every computation convred performs: the ground
/// truth of the tests and examples. Slow by design; use the `_at` forms to check a sample of pixels.
namespace reference {}

}  // namespace convred
