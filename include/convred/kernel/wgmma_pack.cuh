/// @file kernel/wgmma_pack.cuh
/// @brief The packing kernels of the Hopper packed-filter path: the filter into the wgmma kernel's
/// shared-memory image (once per filter), and x into the flat tiles' planes (each run of flat tiles).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "../block/conv_patch_loader.cuh"
#include "../block/wgmma_conv_params.cuh"
#include "../detail/pdl.cuh"
#include "../policy.cuh"
#include "../warp/mma.cuh"

namespace convred::kernel {

/// @brief Packs KCRS fp32 weights (K x Cg x R x S, Cg = C/groups input channels per output channel) into
/// the wgmma kernel's shared-memory image, one thread per packed element. Layout, in elements:
/// [pass][stage kt][part][tap r*S+s][n/8][c/E][n%8][c%E] with E = 16 / element bytes (one 16-byte
/// core-matrix row); pass = g * gpass + j is pass j of group g (gpass = ceil(Kg / 128) passes per group; a
/// dense filter is one group), n = output channel within the pass's 128 (channel g * Kg + j * 128 + n), c
/// = the group's input channel kt * block_c + (c within the stage's block_c); so each tap's 128 x block_c
/// slice is K-major no-swizzle core matrices (128 B each, 128 B apart along K, 256 B along N). Values: tf32
/// (round to nearest even), the 3xTF32 big / small parts (part 0 / 1), bf16 or fp16 (round to nearest
/// even); zero for channels past the group's Kg and past Cg. `nonfinite` (zeroed before the launch, or
/// null: not written) is set to 1 when some weight read is +-inf or NaN
/// (block::wgmma_conv_params::skips_dead_rows).
template <class Policy>
__global__ void pack_filter_kernel(const float* __restrict__ w, void* __restrict__ out, std::int32_t Kg, std::int32_t Cg,
                                   std::int32_t gpass, std::int32_t R, std::int32_t S, std::int64_t total,
                                   int* __restrict__ nonfinite) {
  constexpr int BC = Policy::block_c, E = 16 / Policy::filter_elem_bytes;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int taps = R * S;
  std::int64_t rest = i;
  const int ce = static_cast<int>(rest % E);
  rest /= E;
  const int n8 = static_cast<int>(rest % 8);
  rest /= 8;
  const int cb = static_cast<int>(rest % (BC / E));
  rest /= BC / E;
  const int ng = static_cast<int>(rest % 16);
  rest /= 16;
  const int tap = static_cast<int>(rest % taps);
  rest /= taps;
  const int part = static_cast<int>(rest % Policy::parts);
  rest /= Policy::parts;
  const std::int64_t kts = (Cg + BC - 1) / BC;  // stages per pass
  const std::int64_t kt = rest % kts, pass = rest / kts;
  const std::int64_t n = pass % gpass * 128 + ng * 8 + n8;  // within the group
  const std::int64_t c = kt * BC + cb * E + ce;
  const int r = tap / S, s = tap % S;
  const float v = (n < Kg && c < Cg) ? w[(((pass / gpass * Kg + n) * Cg + c) * R + r) * S + s] : 0.f;
  if (nonfinite) {  // one atomic per warp that read a non-finite weight (an all-NaN filter stays cheap)
    const unsigned active = __activemask(), bad = __ballot_sync(active, !isfinite(v));
    if (bad && static_cast<int>(threadIdx.x % 32) == __ffs(active) - 1) atomicOr(nonfinite, 1);
  }
  if constexpr (Policy::is_tf32) {
    std::uint32_t big, small;
    if constexpr (Policy::parts == 2)
      warp::split_tf32(v, big, small);  // 3xTF32 (safe for +-inf and NaN)
    else
      big = warp::to_tf32(v), small = 0;
    static_cast<std::uint32_t*>(out)[i] = part == 0 ? big : small;
  } else if constexpr (std::is_same_v<typename Policy::math, math::bf16>) {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  } else {
    static_cast<__half*>(out)[i] = __float2half_rn(v);
  }
}

/// @brief Packs x (NCHW fp32) for the flat tiles of the wgmma kernel (wgmma_conv_params::flat), one
/// thread per 16-byte plane pixel of the first part: for each flat tile t and stage s (kt of them), the
/// stage's planes as the kernel's shared memory holds them, one block of parts * part_bytes at (t * kt +
/// s) * parts * part_bytes: [part][plane jj < J = group * block_c / E][phase (a, b)][window pixel w <
/// phase_pixels], the entry holding input (n, stride * row + a - pad_h, stride * col + b - pad_w) of
/// channels (s * J + jj) * E .. + E - 1 (E = 16 / element bytes) for plane pixel o = t * block_m + w = (n *
/// flat_rows + row) * pw + col, converted to the math's operand type as
/// block::conv_patch_loader::pack_entry (tf32 round to nearest even, the 3xTF32 big part 0 / small part 1,
/// bf16 or fp16 pairs); zero outside x, for channels >= C and past the last image. The windows of
/// consecutive tiles overlap by the taps' reach (those pixels are packed twice). Consecutive threads take
/// consecutive window pixels (coalesced stores, loads `stride` elements apart). Grid: x = the (tile,
/// stage) block t * kt + s (tiles * kt of them), y = ceil(part_bytes / 16 / blockDim.x) chunks of its first
/// part's entries.
template <class Policy>
__global__ void pack_x_kernel(const float* __restrict__ x, void* __restrict__ out, const block::wgmma_conv_params k) {
  using loader = block::conv_patch_loader<Policy>;
  constexpr int E = 16 / Policy::filter_elem_bytes, W = Policy::parts == 2 ? 8 : 4;
  convred::detail::launch_dependent_grids();  // the main kernel's set-up overlaps this pass (PDL)
  const std::int32_t per = k.part_bytes / 16;  // entries of one part of a (tile, stage) block
  const std::int32_t rem = static_cast<std::int32_t>(blockIdx.y * blockDim.x + threadIdx.x);
  if (rem >= per) return;
  const int phases = k.phases_h * k.phases_w;
  const std::int32_t blk = static_cast<std::int32_t>(blockIdx.x);  // t * kt + s
  const std::int32_t w = rem % k.phase_pixels, pj = rem / k.phase_pixels;
  const int phase = pj % phases, jj = pj / phases;
  const std::int32_t t = blk / k.x_stages(), stage = blk - t * k.x_stages();
  const std::int32_t o = t * Policy::block_m + w;  // < flat_pixels < 2^31
  std::int32_t n, r, row, col;
  k.div_image.divmod(o, n, r);
  k.div_pw.divmod(r, row, col);
  const int h = k.stride * row + phase / k.phases_w - k.pad_h, wc = k.stride * col + phase % k.phases_w - k.pad_w;
  const bool in = n < k.N && h >= 0 && h < k.H && wc >= 0 && wc < k.W;
  const std::int64_t c0 = (static_cast<std::int64_t>(stage) * (k.part_bytes / k.plane_bytes) + jj) * E,
                     plane = static_cast<std::int64_t>(k.H) * k.W;
  const float* src = x + ((n * static_cast<std::int64_t>(k.C) + c0) * k.H + h) * k.W + wc;
  float f[E];
#pragma unroll
  for (int e = 0; e < E; ++e) f[e] = in && c0 + e < k.C ? src[e * plane] : 0.f;
  std::uint32_t wd[W];
  loader::template pack_entry<W>(f, wd);
  uint4* dst = static_cast<uint4*>(out) + static_cast<std::int64_t>(blk) * Policy::parts * per + rem;
  *dst = make_uint4(wd[0], wd[1], wd[2], wd[3]);
  if constexpr (W == 8) dst[per] = make_uint4(wd[4], wd[5], wd[6], wd[7]);  // the small parts: part 1
}

/// @brief Copies x (NCHW fp32) for the tf32 and 3xTF32 dilated direct tiles where W % 4 != 0
/// (wgmma_conv_params::direct_taps; plan::wgmma_params::x_copied: TMA row strides are 16-byte multiples) into
/// rows of k.x_pitch floats (W rounded up to 4; `out` 16-byte aligned): row r = (n C + c) H + h of the copy
/// holds x's row r, then zeros. Each thread stores 16 bytes (4 floats of one row) per step, loading them as
/// floats (x itself may be only 4-byte aligned), threads striding over the N C H x_pitch / 4 quads: 2.77
/// TB/s on the H100 over x read and the copy written, against 1.48 TB/s for cudaMemcpy2DAsync's rows of W
/// floats (bench/NOTES.md, session 30). Calls launch_dependent_grids first: the wgmma kernel, launched after
/// it with PDL, reads the copy only after its wait_prior_grids. (T is float; a template, so that the header
/// defines it in every translation unit.)
template <class T>
__global__ void pitch_x_kernel(const T* __restrict__ x, float4* __restrict__ out, const block::wgmma_conv_params k) {
  static_assert(std::is_same_v<T, float>, "pitch_x_kernel: x is fp32");
  convred::detail::launch_dependent_grids();  // the main kernel's set-up overlaps this pass (PDL)
  const std::int64_t quads = k.x_pitch / 4, n = std::int64_t(k.N) * k.C * k.H * quads;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n; i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / quads;
    const std::int32_t w = static_cast<std::int32_t>(i - r * quads) * 4;
    const T* s = x + r * k.W + w;
    out[i] = make_float4(s[0], w + 1 < k.W ? s[1] : 0.f, w + 2 < k.W ? s[2] : 0.f, w + 3 < k.W ? s[3] : 0.f);
  }
}

