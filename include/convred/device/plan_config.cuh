/// @file device/plan_config.cuh
/// @brief What the planner decides, as plain data: plan_config (the kernel family, its tiling, mode,
/// splits, shared memory and workspace) and run_arguments (the buffers of one run). A kernel family
/// (device/family/) fills a plan_config once, from a problem and a device_info; its launch reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../block/wgmma_conv_params.cuh"
#include "direct_config.cuh"
#include "plan_options.cuh"

namespace convred::device {

/// @brief The kernel families a conv2d_reduce_plan chooses from.
enum class kernel_kind {
  simt,      ///< exact CUDA-core FMA kernel (kernel::conv2d_reduce_kernel with a simt_policy): any GPU, any shape
  mma_sync,  ///< tensor-core mma.sync kernel (an mma_sync_policy): sm_80 and newer, any shape and layout
  wgmma,     ///< Hopper packed-filter kernel (a wgmma_policy; conv2d_reduce_packed / _packed_split): sm_90a
  direct,    ///< exact direct-convolution kernel (conv2d_reduce_direct): C/groups <= 16 (depthwise, narrow groups), any GPU
  screen,    ///< certified screening (family::screen): a 16-bit tensor-core pass, then exact fp32 on the candidates
  tiny,      ///< few output pixels (family::tiny): N*P*Q <= 32 in exact FMA, one kernel (and a combine), any GPU
  user       ///< a family from outside convred, in a caller's family_list (device/family/family.cuh)
};

/// @brief Name of a kernel_kind ("simt", "mma.sync", "wgmma", "direct", "screen", "tiny", "user").
inline const char* to_string(kernel_kind k) noexcept {
  switch (k) {
    case kernel_kind::simt: return "simt";
    case kernel_kind::mma_sync: return "mma.sync";
    case kernel_kind::wgmma: return "wgmma";
    case kernel_kind::direct: return "direct";
    case kernel_kind::screen: return "screen";
    case kernel_kind::tiny: return "tiny";
    case kernel_kind::user: return "user";
  }
  return "unknown";
}

namespace detail {

/// Whether the wgmma kernel serves a problem, and its launch parameters (filter, x, bias left null).
struct wgmma_plan_t {
  bool served = false;            ///< false: the entry points run Policy::fallback on w
  block::wgmma_conv_params k;    ///< launch parameters (when served)
  std::size_t smem_bytes = 0;     ///< dynamic shared memory: the stages, then the reduction and mbarriers
  /// unsplit runs take pass mode (choose_wgmma_splits estimates it faster than the fused kernel; `chosen`
  /// plans only); with a tail, the head's mode
  bool pass_mode = false;
  /// unsplit runs end with a split-K tail of this many tiles (`chosen` plans only: choose_wgmma_splits's
  /// tail_tiles; 0: none)
  std::int64_t tail_tiles = 0;
  int tail_splits = 0;          ///< GEMM_K splits of the tail
  std::int64_t tail_pixels = 0; ///< output pixels of the tail tiles, N*P*Q - conv_mainloop_wgmma::first_pixel
};

}  // namespace detail

/// @brief A kernel family's decision for one problem on one device (host data, no device pointer): what
/// conv2d_reduce_plan keeps and what each run launches, unchanged. Made by a family's `configure`
/// (device/family/; family::select sets `kind` and `family`); read by its `launch` and `describe`. Fields a family does not use stay at their
/// defaults.
struct plan_config {
  kernel_kind kind = kernel_kind::simt;  ///< the family's kind (kernel_kind::user outside convred)
  int family = -1;  ///< the family's position in the planner's family_list (-1: none chosen)
  /// GEMM_K splits: of the split path (simt, mma.sync: conv2d_reduce_split over its channel tiles) or
  /// of each channel pass in the wgmma kernel's partial mode; 0: unsplit
  int splits = 0;
  /// wgmma: tiles, shared memory and the unsplit mode (pass mode, a split-K tail), as
  /// choose_wgmma_params / choose_wgmma_splits picked them for the device
  detail::wgmma_plan_t wgmma{};
  bool pingpong = false;  ///< wgmma: the ping-pong policy (128-pixel tiles), unsplit
  /// direct: the tiling choose_direct_config picked for the device (used when direct_fixed)
  direct_config direct{};
  /// direct: `direct` is launched as is (it fits the problem's unrolled kernel variant); false: the
  /// entry point's own choice for the current device (the generic variant, where the unrolled one
  /// has no tiling that fits)
  bool direct_fixed = false;
  /// bytes of workspace: the packed filter (wgmma) then the scratch every run writes (partial sums,
  /// packed x, pass states)
  std::size_t workspace_bytes = 0;
  std::size_t prepared_bytes = 0;  ///< the start of the workspace prepare() fills once (the packed filter)
  /// dilated (family::dilated): the space-to-batch split's row and column factors, each dividing the
  /// dilation there (0: the full split, the dilation itself)
  int split_h = 0;
  int split_w = 0;  ///< (see split_h)
  double seconds = 0;              ///< the family's time estimate (its cost model; 0 where it has none)

  /// A wgmma configuration in one of conv2d_reduce_packed_split's modes (split, flat or direct tiles, pass
  /// mode, a split-K tail, ping-pong), not the fused kernel on row tiles: its workspace holds more than the
  /// packed filter.
  bool wgmma_split_modes() const {
    return splits > 0 || wgmma.k.flat || wgmma.k.direct || wgmma.pass_mode || wgmma.tail_tiles > 0 || pingpong;
  }
};

/// @brief The buffers of one run of a plan (device pointers; see conv2d_reduce_plan::run for each one's
/// shape, layout and alignment). `workspace` holds what prepare() filled (the packed filter) and, when
/// `scratch` is null, the scratch after it; bind() gives a separate `scratch`.
template <class T>
struct run_arguments {
  const T* x = nullptr;              ///< (N,C,H,W) in the problem's layout
  const T* w = nullptr;              ///< KCRS weights
  const T* bias = nullptr;           ///< K elements, or nullptr
  T* y = nullptr;                    ///< N*P*Q elements (nullptr only for index ops with indices)
  std::int64_t* indices = nullptr;   ///< N*P*Q int64 for argmin / argmax, else nullptr
  void* workspace = nullptr;         ///< the plan's workspace (prepared bytes, then the scratch)
  std::size_t workspace_bytes = 0;   ///< its size
  void* scratch = nullptr;           ///< a separate scratch (bind), or nullptr: the scratch is in workspace
  std::size_t scratch_bytes = 0;     ///< its size
  plan_options options{};            ///< the options the plan was made with
};

}  // namespace convred::device
