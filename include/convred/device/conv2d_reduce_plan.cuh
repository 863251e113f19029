/// @file device/conv2d_reduce_plan.cuh
/// @brief The planner: one host object that picks, for a problem, an element type, a math and a device,
/// the fused conv2d -> epilogue -> channel-reduction kernel and its tile policy (and, for layers with few
/// output pixels, a split over channel tiles and GEMM_K), owns or borrows its workspace (the packed filter
/// or the split's partial sums), says what it picked and why, and runs it.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../functional.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "conv2d_reduce.cuh"
#include "conv2d_reduce_packed.cuh"
#include "conv2d_reduce_split.cuh"
#include "plan_options.cuh"

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

/// @brief A plan for `y = Op over k of e(bias[k] + conv2d(x, w)[n,k,p,q], k)` (conv2d_reduce's
/// semantics: PyTorch's conv2d, then the epilogue, then the reduction across the K output channels) for
/// one problem, element type T and math, on one device.
///
/// The constructor picks the kernel from the policy chain of the math, best first, and records why:
/// - every math, when each output channel reads one input channel (C/groups == 1: depthwise convs): the
///   tiled direct kernel (conv2d_reduce_direct: exact FMA, so at least as accurate as any math asks; the
///   GEMM kernels would spend a 128-channel tile on each group's K/groups channels); the description names
///   the tiling choose_direct_config picks for `dev` (describe_direct_config: tiles, strips, channel
///   groups, channels per stage and the staging chunks, and the blocks per tile when small batches split
///   the channels over a cluster);
/// - math::accurate (the default: the error vs float64 held to 1e-6): tf32x3's chain below on sm_80 and
///   newer, else (older GPUs, double data) the SIMT kernel in exact FMA;
/// - math::ieee (exact fp32 FMA for float/16-bit data, fp64 for double): the SIMT kernel,
///   default_simt_policy<T>;
/// - tf32, tf32x3, bf16, fp16: the wgmma kernel (default_wgmma_policy<Math>) on a compute capability 9.0
///   device running sm_90a code when it serves the problem (float NCHW x, stride 1 or 2, groups 1, any K, ...:
///   packed_filter_bytes), else the mma.sync kernel (default_mma_sync_policy<Math>) on sm_80 and newer.
///   When the wgmma kernel's tiles are fewer than the device's SMs, its time model (choose_wgmma_splits:
///   waves of work units, plus the partial sums' traffic and the fixup) may run it in partial (split-K)
///   mode instead (conv2d_reduce_packed_split: (tile, GEMM_K split, channel pass) units over all SMs, then
///   the split path's fixup kernel; k_splits() > 0, the description says "split into Z GEMM_K ranges");
///   when they fill the GPU but leave the last wave short, the same model may split only that wave's tiles
///   (a split-K tail after a fused or pass-mode head: k_splits() stays 0, the description says "with a
///   split-K tail (...)"; the workspace holds the tail's partial sums);
///   with K > 128 or x gathered, the mma.sync split below is taken when that model estimates it faster
///   than both wgmma modes (the description: "too few tiles to fill the GPU, ...").
/// The mma.sync and SIMT kernels give each block BlockM output pixels and loop it over every channel and
/// all of GEMM_K; when their pixel tiles are fewer than half the device's SMs (device_info::sm_count: small
/// batches, deep layers), the plan may split instead (choose_k_splits: channel tiles x GEMM_K splits, the
/// count whose estimate over waves of resident blocks, sm_count x the policy's min_blocks_per_sm at a
/// time, is least, with at most 64 MiB of partial sums; the fused kernel stays when its own estimate is
/// not slower) and then runs conv2d_reduce_split with the same policy and math (k_splits() > 0).
/// Use: construct; query workspace_bytes(); prepare(w) (binds the workspace: packs the filter into it once
/// when the wgmma kernel was picked, and keeps it for the split's partial sums, after the packed filter in
/// the wgmma kernel's partial mode; one the plan allocates and
/// owns, or one the caller lends); then run(x, bias, y, indices, op, epi, stream) as often as needed. The
/// plan keeps the weight pointer given to prepare (the mma.sync and SIMT kernels read w on every run): w
/// must stay valid and unchanged until the last run. The runs of a split, flat-tile or pass-mode plan write its
/// workspace (partial sums, the packed x, states): runs of one such plan on different streams must not
/// overlap in time (use one plan per stream).
/// Not copyable (it may own device memory); movable.
///
/// @tparam T    element type of x, w, bias and y: float, double, __half or __nv_bfloat16 (double: math::ieee)
/// @tparam Math math tag (policy.cuh): math::accurate (default), ieee, tf32, tf32x3, bf16 or fp16 (README
///   "Precision")
template <class T, class Math = math::accurate>
class conv2d_reduce_plan {
  static_assert(is_supported_element_v<T>, "conv2d_reduce_plan: T must be float, double, __half or __nv_bfloat16");
  static_assert(std::is_same_v<Math, math::accurate> || std::is_same_v<Math, math::ieee> ||
                    std::is_same_v<Math, math::tf32> || std::is_same_v<Math, math::tf32x3> ||
                    std::is_same_v<Math, math::bf16> || std::is_same_v<Math, math::fp16>,
                "conv2d_reduce_plan: Math must be a math tag: convred::math::accurate, ieee, tf32, tf32x3, bf16 or fp16");
  static constexpr bool accurate = std::is_same_v<Math, math::accurate>;
  /// the math the tensor-core kernels run: math::accurate runs tf32x3 there (ieee for double data)
  using kernel_math = std::conditional_t<accurate, std::conditional_t<std::is_same_v<T, double>, math::ieee, math::tf32x3>, Math>;
  static constexpr bool tensor_math = !std::is_same_v<kernel_math, math::ieee>;
  static_assert(!tensor_math || accurate || !std::is_same_v<T, double>,
                "conv2d_reduce_plan: tensor-core math takes float, __half or __nv_bfloat16 data; double runs math::ieee");

