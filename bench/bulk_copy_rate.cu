/// @file bulk_copy_rate.cu
/// @brief Diagnosis (sm_90): the L2 -> shared memory rate of 1D bulk copies (cp.async.bulk, the copies of the
/// wgmma kernel's flat tiles) per SM and in aggregate, by copy pattern: one producer thread per block
/// issues each stage's copies into a ring of 4 stages of 48 KB, one consumer warp waits for each stage and
/// releases it (no compute), 256 stages per block, on every SM and on 13 SMs; the source (16 MB, or 60 MB)
/// is L2-resident after the first run. Prints per pattern the time, the aggregate TB/s and the bytes per
/// SM clock (clock64 per block). bench/NOTES.md, session 12: on the H200 each copy of up to 4 KB costs
/// ~270 cycles whatever its size (12 x 4 KB per stage: 14.7 B/clk/SM; 1-3 copies of 16-48 KB: ~37).
/// Usage: bulk_copy_rate (no options). Exit code 0, or 1 on a CUDA error or a device below sm_90.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>
#include "convred/detail/tma.cuh"

using namespace convred::detail;
constexpr int STAGES = 4;
constexpr int STAGE_BYTES = 48 * 1024;

struct pattern {
  int copies;             // copies per stage
  int bytes;              // bytes per copy
  long long plane_stride; // bytes between copy i and i+1 of a stage
  long long unit_stride;  // bytes between consecutive stages of a block
  long long block_stride; // bytes between blocks
  long long wrap;         // offsets taken modulo this
};

__global__ void __launch_bounds__(64, 1) bulk_kernel(const unsigned char* src, pattern pt, int iters, unsigned long long* cyc) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ std::uint64_t full[STAGES], empty[STAGES];
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], 32);
    mbarrier_init_fence();
  }
  __syncthreads();
  const long long t0 = clock64();
  if (tid == 32) {  // producer
    for (int i = 0; i < iters; ++i) {
      const int s = i % STAGES;
      if (i >= STAGES) mbarrier_wait(&empty[s], ((i / STAGES) - 1) & 1);
      mbarrier_arrive_expect_tx(&full[s], pt.copies * pt.bytes);
      for (int c = 0; c < pt.copies; ++c) {
        long long off = (blockIdx.x * pt.block_stride + (long long)i * pt.unit_stride + c * pt.plane_stride) % pt.wrap;
        off &= ~15ll;
        bulk_copy_g2s(smem + s * STAGE_BYTES + c * pt.bytes, src + off, pt.bytes, &full[s]);
      }
    }
  } else if (tid < 32) {  // consumer warp
    for (int i = 0; i < iters; ++i) {
      const int s = i % STAGES;
      mbarrier_wait(&full[s], (i / STAGES) & 1);
      mbarrier_arrive(&empty[s]);
    }
  }
  __syncthreads();
  if (tid == 0) atomicAdd(cyc, (unsigned long long)(clock64() - t0));
}

int main() {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess || major < 9) {
    std::printf("bulk_copy_rate: needs a GPU of compute capability 9.0 or newer\n");
    return 1;
  }
  const long long buf = 64ll << 20;  // 64 MB buffer; patterns wrap within 16 MB (L2-resident) unless noted
  unsigned char* src = nullptr;
  unsigned long long* cyc = nullptr;
  cudaFuncAttributes fa{};
  if (cudaMalloc(&src, buf) != cudaSuccess || cudaMemset(src, 1, buf) != cudaSuccess || cudaMalloc(&cyc, 8) != cudaSuccess ||
      cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, STAGES * STAGE_BYTES) != cudaSuccess ||
      cudaFuncGetAttributes(&fa, bulk_kernel) != cudaSuccess || fa.ptxVersion < 90) {
    std::printf("bulk_copy_rate: set-up failed (%s), or the binary has no sm_90 code\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const long long MB16 = 16ll << 20;
  struct named { const char* name; pattern p; };
  std::vector<named> pats = {
      {"1 x 48 KB contiguous, distinct per block", {1, 48 * 1024, 0, 48 * 1024, 64ll * 48 * 1024, MB16}},
      {"12 x 4 KB, planes 100 KB apart (flat 1x1 tf32 like)", {12, 4096, 102400, 4096, 4096 * 25, MB16}},
      {"12 x 4 KB, planes 100 KB + 128 B apart", {12, 4096, 102400 + 128, 4096, 4096 * 25, MB16}},
      {"12 x 4 KB, planes 100 KB + 16 B apart", {12, 4096, 102400 + 16, 4096, 4096 * 25, MB16}},
      {"12 x 4 KB contiguous", {12, 4096, 4096, 48 * 1024, 64ll * 48 * 1024, MB16}},
      {"3 x 16 KB, 1 MB apart", {3, 16384, 1 << 20, 16384, 16384 * 7, MB16}},
      {"1 x 48 KB, same data for every block", {1, 48 * 1024, 0, 48 * 1024, 0, MB16}},
      {"48 x 1 KB contiguous", {48, 1024, 1024, 48 * 1024, 64ll * 48 * 1024, MB16}},
      {"12 x 4 KB, planes 100 KB apart, 60 MB span", {12, 4096, 102400, 4096, 4096 * 25, 60ll << 20}},
  };
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int clk_khz = 0;
  cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0);
  const int iters = 256;
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  for (int blocks : {sms, 13}) {
    for (const named& n : pats) {
      for (int rep = 0; rep < 3; ++rep) {
        cudaMemset(cyc, 0, 8);
        cudaEventRecord(a);
        bulk_kernel<<<blocks, 64, STAGES * STAGE_BYTES>>>(src, n.p, iters, cyc);
        if (const cudaError_t le = cudaGetLastError(); le != cudaSuccess) {
          std::printf("bulk_copy_rate: launch failed: %s\n", cudaGetErrorString(le));
          return 1;
        }
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        unsigned long long c = 0;
        cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
        const double bytes = double(blocks) * iters * n.p.copies * n.p.bytes;
        const double per_block_cycles = double(c) / blocks;
        if (rep == 2)
          std::printf("%3d blocks  %-52s %7.3f ms  %6.2f TB/s  %6.1f B/clk/SM (clock64)\n", blocks, n.name, ms,
                      bytes / (ms * 1e-3) / 1e12, double(iters) * n.p.copies * n.p.bytes / per_block_cycles);
      }
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s (SM clock %d MHz)\n", cudaGetErrorString(e), clk_khz / 1000);
  return e == cudaSuccess ? 0 : 1;
}
