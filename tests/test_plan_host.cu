// Host suite: device::conv2d_reduce_plan's choice of kernel, its reason and workspace size, and its
// errors, for devices described by device_info (no GPU needed: the plan makes no CUDA call until
// prepare or run, and run refuses before a successful prepare).
#include <algorithm>
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <convred/device/conv2d_reduce_plan.cuh>

#include "instances.cuh"

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
    // ceil(C / 8) stages x 9 taps x 128 x 8 x 4 bytes, and the 256 of the flag word (packed_filter_bytes' formula)
    CHECK(plan.workspace_bytes() == 295168u);
  }
  {
    conv2d_reduce_plan<float, math::bf16> plan(p, h100);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), "resident"));
    CHECK(plan.workspace_bytes() == 147712u);
  }
  {
    conv2d_reduce_plan<float, math::tf32x3> plan(p, h100);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.workspace_bytes() == 590080u);
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
    CHECK(plan.workspace_bytes() == 590080u);  // tf32x3's packed filter
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
  // 20 input and 16 output channels per group: neither the direct family (C/groups <= 16,
  // test_grouped_direct_gpu.cu), family::grouped (K/groups >= 32, test_grouped_gpu.cu) nor the wgmma
  // kernel's grouped passes (C/groups a multiple of 8, test_grouped_wgmma_gpu.cu) serve it
  groups.groups = 2, groups.C = 40, groups.K = 32;
  // (a padding the dilation divides runs on the wgmma kernel: test_dilated_gpu.cu; this one on its flat tiles,
  // the taps as offsets, where the SM count is known: checked below)
  dil.dil_h = 2, dil.pad_h = 1;
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
  {
    const conv2d_reduce_plan<float, math::tf32> plan(dil, device_info{9, 0, true, 132});
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(has(plan.description(), "dilation 2x1 as tap offsets"));
  }
  // stride 2 and W % 4 != 0: served by the gathering producer or flat tiles (tf32, and 3xTF32 too)
  CHECK(conv2d_reduce_plan<float, math::tf32>(stride2, h100).kernel() == kernel_kind::wgmma);
  CHECK(conv2d_reduce_plan<float, math::bf16>(w_odd, h100).kernel() == kernel_kind::wgmma);
  CHECK(conv2d_reduce_plan<float, math::tf32x3>(w_odd, h100).kernel() == kernel_kind::wgmma);
  // 3xTF32 at stride 2: a 3x3 filter's two operand stages (twice tf32's) do not fit in shared memory
  CHECK(has(conv2d_reduce_plan<float, math::tf32x3>(stride2, h100).description(), "operand stages do not fit"));
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
    CHECK(plan.workspace_bytes() == 2 * half.workspace_bytes() - 256);  // (one flag word)
    device_info sms = h100;
    sms.sm_count = 132;
    k256.N = 1, k256.H = k256.W = 32;  // 4 tiles (8 x 30 of 8 x 32)
    conv2d_reduce_plan<float, math::tf32> few(k256, sms);
    CAPTURE(few.description());
    // the wgmma kernel's partial mode: 4 tiles x 2 passes x 4 GEMM_K ranges of the 8 stages
    CHECK(few.kernel() == kernel_kind::wgmma);
    CHECK(few.k_splits() == 4);
    CHECK(has(few.description(), "split into 4 GEMM_K ranges"));
    // packed filter (2 passes x 8 stages x 9 taps x 128 x 8 x 4 bytes, the 256-byte flag word), then 4 x 900
    // pixels x 256 x 4 bytes
    CHECK(few.workspace_bytes() == 590080u + 4u * 900u * 256u * 4u);
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