 public:
  /// the math the tensor-core kernels run (Math, or for math::accurate tf32x3; ieee for double data)
  using kernel_math_t = kernel_math;
  /// the SIMT policy (math::ieee)
  using simt_policy_t = typename default_simt_policy<T>::type;
  /// the mma.sync policy (tensor-core maths; the SIMT policy for math::ieee, never used)
  using mma_sync_policy_t = typename std::conditional_t<tensor_math, default_mma_sync_policy<kernel_math>,
                                                        default_simt_policy<T>>::type;
  /// the wgmma policy (tensor-core maths; the SIMT policy for math::ieee, never used)
  using wgmma_policy_t = typename std::conditional_t<tensor_math, default_wgmma_policy<kernel_math>,
                                                     default_simt_policy<T>>::type;
  /// the ping-pong sibling of wgmma_policy_t (128-pixel tiles), taken where it replaces a split-K fixup
  /// (not under 3xTF32; the SIMT policy where there is no wgmma policy, never used)
  using wgmma_pingpong_policy_t =
      typename std::conditional_t<tensor_math, wgmma_pingpong<wgmma_policy_t>, default_simt_policy<T>>::type;

  /// Plans p for the current device (device_info::current()); prepare and run must then be called with
  /// that device current. `options` (plan_options; default: the planner's own choices) may force the wgmma
  /// kernel's choices; the plan keeps them and its runs pass them on.
  explicit conv2d_reduce_plan(const conv2d_problem& p, const plan_options& options = {})
      : conv2d_reduce_plan(p, device_info::current(), options) {
    if (cudaGetDevice(&device_) != cudaSuccess) {
      cudaGetLastError();  // ours: no device (state() is no_device)
      device_ = -1;
    }
  }

  /// Plans p for the device described by `dev` (no CUDA call: plans can be made and inspected without a
  /// GPU). state() says whether it can run: validate(p)'s code for an invalid problem, status::no_device
  /// for no device or an explicit tensor-core math (not math::accurate) on a GPU older than sm_80.
  /// `options` as above.
  conv2d_reduce_plan(const conv2d_problem& p, const device_info& dev, const plan_options& options = {})
      : p_(p), options_(options) {
    choose(dev);
  }

  conv2d_reduce_plan(const conv2d_reduce_plan&) = delete;
  conv2d_reduce_plan& operator=(const conv2d_reduce_plan&) = delete;
  /// Takes over o's workspace and preparation (o keeps its choice but must be prepared again).
  conv2d_reduce_plan(conv2d_reduce_plan&& o) { *this = std::move(o); }
  /// Frees this plan's own workspace, then takes over o's.
  conv2d_reduce_plan& operator=(conv2d_reduce_plan&& o) {
    if (this != &o) {
      release();
      p_ = o.p_, options_ = o.options_, state_ = o.state_, kind_ = o.kind_, why_ = o.why_, need_ = o.need_, packed_ = o.packed_,
      splits_ = o.splits_, flat_ = o.flat_, direct_ = o.direct_, pingpong_ = o.pingpong_, pass_ = o.pass_, tail_ = o.tail_, device_ = o.device_;
      w_ = o.w_, ws_ = o.ws_, ws_bytes_ = o.ws_bytes_, prepared_ = o.prepared_, prepared_on_ = o.prepared_on_;
      scratch_ = o.scratch_, scratch_bytes_ = o.scratch_bytes_;
      owned_ = o.owned_, owned_bytes_ = o.owned_bytes_;
      o.owned_ = nullptr, o.owned_bytes_ = 0, o.ws_ = nullptr, o.ws_bytes_ = 0, o.prepared_ = false;
    }
    return *this;
  }
  /// Frees the workspace the plan owns (cudaFree), if any.
  ~conv2d_reduce_plan() { release(); }

