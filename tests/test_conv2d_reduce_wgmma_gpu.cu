// GPU tests of the Hopper packed-filter path (device::pack_filter + device::conv2d_reduce_packed with
// wgmma_policy: tf32, tf32x3, bf16, fp16) against the float64 reference with the documented tolerance for
// each math (conv2d_reduce_check.cuh), on shapes the wgmma kernel serves (asserted on an sm_90a device) and
// on shapes it hands to the mma.sync fallback; non-finite data, sanitizer cases and argument errors.
// conv2d_reduce_packed_split's modes: test_conv2d_reduce_wgmma_split_gpu.cu.
#include "wgmma_test_util.cuh"

TEST_SUITE("gpu") {
TEST_CASE("conv2d_reduce_packed wgmma: tf32 vs float64 (<= 1e-3)") { sweep<wg<math::tf32>>("wgmma tf32", 600); }
TEST_CASE("conv2d_reduce_packed wgmma: tf32x3 vs float64 (<= 1e-5)") { sweep<wg<math::tf32x3>>("wgmma tf32x3", 700); }
TEST_CASE("conv2d_reduce_packed wgmma: bf16 vs float64 (<= 1e-2)") { sweep<wg<math::bf16>>("wgmma bf16", 800); }
TEST_CASE("conv2d_reduce_packed wgmma: fp16 vs float64 (<= 1e-2)") { sweep<wg<math::fp16>>("wgmma fp16", 900); }
TEST_CASE("conv2d_reduce_packed wgmma: 2 stages, tf32") { sweep<wgmma_policy<math::tf32, 2>>("wgmma tf32 S2", 1000); }
// The ping-pong schedule (2-row tiles taken in turn by the two consumer warpgroups; the filter streamed
// or resident by C), plus problems of 2,080 and 128 (narrow) one-stage tiles: many turns, the case
// in which a warpgroup running a tile ahead would wait on a stage barrier two phases ahead.
template <class Policy>
void pingpong(const char* label, std::uint64_t seed) {
  sweep<Policy>(label, seed);
  for (const conv2d_problem& p : {make_problem(16, 4, 130, 72, 16, 3, 3, 1, 1), make_problem(16, 4, 60, 28, 16, 3, 3, 1, 1)}) {
    if (on_hopper()) CHECK(convred::device::packed_filter_bytes<Policy, float>(p) > 0);
    check_scaled<Policy, float>(std::string(label) + " many tiles " + describe(p), p, seed + 99, op::argmin{});
  }
}
TEST_CASE("conv2d_reduce_packed wgmma: tf32 ping-pong") { pingpong<wgmma_policy<math::tf32, 4, 2, true>>("wgmma tf32 pp", 1100); }
TEST_CASE("conv2d_reduce_packed wgmma: bf16 ping-pong") { pingpong<wgmma_policy<math::bf16, 4, 2, true>>("wgmma bf16 pp", 1200); }

TEST_CASE("conv2d_reduce_packed wgmma: +-inf and NaN in x, w and bias, exact under every math") {
  require_gpu();
  check_nonfinite<wg<math::tf32>>("wgmma tf32", 34000, {layout::nchw});
  check_nonfinite<wg<math::tf32x3>>("wgmma tf32x3", 35000, {layout::nchw});
  check_nonfinite<wg<math::bf16>>("wgmma bf16", 36000, {layout::nchw});
  check_nonfinite<wg<math::fp16>>("wgmma fp16", 37000, {layout::nchw});
}

TEST_CASE("conv2d_reduce_packed wgmma sanitizer: every math, padding, K tail, partial tiles") {
  require_gpu();
  const conv2d_problem p = make_problem(1, 10, 9, 20, 40, 3, 3, 1, 1);
  check_scaled<wg<math::tf32>, float>("sanitizer wgmma tf32", p, 7, op::argmin{});
  check_scaled<wg<math::bf16>, float>("sanitizer wgmma bf16", p, 8, op::min{});
  check_scaled<wg<math::fp16>, float>("sanitizer wgmma fp16", p, 9, op::argmax{});
  // 3xTF32 (stages promoted per row), 3x3 and 1x1
  check_scaled<wg<math::tf32x3>, float>("sanitizer wgmma tf32x3", p, 10, op::argmin{});
  check_scaled<wg<math::tf32x3>, float>("sanitizer wgmma tf32x3 1x1", make_problem(2, 9, 5, 12, 17, 1, 1), 11,
                                        op::sum{});
  // 3xTF32's tap-loop variant (each tap promoted): a 7x1 filter and a 2x2 filter at stride 2
  check_scaled<wg<math::tf32x3>, float>("sanitizer wgmma tf32x3 7x1", make_problem(1, 6, 10, 12, 24, 7, 1, 3, 0), 12,
                                        op::argmax{});
  check_scaled<wg<math::tf32x3>, float>("sanitizer wgmma tf32x3 2x2/2", make_problem(1, 9, 10, 10, 16, 2, 2, 0, 0, 2, 2),
                                        13, op::min{});
  // K > 128: channel passes (tf32 filter streamed, bf16 resident)
  const conv2d_problem q = make_problem(1, 5, 6, 16, 260, 3, 3, 1, 1);  // narrow (pitch 32)
  check_scaled<wg<math::tf32>, float>("sanitizer wgmma tf32 wide", make_problem(1, 5, 6, 70, 40, 3, 3, 1, 1), 14,
                                      op::min{});
  // the gathering producer: stride 2 (phase planes) and W % 4 != 0
  check_scaled<wg<math::tf32>, float>("sanitizer wgmma tf32 stride 2", make_problem(1, 6, 11, 19, 40, 3, 3, 1, 1, 2, 2),
                                      15, op::argmin{});
  check_scaled<wg<math::bf16>, float>("sanitizer wgmma bf16 W=7", make_problem(2, 5, 7, 7, 140, 3, 3, 1, 1), 16,
                                      op::max{});
  check_scaled<wg<math::tf32>, float>("sanitizer wgmma tf32 K=260", q, 12, op::argmin{});
  check_scaled<wg<math::bf16>, float>("sanitizer wgmma bf16 K=260", q, 13, op::min{});
}

TEST_CASE("pack_filter / conv2d_reduce_packed: argument errors") {
  require_gpu();
  using P = wg<math::tf32>;
  const conv2d_problem p = make_problem(1, 4, 8, 8, 8, 3, 3, 1, 1);
  const std::size_t bytes = convred::device::packed_filter_bytes<P, float>(p);
  if (on_hopper()) REQUIRE(bytes > 0);
  if (bytes == 0) return;  // no wgmma kernel on this device: nothing to pack
  conv2d_problem empty = p;
  empty.N = 0;
  CHECK(convred::device::packed_filter_bytes<P, float>(empty) == bytes);  // independent of N
  thrust::device_vector<float> w(static_cast<std::size_t>(p.w_elements()), 1.f), x(static_cast<std::size_t>(p.x_elements()), 1.f);
  thrust::device_vector<unsigned char> packed(bytes + 16);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  thrust::device_vector<std::int64_t> idx(static_cast<std::size_t>(p.y_elements()));
  CHECK(convred::device::pack_filter<P>(p, craw(w), nullptr, bytes) == status::null_pointer);
  CHECK(convred::device::pack_filter<P>(p, craw(w), raw(packed) + 4, bytes) == status::misaligned_pointer);
  CHECK(convred::device::pack_filter<P>(p, craw(w), raw(packed), bytes - 16) == status::workspace_too_small);
  CHECK(convred::device::pack_filter<P>(p, craw(w), static_cast<void*>(raw(w)), bytes) == status::overlapping_buffers);
  REQUIRE(convred::device::pack_filter<P>(p, craw(w), raw(packed), bytes) == status::success);
  auto run = [&](const void* pk, std::size_t n, float* out, std::int64_t* ind) {
    return convred::device::conv2d_reduce_packed<P>(p, craw(x), craw(w), pk, n, nullptr, out, ind, op::min{});
  };
  CHECK(run(nullptr, bytes, raw(y), nullptr) == status::null_pointer);
  CHECK(run(raw(packed) + 8, bytes, raw(y), nullptr) == status::misaligned_pointer);
  CHECK(run(raw(packed), bytes - 16, raw(y), nullptr) == status::workspace_too_small);  // e.g. packed for a smaller C
  CHECK(run(raw(packed), bytes, reinterpret_cast<float*>(raw(packed)), nullptr) == status::overlapping_buffers);
  CHECK(run(raw(packed), bytes, raw(y), raw(idx)) == status::indices_not_supported);
  CHECK(convred::device::conv2d_reduce_packed<P>(empty, craw(x), craw(w), nullptr, 0, nullptr, static_cast<float*>(nullptr), nullptr,
                                                 op::min{}) == status::success);  // N = 0: nothing to do
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("conv2d_reduce_packed: gathered x (stride 2) not aligned to float is refused, nothing launched") {
  require_gpu();
  using P = wg<math::tf32>;
  const conv2d_problem p = make_problem(1, 5, 9, 14, 17, 3, 3, 1, 1, 2, 2);  // stride 2: the gathering producer
  if (on_hopper()) REQUIRE(convred::device::packed_filter_bytes<P, float>(p) > 0);
  thrust::device_vector<float> x(static_cast<std::size_t>(p.x_elements()) + 1, 1.f), w(static_cast<std::size_t>(p.w_elements()), 1.f);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  const std::size_t bytes = convred::device::packed_filter_bytes<P, float>(p);
  thrust::device_vector<unsigned char> packed(bytes > 0 ? bytes : 16);
  REQUIRE(convred::device::pack_filter<P>(p, craw(w), raw(packed), packed.size()) == status::success);
  const float* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(craw(x)) + 2);
  CHECK(convred::device::conv2d_reduce_packed<P>(p, odd, craw(w), raw(packed), packed.size(), nullptr, raw(y), nullptr,
                                                 op::min{}) == status::misaligned_pointer);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("conv2d_reduce_packed: x not 16-byte aligned takes the fallback, same answer") {
  require_gpu();
  using P = wg<math::tf32>;
  const conv2d_problem p = make_problem(2, 5, 9, 12, 17, 3, 3, 1, 1);
  const auto d = make_data<float>(p, 4242, data_kind::integer);  // exact in every math
  std::vector<float> xs(d.x.size() + 1, 0.f);
  std::copy(d.x.begin(), d.x.end(), xs.begin() + 1);
  auto dx = test::to_device(xs);
  auto dw = test::to_device(d.w);
  auto db = test::to_device(d.b);
  const std::size_t bytes = convred::device::packed_filter_bytes<P, float>(p);
  thrust::device_vector<unsigned char> packed(bytes > 0 ? bytes : 16);
  REQUIRE(convred::device::pack_filter<P>(p, craw(dw), raw(packed), packed.size()) == status::success);
  thrust::device_vector<float> y(static_cast<std::size_t>(p.y_elements()));
  test::poison(y);
  REQUIRE(convred::device::conv2d_reduce_packed<P>(p, craw(dx) + 1, craw(dw), raw(packed), packed.size(), craw(db),
                                                   raw(y), nullptr, op::max{}) == status::success);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<double> ref(static_cast<std::size_t>(p.y_elements()));
  convred::reference::conv2d_reduce(p, d.x.data(), d.w.data(), d.b.data(), ref.data(), nullptr, op::max{},
                                    epi::identity{});
  const auto got = test::to_host(y);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += static_cast<double>(got[i]) != ref[i];
  CHECK(bad == 0);
}
}
