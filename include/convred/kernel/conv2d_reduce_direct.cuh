/// @file kernel/conv2d_reduce_direct.cuh
/// @brief Thin __global__ kernel of the tiled direct convolution for C/groups <= 16 (depthwise and narrow
/// grouped convolutions): fused conv2d -> epilogue -> channel reduction in exact FMA
/// (device::conv2d_reduce_direct launches it).
#pragma once

#include <cstdint>

#include "../block/conv_direct.cuh"
#include "../block/conv_params.cuh"
#include "../block/direct_grouped.cuh"
#include "../block/direct_patch_stager.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"

namespace convred::kernel {

/// Most threads per block of conv2d_reduce_direct_kernel (the host's tilings stay at or below it).
inline constexpr int direct_max_threads = 256;

/// Blocks per SM the direct kernel's launch bounds ask ptxas to allow: 2 for fp32 compute (at most 128
/// registers per thread), 1 for double (its weights in registers take twice the space).
template <class T>
inline constexpr int direct_min_blocks = sizeof(compute_t<T>) == 8 ? 1 : 2;

/// @brief Fused conv2d -> epilogue -> channel reduction for problems with C/groups <=
/// block::direct_max_group_channels (depthwise with any channel multiplier K/groups; grouped with C/groups
/// > 1, any K/groups), tiled direct convolution in exact FMA (device::conv2d_reduce_direct
/// builds the tiling t and launches it: t.blocks() blocks of t.threads threads, t.smem_bytes of dynamic
/// shared memory, clusters of t.splits blocks when > 1).
///
/// Block b owns a tile of t.tile_h x t.tile_w output pixels of one image and the input channels [c0, c1)
/// of its split (block::direct_tile_at); thread tid is pixel thread (ty, tx) of channel group g (tid = g *
/// pixel_threads + ty * tx_count + tx). block::direct_patch_stager writes the padding once and pipelines
/// the channels' patches through shared memory, t.cb channels per stage; group g computes the stage's
/// channels g, g + groups, ...: for each of their K/groups output channels k, its strip of SH x SW pixels
/// (block::direct_strip::conv: the channel's weights in registers, each input row read once) and folds
/// bias + epilogue into the pixels' reduction states (direct_strip::fold). With C/groups > 1 a stage holds
/// whole groups and group g takes the stage's work items (group, output channel) g, g + groups, ...: each
/// sums its group's C/groups staged channels into one strip, then folds it once
/// (block::direct_grouped_stage; unstaged: block::direct_grouped_unstaged). The states stay in registers
/// until block::direct_store_tile combines the groups in group order and the tile's splits in rank order
/// and writes y (and the int64 index) once per pixel. FR, FS: the filter size the taps are unrolled for
/// (3x3, 5x5, 7x7 with dilation 1 at stride ST), or 0, 0 for any filter, stride and dilation at run time;
/// that variant also runs unstaged tilings (t.staged == 0: patches too large for shared memory), reading
/// x directly (block::direct_strip::conv_global). Grouped: the variant for C/groups > 1 (its own
/// instantiation, so that the depthwise variants' registers stay as they were); false for C/groups == 1.
/// ST: the stride the unrolled variants are built for, 1 or 2 in both directions (its own instantiation,
/// so that the stride-1 variants' code and registers stay as they were); 1 for the run-time variant.
template <class T, class Op, class Epilogue, int FR, int FS, bool Grouped = false, int ST = 1>
__global__ void __launch_bounds__(direct_max_threads, direct_min_blocks<T>)
    conv2d_reduce_direct_kernel(const __grid_constant__ block::conv_params<T> prm,
                                const __grid_constant__ block::direct_tiling t, Op op, Epilogue epi, T* y,
                                std::int64_t* indices) {
  using strip = block::direct_strip<T, FR, FS, ST>;
  using V = typename strip::V;
  using accum_t = typename Op::template accum_t<V>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  std::int32_t g, pt, ty, tx;
  t.div_pt.divmod(static_cast<std::int32_t>(threadIdx.x), g, pt);
  t.div_tx.divmod(pt, ty, tx);
  const block::direct_tile b = block::direct_tile_at(t, prm, blockIdx.x);
  accum_t state[strip::SH][strip::SW];
#pragma unroll
  for (int i = 0; i < strip::SH; ++i)
#pragma unroll
    for (int j = 0; j < strip::SW; ++j) state[i][j] = Op::template identity<V>();
  const std::int64_t kg = prm.Kg;
  if constexpr (!strip::unrolled) {
    if (!t.staged) {  // patches too large for any buffer: read x directly
      if constexpr (Grouped) {
        block::direct_grouped_unstaged<strip>(t, b, prm, g, ty, tx, op, epi, state);
      } else {
#pragma unroll 1
        for (std::int64_t c = b.c0 + g; c < b.c1; c += t.groups)
#pragma unroll 1
          for (std::int64_t k = c * kg; k < (c + 1) * kg; ++k) {
            V acc[strip::SH][strip::SW] = {};
            strip::conv_global(t, b, prm, ty, tx, k, acc);
            strip::fold(op, epi, acc, prm.bias, k, state);
          }
      }
      block::direct_store_tile<Op, V>(t, b, prm, op, state, g, ty, tx, smem_raw, y, indices);
      return;
    }
  }
  block::direct_patch_stager<T> st(prm, t, b, reinterpret_cast<T*>(smem_raw), static_cast<int>(threadIdx.x));
  st.zero_fill();
  __syncthreads();
  const int stages = st.stage_count();
  st.prologue();
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    st.land(s);
    __syncthreads();
    st.issue(s + st.stages - 1);
    const T* buf = st.buffer(s);
    const int first = st.stage_first(s), channels = st.stage_channels(s);
    if constexpr (Grouped) {  // whole groups per stage, items (group, output channel)
      block::direct_grouped_stage<strip>(buf, t, prm, first, channels, g, ty, tx, op, epi, state);
    } else {
#pragma unroll 1
      for (int cl = g; cl < channels; cl += t.groups) {
        const std::int64_t k0 = (first + cl) * kg;
#pragma unroll 1
        for (std::int64_t k = k0; k < k0 + kg; ++k) {
          V acc[strip::SH][strip::SW] = {};
          strip::conv(buf + cl * t.plane, t, prm, ty, tx, k, acc);
          strip::fold(op, epi, acc, prm.bias, k, state);
        }
      }
    }
  }
  st.drain();
  block::direct_store_tile<Op, V>(t, b, prm, op, state, g, ty, tx, smem_raw, y, indices);
}

}  // namespace convred::kernel
