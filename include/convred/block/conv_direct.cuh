/// @file block/conv_direct.cuh
/// @brief Tiled direct convolution for problems where every output channel reads one input channel
/// (C/groups == 1: depthwise, with any channel multiplier K/groups), exact FMA on the CUDA cores: the
/// tile geometry (direct_tiling, built on the host), the tile and channel share a block owns
/// (direct_tile_at), the per-thread strip of outputs computed from a staged input patch (direct_strip),
/// and the tile's store (direct_store_tile: the states of the block's channel groups, then of the blocks
/// sharing a tile, combined in a fixed order, and y written once per pixel). The stager that fills the
/// patches is block::direct_patch_stager (direct_patch_stager.cuh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../detail/fast_divmod.cuh"
#include "../functional.cuh"
#include "../numeric.cuh"
#include "../problem.cuh"
#include "conv_params.cuh"
#include "reduce_epilogue.cuh"

namespace convred::block {

/// @brief Geometry of the tiled direct kernel for one problem (kernel::conv2d_reduce_direct_kernel),
/// built on the host by make_direct_tiling and passed by value.
///
/// A block owns a tile of tile_h x tile_w output pixels of one image (output rows p0 ..., columns q0 ...;
/// q0 may be negative by `shift`, see below) and a share of the input channels (`splits` blocks per tile,
/// a thread-block cluster on sm_90, each over ch_per_split channels). Its `threads` = groups * tx * ty
/// threads form `groups` channel groups of tx * ty pixel threads; pixel thread (ty, tx) computes a strip
/// of sh x sw adjacent pixels (tile rows ty*sh ..., columns tx*sw ...), and group g computes the stage's
/// channels g, g + groups, ... Per pipeline stage the block stages `cb` input channels' patches (tile plus
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
  std::int32_t ch_per_split = 1;  ///< input channels per split, ceil(C / splits) (the last split may have fewer)
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
/// unrolled variant (stride 1, so that every tile's patch starts on a chunk boundary).
inline bool direct_vector_staging(const conv2d_problem& p, std::size_t elem_bytes, bool unrolled) {
  return unrolled && p.x_layout == layout::nchw && p.W % direct_chunk_elements(elem_bytes) == 0;
}

/// @brief Builds the tiling of a validated problem with C/groups == 1 for strips of sh x sw pixels per
/// thread, tx x ty pixel threads per channel group, `groups` channel groups, `splits` blocks per tile,
/// `cb` channels per stage and `stages` buffers (host). The chooser is device::choose_direct_config; this
/// only derives the geometry. `unrolled`: the strip reads each input row as one run of sw + S - 1 elements
/// (direct_strip with the filter size unrolled, stride and dilation 1), else one element per tap.
/// `vector`: stage in chunks of direct_chunk_elements (only where direct_vector_staging holds and x is
/// aligned to a chunk; the tiles then start `shift` columns left of the output). The pitch is the 16-byte
/// multiple >= chunks * vec (among eight candidates) whose first row load has the fewest shared-memory
/// wavefronts (detail::direct_smem_wavefronts); the plane is rounded to an odd number of 16-byte units.
/// `accum_bytes`: the size of the reduction state (the parked states, groups * tile pixels of them, share
/// the buffers' memory). `staged` false: no stage buffers (direct_tiling::staged). A patch of more than
/// 2^28 elements (or 2^20 rows or columns: huge padding or dilation) fits no shared memory: staged, its
/// smem_bytes is SIZE_MAX (the tiling never fits); unstaged, its extent is not kept. Preconditions (the
/// caller's): tx, ty, sh, sw, groups, splits, cb >= 1, splits <= C, groups * tx * ty <= 1024.
inline direct_tiling make_direct_tiling(const conv2d_problem& p, std::size_t elem_bytes, std::size_t accum_bytes,
                                        int sh, int sw, bool unrolled, int stages, int tx, int ty, int groups,
                                        int splits, int cb, bool staged = true, bool vector = false) {
  direct_tiling t;
  t.staged = staged ? 1 : 0;
  t.tx = tx, t.ty = ty, t.pixel_threads = tx * ty, t.groups = groups, t.threads = groups * tx * ty;
  t.sh = sh, t.sw = sw;
  t.tile_h = ty * sh, t.tile_w = tx * sw;
  t.vec = vector && staged ? direct_chunk_elements(elem_bytes) : 1;
  t.shift = t.vec > 1 ? static_cast<std::int32_t>((t.vec - p.pad_w % t.vec) % t.vec) : 0;
  const std::int64_t P = p.P(), Q = p.Q();
  t.tiles_h = static_cast<std::int32_t>((P + t.tile_h - 1) / t.tile_h);
  t.tiles_w = static_cast<std::int32_t>((Q + t.shift + t.tile_w - 1) / t.tile_w);
  t.tiles = p.N * t.tiles_h * t.tiles_w;
  t.splits = splits;
  t.ch_per_split = static_cast<std::int32_t>((p.C + splits - 1) / splits);
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
  const int row_step = unrolled ? sh : sh * static_cast<int>(p.stride_h);
  const int col_step = unrolled ? sw : static_cast<int>(p.stride_w);
  const int chunk = unrolled ? static_cast<int>(std::min<std::size_t>(16, sw * elem_bytes)) : static_cast<int>(elem_bytes);
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

namespace detail {
/// A read-only load of an operand every thread of a block reads (weights, bias): __ldg on the device.
template <class T>
__host__ __device__ __forceinline__ T ld_ro(const T* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}

/// a * b + c with one rounding (fma), the same on host and device.
template <class V>
__host__ __device__ __forceinline__ V fmadd(V a, V b, V c) {
#ifdef __CUDA_ARCH__
  return fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// An unsigned type of `Bytes` bytes (2, 4, 8 or 16): one shared-memory load of a run.
template <int Bytes>
struct chunk_type;
/// 16 bytes
template <>
struct chunk_type<16> {
  using type = uint4;  ///< uint4
};
/// 8 bytes
template <>
struct chunk_type<8> {
  using type = uint2;  ///< uint2
};
/// 4 bytes
template <>
struct chunk_type<4> {
  using type = unsigned int;  ///< unsigned int
};
/// 2 bytes
template <>
struct chunk_type<2> {
  using type = unsigned short;  ///< unsigned short
};

/// The largest chunk (16, 8, 4 or 2 bytes) that is at most Align bytes, fits in Total - Offset bytes and
/// is aligned at Offset.
template <int Offset, int Total, int Align>
__host__ __device__ constexpr int run_chunk() {
  for (int c = 16; c >= 2; c /= 2)
    if (c <= Align && Offset + c <= Total && Offset % c == 0) return c;
  return 2;
}

/// Copies bytes [Offset, Total) of a run at src (aligned to Align bytes) into dst in chunks of run_chunk.
template <int Offset, int Total, int Align>
__host__ __device__ __forceinline__ void copy_run(const unsigned char* src, unsigned char* dst) {
  if constexpr (Offset < Total) {
    constexpr int c = run_chunk<Offset, Total, Align>();
#ifdef __CUDA_ARCH__
    const auto v = *reinterpret_cast<const typename chunk_type<c>::type*>(src + Offset);
    std::memcpy(dst + Offset, &v, c);
#else
    std::memcpy(dst + Offset, src + Offset, c);
#endif
    copy_run<Offset + c, Total, Align>(src, dst);
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Barrier of every thread of the cluster, with release / acquire of memory (barrier.cluster, sm_90).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/// Reads the value at the shared-memory address of `local` in the block of cluster rank `rank`
/// (mapa + ld.shared::cluster, sm_90), in 4-byte words and then bytes.
template <class A>
__device__ __forceinline__ A cluster_load(const A* local, int rank) {
  const auto own = static_cast<std::uint32_t>(__cvta_generic_to_shared(local));
  std::uint32_t addr;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(addr) : "r"(own), "r"(rank));
  unsigned char bytes[sizeof(A)];
#pragma unroll
  for (int i = 0; i + 4 <= static_cast<int>(sizeof(A)); i += 4) {
    std::uint32_t v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr + i) : "memory");
    std::memcpy(bytes + i, &v, 4);
  }
#pragma unroll
  for (int i = static_cast<int>(sizeof(A)) / 4 * 4; i < static_cast<int>(sizeof(A)); ++i) {
    unsigned short v;
    asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(addr + i) : "memory");
    bytes[i] = static_cast<unsigned char>(v);
  }
  A r;
  std::memcpy(&r, bytes, sizeof(A));
  return r;
}
#endif
}  // namespace detail

/// @brief One thread's strip of SH x SW adjacent output pixels of a tile, each the exact-FMA direct
/// convolution of one output channel k over a staged patch of its input channel c = k / (K/groups)
/// (PyTorch's depthwise conv2d with channel multiplier K/groups), then bias, epilogue and the fold into the
/// pixel's reduction state.
///
/// FR x FS > 0 (3x3, 5x5, 7x7 in the kernel): stride and dilation 1, taps unrolled, a strip of SH = 2 rows
/// x SW = 4 columns; each of the SH + FR - 1 input rows the strip needs is read once from shared memory as
/// one run of SW + FS - 1 elements (16-byte loads where aligned) and used for every output and tap it feeds
/// (sliding window); the channel's FR x FS weights sit in registers (read-only loads, the same address for
/// every thread of a group). FR = FS = 0: any R, S, stride and dilation at run time, SH = 2 rows x SW = 1
/// column, one shared-memory load per tap and row. Either way the sum runs over taps in the order r, s with
/// one fma per tap from 0 (padded taps read the zeros the stager wrote: 0 * w, NaN for a non-finite weight,
/// as PyTorch's padded GEMM paths and the float64 reference), then the bias is added (direct_strip::fold).
/// Host and device (the host suite runs it on patches staged on the host).
/// @tparam T  element type (float, double, __half, __nv_bfloat16); sums in compute_t<T>
/// @tparam FR filter height the taps are unrolled for, or 0 (run time)
/// @tparam FS filter width the taps are unrolled for, or 0 (run time); 0 exactly when FR is
template <class T, int FR, int FS>
struct direct_strip {
  static_assert((FR > 0) == (FS > 0), "direct_strip: FR and FS are both fixed or both 0 (run time)");
  using V = compute_t<T>;  ///< compute type: float, or double for double data
  static constexpr bool unrolled = FR > 0;  ///< taps unrolled (stride and dilation 1)
  static constexpr int SW = unrolled ? 4 : 1;  ///< output columns per thread
  static constexpr int SH = 2;                 ///< output rows per thread
  static constexpr int run = SW + (FS > 0 ? FS : 1) - 1;  ///< elements of one input row a thread reads (unrolled)

