/// @file bench/family_bench.cu
/// @brief Diagnosis benchmark of the planner's rules: one layer (or a built-in list) timed through each kernel
/// family of the default list on its own (conv2d_reduce_plan<float, Math, family_list<F>>, where F serves
/// the layer) and through the planner, in TF32, bf16 and math::accurate (then the planner under math::ieee,
/// whose row times the narrow family on K/groups <= 16), so that a rule's choice can be checked against
/// every alternative it has. Job: y = min over channels of 2 (conv2d(x, W) + b), x fp32 NCHW.
///
///   family_bench                                  # the built-in list (tiny images, small grouped layers)
///   family_bench N C H W K R stride pad groups [dilation]   # one layer (an R x R filter, square stride,
///                                                 # padding and dilation; dilation 1 when left out;
///                                                 # R and pad may be RxS and PHxPW: 1x7 with 0x3)
///   family_bench --options N C H W K R stride pad groups [dilation]   # the planner in TF32, bf16 and
///                                                 # accurate with each wgmma choice forced (plan_options:
///                                                 # tiles, pass mode, ping-pong, no tail, splits = -1,
///                                                 # a tail of 1 or 2 tiles, the dilated family's split: residual 1-4, none)
///   family_bench --direct-sweep N C H W K R stride pad groups [dilation]   # the direct kernel's tilings
///                                                 # (C/groups <= 16): the model's best 60 and its pick, timed
///   family_bench --profile N C H W K R stride pad groups [dilation]   # one run of the planner's plan in
///                                                 # TF32, bf16 and accurate, each between cudaProfilerStart
///                                                 # and cudaProfilerStop (after an untimed run), for a
///                                                 # per-kernel breakdown of a run (packing pass, main kernel,
///                                                 # combine or fixup): ncu --profile-from-start off
///                                                 # --metrics gpu__time_duration.sum family_bench --profile ...
///
/// Timing as bench/conv_reduce_bench.cu (bench/timing.cuh): CUDA events around each run on the default
/// stream, the L2 flushed (a 256 MiB memset) and the GPU held 0.5 ms by a spin kernel before each timed run,
/// 3 warm-up runs, the median of 30 (the 16th sorted). Prints ms per family and, in brackets, the family's
/// time model in ms (the planner's row names its choice). Exit 0, or 2 without a device.
#include <convred/convred.cuh>
#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/device/family/mma_narrow.cuh>
#include <convred/device/family/tiny.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_profiler_api.h>
#include <thrust/device_vector.h>
#include <thrust/random.h>
#include <thrust/transform.h>
#include <thrust/iterator/counting_iterator.h>

#include "timing.cuh"

namespace fam = convred::device::family;
using convred::conv2d_problem;
using convred::status;

