// Host suite of the split path (no GPU needed): the heuristic device::choose_k_splits, the workspace size,
// the planner's choice for devices described by device_info (with an SM count) on small-batch and deep
// layers and on large ones, and device::conv2d_reduce_split's refusals of bad input, which come before any
// CUDA call (fake, aligned pointers, never dereferenced).
#include <doctest/doctest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/device/conv2d_reduce_split.cuh>

#include "instances.cuh"

namespace {

using convred::conv2d_problem;
using convred::layout;
using convred::status;
using convred::device::choose_k_splits;
using convred::device::conv2d_reduce_plan;
using convred::device::conv2d_reduce_split_workspace_bytes;
using convred::device::device_info;
using convred::device::kernel_kind;
using convred::device::split_channel_tiles;
namespace math = convred::math;
namespace op = convred::op;

using tf32_policy = convred::default_mma_sync_policy<math::tf32>::type;      // 256 x 128 x 32
using tf32x3_policy = convred::default_mma_sync_policy<math::tf32x3>::type;  // 128 x 128 x 32
using simt_policy = convred::default_simt_policy<float>::type;                // 256 x 128 x 8

conv2d_problem conv(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K, std::int64_t R,
                    std::int64_t pad, std::int64_t stride = 1, layout lay = layout::nchw) {
  conv2d_problem p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = p.S = R;
  p.pad_h = p.pad_w = pad, p.stride_h = p.stride_w = stride, p.x_layout = lay;
  return p;
}

// The layers of the problem statement (H200 times of the fused mma.sync kernel: 0.4 to 3.5 ms)
const conv2d_problem layer4_b32 = conv(32, 512, 7, 7, 512, 3, 1);  // ResNet-50 layer4 3x3: M = 1568
const conv2d_problem layer4_b1 = conv(1, 512, 7, 7, 512, 3, 1);    // M = 49
const conv2d_problem unet = conv(1, 512, 32, 32, 1024, 3, 1);      // U-Net bottleneck: M = 1024
const conv2d_problem layer3_b1 = conv(1, 256, 14, 14, 256, 3, 1);  // M = 196
const conv2d_problem proj_s2 = conv(1, 512, 28, 28, 1024, 1, 0, 2);  // 1x1 stride 2: M = 196, GEMM_K = 512
const conv2d_problem seed = conv(64, 64, 256, 256, 128, 3, 0);      // M = 4.1 M: never split

// devices with an SM count (H200: 132 SMs; A100: 108)
const device_info h200{9, 0, true, 132};
const device_info h200_no_image{9, 0, false, 132};
const device_info a100{8, 0, false, 108};
const device_info a100_132{8, 0, false, 132};
const device_info unknown_sms{8, 0, false};  // sm_count 0: never split

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("host") {
TEST_CASE("split: workspace size and channel tiles") {
  // k_splits * N*P*Q * K * 4 bytes for float, __half and bf16; 8 for double
  CHECK(conv2d_reduce_split_workspace_bytes<float>(layer4_b1, 1) == 49u * 512u * 4u);
  CHECK(conv2d_reduce_split_workspace_bytes<float>(layer4_b1, 36) == 36u * 49u * 512u * 4u);
  CHECK(conv2d_reduce_split_workspace_bytes<__half>(layer4_b1, 3) == 3u * 49u * 512u * 4u);
  CHECK(conv2d_reduce_split_workspace_bytes<__nv_bfloat16>(unet, 2) == 2u * 1024u * 1024u * 4u);
  CHECK(conv2d_reduce_split_workspace_bytes<double>(layer4_b32, 5) == 5u * 1568u * 512u * 8u);
  // nothing to run, or arguments conv2d_reduce_split refuses: 0
  conv2d_problem empty = layer4_b1, bad = layer4_b1;
  empty.N = 0, bad.groups = 3;
  CHECK(conv2d_reduce_split_workspace_bytes<float>(empty, 4) == 0u);
  CHECK(conv2d_reduce_split_workspace_bytes<float>(bad, 4) == 0u);
  CHECK(conv2d_reduce_split_workspace_bytes<float>(layer4_b1, 0) == 0u);
  CHECK(conv2d_reduce_split_workspace_bytes<float>(layer4_b1, convred::device::max_k_splits + 1) == 0u);
  CHECK(conv2d_reduce_split_workspace_bytes<float>(layer4_b1, convred::device::max_k_splits) ==
        std::size_t(convred::device::max_k_splits) * 49u * 512u * 4u);
  // groups * ceil((K/groups) / BlockN): a tile never spans two groups
  CHECK(split_channel_tiles<tf32_policy>(layer4_b1) == 4);
  CHECK(split_channel_tiles<tf32_policy>(unet) == 8);
  conv2d_problem g = layer4_b1;
  g.K = 130, g.groups = 2;  // 65 channels per group: one tile each
  CHECK(split_channel_tiles<tf32_policy>(g) == 2);
  g.K = 514;  // 257 per group: three tiles each
  CHECK(split_channel_tiles<tf32_policy>(g) == 6);
  CHECK(split_channel_tiles<convred::default_simt_policy<double>::type, double>(layer4_b1) == 8);  // 64-channel tiles
  CHECK(split_channel_tiles<tf32_policy>(bad) == 0);
}

TEST_CASE("split: choose_k_splits, whole waves of resident blocks, bounded workspace") {
  // The default policies keep one block per SM resident: whole waves of at most 132 blocks.
  // ResNet-50 layer4 at batch 32: 7 pixel tiles x 4 channel tiles x 4 splits = 112 blocks, one round of
  // 36 of the 144 slices (session 7's rule: 10 splits, 280 blocks, three rounds of 15)
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b32, 132) == 4);
  // at batch 1: 4 x 29 = 116 blocks, one round of 5 slices (was 36 splits: 144 blocks, two rounds of 4)
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 132) == 29);
  // U-Net bottleneck: 4 x 8 tiles x 4 = 128 blocks on 132 SMs; x 3 = 96 on 108
  CHECK(choose_k_splits<tf32_policy, float>(unet, 132) == 4);
  CHECK(choose_k_splits<tf32_policy, float>(unet, 108) == 3);
  // ResNet layer3 at batch 1: 1 x 2 tiles x 24 = 48 blocks of 3 slices; 36 splits (72 blocks of 2 slices)
  // save 1 slice time (2.7 us) but move 2.4 MB more partial sums (3.2 us at plan_mma_partial_bytes_per_s)
  CHECK(choose_k_splits<tf32_policy, float>(layer3_b1, 132) == 24);
  // 1x1 stride 2: GEMM_K = 512 is 16 slices: 8 channel tiles x 8 splits of 2
  CHECK(choose_k_splits<tf32_policy, float>(proj_s2, 132) == 8);
  // 3xTF32's 128-pixel tiles: layer4 at batch 32 is 13 x 4 tiles: 5 splits, two rounds of 29 slices beat
  // one round of 72 (2 splits)
  CHECK(choose_k_splits<tf32x3_policy, float>(layer4_b32, 132) == 5);
  // the SIMT policy's 8-deep slices: 4 x 32 = 128 blocks of 18 of the 576 slices
  CHECK(choose_k_splits<simt_policy, float>(layer4_b1, 132) == 32);
  // the workspace bound: at most max_workspace / (M * K * 4) splits
  const std::size_t plane = conv2d_reduce_split_workspace_bytes<float>(layer4_b1, 1);
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 132, 4 * plane) == 4);
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 132, 4 * plane + plane / 2) == 4);
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 132, plane) == 1);  // channel tiles alone still spread
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 132, plane - 1) == 0);
  // 100 pixel tiles of 1024 channels: 100 MiB per split, above the 64 MiB default: the fused kernel
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 256, 160, 160, 1024, 3, 1), 132) == 0);
  // no split: unknown SM count, as many pixel tiles as SMs, nothing to spread, empty or invalid problems
  CHECK(choose_k_splits<tf32_policy, float>(layer4_b1, 0) == 0);
  CHECK(choose_k_splits<tf32_policy, float>(seed, 132) == 0);
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 256, 132 * 16, 16, 256, 1, 0), 132) == 0);  // 132 pixel tiles
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 256, 66 * 16, 16, 256, 1, 0), 132) == 0);  // 66: half the SMs
  // 65 pixel tiles, 2 channel tiles: one split (130 blocks, one round of 8 slices) saves 8 slice times
  // (22 us) over the fused kernel (65 blocks, 2 x 8 slices each), but its 17 MB of partial sums, written
  // and read, and the fixup cost more (26 us): the fused kernel
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 256, 65 * 16, 16, 256, 1, 0), 132) == 0);
  // the same with 512 input channels (16 slices): the split saves 16 slice times (43 us) for the same
  // partial sums: one split
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 512, 65 * 16, 16, 256, 1, 0), 132) == 1);
  // 1 tile, 2 slices: 2 splits would save one slice time, less than the fixup's launch
  CHECK(choose_k_splits<tf32_policy, float>(conv(1, 4, 8, 8, 8, 3, 1), 132) == 0);
  conv2d_problem empty = layer4_b1, bad = layer4_b1;
  empty.N = 0, bad.stride_h = 0;
  CHECK(choose_k_splits<tf32_policy, float>(empty, 132) == 0);
  CHECK(choose_k_splits<tf32_policy, float>(bad, 132) == 0);
}

