// Host suite: device::conv2d_reduce_plan's choice of kernel, its reason and workspace size, and its
// errors, for devices described by device_info (no GPU needed: the plan makes no CUDA call until
// prepare or run, and run refuses before a successful prepare).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include <convred/device/conv2d_reduce_plan.cuh>

namespace {

using convred::conv2d_problem;
using convred::status;
using convred::device::conv2d_reduce_plan;
using convred::device::device_info;
using convred::device::kernel_kind;
namespace math = convred::math;

conv2d_problem seed() {
  conv2d_problem p;
  p.N = 64, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3;
  return p;
}

const device_info h100{9, 0, true};          // sm_90a code present
const device_info h100_no_image{9, 0, false};  // a build without sm_90a
const device_info a100{8, 0, false};
const device_info turing{7, 5, false};
const device_info none{};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("host") {
TEST_CASE("conv2d_reduce_plan: the policy chain per math and device") {
  const conv2d_problem p = seed();
  {
    conv2d_reduce_plan<float, math::tf32> plan(p, h100);
    CHECK(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), "wgmma tf32"));
    CHECK(has(plan.description(), "4 stages"));
    // ceil(C / 8) stages x 9 taps x 128 x 8 x 4 bytes (packed_filter_bytes' formula)
    CHECK(plan.workspace_bytes() == 294912u);
  }
  {
    conv2d_reduce_plan<float, math::bf16> plan(p, h100);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), "resident"));
    CHECK(plan.workspace_bytes() == 147456u);
  }
  {
    conv2d_reduce_plan<float, math::tf32x3> plan(p, h100);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.workspace_bytes() == 589824u);
  }
  {
    conv2d_reduce_plan<float, math::tf32> plan(p, h100_no_image);
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(plan.workspace_bytes() == 0u);
    CHECK(has(plan.description(), "mma.sync tf32"));
    CHECK(has(plan.description(), "no sm_90a code"));
  }
  {
    conv2d_reduce_plan<float, math::fp16> plan(p, a100);
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(has(plan.description(), "not a compute capability 9.0 device"));
  }
  {
    conv2d_reduce_plan<float, math::ieee> plan(p, h100);
    CHECK(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::simt);
    CHECK(plan.workspace_bytes() == 0u);
    CHECK(has(plan.description(), "simt ieee"));
  }
  {
    // the default math, accurate: tf32x3's chain on tensor-core GPUs, exact FMA elsewhere
    conv2d_reduce_plan<float> plan(p, h100);
    static_assert(std::is_same_v<decltype(plan), conv2d_reduce_plan<float, math::accurate>>);
    CHECK(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.workspace_bytes() == 589824u);  // tf32x3's packed filter
    CHECK(has(plan.description(), "wgmma tf32x3"));
    CHECK(has(plan.description(), "math::accurate"));
    conv2d_reduce_plan<float> ampere(p, a100);
    CHECK(ampere.kernel() == kernel_kind::mma_sync);
    CHECK(has(ampere.description(), "mma.sync tf32x3"));
    conv2d_reduce_plan<float> old(p, turing);
    CHECK(old.state() == status::success);
    CHECK(old.kernel() == kernel_kind::simt);
    CHECK(has(old.description(), "older than sm_80"));
    conv2d_reduce_plan<__half> half(p, h100);  // the wgmma kernel takes float x only
    CHECK(half.kernel() == kernel_kind::mma_sync);
    CHECK(conv2d_reduce_plan<float>(p, none).state() == status::no_device);
  }
  {
    conv2d_reduce_plan<double> plan(p, turing);
    CHECK(plan.kernel() == kernel_kind::simt);
    CHECK(has(plan.description(), "fp64"));
    conv2d_reduce_plan<double> hopper(p, h100);  // double: exact fp64 on every GPU
    CHECK(hopper.kernel() == kernel_kind::simt);
    CHECK(has(hopper.description(), "math::accurate on double"));
  }
  {
    conv2d_reduce_plan<__half, math::tf32> plan(p, h100);  // the wgmma kernel takes float x only
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(has(plan.description(), "x is not float"));
  }
  {
    conv2d_reduce_plan<__nv_bfloat16, math::bf16> plan(p, turing);  // tensor cores need sm_80
    CHECK(plan.state() == status::no_device);
    CHECK(has(plan.description(), "sm_80"));
  }
  {
    conv2d_reduce_plan<float, math::tf32> plan(p, none);
    CHECK(plan.state() == status::no_device);
  }
  {
    // C/groups == 1 (depthwise; also C = 1): the direct kernel, under every math and on any GPU
    conv2d_problem dw = p;
    dw.groups = dw.C, dw.K = 2 * dw.C;
    conv2d_reduce_plan<float> acc(dw, h100);
    CHECK(acc.kernel() == kernel_kind::direct);
    CHECK(acc.workspace_bytes() == 0u);
    CHECK(has(acc.description(), "direct (exact fp32 FMA"));
    CHECK(has(acc.description(), "C/groups == 1"));
    conv2d_reduce_plan<float, math::bf16> bf(dw, turing);
    CHECK(bf.state() == status::success);
    CHECK(bf.kernel() == kernel_kind::direct);
    CHECK(has(bf.description(), "exact for any math"));
    CHECK(conv2d_reduce_plan<double>(dw, a100).kernel() == kernel_kind::direct);
    CHECK(conv2d_reduce_plan<float>(dw, none).state() == status::no_device);
    conv2d_problem one = p;
    one.C = 1;
    CHECK(conv2d_reduce_plan<float, math::tf32>(one, h100).kernel() == kernel_kind::direct);
    CHECK(std::string(convred::device::to_string(kernel_kind::direct)) == "direct");
  }
}

