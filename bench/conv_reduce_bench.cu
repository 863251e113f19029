/// @file bench/conv_reduce_bench.cu
/// @brief Side-by-side benchmark (issue 3): convred's fused conv2d -> scale -> min over channels for every
/// math policy, convred unfused (conv2d + channel_reduce), and cuDNN's best forward convolution (TF32 and
/// strict fp32, NCHW and NHWC) followed by convred's channel reduction, on the seed case and three real layer
/// shapes, in one process. Prints a table and writes JSON (read by bench/pytorch_baseline.py).
///
/// The shape suite (--cases suite, suite.n1, suite.train): 16 convolutions of real networks (ResNet-50,
/// VGG-16, U-Net, MobileNetV2, ConvNeXt-T, the seed), each at batch 1 and at a training batch, with fewer
/// rows per case: the planner (device::conv2d_reduce_plan, which picks the kernel and says which and why;
/// that description is the row's "algo") in math::tf32, math::bf16 and math::accurate ("fp32-accurate"),
/// and cuDNN TF32 NCHW / NHWC + convred's reduction. bench/NOTES.md, "Shape suite", lists the layers.
///
/// The job of every variant: y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)[0], x fp32 NCHW.
///
/// Method
/// - Data: fresh per case. x ~ N(0,1) (a counter-based hash + Box-Muller on the device, no exact zeros);
///   W, b ~ U(-1/sqrt(fan_in), +1/sqrt(fan_in)), fan_in = C/groups*R*S, as torch.nn.Conv2d initialises them.
/// - Timing: CUDA events around each run on the default stream; before every timed run the L2 is flushed
///   (cudaMemsetAsync of a buffer of max(256 MiB, 4 x L2), outside the events, as triton.testing.do_bench
///   does) and the GPU is held 0.5 ms by a one-thread spin kernel, so that the run is fully enqueued before
///   its start event is reached (GPU time, without host enqueue gaps; as nvbench's blocking kernel);
///   --warmup untimed runs first (after one correctness run); the median (and min) of --iters runs.
/// - Error: ||y - ref||_2 / ||ref||_2 over --samples output pixels (the 4 corners, edge midpoints and centre
///   of each sampled image, the rest random) of up to 4 images (first, last, two random), with the float64
///   reference convred::reference::conv2d_reduce_at. y is poisoned (NaN) before the checked run, so an
///   unwritten pixel shows as a non-finite error.
/// - TFLOP/s = 2*N*P*Q*K*(C/groups)*R*S / t (direct-convolution FLOPs, also for cuDNN's Winograd/FFT);
///   % of ceiling against the rates measured on the H200 (docs/performance.md): FFMA 50.5, TF32 394, 3xTF32 394/3,
///   BF16/FP16 756 TFLOP/s; the standalone reduction against the 4.18 TB/s device-copy bandwidth.
/// - cuDNN (optional, CONVRED_HAVE_CUDNN=1): legacy cudnnConvolutionForward with the algorithm chosen by
///   cudnnFindConvolutionForwardAlgorithmEx (workspace: the largest any algorithm asks for, capped by
///   --cudnn-ws-gb), math CUDNN_DEFAULT_MATH ("cudnn tf32": TF32 tensor cores permitted, what PyTorch uses
///   when torch.backends.cudnn.allow_tf32 is True; CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION is not used because
///   it also permits fp32 -> fp16 down-conversion) or CUDNN_FMA_MATH ("cudnn fp32": strict FP32, what PyTorch
///   uses with allow_tf32 False). NHWC: x is converted to NHWC and W to KRSC once, outside the timing; the
///   conv output is then NHWC too. The conv runs without bias; the bias is added in the channel reduction's
///   epilogue, y = min_k((conv + b[k]) * 2) -- one pass over the conv output, as torch.compile does -- rather
///   than cudnnAddTensor (an extra read+write of the whole output) or cudnnConvolutionBiasActivationForward
///   (which restricts the algorithm to IMPLICIT_PRECOMP_GEMM). Rows "conv only" time the convolution alone.
///
/// Exit code: 0 every variant ran and every convred variant met its tolerance (docs/tolerances.md); 1 a failure (a
/// status, CUDA or cuDNN error, or a convred error above tolerance; all are printed); 2 no usable CUDA device;
/// 3 bad command line.

#include <cuda_runtime.h>
#if defined(CONVRED_HAVE_CUDNN) && CONVRED_HAVE_CUDNN
#include <cudnn.h>
#define BENCH_HAVE_CUDNN 1
#else
#define BENCH_HAVE_CUDNN 0
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <convred/device/channel_reduce.cuh>
#include <convred/device/conv2d_reduce.cuh>
#include <convred/functional.cuh>
#include <convred/device/conv2d_reduce_packed.cuh>
#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/policy.cuh>
#include <convred/problem.cuh>
#include <convred/reference/conv2d.hpp>

#include "../examples/common/cli.hpp"         // command-line helpers shared with the examples
#include "../examples/common/cuda_check.hpp"  // shared with the examples
#include "timing.cuh"                          // the GPU timing, shared with family_bench.cu
#include <convred/status.cuh>

