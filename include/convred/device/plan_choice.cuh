/// @file device/plan_choice.cuh
/// @brief The choice half of conv2d_reduce_plan (its base, detail::plan_choice): the policy chain that picks,
/// for a problem, an element type, a math, a device and the planner's options, the kernel, its policy and
/// mode, says why, and sizes the workspace (host only, no CUDA call). conv2d_reduce_plan adds the
/// workspace, the weights and the runs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../block/wgmma_conv_params.cuh"
#include "../functional.cuh"
#include "../plan/wgmma_params.cuh"
#include "../policy.cuh"
#include "../problem.cuh"
#include "../status.cuh"
#include "conv2d_reduce_split.cuh"
#include "direct_config.cuh"
#include "plan_options.cuh"
#include "plan_types.cuh"
#include "wgmma_launch.cuh"
#include "wgmma_model.cuh"

namespace convred::device::detail {

/// @brief The choice of a conv2d_reduce_plan<T, Math>, its base: the problem and options planned, the
/// kernel picked (kernel_kind, policy, splits, tiles and mode), the description and the workspace size,
/// set once by choose() from a device_info; and the policy types the plan picks from. See
/// conv2d_reduce_plan for the policy chain.
template <class T, class Math>
class plan_choice {
 protected:
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

 protected:
  plan_choice() = default;
  /// The problem and options to plan; choose() makes the choice.
  plan_choice(const conv2d_problem& p, const plan_options& options) : p_(p), options_(options) {}

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
};

}  // namespace convred::device::detail