  /// success when the plan can run; else why not (see the constructor).
  status state() const { return state_; }
  /// The kernel the plan picked.
  kernel_kind kernel() const { return kind_; }
  /// GEMM_K splits: of the split path (conv2d_reduce_split with the mma.sync or SIMT policy, over
  /// split_channel_tiles channel tiles) or, when kernel() is kernel_kind::wgmma, of each channel pass in the
  /// wgmma kernel's partial mode (conv2d_reduce_packed_split, 1 to ceil(C / block_c)); 0 when the kernel
  /// runs unsplit.
  int k_splits() const { return splits_; }
  /// Which kernel and why, one line for a log, e.g. "wgmma tf32 (sm_90a, packed filter streamed, 4
  /// stages, 4x64-pixel tiles)", "mma.sync tf32x3 (128-pixel x 128-channel tiles): the wgmma kernel does
  /// not serve this problem: 3xTF32 with stride 2", "mma.sync tf32 split 4 channel tiles x 29 GEMM_K splits
  /// (256-pixel x 128-channel tiles; 1 pixel tile for 132 SMs; 2910208-byte workspace): ..." or, for
  /// ResNet-50's layer3 3x3 at batch 32 on 132 SMs, "wgmma tf32 (sm_90a, ..., 16x16-pixel tiles, 2 channel
  /// passes, ...) split into 2 GEMM_K ranges (32 tiles x 2 channel passes x 2 = 128 work units for 132 SMs,
  /// 32 stages of 8 channels per pass; 12845056 bytes of partial sums, then the fixup; 15204352-byte
  /// workspace)".
  const std::string& description() const { return why_; }
  /// The problem planned.
  const conv2d_problem& problem() const { return p_; }
  /// The options the plan was made with (plan_options; default: the planner's own choices).
  const plan_options& options() const { return options_; }
  /// Bytes of workspace the plan needs: the packed filter when the wgmma kernel was picked
  /// (packed_filter_bytes<wgmma_policy_t, T>(p)), and when it runs through conv2d_reduce_packed_split
  /// (partial mode, flat or direct tiles, pass mode, a split-K tail, the ping-pong policy) what that
  /// needs after it (packed_split_workspace_bytes<wgmma_policy_t, T>(p, k_splits()), or with the ping-pong
  /// policy packed_split_workspace_bytes<wgmma_pingpong_policy_t, T>(p, 0)); the split path's
  /// partial sums when the mma.sync or SIMT kernel splits (conv2d_reduce_split_workspace_bytes<T>(p,
  /// k_splits())); else 0.
  std::size_t workspace_bytes() const { return need_; }
  /// Bytes at the start of the workspace that prepare() fills (the packed filter of a wgmma plan) and
  /// runs only read; the rest of workspace_bytes() is scratch that every run writes (partial sums, the
  /// packed x, pass states). 0 when the plan packs nothing. A caller that keeps a prepared workspace may
  /// copy these bytes into a fresh workspace and bind() that one, so that runs never write the kept one.
  std::size_t prepared_bytes() const { return kind_ == kernel_kind::wgmma ? packed_ : 0; }
  /// Bytes of scratch that bind() takes beside the prepared bytes: what every run writes (the partial sums,
  /// the packed x, the pass states), the part of workspace_bytes() after the prepared bytes (and their
  /// 16-byte alignment); 0 when runs write no workspace.
  std::size_t scratch_bytes() const {
    const std::size_t pre = prepared_bytes(), off = pre > 0 ? detail::partial_offset(pre) : 0;
    return need_ > off ? need_ - off : 0;
  }

  /// Prepares the plan for the KCRS weights w (device pointer, K * C/groups * R * S elements of T), the
  /// workspace lent by the caller: `workspace` (16-byte aligned device memory of `bytes` >=
  /// workspace_bytes(), or nullptr when that is 0) receives the packed filter (pack_filter, one small kernel
  /// on `stream`) or, for a split plan, the partial sums of every run (the wgmma kernel's partial mode:
  /// both, the partial sums after the packed filter); the plan neither frees nor resizes it. w and
  /// workspace must outlive the plan's runs.
  /// @return success; state() when the plan cannot run; null_pointer (w null with work to do, or the
  ///   workspace null when needed); no_device when the current device is not the one the plan was made
  ///   for (a plan made from a device_info: one the plan's choice does not fit); and pack_filter's codes,
  ///   which a split plan checks too (misaligned_pointer: workspace not 16-byte aligned or w not aligned to
  ///   T; workspace_too_small; overlapping_buffers: the workspace overlaps w; cuda_error). N = 0: nothing
  ///   is packed or checked.
  status prepare(const T* w, void* workspace, std::size_t bytes, cudaStream_t stream = nullptr) {
    prepared_ = false;
    if (state_ != status::success) return state_;
    if (p_.y_elements() == 0) {
      w_ = w, ws_ = nullptr, ws_bytes_ = 0, scratch_ = nullptr, scratch_bytes_ = 0, prepared_ = true;  // no work
      return status::success;
    }
    if (!w) return status::null_pointer;
    if (status s = check_device(); s != status::success) return s;
    if (kind_ == kernel_kind::wgmma) {
      if constexpr (tensor_math) {
        // partial mode, flat tiles: the whole workspace (packed filter, packed x, partial sums) checked first
        if (packed_split())
          if (status s = check_split_workspace(w, workspace, bytes); s != status::success) return s;
        if (status s = pack_filter<wgmma_policy_t>(p_, w, workspace, bytes, stream); s != status::success) return s;
      }
    } else if (splits_ > 0) {
      if (status s = check_split_workspace(w, workspace, bytes); s != status::success) return s;
    }
    w_ = w, ws_ = workspace, ws_bytes_ = bytes, scratch_ = nullptr, scratch_bytes_ = 0, prepared_ = true;
    if (cudaGetDevice(&prepared_on_) != cudaSuccess) {
      cudaGetLastError();
      prepared_on_ = -1;
    }
    return status::success;
  }

  /// prepare with a workspace the plan allocates (cudaMalloc, workspace_bytes(); none when 0) and frees
  /// in its destructor. @return as the other prepare; cuda_error when the allocation fails.
  status prepare(const T* w, cudaStream_t stream = nullptr) {
    prepared_ = false;
    if (state_ != status::success) return state_;
    if (p_.y_elements() > 0 && need_ > 0 && owned_bytes_ < need_) {
      release();
      if (cudaMalloc(&owned_, need_) != cudaSuccess) {
        owned_ = nullptr;
        return status::cuda_error;  // the allocation error is left for cudaGetLastError
      }
      owned_bytes_ = need_;
    }
    return prepare(w, owned_, owned_bytes_, stream);
  }

