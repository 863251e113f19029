/// @file bench/tap_gather_rate.cu
/// @brief Measure-first microbenchmark for a tap-gathering producer of the Hopper wgmma kernel on dilated
/// layers (issue 32): how fast can a persistent block's producer warpgroup fill operand stages whose A part
/// is the im2col rows of one filter-tap row (S taps x 2 planes x 256 output pixels of 16-byte entries, each
/// entry E input channels of one pixel: 4 tf32 or 8 bf16), with the stage's B part (the packed filter slice
/// of those S taps: S x 128 channels x 16 bytes x 2 planes) one bulk copy? No tensor core work is done: a
/// consumer warpgroup only waits for each stage and releases it, so the time is the feed's bound on the
/// kernel. Two producers:
///   packed : x pre-packed as [n][plane][h][w] 16-byte entries (the layout a packing pass would write);
///            one cp.async.cg of 16 bytes per entry (zero-fill outside the image), completion signalled to
///            the stage's mbarrier by cp.async.mbarrier.arrive.noinc (nothing waits in the producer);
///   nchw   : x read as given (NCHW fp32): 4 scalar loads per entry (tf32 entries only), 4 entries per work item with all their
///            loads issued first, then 16-byte shared stores, fence.proxy.async and an mbarrier arrive.
/// Tiles: 256 consecutive output pixels m = (n * P + p) * Q + q (GEMM rows, no tile shape to fit the image);
/// per tile ceil(K / 128) channel passes x ceil(C / 8) channel slices x R tap rows stages, as the wgmma
/// kernel orders them; grid = one block per SM.
///
///   tap_gather_rate N C H W K R dilation          # padding = dilation (DeepLab's ASPP); R x R filter
///   tap_gather_rate                               # the sweep's dilated layers
///
/// Prints per producer the median ms of 10 runs (L2 flushed before each), the A and B bytes per stage, the
/// bytes read per second (the filter slices and the in-image x entries; zero-filled ones are not read), and
/// the TF32 (and for the packed producer bf16) rate of useful FLOP (2 N P Q K C R S / time) the feed would
/// allow. Exit 0, or 2 without a device of compute capability 9.0 or above.
#include <convred/detail/load.cuh>
#include <convred/detail/tma.cuh>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.cuh"

namespace {

constexpr int BM = 256;           // output pixels per tile
constexpr int PLANES = 2;         // 16-byte planes per stage (8 tf32 channels, 16 bf16)
constexpr int PROD = 128;         // producer threads
constexpr int CONS = 128;         // consumer threads
constexpr int STAGES_MAX = 8;

struct layer {
  int N, C, H, W, K, R, d;
};

struct args {
  const uint4* xp;     // packed x: [n][plane][h][w] 16-byte entries
  const float* x;      // NCHW fp32
  const uint4* filt;   // a filter slice source (contents irrelevant)
  int N, C, H, W, P, Q, R, S, d, pad, planes, passes, kt, stages;
  long long M, tiles;
  unsigned* sink;
};

__device__ __forceinline__ void cp_async_arrive_noinc(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(convred::detail::smem_addr(bar))
               : "memory");
}