namespace {

constexpr const char* kProg = "conv_reduce_bench";

// Ceilings measured on the H200 (docs/performance.md).
constexpr double kFfmaTflops = 50.5;
constexpr double kTf32Tflops = 394.0;
constexpr double kBf16Tflops = 756.0;  // also FP16
constexpr double kCopyGBs = 4180.0;    // device copy, read + write
constexpr float kScale = 2.0f;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ------------------------------------------------------------------------------------------------------
// Errors
// ------------------------------------------------------------------------------------------------------

using convred_examples::parse_int;
using convred_examples::usage_error;


/// Throws on a convred status other than success, naming the call (and the CUDA error for cuda_error).
void check_status(convred::status s, const std::string& what) {
  if (s == convred::status::success) return;
  std::string msg = "convred " + what + " returned status " + convred::to_string(s);
  if (s == convred::status::cuda_error) {
    const cudaError_t e = cudaGetLastError();
    msg += std::string(" (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  }
  throw std::runtime_error(msg);
}

#if BENCH_HAVE_CUDNN
void check_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN error ") + cudnnGetErrorString(s) + " in " + call + " at " + file +
                             ":" + std::to_string(line));
}
#define CHECK_CUDNN(call) check_cudnn((call), #call, __FILE__, __LINE__)
#endif

// ------------------------------------------------------------------------------------------------------
// Device buffers and data
// ------------------------------------------------------------------------------------------------------

/// Owning device allocation of n elements of T.
template <class T>
struct dbuf {
  T* p = nullptr;
  std::size_t n = 0;
  dbuf() = default;
  explicit dbuf(std::size_t count) { alloc(count); }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
  ~dbuf() { release(); }
  void alloc(std::size_t count) {
    release();
    if (count) CHECK_CUDA(cudaMalloc(&p, count * sizeof(T)));
    n = count;
  }
  void release() {
    if (p) cudaFree(p);
    p = nullptr;
    n = 0;
  }
  std::size_t bytes() const { return n * sizeof(T); }
};

__host__ __device__ inline std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// x[i] ~ N(0,1): a splitmix64 hash of (seed, i) gives two 24-bit uniforms, Box-Muller gives the normal.
/// Exact zeros are replaced by 0.5 (random data never holds a run of zeros by accident).
__global__ void fill_normal_kernel(float* x, std::int64_t n, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t h = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
    const float u1 = (static_cast<float>(static_cast<std::uint32_t>(h >> 40)) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>(static_cast<std::uint32_t>(h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
    float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (v == 0.0f) v = 0.5f;
    x[i] = v;
  }
}

void fill_normal(float* x, std::int64_t n, std::uint64_t seed) {
  const std::int64_t blocks = std::min<std::int64_t>((n + 255) / 256, 132 * 16);
  fill_normal_kernel<<<static_cast<unsigned>(std::max<std::int64_t>(blocks, 1)), 256>>>(x, n, seed);
  CHECK_CUDA(cudaGetLastError());
}

/// out (N, H, W, C) = in (N, C, H, W): one pass, used once per case outside any timing.
__global__ void nchw_to_nhwc_kernel(const float* in, float* out, std::int64_t N, std::int64_t C, std::int64_t HW) {
  const std::int64_t total = N * C * HW, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += stride) {
    const std::int64_t c = o % C, t = o / C, hw = t % HW, n = t / HW;
    out[o] = in[(n * C + c) * HW + hw];
  }
}

/// out[i*K + k] = full[(n*K + k)*PQ + pq] for pix[i] = n*PQ + pq (an NCHW (N,K,P,Q) tensor; K = 1 reads y).
__global__ void gather_kernel(const float* full, std::int64_t K, std::int64_t PQ, const std::int64_t* pix, int npix,
                              float* out) {
  const std::int64_t total = static_cast<std::int64_t>(npix) * K, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const std::int64_t i = t / K, k = t % K, m = pix[i], n = m / PQ, pq = m % PQ;
    out[t] = full[(n * K + k) * PQ + pq];
  }
}

/// Host values uniform in (-bound, bound), exact zeros replaced by bound / 2.
std::vector<float> uniform_host(std::size_t n, double bound, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> d(-bound, bound);
  std::vector<float> v(n);
  for (auto& e : v) {
    float f = static_cast<float>(d(gen));
    if (f == 0.0f) f = static_cast<float>(bound / 2);
    e = f;
  }
  return v;
}

/// Does nothing: the timing floor (--floor).
__global__ void empty_kernel() {}

// ------------------------------------------------------------------------------------------------------
// Options, cases, results
// ------------------------------------------------------------------------------------------------------

struct options {
  std::vector<std::string> cases = {"seed", "resnet3x3", "stem7x7", "proj1x1"};
  int iters = 30;
  int warmup = 3;
  int samples = 512;
  std::uint64_t seed = 2026;
  std::string json = "bench_results.json";
  bool cudnn = true;
  bool fused_nhwc = false;
  bool list_cases = false;
  /// diagnosis: the wgmma kernel's tiles in the planner rows (convred::device::plan_options, see
  /// plan_options_of): 0 the time model, 1 row tiles, 2 flat tiles, 3 direct tiles (where they serve)
  int wgmma_tiles = 0;
  int wgmma_pass = 0;
  /// diagnosis: 0 the time model; -1 the wgmma kernel wherever it serves (not the mma.sync split); z > 0
  /// that, in partial mode with z GEMM_K ranges
  int wgmma_splits = 0;
  /// diagnosis: the wgmma kernel's split-K tail: 0 the time model, -1 never, t > 0 the last t tiles (with
  /// wgmma_tail_splits GEMM_K ranges, 0: the model's)
  long wgmma_tail = 0;
  int wgmma_tail_splits = 0;
  /// diagnosis: time 1, 2 and 3 empty kernels (one block) the way every row is timed, print, exit
  bool floor = false;
  double cudnn_ws_gb = 16.0;
};

/// The planner options of the diagnosis switches (--wgmma-tiles, --wgmma-pass, --wgmma-splits,
/// --wgmma-tail): the planner rows make their conv2d_reduce_plan with them (all defaults: the time model).
convred::device::plan_options plan_options_of(const options& o) {
  convred::device::plan_options po;
  po.tiles = static_cast<convred::device::wgmma_tiling>(o.wgmma_tiles);
  po.pass = static_cast<convred::device::wgmma_pass_mode>(o.wgmma_pass);
  po.splits = o.wgmma_splits;
  po.tail = o.wgmma_tail;
  po.tail_splits = o.wgmma_tail_splits;
  return po;
}

struct bench_case {
  std::string name;
  convred::conv2d_problem p;
  bool suite = false;   ///< a case of the shape suite (planner and cuDNN TF32 rows only)
  bool extra = false;   ///< a layer outside the suite, run as suite cases are (group "extra")
  std::string layer;    ///< suite: the layer's name without the batch suffix, e.g. "resnet50.conv1"
  std::string source;   ///< suite: the network and layer it comes from, in words
};

convred::conv2d_problem make_problem(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t K,
                                     std::int64_t R, std::int64_t S, std::int64_t pad, std::int64_t stride,
                                     std::int64_t groups = 1) {
  convred::conv2d_problem p;
  p.N = N, p.C = C, p.H = H, p.W = W, p.K = K, p.R = R, p.S = S;
  p.pad_h = p.pad_w = pad;
  p.stride_h = p.stride_w = stride;
  p.dil_h = p.dil_w = 1;
  p.groups = groups;
  p.x_layout = convred::layout::nchw;
  return p;
}

/// A layer of the shape suite: one convolution of a real network (torchvision's module names where there
/// are any), run at batch 1 and at a training batch. Keep in step with SUITE in bench/pytorch_baseline.py.
struct suite_layer {
  const char* name;    ///< case names are name + ".n1" and name + ".n" + train_n
  const char* source;  ///< network and layer in words
  std::int64_t C, H, W, K, R, S, pad, stride, groups, train_n;
};

// clang-format off
const suite_layer kSuite[] = {
  // name, source,
  //    C,   H,   W,    K, R, S, pad, stride, groups, training batch
  {"resnet50.conv1", "ResNet-50 stem conv1, 7x7 stride 2, 3->64 at 224",
      3, 224, 224,   64, 7, 7,   3,      2,      1, 32},
  {"resnet50.layer1.0.conv2", "ResNet-50 layer1 3x3, 64->64 at 56",
     64,  56,  56,   64, 3, 3,   1,      1,      1, 32},
  {"resnet50.layer2.1.conv2", "ResNet-50 layer2 3x3, 128->128 at 28",
    128,  28,  28,  128, 3, 3,   1,      1,      1, 32},
  {"resnet50.layer2.0.conv2", "ResNet-50 layer2.0 3x3 stride 2, 128->128 at 56 (-> 28)",
    128,  56,  56,  128, 3, 3,   1,      2,      1, 32},
  {"resnet50.layer3.1.conv2", "ResNet-50 layer3 3x3, 256->256 at 14",
    256,  14,  14,  256, 3, 3,   1,      1,      1, 32},
  {"resnet50.layer4.1.conv2", "ResNet-50 layer4 3x3, 512->512 at 7",
    512,   7,   7,  512, 3, 3,   1,      1,      1, 32},
  {"resnet50.layer1.0.downsample", "ResNet-50 layer1.0 projection 1x1, 64->256 at 56",
     64,  56,  56,  256, 1, 1,   0,      1,      1, 32},
  {"resnet50.layer3.0.downsample", "ResNet-50 layer3.0 projection 1x1 stride 2, 512->1024 at 28",
    512,  28,  28, 1024, 1, 1,   0,      2,      1, 32},
  {"vgg16.conv1_2", "VGG-16 conv1_2 3x3, 64->64 at 224",
     64, 224, 224,   64, 3, 3,   1,      1,      1, 32},
  {"vgg16.conv3_2", "VGG-16 conv3_2 3x3, 256->256 at 56",
    256,  56,  56,  256, 3, 3,   1,      1,      1, 32},
  {"unet.enc1", "U-Net encoder 1, second 3x3, 64->64 at 256",
     64, 256, 256,   64, 3, 3,   1,      1,      1, 16},
  {"unet.bottleneck", "U-Net bottleneck 3x3, 512->1024 at 32",
    512,  32,  32, 1024, 3, 3,   1,      1,      1, 32},
  {"mobilenetv2.features.2.expand", "MobileNetV2 block 2 pointwise expand 1x1, 24->144 at 56",
     24,  56,  56,  144, 1, 1,   0,      1,      1, 32},
  {"mobilenetv2.features.2.dw", "MobileNetV2 block 2 depthwise 3x3, 144 channels at 56 (groups 144)",
    144,  56,  56,  144, 3, 3,   1,      1,    144, 32},
  {"convnext_t.stages.0.dwconv", "ConvNeXt-T stage 1 depthwise 7x7, 96 channels at 56 (groups 96)",
     96,  56,  56,   96, 7, 7,   3,      1,     96, 32},
  {"seed", "the seed model: 3x3, 64->128 at 256, no padding",
     64, 256, 256,  128, 3, 3,   0,      1,      1, 64},
};

/// Layers outside the suite (--cases extra), run as suite cases are: the other stride-2 1x1 projections
/// of ResNet-50 and batches between 1 and the training batch, where the planner's rules for small
/// problems (direct tiles at stride 2, ping-pong, split-K) change their choice. Not in the suite's
/// summary or in bench/pytorch_baseline.py.
struct extra_layer {
  const char* name;    ///< case names are name + ".n" + each batch
  const char* source;  ///< network and layer in words
  std::int64_t C, H, W, K, stride;  ///< 1x1 filters, no padding
  std::int64_t batches[2];          ///< the batches run
};
const extra_layer kExtra[] = {
  // name, source,
  //    C,  H,  W,    K, stride, batches
  {"resnet50.layer2.0.downsample", "ResNet-50 layer2.0 projection 1x1 stride 2, 256->512 at 56",
      256, 56, 56,  512,      2, {1, 4}},
  {"resnet50.layer3.0.downsample", "ResNet-50 layer3.0 projection 1x1 stride 2, 512->1024 at 28",
      512, 28, 28, 1024,      2, {2, 4}},
  {"resnet50.layer4.0.downsample", "ResNet-50 layer4.0 projection 1x1 stride 2, 1024->2048 at 14",
     1024, 14, 14, 2048,      2, {1, 8}},
};
// clang-format on

/// Every case: the four of issue 3 first, then the suite, layer by layer (training batch, then batch 1),
/// then the extra layers.
std::vector<bench_case> known_cases() {
  auto legacy = [](const char* name, const convred::conv2d_problem& p) {
    bench_case c;
    c.name = name;
    c.p = p;
    return c;
  };
  std::vector<bench_case> v = {legacy("seed", make_problem(64, 64, 256, 256, 128, 3, 3, 0, 1)),
                               legacy("resnet3x3", make_problem(32, 256, 56, 56, 256, 3, 3, 1, 1)),
                               legacy("stem7x7", make_problem(64, 3, 224, 224, 64, 7, 7, 3, 2)),
                               legacy("proj1x1", make_problem(64, 512, 28, 28, 128, 1, 1, 0, 1))};
  for (const suite_layer& l : kSuite)
    for (const std::int64_t n : {l.train_n, std::int64_t(1)}) {
      bench_case c;
      c.name = std::string(l.name) + ".n" + std::to_string(n);
      c.p = make_problem(n, l.C, l.H, l.W, l.K, l.R, l.S, l.pad, l.stride, l.groups);
      c.suite = true;
      c.layer = l.name;
      c.source = l.source;
      v.push_back(std::move(c));
    }
  for (const extra_layer& l : kExtra)
    for (const std::int64_t n : l.batches) {
      bench_case c;
      c.name = std::string(l.name) + ".n" + std::to_string(n);
      c.p = make_problem(n, l.C, l.H, l.W, l.K, 1, 1, 0, l.stride);
      c.extra = true;
      c.source = l.source;
      v.push_back(std::move(c));
    }
  return v;
}

/// Names selected by one --cases item: a case name, or "suite" (every suite case), "suite.n1" (batch 1),
/// "suite.train" (training batch), "extra" (the extra layers). Empty: unknown.
std::vector<std::string> select_cases(const std::string& item) {
  std::vector<std::string> out;
  const bool all = item == "suite", n1 = item == "suite.n1", train = item == "suite.train";
  for (const bench_case& c : known_cases()) {
    if (item == "extra") {
      if (c.extra) out.push_back(c.name);
    } else if (all || n1 || train) {
      if (c.suite && (all || (c.p.N == 1) == n1)) out.push_back(c.name);
    } else if (c.name == item) {
      out.push_back(c.name);
    }
  }
  return out;
}

std::string shape_string(const convred::conv2d_problem& p) {
  std::ostringstream s;
  s << "x(" << p.N << "," << p.C << "," << p.H << "," << p.W << ") -> K=" << p.K << " " << p.R << "x" << p.S;
  if (p.stride_h != 1) s << " stride " << p.stride_h;
  if (p.pad_h != 0) s << " pad " << p.pad_h;
  if (p.groups != 1) s << " groups " << p.groups;
  s << " -> y(" << p.N << ",1," << p.P() << "," << p.Q() << ")";
  return s.str();
}

/// One line of the table.
struct row {
  std::string variant;          ///< e.g. "convred fused tf32"
  std::string family;  ///< convred-fused, convred-plan, convred-unfused, convred-conv, convred-reduce, cudnn, cudnn-conv
  std::string math;             ///< ieee, tf32, tf32x3, bf16, fp16, accurate, cudnn-tf32, cudnn-fp32
  std::string layout = "nchw";  ///< layout of x as the variant reads it
  std::string precision_class;  ///< "fp32" (ieee, tf32x3, cuDNN strict) or "tf32" (tf32, bf16, fp16, cuDNN TF32)
  bool pipeline = false;        ///< computes y (conv + scale + min)
  std::string algo;             ///< cuDNN: the chosen algorithm and math type; planner: its description()
  std::string kernel;           ///< planner rows: the kernel it picked (simt, mma.sync, wgmma)
  std::string note;
  std::string error;  ///< non-empty: the variant failed
  double ms = kNaN, ms_min = kNaN;
  double flops = 0, ceiling_tflops = kNaN, bytes = 0;
  double rel_err = kNaN, tol = kNaN;
  double speedup_best = kNaN, speedup_class = kNaN;
  bool over_tol = false;
  double tflops() const { return flops > 0 && ms > 0 ? flops / (ms * 1e-3) / 1e12 : kNaN; }
  double gbps() const { return bytes > 0 && ms > 0 ? bytes / (ms * 1e-3) / 1e9 : kNaN; }
  double pct() const {
    if (bytes > 0) return gbps() / kCopyGBs * 100.0;
    return ceiling_tflops > 0 ? tflops() / ceiling_tflops * 100.0 : kNaN;
  }
};

struct case_result {
  bench_case c;
  std::vector<row> rows;
  int sample_images = 0, sample_pixels = 0;
};

// ------------------------------------------------------------------------------------------------------
// Timing
// ------------------------------------------------------------------------------------------------------

using convred_bench::l2_flush;

struct timing {
  double median = kNaN, min = kNaN;
};

/// The median (the mean of the two middle runs for an even count) and the min of `iters` runs of f after
/// `warmup` (bench/timing.cuh: each after an L2 flush, between two events on the default stream).
timing time_fn(const std::function<void()>& f, const options& o, l2_flush& fl) {
  const std::vector<double> t = convred_bench::sorted_times(f, o.warmup, o.iters, fl);
  timing r;
  const std::size_t n = t.size();
  r.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  r.min = t.front();
  return r;
}

// ------------------------------------------------------------------------------------------------------
// Sampled float64 reference
// ------------------------------------------------------------------------------------------------------

struct samples {
  std::vector<std::int64_t> pix;   ///< flat output pixel n*P*Q + p*Q + q
  std::vector<double> ref;         ///< float64 reference y at each
  dbuf<std::int64_t> d_pix;        ///< pix on the device
  dbuf<float> d_vals;              ///< gathered values (npix * K floats at most)
  int images = 0;
};

/// Chooses the sample pixels, copies their images of x to the host and computes the float64 reference.
void make_samples(samples& s, const convred::conv2d_problem& p, const float* d_x, const std::vector<float>& hw,
                  const std::vector<float>& hb, const options& o, std::uint64_t seed) {
  const std::int64_t N = p.N, P = p.P(), Q = p.Q();
  std::mt19937_64 gen(seed);
  std::vector<std::int64_t> imgs = {0};
  if (N > 1) imgs.push_back(N - 1);
  for (int t = 0; t < 16 && static_cast<std::int64_t>(imgs.size()) < std::min<std::int64_t>(N, 4); ++t) {
    const std::int64_t n = std::uniform_int_distribution<std::int64_t>(0, N - 1)(gen);
    if (std::find(imgs.begin(), imgs.end(), n) == imgs.end()) imgs.push_back(n);
  }
  std::sort(imgs.begin(), imgs.end());
  const std::int64_t per = std::max<std::int64_t>(1, o.samples);
  std::set<std::int64_t> chosen;  // (local image index, p, q) flattened
  auto add = [&](std::int64_t li, std::int64_t pp, std::int64_t qq) {
    if (static_cast<std::int64_t>(chosen.size()) < per) chosen.insert((li * P + pp) * Q + qq);
  };
  const std::int64_t nimg = static_cast<std::int64_t>(imgs.size());
  for (std::int64_t li = 0; li < nimg; ++li)
    for (auto pq : {std::pair<std::int64_t, std::int64_t>{0, 0}, {0, Q - 1}, {P - 1, 0}, {P - 1, Q - 1},
                    {0, Q / 2}, {P - 1, Q / 2}, {P / 2, 0}, {P / 2, Q - 1}, {P / 2, Q / 2}})
      add(li, pq.first, pq.second);
  const std::int64_t space = nimg * P * Q;
  for (int guard = 0; static_cast<std::int64_t>(chosen.size()) < std::min(per, space) && guard < 100 * per; ++guard)
    chosen.insert(std::uniform_int_distribution<std::int64_t>(0, space - 1)(gen));

  // Copy the sampled images of x (NCHW) to the host: a problem with N = number of images.
  const std::int64_t chw = p.C * p.H * p.W;
  std::vector<float> hx(static_cast<std::size_t>(nimg * chw));
  for (std::int64_t li = 0; li < nimg; ++li)
    CHECK_CUDA(cudaMemcpy(hx.data() + li * chw, d_x + imgs[li] * chw, chw * sizeof(float), cudaMemcpyDeviceToHost));
  convred::conv2d_problem sub = p;
  sub.N = nimg;
  sub.x_layout = convred::layout::nchw;

  std::vector<std::int64_t> local(chosen.begin(), chosen.end());
  s.pix.resize(local.size());
  s.ref.assign(local.size(), 0.0);
  for (std::size_t i = 0; i < local.size(); ++i) {
    const std::int64_t li = local[i] / (P * Q), pq = local[i] % (P * Q);
    s.pix[i] = imgs[li] * P * Q + pq;
  }
  // float64 reference, spread over the host's cores.
  const unsigned nt = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < nt; ++t)
    pool.emplace_back([&, t]() {
      for (std::size_t i = t; i < local.size(); i += nt) {
        const std::int64_t li = local[i] / (P * Q), pq = local[i] % (P * Q);
        s.ref[i] = convred::reference::conv2d_reduce_at(sub, hx.data(), hw.data(), hb.data(), li, pq / Q, pq % Q,
                                                        convred::op::min{}, convred::epilogue::scale<float>{kScale})
                       .value;
      }
    });
  for (auto& th : pool) th.join();
  s.images = static_cast<int>(nimg);
  s.d_pix.alloc(s.pix.size());
  CHECK_CUDA(cudaMemcpy(s.d_pix.p, s.pix.data(), s.pix.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
}

/// Gathers `K` channels at each sample pixel of an NCHW (N, K, P, Q) tensor to the host.
std::vector<float> gather(samples& s, const float* full, std::int64_t K, std::int64_t PQ) {
  const std::size_t need = s.pix.size() * static_cast<std::size_t>(K);
  if (s.d_vals.n < need) s.d_vals.alloc(need);
  const int npix = static_cast<int>(s.pix.size());
  const std::int64_t blocks = std::min<std::int64_t>((static_cast<std::int64_t>(need) + 255) / 256, 4096);
  gather_kernel<<<static_cast<unsigned>(std::max<std::int64_t>(blocks, 1)), 256>>>(full, K, PQ, s.d_pix.p, npix,
                                                                                   s.d_vals.p);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> h(need);
  CHECK_CUDA(cudaMemcpy(h.data(), s.d_vals.p, need * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

/// ||got - ref|| / ||ref|| (NaN if any value is not finite).
double rel_norm(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i];
    if (!std::isfinite(g)) return kNaN;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// ------------------------------------------------------------------------------------------------------
// Variants
// ------------------------------------------------------------------------------------------------------

template <class Math>
const char* math_name();
template <>
const char* math_name<convred::math::ieee>() { return "ieee"; }
template <>
const char* math_name<convred::math::tf32>() { return "tf32"; }
template <>
const char* math_name<convred::math::tf32x3>() { return "tf32x3"; }
template <>
const char* math_name<convred::math::bf16>() { return "bf16"; }
template <>
const char* math_name<convred::math::fp16>() { return "fp16"; }
template <>
const char* math_name<convred::math::accurate>() { return "accurate"; }

/// math::accurate (policy.cuh; the planner only): 3xTF32 on tensor-core GPUs, exact FMA otherwise, the error vs
/// float64 held to 1e-6 (docs/tolerances.md): its rows fail above that.
constexpr double kAccurateTolerance = 1e-6;

template <class Math>
constexpr bool fp32_level() {
  return std::is_same_v<Math, convred::math::ieee> || std::is_same_v<Math, convred::math::tf32x3> ||
         std::is_same_v<Math, convred::math::accurate>;
}

template <class Math>
double ceiling_for() {
  if constexpr (std::is_same_v<Math, convred::math::ieee>) return kFfmaTflops;
  if constexpr (std::is_same_v<Math, convred::math::tf32>) return kTf32Tflops;
  // accurate: the tf32x3 rate (the planner's tensor-core choice); a row whose plan picked simt uses FFMA
  if constexpr (std::is_same_v<Math, convred::math::tf32x3> || std::is_same_v<Math, convred::math::accurate>)
    return kTf32Tflops / 3.0;
  return kBf16Tflops;
}

template <class Math>
double tolerance_for() {
  if constexpr (std::is_same_v<Math, convred::math::accurate>) return kAccurateTolerance;
  if constexpr (fp32_level<Math>()) return 1e-5;
  if constexpr (std::is_same_v<Math, convred::math::tf32>) return 1e-3;
  return 1e-2;
}

template <class Math>
const char* class_for() {
  return fp32_level<Math>() ? "fp32" : "tf32";
}

/// The fused kernel: one launch computing y.
template <class Math>
void fused(const convred::conv2d_problem& p, const float* x, const float* w, const float* b, float* y) {
  check_status(convred::device::conv2d_reduce<convred::default_policy_for<Math>>(
                   p, x, w, b, y, nullptr, convred::op::min{}, convred::epilogue::scale<float>{kScale}, nullptr),
               std::string("conv2d_reduce<default_policy_for<math::") + math_name<Math>() + ">>");
}

/// conv2d into the full (N,K,P,Q) buffer, bias included (math::tf32 default policy).
void unfused_conv(const convred::conv2d_problem& p, const float* x, const float* w, const float* b, float* out) {
  check_status(convred::device::conv2d<convred::default_policy_for<convred::math::tf32>>(
                   p, x, w, b, out, convred::epilogue::identity{}, nullptr),
               "conv2d<default_policy_for<math::tf32>>");
}

convred::channel_reduce_problem reduce_problem(const convred::conv2d_problem& p, convred::layout l) {
  convred::channel_reduce_problem r;
  r.N = p.N, r.C = p.K, r.H = p.P(), r.W = p.Q(), r.x_layout = l;
  return r;
}

/// y = min over k of (out + 0) * 2 (the bias is already in out).
void reduce_scale(const convred::channel_reduce_problem& r, const float* out, float* y) {
  check_status(convred::device::channel_reduce(r, out, y, nullptr, convred::op::min{},
                                               convred::epilogue::scale<float>{kScale}, nullptr),
               "channel_reduce(op::min, epilogue::scale)");
}

/// Epilogue of the reduction after a bias-free cuDNN conv: (v + b[k]) * s.
struct bias_scale {
  const float* b;
  float s;
  template <class V>
  __host__ __device__ V operator()(V v, int k) const {
    return (v + static_cast<V>(b[k])) * static_cast<V>(s);
  }
};

#if BENCH_HAVE_CUDNN
void reduce_bias_scale(const convred::channel_reduce_problem& r, const float* out, const float* b, float* y) {
  check_status(convred::device::channel_reduce(r, out, y, nullptr, convred::op::min{}, bias_scale{b, kScale}, nullptr),
               "channel_reduce(op::min, (v + b[k]) * 2)");
}
#endif

// ------------------------------------------------------------------------------------------------------
// cuDNN
// ------------------------------------------------------------------------------------------------------

#if !BENCH_HAVE_CUDNN
struct cudnn_env {};  // no cuDNN compiled in: run_case always gets nullptr
#else
const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "algo?";
  }
}

const char* cudnn_math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
    default: return "math?";
  }
}

struct cudnn_env {
  cudnnHandle_t h = nullptr;
  dbuf<unsigned char> ws;
  std::size_t ws_cap = 0;
  cudnn_env() = default;
  cudnn_env(const cudnn_env&) = delete;
  cudnn_env& operator=(const cudnn_env&) = delete;
  ~cudnn_env() {
    if (h) cudnnDestroy(h);
  }
};

/// Descriptors of one cuDNN forward convolution and the algorithm Find chose.
struct cudnn_conv {
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::size_t ws_bytes = 0;
  cudnnMathType_t math_used = CUDNN_DEFAULT_MATH;
  float find_ms = 0;
  double find_wall_s = 0;
  cudnn_conv() = default;
  cudnn_conv(const cudnn_conv&) = delete;
  cudnn_conv& operator=(const cudnn_conv&) = delete;
  ~cudnn_conv() {
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    if (wd) cudnnDestroyFilterDescriptor(wd);
    if (cd) cudnnDestroyConvolutionDescriptor(cd);
  }
};

/// Sets up descriptors (x and y in `fmt`, filter in the same format: KCRS for NCHW, KRSC for NHWC, no bias),
/// runs cudnnFindConvolutionForwardAlgorithmEx with `math` and keeps the fastest usable result.
void cudnn_setup(cudnn_env& env, cudnn_conv& c, const convred::conv2d_problem& p, cudnnTensorFormat_t fmt,
                 cudnnMathType_t math, bool strict, const float* x, const float* w, float* y) {
  const int N = static_cast<int>(p.N), C = static_cast<int>(p.C), H = static_cast<int>(p.H),
            W = static_cast<int>(p.W), K = static_cast<int>(p.K), R = static_cast<int>(p.R),
            S = static_cast<int>(p.S), P = static_cast<int>(p.P()), Q = static_cast<int>(p.Q());
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&c.xd));
  CHECK_CUDNN(cudnnCreateTensorDescriptor(&c.yd));
  CHECK_CUDNN(cudnnCreateFilterDescriptor(&c.wd));
  CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&c.cd));
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(c.xd, fmt, CUDNN_DATA_FLOAT, N, C, H, W));
  CHECK_CUDNN(cudnnSetFilter4dDescriptor(c.wd, CUDNN_DATA_FLOAT, fmt, K, static_cast<int>(p.C_per_group()), R, S));
  CHECK_CUDNN(cudnnSetConvolution2dDescriptor(c.cd, static_cast<int>(p.pad_h), static_cast<int>(p.pad_w),
                                              static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
                                              static_cast<int>(p.dil_h), static_cast<int>(p.dil_w),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CHECK_CUDNN(cudnnSetConvolutionGroupCount(c.cd, static_cast<int>(p.groups)));
  CHECK_CUDNN(cudnnSetConvolutionMathType(c.cd, math));
  int on = 0, oc = 0, oh = 0, ow = 0;
  CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(c.cd, c.xd, c.wd, &on, &oc, &oh, &ow));
  if (on != N || oc != K || oh != P || ow != Q)
    throw std::runtime_error("cuDNN output dims (" + std::to_string(on) + "," + std::to_string(oc) + "," +
                             std::to_string(oh) + "," + std::to_string(ow) + ") differ from convred's");
  CHECK_CUDNN(cudnnSetTensor4dDescriptor(c.yd, fmt, CUDNN_DATA_FLOAT, N, K, P, Q));

  // Workspace: the largest any algorithm asks for, up to the cap (algorithms needing more are skipped by Find).
  std::size_t need = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    std::size_t s = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(env.h, c.xd, c.wd, c.cd, c.yd, static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                &s) == CUDNN_STATUS_SUCCESS &&
        s <= env.ws_cap)
      need = std::max(need, s);
  }
  if (env.ws.bytes() < need) {
    env.ws.release();
    env.ws.alloc(need);
  }
  int max_count = 0, returned = 0;
  CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(env.h, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<std::size_t>(std::max(max_count, 1)));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(env.h, c.xd, x, c.wd, w, c.cd, c.yd, y, max_count, &returned,
                                                     perf.data(), env.ws.p, env.ws.bytes()));
  CHECK_CUDA(cudaDeviceSynchronize());
  c.find_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < returned; ++i) {
    const auto& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > env.ws.bytes()) continue;
    if (r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;  // may down-convert to fp16
    if (strict && r.mathType == CUDNN_TENSOR_OP_MATH) continue;         // strict fp32: FMA kernels only
    c.algo = r.algo;
    c.ws_bytes = r.memory;
    c.math_used = r.mathType;
    c.find_ms = r.time;
    // TF32 runs take the math type Find measured (as PyTorch does); strict runs keep CUDNN_FMA_MATH.
    if (!strict) CHECK_CUDNN(cudnnSetConvolutionMathType(c.cd, r.mathType));
    return;
  }
  throw std::runtime_error("cudnnFindConvolutionForwardAlgorithmEx returned no usable algorithm (" +
                           std::to_string(returned) + " results)");
}