  /// Binds w, the prepared bytes of an earlier prepare() of an equal plan (same problem, T, Math, options
  /// and device) from these same weights, and a separate scratch buffer, without packing again: for callers
  /// that keep one packed filter for many runs (the PyTorch module keeps one per weight version) and give
  /// each run, or each stream, its own scratch. The runs then only read `prepared` and write `scratch`.
  /// `prepared`: the first prepared_bytes() bytes of a workspace that prepare() filled (or a copy of them;
  /// nullptr when prepared_bytes() is 0), 16-byte aligned; its contents are not checked (bytes prepared from
  /// other weights or for another problem give wrong results). `scratch`: scratch_bytes() bytes or more,
  /// 16-byte aligned device memory (nullptr when scratch_bytes() is 0).
  /// @return as prepare: state(), null_pointer, no_device, misaligned_pointer (w not aligned to T, prepared
  ///   or scratch not to 16 bytes), workspace_too_small (either buffer below its size), overlapping_buffers
  ///   (the scratch overlaps w or the prepared bytes), cuda_error (pending on entry).
  status bind(const T* w, const void* prepared, std::size_t prepared_size, void* scratch, std::size_t scratch_size) {
    prepared_ = false;
    if (state_ != status::success) return state_;
    if (p_.y_elements() == 0) {
      w_ = w, ws_ = nullptr, ws_bytes_ = 0, scratch_ = nullptr, scratch_bytes_ = 0, prepared_ = true;
      return status::success;
    }
    if (!w) return status::null_pointer;
    if (status s = detail::pending_status(); s != status::success) return s;
    if (status s = check_device(); s != status::success) return s;
    const std::size_t pre = prepared_bytes(), scr = scratch_bytes();
    if ((pre > 0 && !prepared) || (scr > 0 && !scratch)) return status::null_pointer;
    if (!detail::aligned(w) || reinterpret_cast<std::uintptr_t>(prepared) % 16 != 0 ||
        reinterpret_cast<std::uintptr_t>(scratch) % 16 != 0)
      return status::misaligned_pointer;
    if (prepared_size < pre || scratch_size < scr) return status::workspace_too_small;
    const detail::span in[] = {detail::make_span(w, p_.w_elements()),
                               detail::make_span(static_cast<const unsigned char*>(prepared), static_cast<std::int64_t>(pre))};
    const detail::span out[] = {detail::make_span(static_cast<const unsigned char*>(scratch), static_cast<std::int64_t>(scr))};
    if (detail::any_overlap(in, out)) return status::overlapping_buffers;
    // (the runs read the prepared bytes only: with a separate scratch, nothing writes them)
    w_ = w, ws_ = const_cast<void*>(prepared), ws_bytes_ = pre > 0 ? prepared_size : 0;
    scratch_ = scr > 0 ? scratch : nullptr, scratch_bytes_ = scr > 0 ? scratch_size : 0, prepared_ = true;
    if (cudaGetDevice(&prepared_on_) != cudaSuccess) {
      cudaGetLastError();
      prepared_on_ = -1;
    }
    return status::success;
  }

  /// Runs the planned kernel: y[n,0,p,q] = Op over k of e(bias[k] + conv2d(x, w)[n,k,p,q], k) (and the
  /// index for argmin/argmax), asynchronously on `stream`.
  /// @param x       device pointer, (N,C,H,W) elements of T in the problem's layout
  /// @param bias    device pointer to K elements, or nullptr for no bias
  /// @param y       device pointer, N*P*Q elements of T; may be nullptr only for index ops with indices
  /// @param indices device pointer, N*P*Q int64 (argmin / argmax); nullptr for other ops
  /// @param op      reduction op (functional.cuh)
  /// @param epi     epilogue `V e(V, int k)` or `V e(V)`, run on the device in the compute type
  /// @param stream  CUDA stream the kernel is launched on (asynchronous; nothing is synchronised)
  /// @return as conv2d_reduce / conv2d_reduce_packed / conv2d_reduce_split; also state() when the plan cannot run, and
  ///   not_prepared before a successful prepare, no_device when the current device is not the one it
  ///   was prepared on. The wgmma kernel reads x through TMA from a 16-byte aligned base; another x runs
  ///   conv2d_reduce_packed's fallback (the mma.sync kernel, same math), except where the kernel gathers
  ///   x itself (stride 2, W % 4 != 0): any x aligned to float (else misaligned_pointer).
  template <class Op = op::min, class Epilogue = epilogue::identity>
  status run(const T* x, const nondeduced_t<T>* bias, T* y, std::int64_t* indices, Op op = {}, Epilogue epi = {},
             cudaStream_t stream = nullptr) const {
    if (state_ != status::success) return state_;
    if (!prepared_) return status::not_prepared;
    if (p_.y_elements() > 0) {
      int dev = -1;
      if (cudaGetDevice(&dev) != cudaSuccess || dev != prepared_on_) {
        if (dev < 0) cudaGetLastError();  // ours: no device
        return status::no_device;
      }
    }
    if (kind_ == kernel_kind::direct) return conv2d_reduce_direct(p_, x, w_, bias, y, indices, op, epi, stream);
    if constexpr (tensor_math) {
      if (kind_ == kernel_kind::wgmma) {
        if constexpr (wgmma_pingpong_policy_t::parts == 1) {  // (never under 3xTF32: choose_pingpong)
          if (pingpong_)
            return conv2d_reduce_packed_split<wgmma_pingpong_policy_t>(p_, x, w_, ws_, ws_bytes_, bias, y, indices, 0, op,
                                                                       epi, stream, options_, scratch_, scratch_bytes_);
        }
        if (packed_split())
          return conv2d_reduce_packed_split<wgmma_policy_t>(p_, x, w_, ws_, ws_bytes_, bias, y, indices, splits_, op, epi,
                                                            stream, options_, scratch_, scratch_bytes_);
        return conv2d_reduce_packed<wgmma_policy_t>(p_, x, w_, ws_, ws_bytes_, bias, y, indices, op, epi, stream);
      }
      if (kind_ == kernel_kind::mma_sync) {
        if (splits_ > 0)
          return conv2d_reduce_split<mma_sync_policy_t>(p_, x, w_, bias, y, indices, scratch_ ? scratch_ : ws_,
                                                        scratch_ ? scratch_bytes_ : ws_bytes_, splits_, op, epi,
                                                        stream);
        return conv2d_reduce<mma_sync_policy_t>(p_, x, w_, bias, y, indices, op, epi, stream);
      }
    }
    if (splits_ > 0)
      return conv2d_reduce_split<simt_policy_t>(p_, x, w_, bias, y, indices, scratch_ ? scratch_ : ws_,
                                                scratch_ ? scratch_bytes_ : ws_bytes_, splits_, op, epi, stream);
    return conv2d_reduce<simt_policy_t>(p_, x, w_, bias, y, indices, op, epi, stream);
  }