template <bool Packed>
__global__ void __launch_bounds__(PROD + CONS, 1) feed_kernel(const args a) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int a_bytes = a.S * PLANES * BM * 16, b_bytes = a.S * 128 * 16 * PLANES;
  const int stage_bytes = a_bytes + b_bytes;
  auto* full = reinterpret_cast<std::uint64_t*>(sm + a.stages * stage_bytes);
  auto* empty = full + STAGES_MAX;
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < a.stages; ++s) {
      convred::detail::mbarrier_init(&full[s], PROD + 1);
      convred::detail::mbarrier_init(&empty[s], CONS);
    }
    convred::detail::mbarrier_init_fence();
  }
  __syncthreads();
  const long long per_tile = static_cast<long long>(a.passes) * a.kt * a.R;
  if (tid < PROD) {  // producer
    long long count = 0;
    for (long long t = blockIdx.x; t < a.tiles; t += gridDim.x) {
      long long pimg[2];  // this thread's two pixels of the tile (tid, tid + PROD): image, row, column
      int pp[2], pq[2];
      bool pok[2];
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const long long m = t * BM + tid + k * PROD;
        pok[k] = m < a.M;
        pimg[k] = m / (static_cast<long long>(a.P) * a.Q);
        const int rem = static_cast<int>(m - pimg[k] * a.P * a.Q);
        pp[k] = rem / a.Q, pq[k] = rem % a.Q;
      }
      for (long long u = 0; u < per_tile; ++u, ++count) {
        const int slot = static_cast<int>(count % a.stages);
        const std::uint32_t phase = static_cast<std::uint32_t>((count / a.stages) & 1);
        if (count >= a.stages) convred::detail::mbarrier_wait(&empty[slot], phase ^ 1);
        unsigned char* st = sm + slot * stage_bytes;
        const int r = static_cast<int>(u % a.R);
        const int kt_i = static_cast<int>((u / a.R) % a.kt);
        if (tid == 0) {
          convred::detail::mbarrier_arrive_expect_tx(&full[slot], static_cast<std::uint32_t>(b_bytes));
          convred::detail::bulk_copy_g2s(st, a.filt + static_cast<long long>(kt_i) * (b_bytes / 16), b_bytes,
                                         &full[slot]);
        }
        unsigned char* A = st + b_bytes;
        if constexpr (Packed) {
          for (int s = 0; s < a.S; ++s)
#pragma unroll
            for (int j = 0; j < PLANES; ++j)
#pragma unroll
              for (int k = 0; k < 2; ++k) {
                const int h = pp[k] + r * a.d - a.pad, w = pq[k] + s * a.d - a.pad, jj = kt_i * PLANES + j;
                const bool ok = pok[k] && h >= 0 && h < a.H && w >= 0 && w < a.W && jj < a.planes;
                const uint4* src = ok ? a.xp + ((pimg[k] * a.planes + jj) * a.H + h) * static_cast<long long>(a.W) + w : a.xp;
                convred::detail::cp_async16_or_zero(A + ((j * a.S + s) * BM + tid + k * PROD) * 16, src, ok);
              }
          cp_async_arrive_noinc(&full[slot]);
        } else {
          const long long plane = static_cast<long long>(a.H) * a.W;
          for (int s = 0; s < a.S; ++s) {
            float f[PLANES][2][4];  // all 16 loads of the tap issued before any store
#pragma unroll
            for (int j = 0; j < PLANES; ++j)
#pragma unroll
              for (int k = 0; k < 2; ++k) {
                const int h = pp[k] + r * a.d - a.pad, w = pq[k] + s * a.d - a.pad, c0 = (kt_i * PLANES + j) * 4;
                const bool ok = pok[k] && h >= 0 && h < a.H && w >= 0 && w < a.W;
                const float* src = a.x + ((pimg[k] * a.C + c0) * a.H + h) * static_cast<long long>(a.W) + w;
#pragma unroll
                for (int c = 0; c < 4; ++c) f[j][k][c] = ok && c0 + c < a.C ? __ldg(src + c * plane) : 0.f;
              }
#pragma unroll
            for (int j = 0; j < PLANES; ++j)
#pragma unroll
              for (int k = 0; k < 2; ++k)
                *reinterpret_cast<uint4*>(A + ((j * a.S + s) * BM + tid + k * PROD) * 16) =
                    make_uint4(__float_as_uint(f[j][k][0]), __float_as_uint(f[j][k][1]), __float_as_uint(f[j][k][2]),
                               __float_as_uint(f[j][k][3]));
          }
#if CONVRED_HAS_TMA
          asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // as a wgmma consumer would need
#endif
          convred::detail::mbarrier_arrive(&full[slot]);
        }
      }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else {  // consumer: wait, touch, release
    const int ct = tid - PROD;
    unsigned acc = 0;
    long long count = 0;
    for (long long t = blockIdx.x; t < a.tiles; t += gridDim.x) {
      for (long long u = 0; u < per_tile; ++u, ++count) {
        const int slot = static_cast<int>(count % a.stages);
        const std::uint32_t phase = static_cast<std::uint32_t>((count / a.stages) & 1);
        convred::detail::mbarrier_wait(&full[slot], phase);
        acc ^= reinterpret_cast<const unsigned*>(sm + slot * stage_bytes + b_bytes)[ct * 16];
        convred::detail::mbarrier_arrive(&empty[slot]);
      }
    }
    if (acc == 0x9e3779b9u) a.sink[0] = acc;
  }
}

