// Tests of the direct kernel's grouped path (1 < C/groups <= 16). Host suite: the grouped kernel's block
// pieces (direct_tiling with splits at group boundaries, the patch stager, block::direct_grouped_stage and
// direct_grouped_unstaged, the ordered combine) run on the host block by block, thread by thread and stage
// by stage as kernel::conv2d_reduce_direct_kernel<..., true> runs them, exact against the float64 reference
// on integer data (tilings the heuristic picks and forced ones); the tiling heuristic for grouped shapes;
// family::direct's can_implement / configure / describe and the planner's choice. GPU suite:
// device::conv2d_reduce_direct on grouped problems against float64 (every op, both layouts, filters,
// strides, padding, dilation, odd sizes, __half / bf16 / double, per_channel_scale), forced tilings exact,
// the planner running the direct family on a ResNeXt-like layer, and the C/groups > 16 refusal.
#include <convred/device/conv2d_reduce_plan.cuh>

#include "conv2d_reduce_check.cuh"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#endif

using namespace convred_test_fused;
namespace math = convred::math;
namespace dev = convred::device;
namespace fam = convred::device::family;

namespace {

const dev::device_info h200{9, 0, true, 132}, a100{8, 0, false, 108}, turing{7, 5, false, 40};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// Grouped problems: make_problem(N, C, H, W, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w,
/// groups, layout). C/groups in {2, 3, 4, 8, 16}, K/groups in {1, 2, 3, 4, 16}, groups in {2, 4, 32}.
std::vector<conv2d_problem> grouped_shapes(layout lay) {
  return {
      make_problem(2, 8, 13, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, lay),       // Cg 2, Kg 1, 3x3 pad 1
      make_problem(1, 6, 13, 13, 6, 5, 5, 2, 2, 1, 1, 1, 1, 2, lay),      // Cg 3, Kg 3, 5x5
      make_problem(2, 128, 7, 13, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32, lay),  // Cg 4, Kg 4, groups 32 (ResNeXt)
      make_problem(2, 16, 13, 7, 32, 1, 1, 0, 0, 1, 1, 1, 1, 2, lay),     // Cg 8, Kg 16, 1x1
      make_problem(1, 64, 13, 13, 16, 7, 7, 3, 3, 1, 1, 1, 1, 4, lay),    // Cg 16, Kg 4, 7x7
      make_problem(2, 16, 13, 7, 12, 3, 2, 1, 0, 2, 1, 1, 1, 4, lay),     // Cg 4, Kg 3, 3x2, stride 2 x 1
      make_problem(1, 4, 13, 13, 32, 3, 3, 1, 1, 3, 3, 1, 1, 2, lay),     // Cg 2, Kg 16, stride 3
      make_problem(2, 32, 13, 7, 16, 3, 3, 2, 2, 1, 1, 2, 2, 4, lay),     // Cg 8, Kg 4, dilation 2
      make_problem(3, 12, 1, 1, 12, 1, 1, 0, 0, 1, 1, 1, 1, 4, lay),      // Cg 3, Kg 3, 1x1 image
      make_problem(2, 8, 1, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, lay),        // Cg 4, Kg 4, H = 1
      make_problem(1, 32, 56, 56, 32, 3, 3, 1, 1, 1, 1, 1, 1, 2, lay),    // Cg 16, Kg 16, 56 x 56 (chunks)
      make_problem(1, 64, 56, 56, 4, 3, 3, 1, 1, 2, 2, 1, 1, 4, lay),     // Cg 16, Kg 1, stride 2
      make_problem(1, 64, 7, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32, lay),    // Cg 2, Kg 4, groups 32
      // the unrolled stride-2 variants (3x3, 5x5, 7x7), odd and even sizes
      make_problem(2, 8, 9, 7, 8, 3, 3, 1, 1, 2, 2, 1, 1, 2, lay),        // Cg 4, Kg 4, 3x3 stride 2
      make_problem(2, 8, 13, 14, 8, 5, 5, 2, 2, 2, 2, 1, 1, 4, lay),      // Cg 2, Kg 2, 5x5 stride 2
      make_problem(1, 8, 12, 12, 16, 5, 5, 2, 2, 2, 2, 1, 1, 4, lay),     // Cg 2, Kg 4, 5x5 s2, W % 4 == 0: chunks
      make_problem(1, 16, 16, 17, 8, 7, 7, 3, 3, 2, 2, 1, 1, 4, lay),     // Cg 4, Kg 2, 7x7 stride 2
  };
}

/// Runs the grouped direct kernel's block pieces on the host for tiling c of p (variant FR x FS at stride
/// ST), as kernel::conv2d_reduce_direct_kernel<T, Op, Epi, FR, FS, true, ST> does; writes y and idx. Stage
/// cells inside x are poisoned (NaN) before each stage, so that an element no item stages shows in y.
template <int FR, int FS, int ST, class T, class Op, class Epi>
void emulate_grouped(const conv2d_problem& p, const host_data<T>& d, const dev::direct_config& c, Op op, Epi epi,
                     bool vector, std::vector<T>& y, std::vector<std::int64_t>& idx) {
  using strip = convred::block::direct_strip<T, FR, FS, ST>;
  using stager = convred::block::direct_patch_stager<T>;
  using V = typename strip::V;
  using A = typename Op::template accum_t<V>;
  const auto t = convred::block::make_direct_tiling(p, sizeof(T), sizeof(A), strip::SH, strip::SW, strip::unrolled,
                                                    stager::stages, c.tx, c.ty, c.groups, c.splits, c.cb, c.staged, vector);
  const auto prm = convred::block::make_conv_params(p, d.x.data(), d.w.data(), d.b.data());
  std::vector<uint4> mem(t.smem_bytes / 16 + 1);
  T* smem = reinterpret_cast<T*>(mem.data());
  const T poison = convred::from_compute<T>(std::numeric_limits<double>::quiet_NaN());
  y.assign(static_cast<std::size_t>(p.y_elements()), poison);
  idx.assign(y.size(), -1);
  const int px = t.tile_pixels(), nstate = strip::SH * strip::SW;
  for (std::int64_t tile = 0; tile < t.tiles; ++tile) {
    std::vector<A> combined(static_cast<std::size_t>(px), Op::template identity<V>());
    convred::block::direct_tile b0{};
    for (int rank = 0; rank < t.splits; ++rank) {
      const auto b = convred::block::direct_tile_at(t, prm, tile * t.splits + rank);
      if (rank == 0) b0 = b;
      REQUIRE(b.c0 % p.C_per_group() == 0);  // whole groups per split
      REQUIRE(b.c1 % p.C_per_group() == 0);
      std::vector<A> state(static_cast<std::size_t>(t.threads) * nstate, Op::template identity<V>());
      auto st_of = [&](int tid) -> A(&)[strip::SH][strip::SW] {
        return *reinterpret_cast<A(*)[strip::SH][strip::SW]>(&state[static_cast<std::size_t>(tid) * nstate]);
      };
      auto coords = [&](int tid, std::int32_t& g, std::int32_t& ty, std::int32_t& tx) {
        std::int32_t pt;
        t.div_pt.divmod(tid, g, pt);
        t.div_tx.divmod(pt, ty, tx);
      };
      if (!t.staged) {
        if constexpr (!strip::unrolled)
          for (int tid = 0; tid < t.threads; ++tid) {
            std::int32_t g, ty, tx;
            coords(tid, g, ty, tx);
            convred::block::direct_grouped_unstaged<strip>(t, b, prm, g, ty, tx, op, epi, st_of(tid));
          }
      } else {
        const T* ximg = d.x.data() + b.n * p.C * p.H * p.W;
        std::fill(smem, smem + static_cast<std::size_t>(stager::stages) * t.cb * t.plane, convred::from_compute<T>(0.0));
        const stager st0(prm, t, b, smem, 0);
        for (int s = 0; s < st0.stage_count(); ++s) {
          T* buf = st0.buffer(s);
          REQUIRE(st0.stage_channels(s) % p.C_per_group() == 0);
          for (int cl = 0; cl < st0.stage_channels(s); ++cl)
            for (int i = 0; i < t.rows; ++i)
              for (int j = 0; j < t.cols; ++j) {
                const std::int64_t h = std::int64_t(b.p0) * p.stride_h - p.pad_h + i;
                const std::int64_t w = std::int64_t(b.q0) * p.stride_w - p.pad_w + j;
                if (h >= 0 && h < p.H && w >= 0 && w < p.W) buf[cl * t.plane + i * t.pitch + j] = poison;
              }
          for (int tid = 0; tid < t.threads; ++tid)
            stager(prm, t, b, smem, tid).for_each_item(s, [&](int e, std::int64_t off) {
              for (int v = 0; v < t.vec; ++v) buf[e + v] = ximg[off + v];
            });
          for (int tid = 0; tid < t.threads; ++tid) {
            std::int32_t g, ty, tx;
            coords(tid, g, ty, tx);
            convred::block::direct_grouped_stage<strip>(buf, t, prm, st0.stage_first(s), st0.stage_channels(s), g, ty,
                                                        tx, op, epi, st_of(tid));
          }
        }
      }
      std::vector<A> parked(static_cast<std::size_t>(t.groups) * px, Op::template identity<V>());
      for (int tid = 0; tid < t.threads; ++tid) {
        std::int32_t g, ty, tx;
        coords(tid, g, ty, tx);
        for (int i = 0; i < strip::SH; ++i)
          for (int j = 0; j < strip::SW; ++j)
            parked[static_cast<std::size_t>(convred::block::direct_park_index(t, g, ty, tx, i, j))] = st_of(tid)[i][j];
      }
      for (int q = 0; q < px; ++q) {
        const A r = convred::block::direct_combine_groups(t, op, parked.data(), q);
        combined[static_cast<std::size_t>(q)] = rank == 0 ? r : op(combined[static_cast<std::size_t>(q)], r);
      }
    }
    for (int q = 0; q < px; ++q) {
      const std::int64_t m = convred::block::direct_output_offset(t, b0, prm, q);
      if (m < 0) continue;
      y[static_cast<std::size_t>(m)] = convred::from_compute<T>(Op::template value<V>(combined[static_cast<std::size_t>(q)], p.K));
      if constexpr (Op::has_index) idx[static_cast<std::size_t>(m)] = Op::template index<V>(combined[static_cast<std::size_t>(q)]);
    }
  }
}

/// The tilings of the grouped tests for p and T: the heuristic's for an H200 (clusters) and an A100, and
/// forced ones (odd thread grids, 1 to 8 splits, channel groups, 1 to 3 groups per stage, unstaged for the
/// run-time variant), those that fit with at most max_splits blocks per tile.
template <class T>
std::vector<dev::direct_config> grouped_tilings(const conv2d_problem& p, int max_splits) {
  const auto k = dev::direct_kernel_shape_of<T>(p);
  std::vector<dev::direct_config> all = {dev::choose_direct_config(p, k, 132, max_splits),
                                         dev::choose_direct_config(p, k, 108, 1)};
  const int shapes[][2] = {{1, 1}, {3, 2}, {2, 5}, {8, 4}};
  int i = 0;
  for (const auto& s : shapes)
    for (int groups : {1, 3, 5}) {
      dev::direct_config c;
      c.tx = s[0], c.ty = s[1], c.groups = groups;
      c.splits = std::min<int>(1 + (i * 3) % 8, static_cast<int>(p.groups));
      c.cb = static_cast<int>(p.C_per_group()) * (1 + i % 3);
      ++i;
      all.push_back(c);
    }
  if (!k.unrolled) {
    dev::direct_config u;
    u.tx = 3, u.ty = 2, u.groups = 3, u.staged = false, u.cb = static_cast<int>(p.C_per_group());
    all.push_back(u);
    u.splits = std::min<int>(3, static_cast<int>(p.groups));
    all.push_back(u);
  }
  std::vector<dev::direct_config> fit;
  for (const auto& c : all)
    if (dev::direct_config_fits(p, k, c, max_splits)) fit.push_back(c);
  return fit;
}

/// Emulates every grouped_tilings tiling of p on integer data; values and indices must equal the float64
/// reference. Returns the number of tilings run.
template <class T, class Op, class Epi>
int check_emulated(const std::string& name, const conv2d_problem& p, std::uint64_t seed, Op op, Epi epi) {
  const auto d = make_data<T>(p, seed, data_kind::integer);
  std::vector<double> yref(static_cast<std::size_t>(p.y_elements()));
  std::vector<std::int64_t> iref(yref.size(), -1);
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), yref.data(),
                                    Op::has_index ? iref.data() : nullptr, op, epi);
  int n = 0;
  const auto k = dev::direct_kernel_shape_of<T>(p);
  for (const auto& c : grouped_tilings<T>(p, 8))
    for (bool vector : {false, true}) {
      if (vector && !k.vector) continue;
      INFO(name << " " << describe(p) << " T=" << std::string(type_name<T>()) << " tiling tx=" << c.tx << " ty=" << c.ty
                << " groups=" << c.groups << " splits=" << c.splits << " cb=" << c.cb << (c.staged ? "" : " unstaged")
                << (vector ? " chunks" : ""));
      std::vector<T> y;
      std::vector<std::int64_t> idx;
      const bool s2 = dev::direct_unrolled_stride(p) == 2;  // the unrolled stride-2 variants
      switch (dev::direct_unrolled_filter(p)) {
        case 3: s2 ? emulate_grouped<3, 3, 2>(p, d, c, op, epi, vector, y, idx)
                   : emulate_grouped<3, 3, 1>(p, d, c, op, epi, vector, y, idx); break;
        case 5: s2 ? emulate_grouped<5, 5, 2>(p, d, c, op, epi, vector, y, idx)
                   : emulate_grouped<5, 5, 1>(p, d, c, op, epi, vector, y, idx); break;
        case 7: s2 ? emulate_grouped<7, 7, 2>(p, d, c, op, epi, vector, y, idx)
                   : emulate_grouped<7, 7, 1>(p, d, c, op, epi, vector, y, idx); break;
        default: emulate_grouped<0, 0, 1>(p, d, c, op, epi, vector, y, idx); break;
      }
      std::size_t bad = 0;
      for (std::size_t m = 0; m < yref.size(); ++m) {
        bool ok = same_value(convred::to_double(y[m]), convred::to_double(convred::from_compute<T>(yref[m])));
        if constexpr (Op::has_index) ok = ok && idx[m] == iref[m];
        bad += !ok;
      }
      CHECK(bad == 0);
      ++n;
    }
  return n;
}

