// Tests of the direct (depthwise) path. Host suite: the tiled kernel's block pieces (direct_tiling,
// direct_tile_at, the patch stager's two element enumerations, direct_strip, the ordered combine of the
// splits) run on the host block by block, thread by thread and stage by stage exactly as the kernel runs
// them, against the float64 reference (every filter variant, both layouts, tilings the heuristic picks and
// forced ones: tile tails, splits 1 ... 8, channels per stage, channel groups), including the padded taps
// with non-finite weights; and the tiling heuristic (choose_direct_config). GPU suite:
// device::conv2d_reduce_direct against float64 for every op, both layouts, strides, dilations, paddings,
// channel multipliers, non-finite values, the element types, random shapes and forced tilings (exact on
// integer data); its argument errors; and the planner's choice of it.
#include <convred/device/conv2d_reduce_plan.cuh>

#include "conv2d_reduce_check.cuh"

// GCC 12 at -O3 reports -Wfree-nonheap-object on the std::vector temporaries of the host emulation below
// (a known false positive of its inliner: the vectors own their heap storage); it would stop builds with
// CONVRED_WARNINGS_AS_ERRORS=ON.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#endif

using namespace convred_test_fused;
namespace math = convred::math;
namespace dev = convred::device;

namespace {

/// Depthwise problems (groups = C, K = multiplier * C) over strides, dilations, paddings, odd sizes, and
/// one with C = 1, groups = 1 (a single input channel: also C/groups == 1).
std::vector<conv2d_problem> direct_shapes(layout lay) {
  return {
      make_problem(2, 7, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, lay),        // depthwise 3x3, pad 1
      make_problem(1, 5, 20, 17, 15, 7, 7, 3, 3, 1, 1, 1, 1, 5, lay),       // 7x7 pad 3, multiplier 3
      make_problem(3, 6, 15, 16, 6, 3, 3, 1, 1, 2, 2, 1, 1, 6, lay),        // stride 2
      make_problem(1, 4, 13, 12, 8, 3, 2, 2, 0, 1, 2, 2, 1, 4, lay),        // dilation, uneven stride
      make_problem(2, 1, 9, 10, 33, 5, 5, 2, 2, 1, 1, 1, 1, 1, lay),        // C = 1, groups = 1
      make_problem(1, 33, 4, 5, 33, 1, 1, 0, 0, 1, 1, 1, 1, 33, lay),       // 1x1 depthwise
      make_problem(2, 6, 10, 20, 12, 5, 5, 2, 2, 1, 1, 1, 1, 6, lay),       // W % 4 == 0: 16-byte chunks (NCHW), shift 2
  };
}

/// The filter variant the entry point runs for p: 3, 5 or 7 (unrolled), 0 (run time).
int variant_of(const conv2d_problem& p) { return dev::direct_unrolled_filter(p); }

/// Depthwise problems for the unrolled stride-2 variants: 3x3, 5x5 and 7x7 at stride 2 over sizes (H, W)
/// from {1, 2, 7, 8, 13, 56, 57} (odd and even, tile tails, W % 4 == 0 for chunked staging), padding 0 ...
/// 3 (raised where the image would have no output), channel multiplier K/groups 1 and 2, C = 3 (N = 2;
/// N = 1 for the 56 / 57 sizes).
std::vector<conv2d_problem> s2_shapes(layout lay) {
  const std::int64_t sizes[][2] = {{1, 2}, {2, 7}, {7, 8}, {8, 13}, {13, 1}, {56, 57}, {57, 56}};
  std::vector<conv2d_problem> out;
  int i = 0;
  for (std::int64_t f : {3, 5, 7})
    for (const auto& hw : sizes) {
      std::int64_t pad = i % 4;
      while (hw[0] + 2 * pad < f || hw[1] + 2 * pad < f) ++pad;
      const std::int64_t mult = 1 + i % 2, n = hw[0] > 50 ? 1 : 2;
      out.push_back(make_problem(n, 3, hw[0], hw[1], 3 * mult, f, f, pad, pad, 2, 2, 1, 1, 3, lay));
      ++i;
    }
  return out;
}

/// What emulate_direct found besides y: structural faults of the staging and the store.
struct emulation {
  std::size_t staged_twice = 0;    ///< patch elements staged by more than one thread or item (or inside x and not at all)
  std::size_t written_twice = 0;   ///< outputs written more than once, or never
  int channel_step = 1;            ///< the stager's channel step (NCHW: > 1 where threads share a position's channels)
};

/// Runs the direct kernel's block pieces on the host for tiling c of problem p (variant FR x FS at stride
/// ST), staging in chunks when `vector` (block::direct_vector_staging must hold): every tile, split, stage,
/// channel group and thread in turn, as kernel::conv2d_reduce_direct_kernel and block::direct_store_tile do (zero fill
/// once, then only the items inside x; states combined over the groups in group order, then over the
/// splits in rank order); writes y (N*P*Q) and, for index ops, idx. Buffers are filled with NaN before the
/// zero fill's region is known to be all the stager relies on: cells of a stage that no item writes must
/// be outside x (checked), and stale values of an earlier stage's channel would show in y.
template <int FR, int FS, int ST, class T, class Op, class Epi>
emulation emulate_direct(const conv2d_problem& p, const host_data<T>& d, bool bias, const dev::direct_config& c, Op op,
                         Epi epi, std::vector<T>& y, std::vector<std::int64_t>& idx, bool vector) {
  using strip = convred::block::direct_strip<T, FR, FS, ST>;
  using stager = convred::block::direct_patch_stager<T>;
  using V = typename strip::V;
  using A = typename Op::template accum_t<V>;
  emulation out;
  const auto t = convred::block::make_direct_tiling(p, sizeof(T), sizeof(A), strip::SH, strip::SW, strip::unrolled,
                                                    stager::stages, c.tx, c.ty, c.groups, c.splits, c.cb, c.staged, vector);
  const auto prm = convred::block::make_conv_params(p, d.x.data(), d.w.data(), bias ? d.b.data() : nullptr);
  std::vector<uint4> mem(t.smem_bytes / 16 + 1);
  T* smem = reinterpret_cast<T*>(mem.data());
  const T poison = convred::from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  const T zero = convred::from_compute<T>(0.0);
  y.assign(static_cast<std::size_t>(p.y_elements()), poison);
  idx.assign(y.size(), -1);
  std::vector<int> writes(y.size(), 0);
  const int px = t.tile_pixels(), nstate = strip::SH * strip::SW;
  for (std::int64_t tile = 0; tile < t.tiles; ++tile) {
    std::vector<std::vector<A>> park(static_cast<std::size_t>(t.splits), std::vector<A>(px, Op::template identity<V>()));
    convred::block::direct_tile b0{};
    for (int rank = 0; rank < t.splits; ++rank) {
      const auto b = convred::block::direct_tile_at(t, prm, tile * t.splits + rank);
      if (rank == 0) b0 = b;
      const T* ximg = d.x.data() + b.n * p.C * p.H * p.W;
      std::vector<A> state(static_cast<std::size_t>(t.threads) * nstate, Op::template identity<V>());
      auto thread_state = [&](int tid) -> A(&)[strip::SH][strip::SW] {
        return *reinterpret_cast<A(*)[strip::SH][strip::SW]>(&state[static_cast<std::size_t>(tid) * nstate]);
      };
      auto coords = [&](int tid, std::int32_t& g, std::int32_t& ty, std::int32_t& tx) {
        std::int32_t pt;
        t.div_pt.divmod(tid, g, pt);
        t.div_tx.divmod(pt, ty, tx);
      };
      const stager st0(prm, t, b, smem, 0);
      out.channel_step = std::max(out.channel_step, st0.channel_step());
      if constexpr (!strip::unrolled) {
        if (!t.staged)  // x read directly
          for (int tid = 0; tid < t.threads; ++tid) {
            std::int32_t g, ty, tx;
            coords(tid, g, ty, tx);
            for (std::int64_t ch = b.c0 + g; ch < b.c1; ch += t.groups)
              for (std::int64_t k = ch * p.K_per_group(); k < (ch + 1) * p.K_per_group(); ++k) {
                V acc[strip::SH][strip::SW] = {};
                strip::conv_global(t, b, prm, ty, tx, k, acc);
                strip::fold(op, epi, acc, prm.bias, k, thread_state(tid));
              }
          }
      }
      const int cells = t.cb * t.plane;
      if (t.staged) std::fill(smem, smem + static_cast<std::size_t>(stager::stages) * cells, zero);  // zero_fill
      for (int s = 0; t.staged && s < st0.stage_count(); ++s) {
        T* buf = st0.buffer(s);
        const int nch = st0.stage_channels(s);
        // the cells inside x are rewritten by this stage: poison them (a missed item shows as NaN in y)
        std::vector<int> count(static_cast<std::size_t>(cells), 0);
        for (int cl = 0; cl < nch; ++cl)
          for (int i = 0; i < t.rows; ++i)
            for (int j = 0; j < t.cols; ++j) {
              const std::int64_t h = std::int64_t(b.p0) * p.stride_h - p.pad_h + i;
              const std::int64_t w = std::int64_t(b.q0) * p.stride_w - p.pad_w + j;
              if (h >= 0 && h < p.H && w >= 0 && w < p.W) buf[cl * t.plane + i * t.pitch + j] = poison;
            }
        for (int tid = 0; tid < t.threads; ++tid) {
          const stager st(prm, t, b, smem, tid);
          st.for_each_item(s, [&](int e, std::int64_t off) {
            for (int v = 0; v < t.vec; ++v) {
              buf[e + v] = ximg[off + v];
              ++count[static_cast<std::size_t>(e + v)];
            }
          });
        }
        for (int cl = 0; cl < nch; ++cl)
          for (int i = 0; i < t.rows; ++i)
            for (int j = 0; j < t.cols; ++j) {
              const std::int64_t h = std::int64_t(b.p0) * p.stride_h - p.pad_h + i;
              const std::int64_t w = std::int64_t(b.q0) * p.stride_w - p.pad_w + j;
              const bool in = h >= 0 && h < p.H && w >= 0 && w < p.W;
              out.staged_twice += count[static_cast<std::size_t>(cl * t.plane + i * t.pitch + j)] != (in ? 1 : 0);
            }
        for (int tid = 0; tid < t.threads; ++tid) {
          std::int32_t g, ty, tx;
          coords(tid, g, ty, tx);
          for (int cl = g; cl < nch; cl += t.groups)
            for (std::int64_t k = (st0.stage_first(s) + cl) * p.K_per_group(); k < (st0.stage_first(s) + cl + 1) * p.K_per_group(); ++k) {
              V acc[strip::SH][strip::SW] = {};
              strip::conv(buf + cl * t.plane, t, prm, ty, tx, k, acc);
              strip::fold(op, epi, acc, prm.bias, k, thread_state(tid));
            }
        }
      }
      std::vector<A> parked(static_cast<std::size_t>(t.groups) * px, Op::template identity<V>());
      for (int tid = 0; tid < t.threads; ++tid) {
        std::int32_t g, ty, tx;
        coords(tid, g, ty, tx);
        for (int i = 0; i < strip::SH; ++i)
          for (int j = 0; j < strip::SW; ++j)
            parked[static_cast<std::size_t>(convred::block::direct_park_index(t, g, ty, tx, i, j))] = thread_state(tid)[i][j];
      }
      for (int q = 0; q < px; ++q)
        park[static_cast<std::size_t>(rank)][static_cast<std::size_t>(q)] = convred::block::direct_combine_groups(t, op, parked.data(), q);
    }
    for (int q = 0; q < px; ++q) {
      A r = park[0][static_cast<std::size_t>(q)];
      for (int rank = 1; rank < t.splits; ++rank) r = op(r, park[static_cast<std::size_t>(rank)][static_cast<std::size_t>(q)]);
      const std::int64_t m = convred::block::direct_output_offset(t, b0, prm, q);
      if (m < 0) continue;
      y[static_cast<std::size_t>(m)] = convred::from_compute<T>(Op::template value<V>(r, p.K));
      if constexpr (Op::has_index) idx[static_cast<std::size_t>(m)] = Op::template index<V>(r);
      ++writes[static_cast<std::size_t>(m)];
    }
  }
  for (int w : writes) out.written_twice += w != 1;
  return out;
}

/// emulate_direct with the variant the entry point picks for p (the unrolled filter and stride).
template <class T, class Op, class Epi>
emulation emulate(const conv2d_problem& p, const host_data<T>& d, bool bias, const dev::direct_config& c, Op op, Epi epi,
                  std::vector<T>& y, std::vector<std::int64_t>& idx, bool vector) {
  const bool s2 = dev::direct_unrolled_stride(p) == 2;
  switch (variant_of(p)) {
    case 3: return s2 ? emulate_direct<3, 3, 2>(p, d, bias, c, op, epi, y, idx, vector)
                      : emulate_direct<3, 3, 1>(p, d, bias, c, op, epi, y, idx, vector);
    case 5: return s2 ? emulate_direct<5, 5, 2>(p, d, bias, c, op, epi, y, idx, vector)
                      : emulate_direct<5, 5, 1>(p, d, bias, c, op, epi, y, idx, vector);
    case 7: return s2 ? emulate_direct<7, 7, 2>(p, d, bias, c, op, epi, y, idx, vector)
                      : emulate_direct<7, 7, 1>(p, d, bias, c, op, epi, y, idx, vector);
    default: return emulate_direct<0, 0, 1>(p, d, bias, c, op, epi, y, idx, vector);
  }
}

/// The tilings the host suite emulates for p with element type T: the heuristic's for an H200 (132 SMs,
/// clusters) and an A100 (108 SMs, none), and forced ones (odd thread grids, 1 to 8 splits, 1 to 3
/// channels per stage, channel groups), those that fit.
template <class T>
std::vector<dev::direct_config> tilings_for(const conv2d_problem& p) {
  const auto k = dev::direct_kernel_shape_of<T>(p);
  std::vector<dev::direct_config> all = {dev::choose_direct_config(p, k, 132, 8), dev::choose_direct_config(p, k, 108, 1)};
  const int splits[] = {1, 2, 3, 8};
  const int shapes[][2] = {{1, 1}, {3, 2}, {2, 5}, {5, 3}};
  int i = 0;
  for (const auto& s : shapes)
    for (int groups : {1, 3, 4}) {
      dev::direct_config c;
      c.tx = s[0], c.ty = s[1], c.groups = groups, c.splits = std::min<int>(splits[i % 4], static_cast<int>(p.C));
      c.cb = std::max(1, groups * (1 + i % 2) - i % 3);
      ++i;
      all.push_back(c);
    }
  if (!k.unrolled) {  // the unstaged mode (x read directly), with and without splits
    dev::direct_config c;
    c.tx = 3, c.ty = 2, c.groups = 2, c.staged = false;
    all.push_back(c);
    c.splits = std::min<int>(3, static_cast<int>(p.C));
    all.push_back(c);
  }
  std::vector<dev::direct_config> fit;
  for (const auto& c : all)
    if (dev::direct_config_fits(p, k, c, 8)) fit.push_back(c);
  return fit;
}

/// Exact comparison of an emulated or GPU result with the float64 reference on integer data: y equal to
/// the reference rounded to T (NaN where it is NaN), indices equal (lowest k on ties, first NaN). Returns
/// the number of mismatching pixels.
template <class T, class Op>
std::size_t exact_mismatches(const std::vector<T>& y, const std::vector<std::int64_t>& idx, const std::vector<double>& yref,
                             const std::vector<std::int64_t>& iref) {
  std::size_t bad = 0;
  for (std::size_t m = 0; m < yref.size(); ++m) {
    const double got = convred::to_double(y[m]), want = convred::to_double(convred::from_compute<T>(yref[m]));
    bool ok = same_value(got, want);
    if constexpr (Op::has_index) ok = ok && idx[m] == iref[m];
    bad += !ok;
  }
  return bad;
}

/// The float64 reference of a fused call (values and, for index ops, indices).
template <class T, class Op, class Epi>
void reference_of(const conv2d_problem& p, const host_data<T>& d, bool bias, Op op, Epi epi, std::vector<double>& yref,
                  std::vector<std::int64_t>& iref) {
  yref.assign(static_cast<std::size_t>(p.y_elements()), 0);
  iref.assign(yref.size(), -1);
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), bias ? d.b.data() : nullptr, yref.data(),
                                    Op::has_index ? iref.data() : nullptr, op, epi);
}