void run(const layer& L) {
  args a{};
  a.N = L.N, a.C = L.C, a.H = L.H, a.W = L.W, a.R = L.R, a.S = L.R, a.d = L.d, a.pad = L.d;
  a.P = L.H + 2 * a.pad - L.d * (L.R - 1), a.Q = L.W + 2 * a.pad - L.d * (L.R - 1);
  a.planes = (L.C + 3) / 4;
  a.passes = (L.K + 127) / 128;
  a.kt = (L.C + 4 * PLANES - 1) / (4 * PLANES);
  a.M = static_cast<long long>(L.N) * a.P * a.Q;
  a.tiles = (a.M + BM - 1) / BM;
  const int a_bytes = a.S * PLANES * BM * 16, b_bytes = a.S * 128 * 16 * PLANES;
  const int stage_bytes = a_bytes + b_bytes;
  a.stages = std::min(STAGES_MAX, (227 * 1024 - 256) / stage_bytes);
  if (a.stages < 2) {
    std::printf("N%d C%d K%d %dx%d: a stage of %d bytes leaves fewer than 2 in shared memory; skipped\n", L.N, L.C,
                L.K, L.R, L.R, stage_bytes);
    return;
  }
  const std::size_t xbytes = static_cast<std::size_t>(L.N) * a.planes * L.H * L.W * 16;
  const std::size_t xf = static_cast<std::size_t>(L.N) * L.C * L.H * L.W;
  void *xp = nullptr, *x = nullptr, *filt = nullptr, *sink = nullptr;
  CHECK_CUDA(cudaMalloc(&xp, xbytes));
  CHECK_CUDA(cudaMalloc(&x, xf * 4));
  CHECK_CUDA(cudaMalloc(&filt, static_cast<std::size_t>(a.kt + 1) * b_bytes));
  CHECK_CUDA(cudaMalloc(&sink, 16));
  CHECK_CUDA(cudaMemset(xp, 0x3f, xbytes));
  CHECK_CUDA(cudaMemset(x, 0x3f, xf * 4));
  CHECK_CUDA(cudaMemset(filt, 0x3f, static_cast<std::size_t>(a.kt + 1) * b_bytes));
  a.xp = static_cast<const uint4*>(xp), a.x = static_cast<const float*>(x), a.filt = static_cast<const uint4*>(filt);
  a.sink = static_cast<unsigned*>(sink);
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int smem = a.stages * stage_bytes + 2 * STAGES_MAX * 8;
  CHECK_CUDA(cudaFuncSetAttribute(feed_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK_CUDA(cudaFuncSetAttribute(feed_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int grid = static_cast<int>(std::min<long long>(sms, a.tiles));
  convred_bench::l2_flush fl(std::size_t(256) << 20);
  const double flop = 2.0 * a.M * L.K * L.C * L.R * L.R;
  // (output pixel, tap) pairs that read x (the others are zero-filled, not read): per dimension, the
  // outputs p whose tap r lands in [0, H)
  auto live_1d = [&](int out, int in) {
    long long c = 0;
    for (int r = 0; r < L.R; ++r)
      for (int p = 0; p < out; ++p) c += (p + r * L.d - a.pad >= 0 && p + r * L.d - a.pad < in);
    return static_cast<double>(c);
  };
  const double live = static_cast<double>(L.N) * live_1d(a.P, L.H) * live_1d(a.Q, L.W);
  std::printf("N%d C%d %dx%d K%d %dx%d d%d: M %lld, %lld tiles, %d passes x %d slices x %d rows, stage A %d B %d bytes, %d stages\n",
              L.N, L.C, L.H, L.W, L.K, L.R, L.R, L.d, a.M, a.tiles, a.passes, a.kt, a.R, a_bytes, b_bytes, a.stages);
  for (int packed = 1; packed >= 0; --packed) {
    auto f = [&] {
      if (packed)
        feed_kernel<true><<<grid, PROD + CONS, smem>>>(a);
      else
        feed_kernel<false><<<grid, PROD + CONS, smem>>>(a);
      CHECK_CUDA(cudaGetLastError());
    };
    const std::vector<double> t = convred_bench::sorted_times(f, 2, 10, fl);
    const double ms = t[t.size() / 2];
    const double stages = static_cast<double>(a.tiles) * a.passes * a.kt * a.R;
    const double bytes = stages * b_bytes + static_cast<double>(a.passes) * a.kt * PLANES * 16 * live;
    // the rate of useful FLOP (every tap, as PyTorch counts) the feed allows: tf32 stages of 8 input channels;
    // for the packed producer also bf16 (16-byte entries of 8 channels: the same bytes per stage, twice the
    // FLOP), which the nchw producer (fp32 loads) does not model
    std::printf("  %-6s %9.3f ms  %6.2f us/stage/SM  read from L2 %6.2f TB/s (filter and in-image x)  feeds tf32 %6.1f TFLOP/s",
                packed ? "packed" : "nchw", ms, ms * 1e3 * grid / stages, bytes / (ms * 1e-3) / 1e12,
                flop / (ms * 1e-3) / 1e12);
    if (packed)
      std::printf(", bf16 %6.1f\n", 2 * flop / (ms * 1e-3) / 1e12);
    else
      std::printf("\n");
  }
  CHECK_CUDA(cudaFree(xp));
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(filt));
  CHECK_CUDA(cudaFree(sink));
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  int major = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess || major < 9) {
    std::printf("tap_gather_rate: needs a CUDA device of compute capability 9.0 or above (mbarriers, bulk copies)\n");
    return 2;
  }
  if (argc == 8) {
    run({std::atoi(argv[1]), std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]),
         std::atoi(argv[6]), std::atoi(argv[7])});
    return 0;
  }
  if (argc != 1) {
    std::printf("usage: tap_gather_rate [N C H W K R dilation]\n");
    return 1;
  }
  const layer list[] = {{32, 2048, 65, 65, 256, 3, 24}, {32, 2048, 65, 65, 256, 3, 36}, {32, 2048, 65, 65, 256, 3, 12},
                        {32, 960, 33, 33, 256, 3, 24},  {32, 960, 33, 33, 256, 3, 12},  {32, 512, 65, 65, 512, 3, 4},
                        {32, 256, 65, 65, 256, 3, 2},   {32, 512, 19, 19, 1024, 3, 6},  {1, 2048, 65, 65, 256, 3, 24}};
  for (const layer& L : list) run(L);
  return 0;
}