void cudnn_forward(cudnn_env& env, const cudnn_conv& c, const float* x, const float* w, float* y) {
  const float one = 1.0f, zero = 0.0f;
  CHECK_CUDNN(cudnnConvolutionForward(env.h, &one, c.xd, x, c.wd, w, c.cd, c.algo, env.ws.p, c.ws_bytes, &zero, c.yd,
                                      y));
}
#endif

// ------------------------------------------------------------------------------------------------------
// One case
// ------------------------------------------------------------------------------------------------------

struct runner {
  const options& o;
  l2_flush& fl;
  int failures = 0;

  /// Runs one variant: a checked run on NaN-poisoned y (if `check`), then the timing. Errors are caught,
  /// printed and recorded in the row.
  void run(case_result& cr, row r, const std::function<void()>& f, const std::function<double()>& check) {
    std::printf("  %-40s ", r.variant.c_str());
    std::fflush(stdout);
    try {
      if (check) {
        f();
        CHECK_CUDA(cudaDeviceSynchronize());
        r.rel_err = check();
        if (r.tol > 0 && !(r.rel_err <= r.tol)) r.over_tol = true;
      }
      const timing t = time_fn(f, o, fl);
      r.ms = t.median;
      r.ms_min = t.min;
      std::printf("%9.3f ms", r.ms);
      if (!std::isnan(r.rel_err)) std::printf("  err %.2e", r.rel_err);
      if (check && std::isnan(r.rel_err)) std::printf("  err NaN (unwritten or non-finite output)");
      if (r.over_tol) std::printf("  ABOVE TOLERANCE %.0e", r.tol);
      std::printf("\n");
      // Above tolerance fails the run for convred's own variants; for cuDNN it is only flagged.
      if (r.over_tol && r.family.rfind("convred", 0) == 0) {
        ++failures;
        r.error = "relative error above the tolerance (docs/tolerances.md)";
      }
    } catch (const std::exception& e) {
      r.error = e.what();
      ++failures;
      std::printf("FAILED: %s\n", e.what());
      cudaGetLastError();  // clear a non-sticky error so later variants can run
    }
    std::fflush(stdout);
    cr.rows.push_back(std::move(r));
  }
};