/// Emulates every tiling of tilings_for on integer data and requires the exact reference and no
/// structural fault. Returns the number of tilings run.
template <class T, class Op, class Epi>
int check_emulated(const std::string& name, const conv2d_problem& p, const host_data<T>& d, bool bias, Op op, Epi epi,
                   int* shared_positions = nullptr) {
  std::vector<double> yref;
  std::vector<std::int64_t> iref;
  reference_of(p, d, bias, op, epi, yref, iref);
  int n = 0;
  for (const auto& c : tilings_for<T>(p)) {
    INFO(name << " " << describe(p) << " T=" << std::string(type_name<T>()) << " op=" << std::string(op_name<Op>())
              << " tiling tx=" << c.tx << " ty=" << c.ty << " groups=" << c.groups << " splits=" << c.splits
              << " cb=" << c.cb << (c.staged ? "" : " unstaged"));
    const bool chunks = dev::direct_kernel_shape_of<T>(p).vector;
    for (bool vector : {false, true}) {
      if (vector && !chunks) continue;
      INFO((vector ? "chunked staging" : "element staging"));
      std::vector<T> y;
      std::vector<std::int64_t> idx;
      const emulation e = emulate(p, d, bias, c, op, epi, y, idx, vector);
      CHECK(e.staged_twice == 0);
      CHECK(e.written_twice == 0);
      CHECK(exact_mismatches<T, Op>(y, idx, yref, iref) == 0);
      if (shared_positions && c.staged && p.x_layout == layout::nchw) *shared_positions += e.channel_step > 1;
      ++n;
    }
  }
  return n;
}

/// The problems of the non-finite tests under forced tilings: 7x7 (unrolled) and a 3x3 with stride 2
/// down and dilation 2 across (the run-time variant).
std::vector<conv2d_problem> nonfinite_shapes(layout lay) {
  return {make_problem(2, 6, 13, 17, 12, 7, 7, 3, 3, 1, 1, 1, 1, 6, lay),
          make_problem(1, 5, 12, 9, 5, 3, 3, 1, 2, 2, 1, 1, 2, 5, lay)};
}