/// Runs device::detail::conv2d_reduce_direct_with with tiling c forced on integer data (poisoned y and
/// indices); y and indices must equal the float64 reference.
template <class T, class Op, class Epi>
void check_forced(const std::string& name, const conv2d_problem& p, std::uint64_t seed, const dev::direct_config& c,
                  Op op, Epi epi) {
  INFO(name << " " << describe(p) << " T=" << std::string(type_name<T>()) << " tiling tx=" << c.tx << " ty=" << c.ty
            << " groups=" << c.groups << " splits=" << c.splits << " cb=" << c.cb << (c.staged ? "" : " unstaged"));
  const auto d = make_data<T>(p, seed, data_kind::integer);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<T> dy(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> di(Op::has_index ? dy.size() : 0);
  test::poison(dy);
  test::poison(di);
  const status s = dev::detail::conv2d_reduce_direct_with<T>(&c, p, craw(dx), craw(dw), craw(db), raw(dy),
                                                             Op::has_index ? raw(di) : nullptr, op, epi, nullptr);
  INFO("status: " << std::string(convred::to_string(s)));
  REQUIRE(s == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const auto y = test::to_host(dy);
  const auto idx = test::to_host(di);
  std::vector<double> yref(y.size());
  std::vector<std::int64_t> iref(y.size(), -1);
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), yref.data(),
                                    Op::has_index ? iref.data() : nullptr, op, epi);
  std::size_t bad = 0;
  for (std::size_t m = 0; m < y.size(); ++m) {
    bool ok = same_value(convred::to_double(y[m]), convred::to_double(convred::from_compute<T>(yref[m])));
    if constexpr (Op::has_index) ok = ok && idx[m] == iref[m];
    bad += !ok;
  }
  CHECK(bad == 0);
}

