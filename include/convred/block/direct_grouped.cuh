/// @file block/direct_grouped.cuh
/// @brief The grouped work of the tiled direct kernel (1 < C/groups <= direct_max_group_channels): one
/// channel group's share of a pipeline stage (direct_grouped_stage) or, unstaged, of the block's channels
/// (direct_grouped_unstaged), as work items (group, output channel) each summing its group's C/groups input
/// channels into one strip before bias, epilogue and the fold. Host and device (the host suite runs them
/// on patches staged on the host, exactly as the kernel does).
#pragma once

#include <cstdint>

#include "../functional.cuh"
#include "../numeric.cuh"
#include "conv_direct.cuh"
#include "conv_params.cuh"
#include "direct_tiling.cuh"

namespace convred::block {

/// @brief One channel group's share of a staged pipeline stage of a grouped problem (PyTorch's conv2d with
/// groups G, Cg = C/G > 1 input and Kg = K/G output channels per group, weights KCRS (K, Cg, R, S)).
///
/// The stage holds `channels` input channels from channel `first` on (whole groups: first and channels
/// are multiples of Cg, as make_direct_tiling's ch_per_split and the chooser's cb are), channel cl of the
/// stage at buf + cl * t.plane. Its work items are (u, kl) for each of its channels / Cg groups u and each
/// of the Kg output channels kl of the group, item f = u * Kg + kl; channel group g takes items g, g +
/// t.groups, ... For item (u, kl): output channel k = ((first + u * Cg) / Cg) * Kg + kl, and
///   acc[i][j] = sum over c in [0, Cg) (in that order) of the strip's taps of stage channel u * Cg + c
///   times w[k, c, :, :] (Strip::conv_taps, weights at w + (k * Cg + c) * R * S),
/// then state = op(state, make(e(acc + bias[k], k), k)) (Strip::fold). Each output channel's sum is exact
/// fp32 (fp64 for double) FMA over c, r, s; its fold happens once, in the channel group that owns the item
/// (the groups' states are combined later by direct_store_tile, so a group's output channels may be
/// folded by different channel groups).
/// @tparam Strip block::direct_strip<T, FR, FS> of the kernel variant
template <class Strip, class T, class Op, class Epilogue, class A>
__host__ __device__ void direct_grouped_stage(const T* buf, const direct_tiling& t, const conv_params<T>& prm, int first,
                                              int channels, int g, int ty, int tx, const Op& op, const Epilogue& epi,
                                              A (&state)[Strip::SH][Strip::SW]) {
  using V = typename Strip::V;
  const int cg = prm.Cg;
  const std::int64_t kg = prm.Kg, rs = std::int64_t(prm.R) * prm.S;
  const std::int64_t items = std::int64_t(channels / cg) * kg;
  const std::int64_t group0 = first / cg;  // the problem's group of the stage's first channel
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
  for (std::int64_t f = g; f < items; f += t.groups) {
    const std::int64_t u = f / kg, k = (group0 + u) * kg + (f - u * kg);
    const T* plane = buf + u * cg * t.plane;
    const T* wk = prm.w + k * cg * rs;
    V acc[Strip::SH][Strip::SW] = {};
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (int c = 0; c < cg; ++c) Strip::conv_taps(plane + c * t.plane, t, prm, ty, tx, wk + c * rs, acc);
    Strip::fold(op, epi, acc, prm.bias, k, state);
  }
}

/// @brief direct_grouped_stage without staging (the run-time variant's unstaged tilings,
/// direct_tiling::staged == 0): the items (u, kl) of all the groups of the block's input channels [b.c0,
/// b.c1) (whole groups), each summed over its Cg input channels read from x directly
/// (Strip::conv_global_taps), in the same order, then folded.
template <class Strip, class T, class Op, class Epilogue, class A>
__host__ __device__ void direct_grouped_unstaged(const direct_tiling& t, const direct_tile& b, const conv_params<T>& prm,
                                                 int g, int ty, int tx, const Op& op, const Epilogue& epi,
                                                 A (&state)[Strip::SH][Strip::SW]) {
  using V = typename Strip::V;
  const int cg = prm.Cg;
  const std::int64_t kg = prm.Kg, rs = std::int64_t(prm.R) * prm.S;
  const std::int64_t items = std::int64_t((b.c1 - b.c0) / cg) * kg;
  const std::int64_t group0 = b.c0 / cg;
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
  for (std::int64_t f = g; f < items; f += t.groups) {
    const std::int64_t u = f / kg, k = (group0 + u) * kg + (f - u * kg);
    const std::int64_t c0 = (group0 + u) * cg;
    const T* wk = prm.w + k * cg * rs;
    V acc[Strip::SH][Strip::SW] = {};
#ifdef __CUDA_ARCH__
#pragma unroll 1
#endif
    for (int c = 0; c < cg; ++c) Strip::conv_global_taps(t, b, prm, ty, tx, c0 + c, wk + c * rs, acc);
    Strip::fold(op, epi, acc, prm.bias, k, state);
  }
}

}  // namespace convred::block
