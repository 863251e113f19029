/// @file block/direct_patch_stager.cuh
/// @brief Stages the input patches of the tiled direct kernel (C/groups <= 16) into a ring of shared-memory
/// buffers, one pipeline stage (direct_tiling::cb input channels) at a time: the zero padding written once,
/// the part inside x copied with cp.async in 8- or 16-byte chunks where x allows it.
#pragma once

#include <cstdint>

#include "../detail/load.cuh"
#include "../numeric.cuh"
#include "conv_direct.cuh"
#include "conv_params.cuh"

namespace convred::block {

/// @brief Block-wide stager of the direct kernel's input patches: stage s holds input channels c0 + s*cb
/// ... (at most cb, not past the block's share [c0, c1)) of image n, each a plane of rows x cols elements
/// of T (the tile's output rows and columns with their halo: input rows p0*stride_h - pad_h + i, columns
/// q0*stride_w - pad_w + j), written as patch[cl * plane + i * pitch + j]. Stage s lands in buffer s %
/// stages.
///
/// Padding: which patch elements lie outside x depends on the tile only, not on the channel, so
/// zero_fill() writes +0.0 over every buffer once and the stages copy only the elements inside x; padded
/// taps then compute 0 * w exactly as the float64 reference does.
///
/// Items: NCHW x stages items of `vec` elements of a patch row (direct_tiling::vec: chunks of 8 or 16 bytes
/// with cp.async where x allows it, else single elements), item (cl, i, j) = channel cl, patch row i,
/// columns j*vec ... j*vec + vec - 1; NHWC x one element per item, item (cl, i, j) = channel cl of patch
/// pixel (i, j). An item lies wholly inside x or wholly outside (chunks start on multiples of vec in x, and
/// W is a multiple of vec); items outside are skipped.
/// NCHW: a thread stages the same plane positions pi = i * chunks + j in each channel it takes, so that the
/// index arithmetic and the bounds test of a position are paid once per stage, not once per channel (they
/// are most of the 18 instructions per staged element that choose_direct_config's model charges). With
/// phases = max(1, threads / (rows * chunks)): thread tid takes positions tid, tid + threads, ... of every
/// channel of the stage when phases is 1, else the one position tid % (rows * chunks) of channels tid /
/// (rows * chunks), + phases, ... (threads from phases * rows * chunks on stage nothing). Consecutive
/// threads take consecutive chunks of a row
/// (coalesced). NHWC: item f of a stage (f = cl * rows * chunks + i * chunks + j) is staged by thread f %
/// threads. 4- and 8-byte types, and chunks, copy with cp.async (no register held while in
/// flight; `stages` = 3 buffers, two stages in flight while one is computed); single 2-byte elements
/// (cp.async copies at least 4 bytes) are loaded and stored by the issuing thread at once.
///
/// Protocol, every thread of the block: zero_fill(); __syncthreads(); prologue(); then for s = 0 ...
/// stage_count() - 1: { land(s); __syncthreads(); issue(s + stages - 1); compute on buffer(s); } drain().
/// (issue past the last stage only closes an empty cp.async group). The item enumeration
/// (for_each_item) is host-device, so that the host suite stages a patch exactly as the kernel does.
/// @tparam T element type (float, double, __half, __nv_bfloat16), stored in shared memory as it is
template <class T>
class direct_patch_stager {
 public:
  static constexpr int stages = 3;  ///< buffers in the ring

  /// Binds the stager to block tile b of problem prm with tiling t; smem: the stage buffers (stages * cb *
  /// plane elements, 16-byte aligned); tid: this thread's index in the block.
  __host__ __device__ direct_patch_stager(const conv_params<T>& prm, const direct_tiling& t, const direct_tile& b,
                                          T* smem, int tid)
      : prm_(prm), t_(t), smem_(smem), tid_(tid), c0_(b.c0), c1_(b.c1) {
    x_ = prm.x + b.n * prm.C * prm.H * prm.W;
    h0_ = b.p0 * prm.stride_h - prm.pad_h;  // |h0_|, |w0_| < 2^31: validated sizes
    w0_ = b.q0 * prm.stride_w - prm.pad_w;
  }

  /// NCHW: the channel step of this thread's staging, `phases` in the class comment (1: each thread takes
  /// every channel of a stage at its positions; more: threads take one position of every phases-th channel).
  __host__ __device__ int channel_step() const {
    std::int32_t phases, rest;
    t_.div_items.divmod(t_.threads, phases, rest);
    return phases > 1 ? phases : 1;
  }
  /// Stages of the block's channel share: ceil((c1 - c0) / cb).
  __host__ __device__ int stage_count() const { return t_.stage_count(c1_ - c0_); }
  /// First input channel of stage s.
  __host__ __device__ int stage_first(int s) const { return c0_ + s * t_.cb; }
  /// Input channels of stage s: min(cb, c1 - stage_first(s)).
  __host__ __device__ int stage_channels(int s) const {
    const int left = c1_ - stage_first(s);
    return left < t_.cb ? left : t_.cb;
  }
  /// Buffer of stage s: smem + (s % stages) * cb * plane.
  __host__ __device__ T* buffer(int s) const { return smem_ + (s % stages) * t_.cb * t_.plane; }

