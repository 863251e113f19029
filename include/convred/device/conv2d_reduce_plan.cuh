/// @file device/conv2d_reduce_plan.cuh
/// @brief The planner: one host object that picks, for a problem, an element type, a math and a device,
/// the fused conv2d -> epilogue -> channel-reduction kernel and its tile policy (and, for layers with few
/// output pixels, a split over channel tiles and GEMM_K), owns or borrows its workspace (the packed filter
/// or the split's partial sums), says what it picked and why, and runs it. The choice is made once, by
/// family::select over a list of kernel families (device/family/), as a plan_config
/// (device/plan_config.cuh) that every run launches.
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
#include "family/families.cuh"
#include "plan_config.cuh"
#include "plan_options.cuh"
#include "plan_types.cuh"

namespace convred::device {

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
///   the channels over a cluster); the same kernel for grouped layers with 1 < C/groups <= 16 (ResNeXt,
///   RegNet: "grouped, C/groups = n") under math::ieee, double data and on GPUs without tensor cores, and
///   under a tensor-core math where its model estimates it faster than the tensor-core families, and for
///   dense layers with C <= 16 (stems: "dense, C = n") under TF32 and 3xTF32 where it estimates so too
///   (family::direct::can_implement);
/// - at most 16 output channels per group (K = 1 to 16), then 17 to 32: the SIMT kernel in 16- and
///   32-channel tiles (family::simt_narrow, narrow_simt_policy<T, 16 or 32>: "(the narrow family)") under
///   3xTF32 (the 32-channel ones for grouped layers only) where its model
///   estimates it faster than the tensor-core families (its sums then split over GEMM_K to at most
///   plan_narrow_accurate_chain values each), and under math::ieee where it estimates it faster than the
///   default SIMT policy;
/// - at most 32 output channels per group under TF32, bf16 and fp16: the mma.sync kernel in 32-channel tiles
///   (family::mma_narrow, narrow_mma_sync_policy<Math>: "(the narrow tensor-core family)") where its model
///   estimates it faster than the other tensor-core families (and the direct family weighs itself against it);
/// - math::accurate (the default: the error vs float64 held to 1e-6): tf32x3's chain below on sm_80 and
///   newer, else (older GPUs, double data) the SIMT kernel in exact FMA;
/// - math::ieee (exact fp32 FMA for float/16-bit data, fp64 for double): the SIMT kernel,
///   default_simt_policy<T>;
/// - tf32, tf32x3, bf16, fp16: the wgmma kernel (default_wgmma_policy<Math>) on a compute capability 9.0
///   device running sm_90a code when it serves the problem (float NCHW x, stride 1 or 2, groups 1, any K, ...:
///   packed_filter_bytes), else the mma.sync kernel (default_mma_sync_policy<Math>) on sm_80 and newer.
///   A dilated layer at stride 1 runs on the wgmma kernel's flat tiles, each tap an offset into the packed
///   window (small dilations; the description says "dilation ... as tap offsets"), its direct tiles of
///   filter rows ("a stage per filter row"), or, where the padding is a multiple of the dilation (DeepLab's),
///   as an undilated layer over sub-images folded into the batch (family::dilated; the description starts
///   "dilation ... as ... undilated sub-images per image"), or over fewer sub-images that keep a smaller
///   dilation ("as ... sub-images of dilation ... per image"; the workspace holds x's copy each run writes),
///   whichever is estimated fastest.
///   A grouped layer with 32 or more output channels per group runs on the wgmma kernel one group at a
///   time where its model estimates that faster than the mma.sync kernel (family::grouped; the description
///   starts "groups G one at a time"; the prepared bytes hold each group's packed filter, the scratch a copy
///   of one group of x and every group's reduced outputs, written by each run; k_splits() is a group's).
///   Problems of 32 or fewer output pixels and at most 512 im2col values (N*P*Q x GEMM_K), groups 1, run
///   on one exact-FMA kernel sized for them under every math (family::tiny; the description starts "tiny";
///   where the channels span several blocks its scratch holds their reductions, written by each run); the
///   other problems of 32 or fewer output pixels on the mma.sync kernel (plan_wgmma_min_pixels; not the
///   screening family's pass 1, which has no mma.sync sibling). Where the outer filter taps read only
///   padding for every output, the wgmma kernel runs the smaller filter of the others where that is
///   estimated faster than the mma.sync kernel on the whole filter (family::pruned; the
///   description starts "taps reading only padding pruned"; the prepared bytes hold those taps, copied
///   from w at prepare, then the wgmma kernel's packed filter).
///   When the wgmma kernel's tiles are fewer than the device's SMs, its time model (choose_wgmma_splits:
///   waves of work units, plus the partial sums' traffic and the fixup) may run it in partial (split-K)
///   mode instead (conv2d_reduce_packed_split: (tile, GEMM_K split, channel pass) units over all SMs, then
///   the split path's fixup kernel; k_splits() > 0, the description says "split into Z GEMM_K ranges");
///   when they (or, in pass mode, their channel passes) fill the GPU but leave the last wave short, the same
///   model may split only that wave's tiles (a split-K tail after a fused or pass-mode head: k_splits() stays 0, the description says "with a
///   split-K tail (...)"; the workspace holds the tail's partial sums);
///   the mma.sync kernel below (fused or split) is taken wherever its model (plan_conv2d_reduce_seconds)
///   estimates it at least as fast as the wgmma kernel's, fixed costs included (the description: "the
///   mma.sync kernel is estimated faster than the wgmma kernel's fused and split modes").
/// The mma.sync and SIMT kernels give each block BlockM output pixels and loop it over every channel and
/// all of GEMM_K; when their pixel tiles are fewer than half the device's SMs (device_info::sm_count: small
/// batches, deep layers), the plan may split instead (choose_k_splits: channel tiles x GEMM_K splits, the
/// count whose estimate (plan_conv2d_reduce_seconds: waves of resident blocks, sm_count x the policy's
/// min_blocks_per_sm at a time, the partial sums, the fixup) is least, with at most 64 MiB of partial
/// sums; the fused kernel stays when its own estimate is not slower; the narrow family splits further for
/// 3xTF32's error) and then runs conv2d_reduce_split with the same policy and math (k_splits() > 0).
/// Use: construct; query workspace_bytes(); prepare(w) (binds the workspace: packs the filter into it once
/// when the wgmma kernel was picked, and keeps it for the split's partial sums, after the packed filter in
/// the wgmma kernel's partial mode; one the plan allocates and
/// owns, or one the caller lends); then run(x, bias, y, indices, op, epi, stream) as often as needed. The
/// plan keeps the weight pointer given to prepare (the mma.sync and SIMT kernels read w on every run): w
/// must stay valid and unchanged until the last run. The runs of any plan with scratch_bytes() > 0 (split,
/// flat-tile, pass-mode, dilated, grouped, tiny (several blocks) and screening plans) write its workspace (partial sums, the packed x,
/// states, x's sub-images): runs of one such plan on different streams must not overlap in time (use one
/// plan per stream, or bind a scratch per stream).
/// Not copyable (it may own device memory); movable.
///
/// @tparam T    element type of x, w, bias and y: float, double, __half or __nv_bfloat16 (double: math::ieee)
/// @tparam Math math tag (policy.cuh): math::accurate (default), ieee, tf32, tf32x3, bf16 or fp16 (README
///   "Precision")
/// @tparam Families the kernel families to choose from, best first (family::family_list; default
///   family::default_families_t<T, Math>: the chain above). A family of your own goes in its own header
///   and one entry of such a list (device/family/family.cuh gives what a family provides).
template <class T, class Math = math::accurate, class Families = family::default_families_t<T, Math>>
class conv2d_reduce_plan {
  static_assert(is_supported_element_v<T>, "conv2d_reduce_plan: T must be float, double, __half or __nv_bfloat16");
  static_assert(std::is_same_v<Math, math::accurate> || std::is_same_v<Math, math::ieee> ||
                    std::is_same_v<Math, math::tf32> || std::is_same_v<Math, math::tf32x3> ||
                    std::is_same_v<Math, math::bf16> || std::is_same_v<Math, math::fp16>,
                "conv2d_reduce_plan: Math must be a math tag: convred::math::accurate, ieee, tf32, tf32x3, bf16 or fp16");
  static_assert(std::is_same_v<Math, math::accurate> || std::is_same_v<Math, math::ieee> || !std::is_same_v<T, double>,
                "conv2d_reduce_plan: tensor-core math takes float, __half or __nv_bfloat16 data; double runs math::ieee");
  static constexpr bool tensor_math = !std::is_same_v<family::kernel_math_t<T, Math>, math::ieee>;