/// Integer data with non-finite values for p (a nonfinite_shapes problem): x +inf, -inf and NaN inside
/// and on the border; w +inf on channel 0's corner tap (meets the padding: NaN there), -inf, NaN; bias
/// -inf and NaN.
host_data<float> nonfinite_data(const conv2d_problem& p, std::uint64_t seed) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  host_data<float> d = make_data<float>(p, seed, data_kind::integer);
  d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 4, 4))] = static_cast<float>(inf);
  d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 2, 0, 3))] = static_cast<float>(-inf);
  d.x[static_cast<std::size_t>(convred::reference::x_offset(p, p.N - 1, 4, 7, 8))] = static_cast<float>(nan);
  d.w[0] = static_cast<float>(inf);
  d.w[static_cast<std::size_t>(3 * p.R * p.S + 1)] = static_cast<float>(-inf);
  d.w[static_cast<std::size_t>(4 * p.R * p.S + p.R * p.S - 1)] = static_cast<float>(nan);
  d.b[2] = static_cast<float>(-inf), d.b[static_cast<std::size_t>(p.K - 1)] = static_cast<float>(nan);
  return d;
}

/// A random depthwise problem for the sweeps: filter from {1x1, 3x3, 5x5, 7x7, 3x1}, stride 1 or 2,
/// padding 0 ... 3, dilation 1 or 2 (a quarter of the time), K from {1, 3, 33, 96, 144, 257} with
/// multiplier 2 for even K (C = K / 2) and 1 otherwise, a sixth of the time C = 1 (groups 1, multiplier
/// K), N from {1, 3}, H and W from 1 to `most` (tile tails; above 64: several tile rows and columns),
/// either layout; valid (P, Q >= 1).
conv2d_problem random_direct_problem(picker& pick, std::int64_t most) {
  const std::int64_t filters[][2] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {3, 1}};
  const std::int64_t Ks[] = {1, 3, 33, 96, 144, 257};
  for (;;) {
    const auto* f = filters[pick(0, 4)];
    const std::int64_t K = Ks[pick(0, 5)];
    const bool one = pick(0, 5) == 0;
    const std::int64_t C = one ? 1 : (K % 2 == 0 ? K / 2 : K);
    const std::int64_t stride = pick(1, 2), dil = pick(0, 3) == 0 ? 2 : 1;
    const conv2d_problem p = make_problem(pick(0, 1) ? 3 : 1, C, pick(1, most), pick(1, most), K, f[0], f[1],
                                          pick(0, 3), pick(0, 3), stride, pick(0, 1) ? stride : 1, dil, dil,
                                          one ? 1 : C, pick(0, 1) ? layout::nhwc : layout::nchw);
    const std::int64_t nh = p.H + 2 * p.pad_h - p.dil_h * (p.R - 1) - 1, nw = p.W + 2 * p.pad_w - p.dil_w * (p.S - 1) - 1;
    if (nh < 0 || nw < 0 || convred::validate(p, 4) != status::success) continue;
    return p;
  }
}

/// True if the direct kernels of this program can be launched as clusters on the current device (splits
/// > 1): compute capability 9.0+ and code built for sm_90+.
bool direct_clusters() {
  int sms = 0;
  bool clusters = false;
  return dev::detail::direct_device_facts(convred::kernel::conv2d_reduce_direct_kernel<float, op::argmin, epi::scale<float>, 0, 0>,
                                          sms, clusters) &&
         clusters;
}

/// Runs device::detail::conv2d_reduce_direct_with with tiling c (forced) on integer data and requires the
/// exact float64 reference: y (poisoned first with a finite sentinel) and indices (poisoned with
/// INT64_MIN) all written, values and indices equal (lowest k on ties, first NaN), inputs unmodified.
template <class T, class Op, class Epi>
void check_forced(const std::string& name, const conv2d_problem& p, const host_data<T>& d, bool bias,
                  const dev::direct_config& c, Op op, Epi epi, bool element_copies = false) {
  INFO(name << " " << describe(p) << " T=" << std::string(type_name<T>()) << " op=" << std::string(op_name<Op>())
            << " tiling tx=" << c.tx << " ty=" << c.ty << " groups=" << c.groups << " splits=" << c.splits
            << " cb=" << c.cb << (c.staged ? "" : " unstaged") << (element_copies ? " element copies" : ""));
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<T> dy(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> di(Op::has_index ? dy.size() : 0);
  poison_output(dy, true);
  test::poison(di);
  const status s = dev::detail::conv2d_reduce_direct_with<T>(&c, p, craw(dx), craw(dw), bias ? craw(db) : nullptr, raw(dy),
                                                             Op::has_index ? raw(di) : nullptr, op, epi, nullptr,
                                                             element_copies);
  INFO("status: " << std::string(convred::to_string(s)));
  REQUIRE(s == status::success);
  const cudaError_t e = cudaDeviceSynchronize();
  INFO("CUDA: " << std::string(cudaGetErrorString(e)));
  REQUIRE(e == cudaSuccess);
  const auto y = test::to_host(dy);
  auto idx = test::to_host(di);
  CHECK(count_unwritten(y, true) == 0);
  CHECK(bytes_equal(test::to_host(dx), d.x));
  // deterministic: a second run gives the same bits (splits combine in rank order)
  REQUIRE(dev::detail::conv2d_reduce_direct_with<T>(&c, p, craw(dx), craw(dw), bias ? craw(db) : nullptr, raw(dy),
                                                    Op::has_index ? raw(di) : nullptr, op, epi, nullptr,
                                                    element_copies) == status::success);  // the same copy path
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(bytes_equal(test::to_host(dy), y));
  CHECK(test::to_host(di) == idx);
  std::vector<double> yref;
  std::vector<std::int64_t> iref;
  reference_of(p, d, bias, op, epi, yref, iref);
  if (!Op::has_index) idx.assign(y.size(), -1);
  CHECK(exact_mismatches<T, Op>(y, idx, yref, iref) == 0);
}

/// The forced tilings of the GPU tests for p and T: every split count 1 ... 8 and 16 (when clusters launch),
/// channels per stage 1 ... 3, channel groups, a thread grid wider than the output, and the
/// unstaged mode (run-time variant), those that fit.
template <class T>
std::vector<dev::direct_config> forced_tilings(const conv2d_problem& p, bool clusters) {
  const auto k = dev::direct_kernel_shape_of<T>(p);
  std::vector<dev::direct_config> all;
  for (int splits = 1; splits <= 8; ++splits) {
    dev::direct_config c;
    c.tx = 1 + splits % 4 * 3, c.ty = 1 + (splits * 5) % 7, c.groups = 1 + (splits * 3) % 5, c.cb = 1 + splits % 3;
    c.splits = splits;
    all.push_back(c);
  }
  dev::direct_config wide;
  wide.tx = 32, wide.ty = 8, wide.cb = 2;
  all.push_back(wide);
  dev::direct_config c16;  // a 16-block cluster (the non-portable size; dev::direct_max_splits_sm90)
  c16.tx = 2, c16.ty = 2, c16.groups = 2, c16.cb = 1, c16.splits = 16;
  all.push_back(c16);
  if (!k.unrolled) {
    dev::direct_config u;
    u.tx = 5, u.ty = 3, u.groups = 3, u.staged = false, u.splits = clusters ? 3 : 1;
    all.push_back(u);
  }
  std::vector<dev::direct_config> fit;
  for (const auto& c : all)
    if (dev::direct_config_fits(p, k, c, clusters ? dev::direct_max_splits_sm90 : 1)) fit.push_back(c);
  return fit;
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("direct kernel pieces run on the host equal the float64 reference (every variant, both layouts, tilings)") {
  // the block pieces of kernel::conv2d_reduce_direct_kernel emulated block by block, thread by thread:
  // exact on integer data (float, double and half), every tiling staged each element exactly once, the
  // register path's enumeration the same elements, every output written once
  std::uint64_t seed = 51000;
  int tilings = 0, shared_positions = 0;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : direct_shapes(lay)) {
      const auto df = make_data<float>(p, ++seed, data_kind::integer);
      tilings += check_emulated("argmin", p, df, true, op::argmin{}, epi::scale<float>{2.0f}, &shared_positions);
      tilings += check_emulated("sum", p, df, true, op::sum{}, epi::identity{});
      const auto dd = make_data<double>(p, ++seed, data_kind::integer);
      tilings += check_emulated("max no bias", p, dd, false, op::max{}, epi::scale<float>{-1.5f});
      const auto dh = make_data<__half>(p, ++seed, data_kind::integer);
      tilings += check_emulated("argmax", p, dh, true, op::argmax{}, epi::scale<float>{-1.5f});
    }
  MESSAGE(tilings << " tilings emulated, " << shared_positions << " of them NCHW with threads sharing a position's channels");
  CHECK(tilings > 100);
  CHECK(shared_positions > 0);  // both staging orders of the stager (its channel step 1 and more) ran
}

TEST_CASE("direct kernel pieces on the host: random depthwise shapes, exact") {
  picker pick{std::mt19937_64(58000)};
  std::uint64_t seed = 58100;
  for (int i = 0; i < 40; ++i) {
    const conv2d_problem p = random_direct_problem(pick, 24);
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    switch (i % 3) {
      case 0: check_emulated("random argmin", p, d, true, op::argmin{}, epi::scale<float>{2.0f}); break;
      case 1: check_emulated("random min", p, d, i % 2 == 0, op::min{}, epi::identity{}); break;
      default: check_emulated("random sum", p, d, true, op::sum{}, epi::scale<float>{-1.0f}); break;
    }
  }
}

TEST_CASE("direct kernel pieces on the host: the unrolled stride-2 variants (3x3, 5x5, 7x7), sizes, paddings, types, exact") {
  // s2_shapes: odd and even H, W in {1, 2, 7, 8, 13, 56, 57}, padding 0-3, multipliers 1 and 2, both
  // layouts (chunked staging where NCHW, W % 4 == 0 and the padding is even); every op over the element
  // types, integer data: exact
  std::uint64_t seed = 64000;
  int tilings = 0, i = 0;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : s2_shapes(lay)) {
      INFO(describe(p));
      const auto k = dev::direct_kernel_shape_of<float>(p);
      REQUIRE(k.unrolled);
      REQUIRE(k.stride == 2);
      REQUIRE(k.filter == p.R);
      const auto df = make_data<float>(p, ++seed, data_kind::integer);
      const auto dd = make_data<double>(p, ++seed, data_kind::integer);
      const auto dh = make_data<__half>(p, ++seed, data_kind::integer);
      const auto db = make_data<__nv_bfloat16>(p, ++seed, data_kind::integer);
      switch (i++ % 3) {
        case 0:
          tilings += check_emulated("s2 argmin", p, df, true, op::argmin{}, epi::scale<float>{2.0f});
          tilings += check_emulated("s2 max no bias", p, dd, false, op::max{}, epi::scale<float>{-1.5f});
          tilings += check_emulated("s2 mean", p, dh, true, op::mean{}, epi::identity{});
          break;
        case 1:
          tilings += check_emulated("s2 sum", p, df, true, op::sum{}, epi::identity{});
          tilings += check_emulated("s2 argmax", p, dh, true, op::argmax{}, epi::scale<float>{-1.5f});
          tilings += check_emulated("s2 min", p, db, true, op::min{}, epi::scale<float>{2.0f});
          break;
        default:
          tilings += check_emulated("s2 argmax", p, df, false, op::argmax{}, epi::scale<float>{-1.0f});
          tilings += check_emulated("s2 argmin", p, dd, true, op::argmin{}, epi::identity{});
          tilings += check_emulated("s2 sum", p, db, true, op::sum{}, epi::scale<float>{2.0f});
          break;
      }
    }
  MESSAGE(tilings << " stride-2 tilings emulated");
  CHECK(tilings > 300);
}

