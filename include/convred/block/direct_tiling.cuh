/// @file block/direct_tiling.cuh
/// @brief The geometry of the tiled direct kernel for C/groups <= direct_max_group_channels (direct_tiling,
/// built on the host by make_direct_tiling: tiles, strips, channel groups, staging and shared memory) and
/// the tile and channel share a block owns (direct_tile_at).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../detail/fast_divmod.cuh"
#include "../problem.cuh"
#include "conv_params.cuh"

namespace convred::block {

/// @brief The most input channels per group (C/groups) the direct kernel serves: 1 (depthwise) up to 16
/// (grouped convolutions such as ResNeXt's and RegNet's narrow groups). A pipeline stage holds whole
/// groups, three stages in shared memory, so a block's buffers grow with C/groups while its threads do not:
/// at 16 channels an fp32 3x3 block of one warp already stages ~70 KiB (bench/NOTES.md, "Grouped direct
/// kernel"); wider groups are the GEMM kernels' (family::grouped, mma.sync).
inline constexpr std::int64_t direct_max_group_channels = 16;

/// @brief Geometry of the tiled direct kernel for one problem (kernel::conv2d_reduce_direct_kernel),
/// built on the host by make_direct_tiling and passed by value.
///
/// A block owns a tile of tile_h x tile_w output pixels of one image (output rows p0 ..., columns q0 ...;
/// q0 may be negative by `shift`, see below) and a share of the input channels (`splits` blocks per tile,
/// a thread-block cluster on sm_90, each over ch_per_split channels: whole groups of the problem). Its
/// `threads` = groups * tx * ty threads form `groups` channel groups of tx * ty pixel threads; pixel thread
/// (ty, tx) computes a strip of sh x sw adjacent pixels (tile rows ty*sh ..., columns tx*sw ...), and
/// channel group g computes the stage's channels g, g + groups, ... (C/groups == 1), or its work items g,
/// g + groups, ... (C/groups > 1: block::direct_grouped_stage; `cb` is then a multiple of C/groups) Per pipeline stage the block stages `cb` input channels' patches (tile plus
/// halo: rows x cols elements of T; patch element (i, j) is x row p0*stride_h - pad_h + i, column
/// q0*stride_w - pad_w + j, zero outside x) into one of `stages` shared-memory buffers; channel plane cl of
/// a buffer starts at element cl * plane, its row i at i * pitch. The stager copies `vec` elements per
/// item (vec > 1: 8- or 16-byte cp.async chunks, which needs NCHW x with W % vec == 0 and x aligned to
/// vec elements, and patch column 0 on a multiple of vec in x: the tiles start `shift` columns left of
/// the output, tile column c at q0 = c * tile_w - shift, so that q0 - pad_w is a multiple of vec; the
/// `shift` columns left of column 0 are computed and not written). All counts are elements or pixels unless
/// named bytes.
struct direct_tiling {
  std::int32_t tx = 1;          ///< pixel threads across a tile (each sw output columns wide)
  std::int32_t ty = 1;          ///< pixel threads down a tile (each sh output rows high)
  std::int32_t pixel_threads = 1;  ///< tx * ty: the threads of one channel group
  std::int32_t groups = 1;      ///< channel groups of a block (each computes every groups-th staged channel)
  std::int32_t threads = 1;     ///< groups * tx * ty: the block size
  std::int32_t sh = 1;          ///< output rows per thread (the strip's SH)
  std::int32_t sw = 1;          ///< output columns per thread (the strip's SW)
  std::int32_t tile_h = 1;      ///< output rows per tile, ty * sh
  std::int32_t tile_w = 1;      ///< output columns per tile, tx * sw
  std::int32_t shift = 0;       ///< output columns the first tile column starts left of column 0 (0 ... vec - 1)
  std::int32_t tiles_h = 1;     ///< tiles down the output, ceil(P / tile_h)
  std::int32_t tiles_w = 1;     ///< tiles across the output, ceil((Q + shift) / tile_w)
  std::int64_t tiles = 0;       ///< N * tiles_h * tiles_w
  std::int32_t splits = 1;      ///< blocks per tile, each over a share of the input channels (a cluster when > 1)
  /// input channels per split: ceil(groups / splits) * C/groups, whole groups of the problem (the last
  /// split may have fewer; ceil(C / splits) for C/groups == 1)
  std::int32_t ch_per_split = 1;
  std::int32_t cb = 1;          ///< input channels per pipeline stage
  std::int32_t stages = 3;      ///< pipeline buffers in shared memory (direct_patch_stager<T>::stages)
  std::int32_t rows = 1;        ///< patch rows of one channel: (tile_h - 1) * stride_h + (R - 1) * dil_h + 1
  std::int32_t cols = 1;        ///< patch columns of one channel: (tile_w - 1) * stride_w + (S - 1) * dil_w + 1
  std::int32_t vec = 1;         ///< elements per staged item (1: element copies; 2 or 4: 16- or 8-byte chunks)
  std::int32_t chunks = 1;      ///< staged items per patch row (NCHW: ceil(cols / vec); NHWC: cols)
  std::int32_t pitch = 1;       ///< elements between patch rows in shared memory (>= chunks * vec, a 16-byte multiple)
  std::int32_t plane = 1;       ///< elements between channel planes (>= rows * pitch, a 16-byte multiple)
  /// 1: the patches are staged in shared memory (direct_patch_stager); 0: the run-time variant reads x
  /// directly (direct_strip::conv_global), for problems whose patch fits no buffer (huge strides,
  /// dilations or filters)
  std::int32_t staged = 1;
  std::size_t smem_bytes = 0;   ///< dynamic shared memory per block: the stage buffers, or the parked states if larger
  convred::detail::fast_divmod div_pt;      ///< divides by pixel_threads (thread index -> (group, pixel thread))
  convred::detail::fast_divmod div_tx;      ///< divides by tx (pixel thread -> (ty, tx))
  convred::detail::fast_divmod div_items;   ///< divides by rows * chunks (stage item -> (channel, item of the plane))
  convred::detail::fast_divmod div_chunks;  ///< divides by chunks (item of a plane -> (row, chunk))

