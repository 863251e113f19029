// Host suite: the device entry points reject bad input before any CUDA call, so their statuses are
// checked here without a GPU (CI). Pointers are fake, aligned, never dereferenced: every call below must
// fail validation (or be empty work) and return before touching the device.
#include <doctest/doctest.h>

#include <cstdint>

#include <cuda_runtime.h>

#include <string>

#include <convred/device/channel_reduce.cuh>
#include <convred/device/conv2d_reduce.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>

#include "instances.cuh"

namespace {

using convred::status;

template <class T>
T* fake(std::uintptr_t addr) {
  return reinterpret_cast<T*>(addr);
}

convred::conv2d_problem small() {
  convred::conv2d_problem p;
  p.N = 2, p.C = 4, p.H = 9, p.W = 9, p.K = 8, p.R = 3, p.S = 3;
  return p;
}

// Distinct, far-apart, 256-byte aligned fake buffers.
const float* X = fake<const float>(0x100000);
const float* Wt = fake<const float>(0x200000);
const float* B = fake<const float>(0x300000);
float* Y = fake<float>(0x400000);
std::int64_t* I = fake<std::int64_t>(0x500000);

}  // namespace

TEST_SUITE("host") {
TEST_CASE("device::conv2d_reduce / conv2d: bad input is refused before any CUDA call") {
  using namespace convred;
  auto fused = [](const conv2d_problem& p, const float* x, const float* w, const float* b, float* y,
                  std::int64_t* idx) { return device::conv2d_reduce(p, x, w, b, y, idx, op::argmin{}); };
  conv2d_problem p = small();
  {
    conv2d_problem q = p;
    q.C = 0;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_shape);
    q = p, q.stride_w = 0;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_stride);
    q = p, q.dil_h = -1;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_dilation);
    q = p, q.pad_w = -1;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_padding);
    q = p, q.groups = 3;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_groups);
    q = p, q.R = 12;
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_output_size);
    q = p, q.pad_h = std::int64_t(1) << 40;
    CHECK(fused(q, X, Wt, B, Y, I) == status::size_overflow);
    q = p, q.x_layout = static_cast<layout>(7);
    CHECK(fused(q, X, Wt, B, Y, I) == status::invalid_layout);
  }
  CHECK(device::conv2d_reduce(p, X, Wt, B, Y, I, op::sum{}) == status::indices_not_supported);
  CHECK(fused(p, nullptr, Wt, B, Y, I) == status::null_pointer);
  CHECK(fused(p, X, nullptr, B, Y, I) == status::null_pointer);
  CHECK(fused(p, X, Wt, B, nullptr, nullptr) == status::null_pointer);
  CHECK(device::conv2d_reduce(p, X, Wt, B, static_cast<float*>(nullptr), nullptr, op::min{}) == status::null_pointer);
  CHECK(fused(p, fake<const float>(0x100002), Wt, B, Y, I) == status::misaligned_pointer);
  CHECK(fused(p, X, Wt, B, Y, fake<std::int64_t>(0x500004)) == status::misaligned_pointer);
  CHECK(fused(p, X, Wt, B, fake<float>(0x100000 + 64), I) == status::overlapping_buffers);   // y inside x
  CHECK(fused(p, X, Wt, B, Y, fake<std::int64_t>(0x400000 + 8)) == status::overlapping_buffers);  // idx over y
  CHECK(fused(p, X, Wt, B, fake<float>(0x300000), I) == status::overlapping_buffers);  // y over bias
  conv2d_problem empty = p;
  empty.N = 0;
  CHECK(fused(empty, nullptr, nullptr, nullptr, nullptr, nullptr) == status::success);  // no work, no launch

  CHECK(device::conv2d(p, X, Wt, B, static_cast<float*>(nullptr)) == status::null_pointer);
  CHECK(device::conv2d(p, X, Wt, B, fake<float>(0x100000)) == status::overlapping_buffers);
  conv2d_problem bad = p;
  bad.K = 6, bad.groups = 4;
  CHECK(device::conv2d(bad, X, Wt, B, Y) == status::invalid_groups);
  CHECK(device::conv2d<default_policy_for<math::tf32>>(empty, X, Wt, B, Y) == status::success);
}