TEST_CASE("direct kernel pieces on the host: infinite and NaN filter values meet the zero padding as 0 * w (NaN)") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (layout lay : kLayouts) {
    const conv2d_problem p = make_problem(1, 3, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, lay);
    host_data<float> d = make_data<float>(p, 56000, data_kind::integer);
    d.w[0] = static_cast<float>(inf);       // channel 0, tap (0, 0): padding above / left of row 0, column 0
    d.w[9 + 8] = static_cast<float>(-inf);  // channel 1, tap (2, 2)
    d.w[18 + 4] = static_cast<float>(nan);  // channel 2, centre tap
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 3, 3))] = static_cast<float>(inf);
    // sum: every channel's value shows (NaN where a padded tap met an infinite weight), argmax: first NaN
    std::vector<double> yref;
    std::vector<std::int64_t> iref;
    reference_of(p, d, true, op::sum{}, epi::identity{}, yref, iref);
    CHECK(test::count_nan(yref) > 0);
    check_emulated("non-finite sum", p, d, true, op::sum{}, epi::identity{});
    check_emulated("non-finite argmax", p, d, true, op::argmax{}, epi::scale<float>{2.0f});
    check_emulated("non-finite min", p, d, false, op::min{}, epi::scale<float>{-1.5f});
  }
  // the data of the GPU test under forced tilings, every op it runs
  std::uint64_t seed = 63000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : nonfinite_shapes(lay)) {
      const host_data<float> d = nonfinite_data(p, ++seed);
      std::vector<double> yref;
      std::vector<std::int64_t> iref;
      reference_of(p, d, true, op::argmin{}, epi::scale<float>{2.0f}, yref, iref);
      CHECK(test::count_nan(yref) > 0);
      check_emulated("non-finite argmin", p, d, true, op::argmin{}, epi::scale<float>{2.0f});
      check_emulated("non-finite argmax", p, d, true, op::argmax{}, epi::scale<float>{-1.5f});
      check_emulated("non-finite max", p, d, false, op::max{}, epi::identity{});
      check_emulated("non-finite sum", p, d, true, op::sum{}, epi::identity{});
    }
}

