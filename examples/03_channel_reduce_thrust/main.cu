/// @file examples/03_channel_reduce_thrust/main.cu
/// @brief convred example 03: reduce across the channels of a tensor you already have on the GPU, in a
/// `thrust::device_vector`, stored NCHW or NHWC (PyTorch's channels_last).
///
/// convred::device::channel_reduce is the reduction half of the fused kernel on its own: given x (N, C, H, W)
/// it writes y (N, 1, H, W) = R over c of e(x[n, c, h, w], c), reading x once. This example fills one
/// logical tensor x of shape (3, 37, 19, 23) with random floats, keeps it on the GPU both as NCHW and as
/// NHWC (two thrust::device_vector), and runs on each layout
///   - argmax over the channels, with the int64 indices (torch.max(x, dim=1) values and indices), and
///   - the mean of 0.5 * x over the channels (epilogue::scale, then op::mean),
/// then checks every pixel against convred::reference::channel_reduce (float64): argmax exactly (the value
/// is an element of x and the index the lowest among ties), the mean within the fp32 tolerance
/// (docs/tolerances.md). Both layouts must also give the same argmax.
///
/// Usage: 03_channel_reduce_thrust [--seed N]   (fresh random data unless --seed is given)
/// Output: one line per run, then `Passed` or `Failed`. Exit code 0 Passed, 1 Failed or error, 2 no device.
#include <cuda_runtime.h>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <convred/device/channel_reduce.cuh>
#include <convred/reference/conv2d.hpp>

#include "../common/cli.hpp"
#include "../common/cuda_check.hpp"
#include "../common/host_data.hpp"
#include "../common/verify.hpp"

namespace ex = convred_examples;

namespace {

/// Reduces x (already on the GPU, in layout p.x_layout) with argmax and with the mean of 0.5 * x; checks
/// both against float64 computed from hx, the same tensor on the host in the same layout. Returns the argmax
/// indices (for the cross-layout comparison) through `idx_out`.
bool reduce_and_check(const convred::channel_reduce_problem& p, const thrust::device_vector<float>& x,
                      const std::vector<float>& hx, std::vector<std::int64_t>& idx_out) {
  const char* lname = p.x_layout == convred::layout::nchw ? "NCHW" : "NHWC";
  const std::size_t ny = static_cast<std::size_t>(p.y_elements());
  thrust::device_vector<float> y(ny);
  thrust::device_vector<std::int64_t> idx(ny);

  // argmax with indices: y and idx are (N, 1, H, W) whatever the layout of x.
  convred::status st = convred::device::channel_reduce(p, thrust::raw_pointer_cast(x.data()),
                                                       thrust::raw_pointer_cast(y.data()),
                                                       thrust::raw_pointer_cast(idx.data()), convred::op::argmax{});
  if (st != convred::status::success) {
    std::printf("%s argmax: channel_reduce returned %s\n", lname, convred::to_string(st));
    return false;
  }
  thrust::host_vector<float> hy = y;  // copies synchronise with the default stream the kernel ran on
  thrust::host_vector<std::int64_t> hi = idx;
  std::vector<double> ref(ny);
  std::vector<std::int64_t> ref_idx(ny);
  convred::reference::channel_reduce(p, hx.data(), ref.data(), ref_idx.data(), convred::op::argmax{});
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < ny; ++i)
    if (static_cast<double>(hy[i]) != ref[i] || hi[i] != ref_idx[i]) ++wrong;
  std::printf("%s argmax     : %lld of %zu pixels differ from float64 (values and indices must be exact)\n", lname,
              (long long)wrong, ny);
  idx_out.assign(hi.begin(), hi.end());

  // mean of 0.5 * x: an epilogue from convred::epilogue, then op::mean (fp32 sum / C).
  const convred::epilogue::scale<float> half_scale{0.5f};
  st = convred::device::channel_reduce(p, thrust::raw_pointer_cast(x.data()), thrust::raw_pointer_cast(y.data()),
                                       static_cast<std::int64_t*>(nullptr), convred::op::mean{}, half_scale);
  if (st != convred::status::success) {
    std::printf("%s mean: channel_reduce returned %s\n", lname, convred::to_string(st));
    return false;
  }
  hy = y;
  convred::reference::channel_reduce(p, hx.data(), ref.data(), static_cast<std::int64_t*>(nullptr),
                                     convred::op::mean{}, half_scale);
  // mag of a mean: the mean of |0.5 * x| over the channels.
  ex::value_check check{ex::tolerance<float>(), ex::unit_roundoff<float>()};
  convred::conv2d_problem shape;  // for reference::x_offset (layout arithmetic)
  shape.N = p.N, shape.C = p.C, shape.H = p.H, shape.W = p.W, shape.x_layout = p.x_layout;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t h = 0; h < p.H; ++h)
      for (std::int64_t w = 0; w < p.W; ++w) {
        double mag = 0;
        for (std::int64_t c = 0; c < p.C; ++c)
          mag += 0.5 * std::fabs(hx[static_cast<std::size_t>(convred::reference::x_offset(shape, n, c, h, w))]);
        const std::size_t o = static_cast<std::size_t>((n * p.H + h) * p.W + w);
        check.add(static_cast<std::int64_t>(o), hy[o], ref[o], mag / static_cast<double>(p.C));
      }
  check.print((std::string(lname) + " mean").c_str());
  return wrong == 0 && check.ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = ex::fresh_seed();
  const char* about =
      "convred::device::channel_reduce (argmax, mean) of a tensor held in "
      "thrust::device_vector, NCHW and NHWC, checked against float64.";
  if (const int rc = ex::parse_seed_only(argc, argv, about, seed); rc >= 0) return rc == 0 ? 0 : ex::finish(false);

  convred::channel_reduce_problem p;
  p.N = 3, p.C = 37, p.H = 19, p.W = 23;
  // One logical (N, C, H, W) tensor; a few exact ties so that "lowest index wins" is exercised.
  std::vector<float> hx = ex::random_vector<float>(static_cast<std::size_t>(p.x_elements()), 0.0, seed, 1);
  for (std::size_t i = 0; i + 7 * p.H * p.W < hx.size(); i += 97) hx[i + 7 * p.H * p.W] = hx[i];
  std::printf("03_channel_reduce_thrust: x (3, 37, 19, 23) float; random data, seed %llu\n",
              static_cast<unsigned long long>(seed));

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "03_channel_reduce_thrust: no CUDA device; this example needs an NVIDIA GPU (sm_80+)\n");
    return 2;
  }
  try {
    // The tensor as it might come from an earlier step of a pipeline: on the GPU, in either layout.
    const thrust::device_vector<float> x_nchw(hx.begin(), hx.end());
    const std::vector<float> hx_nhwc = ex::nchw_to_nhwc(hx, p.N, p.C, p.H, p.W);
    const thrust::device_vector<float> x_nhwc(hx_nhwc.begin(), hx_nhwc.end());

    std::vector<std::int64_t> idx_nchw, idx_nhwc;
    p.x_layout = convred::layout::nchw;
    const bool ok_nchw = reduce_and_check(p, x_nchw, hx, idx_nchw);
    p.x_layout = convred::layout::nhwc;
    const bool ok_nhwc = reduce_and_check(p, x_nhwc, hx_nhwc, idx_nhwc);
    const bool same = idx_nchw == idx_nhwc;
    std::printf("layouts     : NCHW and NHWC argmax indices %s\n", same ? "identical" : "DIFFER");
    return ex::finish(ok_nchw && ok_nhwc && same);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "03_channel_reduce_thrust: %s\n", e.what());
    return ex::finish(false);
  }
}