 private:
  static const char* math_name() {
    if constexpr (std::is_same_v<kernel_math, math::tf32>) return "tf32";
    else if constexpr (std::is_same_v<kernel_math, math::tf32x3>) return "tf32x3";
    else if constexpr (std::is_same_v<kernel_math, math::bf16>) return "bf16";
    else if constexpr (std::is_same_v<kernel_math, math::fp16>) return "fp16";
    else return "ieee";
  }
  /// why_'s suffix for math::accurate: what the default math resolved to
  static const char* accurate_note() { return accurate ? "; math::accurate (error vs float64 <= 1e-6)" : ""; }

  /// The policy chain: sets state_, kind_, why_ and need_ (host only, no CUDA call).
  void choose(const device_info& dev) {
    state_ = validate(p_, sizeof(T));
    if (state_ != status::success) {
      why_ = std::string("none: ") + to_string(state_);
      return;
    }
    if (dev.cc_major == 0) {
      state_ = status::no_device;
      why_ = "none: no CUDA device";
      return;
    }
    const char* fma = std::is_same_v<T, double> ? "fp64" : "fp32";
    if (p_.C_per_group() == 1) {
      kind_ = kernel_kind::direct;
      // the tiling conv2d_reduce_direct will pick there (clusters: compute capability 9.0+ running sm_90a code)
      const direct_kernel_shape shape = direct_kernel_shape_of<T>(p_);
      const bool clusters = dev.cc_major >= 9 && dev.wgmma_image;
      const direct_config c = choose_direct_config(p_, shape, dev.sm_count, clusters ? direct_max_splits : 1);
      why_ = std::string("direct (exact ") + fma + " FMA, " + describe_direct_config(p_, shape, c) +
             "): C/groups == 1 (depthwise)" + (std::is_same_v<Math, math::ieee> || accurate ? "" : ", exact for any math");
      return;
    }
    // the SIMT kernel, when chosen below (split on dev when its pixel tiles are too few)
    auto simt = [&] {
      kind_ = kernel_kind::simt;
      return std::string("simt ieee") + split<simt_policy_t>(dev, std::string("exact ") + fma + " FMA, ");
    };
    if constexpr (!tensor_math) {
      why_ = simt() + (accurate ? ": math::accurate on double data (error vs float64 <= 1e-6)" : ": math::ieee");
    } else {
      if (dev.cc_major < 8) {
        if (accurate) {
          why_ = simt() + ": math::accurate on a GPU older than sm_80 (no TF32 tensor cores)";
          return;
        }
        state_ = status::no_device;
        why_ = std::string("none: ") + math_name() + " tensor-core math needs sm_80 or newer";
        return;
      }
      block::wgmma_conv_params k;
      std::size_t smem = 0;
      wgmma_split_estimate est;
      const char* no_wgmma = wgmma_rejection(dev, k, smem, est);
      if (!no_wgmma) {
        kind_ = kernel_kind::wgmma;
        if constexpr (tensor_math) pingpong_ = choose_pingpong(dev, k, smem, est);
        packed_ = need_ = block::conv_mainloop_wgmma<wgmma_policy_t>::packed_bytes(k);
        const std::size_t xpack = block::conv_mainloop_wgmma<wgmma_policy_t>::xpack_bytes(k);
        const int block_m = pingpong_ ? wgmma_pingpong_policy_t::block_m : wgmma_policy_t::block_m;
        flat_ = k.flat != 0, direct_ = k.direct != 0;
        const std::string tiles =
            direct_ ? std::to_string(k.tile_rows) + "x" + std::to_string(k.tile_cols) +
                          "-pixel tiles with x read straight from NCHW (TMA boxes of " + std::to_string(k.group * 8) +
                          " channels; A fragments loaded into registers and rounded to tf32 there: no packing pass)"
            : flat_ ? std::string("flat ") + std::to_string(block_m) + "-pixel tiles over x packed (" +
                        std::to_string(k.flat_rows) + "x" + std::to_string(k.pw) + " pixels per image" +
                        (k.stride != 1 ? ", stride " + std::to_string(k.stride) + " phases" : "") + ", " +
                        std::to_string(xpack) + " bytes, packed on each run)"
                  : std::to_string(k.tile_rows) + "x" + std::to_string(k.tile_cols) + "-pixel tiles";
        why_ = std::string("wgmma ") + math_name() + (pingpong_ ? " ping-pong" : "") + " (sm_90a, packed filter " +
               (k.resident_bytes ? "resident" : "streamed") + ", " + std::to_string(k.stages) + " stages, " + tiles +
               ", " + (k.npass > 1 ? std::to_string(k.npass) + " channel passes, " : "") +
               (k.gather ? "x gathered (stride " + std::to_string(k.stride) + "), " : "") +
               std::to_string(smem) + " bytes of shared memory)";
        if (flat_ || direct_) need_ = detail::packed_split_bytes(p_, packed_, xpack, 0);  // conv2d_reduce_packed_split
        if (est.splits == 0 && est.pass_mode) {  // pass mode: conv2d_reduce_packed_split, splits = 0
          pass_ = true;
          need_ = detail::packed_split_bytes(p_, packed_, xpack, 0, true);
          if (est.tail_tiles == 0)  // (with a tail: said below)
            why_ += " in pass mode (" + std::to_string(k.tiles) + " tiles x " + std::to_string(k.npass) +
                  " channel passes = " + std::to_string(k.tiles * k.npass) + " work units for " +
                  std::to_string(dev.sm_count) + " SMs, each pass's reduction states combined after; " +
                  std::to_string(need_) + "-byte workspace)";
        }
        if (est.splits == 0 && est.tail_tiles > 0) {  // a split-K tail: conv2d_reduce_packed_split, splits = 0
          tail_ = true;
          const std::int64_t pixels = p_.gemm_m() - block::conv_mainloop_wgmma<wgmma_policy_t>::first_pixel(k, k.tiles - est.tail_tiles);
          need_ = detail::packed_split_bytes(p_, packed_, xpack, 0, pass_, pixels, est.tail_splits);
          const std::int64_t head = (k.tiles - est.tail_tiles) * (pass_ ? k.npass : 1);
          why_ += std::string(pass_ ? " in pass mode" : "") + " with a split-K tail (" + std::to_string(k.tiles - est.tail_tiles) +
                  " tiles" + (pass_ ? " x " + std::to_string(k.npass) + " channel passes" : "") + " = " + std::to_string(head) +
                  " work units, then the last " + std::to_string(est.tail_tiles) + " tile" + (est.tail_tiles == 1 ? "" : "s") +
                  " x " + std::to_string(k.npass) + " channel pass" + (k.npass == 1 ? "" : "es") + " x " +
                  std::to_string(est.tail_splits) + " GEMM_K ranges = " + std::to_string(est.tail_tiles * k.npass * est.tail_splits) +
                  " work units for " + std::to_string(dev.sm_count) + " SMs; " + std::to_string(pixels) +
                  " pixels' partial sums, then " + (pass_ ? "the combine and " : "") + "the fixup; " + std::to_string(need_) +
                  "-byte workspace)";
        }
        if (est.splits > 0) {  // partial mode: conv2d_reduce_packed_split
          splits_ = est.splits;
          need_ = detail::packed_split_bytes(p_, packed_, xpack, splits_);
          const std::size_t sums = need_ - detail::partial_offset(packed_) - xpack;
          why_ += " split into " + std::to_string(splits_) + " GEMM_K range" + (splits_ == 1 ? "" : "s") + " (" +
                  std::to_string(k.tiles) + " tile" + (k.tiles == 1 ? "" : "s") + " x " + std::to_string(k.npass) +
                  " channel pass" + (k.npass == 1 ? "" : "es") + " x " + std::to_string(splits_) + " = " +
                  std::to_string(est.units) + " work units for " + std::to_string(dev.sm_count) + " SMs, " +
                  std::to_string(k.kt) + " stages of " + std::to_string(wgmma_policy_t::block_c * k.group) +
                  " channels per pass; " + std::to_string(sums) + " bytes of partial sums, then the fixup; " +
                  std::to_string(need_) + "-byte workspace)";
        }
        why_ += accurate_note();
      } else {
        kind_ = kernel_kind::mma_sync;
        why_ = std::string("mma.sync ") + math_name() + split<mma_sync_policy_t>(dev, "") +
               ": the wgmma kernel does not serve this problem: " + no_wgmma + accurate_note();
      }
    }
  }