namespace {

/// uniform values in [-a, a] from a seeded hash (thrust's default engine, discarded per index)
struct uniform {
  float a;
  unsigned seed;
  __host__ __device__ float operator()(std::size_t i) const {
    thrust::default_random_engine e(seed);
    e.discard(i);
    return thrust::uniform_real_distribution<float>(-a, a)(e);
  }
};

struct layer_data {
  thrust::device_vector<float> x, w, b, y;
  explicit layer_data(const conv2d_problem& p)
      : x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
        b(static_cast<std::size_t>(p.K)), y(static_cast<std::size_t>(p.y_elements())) {
    const float fan = 1.0f / std::sqrt(static_cast<float>(p.gemm_k()));
    auto fill = [](thrust::device_vector<float>& v, float a, unsigned s) {
      thrust::transform(thrust::counting_iterator<std::size_t>(0), thrust::counting_iterator<std::size_t>(v.size()),
                        v.begin(), uniform{a, s});
    };
    fill(x, 1.7f, 1), fill(w, fan, 2), fill(b, fan, 3);
  }
};

/// family::mma_narrow wherever it serves (K/groups <= 32 under TF32, bf16 or fp16), its estimate not weighed:
/// the narrow column
template <class T, class Math>
struct any_mma_narrow : fam::mma_narrow<T, Math> {
  static const char* can_implement(const conv2d_problem& p, const convred::device::device_info& dev,
                                   const convred::device::plan_options&) {
    using km = fam::kernel_math_t<T, Math>;
    if (std::is_same_v<km, convred::math::tf32x3> || std::is_same_v<km, convred::math::ieee>) return "not a TF32 or 16-bit math";
    if (!fam::mma_narrow<T, Math>::available(dev)) return "no sm_80";
    return p.K_per_group() <= fam::mma_narrow<T, Math>::policy::block_n ? nullptr : "K/groups > 32";
  }
};

/// family::tiny wherever its kernel fits (groups 1, N*P*Q <= 32, the im2col rows within 200 KB of shared
/// memory), its 512-value limit not applied: the tiny column (squeeze-and-excitation layers at batch 32,
/// 32 pixels x GEMM_K in the thousands, where the planner runs tiled kernels)
template <class T, class Math>
struct any_tiny : fam::tiny<T, Math> {
  static const char* can_implement(const conv2d_problem& p, const convred::device::device_info& dev,
                                   const convred::device::plan_options&) {
    if (!fam::tiny<T, Math>::available(dev)) return "no CUDA device";
    if (p.groups != 1 || p.gemm_m() > convred::kernel::tiny_max_pixels) return "groups != 1 or more than 32 pixels";
    return fam::tiny<T, Math>::smem_bytes(p) <= 200 * 1024 ? nullptr : "im2col rows above 200 KB";
  }
};

/// median ms of 30 runs of the plan (the 16th of 30 sorted; bench/timing.cuh: L2 flushed, GPU held before
/// each, 3 warm-up runs); -1 where the list does not serve p; `est`: the chosen family's time model in ms
/// (plan_config::seconds; 0 without a model)
template <class Math, class List>
double time_plan(const conv2d_problem& p, layer_data& d, std::string* why, double* est = nullptr,
                 const convred::device::plan_options& options = {}) {
  convred::device::conv2d_reduce_plan<float, Math, List> plan(p, options);
  if (plan.state() != status::success) return -1;
  if (why) *why = plan.description();
  if (est) *est = plan.config().seconds * 1e3;
  if (plan.prepare(thrust::raw_pointer_cast(d.w.data())) != status::success) return -2;
  static convred_bench::l2_flush flush(std::size_t(256) << 20);
  const convred::epilogue::scale<float> two{2.0f};
  bool failed = false;
  auto run = [&] {
    failed |= plan.run(thrust::raw_pointer_cast(d.x.data()), thrust::raw_pointer_cast(d.b.data()),
                       thrust::raw_pointer_cast(d.y.data()), nullptr, convred::op::min{}, two) != status::success;
  };
  try {
    const std::vector<double> ms = convred_bench::sorted_times(run, 3, 30, flush);
    if (failed) return -3;
    return cudaGetLastError() == cudaSuccess ? ms[ms.size() / 2] : -4;
  } catch (const std::runtime_error&) {  // a failed CUDA call (CHECK_CUDA)
    return -4;
  }
}

/// --profile: one run of the planner's plan under Math between cudaProfilerStart and cudaProfilerStop
/// (after an untimed run, so that nothing is first-use), and the plan's description.
template <class Math>
void profile_plan(const char* label, const conv2d_problem& p, layer_data& d) {
  convred::device::conv2d_reduce_plan<float, Math, fam::default_families_t<float, Math>> plan(p);
  if (plan.state() != status::success || plan.prepare(thrust::raw_pointer_cast(d.w.data())) != status::success) {
    std::printf("  %-8s not served\n", label);
    return;
  }
  const convred::epilogue::scale<float> two{2.0f};
  status s = status::success;
  auto run = [&] {
    s = plan.run(thrust::raw_pointer_cast(d.x.data()), thrust::raw_pointer_cast(d.b.data()),
                 thrust::raw_pointer_cast(d.y.data()), nullptr, convred::op::min{}, two);
  };
  run();
  cudaDeviceSynchronize();
  cudaProfilerStart();
  run();
  cudaDeviceSynchronize();
  cudaProfilerStop();
  std::printf("  %-8s %s | %s\n", label, s == status::success && cudaGetLastError() == cudaSuccess ? "ran" : "FAILED",
              plan.description().c_str());
}

/// One math's row: the planner, then each family on its own (the wgmma family in its pass1 role, so that it
/// is timed where the planner weighs it against the mma.sync family or the tiny-problem rule passes it over), each with its
/// time model's estimate in brackets (ms).
template <class Math>
void one_math(const char* label, const conv2d_problem& p, layer_data& d) {
  std::string plan;
  double e_plan = 0, e_direct = 0, e_grouped = 0, e_wgmma = 0, e_mma = 0;
  const double t_plan = time_plan<Math, fam::default_families_t<float, Math>>(p, d, &plan, &e_plan);
  const double t_direct = time_plan<Math, fam::family_list<fam::direct<float, Math>>>(p, d, nullptr, &e_direct);
  const double t_grouped = time_plan<Math, fam::family_list<fam::grouped<fam::wgmma<float, Math, fam::wgmma_role::adapter>,
                                                                         fam::mma_sync<float, Math>>>>(p, d, nullptr,
                                                                                                        &e_grouped);
  const double t_wgmma = time_plan<Math, fam::family_list<fam::wgmma<float, Math, fam::wgmma_role::pass1>>>(p, d, nullptr, &e_wgmma);
  const double t_mma = time_plan<Math, fam::family_list<fam::mma_sync<float, Math>>>(p, d, nullptr, &e_mma);
  const double t_simt = time_plan<Math, fam::family_list<fam::simt<float, Math>>>(p, d, nullptr);
  double e_narrow = 0;
  const double t_narrow = time_plan<Math, fam::family_list<any_mma_narrow<float, Math>>>(p, d, nullptr, &e_narrow);
  const double t_tiny = time_plan<Math, fam::family_list<any_tiny<float, Math>>>(p, d, nullptr);
  std::printf("  %-8s plan %8.4f [%7.4f] | direct %8.4f [%7.4f] grouped %8.4f [%7.4f] wgmma %8.4f [%7.4f] "
              "mma.sync %8.4f [%7.4f] narrow %8.4f [%7.4f] simt %8.4f tiny %8.4f | %.110s\n",
              label, t_plan, e_plan, t_direct, e_direct, t_grouped, e_grouped, t_wgmma, e_wgmma, t_mma, e_mma, t_narrow,
              e_narrow, t_simt, t_tiny, plan.c_str());
}

/// The planner against the same planner with each of its wgmma choices forced (plan_options: the tiles rows,
/// flat or direct; pass mode on or off; the ping-pong policy on or off; no split-K tail; the wgmma family
/// wherever it serves, splits = -1; a split-K tail of the last 1 or 2 tiles; the dilated family's full
/// space-to-batch split, the one leaving a residual dilation 2, 3 or 4, or none), in TF32, bf16 and math::accurate: ms, [the estimate], and each plan's
/// description. A forced choice that makes the same plan as a row before it is not timed again ("same").
/// FAMILY_BENCH_MATH (tf32, bf16 or accurate) in the environment: that math only.
void option_rows(const conv2d_problem& p) {
  namespace dev = convred::device;
  layer_data d(p);
  struct forced { const char* label; dev::plan_options o; };
  std::vector<forced> list(17);
  list[0].label = "model";
  list[1].label = "rows", list[1].o.tiles = dev::wgmma_tiling::rows;
  list[2].label = "flat", list[2].o.tiles = dev::wgmma_tiling::flat;
  list[3].label = "direct", list[3].o.tiles = dev::wgmma_tiling::direct;
  list[4].label = "pass-on", list[4].o.pass = dev::wgmma_pass_mode::on;
  list[5].label = "pass-off", list[5].o.pass = dev::wgmma_pass_mode::off;
  list[6].label = "pp-on", list[6].o.pingpong = dev::wgmma_pingpong_mode::on;
  list[7].label = "pp-off", list[7].o.pingpong = dev::wgmma_pingpong_mode::off;
  list[8].label = "no-tail", list[8].o.tail = -1;
  list[9].label = "wgmma", list[9].o.splits = -1;
  list[10].label = "tail-1", list[10].o.tail = 1;
  list[11].label = "tail-2", list[11].o.tail = 2;
  // the dilated family's space-to-batch split forced: the full one, or one leaving a residual dilation
  list[12].label = "s2b-1", list[12].o.dilated_residual = 1;
  list[13].label = "s2b-2", list[13].o.dilated_residual = 2;
  list[14].label = "s2b-3", list[14].o.dilated_residual = 3;
  list[15].label = "s2b-4", list[15].o.dilated_residual = 4;
  list[16].label = "no-s2b", list[16].o.dilated_residual = -1;
  auto rows = [&](auto math, const char* label) {
    using Math = decltype(math);
    std::printf("N%lld C%lld %lldx%lld K%lld %lldx%lld s%lld p%lld g%lld d%lld %s\n", (long long)p.N, (long long)p.C,
                (long long)p.H, (long long)p.W, (long long)p.K, (long long)p.R, (long long)p.S, (long long)p.stride_h,
                (long long)p.pad_h, (long long)p.groups, (long long)p.dil_h, label);
    std::vector<std::string> seen;
    for (const forced& f : list) {
      std::string why;
      double est = 0;
      {  // the plan's description first: a plan already timed is not timed again
        dev::conv2d_reduce_plan<float, Math, fam::default_families_t<float, Math>> plan(p, f.o);
        why = plan.state() == status::success ? plan.description() : "not served";
      }
      if (std::find(seen.begin(), seen.end(), why) != seen.end()) {
        std::printf("  %-8s same\n", f.label);
        continue;
      }
      seen.push_back(why);
      const double t = time_plan<Math, fam::default_families_t<float, Math>>(p, d, nullptr, &est, f.o);
      std::printf("  %-8s %8.4f [%7.4f] %.400s\n", f.label, t, est, why.c_str());
    }
  };
  // FAMILY_BENCH_MATH=tf32 (or bf16, accurate): that math only
  const char* only = std::getenv("FAMILY_BENCH_MATH");
  auto wanted = [&](const char* m) { return !only || std::strcmp(only, m) == 0; };
  if (only && !wanted("tf32") && !wanted("bf16") && !wanted("accurate"))
    std::printf("FAMILY_BENCH_MATH=%s: not tf32, bf16 or accurate; no rows\n", only);
  if (wanted("tf32")) rows(convred::math::tf32{}, "tf32");
  if (wanted("bf16")) rows(convred::math::bf16{}, "bf16");
  if (wanted("accurate")) rows(convred::math::accurate{}, "accurate");
}

/// The direct kernel's tilings for p (C/groups <= 16), fp32 scale + min: every candidate choose_direct_config
/// weighs (tx, ty, channel groups, splits) that its model accepts, the `most` with the least estimate and the
/// chooser's pick timed through conv2d_reduce_direct_with (and the model's best of every (channel groups,
/// splits) pair); prints model us (at plan_direct_clock_hz) and
/// measured us, best measured first, and the pick's row; then a "csv" line per timed tiling (tx, ty, channel
/// groups, splits, channels per stage, the model's cycles and its throughput, memory and latency terms, us).
void direct_sweep(const conv2d_problem& p, int most) {
  namespace dev = convred::device;
  layer_data d(p);
  const dev::direct_kernel_shape k = dev::direct_kernel_shape_of<float>(p);
  int sms = 0, device = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const dev::direct_config pick = dev::choose_direct_config(p, k, sms, dev::direct_max_splits_sm90);
  std::vector<dev::direct_config> cands;
  for (int tx = 1; tx <= 32; ++tx)
    for (int ty = 1; ty <= 64; ++ty)
      for (int g = 1; g <= 32; g *= 2)
        for (int z = 1; z <= dev::direct_max_splits_sm90; z *= 2) {
          if (tx * ty * g > convred::kernel::direct_max_threads) continue;
          const dev::direct_estimate e = dev::estimate_direct_config(p, k, sms, tx, ty, g, z);
          if (!e.ok) continue;
          dev::direct_config c;
          c.tx = tx, c.ty = ty, c.groups = g, c.splits = z, c.cb = e.cb, c.cycles = e.cycles;
          if (dev::direct_config_fits(p, k, c, dev::direct_max_splits_sm90)) cands.push_back(c);
        }
  std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) { return a.cycles < b.cycles; });
  // the model's best `most`, then the best of each (channel groups, splits) pair not among them
  std::vector<dev::direct_config> timed(cands.begin(), cands.begin() + std::min<std::size_t>(cands.size(), most));
  for (const dev::direct_config& c : cands) {
    bool seen = false;
    for (const dev::direct_config& t : timed) seen |= t.groups == c.groups && t.splits == c.splits;
    if (!seen) timed.push_back(c);
  }
  cands = timed;
  cands.push_back(pick);
  static convred_bench::l2_flush flush(std::size_t(256) << 20);
  const convred::epilogue::scale<float> two{2.0f};
  struct row { dev::direct_config c; double ms; };
  std::vector<row> rows;
  for (const dev::direct_config& c : cands) {
    bool failed = false;
    auto run = [&] {
      failed |= dev::detail::conv2d_reduce_direct_with<float>(&c, p, thrust::raw_pointer_cast(d.x.data()),
                                                               thrust::raw_pointer_cast(d.w.data()),
                                                               thrust::raw_pointer_cast(d.b.data()),
                                                               thrust::raw_pointer_cast(d.y.data()), nullptr,
                                                               convred::op::min{}, two, nullptr) != status::success;
    };
    const std::vector<double> ms = convred_bench::sorted_times(run, 2, 15, flush);
    rows.push_back({c, failed || cudaGetLastError() != cudaSuccess ? -1 : ms[ms.size() / 2]});
  }
  const row chosen = rows.back();
  rows.pop_back();
  // failed runs (ms < 0) last
  std::sort(rows.begin(), rows.end(), [](const row& a, const row& b) {
    return (a.ms < 0) != (b.ms < 0) ? b.ms < 0 : a.ms < b.ms;
  });
  // (pad_w and the dilation printed where they differ from the default: bench/fit_direct_model.cu reads this)
  char pad[48] = "", dil[32] = "";
  if (p.pad_w != p.pad_h) std::snprintf(pad, sizeof pad, "x%lld", (long long)p.pad_w);
  if (p.dil_w != p.dil_h)
    std::snprintf(dil, sizeof dil, " d%lldx%lld", (long long)p.dil_h, (long long)p.dil_w);
  else if (p.dil_h != 1)
    std::snprintf(dil, sizeof dil, " d%lld", (long long)p.dil_h);
  std::printf("direct sweep N%lld C%lld %lldx%lld K%lld %lldx%lld s%lld p%lld%s g%lld%s: %zu tilings timed (us)\n",
              (long long)p.N, (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.K, (long long)p.R,
              (long long)p.S, (long long)p.stride_h, (long long)p.pad_h, pad, (long long)p.groups, dil, rows.size());
  auto print = [&](const char* tag, const row& r) {
    std::printf("  %-6s %9.2f model %9.2f  %s\n", tag, r.ms * 1e3, r.c.cycles / convred::device::plan_direct_clock_hz * 1e6,
                dev::describe_direct_config(p, k, r.c).c_str());
  };
  print("pick", chosen);
  for (std::size_t i = 0; i < rows.size() && i < 8; ++i) print("best", rows[i]);
  // every timed row for a refit of the model: the candidate, the model's terms (cycles) and the time (us)
  for (const row& r : rows) {
    const dev::direct_estimate e = dev::estimate_direct_config(p, k, sms, r.c.tx, r.c.ty, r.c.groups, r.c.splits);
    std::printf("  csv,%d,%d,%d,%d,%d,%.0f,%.0f,%.0f,%.0f,%.3f\n", r.c.tx, r.c.ty, r.c.groups, r.c.splits, r.c.cb,
                e.cycles, e.throughput, e.memory, e.latency, r.ms * 1e3);
  }
}