TEST_CASE("direct tiling heuristic: fits, fills the GPU with splits on small batches, none without clusters") {
  const conv2d_problem mbv2 = make_problem(32, 144, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144);
  const conv2d_problem convnext = make_problem(32, 96, 56, 56, 96, 7, 7, 3, 3, 1, 1, 1, 1, 96);
  for (conv2d_problem p : {mbv2, convnext}) {
    for (std::int64_t n : {32, 1}) {
      p.N = n;
      INFO(describe(p));
      const auto k = dev::direct_kernel_shape_of<float>(p);
      CHECK(k.unrolled);
      CHECK(k.sw == 4);
      CHECK(k.vector);  // NCHW, W = 56: 16-byte chunks
      const dev::direct_config h200 = dev::choose_direct_config(p, k, 132, 8);
      CHECK(dev::direct_config_fits(p, k, h200, 8));
      const auto t = convred::block::make_direct_tiling(p, 4, 8, k.sh, k.sw, k.unrolled, k.stages, h200.tx, h200.ty,
                                                        h200.groups, h200.splits, h200.cb, true, k.vector);
      MESSAGE(describe(p) << ": " << dev::describe_direct_config(p, k, h200) << "; " << t.blocks() << " blocks, "
                          << t.smem_bytes << " bytes of shared memory, estimate " << h200.cycles << " cycles");
      // the stage buffers aim at direct_stage_smem, unless one channel per channel group alone exceeds it
      if (h200.cb > h200.groups) CHECK(t.smem_bytes <= 64u * 1024);
      if (n == 1) CHECK(h200.splits > 1);  // 3136 pixels: the channels are shared out
      CHECK(h200.cycles > 0);
      // no clusters (sm_80, or code without sm_90): never split; unknown SM count: never split
      const dev::direct_config a100 = dev::choose_direct_config(p, k, 108, 1);
      CHECK(a100.splits == 1);
      CHECK(dev::direct_config_fits(p, k, a100, 1));
      CHECK(dev::choose_direct_config(p, k, 0, 8).splits == 1);
      // the same answer again (the cached path gives the same)
      const dev::direct_config again = dev::choose_direct_config(p, k, 132, 8);
      CHECK(again.tx == h200.tx);
      CHECK(again.ty == h200.ty);
      CHECK(again.splits == h200.splits);
    }
  }
  // depthwise on 7 x 7 images at batch 1 (EfficientNet-B7's 7x7 and 5x5 layers): 16-block clusters where
  // the device allows them, at most 8 with a portable limit; at batch 32 (the tiles fill the GPU) 16 blocks
  // per tile are an extra candidate, taken only below direct_extra_margin times the base candidates' best
  for (const conv2d_problem& q : {make_problem(1, 1536, 7, 7, 1536, 7, 7, 3, 3, 1, 1, 1, 1, 1536),
                                  make_problem(1, 1152, 7, 7, 1152, 5, 5, 2, 2, 1, 1, 1, 1, 1152)}) {
    INFO(describe(q));
    const auto k = dev::direct_kernel_shape_of<float>(q);
    const dev::direct_config c = dev::choose_direct_config(q, k, 132, dev::direct_max_splits_sm90);
    CHECK(c.splits == 16);
    CHECK(dev::direct_config_fits(q, k, c, dev::direct_max_splits_sm90));
    CHECK_FALSE(dev::direct_config_fits(q, k, c, dev::direct_max_splits));
    CHECK(dev::choose_direct_config(q, k, 132, dev::direct_max_splits).splits == 8);
    conv2d_problem b32 = q;
    b32.N = 32;
    const dev::direct_config c32 = dev::choose_direct_config(b32, k, 132, dev::direct_max_splits_sm90);
    const dev::direct_config c8 = dev::choose_direct_config(b32, k, 132, dev::direct_max_splits);
    CHECK(c8.splits <= 8);
    CHECK(c8.ty == 4);  // a base candidate (a power of two): the margin below is against the base set's best
    if (c32.splits > 8) CHECK(c32.cycles < c8.cycles * dev::direct_extra_margin);
  }
  // the extra candidates (direct_extra_margin), on the layers whose tilings the H200 timed (2026-12-05):
  // not 16 blocks at batch 1 without few tiles (c240 65 x 65 stride 2, where 16 measured 1.5x slower), a
  // row count outside the base set (c24 150 x 150: 13 threads down, 94.7 -> 75.9 us); where 16 blocks per
  // tile are taken at batch 32 (c2304 15 x 15 took them before the combine grew with the cluster: 103 us
  // against 113 for its 8-block pick now), they are ahead of the base candidates by the margin
  {
    const conv2d_problem a = make_problem(32, 2304, 15, 15, 2304, 3, 3, 1, 1, 1, 1, 1, 1, 2304);
    const conv2d_problem b = make_problem(1, 240, 65, 65, 240, 3, 3, 1, 1, 2, 2, 1, 1, 240);
    const conv2d_problem c = make_problem(32, 24, 150, 150, 24, 3, 3, 1, 1, 1, 1, 1, 1, 24);
    const auto ca = dev::choose_direct_config(a, dev::direct_kernel_shape_of<float>(a), 132, dev::direct_max_splits_sm90);
    const auto cb = dev::choose_direct_config(b, dev::direct_kernel_shape_of<float>(b), 132, dev::direct_max_splits_sm90);
    const auto cc = dev::choose_direct_config(c, dev::direct_kernel_shape_of<float>(c), 132, dev::direct_max_splits_sm90);
    CHECK(cb.splits <= 8);
    CHECK(cc.ty == 13);
    // the base candidates alone (a portable cluster limit) are worse by at least the margin where 16 were taken
    const auto ca8 = dev::choose_direct_config(a, dev::direct_kernel_shape_of<float>(a), 132, dev::direct_max_splits);
    CHECK(ca8.ty == 8);  // a base candidate (a power of two)
    CHECK(ca.splits == 8);  // the model's pick since the combine grew with the cluster (2, 8, 8, 8: 113 us)
  }
  // the combine grows with the cluster (direct_model_constants::combine per doubling of its blocks): grouped
  // and depthwise layers at batch 32 on 14 x 14 images take small clusters of many channels (H200, 2026-12-05:
  // n32 c512 14x14 groups 32, 8 blocks per tile 121 us, 2 blocks 78; n32 c384 14x14 5x5 depthwise, 16
  // blocks 38.8 us, 2 blocks 31.4)
  for (const conv2d_problem& q : {make_problem(32, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                  make_problem(32, 384, 14, 14, 384, 5, 5, 2, 2, 1, 1, 1, 1, 384)}) {
    INFO(describe(q));
    const auto cq = dev::choose_direct_config(q, dev::direct_kernel_shape_of<float>(q), 132, dev::direct_max_splits_sm90);
    CHECK(cq.splits == 2);
    CHECK(cq.groups == 32);
  }
  // 16-bit data and double: every choice fits; unrolled exactly where direct_unrolled_filter says
  picker pick{std::mt19937_64(59000)};
  for (int i = 0; i < 200; ++i) {
    const conv2d_problem p = random_direct_problem(pick, 120);
    INFO(describe(p));
    const auto kh = dev::direct_kernel_shape_of<__half>(p);
    CHECK(dev::direct_config_fits(p, kh, dev::choose_direct_config(p, kh, 132, 8), 8));
    const auto kd = dev::direct_kernel_shape_of<double>(p);
    CHECK(dev::direct_config_fits(p, kd, dev::choose_direct_config(p, kd, 132, 8), 8));
    CHECK(kh.unrolled == (variant_of(p) > 0));
  }
  // refusals of a forced tiling
  const auto k = dev::direct_kernel_shape_of<float>(mbv2);
  dev::direct_config c;
  c.tx = 16, c.ty = 32;  // 512 threads
  CHECK_FALSE(dev::direct_config_fits(mbv2, k, c, 8));
  c.tx = 4, c.ty = 4, c.splits = 2;
  CHECK_FALSE(dev::direct_config_fits(mbv2, k, c, 1));  // no clusters
  CHECK(dev::direct_config_fits(mbv2, k, c, 8));
  c.groups = 32;  // 512 threads
  CHECK_FALSE(dev::direct_config_fits(mbv2, k, c, 8));
}

TEST_CASE("direct tiling heuristic: 3x3, 5x5 and 7x7 depthwise layers at stride 2 run the unrolled stride-2 variants") {
  // MNASNet / EfficientNet / MobileNetV2 stride-2 depthwise layers (batch 32 and 1) and s2_shapes
  std::vector<conv2d_problem> layers = {
      make_problem(32, 144, 56, 56, 144, 5, 5, 2, 2, 2, 2, 1, 1, 144),     // MNASNet: 0.217 ms generic (H200)
      make_problem(32, 1200, 33, 33, 1200, 5, 5, 2, 2, 2, 2, 1, 1, 1200),  // 0.536 ms generic
      make_problem(32, 96, 28, 28, 96, 5, 5, 2, 2, 2, 2, 1, 1, 96),        // 0.047 ms generic
      make_problem(32, 96, 112, 112, 96, 3, 3, 1, 1, 2, 2, 1, 1, 96),      // MobileNetV2
      make_problem(32, 240, 28, 28, 240, 3, 3, 1, 1, 2, 2, 1, 1, 240, layout::nhwc),
      make_problem(8, 64, 64, 64, 128, 7, 7, 3, 3, 2, 2, 1, 1, 64)};
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : s2_shapes(lay)) layers.push_back(p);
  for (conv2d_problem p : layers)
    for (std::int64_t n : {p.N, std::int64_t(1)}) {
      p.N = n;
      INFO(describe(p));
      CHECK(variant_of(p) == p.R);
      CHECK(dev::direct_unrolled_stride(p) == 2);
      const auto k = dev::direct_kernel_shape_of<float>(p);
      CHECK(k.unrolled);
      CHECK(k.stride == 2);
      CHECK(k.sw == 4);
      CHECK(k.sh == 2);
      // chunks: NCHW, W a multiple of 4, even padding (the patch then starts on a chunk: shift columns)
      CHECK(k.vector == (p.x_layout == layout::nchw && p.W % 4 == 0 && p.pad_w % 2 == 0));
      for (int sms : {132, 108}) {
        const int splits = sms == 132 ? 8 : 1;
        const dev::direct_config c = dev::choose_direct_config(p, k, sms, splits);
        CHECK(c.staged);
        CHECK(c.cycles > 0);
        REQUIRE(dev::direct_config_fits(p, k, c, splits));
        const auto t = convred::block::make_direct_tiling(p, 4, 8, k.sh, k.sw, k.unrolled, k.stages, c.tx, c.ty,
                                                          c.groups, c.splits, c.cb, true, k.vector);
        CHECK(t.smem_bytes <= dev::direct_max_smem);
        CHECK(t.cols == (t.tile_w - 1) * 2 + p.S);  // each strip's run: 2 * SW + S - 2 columns
        CHECK(t.rows == (t.tile_h - 1) * 2 + p.R);
        if (t.vec > 1) CHECK((t.shift * 2 + p.pad_w) % t.vec == 0);  // patch column 0 on a chunk boundary
        // the network layers (batch 8 or 32) on an H200: the model has the unrolled variant faster than the
        // run-time one (tiny outputs, where its 2 x 4 strips leave too few threads, and the 14 x 14 NHWC
        // layer on an A100 without clusters, it does not: the entry point still runs the unrolled one).
        // Since the refit of the model's issue rate (a warp issuing every fourth cycle: blocks of more warps
        // estimated faster), two more where it does not: NHWC 3x3 over 240 channels at 28x28 and the 7x7
        // filter with channel multiplier 2, whose run-time tilings hold twice the warps (not measured
        // against each other; the unrolled stride-2 variant measured 3.6x faster than the run-time one on
        // 5x5 c144 56x56: bench/NOTES.md)
        const auto k0 = dev::direct_kernel_shape_of<float>(0, false);
        const bool refit_exception = (p.C == 240 && p.x_layout == layout::nhwc && p.R == 3) || (p.R == 7 && p.K == 2 * p.C);
        if (sms == 132 && p.N > 1 && p.H > 20 && !refit_exception)
          CHECK(c.cycles < dev::choose_direct_config(p, k0, sms, splits).cycles);
        if (sms == 132 && p.N > 1 && p.H > 20)
          MESSAGE(describe(p) << ": " << dev::describe_direct_config(p, k, c) << "; estimate " << c.cycles
                              << " cycles (run-time variant: " << dev::choose_direct_config(p, k0, sms, splits).cycles
                              << ")");
      }
      for (const auto& kk : {dev::direct_kernel_shape_of<__half>(p), dev::direct_kernel_shape_of<double>(p)}) {
        CHECK(kk.stride == 2);
        CHECK(dev::direct_config_fits(p, kk, dev::choose_direct_config(p, kk, 132, 8), 8));
      }
    }
  // not the stride-2 variants: uneven strides, stride 3, dilation 2 at stride 2, other filters
  for (const conv2d_problem& p : {make_problem(1, 4, 16, 16, 4, 3, 3, 1, 1, 2, 1, 1, 1, 4),
                                  make_problem(1, 4, 16, 16, 4, 3, 3, 1, 1, 3, 3, 1, 1, 4),
                                  make_problem(1, 4, 16, 16, 4, 3, 3, 2, 2, 2, 2, 2, 2, 4),
                                  make_problem(1, 4, 16, 16, 4, 3, 1, 1, 0, 2, 2, 1, 1, 4),
                                  make_problem(1, 4, 16, 16, 4, 9, 9, 4, 4, 2, 2, 1, 1, 4)}) {
    INFO(describe(p));
    CHECK(variant_of(p) == 0);
    CHECK_FALSE(dev::direct_kernel_shape_of<float>(p).unrolled);
    CHECK(dev::direct_kernel_shape_of<float>(p).stride == 1);
  }
}

