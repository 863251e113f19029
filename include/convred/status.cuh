/// @file status.cuh
/// @brief Status codes returned by every convred host entry point.
#pragma once

namespace convred {

/// @brief Result of a convred host call. Host entry points never throw; they return one of these.
///
/// `success` means the call's kernel was enqueued on the stream (or there was no work, e.g. N = 0).
/// Every other code, `cuda_error` included, means this call enqueued nothing and wrote nothing:
/// - the argument codes (`null_pointer` ... `invalid_argument`, `workspace_too_small`) are found on the
///   host, before any CUDA call;
/// - `cuda_error`: either a CUDA error was already pending on this thread when the call was about to
///   launch (checked with `cudaPeekAtLastError()` before the launch: nothing is launched and the error is
///   left pending), or a CUDA call preparing the launch failed, or the launch itself was refused (an
///   error of `<<<...>>>` means the kernel was not enqueued). convred does not clear such an error: the
///   caller reads it with `cudaGetLastError()` as usual. (A pending no-device error, e.g. the sticky
///   "insufficient driver" of a machine without a GPU driver, gives `no_device` instead.)
///
/// A status never reports what happens while the kernel runs: faults during the (asynchronous) execution
/// surface at a later synchronising CUDA call, as for any kernel.
enum class status : int {
  success = 0,             ///< Work was launched (or there was no work, e.g. N = 0).
  null_pointer,            ///< A pointer that the call needs (x, w, y, ...) is null.
  invalid_shape,           ///< A size is out of range: N < 0, or C, H, W, K, R, S < 1, or one above 2^40.
  invalid_output_size,     ///< The kernel (with dilation) is larger than the padded input: P or Q < 1.
  invalid_stride,          ///< stride_h or stride_w < 1.
  invalid_dilation,        ///< dilation_h or dilation_w < 1.
  invalid_padding,         ///< pad_h or pad_w < 0.
  invalid_groups,          ///< groups < 1, or C or K not divisible by groups.
  size_overflow,           ///< A size past the kernels' limits: a tensor's element count or byte size overflows
                           ///< int64, a channel or GEMM_K index or an input coordinate reaches 2^30 (32-bit
                           ///< indices; validate() lists them), a workspace or the launch grid is too large.
  misaligned_pointer,      ///< A pointer is not aligned to its element type.
  indices_not_supported,   ///< An index output was given for an op that produces no index (e.g. sum).
  invalid_layout,          ///< The layout enum is out of range.
  overlapping_buffers,     ///< An output overlaps an input or another output.
  invalid_argument,        ///< Any other invalid argument (e.g. a scalar parameter out of range).
  no_device,               ///< No CUDA device, or the current device is older than the kernel needs.
  cuda_error,              ///< A CUDA error was pending before the launch, or a CUDA call or the launch failed.
  workspace_too_small,     ///< A caller-provided workspace (the packed filter) is smaller than the call needs.
  not_prepared             ///< conv2d_reduce_plan::run before a successful prepare (no weights yet).
};

/// @brief Human-readable name and explanation of a status code (static storage, never null).
inline const char* to_string(status s) noexcept {
  switch (s) {
    case status::success: return "success";
    case status::null_pointer: return "null_pointer: a required tensor pointer is null";
    case status::invalid_shape: return "invalid_shape: N must be >= 0 and C, H, W, K, R, S >= 1 (each at most 2^40)";
    case status::invalid_output_size:
      return "invalid_output_size: dilated kernel larger than the padded input (output size P or Q < 1)";
    case status::invalid_stride: return "invalid_stride: stride must be >= 1";
    case status::invalid_dilation: return "invalid_dilation: dilation must be >= 1";
    case status::invalid_padding: return "invalid_padding: padding must be >= 0";
    case status::invalid_groups: return "invalid_groups: groups must be >= 1 and divide both C and K";
    case status::size_overflow:
      return "size_overflow: a size past the kernels' limits (a tensor's bytes past int64, a channel, GEMM_K or "
             "coordinate index at 2^30 or more, a workspace or launch grid too large)";
    case status::misaligned_pointer: return "misaligned_pointer: a pointer is not aligned to its element type";
    case status::indices_not_supported:
      return "indices_not_supported: an index output was given for a reduction op without an index";
    case status::invalid_layout: return "invalid_layout: layout must be NCHW or NHWC";
    case status::overlapping_buffers: return "overlapping_buffers: an output overlaps an input or another output";
    case status::invalid_argument: return "invalid_argument";
    case status::no_device: return "no_device: no CUDA device, or the device is older than the kernel needs";
    case status::cuda_error:
      return "cuda_error: a CUDA error was pending before the launch, or a CUDA call or the launch failed; nothing "
             "was launched (see cudaGetLastError())";
    case status::workspace_too_small:
      return "workspace_too_small: the packed-filter buffer is smaller than packed_filter_bytes() for this problem";
    case status::not_prepared:
      return "not_prepared: conv2d_reduce_plan::run was called before a successful prepare() (no weights)";
  }
  return "unknown status";
}

}  // namespace convred