TEST_CASE("device::channel_reduce: bad input is refused before any CUDA call") {
  using namespace convred;
  channel_reduce_problem p;
  p.N = 2, p.C = 5, p.H = 7, p.W = 3;
  channel_reduce_problem q = p;
  q.H = 0;
  CHECK(device::channel_reduce(q, X, Y, I, op::argmax{}) == status::invalid_shape);
  q = p, q.x_layout = static_cast<layout>(3);
  CHECK(device::channel_reduce(q, X, Y, I, op::argmax{}) == status::invalid_layout);
  CHECK(device::channel_reduce(p, X, Y, I, op::mean{}) == status::indices_not_supported);
  CHECK(device::channel_reduce(p, static_cast<const float*>(nullptr), Y, I, op::argmax{}) == status::null_pointer);
  CHECK(device::channel_reduce(p, fake<const float>(0x100001), Y, I, op::argmax{}) == status::misaligned_pointer);
  CHECK(device::channel_reduce(p, X, fake<float>(0x100000), I, op::argmax{}) == status::overlapping_buffers);
  q = p, q.N = 0;
  CHECK(device::channel_reduce(q, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
                               static_cast<std::int64_t*>(nullptr), op::min{}) == status::success);
}

TEST_CASE("entry points: a pending CUDA error gives cuda_error before any launch, left pending") {
  // A failed cudaMalloc leaves an error pending on any machine: out of memory with a GPU, no device (or
  // no driver) without one. Every entry point must then return cuda_error without launching (the fake
  // pointers below would fault if a kernel ran) and leave that very error for the caller; a no-device
  // error (sticky without a driver) gives no_device instead.
  using namespace convred;
  void* big = nullptr;
  const cudaError_t err = cudaMalloc(&big, std::size_t(1) << 62);
  REQUIRE(err != cudaSuccess);
  REQUIRE(cudaPeekAtLastError() == err);
  const bool nodev = device::detail::is_no_device_error(err);
  const status want = nodev ? status::no_device : status::cuda_error;
  const conv2d_problem p = small();
  channel_reduce_problem cp;
  cp.N = 2, cp.C = 5, cp.H = 7, cp.W = 3;
  using WP = default_wgmma_policy<math::tf32>::type;
  auto pending_kept = [&](status s, const char* what, status want_here) {
    INFO(what << ": " << std::string(to_string(s)));
    CHECK(s == want_here);
    if (!nodev) CHECK(cudaPeekAtLastError() == err);  // still pending, not replaced by ours
  };
  pending_kept(device::conv2d_reduce(p, X, Wt, B, Y, I, op::argmin{}), "conv2d_reduce", want);
  pending_kept(device::conv2d_reduce<default_policy_for<math::tf32>>(p, X, Wt, B, Y, nullptr, op::min{}),
               "conv2d_reduce tf32", want);
  pending_kept(device::conv2d(p, X, Wt, B, Y), "conv2d", want);
  pending_kept(device::channel_reduce(cp, X, Y, I, op::argmax{}), "channel_reduce", want);
  pending_kept(device::pack_filter<WP>(p, Wt, reinterpret_cast<void*>(0x600000), std::size_t(1) << 20), "pack_filter",
               nodev ? status::success : status::cuda_error);  // no device: nothing to pack
  pending_kept(device::conv2d_reduce_packed<WP>(p, X, Wt, reinterpret_cast<const void*>(0x600000),
                                                std::size_t(1) << 20, B, Y, nullptr, op::min{}),
               "conv2d_reduce_packed", want);
  // Argument errors are still found first (on the host), and empty work is still success.
  CHECK(device::conv2d_reduce(p, static_cast<const float*>(nullptr), Wt, B, Y, I, op::argmin{}) == status::null_pointer);
  conv2d_problem empty = p;
  empty.N = 0;
  CHECK(device::conv2d_reduce(empty, X, Wt, B, Y, I, op::argmin{}) == status::success);
  if (!nodev) {
    CHECK(cudaGetLastError() == err);  // the caller reads (and clears) its own error
    CHECK(cudaPeekAtLastError() == cudaSuccess);
  }
  cudaGetLastError();
}