// The chooser's model lays out the patch as the kernel does (make_direct_tiling), so what it picks fits:
// a review found large filters, stride 3 and dilation whose real pitch exceeded the model's and made
// valid problems fail with invalid_argument. The one allowed miss is an unrolled-variant problem whose
// patches fit no stage buffer (the chooser then names the unstaged tiling, which only the run-time
// variant runs: conv2d_reduce_direct_with falls back to it).
template <class T>
void check_chosen_tilings_fit(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  int checked = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t R = 2 * pick(0, 15) + 1, S = 2 * pick(0, 15) + 1, dh = pick(1, 4), dw = pick(1, 4);
    const std::int64_t sh = pick(1, 4), sw = pick(1, 4), C = pick(1, 64), H = pick(8, 160), W = pick(8, 160);
    const std::int64_t ph = pick(0, static_cast<int>((R - 1) * dh)), pw = pick(0, static_cast<int>((S - 1) * dw));
    conv2d_problem p = make_problem(pick(0, 1) ? 1 : 8, C, H, W, C * pick(1, 2), R, S, ph, pw, sh, sw, dh, dw, C,
                                    pick(0, 3) == 0 ? layout::nhwc : layout::nchw);
    if (convred::validate(p, sizeof(T)) != status::success) continue;
    ++checked;
    INFO(describe(p));
    for (int sms : {132, 108}) {
      const int splits = sms == 132 ? 8 : 1;
      const auto k = dev::direct_kernel_shape_of<T>(p);
      const dev::direct_config c = dev::choose_direct_config(p, k, sms, splits);
      CHECK((dev::direct_config_fits(p, k, c, splits) || (k.unrolled && !c.staged)));
      const auto k0 = dev::direct_kernel_shape_of<T>(0, false);  // the run-time variant: always fits
      CHECK(dev::direct_config_fits(p, k0, dev::choose_direct_config(p, k0, sms, splits), splits));
    }
  }
  CHECK(checked > n / 2);
}

TEST_CASE("direct tiling heuristic: the chosen tiling fits for large filters, strides 1-4 and dilation") {
  check_chosen_tilings_fit<float>(61000, 1500);
  check_chosen_tilings_fit<double>(62000, 1500);
  check_chosen_tilings_fit<__half>(63000, 500);
  // the review's two cases (float, 132 SMs, clusters): 13x13 stride 3 and 17x17 dilation 4
  for (const conv2d_problem& p : {make_problem(1, 16, 28, 28, 16, 13, 13, 6, 6, 3, 3, 1, 1, 16),
                                  make_problem(1, 1, 112, 112, 1, 17, 17, 32, 32, 1, 1, 4, 4, 1)}) {
    INFO(describe(p));
    const auto k = dev::direct_kernel_shape_of<float>(p);
    CHECK(dev::direct_config_fits(p, k, dev::choose_direct_config(p, k, 132, 8), 8));
  }
}

TEST_CASE("direct tiling: a patch beyond int32 (huge padding and dilation) is planned unstaged, without hanging") {
  // 3x3, padding and dilation 30000 on a 1x1 image: P = Q = 1 but the patch would be 60001 x 60001;
  // rows * chunks overflowed int32 and fast_divmod looped forever on the negative divisor
  const conv2d_problem p = make_problem(1, 1, 1, 1, 1, 3, 3, 30000, 30000, 1, 1, 30000, 30000, 1);
  REQUIRE(convred::validate(p, 4) == status::success);
  const auto k = dev::direct_kernel_shape_of<float>(p);
  const dev::direct_config c = dev::choose_direct_config(p, k, 132, 8);
  CHECK_FALSE(c.staged);
  CHECK(dev::direct_config_fits(p, k, c, 8));
  const auto staged = convred::block::make_direct_tiling(p, 4, 8, k.sh, k.sw, k.unrolled, k.stages, 1, 1, 1, 1, 1, true, false);
  CHECK(staged.smem_bytes > dev::direct_max_smem);  // refused, not wrapped
  const auto t = convred::block::make_direct_tiling(p, 4, 8, k.sh, k.sw, k.unrolled, k.stages, c.tx, c.ty, c.groups,
                                                    c.splits, c.cb, false, false);
  CHECK(t.smem_bytes <= dev::direct_max_smem);
  CHECK(convred::detail::fast_divmod(-5).d == 1);  // a bad divisor no longer loops
  CHECK(convred::detail::fast_divmod(0x7fffffff).div(0x7ffffffe) == 0);
  CHECK(convred::detail::fast_divmod(0x7fffffff).div(0x7fffffff - 0) == 1);
}

TEST_CASE("conv2d_reduce_plan describes the direct kernel's tiling for the device") {
  const conv2d_problem dw = make_problem(1, 96, 56, 56, 96, 7, 7, 3, 3, 1, 1, 1, 1, 96);
  const dev::device_info h200{9, 0, true, 132}, a100{8, 0, false, 108};
  const std::string d1 = dev::conv2d_reduce_plan<float>(dw, h200).description();
  CHECK(d1.find("direct (exact fp32 FMA") == 0);
  CHECK(d1.find("blocks per tile") != std::string::npos);  // batch 1 on an H200: split in clusters
  CHECK(d1.find("C/groups == 1") != std::string::npos);
  const std::string d2 = dev::conv2d_reduce_plan<float, math::tf32>(dw, a100).description();
  CHECK(d2.find("blocks per tile") == std::string::npos);
  CHECK(d2.find("pixel tiles") != std::string::npos);
  MESSAGE(d1);
  MESSAGE(d2);
}
}  // TEST_SUITE("host")

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_direct: every op vs float64, both layouts, strides, dilation, multipliers") {
  require_gpu();
  std::uint64_t seed = 52000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : direct_shapes(lay)) {
      const std::string name = "direct " + describe(p);
      for_each_op([&](auto o) { check_scaled<direct_entry, float>(name, p, ++seed, o); });
      check_scaled<direct_entry, double>(name + " double argmin", p, ++seed, op::argmin{});
      check_scaled<direct_entry, __half>(name + " half min", p, ++seed, op::min{});
      check_scaled<direct_entry, __nv_bfloat16>(name + " bf16 argmax", p, ++seed, op::argmax{}, -1.5f);
      check_scaled<direct_entry, float>(name + " no bias mean", p, ++seed, op::mean{}, 2.0f, false);
    }
  // integer data: exact values and argmin indices (ties: lowest k)
  const conv2d_problem p = make_problem(2, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8);
  const auto d = make_data<float>(p, ++seed, data_kind::integer);
  opts o;
  o.exact = true;
  check_fused<direct_entry>("direct exact argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
  check_fused<direct_entry>("direct exact sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
}

TEST_CASE("conv2d_reduce_direct: large images (many tiles, tile tails), 3x3, 7x7 and 5x5 NHWC filters") {
  require_gpu();
  // 384 x 384, 200 x 200 and 180 x 180 outputs: many tile rows and columns and tails in both directions
  // for whatever tiling the host picks; integer data, so values and argmin indices (ties: lowest k) are exact
  std::uint64_t seed = 57000;
  opts o;
  o.exact = true;
  for (const conv2d_problem& p : {make_problem(1, 8, 384, 384, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8),
                                  make_problem(1, 8, 200, 200, 16, 7, 7, 3, 3, 1, 1, 1, 1, 8),
                                  make_problem(1, 8, 180, 180, 8, 5, 5, 2, 2, 1, 1, 1, 1, 8, layout::nhwc)}) {
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    check_fused<direct_entry>("direct lanes argmin " + describe(p), p, d, op::argmin{}, epi::scale<float>{2.0f},
                              epi::scale<float>{2.0f}, o);
    check_fused<direct_entry>("direct lanes sum " + describe(p), p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
  }
}

TEST_CASE("conv2d_reduce_direct: +-inf and NaN in x, w and bias, exact") {
  require_gpu();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  opts o;
  o.exact = true;
  o.nan_expected = true;
  std::uint64_t seed = 53000;
  for (layout lay : kLayouts) {
    // depthwise 3x3, multiplier 2 (channel k reads input channel k / 2), integer data elsewhere
    const conv2d_problem p = make_problem(2, 5, 9, 12, 10, 3, 3, 1, 1, 1, 1, 1, 1, 5, lay);
    host_data<float> d = make_data<float>(p, ++seed, data_kind::integer);
    auto all_ops = [&](const std::string& name) {
      INFO("case: " << name << " " << describe(p));
      check_fused<direct_entry>(name + " min", p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " argmax", p, d, op::argmax{}, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
      check_fused<direct_entry>(name + " mean", p, d, op::mean{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    };
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 1, 4, 4))] = static_cast<float>(inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 0, 2, 4, 6))] = static_cast<float>(-inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 4, 8, 11))] = static_cast<float>(-inf);
    d.x[static_cast<std::size_t>(convred::reference::x_offset(p, 1, 0, 2, 9))] = static_cast<float>(nan);
    all_ops("direct inf/NaN in x");
    d.w[static_cast<std::size_t>(3 * 9 + 4)] = static_cast<float>(inf);    // channel 3
    d.w[static_cast<std::size_t>(6 * 9 + 0)] = static_cast<float>(-inf);   // channel 6
    d.w[static_cast<std::size_t>(8 * 9 + 8)] = static_cast<float>(nan);    // channel 8
    all_ops("direct inf/NaN in x and w");
    d.b[2] = static_cast<float>(-inf), d.b[9] = static_cast<float>(nan);
    all_ops("direct inf/NaN in x, w and bias");
  }
}