/// @brief Copies x (NCHW fp32) for the bf16 / fp16 dilated direct tiles (wgmma_conv_params::direct_taps under
/// a 16-bit policy; plan::wgmma_params::x_copied) as pairs of channels: entry (n, c2, h, w) of `out`, rows of
/// k.x_pitch 32-bit entries ([n][c2][h][x_pitch], c2 < ceil(C / 2)), holds channels 2 c2 (low half) and
/// 2 c2 + 1 (high half, zero past C) of x at (n, h, w), rounded to Math's type (round to nearest even, as
/// pack_x_kernel and the row tiles' planes; fp16 overflows to +-inf as they do). Columns w >= W are not
/// written: the tensor map's rows are W wide, so TMA never reads them. The wgmma kernel's consumers load a
/// box entry as the A fragment register of the k16 step's K indices 2 c2 and 2 c2 + 1
/// (block::conv_mainloop_wgmma_direct::direct_step). Block (32, 8): a warp takes 32 consecutive columns of one
/// row (coalesced loads and stores, no division), the block 8 rows at a time of one (n, c2) plane, blocks
/// striding over the N ceil(C / 2) planes. Calls launch_dependent_grids first: the wgmma kernel, launched
/// after it with PDL, reads the copy only after its wait_prior_grids.
template <class Math>
__global__ void pack_x_pairs_kernel(const float* __restrict__ x, std::uint32_t* __restrict__ out, const block::wgmma_conv_params k) {
  convred::detail::launch_dependent_grids();  // the main kernel's set-up overlaps this pass (PDL)
  const std::int64_t pairs = (k.C + 1) / 2, planes = k.N * pairs, hw = std::int64_t(k.H) * k.W;
  for (std::int64_t q = blockIdx.x; q < planes; q += gridDim.x) {
    const std::int64_t n = q / pairs, c = 2 * (q % pairs);
    const float* lo = x + (n * k.C + c) * hw;
    const bool has_hi = c + 1 < k.C;
    std::uint32_t* dst = out + q * k.H * std::int64_t(k.x_pitch);
    for (std::int32_t h = static_cast<std::int32_t>(threadIdx.y); h < k.H; h += static_cast<std::int32_t>(blockDim.y))
      for (std::int32_t w = static_cast<std::int32_t>(threadIdx.x); w < k.W; w += static_cast<std::int32_t>(blockDim.x)) {
        const std::int64_t i = std::int64_t(h) * k.W + w;
        const float a = lo[i], b = has_hi ? lo[hw + i] : 0.f;
        std::uint32_t e;
        if constexpr (std::is_same_v<Math, math::bf16>)
          e = warp::pack_bf16x2(a, b);
        else
          e = warp::pack_f16x2(a, b);
        dst[std::int64_t(h) * k.x_pitch + w] = e;
      }
  }
}

}  // namespace convred::kernel