void run_case(case_result& cr, runner& rn, const options& o, cudnn_env* env) {
  const convred::conv2d_problem& p = cr.c.p;
  if (convred::status s = convred::validate(p, sizeof(float)); s != convred::status::success)
    throw std::runtime_error("invalid problem: " + std::string(convred::to_string(s)));
  const std::int64_t P = p.P(), Q = p.Q(), PQ = P * Q;
  const double flops = p.flops();
  const std::uint64_t seed = o.seed ^ std::hash<std::string>{}(cr.c.name);
  const bool suite = cr.c.suite || cr.c.extra;  // (the same rows)
  std::printf("\n[%s] %s, %.1f GFLOP\n", cr.c.name.c_str(), shape_string(p).c_str(), flops / 1e9);
  if (suite) std::printf("  %s\n", cr.c.source.c_str());
  std::fflush(stdout);

  // Data: x ~ N(0,1) on the device; W, b as torch.nn.Conv2d.
  dbuf<float> x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
      b(static_cast<std::size_t>(p.K)), y(static_cast<std::size_t>(p.y_elements())),
      full(static_cast<std::size_t>(p.out_elements()));
  fill_normal(x.p, p.x_elements(), splitmix64(seed));
  const double bound = 1.0 / std::sqrt(static_cast<double>(p.gemm_k()));
  const std::vector<float> hw = uniform_host(static_cast<std::size_t>(p.w_elements()), bound, seed + 1);
  const std::vector<float> hb = uniform_host(static_cast<std::size_t>(p.K), bound, seed + 2);
  CHECK_CUDA(cudaMemcpy(w.p, hw.data(), w.bytes(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(b.p, hb.data(), b.bytes(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaDeviceSynchronize());

  const auto t0 = std::chrono::steady_clock::now();
  samples smp;
  make_samples(smp, p, x.p, hw, hb, o, seed + 3);
  cr.sample_images = smp.images;
  cr.sample_pixels = static_cast<int>(smp.pix.size());
  std::printf("  float64 reference: %d pixels of %d images, %.2f s\n", cr.sample_pixels, cr.sample_images,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  // Checked output: poison y, then after the run compare the samples with the reference.
  auto poison_y = [&]() { CHECK_CUDA(cudaMemset(y.p, 0xff, y.bytes())); };
  auto check_y = [&]() { return rel_norm(gather(smp, y.p, 1, PQ), smp.ref); };

  // NHWC copy of x (once, outside the timing) for cuDNN NHWC and --fused-nhwc.
  dbuf<float> x_nhwc;
  const bool want_nhwc = o.fused_nhwc || env != nullptr;
  if (want_nhwc) {
    x_nhwc.alloc(static_cast<std::size_t>(p.x_elements()));
    nchw_to_nhwc_kernel<<<132 * 16, 256>>>(x.p, x_nhwc.p, p.N, p.C, p.H * p.W);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
  }

  // --- convred fused, every math policy -----------------------------------------------------------------
  // A row of a convred variant with math Math: a pipeline (times y, compared with cuDNN) or a part of one.
  auto convred_row = [&](auto math_tag, std::string variant, const char* family, const char* layout, bool pipeline) {
    using Math = decltype(math_tag);
    row r;
    r.variant = std::move(variant);
    r.family = family;
    r.math = math_name<Math>();
    r.layout = layout;
    r.precision_class = class_for<Math>();
    r.pipeline = pipeline;
    r.flops = pipeline ? flops : 0;
    r.ceiling_tflops = ceiling_for<Math>();
    r.tol = tolerance_for<Math>();
    return r;
  };
  auto fused_row = [&](auto math_tag, convred::layout l) {
    using Math = decltype(math_tag);
    const bool nhwc = l == convred::layout::nhwc;
    row r = convred_row(math_tag, std::string("convred fused ") + math_name<Math>() + (nhwc ? " nhwc" : ""),
                        "convred-fused", nhwc ? "nhwc" : "nchw", true);
    convred::conv2d_problem pl = p;
    pl.x_layout = l;
    const float* xin = nhwc ? x_nhwc.p : x.p;
    poison_y();  // before the checked run (inside f it would be timed)
    rn.run(cr, r, [&, pl, xin]() { fused<Math>(pl, xin, w.p, b.p, y.p); }, check_y);
  };
  // --- convred fused on Hopper wgmma with a packed filter (packing once, timed as its own row) -----------
  auto packed_row = [&](auto math_tag) {
    using Math = decltype(math_tag);
    using Pol = typename convred::default_wgmma_policy<Math>::type;
    const std::size_t bytes = convred::device::packed_filter_bytes<Pol, float>(p);
    dbuf<unsigned char> packed(bytes > 0 ? bytes : 16);
    const std::string served = bytes > 0 ? "" : " (mma.sync fallback)";
    rn.run(cr, convred_row(math_tag, std::string("convred pack_filter ") + math_name<Math>() + served, "convred-pack",
                           "kcrs", false),
           [&]() { check_status(convred::device::pack_filter<Pol>(p, w.p, packed.p, bytes, nullptr), "pack_filter"); },
           nullptr);
    poison_y();
    rn.run(cr, convred_row(math_tag, std::string("convred fused wgmma ") + math_name<Math>() + served, "convred-fused",
                           "nchw", true),
           [&]() {
             check_status(convred::device::conv2d_reduce_packed<Pol>(p, x.p, w.p, packed.p, bytes, b.p, y.p, nullptr,
                                                                     convred::op::min{},
                                                                     convred::epilogue::scale<float>{kScale}, nullptr),
                          std::string("conv2d_reduce_packed<wgmma ") + math_name<Math>() + ">");
           },
           check_y);
  };
  // --- the planner (suite cases): device::conv2d_reduce_plan picks the kernel and says which and why --------
  auto plan_row = [&](auto math_tag, const char* label) {
    using Math = decltype(math_tag);
    row r = convred_row(math_tag, std::string("convred plan ") + label, "convred-plan", "nchw", true);
    convred::device::conv2d_reduce_plan<float, Math> plan(p, plan_options_of(o));
    r.algo = plan.description();
    r.kernel = convred::device::to_string(plan.kernel());
    if (plan.kernel() == convred::device::kernel_kind::simt || plan.kernel() == convred::device::kernel_kind::direct)
      r.ceiling_tflops = kFfmaTflops;
    r.note = "prepare (filter packing) once, untimed";
    std::printf("  plan %-8s %s\n", label, r.algo.c_str());
    try {
      check_status(plan.state(), "conv2d_reduce_plan (state)");
      check_status(plan.prepare(w.p, nullptr), "conv2d_reduce_plan::prepare");
      CHECK_CUDA(cudaDeviceSynchronize());
    } catch (const std::exception& e) {
      r.error = e.what();
      std::printf("  %-40s FAILED: %s\n", r.variant.c_str(), e.what());
      ++rn.failures;
      cr.rows.push_back(std::move(r));
      cudaGetLastError();
      return;
    }
    poison_y();
    rn.run(cr, r,
           [&]() {
             check_status(plan.run(x.p, b.p, y.p, nullptr, convred::op::min{}, convred::epilogue::scale<float>{kScale},
                                   nullptr),
                          std::string("conv2d_reduce_plan<float, math::") + math_name<Math>() + ">::run");
           },
           check_y);
  };
  if (suite) {
    // The suite's rows: the planner in TF32, bf16 and fp32-accurate, then cuDNN TF32 (below).
    plan_row(convred::math::tf32{}, "tf32");
    plan_row(convred::math::bf16{}, "bf16");
    plan_row(convred::math::accurate{}, "fp32-accurate");
  } else {
    packed_row(convred::math::tf32{});
    packed_row(convred::math::tf32x3{});
    packed_row(convred::math::bf16{});
    packed_row(convred::math::fp16{});

    fused_row(convred::math::ieee{}, convred::layout::nchw);
    fused_row(convred::math::tf32{}, convred::layout::nchw);
    fused_row(convred::math::tf32x3{}, convred::layout::nchw);
    fused_row(convred::math::bf16{}, convred::layout::nchw);
    fused_row(convred::math::fp16{}, convred::layout::nchw);
    if (o.fused_nhwc) {
      fused_row(convred::math::ieee{}, convred::layout::nhwc);
      fused_row(convred::math::tf32{}, convred::layout::nhwc);
      fused_row(convred::math::tf32x3{}, convred::layout::nhwc);
      fused_row(convred::math::bf16{}, convred::layout::nhwc);
      fused_row(convred::math::fp16{}, convred::layout::nhwc);
    }

    // --- convred unfused: conv2d (tf32) into (N,K,P,Q), then channel_reduce --------------------------------
    const convred::channel_reduce_problem red_nchw = reduce_problem(p, convred::layout::nchw);
    {
      row r;
      r.variant = "convred unfused tf32 (conv2d+reduce)";
      r.family = "convred-unfused";
      r.math = "tf32";
      r.precision_class = "tf32";
      r.pipeline = true;
      r.flops = flops;
      r.ceiling_tflops = kTf32Tflops;
      r.tol = 1e-3;
      poison_y();
      rn.run(cr, r,
             [&]() {
               unfused_conv(p, x.p, w.p, b.p, full.p);
               reduce_scale(red_nchw, full.p, y.p);
             },
             check_y);
    }
    {
      row r;
      r.variant = "  convred conv2d tf32 (conv only)";
      r.family = "convred-conv";
      r.math = "tf32";
      r.precision_class = "tf32";
      r.flops = flops;
      r.ceiling_tflops = kTf32Tflops;
      r.note = "writes the full (N,K,P,Q) output";
      rn.run(cr, r, [&]() { unfused_conv(p, x.p, w.p, b.p, full.p); }, nullptr);
    }

    // --- standalone channel reduction on the seed's (64,128,254,254) -----------------------------------------
    if (cr.c.name == "seed") {
      row r;
      r.variant = "convred channel_reduce alone";
      r.family = "convred-reduce";
      r.math = "fp32";
      r.bytes = static_cast<double>(p.out_elements() + p.y_elements()) * sizeof(float);
      r.tol = 0.0;  // min and *2 are exact
      r.note = "min over K of 2*v, (" + std::to_string(p.N) + "," + std::to_string(p.K) + "," + std::to_string(P) +
               "," + std::to_string(Q) + ") fp32 NCHW, fresh N(0,1) data; % of 4.18 TB/s";
      std::vector<double> ref;
      try {
        fill_normal(full.p, p.out_elements(), splitmix64(seed + 4));
        const std::vector<float> vals = gather(smp, full.p, p.K, PQ);
        ref.resize(smp.pix.size());
        for (std::size_t i = 0; i < smp.pix.size(); ++i)
          ref[i] = convred::reference::reduce_values(convred::op::min{}, p.K, [&](std::int64_t k) {
                     return 2.0 * static_cast<double>(vals[i * p.K + k]);
                   }).value;
      } catch (const std::exception& e) {
        std::printf("  %-40s FAILED: %s\n", r.variant.c_str(), e.what());
        r.error = e.what();
        ++rn.failures;
        cr.rows.push_back(r);
        ref.clear();
      }
      if (!ref.empty()) {
        poison_y();
        rn.run(cr, r, [&]() { reduce_scale(red_nchw, full.p, y.p); },
               [&]() {
                 const double e = rel_norm(gather(smp, y.p, 1, PQ), ref);
                 return e;
               });
        // tol 0 means "exact": rel_err must be 0.
        row& last = cr.rows.back();
        if (last.error.empty() && !(last.rel_err == 0.0)) {
          last.over_tol = true;
          last.error = "standalone min is not exact";
          ++rn.failures;
        }
      }
    }
  }

#if BENCH_HAVE_CUDNN
  // --- cuDNN conv (+ convred channel reduction) ---------------------------------------------------------
  if (env) {
    // KRSC weights for the NHWC runs.
    dbuf<float> w_krsc(static_cast<std::size_t>(p.w_elements()));
    {
      const std::int64_t cg = p.C_per_group();
      std::vector<float> h(hw.size());
      for (std::int64_t k = 0; k < p.K; ++k)
        for (std::int64_t c = 0; c < cg; ++c)
          for (std::int64_t rr = 0; rr < p.R; ++rr)
            for (std::int64_t ss = 0; ss < p.S; ++ss)
              h[((k * p.R + rr) * p.S + ss) * cg + c] = hw[((k * cg + c) * p.R + rr) * p.S + ss];
      CHECK_CUDA(cudaMemcpy(w_krsc.p, h.data(), w_krsc.bytes(), cudaMemcpyHostToDevice));
    }
    struct cfg {
      const char* name;
      cudnnMathType_t math;
      bool strict;
      bool nhwc;
    };
    const cfg cfgs[] = {{"cudnn tf32 nchw", CUDNN_DEFAULT_MATH, false, false},
                        {"cudnn tf32 nhwc", CUDNN_DEFAULT_MATH, false, true},
                        {"cudnn fp32 nchw", CUDNN_FMA_MATH, true, false},
                        {"cudnn fp32 nhwc", CUDNN_FMA_MATH, true, true}};
    for (const cfg& k : cfgs) {
      if (suite && k.strict) continue;  // the suite times cuDNN TF32 only
      const float* xin = k.nhwc ? x_nhwc.p : x.p;
      const float* win = k.nhwc ? w_krsc.p : w.p;
      const convred::channel_reduce_problem red = reduce_problem(p, k.nhwc ? convred::layout::nhwc : convred::layout::nchw);
      row base;
      base.family = "cudnn";
      base.math = k.strict ? "cudnn-fp32" : "cudnn-tf32";
      base.layout = k.nhwc ? "nhwc" : "nchw";
      base.precision_class = k.strict ? "fp32" : "tf32";
      base.flops = flops;
      base.ceiling_tflops = k.strict ? kFfmaTflops : kTf32Tflops;
      cudnn_conv cc;
      try {
        cudnn_setup(*env, cc, p, k.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, k.math, k.strict, xin, win, full.p);
      } catch (const std::exception& e) {
        for (const bool pipe : {true, false}) {
          if (suite && !pipe) continue;
          row r = base;
          r.pipeline = pipe;
          r.family = pipe ? "cudnn" : "cudnn-conv";
          r.variant = pipe ? std::string(k.name) + " +reduce" : std::string("  ") + k.name + " conv only";
          r.error = std::string("cuDNN setup/Find: ") + e.what();
          std::printf("  %-40s FAILED: %s\n", r.variant.c_str(), r.error.c_str());
          ++rn.failures;
          cr.rows.push_back(r);
        }
        cudaGetLastError();
        continue;
      }
      std::ostringstream a;
      a << algo_name(cc.algo) << ", " << cudnn_math_name(cc.math_used) << ", ws " << (cc.ws_bytes >> 20) << " MiB";
      base.algo = a.str();
      std::ostringstream nt;
      nt << "Find " << cc.find_wall_s << " s";
      if (k.nhwc) nt << "; x->NHWC, W->KRSC once, untimed";
      base.note = nt.str();
      {
        row r = base;
        r.variant = std::string(k.name) + " +reduce";
        r.pipeline = true;
        r.tol = k.strict ? 1e-5 : 1e-3;
        poison_y();
        rn.run(cr, r,
               [&]() {
                 cudnn_forward(*env, cc, xin, win, full.p);
                 reduce_bias_scale(red, full.p, b.p, y.p);
               },
               check_y);
      }
      if (!suite) {
        row r = base;
        r.variant = std::string("  ") + k.name + " conv only";
        r.family = "cudnn-conv";
        rn.run(cr, r, [&]() { cudnn_forward(*env, cc, xin, win, full.p); }, nullptr);
      }
    }
  }
#endif

  // --- speedups ------------------------------------------------------------------------------------------
  double best = kNaN, best_tf32 = kNaN, best_fp32 = kNaN;
  auto upd = [](double& m, double v) {
    if (std::isnan(m) || v < m) m = v;
  };
  for (const row& r : cr.rows)
    if (r.family == "cudnn" && r.pipeline && r.error.empty() && r.ms > 0) {
      upd(best, r.ms);
      upd(r.precision_class == "fp32" ? best_fp32 : best_tf32, r.ms);
    }
  for (row& r : cr.rows)
    if (r.pipeline && r.ms > 0) {
      r.speedup_best = best / r.ms;
      r.speedup_class = (r.precision_class == "fp32" ? best_fp32 : best_tf32) / r.ms;
    }
}

// ------------------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------------------

std::string fmt(const char* f, double v, const char* na = "-") {
  if (std::isnan(v)) return na;
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_table(const std::vector<case_result>& res) {
  int cw = 10;  // width of the case column: the longest name (suite names are long)
  for (const auto& cr : res) cw = std::max(cw, static_cast<int>(cr.c.name.size()));
  std::printf("\n%-*s %-40s %9s %9s %8s %7s %9s %7s %7s  %s\n", cw, "case", "variant", "median ms", "min ms", "TFLOP/s",
              "%ceil", "rel err", "x best", "x same", "cuDNN algo / planner's choice / note");
  for (const auto& cr : res) {
    for (const auto& r : cr.rows) {
      std::string tput = r.bytes > 0 ? fmt("%.0fGB/s", r.gbps()) : fmt("%.2f", r.tflops());
      std::string err = fmt("%.2e", r.rel_err);
      if (r.over_tol) err += "!";
      std::string tail = r.algo;
      if (!r.note.empty() && r.family != "cudnn" && r.family != "cudnn-conv" && r.family != "convred-plan")
        tail = r.note;
      if (!r.error.empty()) tail = "FAILED: " + r.error;
      std::printf("%-*s %-40s %9s %9s %8s %7s %9s %7s %7s  %s\n", cw, cr.c.name.c_str(), r.variant.c_str(),
                  fmt("%.3f", r.ms).c_str(), fmt("%.3f", r.ms_min).c_str(), tput.c_str(), fmt("%.1f%%", r.pct()).c_str(),
                  err.c_str(), fmt("%.2f", r.speedup_best).c_str(), fmt("%.2f", r.speedup_class).c_str(), tail.c_str());
    }
    std::printf("\n");
  }
  std::printf(
      "TFLOP/s = 2*N*P*Q*K*C*R*S / median; %%ceil vs measured H200 rates: FFMA %.1f (ieee, cuDNN fp32), TF32 %.0f "
      "(tf32, unfused, cuDNN tf32), 3xTF32 %.1f (tf32x3), BF16/FP16 %.0f; channel_reduce vs %.2f TB/s.\n"
      "rel err = ||y - ref|| / ||ref|| vs float64 on sampled pixels ('!' above the tolerance of docs/tolerances.md).\n"
      "x best = best cuDNN conv+reduce median / median; x same = the same against the best cuDNN of the same class "
      "(fp32 strict for ieee/tf32x3, TF32 for tf32/bf16/fp16/unfused).\n"
      "cuDNN: conv without bias, then convred channel_reduce with epilogue (v + b[k]) * 2.\n",
      kFfmaTflops, kTf32Tflops, kTf32Tflops / 3, kBf16Tflops, kCopyGBs / 1000);
}

std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          o += buf;
        } else {
          o += ch;
        }
    }
  }
  return o + "\"";
}

std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void write_json(const std::string& path, const std::vector<case_result>& res, const options& o,
                const std::string& device_json, int failures) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  char ts[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  f << "{\n  \"tool\": \"conv_reduce_bench\",\n  \"timestamp\": " << jstr(ts) << ",\n  \"device\": " << device_json
    << ",\n  \"settings\": {\"iters\": " << o.iters << ", \"warmup\": " << o.warmup << ", \"samples\": " << o.samples
    << ", \"seed\": " << o.seed << ", \"timer\": \"CUDA events, L2 flushed before each run, median\""
    << ", \"op\": \"min over K of 2*(conv+b)\", \"x\": \"N(0,1) fp32 NCHW\", \"w_b\": \"U(+-1/sqrt(fan_in))\""
    << ", \"accurate_tolerance\": " << jnum(kAccurateTolerance)
    << ", \"wgmma_tiles\": " << jstr(o.wgmma_tiles == 0 ? "model" : o.wgmma_tiles == 1 ? "rows (forced)" : o.wgmma_tiles == 2 ? "flat (forced)" : "direct (forced)")
    << ", \"wgmma_pass\": " << jstr(o.wgmma_pass == 0 ? "model" : o.wgmma_pass == 1 ? "off (forced)" : "on (forced)")
    << ", \"wgmma_splits\": " << jstr(o.wgmma_splits == 0 ? "model" : o.wgmma_splits < 0 ? "wgmma (forced)" : std::to_string(o.wgmma_splits) + " (forced)")
    << "}"
    << ",\n  \"ceilings\": {\"ffma_tflops\": " << kFfmaTflops << ", \"tf32_tflops\": " << kTf32Tflops
    << ", \"tf32x3_tflops\": " << jnum(kTf32Tflops / 3) << ", \"bf16_fp16_tflops\": " << kBf16Tflops
    << ", \"copy_gbs\": " << kCopyGBs << "},\n  \"failures\": " << failures << ",\n  \"cases\": [";
  for (std::size_t i = 0; i < res.size(); ++i) {
    const auto& cr = res[i];
    const auto& p = cr.c.p;
    f << (i ? "," : "") << "\n    {\"name\": " << jstr(cr.c.name) << ", \"shape\": " << jstr(shape_string(p))
      << ", \"N\": " << p.N << ", \"C\": " << p.C << ", \"H\": " << p.H << ", \"W\": " << p.W << ", \"K\": " << p.K
      << ", \"R\": " << p.R << ", \"S\": " << p.S << ", \"pad\": " << p.pad_h << ", \"stride\": " << p.stride_h
      << ", \"groups\": " << p.groups << ", \"P\": " << p.P() << ", \"Q\": " << p.Q()
      << ", \"flops\": " << jnum(p.flops())
      << ", \"suite\": " << (cr.c.suite ? "true" : "false") << ", \"extra\": " << (cr.c.extra ? "true" : "false")
      << ", \"layer\": " << jstr(cr.c.layer)
      << ", \"source\": " << jstr(cr.c.source)
      << ", \"sample_pixels\": " << cr.sample_pixels << ", \"sample_images\": " << cr.sample_images
      << ",\n     \"rows\": [";
    for (std::size_t j = 0; j < cr.rows.size(); ++j) {
      const row& r = cr.rows[j];
      std::string variant = r.variant;
      variant.erase(0, variant.find_first_not_of(' '));
      f << (j ? "," : "") << "\n      {\"variant\": " << jstr(variant) << ", \"family\": " << jstr(r.family)
        << ", \"math\": " << jstr(r.math) << ", \"layout\": " << jstr(r.layout)
        << ", \"precision_class\": " << jstr(r.precision_class) << ", \"pipeline\": " << (r.pipeline ? "true" : "false")
        << ", \"ms\": " << jnum(r.ms) << ", \"ms_min\": " << jnum(r.ms_min) << ", \"tflops\": " << jnum(r.tflops())
        << ", \"ceiling_tflops\": " << jnum(r.ceiling_tflops) << ", \"gbps\": " << jnum(r.gbps())
        << ", \"pct_ceiling\": " << jnum(r.pct()) << ", \"rel_err\": " << jnum(r.rel_err)
        << ", \"tolerance\": " << jnum(r.tol) << ", \"above_tolerance\": " << (r.over_tol ? "true" : "false")
        << ", \"speedup_vs_best_cudnn\": " << jnum(r.speedup_best)
        << ", \"speedup_vs_cudnn_same_class\": " << jnum(r.speedup_class) << ", \"algo\": " << jstr(r.algo)
        << ", \"kernel\": " << jstr(r.kernel)
        << ", \"note\": " << jstr(r.note) << ", \"error\": " << (r.error.empty() ? "null" : jstr(r.error)) << "}";
    }
    f << "\n     ]}";
  }
  f << "\n  ]\n}\n";
  if (!f) throw std::runtime_error("error writing " + path);
}

// ------------------------------------------------------------------------------------------------------
// Command line
// ------------------------------------------------------------------------------------------------------

/// --list-cases: every case, its group and shape, its GFLOP.
void print_cases() {
  const auto all = known_cases();
  int cw = 4;
  for (const auto& c : all) cw = std::max(cw, static_cast<int>(c.name.size()));
  std::printf("%-*s %-11s %8s  %s\n", cw, "case", "group", "GFLOP", "shape / source");
  for (const auto& c : all)
    std::printf("%-*s %-11s %8.1f  %s%s%s\n", cw, c.name.c_str(),
                c.suite ? (c.p.N == 1 ? "suite.n1" : "suite.train") : c.extra ? "extra" : "default", c.p.flops() / 1e9,
                shape_string(c.p).c_str(), c.suite || c.extra ? "; " : "", c.source.c_str());
}

void print_help() {
  std::printf(
      "Usage: %s [options]\n"
      "\n"
      "Times y = torch.min(conv2d(x, W, b) * 2.0, dim=1, keepdim=True)[0] (fp32 NCHW x) on the H200 as: convred\n"
      "fused for every math policy (ieee, tf32, tf32x3, bf16, fp16); convred unfused (conv2d tf32 + channel_reduce);\n"
      "the standalone channel reduction on the seed's (64,128,254,254); and, when built with cuDNN, cuDNN's best\n"
      "forward conv (cudnnFindConvolutionForwardAlgorithmEx; TF32 = CUDNN_DEFAULT_MATH and strict fp32 =\n"
      "CUDNN_FMA_MATH; NCHW and NHWC) followed by convred's channel reduction. Prints a table, writes JSON.\n"
      "\n"
      "  --cases LIST        comma-separated case names or groups (default: seed,resnet3x3,stem7x7,proj1x1):\n"
      "                      seed      x(64,64,256,256)  -> 128, 3x3\n"
      "                      resnet3x3 x(32,256,56,56)   -> 256, 3x3 pad 1\n"
      "                      stem7x7   x(64,3,224,224)   -> 64, 7x7 stride 2 pad 3\n"
      "                      proj1x1   x(64,512,28,28)   -> 128, 1x1\n"
      "                      suite (the %d suite cases), suite.n1 (batch 1), suite.train (training batch), or\n"
      "                      one suite case, e.g. resnet50.conv1.n32 (--list-cases names them all); extra (layers\n"
      "                      outside the suite, run as suite cases). Suite and extra cases run the planner\n"
      "                      (math::tf32, bf16, accurate) and cuDNN TF32 NCHW/NHWC + reduce only\n"
      "  --list-cases        print every case with its shape and exit (no GPU needed)\n"
      "  --iters N           timed runs per variant, median reported (30; at least 20 recommended)\n"
      "  --warmup N          untimed runs before timing (3)\n"
      "  --json PATH         JSON output (bench_results.json)\n"
      "  --samples N         output pixels checked against float64 per case (512)\n"
      "  --seed N            data seed (2026)\n"
      "  --fused-nhwc        also time the fused kernels on NHWC x (converted once, untimed)\n"
      "  --wgmma-tiles T     diagnosis: the wgmma kernel's tiles wherever it runs, T = model (default), rows,\n"
      "                      flat or direct (where they serve; rows and flat also rule out direct)\n"
      "  --wgmma-pass M      diagnosis: the wgmma kernel's pass mode, M = model (default), off or on (wherever\n"
      "                      it applies: several channel passes, not 3xTF32)\n"
      "  --wgmma-splits Z    diagnosis: Z = model (default), wgmma (the wgmma kernel wherever it serves, not the\n"
      "                      mma.sync split) or a count (that, in partial mode with min(Z, stages) GEMM_K\n"
      "                      ranges, whatever the workspace; may change the tiles: pin them with --wgmma-tiles;\n"
      "                      not with --wgmma-pass on)\n"
      "  --wgmma-tail T[:Z]  diagnosis: the wgmma kernel's split-K tail, T = model (default), off or a tile\n"
      "                      count (the last min(T, tiles - 1) tiles in partial mode, with Z GEMM_K ranges or\n"
      "                      the model's best; where the tiles allow a tail: flat or whole-row tiles, at least\n"
      "                      as many as SMs)\n"
      "  --floor             time 1, 2 and 3 empty kernels as every row is timed (the harness's floor), exit\n"
      "  --no-cudnn          skip the cuDNN rows\n"
      "  --cudnn-ws-gb G     cap on cuDNN's workspace in GiB (16)\n"
      "  -h, --help          this text\n"
      "\n"
      "Exit code: 0 all ran and convred met its tolerances; 1 a failure (printed); 2 no CUDA device; 3 bad usage.\n"
      "cuDNN baseline compiled in: %s\n",
      kProg, static_cast<int>(select_cases("suite").size()),
      BENCH_HAVE_CUDNN ? "yes" : "no (configure with cuDNN found, e.g. -DCUDNN_ROOT=...)");
}

options parse_args(int argc, char** argv, bool& help) {
  options o;
  help = false;
  for (convred_examples::arg_reader r(argc, argv); r.next();) {
    const std::string& a = r.key();
    auto value = [&]() { return r.value(); };
    auto flag = [&]() { r.flag(); };
    if (r.help()) {
      help = true;
      return o;
    }
    if (a == "--cases") {
      o.cases.clear();
      std::stringstream ss(value());
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        const std::vector<std::string> names = select_cases(item);
        if (names.empty())
          throw usage_error("--cases: unknown case '" + item +
                            "' (known: seed, resnet3x3, stem7x7, proj1x1, suite, suite.n1, suite.train, extra and their "
                            "cases, see --list-cases)");
        for (const std::string& n : names)
          if (std::find(o.cases.begin(), o.cases.end(), n) == o.cases.end()) o.cases.push_back(n);
      }
      if (o.cases.empty()) throw usage_error("--cases: no case given");
    } else if (a == "--iters") {
      o.iters = static_cast<int>(parse_int(a, value(), 1, 100000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_int(a, value(), 0, 100000));
    } else if (a == "--samples") {
      o.samples = static_cast<int>(parse_int(a, value(), 1, 1 << 20));
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, std::numeric_limits<long long>::max()));
    } else if (a == "--json") {
      o.json = value();
      if (o.json.empty()) throw usage_error("--json needs a path");
    } else if (a == "--list-cases") {
      flag();
      o.list_cases = true;
    } else if (a == "--no-cudnn") {
      flag();
      o.cudnn = false;
    } else if (a == "--fused-nhwc") {
      flag();
      o.fused_nhwc = true;
    } else if (a == "--wgmma-tiles") {
      const std::string v = value();
      o.wgmma_tiles = v == "model" ? 0 : v == "rows" ? 1 : v == "flat" ? 2 : v == "direct" ? 3 : -1;
      if (o.wgmma_tiles < 0) throw usage_error("--wgmma-tiles: '" + v + "' is not one of model, rows, flat, direct");
    } else if (a == "--wgmma-pass") {
      const std::string v = value();
      o.wgmma_pass = v == "model" ? 0 : v == "off" ? 1 : v == "on" ? 2 : -1;
      if (o.wgmma_pass < 0) throw usage_error("--wgmma-pass: '" + v + "' is not one of model, off, on");
    } else if (a == "--wgmma-splits") {
      const std::string v = value();
      char* end = nullptr;
      const long z = std::strtol(v.c_str(), &end, 10);
      if (v == "model") o.wgmma_splits = 0;
      else if (v == "wgmma") o.wgmma_splits = -1;
      else if (!v.empty() && *end == '\0' && z >= 1 && z <= 4096) o.wgmma_splits = static_cast<int>(z);
      else throw usage_error("--wgmma-splits: '" + v + "' is not one of model, wgmma or a count in [1, 4096]");
    } else if (a == "--wgmma-tail") {
      const std::string v = value();
      const std::size_t colon = v.find(':');
      const std::string t = v.substr(0, colon), z = colon == std::string::npos ? "" : v.substr(colon + 1);
      char* end = nullptr;
      const long tn = std::strtol(t.c_str(), &end, 10);
      const bool t_ok = !t.empty() && *end == '\0' && tn >= 1 && tn <= (1L << 30);
      const long zn = std::strtol(z.c_str(), &end, 10);
      const bool z_ok = colon == std::string::npos || (!z.empty() && *end == '\0' && zn >= 1 && zn <= 4096);
      if ((v == "model" || v == "off") && colon == std::string::npos) o.wgmma_tail = v == "model" ? 0 : -1;
      else if (t_ok && z_ok) o.wgmma_tail = tn, o.wgmma_tail_splits = colon == std::string::npos ? 0 : static_cast<int>(zn);
      else throw usage_error("--wgmma-tail: '" + v + "' is not one of model, off, T or T:Z (counts >= 1)");
    } else if (a == "--floor") {
      flag();
      o.floor = true;
    } else if (a == "--cudnn-ws-gb") {
      char* end = nullptr;
      const std::string v = value();
      o.cudnn_ws_gb = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(o.cudnn_ws_gb >= 0) || o.cudnn_ws_gb > 1024)
        throw usage_error("--cudnn-ws-gb: '" + v + "' is not a size in GiB in [0, 1024]");
    } else {
      r.unknown();
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    bool help = false;
    o = parse_args(argc, argv, help);
    if (help) {
      print_help();
      return 0;
    }
    if (o.list_cases) {
      print_cases();
      return 0;
    }
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", kProg, e.what());
    return 3;
  }
  if (o.wgmma_pass == 2 && o.wgmma_splits > 0) {
    std::fprintf(stderr, "%s: --wgmma-pass on runs unsplit: it cannot take --wgmma-splits %d (see --help)\n", kProg, o.wgmma_splits);
    return 3;
  }
  int ndev = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&ndev); e != cudaSuccess || ndev == 0) {
    std::fprintf(stderr, "%s: no usable CUDA device (%s); nothing to benchmark. Run it on the GPU machine.\n", kProg,
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
    return 2;
  }

  int failures = 0;
  std::vector<case_result> results;
  try {
    int dev = 0;
    CHECK_CUDA(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
    int rt = 0, drv = 0;
    CHECK_CUDA(cudaRuntimeGetVersion(&rt));
    CHECK_CUDA(cudaDriverGetVersion(&drv));
    std::ostringstream dj;
    dj << "{\"name\": " << jstr(prop.name) << ", \"cc\": \"" << prop.major << "." << prop.minor
       << "\", \"sms\": " << prop.multiProcessorCount << ", \"l2_bytes\": " << prop.l2CacheSize
       << ", \"memory_bytes\": " << prop.totalGlobalMem << ", \"cuda_runtime\": " << rt << ", \"cuda_driver\": " << drv;
    std::printf("%s: %s (sm_%d%d, %d SMs, L2 %d MiB, %.0f GiB), CUDA runtime %d, driver %d\n", kProg, prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20,
                static_cast<double>(prop.totalGlobalMem) / (1 << 30), rt, drv);

#if BENCH_HAVE_CUDNN
    cudnn_env env_storage;
    cudnn_env* env = nullptr;
    if (o.cudnn) {
      CHECK_CUDNN(cudnnCreate(&env_storage.h));
      env_storage.ws_cap = static_cast<std::size_t>(o.cudnn_ws_gb * (1ull << 30));
      env = &env_storage;
      std::printf("cuDNN: compiled against %d, running %zu\n", CUDNN_VERSION, cudnnGetVersion());
      dj << ", \"cudnn_compiled\": " << CUDNN_VERSION << ", \"cudnn_runtime\": " << cudnnGetVersion();
    } else {
      std::printf("cuDNN: skipped (--no-cudnn)\n");
    }
#else
    cudnn_env* env = nullptr;
    if (o.cudnn) std::printf("cuDNN: not compiled in (CONVRED_HAVE_CUDNN unset); no cuDNN rows\n");
#endif
    dj << "}";
    std::printf("iters %d (median), warm-up %d, L2 flushed before each timed run, %d sampled pixels per case\n",
                o.iters, o.warmup, o.samples);
    if (o.iters < 20) std::printf("note: --iters %d is below the 20 runs the benchmark rules ask for\n", o.iters);

    l2_flush fl(std::max<std::size_t>(std::size_t(256) << 20, 4 * static_cast<std::size_t>(prop.l2CacheSize)));
    runner rn{o, fl};
    if (o.floor) {
      for (int n = 1; n <= 3; ++n) {
        const timing t = time_fn(
            [n] {
              for (int i = 0; i < n; ++i) empty_kernel<<<1, 32>>>();
              CHECK_CUDA(cudaGetLastError());
            },
            o, fl);
        std::printf("floor: %d empty kernel(s): median %.2f us, min %.2f us\n", n, 1e3 * t.median, 1e3 * t.min);
      }
      return 0;
    }
    const auto t_all = std::chrono::steady_clock::now();
    for (const auto& name : o.cases) {
      case_result cr;
      for (const auto& c : known_cases())
        if (c.name == name) cr.c = c;
      try {
        run_case(cr, rn, o, env);
      } catch (const std::exception& e) {
        std::printf("[%s] FAILED: %s\n", name.c_str(), e.what());
        row r;
        r.variant = "(case setup)";
        r.family = "setup";
        r.error = e.what();
        cr.rows.push_back(r);
        ++rn.failures;
        cudaGetLastError();
      }
      results.push_back(std::move(cr));
    }
    failures = rn.failures;
    print_table(results);
    std::printf("total %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count());
    write_json(o.json, results, o, dj.str(), failures);
    std::printf("wrote %s\n", o.json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    if (!results.empty()) print_table(results);
    return 1;
  }
  if (failures) {
    std::printf("%s: %d failure(s), see FAILED / '!' above\n", kProg, failures);
    return 1;
  }
  return 0;
}