TEST_CASE("conv2d_reduce_direct sanitizer: depthwise, multiplier, stride, both layouts") {
  require_gpu();
  std::uint64_t seed = 54000;
  for (layout lay : kLayouts) {
    check_scaled<direct_entry, float>("sanitizer direct", make_problem(2, 6, 9, 7, 12, 3, 3, 1, 1, 2, 1, 1, 1, 6, lay),
                                      ++seed, op::argmin{});
    check_scaled<direct_entry, float>("sanitizer direct 1x1", make_problem(1, 5, 4, 6, 5, 1, 1, 0, 0, 1, 1, 1, 1, 5, lay),
                                      ++seed, op::sum{});
    // every variant (3x3, 5x5, 7x7 unrolled; run time), the register-staged 16-bit path, double, splits
    check_scaled<direct_entry, float>("sanitizer direct 5x5", make_problem(1, 9, 11, 13, 18, 5, 5, 2, 2, 1, 1, 1, 1, 9, lay),
                                      ++seed, op::max{});
    check_scaled<direct_entry, __half>("sanitizer direct 7x7 half", make_problem(1, 7, 10, 9, 7, 7, 7, 3, 3, 1, 1, 1, 1, 7, lay),
                                       ++seed, op::min{});
    check_scaled<direct_entry, double>("sanitizer direct 3x3 double",
                                       make_problem(2, 4, 6, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, lay), ++seed, op::argmax{});
  }
  // forced tilings: splits 1 ... 8 in clusters (sm_90), stages, channel groups, the unstaged mode
  const bool clusters = direct_clusters();
  for (const conv2d_problem& p : {make_problem(1, 16, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16),
                                  make_problem(1, 12, 8, 7, 24, 3, 2, 1, 0, 2, 1, 2, 1, 12, layout::nhwc)}) {
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    for (const auto& c : forced_tilings<float>(p, clusters)) {
      check_forced("sanitizer direct forced", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f});
      check_forced("sanitizer direct forced", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f}, true);
    }
    const auto h = make_data<__nv_bfloat16>(p, ++seed, data_kind::integer);
    for (const auto& c : forced_tilings<__nv_bfloat16>(p, clusters))
      check_forced("sanitizer direct forced bf16", p, h, true, c, op::sum{}, epi::identity{});
  }
}

TEST_CASE("conv2d_reduce_direct: forced tilings (splits 1-8, stages, strips, unstaged), every filter variant, exact") {
  require_gpu();
  const bool clusters = direct_clusters();
  if (!clusters) MESSAGE("no cluster launch on this device or build: splits > 1 not tested");
  std::uint64_t seed = 60000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : {make_problem(3, 33, 23, 37, 33, 3, 3, 1, 1, 1, 1, 1, 1, 33, lay),
                                    make_problem(1, 48, 30, 29, 96, 7, 7, 3, 3, 1, 1, 1, 1, 48, lay),
                                    make_problem(1, 20, 21, 22, 20, 5, 5, 2, 2, 1, 1, 1, 1, 20, lay),
                                    make_problem(3, 9, 25, 19, 18, 3, 1, 3, 0, 2, 1, 2, 1, 9, lay),
                                    make_problem(1, 1, 17, 19, 257, 3, 3, 1, 1, 1, 1, 1, 1, 1, lay),
                                    make_problem(2, 24, 19, 28, 24, 3, 3, 1, 1, 1, 1, 1, 1, 24, lay),    // W % 4 == 0: chunks
                                    make_problem(1, 16, 13, 32, 32, 7, 7, 3, 3, 1, 1, 1, 1, 16, lay)}) {  // pad 3: shift 1
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      const auto h = make_data<__half>(p, ++seed, data_kind::integer);
      const auto g = make_data<double>(p, ++seed, data_kind::integer);
      for (const auto& c : forced_tilings<float>(p, clusters)) {
        check_forced("forced argmin", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f});
        check_forced("forced argmin, element copies", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f}, true);
        check_forced("forced sum", p, d, false, c, op::sum{}, epi::identity{});
      }
      for (const auto& c : forced_tilings<__half>(p, clusters))
        check_forced("forced half argmax", p, h, true, c, op::argmax{}, epi::scale<float>{-1.5f});
      for (const auto& c : forced_tilings<double>(p, clusters))
        check_forced("forced double min", p, g, true, c, op::min{}, epi::scale<float>{2.0f});
    }
  // a refused forced tiling: nothing launched
  const conv2d_problem p = make_problem(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4);
  thrust::device_vector<float> x(static_cast<std::size_t>(p.x_elements()), 1.f), w(static_cast<std::size_t>(p.w_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  dev::direct_config bad;
  bad.tx = 64, bad.ty = 8;  // 512 threads
  CHECK(dev::detail::conv2d_reduce_direct_with<float>(&bad, p, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{},
                                                      epi::identity{}, nullptr) == status::invalid_argument);
  bad.tx = 2, bad.ty = 2, bad.staged = false;  // unstaged needs the run-time variant; 3x3 stride 1 is unrolled
  CHECK(dev::detail::conv2d_reduce_direct_with<float>(&bad, p, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{},
                                                      epi::identity{}, nullptr) == status::invalid_argument);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("conv2d_reduce_direct: +-inf and NaN in x, w and bias under forced tilings, every filter variant, exact") {
  require_gpu();
  const bool clusters = direct_clusters();
  std::uint64_t seed = 63000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : nonfinite_shapes(lay)) {
      const host_data<float> d = nonfinite_data(p, ++seed);
      for (const auto& c : forced_tilings<float>(p, clusters)) {
        check_forced("non-finite argmin", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f});
        check_forced("non-finite argmax", p, d, true, c, op::argmax{}, epi::scale<float>{-1.5f});
        check_forced("non-finite max", p, d, false, c, op::max{}, epi::identity{});
        check_forced("non-finite sum", p, d, true, c, op::sum{}, epi::identity{});
      }
    }
}

TEST_CASE("conv2d_reduce_direct: random depthwise shapes, every type, op and layout, poisoned outputs, exact") {
  require_gpu();
  // filters {1x1, 3x3, 5x5, 7x7, 3x1}, stride 1 and 2, padding 0..3, dilation 2, multipliers 1 and 2, K in
  // {1, 3, 33, 96, 144, 257}, N in {1, 3}, H and W up to 70 (tile tails; several tile rows and columns),
  // NCHW and NHWC; float, half, bf16, double; the six ops and a user op; integer data: exact
  picker pick{std::mt19937_64(61000)};
  std::uint64_t seed = 61100;
  for (int i = 0; i < 56; ++i) {
    const conv2d_problem p = random_direct_problem(pick, 70);
    const std::string name = "direct random " + std::to_string(i);
    opts o;
    o.exact = true;
    o.bias = i % 5 != 0;
    auto run = [&](auto t, auto op_) {
      using T = decltype(t);
      const auto d = make_data<T>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>(name, p, d, op_, epi::scale<float>{i % 2 ? 2.0f : -1.0f}, epi::scale<float>{i % 2 ? 2.0f : -1.0f}, o);
    };
    switch (i % 7) {
      case 0: run(float{}, op::min{}); break;
      case 1: run(__half{}, op::max{}); break;
      case 2: run(__nv_bfloat16{}, op::argmin{}); break;
      case 3: run(double{}, op::argmax{}); break;
      case 4: run(float{}, op::sum{}); break;
      case 5: run(__half{}, op::mean{}); break;
      default: run(float{}, range_op{}); break;
    }
  }
}