TEST_CASE("status: workspace_too_small and cuda_error texts") {
  using convred::status;
  const std::string ws = convred::to_string(status::workspace_too_small);
  CHECK(ws.rfind("workspace_too_small", 0) == 0);
  CHECK(ws.find("packed_filter_bytes") != std::string::npos);
  const std::string ce = convred::to_string(status::cuda_error);
  CHECK(ce.find("pending") != std::string::npos);
  CHECK(ce.find("nothing was launched") != std::string::npos);
  CHECK(ws != std::string(convred::to_string(status::invalid_argument)));
}

TEST_CASE("entry points without a GPU: valid arguments give no_device") {
  using namespace convred;
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return;  // covered by the gpu suite
  cudaGetLastError();
  CHECK(device::conv2d_reduce(small(), X, Wt, B, Y, I, op::argmin{}) == status::no_device);
  channel_reduce_problem cp;
  cp.N = 2, cp.C = 5, cp.H = 7, cp.W = 3;
  CHECK(device::channel_reduce(cp, X, Y, I, op::argmax{}) == status::no_device);
  using WP = default_wgmma_policy<math::tf32>::type;
  CHECK(device::packed_filter_bytes<WP, float>(small()) == 0);  // no sm_90a device: nothing to pack
  CHECK(device::conv2d_reduce_packed<WP>(small(), X, Wt, nullptr, 0, B, Y, nullptr, op::min{}) == status::no_device);
  CHECK(device::conv2d(small(), X, Wt, B, Y) == status::no_device);
  cudaGetLastError();
}

TEST_CASE("device::detail::check_buffers: alignment, overlap (outputs only), grid, in that order") {
  using namespace convred::device::detail;
  using convred::status;
  const float* x = fake<const float>(0x100000);
  float* y = fake<float>(0x200000);
  std::int64_t* i = fake<std::int64_t>(0x300000);
  {
    const buffer_arg a[] = {input(x, 100), output(y, 100), output(i, 100)};
    CHECK(check_buffers(a) == status::success);
    CHECK(check_buffers(a, 0x7fffffff) == status::success);
    CHECK(check_buffers(a, std::int64_t(0x7fffffff) + 1) == status::size_overflow);
  }
  {  // an output inside an input; two outputs sharing one byte; inputs overlapping each other are fine
    const buffer_arg a[] = {input(x, 100), output(fake<float>(0x100000 + 396), 1)};
    CHECK(check_buffers(a) == status::overlapping_buffers);
    const buffer_arg b[] = {input(x, 100), output(fake<float>(0x100000 + 400), 1)};
    CHECK(check_buffers(b) == status::success);  // adjacent, not overlapping
    const buffer_arg c[] = {output(y, 2), output(fake<std::int64_t>(0x200000), 1)};
    CHECK(check_buffers(c) == status::overlapping_buffers);
    const buffer_arg d[] = {input(x, 100), input(x + 10, 100), output(y, 4)};
    CHECK(check_buffers(d) == status::success);
  }
  {  // misaligned first, before overlap and grid; null pointers and empty ranges are neither
    const buffer_arg a[] = {input(fake<const float>(0x100002), 100), output(fake<float>(0x100000), 100)};
    CHECK(check_buffers(a, std::int64_t(1) << 40) == status::misaligned_pointer);
    const buffer_arg b[] = {input(static_cast<const float*>(nullptr), 100), output(y, 0),
                            output(static_cast<std::int64_t*>(nullptr), 5)};
    CHECK(check_buffers(b) == status::success);
    const buffer_arg c[] = {{fake<const void>(0x400008), 64, 1, 16, true}};  // a 16-byte requirement
    CHECK(check_buffers(c) == status::misaligned_pointer);
  }
}
}