TEST_CASE("conv2d_reduce_plan: the wgmma kernel's partial (split-K) mode for layers with few tiles (132-SM H200)") {
  device_info h200 = h100;
  h200.sm_count = 132;
  auto layer = [](std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t K, std::int64_t R, std::int64_t pad,
                  std::int64_t stride) {
    conv2d_problem p;
    p.N = N, p.C = C, p.H = p.W = H, p.K = K, p.R = p.S = R, p.pad_h = p.pad_w = pad, p.stride_h = p.stride_w = stride;
    return p;
  };
  // the workspace of a wgmma plan run by conv2d_reduce_packed_split, worked out here: the packed filter
  // (npass x ceil(C / block_c) x parts x R S x 128 x block_c x element bytes), rounded up to 16 bytes; for
  // flat tiles the packed x (per 256-row tile up to the last output: parts x kt x block_c / E planes x
  // phases x (256 + the taps' reach) pixels x 16 bytes); then splits x N P Q x K floats, or in
  // pass mode npass x N P Q states of 8 bytes
  auto wgmma_bytes = [](const conv2d_problem& p, std::size_t block_c, std::size_t parts, std::size_t elem, int splits,
                        bool flat, bool pass, std::size_t tail_pixels = 0, std::size_t tail_splits = 0, std::int64_t bm = 256) {
    const std::size_t npass = static_cast<std::size_t>((p.K + 127) / 128),
                      kt = static_cast<std::size_t>(p.C) / block_c + (static_cast<std::size_t>(p.C) % block_c != 0);
    // the slices, then the 256 bytes of the flag word
    const std::size_t packed = npass * kt * parts * static_cast<std::size_t>(p.R * p.S) * 128u * block_c * elem + 256u;
    std::size_t xpack = 0;
    if (flat) {
      // (stride 1: min(pad, halo) of the zero rows and columns shared by neighbouring rows and images)
      const std::int64_t st = p.stride_h, hh = (p.R - 1) / st, hw = (p.S - 1) / st;
      const std::int64_t hs = p.P() + hh - (st == 1 ? std::min(p.pad_h, hh) : 0),
                         pw = p.Q() + hw - (st == 1 ? std::min(p.pad_w, hw) : 0);
      const std::int64_t outputs = ((p.N - 1) * hs + p.P() - 1) * pw + p.Q(), tiles = (outputs + bm - 1) / bm;
      const std::int64_t phases = std::min<std::int64_t>(st, p.R) * std::min<std::int64_t>(st, p.S);
      // per tile, each plane's window of bm pixels and the taps' reach, for every phase
      xpack = parts * kt * (block_c / (16 / elem)) * static_cast<std::size_t>(tiles * phases * (bm + hh * pw + hw)) * 16u;
    }
    const std::size_t m = static_cast<std::size_t>(p.gemm_m());
    if (tail_pixels > 0)  // pass mode's states of every pixel (16-byte aligned), then the tail's partial sums
      return (packed + 15) / 16 * 16 + xpack + (pass ? (npass * m * 8u + 15) / 16 * 16 : 0) +
             tail_splits * tail_pixels * static_cast<std::size_t>(p.K) * 4u;
    return (packed + 15) / 16 * 16 + xpack + (pass ? npass * m * 8u : static_cast<std::size_t>(splits) * m * static_cast<std::size_t>(p.K) * 4u);
  };
  struct row {
    const char* name;
    conv2d_problem p;
    int tf32, bf16, accurate;  ///< the wgmma kernel's GEMM_K splits per math; 0: unsplit wgmma; -1: not wgmma
  };
  const row rows[] = {
      // ResNet-50 layer3 3x3 at batch 32: 29 flat tiles (14 x 14 images in 15 x 15 plane pixels each: the
      // padding column and row shared by neighbours; no gather), 2 passes: 29 x 2 x 2 = 116 units in one
      // wave (3xTF32); tf32 and bf16 take the ping-pong policy's 57 flat tiles of 128 pixels x 2 passes in
      // pass mode instead, 114 units of the same size without the partial sums
      {"ResNet-50 layer3 3x3 n32", layer(32, 256, 14, 256, 3, 1, 1), 0, 0, 2},
      // VGG-16 conv3 at batch 1: 14 tiles of 4 x 64, 2 passes: 14 x 2 x 4 = 112 units
      {"VGG-16 conv3 n1", layer(1, 256, 56, 256, 3, 1, 1), 4, 4, 4},
      // U-Net bottleneck at batch 1: 5 flat tiles (33 x 33 plane pixels), 8 passes: 5 x 8 x 3 = 120 units
      {"U-Net bottleneck n1", layer(1, 512, 32, 1024, 3, 1, 1), 3, 3, 3},
      // ... at batch 32: 136 flat tiles (tf32, bf16): the first 132 fused (one wave of 8 pass-times), the last 4
      // as a split-K tail of 4 x 8 passes x 4 GEMM_K ranges (128 units of a quarter pass): 8.25 pass-times,
      // where pass mode's 1,088 units take 9 and the fused kernel 16; 3xTF32 (no tail, no pass mode) fused
      {"U-Net bottleneck n32", layer(32, 512, 32, 1024, 3, 1, 1), 0, 0, 0},
      // ResNet-50 layer4 3x3 at batch 32: 7 x 7 images, 4 per flat tile (8 x 8 plane pixels each): 8 tiles x 4
      // passes x 4 = 128 units
      {"ResNet-50 layer4 3x3 n32", layer(32, 512, 7, 512, 3, 1, 1), 4, 4, 4},
      // ResNet-50 layer3.0 projection, 1x1 stride 2: flat tiles over the packed stride-2 samples, pass mode
      // (tf32, bf16); 3xTF32 (no pass mode) partial mode: 25 tiles x 8 passes x 1 = 200 units
      {"ResNet-50 layer3.0 1x1/2 n32", layer(32, 512, 28, 1024, 1, 0, 2), 0, 0, 1},
      // ... at batch 1: tf32 direct tiles at stride 2 (their boxes carry the odd columns, counted 2.5x
      // slower; no packing pass): 1 tile of 14 x 14 x 8 passes x 8 GEMM_K ranges = 64 units; bf16 flat
      // tiles, 1 x 8 x 4 = 32 units; 3xTF32 the mma.sync split (the wgmma tap loop, estimated
      // plan_wgmma_tap_loop_slowdown times its model, is slower at batch 1)
      {"ResNet-50 layer3.0 1x1/2 n1", layer(1, 512, 28, 1024, 1, 0, 2), 8, 4, -1},
      // ResNet-50 layer3 3x3 at batch 1: 1 tile x 2 passes x up to kt (32 tf32 / 16 bf16) ranges
      {"ResNet-50 layer3 3x3 n1", layer(1, 256, 14, 256, 3, 1, 1), 32, 16, 32},
      // the seed: 16,384 tiles of image rows, unsplit, fused (packing its 1 GB x would cost ~0.5 ms)
      {"seed", seed(), 0, 0, 0},
  };
  for (const row& r : rows) {
    CAPTURE(r.name);
    auto check = [&](auto plan, int splits, std::size_t block_c, std::size_t parts, std::size_t elem) {
      CAPTURE(plan.description());
      CHECK(plan.state() == status::success);
      if (splits < 0) {
        CHECK(plan.kernel() == kernel_kind::mma_sync);
        return;
      }
      CHECK(plan.kernel() == kernel_kind::wgmma);
      CHECK(plan.k_splits() == splits);
      const bool flat = has(plan.description(), "flat"), pass = has(plan.description(), "pass mode");
      const std::int64_t bm = has(plan.description(), "ping-pong") ? 128 : 256;
      if (has(plan.description(), "split-K tail")) {  // the U-Net bottleneck at batch 32 (tf32, bf16)
        CHECK(std::string(r.name) == "U-Net bottleneck n32");
        CHECK(splits == 0);
        CHECK(has(plan.description(), "(132 tiles = 132 work units, then the last 4 tiles x 8 channel passes x 4 GEMM_K "
                                      "ranges = 128 work units for 132 SMs; 992 pixels' partial sums"));
        // the tail's first pixel: flat tile 132 starts at plane pixel 132 x 256 = 33,792 = 31 x 1,089 + 33
        // (33 x 33 plane pixels per image): image 31, row 1, column 0, output 31 x 1,024 + 32 = 31,776
        CHECK(plan.workspace_bytes() == wgmma_bytes(r.p, block_c, parts, elem, 0, flat, pass, 32768 - 31776, 4));
        CHECK(has(plan.description(), (std::to_string(plan.workspace_bytes()) + "-byte workspace").c_str()));
        return;
      }
      if (splits == 0) {
        CHECK_FALSE(has(plan.description(), "split"));
        if (!flat && !pass) {
          CHECK(plan.workspace_bytes() == wgmma_bytes(r.p, block_c, parts, elem, 0, false, false));
          return;
        }
      } else {
        CHECK(has(plan.description(), ("split into " + std::to_string(splits) + " GEMM_K range").c_str()));
      }
      CHECK(plan.workspace_bytes() == wgmma_bytes(r.p, block_c, parts, elem, splits, flat, pass, 0, 0, bm));
      CHECK(has(plan.description(), (std::to_string(plan.workspace_bytes()) + "-byte workspace").c_str()));
    };
    check(conv2d_reduce_plan<float, math::tf32>(r.p, h200), r.tf32, 8, 1, 4);
    check(conv2d_reduce_plan<float, math::bf16>(r.p, h200), r.bf16, 16, 1, 2);
    check(conv2d_reduce_plan<float>(r.p, h200), r.accurate, 8, 2, 4);  // math::accurate: tf32x3
  }
  // the workspace of the first row, by hand: 2 x 32 x 9 x 128 x 8 x 4 = 2,359,296 bytes of packed filter and its
  // 256-byte flag word, the
  // ping-pong policy's packed x (57 tiles x 64 planes x (128 + 2 x 15 + 2) pixels x 16 bytes = 9,338,880),
  // then pass mode's states, 2 x 6,272 x 8 = 100,352 bytes
  CHECK(conv2d_reduce_plan<float, math::tf32>(rows[0].p, h200).workspace_bytes() == 11798784u);
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(rows[0].p, h200).description(),
            "wgmma tf32 ping-pong (sm_90a, packed filter streamed, 5 stages, flat 128-pixel tiles"));
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(rows[0].p, h200).description(),
            "in pass mode (57 tiles x 2 channel passes = 114 work units for 132 SMs"));
  CHECK_FALSE(has(conv2d_reduce_plan<float>(rows[0].p, h200).description(), "ping-pong"));  // (3xTF32)
  // the flat and pass-mode choices the rows rely on, as the descriptions name them
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(rows[3].p, h200).description(), "with a split-K tail (132 tiles"));
  {  // fewer tiles than SMs whose pass-mode units fill them (K 2520 on 7x7 at batch 32: 7 flat tiles x 20 passes
     // on 132 SMs): a tail over the last tile after a pass-mode head, estimated below the plan without a tail
     // (partial mode's best split, or pass mode)
    const conv2d_problem deep = layer(32, 2520, 7, 2520, 1, 0, 1);
    const conv2d_reduce_plan<float, math::tf32> tail(deep, h200);
    CAPTURE(tail.description());
    CHECK(has(tail.description(), "flat 256-pixel tiles"));
    CHECK(has(tail.description(), "in pass mode with a split-K tail (6 tiles x 20 channel passes"));
    CHECK(tail.k_splits() == 0);
    convred::device::plan_options no_tail;
    no_tail.tail = -1;
    const conv2d_reduce_plan<float, math::tf32> untailed(deep, h200, no_tail);
    CAPTURE(untailed.description());
    CHECK_FALSE(has(untailed.description(), "split-K tail"));
    CHECK(tail.config().seconds < untailed.config().seconds);
  }
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(rows[4].p, h200).description(), "flat 256-pixel tiles"));
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(rows[5].p, h200).description(), "flat 256-pixel tiles"));
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(rows[5].p, h200).description(), "flat 256-pixel tiles"));
  // the 1x1 projection at stride 1 (ResNet-50 layer1.0, batch 32): tf32 direct tiles, no packing pass
  conv2d_problem proj = rows[5].p;
  proj.C = 64, proj.H = proj.W = 56, proj.K = 256, proj.stride_h = proj.stride_w = 1;
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(proj, h200).description(), "4x56-pixel tiles with x read straight from NCHW"));
  CHECK(conv2d_reduce_plan<float, math::tf32>(proj, h200).workspace_bytes() == wgmma_bytes(proj, 8, 1, 4, 0, false, false));
  CHECK_FALSE(has(conv2d_reduce_plan<float, math::tf32>(rows[8].p, h200).description(), "flat"));
  // direct tiles at stride 2 only in partial mode: layer3.0's projection at batch 1 (tf32), not at batch 32
  // (rows[5], flat tiles above), nor layer2.0's projection at batch 4, whose flat tiles run in pass mode
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(rows[6].p, h200).description(),
            "14x14-pixel tiles with x read straight from NCHW (TMA boxes of 16 channels"));
  CHECK(has(conv2d_reduce_plan<float, math::bf16>(rows[6].p, h200).description(), "flat 256-pixel tiles"));
  const conv2d_problem l2ds = layer(4, 256, 56, 512, 1, 0, 2);
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(l2ds, h200).description(), "flat 256-pixel tiles"));
  CHECK(has(conv2d_reduce_plan<float, math::tf32>(l2ds, h200).description(), "in pass mode"));
  // without an SM count (a device_info without one) the plan never splits
  CHECK(conv2d_reduce_plan<float, math::tf32>(rows[0].p, h100).k_splits() == 0);
  CHECK(conv2d_reduce_plan<float, math::tf32>(rows[0].p, h100).kernel() == kernel_kind::wgmma);
}