  /// For the mma.sync or SIMT kernel with Policy on dev: sets splits_ and need_ (choose_k_splits,
  /// conv2d_reduce_split_workspace_bytes) and returns the description's middle, " (<what>B-pixel x
  /// B-channel tiles)" or " split C channel tiles x S GEMM_K splits (<what>tiles; m pixel tiles for n SMs;
  /// bytes-byte workspace)".
  template <class Policy>
  std::string split(const device_info& dev, const std::string& what) {
    splits_ = choose_k_splits<Policy, T>(p_, dev.sm_count);
    const std::string tiles = what + std::to_string(Policy::block_m) + "-pixel x " + std::to_string(Policy::block_n) +
                              "-channel tiles";
    if (splits_ == 0) return " (" + tiles + ")";
    need_ = conv2d_reduce_split_workspace_bytes<T>(p_, splits_);
    const std::int64_t m_tiles = (p_.gemm_m() + Policy::block_m - 1) / Policy::block_m;
    return " split " + std::to_string(split_channel_tiles<Policy, T>(p_)) + " channel tiles x " +
           std::to_string(splits_) + " GEMM_K splits (" + tiles + "; " + std::to_string(m_tiles) + " pixel tile" +
           (m_tiles == 1 ? "" : "s") + " for " + std::to_string(dev.sm_count) + " SMs; " + std::to_string(need_) +
           "-byte workspace)";
  }