 public:
  /// the math the tensor-core kernels run (Math, or for math::accurate tf32x3; ieee for double data)
  using kernel_math_t = family::kernel_math_t<T, Math>;
  /// the kernel families the plan chooses from, best first (family::family_list)
  using families_t = Families;
  /// the SIMT policy (math::ieee)
  using simt_policy_t = typename default_simt_policy<T>::type;
  /// the default mma.sync policy (tensor-core maths; the SIMT policy for math::ieee, never used); a plan of
  /// kernel_kind::mma_sync may also run the narrow tensor-core family's narrow_mma_sync_policy (its description
  /// says "32-channel tiles")
  using mma_sync_policy_t = typename std::conditional_t<tensor_math, default_mma_sync_policy<kernel_math_t>,
                                                        default_simt_policy<T>>::type;
  /// the wgmma policy (tensor-core maths; the SIMT policy for math::ieee, never used)
  using wgmma_policy_t = typename std::conditional_t<tensor_math, default_wgmma_policy<kernel_math_t>,
                                                     default_simt_policy<T>>::type;
  /// the ping-pong sibling of wgmma_policy_t (128-pixel tiles), taken where it replaces a split-K fixup
  /// (not under 3xTF32; the SIMT policy where there is no wgmma policy, never used)
  using wgmma_pingpong_policy_t =
      typename std::conditional_t<tensor_math, wgmma_pingpong<wgmma_policy_t>, default_simt_policy<T>>::type;