void run_layer(const conv2d_problem& p) {
  std::printf("N%lld C%lld %lldx%lld K%lld %lldx%lld s%lld p%lld g%lld d%lld (ms; -1: not served)\n", (long long)p.N,
              (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.K, (long long)p.R, (long long)p.S,
              (long long)p.stride_h, (long long)p.pad_h, (long long)p.groups, (long long)p.dil_h);
  layer_data d(p);
  one_math<convred::math::tf32>("tf32", p, d);
  one_math<convred::math::bf16>("bf16", p, d);
  one_math<convred::math::accurate>("accurate", p, d);
  // exact fp32 FMA (the planner under math::ieee: the direct, narrow and SIMT families), which math::accurate
  // may take where it is faster than 3xTF32 (it is the more exact of the two)
  std::string why;
  double est = 0;
  const double t = time_plan<convred::math::ieee, fam::default_families_t<float, convred::math::ieee>>(p, d, &why, &est);
  std::printf("  %-8s plan %8.4f [%7.4f] | %.110s\n", "ieee", t, est, why.c_str());
}

conv2d_problem layer(long long N, long long C, long long H, long long W, long long K, long long R, long long s,
                     long long pad, long long g, long long dil = 1) {
  conv2d_problem p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = p.S = R, p.stride_h = p.stride_w = s, p.pad_h = p.pad_w = pad;
  p.groups = g, p.dil_h = p.dil_w = dil;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("family_bench: no CUDA device\n");
    return 2;
  }
  // --options: the planner with each wgmma choice forced (plan_options)
  const bool options = argc > 1 && std::strcmp(argv[1], "--options") == 0;
  if (options) ++argv, --argc;
  // --direct-sweep: the direct kernel's tilings, the model's best 60 and its pick, timed
  const bool sweep = argc > 1 && std::strcmp(argv[1], "--direct-sweep") == 0;
  if (sweep) ++argv, --argc;
  // --profile: one run per math between cudaProfilerStart / Stop (ncu --profile-from-start off)
  const bool profile = argc > 1 && std::strcmp(argv[1], "--profile") == 0;
  if (profile) ++argv, --argc;
  if ((options || sweep || profile) && (int(options) + int(sweep) + int(profile) > 1 || (argc != 10 && argc != 11))) {
    std::printf("usage: family_bench [--options | --direct-sweep | --profile] N C H W K R stride pad groups [dilation]\n");
    return 1;
  }
  if (argc == 10 || argc == 11) {
    long long v[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    for (int i = 0; i + 1 < argc; ++i) v[i] = std::atoll(argv[i + 1]);
    conv2d_problem p = layer(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
    // "RxS" filter and "PHxPW" padding (1x7 with padding 0x3): the second number after the 'x'
    if (const char* x = std::strchr(argv[6], 'x')) p.S = std::atoll(x + 1);
    if (const char* x = std::strchr(argv[8], 'x')) p.pad_w = std::atoll(x + 1);
    if (options) {
      option_rows(p);
    } else if (profile) {
      layer_data d(p);
      std::printf("N%lld C%lld %lldx%lld K%lld %lldx%lld s%lld p%lld g%lld d%lld: one run per math (profiled)\n",
                  (long long)p.N, (long long)p.C, (long long)p.H, (long long)p.W, (long long)p.K, (long long)p.R,
                  (long long)p.S, (long long)p.stride_h, (long long)p.pad_h, (long long)p.groups, (long long)p.dil_h);
      profile_plan<convred::math::tf32>("tf32", p, d);
      profile_plan<convred::math::bf16>("bf16", p, d);
      profile_plan<convred::math::accurate>("accurate", p, d);
    } else if (sweep) {
      direct_sweep(p, 60);
    } else {
      run_layer(p);
    }
    return 0;
  }
  // squeeze-excitation 1x1 layers on pooled (1x1) features, tiny images, and grouped layers the grouped
  // family leaves to mma.sync (torchvision sweep, 2026-12-03)
  const conv2d_problem list[] = {
      layer(1, 56, 1, 1, 448, 1, 1, 0, 1),     layer(1, 2904, 1, 1, 264, 1, 1, 0, 1),
      layer(1, 84, 1, 1, 336, 1, 1, 0, 1),     layer(1, 348, 1, 1, 3712, 1, 1, 0, 1),
      layer(1, 128, 2, 2, 256, 1, 1, 0, 1),    layer(32, 56, 1, 1, 448, 1, 1, 0, 1),
      layer(32, 2904, 1, 1, 264, 1, 1, 0, 1),  layer(32, 2048, 7, 7, 2048, 3, 1, 1, 32),
      layer(32, 96, 112, 112, 96, 3, 2, 1, 2), layer(1, 256, 56, 56, 256, 3, 1, 1, 32),
  };
  for (const conv2d_problem& p : list) run_layer(p);
  return 0;
}
