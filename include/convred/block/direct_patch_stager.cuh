/// @file block/direct_patch_stager.cuh
/// @brief Stages the input patches of the tiled direct kernel (C/groups == 1) into a ring of shared-memory
/// buffers, one pipeline stage (direct_tiling::cb input channels) at a time, with coalesced loads and the
/// zero padding written as zeros.
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
/// q0*stride_w - pad_w + j), written as patch[cl * plane + i * pitch + j]; elements outside x (padding,
/// or past the image's edge) are written as +0.0, so that padded taps compute 0 * w exactly as the
/// float64 reference does. Stage s lands in buffer s % stages.
///
/// Loads are coalesced: NCHW x stages lines of one patch row (cols contiguous elements), NHWC x lines of
/// one patch pixel's stage channels (contiguous in x), 2^line_log2 lanes per line. 4- and 8-byte types
/// copy with cp.async (no register held while in flight; `stages` = 3 buffers, two stages in flight while
/// one is computed). 2-byte types (__half, __nv_bfloat16: cp.async copies at least 4 bytes) load the next
/// stage into `slots` registers per thread while the current one is computed and store them when it is
/// landed (`stages` = 2); the host keeps cb * rows * cols <= slots * threads for them.
///
/// Protocol, every thread of the block, for s = 0 ... stage_count() - 1:
///   prologue(); for (s ...) { land(s); __syncthreads(); issue(s + stages - 1); compute on buffer(s); }
///   drain();
/// (issue past the last stage only closes an empty cp.async group). The element enumerations
/// (for_each_line_element, for_slot) are host-device, so that the host suite can stage a patch on the host
/// exactly as the kernel does.
/// @tparam T element type (float, double, __half, __nv_bfloat16), stored in shared memory as it is
template <class T>
class direct_patch_stager {
 public:
  static constexpr bool async = sizeof(T) >= 4;  ///< cp.async copies (4- and 8-byte types), else registers
  static constexpr int stages = async ? 3 : 2;   ///< buffers in the ring
  static constexpr int slots = async ? 0 : 16;   ///< registers per thread for one stage (2-byte types)