  /// Plans p for the current device (device_info::current()); prepare and run must then be called with
  /// that device current. `options` (plan_options; default: the planner's own choices) may force the wgmma
  /// kernel's choices; the plan keeps them.
  explicit conv2d_reduce_plan(const conv2d_problem& p, const plan_options& options = {})
      : conv2d_reduce_plan(p, device_info::current(), options) {
    if (cudaGetDevice(&device_) != cudaSuccess) {
      cudaGetLastError();  // ours: no device (state() is no_device)
      device_ = -1;
    }
  }

  /// Plans p for the device described by `dev` (no CUDA call: plans can be made and inspected without a
  /// GPU): family::select<T, Families>(p, dev, options), once. state() says whether it can run:
  /// validate(p)'s code for an invalid problem, status::no_device for no device or an explicit
  /// tensor-core math (not math::accurate) on a GPU older than sm_80 where no exact family (direct, tiny)
  /// serves the problem (the narrow family does not serve an explicit tensor-core math there). `options` as
  /// above.
  conv2d_reduce_plan(const conv2d_problem& p, const device_info& dev, const plan_options& options = {})
      : p_(p), options_(options) {
    family::selection s = family::select<T, Families>(p, dev, options);
    state_ = s.state, config_ = s.config, why_ = std::move(s.description);
  }

  conv2d_reduce_plan(const conv2d_reduce_plan&) = delete;
  conv2d_reduce_plan& operator=(const conv2d_reduce_plan&) = delete;
  /// Takes over o's workspace and preparation (o keeps its choice but must be prepared again).
  conv2d_reduce_plan(conv2d_reduce_plan&& o) { *this = std::move(o); }
  /// Frees this plan's own workspace, then takes over o's.
  conv2d_reduce_plan& operator=(conv2d_reduce_plan&& o) {
    if (this != &o) {
      release();
      p_ = o.p_, options_ = o.options_, state_ = o.state_, config_ = o.config_, why_ = o.why_, device_ = o.device_;
      w_ = o.w_, ws_ = o.ws_, ws_bytes_ = o.ws_bytes_, prepared_ = o.prepared_, prepared_on_ = o.prepared_on_;
      scratch_ = o.scratch_, scratch_bytes_ = o.scratch_bytes_;
      owned_ = o.owned_, owned_bytes_ = o.owned_bytes_;
      o.owned_ = nullptr, o.owned_bytes_ = 0, o.ws_ = nullptr, o.ws_bytes_ = 0, o.prepared_ = false;
      o.scratch_ = nullptr, o.scratch_bytes_ = 0;
    }
    return *this;
  }
  /// Frees the workspace the plan owns (cudaFree), if any.
  ~conv2d_reduce_plan() { release(); }

