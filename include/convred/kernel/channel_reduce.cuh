/// @file kernel/channel_reduce.cuh
/// @brief Thin `__global__` kernels for the standalone channel reduction, composing the block collectives
/// of block/channel_reduce.cuh, their policy and their parameter block.
///
/// The host entry point (device/channel_reduce.cuh) picks one kernel and its launch shape at run time
/// (see `device::make_channel_reduce_plan`). All kernels have the same signature
/// `(channel_reduce_params<T>, Op, Epilogue)`, one block per tile (1-D grid, `Policy::threads` threads).
#pragma once

#include <cstdint>

#include "../block/channel_reduce.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::kernel {

/// @brief Which kernel family the channel reduction uses: chosen by the run-time rule (`automatic`), or
/// forced by a policy (for tests and benchmarks).
enum class channel_reduce_path : int {
  automatic = 0,  ///< the documented rule of device::make_channel_reduce_plan
  tile = 1,       ///< always a tile kernel (NCHW: nchw_channel_reduce; NHWC: nhwc_channel_reduce)
  pixel = 2       ///< always one block per pixel (pixel_channel_reduce)
};

/// @brief Default policy of the channel reduction: a plain type with static members. To change some,
/// derive and redeclare them, e.g.
/// `struct my_policy : convred::kernel::channel_reduce_policy { static constexpr int unroll = 4; };`
/// and call `device::channel_reduce<my_policy>(...)`.
struct channel_reduce_policy {
  /// Threads per block of every kernel (a multiple of 32, at least 256 so that 32 NCHW slices still leave
  /// 8 threads (128 bytes of 16-byte loads) per channel row).
  static constexpr int threads = 256;
  /// Channels whose loads a thread issues before folding them: 4 x 16 bytes = 64 bytes in flight per thread
  /// on the vector paths (x 4 scalar pixels on the NCHW scalar path). Measured on an H200 for the
  /// (64,128,254,254) fp32 NCHW min: unroll 4 0.493 ms, 8 0.511 ms (48 registers: 5 blocks per SM instead
  /// of 8), 16 0.565 ms.
  static constexpr int unroll = 4;
  /// Cache hint of the loads of x (block::load_hint).
  static constexpr block::load_hint hint = block::load_hint::readonly;
  /// Kernel family: run-time rule, or forced.
  static constexpr channel_reduce_path path = channel_reduce_path::automatic;
  /// NCHW tile kernel: channel slices per tile; 0 = run-time rule, else forced (power of two <= threads / 8
  /// and <= 32).
  static constexpr int slices = 0;
  /// NHWC tile kernel: lanes per pixel; 0 = run-time rule, else forced (4 or 32).
  static constexpr int lanes = 0;
  /// Allow 16-byte vector loads (used only when x is 16-byte aligned and HW (NCHW) or C (NHWC) is a
  /// multiple of 16 / sizeof(T)); false forces scalar loads everywhere.
  static constexpr bool vectorize = true;
};

/// @brief Scalar-path pixels per thread in the NCHW tile kernel: 4 (2 for double), striped across the block,
/// so a thread has `4 * unroll` (`2 * unroll`) scalar loads in flight.
template <class T>
inline constexpr int nchw_scalar_items = sizeof(T) >= 8 ? 2 : 4;

/// @brief Elements in one 16-byte vector of T: 4 float, 2 double, 8 __half / __nv_bfloat16.
template <class T>
inline constexpr int vector_elems = static_cast<int>(16 / sizeof(T));

/// @brief Everything the channel-reduction kernels read, passed by value (built by the device layer).
template <class T>
struct channel_reduce_params {
  const T* x = nullptr;                ///< input (N, C, H, W) in `x_layout`
  T* y = nullptr;                      ///< output (N, 1, H, W), or nullptr (index ops with indices only)
  std::int64_t* indices = nullptr;     ///< index output (N, 1, H, W), or nullptr
  std::int64_t pixels = 0;             ///< N*H*W
  std::int64_t hw = 0;                 ///< H*W
  std::int64_t image_skip = 0;         ///< (C-1)*H*W: NCHW offset of pixel q is q + (q / hw) * image_skip
  std::int64_t units = 0;              ///< NCHW tile kernel: pixels / Vec (loads per channel row)
  std::int32_t C = 0;                  ///< channels reduced over (< 2^30)
  std::int32_t slices_log2 = 0;        ///< NCHW tile kernel: log2 of the channel slices per tile
  layout x_layout = layout::nchw;      ///< layout of x (pixel kernel)
};

/// @brief NCHW tile kernel: block b reduces tile b with block::nchw_channel_reduce (Vec elements per load,
/// Items units per thread; `prm.slices_log2` channel slices).
template <class Policy, class T, class Op, class Epilogue, int Vec, int Items>
__global__ void __launch_bounds__(Policy::threads)
    channel_reduce_nchw_kernel(channel_reduce_params<T> prm, Op op, Epilogue epi) {
  using collective = block::nchw_channel_reduce<T, Op, Policy::threads, Vec, Items, Policy::unroll, Policy::hint>;
  __shared__ typename collective::TempStorage temp;
  collective(temp).reduce_tile(prm.x, prm.y, prm.indices, static_cast<std::int64_t>(blockIdx.x), prm.units, prm.hw,
                               prm.image_skip, prm.C, prm.slices_log2, op, epi);
}

/// @brief NHWC tile kernel: block b reduces pixels [b * threads / Lanes, ...) with
/// block::nhwc_channel_reduce (Lanes threads per pixel, Vec elements per load).
template <class Policy, class T, class Op, class Epilogue, int Lanes, int Vec>
__global__ void __launch_bounds__(Policy::threads)
    channel_reduce_nhwc_kernel(channel_reduce_params<T> prm, Op op, Epilogue epi) {
  using collective = block::nhwc_channel_reduce<T, Op, Policy::threads, Lanes, Vec, Policy::unroll, Policy::hint>;
  __shared__ typename collective::TempStorage temp;
  collective(temp).reduce_tile(prm.x, prm.y, prm.indices, static_cast<std::int64_t>(blockIdx.x), prm.pixels, prm.C,
                               op, epi);
}

/// @brief Pixel kernel: block b reduces pixel b (either layout) with block::pixel_channel_reduce and
/// thread 0 writes it.
template <class Policy, class T, class Op, class Epilogue>
__global__ void __launch_bounds__(Policy::threads)
    channel_reduce_pixel_kernel(channel_reduce_params<T> prm, Op op, Epilogue epi) {
  using collective = block::pixel_channel_reduce<T, Op, Policy::threads, Policy::unroll, Policy::hint>;
  __shared__ typename collective::TempStorage temp;
  const std::int64_t q = blockIdx.x;
  const bool nchw = prm.x_layout == layout::nchw;
  const T* base = nchw ? prm.x + (q + (q / prm.hw) * prm.image_skip) : prm.x + q * prm.C;
  const auto a = collective(temp).reduce(base, nchw ? prm.hw : 1, prm.C, op, epi);
  if (threadIdx.x == 0) block::store_result<Op>(prm.y, prm.indices, q, a, prm.C);
}

}  // namespace convred::kernel