  /// acc[i][j] = sum over taps r, s of patch(row, col) * w[k, 0, r, s] for tile pixel (ty * SH + i, tx * SW
  /// + j), where patch(row, col) = plane[row * t.pitch + col], row = (ty * SH + i) * stride_h + r * dil_h,
  /// col = (tx * SW + j) * stride_w + s * dil_w. acc must hold zeros on entry. plane: the channel's staged
  /// patch (shared memory, or host memory on the host) aligned to 16 bytes; prm.w: the (K, 1, R, S) weights.
  __host__ __device__ static void conv(const T* plane, const direct_tiling& t, const conv_params<T>& prm, int ty, int tx,
                                       std::int64_t k, V (&acc)[SH][SW]) {
    if constexpr (unrolled) {
      const T* wk = prm.w + k * (FR * FS);
      V w[FR][FS];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int r = 0; r < FR; ++r)
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int s = 0; s < FS; ++s) w[r][s] = static_cast<V>(to_compute(detail::ld_ro(wk + r * FS + s)));
      const T* base = plane + static_cast<std::int64_t>(ty) * SH * t.pitch + tx * SW;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int ir = 0; ir < SH + FR - 1; ++ir) {
        T raw[run];
        detail::copy_run<0, static_cast<int>(run * sizeof(T)), static_cast<int>(SW * sizeof(T) < 16 ? SW * sizeof(T) : 16)>(
            reinterpret_cast<const unsigned char*>(base + ir * t.pitch), reinterpret_cast<unsigned char*>(raw));
        V row[run];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int e = 0; e < run; ++e) row[e] = static_cast<V>(to_compute(raw[e]));
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int i = 0; i < SH; ++i) {
          const int r = ir - i;  // the filter row input row ir is for output row i
          if (r < 0 || r >= FR) continue;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
          for (int s = 0; s < FS; ++s)
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
            for (int j = 0; j < SW; ++j) acc[i][j] = detail::fmadd(row[j + s], w[r][s], acc[i][j]);
        }
      }
    } else {
      const int R = prm.R, S = prm.S;
      const T* wk = prm.w + k * R * S;
      const std::int64_t row_step = std::int64_t(prm.stride_h) * t.pitch;  // patch elements between output rows
      const T* base = plane + std::int64_t(ty) * SH * row_step + static_cast<std::int64_t>(tx) * prm.stride_w;
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) {
          const V wv = static_cast<V>(to_compute(detail::ld_ro(wk + r * S + s)));
          const T* tap = base + std::int64_t(r) * prm.dil_h * t.pitch + std::int64_t(s) * prm.dil_w;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
          for (int i = 0; i < SH; ++i) acc[i][0] = detail::fmadd(static_cast<V>(to_compute(tap[i * row_step])), wv, acc[i][0]);
        }
    }
  }

  /// conv without staging (the run-time variant only, direct_tiling::staged == 0): the same sums, in the
  /// same order, read from x itself: tap (r, s) of tile pixel (ty * SH + i, tx) of tile b reads x[n, c, h,
  /// w] with h = (p0 + ty * SH + i) * stride_h - pad_h + r * dil_h, w = (q0 + tx) * stride_w - pad_w + s *
  /// dil_w, or 0 outside x (then 0 * w, as the staged path), c = k / (K/groups).
  __host__ __device__ static void conv_global(const direct_tiling& t, const direct_tile& b, const conv_params<T>& prm,
                                              int ty, int tx, std::int64_t k, V (&acc)[SH][SW]) {
    static_assert(!unrolled, "direct_strip::conv_global: the run-time variant only");
    (void)t;
    const int R = prm.R, S = prm.S;
    const T* wk = prm.w + k * R * S;
    const std::int64_t c = k / prm.Kg;
    const bool nchw = prm.x_layout == layout::nchw;
    const T* xc = prm.x + (nchw ? (b.n * prm.C + c) * prm.H * prm.W : b.n * prm.H * prm.W * prm.C + c);
    const std::int64_t col = nchw ? 1 : prm.C, row = prm.W * col;
    const std::int64_t h0 = (std::int64_t(b.p0) + std::int64_t(ty) * SH) * prm.stride_h - prm.pad_h;
    const std::int64_t w = (std::int64_t(b.q0) + tx) * prm.stride_w - prm.pad_w;
    for (int r = 0; r < R; ++r)
      for (int s = 0; s < S; ++s) {
        const V wv = static_cast<V>(to_compute(detail::ld_ro(wk + r * S + s)));
        const std::int64_t ws = w + std::int64_t(s) * prm.dil_w;
        const bool col_in = ws >= 0 && ws < prm.W;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int i = 0; i < SH; ++i) {
          const std::int64_t h = h0 + std::int64_t(i) * prm.stride_h + std::int64_t(r) * prm.dil_h;
          const V xv = col_in && h >= 0 && h < prm.H ? static_cast<V>(to_compute(xc[h * row + ws * col])) : V(0);
          acc[i][0] = detail::fmadd(xv, wv, acc[i][0]);
        }
      }
  }

  /// Folds output channel k of the strip into its states: v = acc + bias[k] (bias may be nullptr: v = acc),
  /// state = op(state, Op::make(e(v, k), k)).
  template <class Op, class Epilogue>
  __host__ __device__ static void fold(const Op& op, const Epilogue& epi, const V (&acc)[SH][SW], const T* bias,
                                       std::int64_t k, typename Op::template accum_t<V> (&state)[SH][SW]) {
    const V b = bias ? static_cast<V>(to_compute(detail::ld_ro(bias + k))) : V(0);
    const int kk = static_cast<int>(k);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < SH; ++i) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int j = 0; j < SW; ++j) {
        const V v = bias ? acc[i][j] + b : acc[i][j];
        state[i][j] = op(state[i][j], Op::template make<V>(apply_epilogue(epi, v, kk), kk));
      }
    }
  }
};