  /// Binds the stager to block tile b of problem prm with tiling t; smem: the stage buffers (stages * cb *
  /// plane elements, 16-byte aligned); tid: this thread's index in the block.
  __host__ __device__ direct_patch_stager(const conv_params<T>& prm, const direct_tiling& t, const direct_tile& b,
                                          T* smem, int tid)
      : prm_(prm), t_(t), smem_(smem), tid_(tid), c0_(b.c0), c1_(b.c1) {
    x_ = prm.x + b.n * prm.C * prm.H * prm.W;
    h0_ = std::int64_t(b.p0) * prm.stride_h - prm.pad_h;
    w0_ = std::int64_t(b.q0) * prm.stride_w - prm.pad_w;
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

  /// Calls f(e, offset, inside) for each element this thread stages in stage s by lines: e its index in
  /// the stage's buffer, offset its element offset from image n's first element of x, inside whether it
  /// lies in x (else it is written as zero and offset is not meaningful). Threads past the last whole
  /// group of 2^line_log2 lanes stage nothing.
#pragma nv_exec_check_disable  // f is a host lambda on the host (tests), a device one in the kernel
  template <class F>
  __host__ __device__ void for_each_line_element(int s, F&& f) const {
    const int g = 1 << t_.line_log2, groups = t_.threads >> t_.line_log2;
    const int group = tid_ >> t_.line_log2, lane = tid_ & (g - 1);
    if (group >= groups) return;
    const int cs = stage_first(s), nch = stage_channels(s);
    const std::int64_t H = prm_.H, W = prm_.W;
    if (prm_.x_layout == layout::nchw) {
      const int lines = nch * t_.rows;  // line (cl, i): patch row i of stage channel cl
      for (int line = group; line < lines; line += groups) {
        std::int32_t cl, i;
        t_.div_rows.divmod(line, cl, i);
        const std::int64_t h = h0_ + i;
        const bool row_in = h >= 0 && h < H;
        const std::int64_t src = ((cs + cl) * H + h) * W + w0_;
        const int dst = cl * t_.plane + i * t_.pitch;
        for (int j = lane; j < t_.cols; j += g) {
          const std::int64_t w = w0_ + j;
          f(dst + j, src + j, row_in && w >= 0 && w < W);
        }
      }
    } else {
      const int lines = t_.rows * t_.cols;  // line (i, j): patch pixel (i, j), its nch channels
      for (int line = group; line < lines; line += groups) {
        std::int32_t i, j;
        t_.div_cols.divmod(line, i, j);
        const std::int64_t h = h0_ + i, w = w0_ + j;
        const bool in = h >= 0 && h < H && w >= 0 && w < W;
        const std::int64_t src = (h * W + w) * prm_.C + cs;
        const int dst = i * t_.pitch + j;
        for (int cl = lane; cl < nch; cl += g) f(dst + cl * t_.plane, src + cl, in);
      }
    }
  }

  /// Calls f(e, offset, inside) as for_each_line_element for slot `slot` of this thread in stage s (the
  /// register path): flat element tid + slot * threads of the stage, in the order (channel, row, column)
  /// for NCHW and (row, column, channel of cb) for NHWC; nothing when past the stage's elements.
#pragma nv_exec_check_disable  // as for_each_line_element
  template <class F>
  __host__ __device__ void for_slot(int s, int slot, F&& f) const {
    const int flat = tid_ + slot * t_.threads;
    const int cs = stage_first(s), nch = stage_channels(s);
    const std::int64_t H = prm_.H, W = prm_.W;
    std::int32_t cl, i, j;
    if (prm_.x_layout == layout::nchw) {
      if (flat >= nch * t_.rows * t_.cols) return;
      std::int32_t line;
      t_.div_cols.divmod(flat, line, j);
      t_.div_rows.divmod(line, cl, i);
    } else {
      std::int32_t pixel;
      t_.div_cb.divmod(flat, pixel, cl);
      if (pixel >= t_.rows * t_.cols || cl >= nch) return;
      t_.div_cols.divmod(pixel, i, j);
    }
    const std::int64_t h = h0_ + i, w = w0_ + j;
    const bool in = h >= 0 && h < H && w >= 0 && w < W;
    const std::int64_t src = prm_.x_layout == layout::nchw ? ((cs + cl) * H + h) * W + w : (h * W + w) * prm_.C + cs + cl;
    f(cl * t_.plane + i * t_.pitch + j, src, in);
  }

  /// Starts the pipeline: cp.async issues stages 0 ... stages - 2 (one commit group each); the register
  /// path loads stage 0.
  __device__ void prologue() {
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) issue(s);
  }

  /// Makes this thread's part of stage s complete in buffer(s) (cp.async: waits for its group; registers:
  /// stores them). A __syncthreads() must follow before any thread reads the buffer.
  __device__ void land(int s) {
    if constexpr (async) {
      convred::detail::cp_async_wait<stages - 2>();
    } else {
      T* buf = buffer(s);
#pragma unroll
      for (int j = 0; j < slots; ++j)
        for_slot(s, j, [&](int e, std::int64_t, bool) { buf[e] = pending_[j]; });
    }
  }

  /// Starts stage s (nothing past the last stage; cp.async then still closes an empty group). Its buffer
  /// must no longer be read: call after the barrier that follows land(s - stages + 1).
  __device__ void issue(int s) {
    const bool live = s < stage_count();
    if constexpr (async) {
      if (live) {
        T* buf = buffer(s);
        for_each_line_element(s, [&](int e, std::int64_t off, bool in) {
          convred::detail::cp_async_or_zero(buf + e, in ? x_ + off : x_, in);
        });
      }
      convred::detail::cp_async_commit();
    } else {
      if (!live) return;
#pragma unroll
      for (int j = 0; j < slots; ++j)
        for_slot(s, j, [&](int, std::int64_t off, bool in) {
          pending_[j] = convred::detail::load_or_zero(in ? x_ + off : x_, in);
        });
    }
  }

  /// Waits for every copy this thread still has in flight (before the buffers are reused).
  __device__ void drain() {
    if constexpr (async) convred::detail::cp_async_wait<0>();
  }

 private:
  const conv_params<T>& prm_;
  const direct_tiling& t_;
  T* smem_;
  int tid_;
  int c0_, c1_;
  const T* x_;  // image n of x
  std::int64_t h0_, w0_;
  T pending_[slots > 0 ? slots : 1];
};

}  // namespace convred::block