TEST_CASE("choose_wgmma_splits: the wave model") {
  using P = convred::default_wgmma_policy<math::tf32>::type;
  conv2d_problem p;  // ResNet-50 layer3 3x3, batch 32
  p.N = 32, p.C = 256, p.H = p.W = 14, p.K = 256, p.R = p.S = 3, p.pad_h = p.pad_w = 1;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(convred::block::conv_mainloop_wgmma<P>::make_params(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                                              convred::device::detail::max_smem_per_block, k, smem));
  REQUIRE(k.tiles == 32);
  REQUIRE(k.npass == 2);
  REQUIRE(k.kt == 32);
  REQUIRE(k.gather == 1);  // W = 14
  const auto e = convred::device::choose_wgmma_splits<P>(p, k, 132);
  // a pass: 2 x 256 x 128 x 2304 FLOP at 3e12 / 2 (gathered) = 100.7 us; fused: 1 wave of 2 passes
  CHECK(e.fused_s == doctest::Approx(2 * 2.0 * 256 * 128 * 2304 / 1.5e12));
  // 2 splits: 128 units, 1 wave of 16 of 32 stages, + 2 x 2 x 6272 x 256 x 4 bytes at 3e12 B/s + 5 us
  CHECK(e.splits == 2);
  CHECK(e.units == 128);
  CHECK(e.split_s == doctest::Approx(2.0 * 256 * 128 * 2304 / 1.5e12 / 2 + 2.0 * 2 * 6272 * 256 * 4 / 3e12 + 5e-6));
  CHECK(e.split_s < e.fused_s);
  // no SM count: fused; the GPU filled (132 tiles or more): fused
  CHECK(convred::device::choose_wgmma_splits<P>(p, k, 0).splits == 0);
  CHECK(convred::device::choose_wgmma_splits<P>(p, k, 32).splits == 0);
  // pass mode (2 passes of 32 tiles: 64 units in 1 wave of one pass, then 2 x 6272 states of 8 bytes written
  // and read at 3e12 B/s + 5 us): estimated, but the 2 splits are faster
  CHECK_FALSE(e.pass_mode);
  CHECK(e.pass_mode_s == doctest::Approx(2.0 * 256 * 128 * 2304 / 1.5e12 + 2.0 * 2 * 6272 * 8 / 3e12 + 5e-6));
  // a workspace limit below two splits' partial sums (2 x 6.4 MB): one split (the passes alone) would be
  // pass mode's units with 6.4 MB of partial sums instead of 100 KB of states: pass mode
  const auto e7 = convred::device::choose_wgmma_splits<P>(p, k, 132, 1.0, 7u << 20);
  CHECK(e7.splits == 0);
  CHECK(e7.pass_mode);
  CHECK(convred::device::choose_wgmma_splits<P>(p, k, 132, 1.0, 1u << 20).splits == 0);
  // 3xTF32 has no pass mode
  using P3 = convred::default_wgmma_policy<math::tf32x3>::type;
  convred::block::wgmma_conv_params k3;
  REQUIRE(convred::block::conv_mainloop_wgmma<P3>::make_params(p, convred::device::detail::wgmma_tail_bytes<P3, convred::op::argmin>(),
                                                               convred::device::detail::max_smem_per_block, k3, smem));
  CHECK(convred::device::choose_wgmma_splits<P3>(p, k3, 132, 0.36, 1u << 20).pass_mode_s == 0.0);
}