/// @brief Index of tile pixel (ty * sh + i, tx * sw + j) of channel group g among the block's parked
/// states: g * tile_pixels + the pixel's row-major index in the tile.
__host__ __device__ inline std::int32_t direct_park_index(const direct_tiling& t, int g, int ty, int tx, int i, int j) {
  return g * t.tile_pixels() + (ty * t.sh + i) * t.tile_w + tx * t.sw + j;
}

/// @brief The output offset n * P * Q + p * Q + q of tile pixel `pixel` (row-major in the tile) of tile
/// b, or -1 when the pixel lies outside the output (a tile tail, or one of the `shift` columns left of
/// column 0).
template <class T>
__host__ __device__ inline std::int64_t direct_output_offset(const direct_tiling& t, const direct_tile& b,
                                                             const conv_params<T>& prm, std::int32_t pixel) {
  const std::int32_t i = pixel / t.tile_w, j = pixel - i * t.tile_w;
  const std::int64_t p = b.p0 + i, q = std::int64_t(b.q0) + j;
  return p < prm.P && q >= 0 && q < prm.Q ? (b.n * prm.P + p) * prm.Q + q : std::int64_t(-1);
}

/// @brief The combination order of a tile pixel's states (host and device, so that the host suite
/// combines exactly as the kernel): the block's channel groups 0, 1, ..., groups - 1 in turn (park holds
/// groups * tile_pixels states, direct_park_index), returned for `pixel`.
template <class Op, class A>
__host__ __device__ inline A direct_combine_groups(const direct_tiling& t, const Op& op, const A* park, std::int32_t pixel) {
  A r = park[pixel];
  for (int g = 1; g < t.groups; ++g) r = op(r, park[g * t.tile_pixels() + pixel]);
  return r;
}