  /// success when the plan can run; else why not (see the constructor).
  status state() const { return state_; }
  /// The kernel family the plan picked (kernel_kind::user for a family from outside convred).
  kernel_kind kernel() const { return config_.kind; }
  /// What the plan decided, as plain data (plan_config: the family's position in families_t, its
  /// tiling, mode, splits, shared memory, workspace and time estimate); every run launches it.
  const plan_config& config() const { return config_; }
  /// GEMM_K splits: of the split path (conv2d_reduce_split with the mma.sync or SIMT policy, over
  /// split_channel_tiles channel tiles) or, when kernel() is kernel_kind::wgmma, of each channel pass in the
  /// wgmma kernel's partial mode (conv2d_reduce_packed_split, 1 to ceil(C / block_c)); 0 when the kernel
  /// runs unsplit.
  int k_splits() const { return config_.splits; }
  /// Which kernel and why, one line for a log: the kernel family and math, its tiles and stages, its mode
  /// (fused, pass mode, split into GEMM_K ranges, a split-K tail; ping-pong), the workspace, and why another
  /// kernel was not taken. For example, the seed problem under tf32 on an H200: "wgmma tf32 (sm_90a, packed
  /// filter streamed, 4 stages, 4x64-pixel tiles, 224976 bytes of shared memory)". docs/usage.md quotes
  /// more, each checked against the planner by tests/test_docs_plans_host.cu.
  const std::string& description() const { return why_; }
  /// The problem planned.
  const conv2d_problem& problem() const { return p_; }
  /// The options the plan was made with (plan_options; default: the planner's own choices).
  const plan_options& options() const { return options_; }
  /// Bytes of workspace the plan needs: the packed filter when the wgmma kernel was picked
  /// (packed_filter_bytes<wgmma_policy_t, T>(p)), and when it runs through conv2d_reduce_packed_split
  /// (partial mode, flat or direct tiles, pass mode, a split-K tail, the ping-pong policy) what that
  /// needs after it (packed_split_workspace_bytes<wgmma_policy_t, T>(p, k_splits()), or with the ping-pong
  /// policy packed_split_workspace_bytes<wgmma_pingpong_policy_t, T>(p, 0)), as those functions size it
  /// on the device the plan was made for; the split path's partial sums when the mma.sync or SIMT kernel
  /// splits (conv2d_reduce_split_workspace_bytes<T>(p, k_splits())); else 0 (config().workspace_bytes).
  /// A dilated plan (family::dilated, its description starting "dilation") needs its sub-problem's bytes,
  /// rounded to 16, plus family::dilated::extra_bytes(p, config()) (x's sub-images and the sub-problem's outputs). A
  /// grouped plan (family::grouped, "groups G one at a time") needs groups slots of one group's prepared
  /// bytes (rounded to 16), one group's scratch, and family::grouped::extra_bytes(p). A pruned plan
  /// (family::pruned) needs the kept taps (rounded to 16) before its sub-problem's bytes; a tiny plan
  /// (family::tiny) 512 bytes per block of its first kernel when it has more than one, else 0.
  std::size_t workspace_bytes() const { return config_.workspace_bytes; }
  /// Bytes at the start of the workspace that prepare() fills (the packed filter of a wgmma plan) and
  /// runs only read; the rest of workspace_bytes() is scratch that every run writes (partial sums, the
  /// packed x, pass states). 0 when the plan packs nothing. A caller that keeps them for many runs binds
  /// them with a scratch of its own (bind), so that runs never write the kept bytes.
  std::size_t prepared_bytes() const { return config_.prepared_bytes; }
  /// Bytes of scratch that bind() takes beside the prepared bytes: what every run writes (the partial sums,
  /// the packed x, the pass states), the part of workspace_bytes() after the prepared bytes (and their
  /// 16-byte alignment); 0 when runs write no workspace.
  std::size_t scratch_bytes() const {
    const std::size_t pre = prepared_bytes(), off = pre > 0 ? detail::partial_offset(pre) : 0;
    return config_.workspace_bytes > off ? config_.workspace_bytes - off : 0;
  }