TEST_CASE("conv2d_reduce_plan: small-M layers split on the mma.sync and SIMT kernels, large ones do not") {
  {
    // W = 7 (not a multiple of 4): the wgmma kernel's gathering row tiles in partial mode on the H200 (the
    // mma.sync split, 26.3 us, ran behind its 18.8 us: bench/NOTES.md, session 13)
    conv2d_reduce_plan<float, math::tf32> plan(layer4_b1, h200);
    CAPTURE(plan.description());
    CHECK(plan.state() == status::success);
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.k_splits() == 32);
    CHECK(has(plan.description(), "x gathered (stride 1)"));
    CHECK(has(plan.description(), "split into 32 GEMM_K ranges (1 tile x 4 channel passes x 32 = 128 work units"));
    // the packed filter (4 passes x 64 stages x 9 taps x 128 x 8 x 4 bytes, the 256-byte flag word), then 32 x
    // 49 x 512 partial sums
    CHECK(plan.workspace_bytes() == 4u * 64u * 9u * 128u * 8u * 4u + 256u + 32u * 49u * 512u * 4u);
    conv2d_reduce_plan<float, math::tf32> moved(std::move(plan));
    CHECK(moved.k_splits() == 32);
    CHECK(moved.workspace_bytes() == 12648704u);
  }
  {
    conv2d_reduce_plan<float, math::tf32> plan(layer4_b32, a100_132);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(plan.k_splits() == 4);
    CHECK(plan.workspace_bytes() == conv2d_reduce_split_workspace_bytes<float>(layer4_b32, 4));
    CHECK(has(plan.description(), "7 pixel tiles for 132 SMs"));
  }
  {
    // math::accurate: tf32x3; on the H200 the wgmma kernel on flat tiles (4 7 x 7 images per tile, in 8 x 8
    // plane pixels each) split into 4 GEMM_K ranges; on the A100 the mma.sync policy (128-pixel tiles) split
    conv2d_reduce_plan<float> plan(layer4_b32, h200);
    CAPTURE(plan.description());
    CHECK(plan.kernel() == kernel_kind::wgmma);
    CHECK(plan.k_splits() == 4);
    CHECK(has(plan.description(), "wgmma tf32x3 (sm_90a"));
    CHECK(has(plan.description(), "flat 256-pixel tiles over x packed (8x8 pixels per image"));
    CHECK(has(plan.description(), "math::accurate"));
    conv2d_reduce_plan<float> ampere(layer4_b1, a100);
    CHECK(ampere.kernel() == kernel_kind::mma_sync);
    CHECK(ampere.k_splits() == 24);  // 4 x 24 = 96 blocks of 128 pixels on 108 SMs
    CHECK(has(ampere.description(), "for 108 SMs"));
  }
  {
    // U-Net bottleneck (A100: the wgmma kernel is not there); NHWC on the H200 (the wgmma kernel takes NCHW)
    conv2d_reduce_plan<float, math::bf16> plan(unet, a100);
    CHECK(plan.kernel() == kernel_kind::mma_sync);
    CHECK(plan.k_splits() == 3);
    CHECK(plan.workspace_bytes() == 3u * 1024u * 1024u * 4u);
    conv2d_problem unet_nhwc = unet;
    unet_nhwc.x_layout = layout::nhwc;
    conv2d_reduce_plan<__nv_bfloat16, math::bf16> nhwc(unet_nhwc, h200);
    CAPTURE(nhwc.description());
    CHECK(nhwc.kernel() == kernel_kind::mma_sync);
    CHECK(nhwc.k_splits() == 4);
    CHECK(has(nhwc.description(), "mma.sync bf16 split 8 channel tiles x 4 GEMM_K splits"));
  }
  {
    // the 1x1 stride-2 projection at batch 1: on the H200 the wgmma kernel's direct tiles in partial mode
    // (the mma.sync split measured 21.5 us against 18.3 for flat tiles, session 13; direct tiles over 8
    // ranges 16.3, session 17: bench/NOTES.md), elsewhere the mma.sync split; and layer3 (W = 14)
    conv2d_reduce_plan<float, math::tf32> s2(proj_s2, h200);
    CAPTURE(s2.description());
    CHECK(s2.kernel() == kernel_kind::wgmma);
    CHECK(s2.k_splits() == 8);
    CHECK(has(s2.description(), "14x14-pixel tiles with x read straight from NCHW"));
    CHECK(has(s2.description(), "split into 8 GEMM_K ranges"));
    conv2d_reduce_plan<float, math::tf32> s2_ampere(proj_s2, a100_132);
    CHECK(s2_ampere.kernel() == kernel_kind::mma_sync);
    CHECK(s2_ampere.k_splits() == 8);
    CHECK(has(s2_ampere.description(), "split 8 channel tiles x 8 GEMM_K splits"));
    conv2d_reduce_plan<float, math::tf32> l3(layer3_b1, h200_no_image);
    CHECK(l3.k_splits() == 24);
    CHECK(l3.workspace_bytes() == 24u * 196u * 256u * 4u);
  }
  {
    // the SIMT kernel splits too: math::ieee, and double data under math::accurate
    conv2d_reduce_plan<float, math::ieee> ieee(layer4_b1, h200);
    CAPTURE(ieee.description());
    CHECK(ieee.kernel() == kernel_kind::simt);
    CHECK(ieee.k_splits() == 32);
    CHECK(has(ieee.description(), "simt ieee split 4 channel tiles x 32 GEMM_K splits (exact fp32 FMA, 256-pixel x "
                                  "128-channel tiles; 1 pixel tile for 132 SMs"));
    CHECK(has(ieee.description(), ": math::ieee"));
    // 64 x 64 tiles: 8 channel tiles, 216 blocks resident on 108 SMs (2 per SM), 576 slices: 27 splits fill
    // them, but with 8-byte partial sums 24 (192 blocks of 24 slices) is estimated faster: 2 more slice
    // times (24 against ceil(576 / 27) = 22: 0.5 us) against 0.8 us less of partial sums
    conv2d_reduce_plan<double> dbl(layer4_b1, a100);
    CAPTURE(dbl.description());
    CHECK(dbl.kernel() == kernel_kind::simt);
    CHECK(dbl.k_splits() == 24);
    CHECK(dbl.workspace_bytes() == 24u * 49u * 512u * 8u);
    CHECK(has(dbl.description(), "exact fp64 FMA"));
  }
  {
    // large layers, an unknown SM count, the wgmma kernel and depthwise layers: never split
    conv2d_reduce_plan<float, math::tf32> big(seed, a100);
    CHECK(big.kernel() == kernel_kind::mma_sync);
    CHECK(big.k_splits() == 0);
    CHECK(big.workspace_bytes() == 0u);
    CHECK(!has(big.description(), "split"));
    CHECK(has(big.description(), "mma.sync tf32 (256-pixel x 128-channel tiles): the wgmma kernel"));
    conv2d_reduce_plan<float, math::ieee> big_simt(seed, h200);
    CHECK(big_simt.k_splits() == 0);
    CHECK(has(big_simt.description(), "simt ieee (exact fp32 FMA, 256-pixel x 128-channel tiles): math::ieee"));
    conv2d_reduce_plan<float, math::tf32> unknown(layer4_b1, unknown_sms);
    CHECK(unknown.kernel() == kernel_kind::mma_sync);
    CHECK(unknown.k_splits() == 0);
    CHECK(unknown.workspace_bytes() == 0u);
    conv2d_reduce_plan<float, math::tf32> wgmma(seed, h200);
    CHECK(wgmma.kernel() == kernel_kind::wgmma);
    CHECK(wgmma.k_splits() == 0);
    conv2d_problem dw = layer4_b1;
    dw.groups = dw.C;
    conv2d_reduce_plan<float> direct(dw, h200);
    CHECK(direct.kernel() == kernel_kind::direct);
    CHECK(direct.k_splits() == 0);
    CHECK(direct.workspace_bytes() == 0u);
  }
  CHECK(device_info{}.sm_count == 0);
}