TEST_CASE("choose_wgmma_splits: direct tiles at stride 2") {
  using P = convred::default_wgmma_policy<math::tf32>::type;
  using mainloop = convred::block::conv_mainloop_wgmma<P>;
  conv2d_problem p;  // ResNet-50 layer3.0's projection at batch 1: x (1, 512, 28, 28), K = 1024, 1x1 stride 2
  p.N = 1, p.C = 512, p.H = p.W = 28, p.K = 1024, p.stride_h = p.stride_w = 2;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(mainloop::make_direct_params(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                       convred::device::detail::max_smem_per_block, k, smem));
  REQUIRE(k.tiles == 1);
  REQUIRE(k.npass == 8);
  REQUIRE(k.group == 2);  // (boxes of 40 columns x 16 channels x 14 rows: 4 stages of 4 slices do not fit)
  REQUIRE(k.kt == 32);
  const auto e = convred::device::choose_wgmma_splits<P>(p, k, 132);
  // a pass at 3e12 / 2.5 FLOP/s per SM: 2 x 256 x 128 x 512 / 1.2e12 = 28.0 us; 8 splits: 64 units in one
  // wave of 4 of 32 stages, + 2 x 8 x 196 x 1024 x 4 bytes at 3e12 B/s + 5 us (4 splits: 2 x 7.0 + 2.1)
  const double pass_s = 2.0 * 256 * 128 * 512 / (3e12 / convred::device::plan_wgmma_direct_s2_slowdown);
  CHECK(e.splits == 8);
  CHECK(e.units == 64);
  CHECK(e.split_s == doctest::Approx(pass_s * 4 / 32 + 2.0 * 8 * 196 * 1024 * 4 / 3e12 + 5e-6));
  // at stride 1 (no slowdown) the same tiles would take 4 splits
  k.stride = 1;
  CHECK(convred::device::choose_wgmma_splits<P>(p, k, 132).splits == 4);
}

TEST_CASE("choose_wgmma_splits: the split-K tail of the last wave") {
  using P = convred::default_wgmma_policy<math::tf32>::type;
  using mainloop = convred::block::conv_mainloop_wgmma<P>;
  conv2d_problem p;  // the U-Net bottleneck at batch 32: x (32, 512, 32, 32), K = 1024, 3x3, padding 1
  p.N = 32, p.C = 512, p.H = p.W = 32, p.K = 1024, p.R = p.S = 3, p.pad_h = p.pad_w = 1;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  REQUIRE(mainloop::make_params(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                convred::device::detail::max_smem_per_block, k, smem, true));
  REQUIRE(k.tiles == 136);
  REQUIRE(k.npass == 8);
  REQUIRE(k.kt == 64);
  CHECK(mainloop::tail_serves(k));
  CHECK(mainloop::first_pixel(k, 132) == 31776);
  CHECK(mainloop::first_pixel(k, 136) == 32768);
  const auto e = convred::device::choose_wgmma_splits<P>(p, k, 132);
  CHECK(e.splits == 0);
  CHECK(e.tail_tiles == 4);
  CHECK(e.tail_splits == 4);
  CHECK_FALSE(e.pass_mode);  // a fused head: 132 tiles, one wave of 8 passes, no combine
  const double pass_s = 2.0 * 256 * 128 * 4608 / 3e12;
  const double pre = e.fused_s - 16 * pass_s;  // the packing pass (fused: 2 waves of 8 passes)
  // one wave of 8 passes, one of 128 quarter passes (the tail's own launch, 2 us), the fixup over the tail
  CHECK(e.tail_s == doctest::Approx(pre + 8.25 * pass_s + 2e-6 + 2.0 * 4 * 992 * 1024 * 4 / 3e12 + 5e-6));
  CHECK(e.tail_s < e.pass_mode_s);
  CHECK(e.pass_mode_s < e.fused_s);
  {  // the options: no tail (pass mode then), or a forced one
    convred::device::plan_options o;
    auto with = [&](const convred::device::plan_options& opt) {
      return convred::device::choose_wgmma_splits<P>(p, k, 132, 1.0, convred::device::default_split_workspace_limit, opt);
    };
    o.tail = -1;
    const auto off = with(o);
    CHECK(off.tail_tiles == 0);
    CHECK(off.pass_mode);
    o.tail = 10, o.tail_splits = 3, o.pass = convred::device::wgmma_pass_mode::on;
    const auto on = with(o);
    CHECK(on.tail_tiles == 10);
    CHECK(on.tail_splits == 3);
    CHECK(on.pass_mode);
    {  // the planner with those options: pass mode's states of every pixel (16-byte aligned), then the tail's sums
      device_info h200 = h100;
      h200.sm_count = 132;
      conv2d_reduce_plan<float, math::tf32> plan(p, h200, o);
      CAPTURE(plan.description());
      CHECK(has(plan.description(), "in pass mode with a split-K tail (126 tiles x 8 channel passes = 1008 work units, "
                                    "then the last 10 tiles x 8 channel passes x 3 GEMM_K ranges = 240 work units"));
      const std::int64_t pixels = 32768 - mainloop::first_pixel(k, 126);
      const std::size_t packed = mainloop::packed_bytes(k), xpack = mainloop::xpack_bytes(k);
      const std::size_t states = (8u * 32768u * 8u + 15) / 16 * 16;
      CHECK(plan.workspace_bytes() == (packed + 15) / 16 * 16 + xpack + states + 3u * static_cast<std::size_t>(pixels) * 1024u * 4u);
      CHECK(plan.workspace_bytes() == convred::device::detail::packed_split_bytes(p, packed, xpack, 0, true, pixels, 3));
      CHECK(plan.k_splits() == 0);
    }
    o.tail = 1000, o.tail_splits = 1000, o.pass = convred::device::wgmma_pass_mode::off;  // at most tiles - 1 tiles, kt splits
    const auto most = with(o);
    CHECK(most.tail_tiles == 135);
    CHECK(most.tail_splits == 64);
    CHECK_FALSE(most.pass_mode);
  }
  // 3xTF32: no tail (its consumers, at their register limit, spill with the tail's offsets)
  using P3 = convred::default_wgmma_policy<math::tf32x3>::type;
  convred::block::wgmma_conv_params k3;
  REQUIRE(convred::block::conv_mainloop_wgmma<P3>::make_params(p, convred::device::detail::wgmma_tail_bytes<P3, convred::op::argmin>(),
                                                               convred::device::detail::max_smem_per_block, k3, smem, true));
  CHECK(convred::device::choose_wgmma_splits<P3>(p, k3, 132, 0.36).tail_tiles == 0);
  // wide row tiles (tiles_q > 1) cover no contiguous pixel range: no tail
  conv2d_problem wide = p;
  wide.N = 64, wide.H = 64, wide.W = 200, wide.K = 64, wide.C = 32;
  convred::block::wgmma_conv_params kw;
  REQUIRE(mainloop::make_params(wide, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                                convred::device::detail::max_smem_per_block, kw, smem));
  REQUIRE(kw.tiles_q > 1);
  CHECK_FALSE(mainloop::tail_serves(kw));
  CHECK(convred::device::choose_wgmma_splits<P>(wide, kw, 132).tail_tiles == 0);
}