TEST_CASE("conv2d_reduce_plan: shapes the wgmma kernel does not serve name the rule") {
  struct row {
    conv2d_problem p;
    const char* why;
  };
  conv2d_problem nhwc = seed(), stride3 = seed(), groups = seed(), dil = seed(), w_odd = seed(), stride2 = seed();
  nhwc.x_layout = convred::layout::nhwc;
  stride3.stride_h = stride3.stride_w = 3;
  stride2.stride_h = stride2.stride_w = 2;
  groups.groups = 2;
  dil.dil_h = 2;
  w_odd.W = 255;
  for (const row& r : {row{nhwc, "not NCHW"}, row{stride3, "stride other than 1 or 2"},
                       row{groups, "groups != 1"}, row{dil, "dilation != 1"}}) {
    conv2d_reduce_plan<float, math::tf32> plan(r.p, h100);
    CAPTURE(plan.description());
    CHECK(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(plan.workspace_bytes() == 0u);
    CHECK(has(plan.description(), r.why));
  }
  // stride 2 and W % 4 != 0: served by the gathering producer (tf32), not by the 3xTF32 promotion at stride 2
  CHECK(conv2d_reduce_plan<float, math::tf32>(stride2, h100).kernel() == kernel_kind::wgmma);
  CHECK(conv2d_reduce_plan<float, math::bf16>(w_odd, h100).kernel() == kernel_kind::wgmma);
  CHECK(conv2d_reduce_plan<float, math::tf32x3>(w_odd, h100).kernel() == kernel_kind::wgmma);
  CHECK(has(conv2d_reduce_plan<float, math::tf32x3>(stride2, h100).description(), "3xTF32 with stride 2"));
  conv2d_problem proj2 = stride2;  // a 1x1 stride-2 projection: one tap per stage, the gather cannot keep up
  proj2.R = proj2.S = 1;
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(proj2, h100).description(), "1x1 filter with x gathered"));
  // K > 128: channel passes of 128 (the packed filter twice the size of K = 128's); with fewer tiles
  // than SMs the mma.sync kernel (split) instead
  conv2d_problem k256 = seed();
  k256.K = 256;
  {
    conv2d_reduce_plan<float, math::tf32> plan(k256, h100), half(seed(), h100);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.workspace_bytes() == 2 * half.workspace_bytes());
    device_info sms = h100;
    sms.sm_count = 132;
    k256.N = 1, k256.H = k256.W = 32;  // 4 tiles (8 x 30 of 8 x 32)
    conv2d_reduce_plan<float, math::tf32> few(k256, sms);
    CAPTURE(few.description());
    CHECK(few.kernel() == kernel_kind::mma_sync);
    CHECK(has(few.description(), "too few tiles to fill the GPU"));
  }
  // many tiles but no split on the mma.sync side (2 * pixel tiles >= SMs): the wgmma kernel, whatever
  // the time model says about a split that would not happen
  {
    conv2d_problem many = seed();
    many.N = 400, many.C = 256, many.H = many.W = 16, many.K = 256, many.pad_h = many.pad_w = 1;
    many.stride_h = many.stride_w = 2;
    device_info sms = h100;
    sms.sm_count = 132;
    conv2d_reduce_plan<float, math::tf32> plan(many, sms);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
  }
  // a 7x7 stem: each stage would hold 49 taps x 128 x 16 filter values (200 KB in bf16): not served yet
  conv2d_problem stem = seed();
  stem.R = stem.S = 7, stem.pad_h = stem.pad_w = 3, stem.C = 3, stem.K = 64;
  conv2d_reduce_plan<float, math::bf16> plan(stem, h100);
  CAPTURE(plan.description());
  CHECK(plan.kernel() == kernel_kind::mma_sync);
  CHECK(has(plan.description(), "shared memory"));
  // a 1x1 projection is served
  conv2d_problem proj = seed();
  proj.R = proj.S = 1, proj.C = 128, proj.K = 128;
  conv2d_reduce_plan<float, math::tf32> one(proj, h100);
  CHECK(one.kernel() == kernel_kind::wgmma);
}

TEST_CASE("conv2d_reduce_plan: errors before any CUDA call") {
  conv2d_problem bad = seed();
  bad.C = 0;
  conv2d_reduce_plan<float, math::tf32> invalid(bad, h100);
  CHECK(invalid.state() == status::invalid_shape);
  CHECK(has(invalid.description(), "invalid_shape"));
  const float* w = reinterpret_cast<const float*>(0x200000);
  CHECK(invalid.prepare(w, nullptr, 0) == status::invalid_shape);
  CHECK(invalid.run(nullptr, nullptr, nullptr, nullptr) == status::invalid_shape);

  conv2d_reduce_plan<float, math::tf32> plan(seed(), h100);
  // run before prepare: refused without touching the device
  CHECK(plan.run(reinterpret_cast<const float*>(0x100000), nullptr, reinterpret_cast<float*>(0x400000), nullptr) ==
        status::not_prepared);
  CHECK(plan.prepare(nullptr, nullptr, 0) == status::null_pointer);  // no weights
  CHECK(plan.run(reinterpret_cast<const float*>(0x100000), nullptr, reinterpret_cast<float*>(0x400000), nullptr) ==
        status::not_prepared);  // a failed prepare leaves the plan unprepared
  conv2d_reduce_plan<float, math::tf32> moved(std::move(plan));
  CHECK(moved.kernel() == kernel_kind::wgmma);
  CHECK(moved.workspace_bytes() == 294912u);
  CHECK(std::string(convred::device::to_string(kernel_kind::mma_sync)) == "mma.sync");
}
}  // TEST_SUITE("host")
