// Fuzz runner (see fuzz.cuh): the planner, device::conv2d_reduce_plan<T, Math> with the library's default family
// list (family::default_families_t<T, Math>: direct, tiny, narrow simt (16 and 32), narrow mma.sync, pruned, dilated, grouped,
// wgmma, mma.sync, simt) and
// the case's plan_options, made for the current device: float tf32 argmin/sum, accurate argmax/mean, bf16 max,
// ieee min/range; fp16 math on half argmin, bf16 math on bf16 argmax. The first launch prepares the plan with a
// lent workspace (exactly workspace_bytes(), poisoned with 0xFF, 256 guard bytes after it); later launches (the
// determinism test: two streams at once) each bind a scratch of their own beside the prepared bytes
// (conv2d_reduce_plan::bind). After the runs: the guard bytes untouched, the prepared bytes as prepare left
// them. The error bound counts the plan's GEMM_K splits (its partial mode or split-K tail's, or the split
// path's). plan_family gives the family a plan would pick on a described device, without a GPU. No test cases
// here: test_fuzz_gpu.cu drives.
#include <convred/device/conv2d_reduce_plan.cuh>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "fuzz.cuh"

namespace convred::fuzz {
namespace {

/// Bytes after every lent buffer (the workspace, each scratch) that must stay untouched.
constexpr std::size_t lent_guard = 256;

template <class List, std::size_t... I>
std::string family_name(int index, std::index_sequence<I...>) {
  std::string n = "none";
  ((index == static_cast<int>(I) ? (void)(n = device::family::family_at_t<I, List>::name) : (void)0), ...);
  return n;
}

/// The label of the family of `config` (its position config.family in the family list List), for problem p: its name ("dilated";
/// "dilated split" where its space-to-batch split leaves a residual dilation, plan_config::split_h / split_w,
/// "grouped", "wgmma", "mma.sync", "simt", "narrow simt", "narrow mma.sync"), the direct family's as "direct
/// depthwise" (C/groups == 1) or "direct grouped" (1 < C/groups <= 16), the narrow family's 32-channel tiles
/// (K/groups > 16) as "narrow simt 32", the wgmma family's on a grouped problem as
/// "wgmma grouped" (its grouped passes) and on a dilated one as "wgmma dilated" (its direct tiles of filter rows)
/// or "wgmma dilated flat" (its flat tiles, the taps as offsets into the packed window).
template <class List>
std::string family_label(const conv2d_problem& p, const device::plan_config& config) {
  const std::string n = family_name<List>(config.family, std::make_index_sequence<List::size>{});
  if (n == "dilated" && ((config.split_h > 0 && config.split_h != (p.R > 1 ? p.dil_h : 1)) ||
                         (config.split_w > 0 && config.split_w != (p.S > 1 ? p.dil_w : 1))))
    return "dilated split";
  if (n == "direct") return p.C_per_group() == 1 ? "direct depthwise" : "direct grouped";
  if (n == "narrow simt" && p.K_per_group() > 16) return "narrow simt 32";
  if (n == "wgmma" && p.groups > 1) return "wgmma grouped";
  if (n == "wgmma" && ((p.dil_h != 1 && p.R > 1) || (p.dil_w != 1 && p.S > 1)))
    return config.wgmma.k.flat ? "wgmma dilated flat" : "wgmma dilated";
  return n;
}

/// A (T, Math, Op) combination of supported(entry::plan, ...), as tags.
template <class T, class Math, class Op>
struct combo {
  using type = T;
  using math_tag = Math;
  using op_type = Op;
};

/// Calls f(combo<T, Math, Op>{}) for the case's combination; false if it is not instantiated.
template <class F>
bool dispatch(const fcase& c, F&& f) {
  switch (c.t) {
    case elem::f16:
      if (c.m == mathk::fp16 && c.o == opk::argmin) return f(combo<__half, math::fp16, op::argmin>{}), true;
      return false;
    case elem::bf16:
      if (c.m == mathk::bf16 && c.o == opk::argmax) return f(combo<__nv_bfloat16, math::bf16, op::argmax>{}), true;
      return false;
    case elem::f32:
      switch (c.m) {
        case mathk::tf32:
          if (c.o == opk::argmin) return f(combo<float, math::tf32, op::argmin>{}), true;
          if (c.o == opk::sum) return f(combo<float, math::tf32, op::sum>{}), true;
          return false;
        case mathk::accurate:
          if (c.o == opk::argmax) return f(combo<float, math::accurate, op::argmax>{}), true;
          if (c.o == opk::mean) return f(combo<float, math::accurate, op::mean>{}), true;
          return false;
        case mathk::bf16:
          if (c.o == opk::max) return f(combo<float, math::bf16, op::max>{}), true;
          return false;
        case mathk::ieee:
          if (c.o == opk::min) return f(combo<float, math::ieee, op::min>{}), true;
          if (c.o == opk::range) return f(combo<float, math::ieee, test::range_op>{}), true;
          return false;
        default: return false;
      }
    default: return false;
  }
}

/// Runs plan case c with conv2d_reduce_plan<T, Math> and op Op (see the file comment).
template <class T, class Math, class Op>
result plan_case(const fcase& c, const run_opts& ro) {
  using plan_t = device::conv2d_reduce_plan<T, Math>;
  plan_t plan(c.p, c.po);
  result r;
  const bool planned = plan.state() == status::success;
  r.family = planned ? family_label<typename plan_t::families_t>(c.p, plan.config()) : "none";
  r.kernel = "plan " + r.family + (plan.k_splits() > 0 ? " split" : "") + " " + name(c.m) + " " + name(c.t) + " " +
             name(c.o);
  if (!planned) {
    r.ok = false, r.why = std::string("plan state ") + convred::to_string(plan.state()) + ": " + plan.description();
    return r;
  }
  const std::size_t bytes = plan.workspace_bytes(), pre = plan.prepared_bytes(), scr = plan.scratch_bytes();
  fcase cc = c;  // the error bound's GEMM_K splits: of the partial mode or split path, or of a split-K tail
  cc.ks = std::max(plan.config().splits, plan.config().wgmma.tail_splits);
  std::vector<std::pair<unsigned char*, std::size_t>> lent;  // [0]: the workspace, then the later scratches
  auto lend = [&](std::size_t n, cudaStream_t s) -> unsigned char* {
    unsigned char* p = nullptr;
    if (cudaMalloc(&p, n + lent_guard) != cudaSuccess) return nullptr;
    lent.emplace_back(p, n);
    return cudaMemsetAsync(p, 0xFF, n + lent_guard, s) == cudaSuccess ? p : nullptr;
  };
  unsigned char* ws = nullptr;
  std::vector<unsigned char> prepared;  // the prepared bytes as prepare left them
  int launches = 0;
  bool prepare_failed = false;
  const result got = run_conv<T, Op>(
      cc, ro, false, [&](const T* x, const T* w, const T* b, T* y, std::int64_t* i, fuzz_epi e, cudaStream_t s) -> status {
        if (launches++ == 0) {
          if (bytes > 0 && !(ws = lend(bytes, s))) return status::cuda_error;
          if (status st = plan.prepare(w, ws, bytes, s); st != status::success) {
            prepare_failed = true;
            return st;
          }
          if (cudaStreamSynchronize(s) != cudaSuccess) return status::cuda_error;
          if (pre > 0) {
            prepared.resize(pre);
            if (cudaMemcpy(prepared.data(), ws, pre, cudaMemcpyDeviceToHost) != cudaSuccess) return status::cuda_error;
          }
        } else if (scr > 0) {  // a later launch, maybe concurrent with the last: a scratch of its own
          unsigned char* sc = lend(scr, s);
          if (!sc) return status::cuda_error;
          if (status st = plan.bind(w, pre > 0 ? ws : nullptr, pre, sc, scr); st != status::success) return st;
        }
        return plan.run(x, b, y, i, Op{}, e, s);
      });
  r.ok = got.ok, r.why = got.why;
  if (!r.ok && prepare_failed) r.why = "prepare: " + r.why;
  cudaDeviceSynchronize();
  if (r.ok) {
    std::vector<unsigned char> tail(lent_guard);
    for (const auto& [p, n] : lent) {
      cudaMemcpy(tail.data(), p + n, lent_guard, cudaMemcpyDeviceToHost);
      if (std::any_of(tail.begin(), tail.end(), [](unsigned char v) { return v != 0xFF; })) {
        r.ok = false, r.why = std::string(p == ws ? "workspace" : "scratch") + " written past its end (" +
                              std::to_string(n) + " bytes asked for)";
        break;
      }
    }
  }
  if (r.ok && pre > 0) {
    std::vector<unsigned char> after(pre);
    cudaMemcpy(after.data(), ws, pre, cudaMemcpyDeviceToHost);
    if (after != prepared) r.ok = false, r.why = "a run wrote the prepared bytes";
  }
  for (const auto& b : lent) cudaFree(b.first);
  if (!r.ok) r.why += " [plan: " + plan.description() + "]";
  return r;
}

}  // namespace

result run_plan(const fcase& c, const run_opts& ro) {
  result r;
  if (!dispatch(c, [&](auto k) {
        using K = decltype(k);
        r = plan_case<typename K::type, typename K::math_tag, typename K::op_type>(c, ro);
      })) {
    r.ok = false;
    r.why = "run_plan: combination not instantiated";
  }
  return r;
}

std::string plan_family(const fcase& c, const plan_device& d) {
  std::string label;
  dispatch(c, [&](auto k) {
    using K = decltype(k);
    using plan_t = device::conv2d_reduce_plan<typename K::type, typename K::math_tag>;
    const plan_t plan(c.p, device::device_info{d.cc_major, d.cc_minor, d.wgmma_image, d.sm_count}, c.po);
    label = plan.state() == status::success ? family_label<typename plan_t::families_t>(c.p, plan.config())
                                            : plan.description();
  });
  return label;
}

}  // namespace convred::fuzz