/// @brief The end of a direct-kernel block: parks the thread's SH x SW states in shared memory (smem:
/// groups * tile pixels states, direct_park_index; it reuses the stage buffers, so every stage must be
/// done), combines each tile pixel's states over the channel groups in group order
/// (direct_combine_groups) into group 0's slot, then, after a barrier (the cluster's when t.splits > 1),
/// over the tile's splits in rank order 0, 1, ... (deterministic; rank r reads rank q's combined states
/// through distributed shared memory, sm_90) and writes y (and the index) once per pixel inside the output
/// with block::write_reduced. Rank r writes pixels [r * ceil(px / splits), ...) of the tile's px pixels,
/// consecutive threads consecutive pixels (coalesced). A final cluster barrier keeps every block's shared
/// memory alive until its readers are done. splits > 1 needs sm_90 code and a cluster launch of `splits`
/// blocks (device::conv2d_reduce_direct checks both); other code traps on it.
template <class Op, class V, class T, int SH, int SW>
__device__ void direct_store_tile(const direct_tiling& t, const direct_tile& b, const conv_params<T>& prm,
                                  const Op& op, const typename Op::template accum_t<V> (&state)[SH][SW], int g, int ty,
                                  int tx, void* smem, T* y, std::int64_t* indices) {
  using accum_t = typename Op::template accum_t<V>;
  accum_t* park = static_cast<accum_t*>(smem);
  __syncthreads();  // every thread is done with the stage buffers
#pragma unroll
  for (int i = 0; i < SH; ++i)
#pragma unroll
    for (int j = 0; j < SW; ++j) park[direct_park_index(t, g, ty, tx, i, j)] = state[i][j];
  __syncthreads();
  const std::int32_t px = t.tile_pixels(), tid = static_cast<std::int32_t>(threadIdx.x);
  if (t.splits == 1) {
    for (std::int32_t p = tid; p < px; p += t.threads)
      write_reduced<Op, V>(y, indices, direct_output_offset(t, b, prm, p), direct_combine_groups(t, op, park, p), prm.K);
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (t.groups > 1)
    for (std::int32_t p = tid; p < px; p += t.threads) park[p] = direct_combine_groups(t, op, park, p);
  detail::cluster_sync();  // every rank's states are combined over its groups
  const std::int32_t per = (px + t.splits - 1) / t.splits, first = b.rank * per;
  const std::int32_t last = first + per < px ? first + per : px;
  for (std::int32_t p = first + tid; p < last; p += t.threads) {
    accum_t r = detail::cluster_load(park + p, 0);
    for (int q = 1; q < t.splits; ++q) r = op(r, detail::cluster_load(park + p, q));
    write_reduced<Op, V>(y, indices, direct_output_offset(t, b, prm, p), r, prm.K);
  }
  detail::cluster_sync();  // no block leaves while another still reads its states
#else
  (void)op;
  __trap();  // a split tiling needs sm_90 code (the host never launches one without it)
#endif
}

}  // namespace convred::block