TEST_CASE("device::conv2d_reduce_split: bad input is refused before any CUDA call") {
  using namespace convred;
  auto fake_f = [](std::uintptr_t a) { return reinterpret_cast<float*>(a); };
  const float* X = fake_f(0x100000);
  const float* Wt = fake_f(0x200000);
  const float* B = fake_f(0x300000);
  float* Y = fake_f(0x400000);
  auto* I = reinterpret_cast<std::int64_t*>(0x500000);
  void* ws = reinterpret_cast<void*>(0x1000000);
  conv2d_problem p;
  p.N = 2, p.C = 4, p.H = 9, p.W = 9, p.K = 8, p.R = 3, p.S = 3;
  const std::size_t need = conv2d_reduce_split_workspace_bytes<float>(p, 3);  // 3 * 98 * 8 * 4
  REQUIRE(need == 3u * 98u * 8u * 4u);
  using pol = default_policy_for<math::tf32>;
  auto split = [&](const conv2d_problem& q, const float* x, const float* w, const float* b, float* y, std::int64_t* idx,
                   void* work, std::size_t bytes, int ks) {
    return device::conv2d_reduce_split<pol>(q, x, w, b, y, idx, work, bytes, ks, op::argmin{});
  };
  conv2d_problem q = p;
  q.C = 0;
  CHECK(split(q, X, Wt, B, Y, I, ws, need, 3) == status::invalid_shape);
  q = p, q.groups = 3;
  CHECK(split(q, X, Wt, B, Y, I, ws, need, 3) == status::invalid_groups);
  CHECK(device::conv2d_reduce_split<pol>(p, X, Wt, B, Y, I, ws, need, 3, op::min{}) == status::indices_not_supported);
  CHECK(split(p, X, Wt, B, Y, I, ws, need, 0) == status::invalid_argument);
  CHECK(split(p, X, Wt, B, Y, I, ws, need, -2) == status::invalid_argument);
  CHECK(split(p, X, Wt, B, Y, I, ws, need, device::max_k_splits + 1) == status::invalid_argument);
  CHECK(split(p, nullptr, Wt, B, Y, I, ws, need, 3) == status::null_pointer);
  CHECK(split(p, X, nullptr, B, Y, I, ws, need, 3) == status::null_pointer);
  CHECK(split(p, X, Wt, B, nullptr, nullptr, ws, need, 3) == status::null_pointer);
  CHECK(split(p, X, Wt, B, Y, I, nullptr, need, 3) == status::null_pointer);
  CHECK(split(p, X, Wt, B, Y, I, ws, need - 1, 3) == status::workspace_too_small);
  CHECK(split(p, X, Wt, B, Y, I, ws, 0, 3) == status::workspace_too_small);
  CHECK(split(p, X, Wt, B, Y, I, reinterpret_cast<void*>(0x1000002), need, 3) == status::misaligned_pointer);
  CHECK(split(p, fake_f(0x100002), Wt, B, Y, I, ws, need, 3) == status::misaligned_pointer);
  // the workspace is written: it must not overlap x, w, bias, y or indices (its used part: `need` bytes)
  CHECK(split(p, X, Wt, B, Y, I, fake_f(0x100000 + 64), need, 3) == status::overlapping_buffers);  // in x
  CHECK(split(p, X, Wt, B, Y, I, fake_f(0x200000 - 64), need, 3) == status::overlapping_buffers);  // runs into w
  CHECK(split(p, X, Wt, B, Y, I, fake_f(0x300000), need, 3) == status::overlapping_buffers);       // over bias
  CHECK(split(p, X, Wt, B, Y, I, fake_f(0x400000 + 16), need, 3) == status::overlapping_buffers);  // over y
  CHECK(split(p, X, Wt, B, Y, I, fake_f(0x500000 - 256), need, 3) == status::overlapping_buffers);  // into indices
  CHECK(split(p, X, Wt, B, fake_f(0x100000), I, ws, need, 3) == status::overlapping_buffers);      // y over x
  conv2d_problem empty = p;
  empty.N = 0;
  CHECK(split(empty, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 3) == status::success);  // no work
  CHECK(split(empty, X, Wt, B, Y, I, ws, need, 0) == status::invalid_argument);  // k_splits checked first
}
}  // TEST_SUITE("host")