  /// prepare's checks of a split plan's workspace (pack_filter's, for the partial sums): null_pointer,
  /// misaligned_pointer (not 16-byte aligned; w not aligned to T), workspace_too_small, overlapping_buffers
  /// (the workspace overlaps w), cuda_error (a CUDA error pending on entry, left pending).
  status check_split_workspace(const T* w, const void* workspace, std::size_t bytes) const {
    if (status s = detail::pending_status(); s != status::success) return s;
    if (!workspace) return status::null_pointer;
    if (!detail::aligned(w) || reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0) return status::misaligned_pointer;
    if (bytes < need_) return status::workspace_too_small;
    const detail::span in[] = {detail::make_span(w, p_.w_elements())};
    const detail::span out[] = {detail::make_span(static_cast<const unsigned char*>(workspace), static_cast<std::int64_t>(need_))};
    return detail::any_overlap(in, out) ? status::overlapping_buffers : status::success;
  }

  /// @brief Whether the ping-pong policy replaces the cooperative one's split-K fixup, and if so its
  /// parameters, shared memory and estimate in k, smem and est. Taken when the cooperative plan (k, est)
  /// splits GEMM_K into 2 ranges (partial sums of every pixel, then the fixup) and the ping-pong plan on
  /// the same tiles' kind runs unsplit in units of one pass (pass mode, or fused with one pass; no tail),
  /// no more of them than the cooperative units and the SMs (128 pixels x a whole pass against 256 x half
  /// a pass): the same waves without the partial sums.
  /// The rule is narrow: where the time model alone preferred ping-pong it was often slower (fewer consumers
  /// per tile) (bench/NOTES.md, "Moved from header comments"). Not under 3xTF32 (its consumers spill) or
  /// without an SM count.
  bool choose_pingpong(const device_info& dev, block::wgmma_conv_params& k, std::size_t& smem,
                       wgmma_split_estimate& est) const {
    using pp = wgmma_pingpong_policy_t;
    if constexpr (pp::parts != 1) {
      return false;
    } else {
      if (est.splits != 2 || dev.sm_count <= 0 || options_.splits != 0) return false;
      block::wgmma_conv_params q;
      std::size_t q_smem = 0;
      if (!choose_wgmma_params<pp>(p_, detail::wgmma_tail_bytes<pp, op::argmin>(), detail::max_smem_per_block,
                                   dev.sm_count, true, q, q_smem, options_) ||
          q.flat != k.flat || q.direct != k.direct || q.gather != k.gather || q.kt != k.kt)
        return false;
      const wgmma_split_estimate e = choose_wgmma_splits<pp>(p_, q, dev.sm_count, plan_math_speed<kernel_math>(),
                                                             default_split_workspace_limit, options_);
      const std::int64_t units = e.pass_mode ? q.tiles * q.npass : q.tiles;
      // a unit of one pass (pass mode, or fused with one pass): 128 pixels x a whole pass, the size of the
      // cooperative unit (256 pixels x half a pass); fused units of several passes would be larger
      if (e.splits != 0 || e.tail_tiles != 0 || !(e.pass_mode || q.npass == 1) || units > est.units ||
          units > dev.sm_count)
        return false;
      k = q, smem = q_smem, est = e;
      return true;
    }
  }