/// True if this program's direct kernels launch as clusters on the current device.
bool clusters_here() {
  int sms = 0;
  bool clusters = false;
  return dev::detail::direct_device_facts(
             convred::kernel::conv2d_reduce_direct_kernel<float, op::argmin, epi::scale<float>, 0, 0, true>, sms,
             clusters) &&
         clusters;
}

}  // namespace

TEST_SUITE("host") {
TEST_CASE("grouped direct kernel pieces run on the host equal the float64 reference (tilings, splits at group boundaries)") {
  std::uint64_t seed = 71000;
  int n = 0;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : grouped_shapes(lay)) {
      if (p.H * p.W > 1000) continue;  // the 56 x 56 shapes: the GPU suite
      n += check_emulated<float>("argmin", p, ++seed, op::argmin{}, epi::scale<float>{2.0f});
      n += check_emulated<float>("sum", p, ++seed, op::sum{}, epi::identity{});
      n += check_emulated<double>("max", p, ++seed, op::max{}, epi::scale<float>{-1.5f});
      n += check_emulated<__half>("argmax", p, ++seed, op::argmax{}, epi::identity{});
    }
  MESSAGE(n << " grouped tilings emulated");
  CHECK(n > 200);
}

TEST_CASE("grouped direct tiling heuristic: fits, whole groups per stage and split, ResNeXt shapes") {
  const conv2d_problem resnext[] = {make_problem(32, 128, 56, 56, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                    make_problem(32, 512, 28, 28, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                    make_problem(32, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                    make_problem(32, 1024, 28, 28, 1024, 3, 3, 1, 1, 2, 2, 1, 1, 64),
                                    make_problem(1, 128, 56, 56, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32)};
  for (const conv2d_problem& p : resnext)
    for (int sms : {132, 108}) {
      INFO(describe(p) << " sms " << sms);
      const int splits = sms == 132 ? 8 : 1;
      const auto k = dev::direct_kernel_shape_of<float>(p);
      const dev::direct_config c = dev::choose_direct_config(p, k, sms, splits);
      MESSAGE(describe(p) << ": " << dev::describe_direct_config(p, k, c) << ", estimate " << c.cycles << " cycles");
      CHECK(dev::direct_config_fits(p, k, c, splits));
      CHECK(c.cb % p.C_per_group() == 0);
      CHECK(c.splits <= p.groups);
      CHECK(c.cycles > 0);
      const auto t = convred::block::make_direct_tiling(p, 4, 8, k.sh, k.sw, k.unrolled, k.stages, c.tx, c.ty, c.groups,
                                                        c.splits, c.cb, c.staged, k.vector);
      CHECK(t.ch_per_split % p.C_per_group() == 0);
    }
  // random grouped shapes, every element type: the chosen tiling fits (or, unrolled, is the unstaged
  // fallback the run-time variant runs)
  std::mt19937_64 rng(72000);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  const int cgs[] = {2, 3, 4, 8, 16}, kgs[] = {1, 3, 4, 16};
  for (int i = 0; i < 300; ++i) {
    const std::int64_t G = pick(0, 2) == 0 ? 32 : pick(2, 6), Cg = cgs[pick(0, 4)], Kg = kgs[pick(0, 3)];
    const std::int64_t R = 2 * pick(0, 3) + 1, S = 2 * pick(0, 3) + 1, st = pick(1, 3), dl = pick(1, 2);
    const conv2d_problem p = make_problem(pick(0, 1) ? 1 : 16, G * Cg, pick(1, 80), pick(1, 80), G * Kg, R, S,
                                          pick(0, static_cast<int>(R / 2)), pick(0, static_cast<int>(S / 2)), st, st, dl,
                                          dl, G, pick(0, 1) ? layout::nhwc : layout::nchw);
    if (convred::validate(p, 4) != status::success || p.P() < 1 || p.Q() < 1) continue;
    INFO(describe(p));
    auto fits = [&](auto tag) {
      using T = decltype(tag);
      const auto k = dev::direct_kernel_shape_of<T>(p);
      const dev::direct_config c = dev::choose_direct_config(p, k, 132, 8);
      CHECK((dev::direct_config_fits(p, k, c, 8) || (k.unrolled && !c.staged)));
      CHECK(c.cb % p.C_per_group() == 0);
    };
    fits(float{}), fits(double{}), fits(__half{});
  }
  // refusals: cb not a multiple of C/groups, splits beyond the groups, C/groups > 16
  const conv2d_problem p = make_problem(1, 16, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4);
  const auto k = dev::direct_kernel_shape_of<float>(p);
  dev::direct_config c;
  c.tx = 2, c.ty = 2, c.cb = 4;
  CHECK(dev::direct_config_fits(p, k, c, 8));
  c.cb = 6;
  CHECK_FALSE(dev::direct_config_fits(p, k, c, 8));
  c.cb = 8, c.splits = 5;
  CHECK_FALSE(dev::direct_config_fits(p, k, c, 8));
  c.splits = 4;
  CHECK(dev::direct_config_fits(p, k, c, 8));
  conv2d_problem wide = p;
  wide.C = 68, wide.groups = 4;  // C/groups 17
  c.cb = 17, c.splits = 1;
  CHECK_FALSE(dev::direct_config_fits(wide, dev::direct_kernel_shape_of<float>(wide), c, 8));
}

TEST_CASE("family::direct serves grouped layers with C/groups <= 16 and the planner picks it (ResNeXt)") {
  const conv2d_problem rx = make_problem(32, 128, 56, 56, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32);
  using D = fam::direct<float, math::accurate>;
  CHECK(D::can_implement(rx, h200, {}) == nullptr);
  CHECK(D::configure(rx, h200, {}).seconds < D::tensor_seconds(rx, h200));
  for (const conv2d_problem& p : {rx, make_problem(32, 512, 28, 28, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                  make_problem(32, 512, 14, 14, 512, 3, 3, 1, 1, 1, 1, 1, 1, 32),
                                  make_problem(32, 1024, 28, 28, 1024, 3, 3, 1, 1, 2, 2, 1, 1, 64)}) {
    CAPTURE(describe(p));
    const std::string cg = "grouped, C/groups = " + std::to_string(p.C_per_group());
    const dev::conv2d_reduce_plan<float> acc(p, h200);
    CAPTURE(acc.description());
    // stride 2 (the run-time variant measured 2.6x slower than mma.sync under 3xTF32; the unrolled
    // stride-2 variants are not measured yet): under a tensor-core math (math::accurate included) the
    // planner leaves it to mma.sync
    const bool unrolled = p.stride_h == 1;
    CHECK((acc.kernel() == dev::kernel_kind::direct) == unrolled);
    CHECK((dev::conv2d_reduce_plan<float>(p, a100).kernel() == dev::kernel_kind::direct) == unrolled);
    if (unrolled) {
      CHECK(acc.workspace_bytes() == 0u);
      CHECK(has(acc.description(), "direct (exact fp32 FMA"));
      CHECK(has(acc.description(), cg.c_str()));
      // TF32: the wgmma kernel's grouped passes where they serve (C/groups a multiple of 8) and its model
      // estimates them faster (ResNeXt's c512 g32: 16 of each pass's 128 channels used, on tensor cores)
      const dev::conv2d_reduce_plan<float, math::tf32> tf(p, h200);
      CAPTURE(tf.description());
      if (p.C_per_group() % 8 != 0) {
        CHECK(tf.kernel() == dev::kernel_kind::direct);
        CHECK(has(tf.description(), "exact for any math"));
      } else {
        CHECK(tf.kernel() == dev::kernel_kind::wgmma);
        CHECK(has(tf.description(), " groups as channel passes ("));
      }
      // 16-bit data (no wgmma kernel): the direct kernel, or the narrow tensor-core tile where K/groups <= 32
      // and its estimate is the lower (ResNeXt's c512 g32: 16 output channels per group)
      const dev::conv2d_reduce_plan<__nv_bfloat16, math::bf16> bf(p, h200);
      CAPTURE(bf.description());
      CHECK((bf.kernel() == dev::kernel_kind::direct ||
             (p.K_per_group() <= 32 && has(bf.description(), "(the narrow tensor-core family)"))));
    }
    CHECK(dev::conv2d_reduce_plan<float, math::ieee>(p, h200).kernel() == dev::kernel_kind::direct);
    CHECK(dev::conv2d_reduce_plan<double>(p, a100).kernel() == dev::kernel_kind::direct);
    CHECK(dev::conv2d_reduce_plan<float>(p, turing).kernel() == dev::kernel_kind::direct);
    MESSAGE(acc.description());
  }
  // not served: C/groups 17 or more; a dense layer of C = 8 with 64 output channels at 56 x 56, which the
  // model estimates faster on the tensor cores (under math::ieee dense layers are never served: the SIMT
  // kernel); a forced wgmma choice under a tensor-core math
  const conv2d_problem wide = make_problem(32, 544, 28, 28, 544, 3, 3, 1, 1, 1, 1, 1, 1, 32);
  CHECK(std::string(D::can_implement(wide, h200, {})) == "C/groups > 16");
  CHECK(dev::conv2d_reduce_plan<float>(wide, h200).kernel() != dev::kernel_kind::direct);
  const conv2d_problem dense = make_problem(32, 8, 56, 56, 64, 3, 3, 1, 1);
  CHECK(std::string(D::can_implement(dense, h200, {})) ==
        "a dense convolution of C <= 16: estimated slower than the tensor-core kernels");
  CHECK(std::string(fam::direct<float, math::ieee>::can_implement(dense, h200, {})) == "groups == 1 (a dense convolution)");
  dev::plan_options forced;
  forced.splits = -1;
  CHECK(D::can_implement(rx, h200, forced) != nullptr);
  CHECK(fam::direct<float, math::ieee>::can_implement(rx, h200, forced) == nullptr);  // exact: no tensor cores
  // depthwise unchanged
  const conv2d_problem dw = make_problem(32, 144, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144);
  CHECK(has(dev::conv2d_reduce_plan<float>(dw, h200).description(), "C/groups == 1 (depthwise)"));
}
TEST_CASE("family::direct serves dense stems with C <= 16 under TF32 and 3xTF32 where estimated faster") {
  // the C = 3 stride-2 stem measured on the H200 (bench/NOTES.md, session 9): direct 139 us exact fp32, the
  // planner's TF32 wgmma 179, 3xTF32 mma.sync 339, bf16 mma.sync 142; its 16 output channels now go to the
  // narrow tensor-core family in TF32 (H100, session 17: 83 us against direct's 135), which direct weighs
  // itself against (family::mma_narrow::rival_seconds)
  const conv2d_problem stem = make_problem(32, 3, 320, 448, 16, 3, 3, 1, 1, 2, 2);
  CHECK(fam::direct<float, math::accurate>::can_implement(stem, h200, {}) == nullptr);
  CHECK(std::string(fam::direct<float, math::tf32>::can_implement(stem, h200, {})) ==
        "a dense convolution of C <= 16: estimated slower than the tensor-core kernels");
  CHECK(has(dev::conv2d_reduce_plan<float, math::tf32>(stem, h200).description(), "(the narrow tensor-core family)"));
  const dev::conv2d_reduce_plan<float> acc(stem, h200);
  CAPTURE(acc.description());
  CHECK(acc.kernel() == dev::kernel_kind::direct);
  CHECK(has(acc.description(), "): dense, C = 3"));
  // not under a 16-bit math, nor under math::ieee (the SIMT kernel), nor with a filter it does not unroll,
  // nor where the tiny family serves the layer, nor with 17 input channels
  CHECK(std::string(fam::direct<float, math::bf16>::can_implement(stem, h200, {})) ==
        "a dense convolution under a 16-bit math (the tensor-core kernels)");
  CHECK(dev::conv2d_reduce_plan<float, math::bf16>(stem, h200).kernel() != dev::kernel_kind::direct);
  CHECK(std::string(fam::direct<float, math::ieee>::can_implement(stem, h200, {})) == "groups == 1 (a dense convolution)");
  const conv2d_problem s4 = make_problem(32, 3, 320, 448, 16, 4, 4, 0, 0, 4, 4);
  CHECK(std::string(fam::direct<float, math::accurate>::can_implement(s4, h200, {})) ==
        "a dense convolution with a filter the direct kernel does not unroll");
  const conv2d_problem small = make_problem(1, 3, 4, 4, 16, 3, 3, 1, 1);
  CHECK(std::string(fam::direct<float, math::accurate>::can_implement(small, h200, {})) ==
        "a dense convolution the tiny family serves");
  CHECK(dev::conv2d_reduce_plan<float>(small, h200).kernel() == dev::kernel_kind::tiny);
  const conv2d_problem c17 = make_problem(32, 17, 320, 448, 16, 3, 3, 1, 1, 2, 2);
  CHECK(std::string(fam::direct<float, math::accurate>::can_implement(c17, h200, {})) == "C/groups > 16");
  // below sm_80 (no tensor cores) dense layers stay with the SIMT kernel
  CHECK(dev::conv2d_reduce_plan<float>(stem, turing).kernel() == dev::kernel_kind::simt);
}

TEST_CASE("plan_options::pingpong forces the wgmma ping-pong policy on and off") {
  // n32 c2520 7x7 k2520 1x1: the model's plan is the cooperative policy split in 2 GEMM_K ranges; forced on,
  // ping-pong in pass mode (measured 0.93x on the H200, bench/NOTES.md, session 9)
  const conv2d_problem p = make_problem(32, 2520, 7, 7, 2520, 1, 1, 0, 0);
  dev::plan_options on, off;
  on.pingpong = dev::wgmma_pingpong_mode::on, off.pingpong = dev::wgmma_pingpong_mode::off;
  const dev::conv2d_reduce_plan<float, math::tf32> model(p, h200), forced(p, h200, on), never(p, h200, off);
  CAPTURE(model.description());
  CAPTURE(forced.description());
  CHECK(forced.kernel() == dev::kernel_kind::wgmma);
  CHECK(forced.config().pingpong);
  CHECK(forced.config().splits == 0);
  CHECK(forced.config().wgmma.pass_mode);
  CHECK(forced.config().wgmma.tail_tiles == 0);
  CHECK(has(forced.description(), "ping-pong"));
  CHECK_FALSE(model.config().pingpong);
  CHECK_FALSE(never.config().pingpong);
  // the narrow rule's layer (ResNet-50 layer3.1, n32 c256 14x14 3x3): ping-pong by the model, not when off
  const conv2d_problem l31 = make_problem(32, 256, 14, 14, 256, 3, 3, 1, 1);
  CHECK(dev::conv2d_reduce_plan<float, math::tf32>(l31, h200).config().pingpong);
  CHECK_FALSE(dev::conv2d_reduce_plan<float, math::tf32>(l31, h200, off).config().pingpong);
  // 3xTF32 has no ping-pong policy: forcing it changes nothing
  CHECK_FALSE(dev::conv2d_reduce_plan<float>(p, h200, on).config().pingpong);
}

}  // TEST_SUITE("host")

TEST_SUITE("gpu") {
TEST_CASE("grouped direct: every op vs float64, both layouts, filters, strides, dilation, odd sizes, element types") {
  require_gpu();
  std::uint64_t seed = 73000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : grouped_shapes(lay)) {
      const std::string name = "grouped direct " + describe(p);
      for_each_op([&](auto o) { check_scaled<direct_entry, float>(name, p, ++seed, o); });
      check_scaled<direct_entry, double>(name + " double argmin", p, ++seed, op::argmin{});
      check_scaled<direct_entry, double>(name + " double sum", p, ++seed, op::sum{});
      check_scaled<direct_entry, __half>(name + " half min", p, ++seed, op::min{});
      check_scaled<direct_entry, __half>(name + " half argmin", p, ++seed, op::argmin{}, -1.0f);
      check_scaled<direct_entry, __nv_bfloat16>(name + " bf16 argmax", p, ++seed, op::argmax{}, -1.5f);
      check_scaled<direct_entry, __nv_bfloat16>(name + " bf16 mean", p, ++seed, op::mean{});
      check_scaled<direct_entry, float>(name + " no bias mean", p, ++seed, op::mean{}, 2.0f, false);
    }
}

TEST_CASE("grouped direct: per_channel_scale epilogue, exact on integer data") {
  require_gpu();
  std::uint64_t seed = 74000;
  opts o;
  o.exact = true;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : grouped_shapes(lay)) {
      std::vector<float> hs(static_cast<std::size_t>(p.K));
      for (std::size_t k = 0; k < hs.size(); ++k) hs[k] = static_cast<float>(static_cast<int>(k % 5) - 2);  // -2 ... 2
      auto ds = test::to_device(hs);
      const epi::per_channel_scale<float> dev_pcs{craw(ds)}, host_pcs{hs.data()};
      const auto d = make_data<float>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>("grouped pcs argmin " + describe(p), p, d, op::argmin{}, dev_pcs, host_pcs, o);
      check_fused<direct_entry>("grouped pcs sum " + describe(p), p, d, op::sum{}, dev_pcs, host_pcs, o);
      const auto h = make_data<__half>(p, ++seed, data_kind::integer);
      check_fused<direct_entry>("grouped pcs half max " + describe(p), p, h, op::max{}, dev_pcs, host_pcs, o);
    }
}

TEST_CASE("grouped direct: forced tilings (splits 1-8 at group boundaries, channel groups, stages, unstaged), exact") {
  require_gpu();
  const int max_splits = clusters_here() ? 8 : 1;
  if (max_splits == 1) MESSAGE("no cluster launch on this device or build: splits > 1 not tested");
  std::uint64_t seed = 75000;
  for (layout lay : kLayouts)
    for (const conv2d_problem& p : grouped_shapes(lay)) {
      for (const auto& c : grouped_tilings<float>(p, max_splits)) {
        check_forced<float>("forced argmin", p, ++seed, c, op::argmin{}, epi::scale<float>{2.0f});
        check_forced<float>("forced sum", p, ++seed, c, op::sum{}, epi::identity{});
      }
      for (const auto& c : grouped_tilings<__nv_bfloat16>(p, max_splits))
        check_forced<__nv_bfloat16>("forced bf16 argmax", p, ++seed, c, op::argmax{}, epi::scale<float>{-1.5f});
      for (const auto& c : grouped_tilings<double>(p, max_splits))
        check_forced<double>("forced double min", p, ++seed, c, op::min{}, epi::identity{});
    }
}

TEST_CASE("grouped direct: the planner runs the direct family on a ResNeXt-like layer, C/groups > 16 refused") {
  require_gpu();
  const conv2d_problem p = make_problem(2, 128, 14, 14, 128, 3, 3, 1, 1, 1, 1, 1, 1, 32);
  dev::conv2d_reduce_plan<float> plan(p);
  INFO(plan.description());
  REQUIRE(plan.state() == status::success);
  CHECK(plan.kernel() == dev::kernel_kind::direct);
  CHECK(has(plan.description(), "grouped, C/groups = 4"));
  const auto d = make_data<float>(p, 76000, data_kind::real);
  auto dx = test::to_device(d.x);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  thrust::device_vector<float> y1(static_cast<std::size_t>(p.y_elements())), y2(y1.size());
  thrust::device_vector<std::int64_t> i1(y1.size()), i2(y1.size());
  test::poison(y1), test::poison(y2), test::poison(i1), test::poison(i2);
  REQUIRE(plan.prepare(craw(dw)) == status::success);
  REQUIRE(plan.run(craw(dx), craw(db), raw(y1), raw(i1), op::argmin{}, epi::scale<float>{2.0f}) == status::success);
  REQUIRE(dev::conv2d_reduce_direct(p, craw(dx), craw(dw), craw(db), raw(y2), raw(i2), op::argmin{},
                                    epi::scale<float>{2.0f}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(test::to_host(y1) == test::to_host(y2));
  CHECK(test::to_host(i1) == test::to_host(i2));
  check_scaled<direct_entry, float>("planner's problem on the entry point", p, 76001, op::argmin{});
  // C/groups 17: invalid_groups, nothing launched
  const conv2d_problem wide = make_problem(1, 34, 8, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 2);
  thrust::device_vector<float> x(static_cast<std::size_t>(wide.x_elements()), 1.f), w(static_cast<std::size_t>(wide.w_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(wide.y_elements()));
  CHECK(dev::conv2d_reduce_direct(wide, craw(x), craw(w), nullptr, raw(y), nullptr, op::min{}) == status::invalid_groups);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
}  // TEST_SUITE("gpu")