  /// Prepares the plan for the KCRS weights w (device pointer, K * C/groups * R * S elements of T), the
  /// workspace lent by the caller: `workspace` (16-byte aligned device memory of `bytes` >=
  /// workspace_bytes(), or nullptr when that is 0) receives the packed filter (pack_filter, one small kernel
  /// on `stream`, after a 16-byte memset for a dilated filter or a 3xTF32 filter of several taps) or, for a split plan, the partial sums of every run (the wgmma kernel's partial mode:
  /// both, the partial sums after the packed filter); the plan neither frees nor resizes it. w and
  /// workspace must outlive the plan's runs.
  /// @return success; state() when the plan cannot run; null_pointer (w null with work to do, or the
  ///   workspace null when needed); no_device when the current device is not the one the plan was made
  ///   for (a plan made from a device_info: one its family cannot run the configuration on, e.g. a wgmma
  ///   plan on a device without sm_90a code); and pack_filter's codes,
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
    if (config_.workspace_bytes > 0)
      if (status s = check_workspace(w, workspace, bytes); s != status::success) return s;
    if (status s = family::prepare<Families>(p_, config_, w, workspace, bytes, stream); s != status::success) return s;
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
    const std::size_t need = config_.workspace_bytes;
    if (p_.y_elements() > 0 && need > 0 && owned_bytes_ < need) {
      release();
      if (cudaMalloc(&owned_, need) != cudaSuccess) {
        owned_ = nullptr;
        return status::cuda_error;  // the allocation error is left for cudaGetLastError
      }
      owned_bytes_ = need;
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
  /// @return as the family's entry point (conv2d_reduce, conv2d_reduce_split, conv2d_reduce_packed_split,
  ///   conv2d_reduce_direct); also state() when the plan cannot run, and not_prepared before a successful
  ///   prepare, no_device when the current device is not the one it was prepared on. The wgmma kernel
  ///   reads x through TMA from a 16-byte aligned base on row and direct tiles; another x runs the
  ///   mma.sync kernel of the same math, except where the kernel gathers x itself (stride 2, W % 4 != 0)
  ///   or packs or copies it first (flat tiles; dilated direct tiles with W % 4 != 0): any x aligned to
  ///   float (else misaligned_pointer).
  template <class Op = op::min, class Epilogue = epilogue::identity>
  status run(const T* x, const nondeduced_t<T>* bias, T* y, std::int64_t* indices, Op op = {}, Epilogue epi = {},
             cudaStream_t stream = nullptr) const {
    static_assert(convred::detail::is_reduction_op_v<Op, compute_t<T>>, CONVRED_REDUCTION_OP_REQUIREMENTS);
    static_assert(convred::detail::is_epilogue_v<Epilogue, compute_t<T>>, CONVRED_EPILOGUE_REQUIREMENTS);
    if (state_ != status::success) return state_;
    if (!prepared_) return status::not_prepared;
    if (p_.y_elements() > 0) {
      int dev = -1;
      if (cudaGetDevice(&dev) != cudaSuccess || dev != prepared_on_) {
        if (dev < 0) cudaGetLastError();  // ours: no device
        return status::no_device;
      }
    }
    run_arguments<T> args;
    args.x = x, args.w = w_, args.bias = bias, args.y = y, args.indices = indices;
    args.workspace = ws_, args.workspace_bytes = ws_bytes_, args.scratch = scratch_, args.scratch_bytes = scratch_bytes_;
    args.options = options_;
    return family::launch<Families>(p_, config_, args, op, epi, stream);
  }

 private:
  /// prepare's checks of the workspace: null_pointer, misaligned_pointer (not 16-byte aligned; w not
  /// aligned to T), workspace_too_small, overlapping_buffers (the workspace overlaps w), cuda_error (a
  /// CUDA error pending on entry, left pending).
  status check_workspace(const T* w, const void* workspace, std::size_t bytes) const {
    if (status s = detail::pending_status(); s != status::success) return s;
    if (!workspace) return status::null_pointer;
    if (!detail::aligned(w) || reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0) return status::misaligned_pointer;
    const std::size_t need = config_.workspace_bytes;
    if (bytes < need) return status::workspace_too_small;
    const detail::span in[] = {detail::make_span(w, p_.w_elements())};
    const detail::span out[] = {detail::make_span(static_cast<const unsigned char*>(workspace), static_cast<std::int64_t>(need))};
    return detail::any_overlap(in, out) ? status::overlapping_buffers : status::success;
  }

  /// prepare's and bind's device check: the current device is the plan's (plans for the current device);
  /// for a plan made from a device_info, one on which its family can run the configuration
  /// (family::runs_here: the wgmma family needs sm_90a code there).
  status check_device() const {
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
      cudaGetLastError();  // ours: no device
      return status::no_device;
    }
    if (device_ >= 0) return dev == device_ ? status::success : status::no_device;
    return family::runs_here<Families>(config_);
  }

  void release() noexcept {
    if (owned_) {
      if (ws_ == owned_) ws_ = nullptr, ws_bytes_ = 0, prepared_ = false;
      cudaFree(owned_);
    }
    owned_ = nullptr, owned_bytes_ = 0;
  }

  const T* w_ = nullptr;
  void* ws_ = nullptr;          ///< the workspace bound by prepare (packed filter or partial sums)
  std::size_t ws_bytes_ = 0;    ///< its size
  void* scratch_ = nullptr;     ///< the separate scratch bound by bind (nullptr: the scratch is in ws_)
  std::size_t scratch_bytes_ = 0;  ///< its size
  void* owned_ = nullptr;
  std::size_t owned_bytes_ = 0;
  conv2d_problem p_{};
  plan_options options_{};  ///< the options the plan was made with, passed on to the runs
  status state_ = status::success;
  plan_config config_{};  ///< what family::select decided
  std::string why_;       ///< its description
  bool prepared_ = false;
  int device_ = -1;       ///< the device the plan was made for (-1: made from a device_info)
  int prepared_on_ = -1;  ///< the device current at the last successful prepare
};

}  // namespace convred::device