  /// nullptr when the wgmma kernel serves the problem on dev (k and smem then hold its parameters and
  /// shared memory, est the time model's choice between its fused and partial modes: choose_wgmma_splits),
  /// else why not.
  const char* wgmma_rejection(const device_info& dev, block::wgmma_conv_params& k, std::size_t& smem,
                              wgmma_split_estimate& est) const {
    if constexpr (tensor_math) {
      if (!std::is_same_v<T, float>) return "x is not float";
      if (dev.cc_major != 9 || dev.cc_minor != 0) return "not a compute capability 9.0 device";
      if (!dev.wgmma_image) return "no sm_90a code for this device in the program";
      if (const char* why = block::conv_mainloop_wgmma<wgmma_policy_t>::cannot_implement(p_)) return why;
      // tiles of image rows or flat tiles over a packed x, as conv2d_reduce_packed_split picks them on dev
      if (!choose_wgmma_params<wgmma_policy_t>(p_, detail::wgmma_tail_bytes<wgmma_policy_t, op::argmin>(),
                                               detail::max_smem_per_block, dev.sm_count, dev.sm_count > 0, k, smem,
                                               options_))
        return "its operand stages do not fit in shared memory";
      // Gathered x (stride 2, W % 4 != 0): the producer's plain loads are slower than TMA, and a 1x1
      // filter (one tap per stage) leaves it no time at all.
      if (k.gather && p_.R * p_.S == 1) return "1x1 filter with x gathered (stride 2 or W % 4 != 0)";
      // Few tiles (small batches, deep layers): each tile runs its npass channel passes on one SM and
      // most SMs idle. The wgmma kernel's partial mode spreads (tile, GEMM_K split, pass) units over the
      // SMs (choose_wgmma_splits); the mma.sync split, slower per SM but never wasting a tile's pixels,
      // may still win where the tiles are mostly empty (1x1 images) or x is gathered. Rough times from
      // the H200's rates (plan_wgmma_flops_per_sm, plan_mma_split_flops_per_sm; every math scaled by
      // plan_math_speed): the mma.sync split ~0.34 TFLOP/s per SM on the useful work, plus ~14 us.
      const double speed = plan_math_speed<kernel_math>();
      est = choose_wgmma_splits<wgmma_policy_t>(p_, k, dev.sm_count, speed, default_split_workspace_limit, options_);
      if ((k.npass > 1 || k.gather) && dev.sm_count > 0 && options_.splits == 0) {
        const double t_wgmma = est.splits > 0 ? est.split_s : est.tail_tiles > 0 ? est.tail_s : est.pass_mode ? est.pass_mode_s : est.fused_s;
        const double t_split = plan_mma_split_fixed_seconds +
                               2.0 * static_cast<double>(p_.gemm_m()) * static_cast<double>(p_.K) *
                                   static_cast<double>(p_.gemm_k()) / (plan_mma_split_flops_per_sm * speed * dev.sm_count);
        // (only when the mma.sync path would split: without a split it would not fill the GPU either)
        if (t_split < t_wgmma && choose_k_splits<mma_sync_policy_t, T>(p_, dev.sm_count) > 0)
          return "too few tiles to fill the GPU, and the mma.sync split is estimated faster than the wgmma kernel's fused and "
                 "split modes";
      }
      return nullptr;
    } else {
      (void)dev, (void)k, (void)smem, (void)est;
      return "math::ieee";
    }
  }

  /// prepare's device check: the current device is the plan's (plans for the current device), or, for a
  /// plan made from a device_info, one on which the choice holds (a wgmma plan: the wgmma kernel serves p
  /// there with the same packed size; the other kernels: any device, their launch checks it).
  status check_device() const {
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();  // ours: no device
      return status::no_device;
    }
    if (device_ >= 0) return dev == device_ ? status::success : status::no_device;
    if constexpr (tensor_math) {
      // the wgmma choice must hold here (same packed size); the other kernels run on any device their
      // launch accepts (a plan's time model may pick mma.sync where the wgmma kernel could serve p)
      if (kind_ == kernel_kind::wgmma) {
        const std::size_t here = packed_filter_bytes<wgmma_policy_t, T>(p_);  // 0 where wgmma does not serve p
        if (here == 0 || here != packed_) return status::no_device;
        // conv2d_reduce_packed_split picks its tiles and mode on this device: its workspace must be the plan's
        if (packed_split() && (pingpong_ ? packed_split_workspace_bytes<wgmma_pingpong_policy_t, T>(p_, 0, options_)
                                         : packed_split_workspace_bytes<wgmma_policy_t, T>(p_, splits_, options_)) != need_)
          return status::no_device;
      }
    }
    return status::success;
  }

  void release() noexcept {
    if (owned_) {
      if (ws_ == owned_) ws_ = nullptr, ws_bytes_ = 0, prepared_ = false;
      cudaFree(owned_);
    }
    owned_ = nullptr, owned_bytes_ = 0;
  }

  conv2d_problem p_{};
  plan_options options_{};  ///< the options the plan was made with, passed on by run
  status state_ = status::success;
  kernel_kind kind_ = kernel_kind::simt;
  std::string why_;
  std::size_t need_ = 0;
  std::size_t packed_ = 0;  ///< the packed filter's bytes (wgmma), the start of need_
  int splits_ = 0;  ///< GEMM_K splits of the split path or of the wgmma kernel's partial mode (0: unsplit)
  bool flat_ = false;  ///< the wgmma kernel on flat tiles (its packed x in the workspace)
  bool direct_ = false;  ///< the wgmma kernel on direct tiles (chosen only by conv2d_reduce_packed_split)
  bool pingpong_ = false;  ///< the ping-pong wgmma policy (wgmma_pingpong_policy_t), unsplit
  bool pass_ = false;  ///< the wgmma kernel in pass mode (its states in the workspace)
  bool tail_ = false;  ///< the wgmma kernel with a split-K tail (its partial sums in the workspace)
  /// The wgmma kernel runs through conv2d_reduce_packed_split (a workspace beyond the packed filter).
  bool packed_split() const { return splits_ > 0 || flat_ || direct_ || pass_ || tail_ || pingpong_; }
  const T* w_ = nullptr;
  void* ws_ = nullptr;          ///< the workspace bound by prepare (packed filter or partial sums)
  std::size_t ws_bytes_ = 0;    ///< its size
  void* owned_ = nullptr;
  std::size_t owned_bytes_ = 0;
  void* scratch_ = nullptr;     ///< the separate scratch bound by bind (nullptr: the scratch is in ws_)
  std::size_t scratch_bytes_ = 0;  ///< its size
  bool prepared_ = false;
  int device_ = -1;       ///< the device the plan was made for (-1: made from a device_info)
  int prepared_on_ = -1;  ///< the device current at the last successful prepare
};

}  // namespace convred::device