TEST_CASE("conv2d_reduce_direct: huge dilation (no patch fits: x read directly) and stride, exact") {
  require_gpu();
  std::uint64_t seed = 62000;
  opts o;
  o.exact = true;
  for (layout lay : kLayouts) {
    // dilation 300 (3x3): a patch spans 601 x 601 input elements, more than any buffer
    const conv2d_problem dil = make_problem(1, 3, 640, 610, 6, 3, 3, 10, 2, 1, 1, 300, 300, 3, lay);
    REQUIRE_FALSE(dev::choose_direct_config(dil, dev::direct_kernel_shape_of<float>(dil), 132, 8).staged);
    const auto d = make_data<float>(dil, ++seed, data_kind::integer);
    check_fused<direct_entry>("direct dilation 300", dil, d, op::argmin{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
    const auto h = make_data<__half>(dil, ++seed, data_kind::integer);
    check_fused<direct_entry>("direct dilation 300 half", dil, h, op::sum{}, epi::identity{}, epi::identity{}, o);
    // stride 700: every output pixel its own patch
    const conv2d_problem str = make_problem(2, 2, 1500, 1400, 4, 2, 2, 0, 0, 700, 700, 1, 1, 2, lay);
    const auto e = make_data<float>(str, ++seed, data_kind::integer);
    check_fused<direct_entry>("direct stride 700", str, e, op::max{}, epi::identity{}, epi::identity{}, o);
  }
}

TEST_CASE("conv2d_reduce_direct: argument errors") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4);
  thrust::device_vector<float> x(static_cast<std::size_t>(p.x_elements()), 1.f), w(static_cast<std::size_t>(p.w_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  using convred::device::conv2d_reduce_direct;
  conv2d_problem wide = p;
  wide.C = 34, wide.groups = 2;  // C/groups = 17: not served (1 < C/groups <= 16 is: test_grouped_direct_gpu.cu)
  CHECK(conv2d_reduce_direct(wide, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{}) == status::invalid_groups);
  conv2d_problem bad = p;
  bad.groups = 3;  // C % groups != 0: validate's own error
  CHECK(conv2d_reduce_direct(bad, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{}) == status::invalid_groups);
  CHECK(conv2d_reduce_direct(p, craw(x), craw(w), nullptr, raw(y), raw(idx), op::min{}) == status::indices_not_supported);
  CHECK(conv2d_reduce_direct(p, static_cast<const float*>(nullptr), craw(w), nullptr, raw(y), nullptr, op::min{}) ==
        status::null_pointer);
  CHECK(conv2d_reduce_direct(p, craw(x), craw(w), nullptr, const_cast<float*>(craw(x)), nullptr, op::min{}) ==
        status::overlapping_buffers);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("conv2d_reduce_direct: the unrolled stride-2 variants (3x3, 5x5, 7x7), sizes, paddings, every type and op, exact") {
  require_gpu();
  // s2_shapes (odd and even H, W in {1, 2, 7, 8, 13, 56, 57}, padding 0-3, multipliers 1 and 2), both
  // layouts; the six ops in float, half, bf16 and double; integer data: exact values and indices
  std::uint64_t seed = 65000;
  opts o;
  o.exact = true;
  int i = 0;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : s2_shapes(lay)) {
      REQUIRE(dev::direct_kernel_shape_of<float>(p).stride == 2);
      const std::string name = "direct s2 " + describe(p);
      o.bias = i++ % 4 != 3;
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>(name + " min", p, d, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " argmin", p, d, op::argmin{}, epi::scale<float>{-1.0f}, epi::scale<float>{-1.0f}, o);
      check_fused<direct_entry>(name + " max", p, d, op::max{}, epi::identity{}, epi::identity{}, o);
      check_fused<direct_entry>(name + " argmax", p, d, op::argmax{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " sum", p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
      check_fused<direct_entry>(name + " mean", p, d, op::mean{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      const auto h = make_data<__half>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>(name + " half argmin", p, h, op::argmin{}, epi::identity{}, epi::identity{}, o);
      check_fused<direct_entry>(name + " half sum", p, h, op::sum{}, epi::identity{}, epi::identity{}, o);
      const auto b = make_data<__nv_bfloat16>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>(name + " bf16 argmax", p, b, op::argmax{}, epi::scale<float>{-1.5f}, epi::scale<float>{-1.5f}, o);
      check_fused<direct_entry>(name + " bf16 mean", p, b, op::mean{}, epi::identity{}, epi::identity{}, o);
      const auto g = make_data<double>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>(name + " double min", p, g, op::min{}, epi::scale<float>{2.0f}, epi::scale<float>{2.0f}, o);
      check_fused<direct_entry>(name + " double argmax", p, g, op::argmax{}, epi::identity{}, epi::identity{}, o);
      // real data, every op within the float64 tolerance
      for_each_op([&](auto op_) { check_scaled<direct_entry, float>(name + " real", p, ++seed, op_); });
    }
}

TEST_CASE("conv2d_reduce_direct: stride-2 variants with per_channel_scale, exact on integer data") {
  require_gpu();
  std::uint64_t seed = 66000;
  opts o;
  o.exact = true;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : s2_shapes(lay)) {
      std::vector<float> hs(static_cast<std::size_t>(p.K));
      for (std::size_t k = 0; k < hs.size(); ++k) hs[k] = static_cast<float>(static_cast<int>(k % 5) - 2);  // -2 ... 2
      auto ds = test::to_device(hs);
      const epi::per_channel_scale<float> dev_pcs{craw(ds)}, host_pcs{hs.data()};
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>("s2 pcs argmin " + describe(p), p, d, op::argmin{}, dev_pcs, host_pcs, o);
      check_fused<direct_entry>("s2 pcs sum " + describe(p), p, d, op::sum{}, dev_pcs, host_pcs, o);
      check_fused<direct_entry>("s2 pcs argmax " + describe(p), p, d, op::argmax{}, dev_pcs, host_pcs, o);
      const auto h = make_data<__nv_bfloat16>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>("s2 pcs bf16 max " + describe(p), p, h, op::max{}, dev_pcs, host_pcs, o);
    }
}

TEST_CASE("conv2d_reduce_direct: stride-2 variants under forced tilings (splits, stages, strips, copies), exact") {
  require_gpu();
  const bool clusters = direct_clusters();
  std::uint64_t seed = 67000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : {make_problem(2, 20, 29, 31, 20, 3, 3, 1, 1, 2, 2, 1, 1, 20, lay),
                                    make_problem(1, 24, 32, 40, 48, 5, 5, 2, 2, 2, 2, 1, 1, 24, lay),  // chunks, shift 1
                                    make_problem(1, 12, 33, 33, 12, 5, 5, 0, 0, 2, 2, 1, 1, 12, lay),
                                    make_problem(1, 16, 27, 24, 16, 7, 7, 3, 3, 2, 2, 1, 1, 16, lay)}) {
      REQUIRE(dev::direct_kernel_shape_of<float>(p).stride == 2);
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      const auto h = make_data<__half>(p, ++seed, data_kind::integer);
      const auto g = make_data<double>(p, ++seed, data_kind::integer);
      for (const auto& c : forced_tilings<float>(p, clusters)) {
        check_forced("s2 forced argmin", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f});
        check_forced("s2 forced argmin, element copies", p, d, true, c, op::argmin{}, epi::scale<float>{2.0f}, true);
        check_forced("s2 forced sum", p, d, false, c, op::sum{}, epi::identity{});
      }
      for (const auto& c : forced_tilings<__half>(p, clusters))
        check_forced("s2 forced half argmax", p, h, true, c, op::argmax{}, epi::scale<float>{-1.5f});
      for (const auto& c : forced_tilings<double>(p, clusters))
        check_forced("s2 forced double min", p, g, true, c, op::min{}, epi::scale<float>{2.0f});
    }
}

TEST_CASE("conv2d_reduce_direct: MNASNet / EfficientNet stride-2 depthwise layers (batch 2), exact") {
  require_gpu();
  std::uint64_t seed = 68000;
  opts o;
  o.exact = true;
  for (const conv2d_problem& p : {make_problem(2, 144, 56, 56, 144, 5, 5, 2, 2, 2, 2, 1, 1, 144),
                                  make_problem(2, 1200, 33, 33, 1200, 5, 5, 2, 2, 2, 2, 1, 1, 1200),
                                  make_problem(2, 96, 28, 28, 96, 5, 5, 2, 2, 2, 2, 1, 1, 96, layout::nhwc),
                                  make_problem(2, 96, 112, 112, 96, 3, 3, 1, 1, 2, 2, 1, 1, 96)}) {
    const auto d = make_data<float>(p, ++seed, data_kind::integer);
    check_fused<direct_entry>("s2 layer argmin " + describe(p), p, d, op::argmin{}, epi::scale<float>{2.0f},
                              epi::scale<float>{2.0f}, o);
    check_fused<direct_entry>("s2 layer sum " + describe(p), p, d, op::sum{}, epi::identity{}, epi::identity{}, o);
    check_scaled<direct_entry, __nv_bfloat16>("s2 layer bf16 max " + describe(p), p, ++seed, op::max{});
  }
}

TEST_CASE("conv2d_reduce_plan picks the direct kernel for C/groups == 1 under every math") {
  require_gpu();
  const conv2d_problem dw = make_problem(2, 12, 14, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 12);
  CHECK(convred::device::conv2d_reduce_plan<float>(dw).kernel() == convred::device::kernel_kind::direct);
  CHECK(convred::device::conv2d_reduce_plan<float, math::tf32>(dw).kernel() == convred::device::kernel_kind::direct);
  CHECK(convred::device::conv2d_reduce_plan<__half, math::bf16>(dw).kernel() == convred::device::kernel_kind::direct);
  // the plan's output is the direct entry point's, and within the exact tolerance of float64
  const auto d = make_data<float>(dw, 55001, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw_ = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<float> y1(static_cast<std::size_t>(dw.y_elements())), y2(y1.size());
  thrust::device_vector<std::int64_t> i1(y1.size()), i2(y1.size());
  test::poison(y1), test::poison(y2);
  convred::device::conv2d_reduce_plan<float, math::bf16> plan(dw);
  REQUIRE(plan.prepare(craw(dw_)) == status::success);
  CHECK(plan.workspace_bytes() == 0u);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}, epi::scale<float>{2.0f}) == status::success);
  REQUIRE(convred::device::conv2d_reduce_direct(dw, craw(dx), craw(dw_), craw(db), raw(y2), raw(i2), op::argmin{},
                                                epi::scale<float>{2.0f}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(y1) == test::to_host(y2));
  CHECK(test::to_host(i1) == test::to_host(i2));
}
}  // TEST_SUITE("gpu")