TEST_CASE("conv_mainloop_wgmma::first_pixel: tiles t, t + 1, ... cover the outputs from first_pixel(t) on, in order") {
  using P = convred::default_wgmma_policy<math::tf32>::type;
  using mainloop = convred::block::conv_mainloop_wgmma<P>;
  std::mt19937_64 rng(4711);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int i = 0; i < 300; ++i) {
    conv2d_problem p;
    p.N = pick(1, 6), p.C = pick(1, 40), p.K = pick(1, 300);
    p.R = p.S = pick(0, 1) ? 3 : 1;
    p.H = pick(p.R, 40), p.W = pick(p.S, 80);
    p.pad_h = pick(0, 2), p.pad_w = pick(0, 2);
    p.stride_h = p.stride_w = pick(1, 2);
    const bool flat = pick(0, 1) == 1;
    convred::block::wgmma_conv_params k;
    std::size_t smem = 0;
    if (!mainloop::make_params(p, convred::device::detail::wgmma_tail_bytes<P, convred::op::argmin>(),
                               convred::device::detail::max_smem_per_block, k, smem, flat) ||
        !mainloop::tail_serves(k))
      continue;
    INFO("N " << p.N << " H " << p.H << " W " << p.W << " R " << p.R << " pad " << p.pad_h << "," << p.pad_w << " stride "
              << p.stride_h << (flat ? " flat" : " rows"));
    // the least output pixel of each tile (brute force over its block_m GEMM rows), then a suffix minimum
    const std::int64_t M = p.gemm_m();
    std::vector<std::int64_t> least(static_cast<std::size_t>(k.tiles) + 1, M), most(static_cast<std::size_t>(k.tiles), -1);
    for (std::int64_t t = 0; t < k.tiles; ++t)
      for (int px = 0; px < P::block_m; ++px) {
        std::int64_t m = -1;
        if (flat) {
          const std::int64_t o = t * P::block_m + px, image = std::int64_t(k.flat_rows) * k.pw;
          const std::int64_t n = o / image, row = o % image / k.pw, col = o % k.pw;
          if (n < k.N && row < k.P && col < k.Q) m = (n * k.P + row) * k.Q + col;
        } else {
          const std::int64_t n = t / k.tiles_p, tp = t % k.tiles_p;
          const std::int64_t row = tp * k.tile_rows + px / k.tile_cols, col = px % k.tile_cols;
          if (row < k.P && col < k.Q) m = (n * k.P + row) * k.Q + col;
        }
        if (m >= 0) least[static_cast<std::size_t>(t)] = std::min(least[static_cast<std::size_t>(t)], m);
        most[static_cast<std::size_t>(t)] = std::max(most[static_cast<std::size_t>(t)], m);
      }
    for (std::int64_t t = k.tiles - 1; t >= 0; --t)
      least[static_cast<std::size_t>(t)] = std::min(least[static_cast<std::size_t>(t)], least[static_cast<std::size_t>(t) + 1]);
    for (std::int64_t t = 0; t <= k.tiles; ++t) CHECK(mainloop::first_pixel(k, t) == least[static_cast<std::size_t>(t)]);
    // contiguous: every pixel of tile t lies below every pixel of the later tiles
    for (std::int64_t t = 0; t + 1 < k.tiles; ++t) CHECK(most[static_cast<std::size_t>(t)] < least[static_cast<std::size_t>(t) + 1]);
    CHECK(least[0] == 0);
    ++checked;
  }
  CHECK(checked > 100);
}