  /// Calls f(e, offset) for each item this thread stages in stage s that lies inside x: e the index of its
  /// first element in the stage's buffer, offset the element offset of its first element from image n's
  /// first element of x (the item is t.vec elements from there on, contiguous in both).
#pragma nv_exec_check_disable  // f is a host lambda on the host (tests), a device one in the kernel
  template <class F>
  __host__ __device__ void for_each_item(int s, F&& f) const {
    const int cs = stage_first(s), nch = stage_channels(s);
    const std::int32_t H = prm_.H, W = prm_.W;
    if (prm_.x_layout == layout::nchw) {
      // this thread's first plane position and step, first channel and channel step (see the class)
      const std::int32_t positions = t_.rows * t_.chunks, phases = channel_step();
      std::int32_t ch0 = 0, pos0 = tid_, pos_step = t_.threads;
      if (phases > 1) {
        t_.div_items.divmod(tid_, ch0, pos0);  // tid = ch0 * positions + pos0
        pos_step = positions;
        if (ch0 >= phases) pos0 = positions;   // past phases * positions: nothing
      }
      const std::int64_t hw = std::int64_t(H) * W;
      for (std::int32_t pos = pos0; pos < positions; pos += pos_step) {
        std::int32_t i, j;
        t_.div_chunks.divmod(pos, i, j);
        const std::int32_t h = h0_ + i, w = w0_ + j * t_.vec;
        if (static_cast<std::uint32_t>(h) >= static_cast<std::uint32_t>(H) ||
            static_cast<std::uint32_t>(w) >= static_cast<std::uint32_t>(W))
          continue;
        const std::int32_t e = i * t_.pitch + j * t_.vec;
        const std::int64_t off = (std::int64_t(cs) * H + h) * W + w;
        for (std::int32_t cl = ch0; cl < nch; cl += phases) f(cl * t_.plane + e, off + cl * hw);
      }
    } else {
      const std::int32_t items = nch * t_.rows * t_.chunks;
      for (std::int32_t item = tid_; item < items; item += t_.threads) {
        std::int32_t cl, rest, i, j;
        t_.div_items.divmod(item, cl, rest);
        t_.div_chunks.divmod(rest, i, j);
        const std::int32_t h = h0_ + i, w = w0_ + j;
        if (static_cast<std::uint32_t>(h) >= static_cast<std::uint32_t>(H) ||
            static_cast<std::uint32_t>(w) >= static_cast<std::uint32_t>(W))
          continue;
        f(cl * t_.plane + i * t_.pitch + j, (std::int64_t(h) * W + w) * prm_.C + cs + cl);
      }
    }
  }

  /// Writes +0.0 over every buffer (stages * cb * plane elements): the padding, which no stage overwrites.
  /// A __syncthreads() must follow before the first issue.
  __device__ void zero_fill() {
    const int words = static_cast<int>((static_cast<std::size_t>(stages) * t_.cb * t_.plane * sizeof(T)) / 16);
    uint4* p = reinterpret_cast<uint4*>(smem_);
    for (int i = tid_; i < words; i += t_.threads) p[i] = make_uint4(0, 0, 0, 0);
  }

  /// Starts the pipeline: issues stages 0 ... stages - 2 (one cp.async commit group each).
  __device__ void prologue() {
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) issue(s);
  }

  /// Makes this thread's part of stage s complete in buffer(s) (waits for its cp.async group). A
  /// __syncthreads() must follow before any thread reads the buffer.
  __device__ void land(int) { convred::detail::cp_async_wait<stages - 2>(); }

  /// Starts stage s (nothing past the last stage; cp.async then still closes an empty group). Its buffer
  /// must no longer be read: call after the barrier that follows land(s - stages + 1).
  __device__ void issue(int s) {
    if (s < stage_count()) {
      T* buf = buffer(s);
      const T* x = x_;
      if (t_.vec > 1) {
        const int bytes = t_.vec * static_cast<int>(sizeof(T));
        for_each_item(s, [&](int e, std::int64_t off) {
          const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(buf + e));
          if (bytes == 16)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(x + off) : "memory");
          else
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(x + off) : "memory");
        });
      } else if constexpr (sizeof(T) >= 4) {
        for_each_item(s, [&](int e, std::int64_t off) { convred::detail::cp_async_or_zero(buf + e, x + off, true); });
      } else {
        for_each_item(s, [&](int e, std::int64_t off) { buf[e] = convred::detail::load_or_zero(x + off, true); });
      }
    }
    convred::detail::cp_async_commit();
  }

  /// Waits for every copy this thread still has in flight (before the buffers are reused).
  __device__ void drain() { convred::detail::cp_async_wait<0>(); }

 private:
  const conv_params<T>& prm_;
  const direct_tiling& t_;
  T* smem_;
  int tid_;
  int c0_, c1_;
  const T* x_;  // image n of x
  std::int32_t h0_, w0_;  // x row and column of patch element (0, 0)
};

}  // namespace convred::block
