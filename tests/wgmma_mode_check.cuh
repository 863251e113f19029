/// @file wgmma_mode_check.cuh
/// @brief Shared GPU checks of the wgmma kernel's adapted tiles (test_grouped_wgmma_gpu.cu: grouped passes;
/// test_dilated_wgmma_gpu.cu: dilated tiles): every op against float64 through a plan over the wgmma family
/// alone, in a kernel mode the test forces (plan_options). A Traits type of the test file names:
/// - `static constexpr const char* fragment`: what every plan's description must contain (its tiles served);
/// - `static constexpr const char* partial_name`: partial mode's name in failure labels;
/// - `static constexpr bool pass_described`: whether pass mode's description must say " in pass mode (";
/// - optionally `static constexpr convred::device::wgmma_tiling tiles`: the tiles every mode forces (the
///   modes that force tiles themselves excepted; default: the model's).
#pragma once

#include <convred/device/conv2d_reduce_plan.cuh>

#include <cstdint>
#include <string>
#include <type_traits>

#include "adapter_family_check.cuh"

namespace convred_test_fused {

/// Whether s contains part.
inline bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// The plan of these tests: the wgmma family alone (its adapter role: not weighed against mma.sync).
template <class Math>
using wgmma_plan = convred::device::conv2d_reduce_plan<
    float, Math,
    convred::device::family::family_list<
        convred::device::family::wgmma<float, Math, convred::device::family::wgmma_role::adapter>>>;

/// The kernel's modes the GPU cases force (options_of): the model's choice, row, flat or direct tiles, pass
/// mode, partial mode (2 GEMM_K splits), a split-K tail over the last tile with row tiles (`tail`) or with
/// the model's tiles (`tail_any_tiles`: dilated problems have no row tiles).
enum class mode { model, rows, flat, direct, pass, partial, tail, tail_any_tiles };

/// Mode m's name in failure labels (partial mode's: Traits::partial_name).
template <class Traits>
const char* mode_name(mode m) {
  switch (m) {
    case mode::rows: return "row tiles";
    case mode::flat: return "flat tiles";
    case mode::direct: return "direct tiles";
    case mode::pass: return "pass mode";
    case mode::partial: return Traits::partial_name;
    case mode::tail: return "row tiles with a split-K tail over the last tile";
    case mode::tail_any_tiles: return "a split-K tail over the last tile";
    default: return "the model's choice";
  }
}

/// Traits::tiles where the traits name it, else the model's tiles.
template <class Traits, class = void>
struct traits_tiles {
  static constexpr convred::device::wgmma_tiling value = convred::device::wgmma_tiling::model;
};
template <class Traits>
struct traits_tiles<Traits, std::void_t<decltype(Traits::tiles)>> {
  static constexpr convred::device::wgmma_tiling value = Traits::tiles;
};
/// Mode m's plan_options: `splits` -1 (the wgmma kernel wherever it serves) unless the mode sets it;
/// `tiles` forced for every mode that does not force its own.
inline convred::device::plan_options options_of(mode m,
                                                convred::device::wgmma_tiling tiles = convred::device::wgmma_tiling::model) {
  using convred::device::wgmma_pass_mode;
  using convred::device::wgmma_tiling;
  convred::device::plan_options o;
  o.splits = -1;
  o.tiles = tiles;
  if (m == mode::rows) o.tiles = wgmma_tiling::rows;
  if (m == mode::flat) o.tiles = wgmma_tiling::flat;
  if (m == mode::direct) o.tiles = wgmma_tiling::direct;
  if (m == mode::pass) o.pass = wgmma_pass_mode::on;
  if (m == mode::partial) o.splits = 2;
  if (m == mode::tail) o.tiles = wgmma_tiling::rows, o.tail = 1;
  if (m == mode::tail_any_tiles) o.tail = 1;
  return o;
}

/// check_fused's entry: wgmma_plan<Math> with mode M's options on the current device; requires it to
/// succeed, checks its description contains Traits::fragment, partial mode's GEMM_K splits, pass mode's
/// description (where Traits::pass_described), then run_guarded (adapter_family_check.cuh).
template <class Traits, class Math, mode M>
struct wgmma_mode_entry {
  using math = convred::device::family::kernel_math_t<float, Math>;  ///< the kernels' math (tolerances)
  using self_launching = void;                                         ///< check_fused calls launch
  template <class T, class Op, class Epi>
  static status launch(const conv2d_problem& p, const T* x, const T* w, const T* bias, T* y, std::int64_t* indices,
                       Op op, Epi epi) {
    wgmma_plan<Math> plan(p, options_of(M, traits_tiles<Traits>::value));
    INFO("plan: " << plan.description());
    REQUIRE(plan.state() == status::success);
    CHECK(has(plan.description(), Traits::fragment));
    if constexpr (M == mode::partial) CHECK(plan.k_splits() > 0);
    if constexpr (M == mode::pass && Traits::pass_described) CHECK(has(plan.description(), " in pass mode ("));
    return run_guarded(plan, x, w, bias, y, indices, op, epi);
  }
};

/// One op through wgmma_mode_entry<Traits, Math, M> against float64 on d, labelled "<label> <mode> <op>",
/// with the scale 2 epilogue (-0.5 for max and argmax).
template <class Traits, class Math, mode M, class Op>
void op_check(const std::string& label, const conv2d_problem& p, const host_data<float>& d, Op o) {
  constexpr bool negative = std::is_same_v<Op, op::max> || std::is_same_v<Op, op::argmax>;
  opts opt;
  opt.gain = negative ? 0.5 : 2;
  const epi::scale<float> s{negative ? -0.5f : 2.0f};
  check_fused<wgmma_mode_entry<Traits, Math, M>>(label + " " + mode_name<Traits>(M) + " " + test::op_name<Op>(), p,
                                                 d, o, s, s, opt);
}

/// Every op of the standard six through wgmma_mode_entry<Traits, Math, M>, on real data from `seed`.
template <class Traits, class Math, mode M>
void all_ops(const char* label, const conv2d_problem& p, std::uint64_t seed) {
  const auto d = make_data<float>(p, seed, data_kind::real);
  const std::string l(label);
  op_check<Traits, Math, M>(l, p, d, op::min{});
  op_check<Traits, Math, M>(l, p, d, op::argmin{});
  op_check<Traits, Math, M>(l, p, d, op::sum{});
  op_check<Traits, Math, M>(l, p, d, op::mean{});
  op_check<Traits, Math, M>(l, p, d, op::max{});
  op_check<Traits, Math, M>(l, p, d, op::argmax{});
}

}  // namespace convred_test_fused