TEST_CASE("conv2d_reduce_plan: the mma.sync split where the model estimates it faster; forced splits (plan_options)") {
  device_info h200 = h100;
  h200.sm_count = 132;
  conv2d_problem p;  // a 1x1 layer on 1x1 images: one 256-row tile holding one pixel, 2048 -> 1024 channels
  p.N = 1, p.C = 2048, p.H = p.W = 1, p.K = 1024, p.R = p.S = 1;
  {
    // 3xTF32: the wgmma kernel serves it, but one output pixel is below plan_wgmma_min_pixels: mma.sync
    conv2d_reduce_plan<float> plan(p, h200);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(plan.k_splits() > 0);
    CHECK(has(plan.description(), "32 or fewer output pixels"));
    conv2d_problem q = p;  // 33 pixels: past the rule (the wgmma family serves it where it is not weighed
    q.N = 33;              // against the mma.sync kernel, whose estimate the planner then compares)
    namespace fam = convred::device::family;
    using inner = fam::wgmma<float, math::accurate, fam::wgmma_role::adapter>;  // (an adapter's: the rule too)
    CHECK(inner::can_implement(q, h200, {}) == nullptr);
    const char* why = inner::can_implement(p, h200, {});
    REQUIRE(why != nullptr);
    CHECK(has(why, "32 or fewer output pixels"));
    // (screening's pass 1, which has no mma.sync sibling: no rule)
    CHECK(fam::wgmma<float, math::fp16, fam::wgmma_role::pass1>::can_implement(p, h200, {}) == nullptr);
    CHECK(!has(conv2d_reduce_plan<float>(q, h200).description(), "32 or fewer output pixels"));
  }
  auto forced = [](int z) {  // plan_options with `splits` z
    convred::device::plan_options o;
    o.splits = z;
    return o;
  };
  {
    conv2d_reduce_plan<float> plan(p, h200, forced(-1));  // the wgmma kernel, its model's split count
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.k_splits() > 0);
  }
  {
    conv2d_reduce_plan<float> plan(p, h200, forced(3));
    CHECK(plan.options().splits == 3);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.k_splits() == 3);
    CHECK(has(plan.description(), "split into 3 GEMM_K ranges"));
  }
  {
    // at most one range per stage: 2048 / 16 channels (3xTF32's flat 1x1 stages of two 8-channel slices)
    conv2d_reduce_plan<float> plan(p, h200, forced(100000));
    CHECK(plan.k_splits() == 128);
    conv2d_reduce_plan<float> moved(std::move(plan));  // the options move with the plan
    CHECK(moved.options().splits == 100000);
    CHECK(moved.k_splits() == 128);
  }
  CHECK(conv2d_reduce_plan<float>(p, h200).kernel() == kernel_kind::mma_sync);  // default options: the model's
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
  CHECK(moved.workspace_bytes() == 295168u);
  CHECK(std::string(convred::device::to_string(kernel_kind::mma_sync)) == "mma.sync");
}
// Random layers (fixed seed) through the planner in TF32, bf16 and math::accurate, for a described 132-SM
// H100, an A100 and no device, with the default options and with one forced plan_options choice each: an
// invalid problem gets validate()'s status; a valid one a plan that can run on the H100 and the A100
// (success), no_device on no device; a plan that runs names its kernel, has a finite, non-negative estimate,
// a workspace holding its prepared bytes, takes the wgmma kernel only where sm_90a code is present, and is
// made again the same (the plan cache relies on it). Layers span the classes of issue 32's sweep (dense,
// 1x1, strided, grouped, depthwise, dilated with padding = dilation, asymmetric filters, tiny and odd
// images, K > 1024) and a few values at or past validate()'s limits.
TEST_CASE("conv2d_reduce_plan: random layers and forced options give a runnable plan or a named error") {
  std::mt19937_64 rng(20261207);
  auto pick = [&](std::initializer_list<std::int64_t> v) {
    return *(v.begin() + static_cast<std::ptrdiff_t>(rng() % v.size()));
  };
  auto chance = [&](double q) { return static_cast<double>(rng() % 1000000) < q * 1e6; };
  device_info h132 = h100;
  h132.sm_count = 132;
  device_info a108 = a100;
  a108.sm_count = 108;
  device_info h132_no_image = h100_no_image;  // an H100 running a build without sm_90a code
  h132_no_image.sm_count = 132;
  std::int64_t plans = 0, wgmma_plans = 0, refused = 0;
  for (int i = 0; i < 600; ++i) {
    conv2d_problem p;
    p.N = pick({1, 1, 1, 2, 4, 8, 16, 32, 32, 64});
    p.R = pick({1, 1, 1, 1, 2, 3, 3, 3, 3, 5, 7});
    p.S = chance(0.75) ? p.R : pick({1, 3, 5, 7});
    p.dil_h = chance(0.6) ? 1 : pick({2, 3, 4, 6, 12, 18, 24, 36});
    p.dil_w = chance(0.85) ? p.dil_h : pick({1, 2, 4});
    p.stride_h = chance(0.6) ? 1 : pick({2, 2, 3, 4});
    p.stride_w = chance(0.9) ? p.stride_h : pick({1, 2});
    p.H = pick({1, 2, 3, 4, 5, 7, 9, 12, 13, 14, 15, 17, 19, 25, 28, 33, 35, 38, 56, 65, 68, 112, 128});
    p.W = chance(0.7) ? p.H : pick({1, 3, 4, 5, 7, 9, 14, 20, 34, 50, 65, 68, 100, 257});
    p.pad_h = pick({0, 1, 2, 3}) == 0 ? 0 : p.dil_h * (p.R / 2);
    p.pad_w = chance(0.9) ? p.dil_w * (p.S / 2) : pick({0, 1, 2});
    const std::initializer_list<std::int64_t> ch = {1,   2,   3,   4,   7,   8,   16,  31,  32,   33,   64,   65,  96,
                                                    128, 130, 144, 192, 256, 257, 384, 512, 513, 1024, 1030, 2048, 3712};
    p.C = pick(ch), p.K = pick(ch);
    const double r = static_cast<double>(rng() % 1000) / 1000.0;
    if (r < 0.12) {  // depthwise, channel multiplier 1, 2 or 4
      p.groups = p.C, p.K = p.C * pick({1, 1, 2, 4});
    } else if (r < 0.25) {  // grouped
      p.groups = pick({2, 3, 4, 8, 32});
      p.C = p.groups * pick({1, 2, 4, 8, 16, 33}), p.K = p.groups * pick({1, 2, 4, 8, 17, 64});
    }
    if (r > 0.95) {  // one value at or past a limit of validate()
      const std::int64_t v = pick({0, -1, std::int64_t(1) << 31, std::int64_t(1) << 40, (std::int64_t(1) << 40) + 1});
      switch (rng() % 7) {
        case 0: p.N = v; break;
        case 1: p.C = v; break;
        case 2: p.K = v; break;
        case 3: p.H = v; break;
        case 4: p.stride_w = v; break;
        case 5: p.pad_h = v; break;
        default: p.groups = v; break;
      }
    }
    convred::device::plan_options o;  // one forced choice
    switch (rng() % 10) {
      case 0: o.tiles = convred::device::wgmma_tiling::rows; break;
      case 1: o.tiles = convred::device::wgmma_tiling::flat; break;
      case 2: o.tiles = convred::device::wgmma_tiling::direct; break;
      case 3: o.pass = convred::device::wgmma_pass_mode::on; break;
      case 4: o.pingpong = convred::device::wgmma_pingpong_mode::on; break;
      case 5: o.splits = pick({-1, 2, 7}); break;
      case 6: o.tail = pick({-1, 1, 2}); break;
      case 7: o.dilated_residual = pick({-1, 1, 2, 3}); break;
      case 8: o.pass = convred::device::wgmma_pass_mode::off; break;
      default: o.pingpong = convred::device::wgmma_pingpong_mode::off; break;
    }
    const status valid = convred::validate(p, sizeof(float));
    auto check = [&](auto math, const device_info& dev, const convred::device::plan_options& opt, const char* mname,
                     const char* dname) {
      using Math = decltype(math);
      const conv2d_reduce_plan<float, Math> plan(p, dev, opt);
      INFO("layer N" << p.N << " C" << p.C << " " << p.H << "x" << p.W << " K" << p.K << " " << p.R << "x" << p.S
                     << " s" << p.stride_h << "x" << p.stride_w << " p" << p.pad_h << "x" << p.pad_w << " d" << p.dil_h
                     << "x" << p.dil_w << " g" << p.groups << " math " << mname << " device " << dname << " forced tiles "
                     << int(opt.tiles) << " pass " << int(opt.pass) << " pp " << int(opt.pingpong) << " splits "
                     << opt.splits << " tail " << opt.tail << " s2b " << opt.dilated_residual << ": "
                     << plan.description());
      ++plans;
      if (valid != status::success) {
        CHECK(plan.state() == valid);
        ++refused;
        return;
      }
      if (dev.cc_major == 0) {
        CHECK(plan.state() == status::no_device);
        return;
      }
      REQUIRE(plan.state() == status::success);
      CHECK(!plan.description().empty());
      CHECK(std::isfinite(plan.config().seconds));
      CHECK(plan.config().seconds >= 0);
      CHECK(plan.workspace_bytes() >= plan.prepared_bytes());
      if (!dev.wgmma_image) CHECK(plan.kernel() != kernel_kind::wgmma);
      wgmma_plans += plan.kernel() == kernel_kind::wgmma;
      const conv2d_reduce_plan<float, Math> again(p, dev, opt);
      CHECK(again.description() == plan.description());
      CHECK(again.workspace_bytes() == plan.workspace_bytes());
      CHECK(again.config().seconds == plan.config().seconds);
    };
    for (const convred::device::plan_options& opt : {convred::device::plan_options{}, o}) {
      check(math::tf32{}, h132, opt, "tf32", "h100");
      check(math::bf16{}, h132, opt, "bf16", "h100");
      check(math::accurate{}, h132, opt, "accurate", "h100");
    }
    check(math::tf32{}, a108, {}, "tf32", "a100");
    check(math::bf16{}, h132_no_image, o, "bf16", "h100 without sm_90a code");
    check(math::accurate{}, h132_no_image, {}, "accurate", "h100 without sm_90a code");
    check(math::accurate{}, a108, {}, "accurate", "a100");
    check(math::bf16{}, none, {}, "bf16", "none");
  }
  MESSAGE(plans << " plans, " << refused << " of invalid layers, " << wgmma_plans << " on the wgmma kernel");
  CHECK(wgmma_plans > plans / 10);  // the draw reaches the Hopper families
  CHECK(refused > 0);               // and validate()'s limits
}
// Sizes at validate()'s limits (a review's reproducers, 2026-12-07): each once made plans whose sizes or
// estimates had overflowed (a packed filter of 2^63 bytes in a 0-byte workspace, negative work-unit counts
// and estimates, x's copy of 2^64 bytes reported as 0, C = 2^31 narrowed to a negative int32, a NaN
// estimate at N = 0) or ran the planner's searches for seconds. Now: validate()'s status, or a plan whose
// workspace holds its prepared bytes and whose estimate is finite and non-negative.
TEST_CASE("conv2d_reduce_plan: sizes at the limits give a named error or a plan whose sizes did not overflow" *
          doctest::timeout(30)) {
  struct row {
    std::int64_t v[14];  // N C H W K R S stride_h stride_w pad_h pad_w dil_h dil_w groups
    int splits, pass, tail;
    status want;  // success: any state but a served plan must be sane; else exactly this state
  };
  const std::int64_t big = std::int64_t(1) << 40;
  const row rows[] = {
      {{33, 2, 1, 2, 1073741823, 134217728, 2, 1, 1, 134217727, 0, 2, 1, 1}, 0, 0, 0, status::success},
      {{1, 2147483648, 8, 8, 134217728, 1, 1, 1, 1, 0, 0, 1, 1, 134217728}, 0, 0, 0, status::size_overflow},
      {{1073741824, 16384, 65536, 1, 1, 2, 1, 1, 1, 0, 0, 2, 1, 1}, 0, 0, 0, status::success},
      {{1073741824, 16384, 65536, 1, 1, 2, 1, 1, 1, 0, 0, 2, 1, 1}, -1, 0, 0, status::success},
      {{0, 1073741824, 536870912, 536870912, 128, 1, 1, 1, 1, 0, 0, 1, 1, 2}, 0, 0, 0, status::size_overflow},
      {{1024, 32, 1, 1, 64, 2, 2, 1, 1, 268435455, 268435455, 536870910, 536870910, 1}, 0, 0, 0, status::success},
      {{1, 3200, 1, 4, 64, 2, 1, 1, 1, 28384, 16382, 24000, 1, 1}, 0, 0, 0, status::success},
      {{1, 6400, 1, 4, 64, 2, 1, 1, 1, 28384, 16382, 24000, 1, 1}, 0, 0, 0, status::success},
      {{big, 32, 1, 1, 64, 3, 3, 1, 1, 268435455, 268435454, 268435455, 268435454, 1}, 0, 0, 0, status::success},
      {{33, 5610, 505, 379, 1073741823, 505, 379, 2, 2, 0, 0, 1, 1, 1}, 0, 0, 0, status::success},
      {{1, 48, 4, 4, 1, 1, 1, 1, 1, 536870909, 536870909, 1, 1, 1}, 3, 0, 0, status::success},
      {{1, 32, 4, 4, 2, 1, 1, 1, 1, 536870909, 536870909, 1, 1, 2}, -1, 2, 0, status::success},
      {{134217728, 16384, 4, 4, 1, 1, 1, 1, 1, 536870909, 0, 1, 1, 1}, 65535, 0, 0, status::success},
      {{8388608, 262144, 4, 4, 64, 1, 1, 1, 1, 536870909, 0, 1, 1, 1}, 0, 0, 1 << 30, status::success},
      {{33, 32, 536870912, 1, 64, 2, 1, 1, 1, 0, 0, 536870911, 1, 1}, 0, 0, 0, status::success},
      {{0, 32, 56, 56, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32}, 0, 0, 0, status::success},
      {{0, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 4}, 0, 0, 0, status::success},
  };
  device_info h132 = h100;
  h132.sm_count = 132;
  for (const row& r : rows) {
    conv2d_problem p;
    p.N = r.v[0], p.C = r.v[1], p.H = r.v[2], p.W = r.v[3], p.K = r.v[4], p.R = r.v[5], p.S = r.v[6];
    p.stride_h = r.v[7], p.stride_w = r.v[8], p.pad_h = r.v[9], p.pad_w = r.v[10], p.dil_h = r.v[11], p.dil_w = r.v[12];
    p.groups = r.v[13];
    convred::device::plan_options o;
    o.splits = r.splits, o.pass = static_cast<convred::device::wgmma_pass_mode>(r.pass), o.tail = r.tail;
    auto check = [&](auto math, const char* name) {
      using Math = decltype(math);
      const conv2d_reduce_plan<float, Math> plan(p, h132, o);
      INFO("N" << p.N << " C" << p.C << " " << p.H << "x" << p.W << " K" << p.K << " " << p.R << "x" << p.S
               << " groups " << p.groups << " splits " << o.splits << " tail " << o.tail << " " << name << ": "
               << plan.description());
      if (r.want != status::success) {
        CHECK(plan.state() == r.want);
        return;
      }
      if (plan.state() != status::success) {
        CHECK(plan.state() == convred::validate(p, sizeof(float)));
        return;
      }
      CHECK(std::isfinite(plan.config().seconds));
      CHECK(plan.config().seconds >= 0);
      CHECK(plan.workspace_bytes() >= plan.prepared_bytes());
      CHECK(plan.description().find("= -") == std::string::npos);  // no negative work-unit count
    };
    check(math::tf32{}, "tf32");
    check(math::bf16{}, "bf16");
    check(math::accurate{}, "accurate");
  }
}
// The size helpers behind the limits above, at their boundaries (each once wrapped or overflowed).
TEST_CASE("size helpers: checked products, overflowing workspaces, x's copy, residual dilations") {
  using convred::detail::product_below;
  CHECK(product_below({2, 3}, 7));
  CHECK(!product_below({2, 3}, 6));
  CHECK(product_below({0, std::int64_t(1) << 62, std::int64_t(1) << 62}, 1));  // (a zero factor: 0)
  CHECK(!product_below({std::int64_t(1) << 32, std::int64_t(1) << 32}, std::numeric_limits<std::int64_t>::max()));
  // pass states of 2^22 passes x 2^40 pixels x 8 bytes: -1, and no workspace (0) made of them
  conv2d_problem p;
  p.N = std::int64_t(1) << 20, p.C = 1, p.H = p.W = std::int64_t(1) << 10, p.K = std::int64_t(1) << 29;
  CHECK(convred::device::detail::pass_states_bytes(p, true) == -1);
  CHECK(convred::device::detail::pass_states_bytes(p, false) == 0);
  CHECK(convred::device::detail::packed_split_bytes(p, 4096, 0, 0, true) == 0);
  CHECK(convred::device::detail::packed_split_bytes(p, 4096, 0, 4) == 0);  // 4 x 2^40 x 2^29 x 4 bytes of sums
  p.K = 128;
  CHECK(convred::device::detail::pass_states_bytes(p, true) == (std::int64_t(1) << 43));
  // the direct tiles' copy of x (W % 4 != 0): 2^20 images of 2^14 x 2^16 x 4 floats fit 2^56 bytes, 2^30 do not
  using policy = conv2d_reduce_plan<float, math::tf32>::wgmma_policy_t;
  conv2d_problem d;
  d.N = std::int64_t(1) << 20, d.C = 16384, d.H = 65536, d.W = 1, d.K = 1, d.R = 2, d.dil_h = 2;
  convred::block::wgmma_conv_params k;
  std::size_t smem = 0;
  CHECK(convred::plan::wgmma_params<policy>::make_direct_params(d, 0, 200 * 1024, k, smem));
  CHECK(convred::plan::wgmma_params<policy>::xpack_bytes(k) == (std::size_t(1) << 54));
  d.N = std::int64_t(1) << 30;
  CHECK(!convred::plan::wgmma_params<policy>::make_direct_params(d, 0, 200 * 1024, k, smem));
  // space to batch's residual dilations: the divisors of g, ascending, as a loop over 1..g finds them
  using dil = convred::device::family::dilated<
      convred::device::family::wgmma<float, math::tf32, convred::device::family::wgmma_role::adapter>>;
  for (std::int64_t g = 1; g <= 2000; ++g) {
    std::vector<std::int64_t> naive;
    for (std::int64_t k2 = 1; k2 <= g; ++k2)
      if (g % k2 == 0) naive.push_back(k2);
    CHECK(dil::divisors(g) == naive);
  }
  CHECK(dil::divisors(536870911).size() == 8);  // 233 x 1103 x 2089
  // the adapters' workspaces: parts (each + 16 bytes of alignment) below 2^62 bytes
  using convred::device::family::workspace_fits;
  CHECK(workspace_fits({0x1p61, 0x1p60}));
  CHECK(!workspace_fits({0x1p61, 0x1p61}));
  CHECK(!workspace_fits({0x1p63}));
  CHECK(dil::divisors(std::int64_t(1) << 30).size() == 31);
}
}  // TEST_SUITE("host")