  /// Blocks of the launch: tiles * splits (the grid is one-dimensional; the `splits` blocks of a tile are
  /// consecutive, so that they form one cluster).
  __host__ __device__ std::int64_t blocks() const { return tiles * splits; }
  /// Pipeline stages of a block with `channels` input channels: ceil(channels / cb).
  __host__ __device__ std::int32_t stage_count(std::int32_t channels) const { return (channels + cb - 1) / cb; }
  /// Output pixels of a tile: tile_h * tile_w.
  __host__ __device__ std::int32_t tile_pixels() const { return tile_h * tile_w; }
};

namespace detail {
/// Shared-memory wavefronts of one warp's first row-segment load of a strip (the lanes of warp 0, in
/// phases of 128 bytes: 8 lanes for 16-byte chunks, 16 for 8-byte, 32 otherwise; per phase the most
/// distinct 4-byte words any of the 32 banks serves): the quantity make_direct_tiling minimises over
/// candidate pitches. Lane l is thread (l / tx, l % tx); its address is (ty * row_step * pitch + tx *
/// col_step) elements of elem_bytes.
inline int direct_smem_wavefronts(int pitch, std::size_t elem_bytes, int tx, int threads, int row_step, int col_step,
                                  int chunk_bytes) {
  const int lanes = std::min(32, threads);
  const int per_phase = chunk_bytes >= 16 ? 8 : chunk_bytes >= 8 ? 16 : 32;
  const int words = std::max(1, chunk_bytes / 4);
  int total = 0;
  for (int first = 0; first < lanes; first += per_phase) {
    std::int64_t seen[32][32];  // distinct words per bank in this phase (at most 32 lanes x 4 words / 32 banks each)
    int count[32] = {};
    for (int l = first; l < std::min(lanes, first + per_phase); ++l) {
      const std::int64_t elem = std::int64_t(l / tx) * row_step * pitch + std::int64_t(l % tx) * col_step;
      const std::int64_t word0 = elem * static_cast<std::int64_t>(elem_bytes) / 4;
      for (std::int64_t word = word0; word < word0 + words; ++word) {
        const int b = static_cast<int>(word % 32);
        bool known = false;
        for (int i = 0; i < count[b]; ++i) known = known || seen[b][i] == word;
        if (!known && count[b] < 32) seen[b][count[b]++] = word;
      }
    }
    int most = 1;
    for (int b = 0; b < 32; ++b) most = std::max(most, count[b]);
    total += most;
  }
  return total;
}
}  // namespace detail

/// @brief Elements per 8- or 16-byte staging chunk of element type `elem_bytes`: min(16, 4 * elem_bytes) /
/// elem_bytes (4 for float and 16-bit types, 2 for double).
inline int direct_chunk_elements(std::size_t elem_bytes) {
  return static_cast<int>(std::min<std::size_t>(16, 4 * elem_bytes) / elem_bytes);
}

/// @brief True if patches of p may be staged in chunks of direct_chunk_elements (the `vector` argument of
/// make_direct_tiling), given that x is aligned to a chunk: NCHW, W a multiple of the chunk, and the
/// unrolled variant at stride 1, or at stride 2 with an even pad_w (so that every tile's patch can start on
/// a chunk boundary: direct_chunk_shift).
inline bool direct_vector_staging(const conv2d_problem& p, std::size_t elem_bytes, bool unrolled) {
  return unrolled && p.x_layout == layout::nchw && p.W % direct_chunk_elements(elem_bytes) == 0 &&
         (p.stride_w == 1 || (p.stride_w == 2 && p.pad_w % 2 == 0));
}

/// @brief The output columns the first tile column starts left of column 0 (direct_tiling::shift) when
/// patches are staged in chunks of `vec` elements (vec > 1; 0 otherwise): the least shift >= 0 that puts
/// the patch's first column, x column -shift * stride_w - pad_w, on a multiple of vec: (vec - pad_w % vec)
/// % vec at stride 1, half of that at stride 2 (pad_w even: direct_vector_staging). Tile widths are
/// multiples of 4 columns, so every tile's patch then starts on a chunk boundary.
inline std::int32_t direct_chunk_shift(const conv2d_problem& p, int vec) {
  if (vec <= 1) return 0;
  const std::int64_t s = (vec - p.pad_w % vec) % vec;
  return static_cast<std::int32_t>(p.stride_w == 2 ? s / 2 : s);
}

/// @brief Builds the tiling of a validated problem with C/groups <= direct_max_group_channels for strips of sh x sw pixels per
/// thread, tx x ty pixel threads per channel group, `groups` channel groups, `splits` blocks per tile,
/// `cb` channels per stage and `stages` buffers (host). The chooser is device::choose_direct_config; this
/// only derives the geometry. `unrolled`: the strip reads each input row as one run of (sw - 1) * stride_w
/// + S elements (direct_strip with the filter size and stride unrolled: 3x3, 5x5, 7x7 at stride 1 or 2,
/// dilation 1), else one element per tap.
/// `vector`: stage in chunks of direct_chunk_elements (only where direct_vector_staging holds and x is
/// aligned to a chunk; the tiles then start `shift` columns left of the output). The pitch is the 16-byte
/// multiple >= chunks * vec (among eight candidates) whose first row load has the fewest shared-memory
/// wavefronts (detail::direct_smem_wavefronts); the plane is rounded to an odd number of 16-byte units.
/// `accum_bytes`: the size of the reduction state (the parked states, groups * tile pixels of them, share
/// the buffers' memory). `staged` false: no stage buffers (direct_tiling::staged). A patch of more than
/// 2^28 elements (or 2^20 rows or columns: huge padding or dilation) fits no shared memory: staged, its
/// smem_bytes is SIZE_MAX (the tiling never fits); unstaged, its extent is not kept. Preconditions (the
/// caller's): tx, ty, sh, sw, groups, splits, cb >= 1, splits <= the problem's groups, cb a multiple of
/// C/groups, groups * tx * ty <= 1024.
inline direct_tiling make_direct_tiling(const conv2d_problem& p, std::size_t elem_bytes, std::size_t accum_bytes,
                                        int sh, int sw, bool unrolled, int stages, int tx, int ty, int groups,
                                        int splits, int cb, bool staged = true, bool vector = false) {
  direct_tiling t;
  t.staged = staged ? 1 : 0;
  t.tx = tx, t.ty = ty, t.pixel_threads = tx * ty, t.groups = groups, t.threads = groups * tx * ty;
  t.sh = sh, t.sw = sw;
  t.tile_h = ty * sh, t.tile_w = tx * sw;
  // chunks only where direct_vector_staging holds (a caller's `vector` alone never stages past x's edge)
  t.vec = vector && staged && direct_vector_staging(p, elem_bytes, unrolled) ? direct_chunk_elements(elem_bytes) : 1;
  t.shift = direct_chunk_shift(p, t.vec);
  const std::int64_t P = p.P(), Q = p.Q();
  t.tiles_h = static_cast<std::int32_t>((P + t.tile_h - 1) / t.tile_h);
  t.tiles_w = static_cast<std::int32_t>((Q + t.shift + t.tile_w - 1) / t.tile_w);
  t.tiles = p.N * t.tiles_h * t.tiles_w;
  t.splits = splits;
  t.ch_per_split = static_cast<std::int32_t>((p.groups + splits - 1) / splits * p.C_per_group());
  t.cb = cb, t.stages = stages;
  // patch extent in 64 bits: a patch of more than 2^28 elements fits no shared memory, so it is never
  // staged (smem_bytes SIZE_MAX) and its extent is not kept (int32 fields and divisions; the unstaged
  // kernel does not read them)
  const std::int64_t rows64 = (t.tile_h - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1;
  const std::int64_t cols64 = (t.tile_w - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1;
  const std::int64_t big = std::int64_t(1) << 20;
  const bool huge = rows64 > big || cols64 > big || rows64 * cols64 > (std::int64_t(1) << 28);
  t.rows = huge ? 1 : static_cast<std::int32_t>(rows64);
  t.cols = huge ? 1 : static_cast<std::int32_t>(cols64);
  const bool nchw = p.x_layout == layout::nchw;
  t.chunks = nchw ? (t.cols + t.vec - 1) / t.vec : t.cols;
  const int align = static_cast<int>(16 / elem_bytes);  // elements per 16 bytes
  const int base = (t.chunks * t.vec + align - 1) / align * align;
  // rows and columns between neighbouring strips' first loads, and the strip's load size (unrolled: the
  // run's first chunk, sw * stride elements apart; run time: one element per tap)
  const int row_step = sh * static_cast<int>(p.stride_h);
  const int col_step = unrolled ? sw * static_cast<int>(p.stride_w) : static_cast<int>(p.stride_w);
  const int chunk = unrolled ? static_cast<int>(std::min<std::size_t>(16, sw * p.stride_w * elem_bytes))
                             : static_cast<int>(elem_bytes);
  int best = -1;
  for (int m = 0; m < 8; ++m) {
    const int pitch = base + m * align;
    const int wf = detail::direct_smem_wavefronts(pitch, elem_bytes, tx, t.pixel_threads, row_step, col_step, chunk);
    if (best < 0 || wf < best) best = wf, t.pitch = pitch;
  }
  t.plane = t.rows * t.pitch;  // < 2^31: rows * cols <= 2^28
  if ((t.plane / align) % 2 == 0) t.plane += align;
  const std::size_t buffers = staged ? static_cast<std::size_t>(stages) * cb * t.plane * elem_bytes : 0;
  const std::size_t park = static_cast<std::size_t>(groups) * t.tile_h * t.tile_w * accum_bytes;
  t.smem_bytes = huge && staged ? ~std::size_t(0) : (std::max(buffers, park) + 15) / 16 * 16;
  t.div_pt = convred::detail::fast_divmod(t.pixel_threads);
  t.div_tx = convred::detail::fast_divmod(tx);
  t.div_items = convred::detail::fast_divmod(t.rows * t.chunks);
  t.div_chunks = convred::detail::fast_divmod(t.chunks);
  return t;
}

/// @brief The tile and channel share of one block of the direct kernel.
struct direct_tile {
  std::int64_t n = 0;   ///< image
  std::int32_t p0 = 0;  ///< first output row of the tile
  std::int32_t q0 = 0;  ///< first output column of the tile (-shift for the first tile column)
  std::int32_t rank = 0;  ///< split index in [0, splits) (the block's rank in its cluster)
  std::int32_t c0 = 0;  ///< first input channel of the block's share
  std::int32_t c1 = 0;  ///< one past its last input channel (c0 == c1: an empty share, identity states)
};

/// @brief The tile of block `block` (blockIdx.x) of the direct kernel: blocks rank 0 ... splits-1 of a
/// tile are consecutive; tiles run image-major, then tile row, then tile column. Host and device.
template <class T>
__host__ __device__ inline direct_tile direct_tile_at(const direct_tiling& t, const conv_params<T>& prm,
                                                     std::int64_t block) {
  direct_tile b;
  const std::int64_t tile = block / t.splits;
  b.rank = static_cast<std::int32_t>(block - tile * t.splits);
  const std::int64_t row_major = tile / t.tiles_w;
  b.q0 = static_cast<std::int32_t>(tile - row_major * t.tiles_w) * t.tile_w - t.shift;
  b.n = row_major / t.tiles_h;
  b.p0 = static_cast<std::int32_t>(row_major - b.n * t.tiles_h) * t.tile_h;
  const std::int64_t c0 = std::int64_t(b.rank) * t.ch_per_split;
  b.c0 = static_cast<std::int32_t>(c0 < prm.C ? c0 : prm.C);
  b.c1 = static_cast<std::int32_t>(c0 + t.ch_per_split < prm.C ? c0 + t.ch_per_split : prm.C);
  return b;
}

}  // namespace convred::block
