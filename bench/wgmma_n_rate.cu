/// @file bench/wgmma_n_rate.cu
/// @brief Diagnosis (sm_90a; issue 29, Winograd step 1 "measure first", micro 1 of bench/NOTES.md): the sustained
/// rate of `wgmma.mma_async` per SM as a function of the instruction's N (m64nNk8 .tf32 and m64nNk16 .bf16,
/// N = 16, 32, 64, 128, 256) and of where A comes from: shared memory ("SS") or registers ("RS"); B always
/// comes from shared memory.
///
/// How: one block per SM (grid = SM count, >= 120 KB of dynamic shared memory per block so no two share an SM;
/// %smid checked), 1 or 2 consumer warpgroups per block, no producer, no global traffic. Each warpgroup issues a
/// long unrolled chain of wgmmas on operands resident in shared memory: a ring of 4 stages, each holding 64 rows
/// x 128 B of A per warpgroup and N rows x 128 B of B (one 128-byte K row = 4 k-steps of 32 B per stage), in the
/// library's canonical K-major no-swizzle layout or, with --swizzle 128, the 128B-swizzled one (PTX ISA,
/// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", matrix descriptor and shared-memory layouts). ACC
/// independent accumulator sets are used round-robin (1; 4 for N <= 64, as a Winograd kernel's 16 products
/// would be); commit_group every G instructions (1 or 4), each followed by wait_group 1 (a pipelined mainloop,
/// one group in flight) or wait_group 0 (drained: per-group latency). clock64 around the chain gives cycles per
/// wgmma per SM; %globaltimer gives the wall time, hence the GPU's TFLOP/s (2 * 64 * N * K per instruction,
/// K = 8 tf32 / 16 bf16) and the SM clock, and so the dense peak the measured per-SM rate implies. Operand
/// values do not change the work: --fill zero (default), one (checks each accumulator = instructions x K), rand
/// (a realistic power draw, hence clock).
///
/// What for: a Winograd F(2x2,3x3) family runs 16 batched GEMMs (one per transformed position, N = output
/// channels per pass) with their own accumulators each, so the register file allows only N <= 48 per wgmma and
/// the per-tile work is small (bench/NOTES.md, "Winograd F(2x2,3x3) on Hopper: measure first", sections 2 and 6).
/// Whether small-N wgmma keeps the tensor cores busy, SS or RS, decides that design. bench/winograd_model.py
/// assumes SS costs max(N/2, (64 + N)/4) cycles per instruction (A and B read at 128 B/clk of shared memory) and
/// RS N/2 (dense: 1,024 tf32 / 2,048 bf16 multiply-adds per SM per clock); a measured SS rate well above its
/// model means a wider operand path: where SS runs below the dense rate, its "smem B/clk" (A 2,048 B + B 32 * N B per
/// instruction, over the measured cycles) is the --smem-bw to rerun it with. The model's cycles are printed too.
///
/// Usage: wgmma_n_rate [--kind tf32,bf16] [--n 16,32,64,128,256] [--mode ss,rs] [--wg 1,2] [--g 1,4]
///        [--wait 1,0] [--acc 1,4] [--swizzle 0|128] [--fill zero|one|rand] [--reps 5] [--scale 1] [--out f.json]
/// (lists: comma-separated subsets; default all). Exit 0; 1 on a CUDA error or a failed check (--fill one, or
/// two blocks on one SM); 2 without a compute-capability 9.0 device.
#include <convred/warpgroup/wgmma.cuh>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace wg = convred::warpgroup;

namespace {

constexpr int kStages = 4;              // operand stages in the ring
constexpr int kUnroll = 16;             // instructions per loop body: kStages x 4 k-steps
constexpr int kAbytes = 64 * 128;       // one warpgroup's A per stage: 64 rows x one 128-byte K row
constexpr int kMinSmem = 120 * 1024;    // more than half an SM's shared memory: one block per SM
__host__ __device__ constexpr int stage_bytes(int n) { return 2 * kAbytes + n * 128; }

// ---- wgmma m64nN, fp32 accumulators, by N (inline-asm operand lists spelled out: %0.. are the accumulators) ----
#define CR_L0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define CR_L1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define CR_L2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define CR_L3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define CR_L4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define CR_L5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define CR_L6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define CR_L7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define CR_L8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define CR_L9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define CR_L10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define CR_L11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define CR_L12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define CR_L13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define CR_L14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define CR_L15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define CR_LIST8 CR_L0
#define CR_LIST16 CR_LIST8 ", " CR_L1
#define CR_LIST32 CR_LIST16 ", " CR_L2 ", " CR_L3
#define CR_LIST64 CR_LIST32 ", " CR_L4 ", " CR_L5 ", " CR_L6 ", " CR_L7
#define CR_LIST128 CR_LIST64 ", " CR_L8 ", " CR_L9 ", " CR_L10 ", " CR_L11 ", " CR_L12 ", " CR_L13 ", " CR_L14 ", " CR_L15
#define CR_F8(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), "+f"(d[b + 6]), "+f"(d[b + 7])
#define CR_OPS8 CR_F8(0)
#define CR_OPS16 CR_OPS8, CR_F8(8)
#define CR_OPS32 CR_OPS16, CR_F8(16), CR_F8(24)
#define CR_OPS64 CR_OPS32, CR_F8(32), CR_F8(40), CR_F8(48), CR_F8(56)
#define CR_OPS128 CR_OPS64, CR_F8(64), CR_F8(72), CR_F8(80), CR_F8(88), CR_F8(96), CR_F8(104), CR_F8(112), CR_F8(120)
#if CONVRED_HAS_WGMMA
#define CR_ASM(...) asm volatile(__VA_ARGS__)
#else
#define CR_ASM(...) (void)0
#endif
#define CR_PRED(i) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #i ", 0;\n"

/// mma<N>::ss<Kind>: d += A(desc) B(desc); mma<N>::rs<Kind>: d += A(registers) B(desc); Kind 0 = tf32 (k8),
/// 1 = bf16 (k16); scale-d from `one` (always 1 here: the chain accumulates from zeroed registers).
template <int N>
struct mma;
// S0, S1, S2: operand numbers of desc_a, desc_b, one (SS); R0..R3 the A registers, R4 desc_b, R5 one (RS)
#define CR_MMA(NN, LIST, OPS, S0, S1, S2, R0, R1, R2, R3, R4, R5)                                                \
  template <>                                                                                                   \
  struct mma<NN> {                                                                                              \
    template <int Kind>                                                                                         \
    __device__ __forceinline__ static void ss(float (&d)[NN / 2], std::uint64_t a, std::uint64_t b, std::uint32_t one) { \
      (void)d, (void)a, (void)b, (void)one;                                                                     \
      if constexpr (Kind == 0)                                                                                  \
        CR_ASM(CR_PRED(S2) "wgmma.mma_async.sync.aligned.m64n" #NN "k8.f32.tf32.tf32 {" LIST "}, %" #S0 ", %" #S1 \
               ", p, 1, 1;\n}\n" : OPS : "l"(a), "l"(b), "r"(one));                                             \
      else                                                                                                      \
        CR_ASM(CR_PRED(S2) "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.bf16.bf16 {" LIST "}, %" #S0 ", %" #S1 \
               ", p, 1, 1, 0, 0;\n}\n" : OPS : "l"(a), "l"(b), "r"(one));                                       \
    }                                                                                                           \
    template <int Kind>                                                                                         \
    __device__ __forceinline__ static void rs(float (&d)[NN / 2], const std::uint32_t (&a)[4], std::uint64_t b,      \
                                              std::uint32_t one) {                                              \
      (void)d, (void)a, (void)b, (void)one;                                                                     \
      if constexpr (Kind == 0)                                                                                  \
        CR_ASM(CR_PRED(R5) "wgmma.mma_async.sync.aligned.m64n" #NN "k8.f32.tf32.tf32 {" LIST "}, {%" #R0 ", %" #R1 \
               ", %" #R2 ", %" #R3 "}, %" #R4 ", p, 1, 1;\n}\n" : OPS : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), \
               "l"(b), "r"(one));                                                                               \
      else                                                                                                      \
        CR_ASM(CR_PRED(R5) "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32.bf16.bf16 {" LIST "}, {%" #R0 ", %" #R1 \
               ", %" #R2 ", %" #R3 "}, %" #R4 ", p, 1, 1, 0;\n}\n" : OPS : "r"(a[0]), "r"(a[1]), "r"(a[2]),     \
               "r"(a[3]), "l"(b), "r"(one));                                                                    \
    }                                                                                                           \
  };
CR_MMA(16, CR_LIST8, CR_OPS8, 8, 9, 10, 8, 9, 10, 11, 12, 13)
CR_MMA(32, CR_LIST16, CR_OPS16, 16, 17, 18, 16, 17, 18, 19, 20, 21)
CR_MMA(64, CR_LIST32, CR_OPS32, 32, 33, 34, 32, 33, 34, 35, 36, 37)
CR_MMA(128, CR_LIST64, CR_OPS64, 64, 65, 66, 64, 65, 66, 67, 68, 69)
CR_MMA(256, CR_LIST128, CR_OPS128, 128, 129, 130, 128, 129, 130, 131, 132, 133)

/// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format") of a K-major operand whose rows are one
/// 128-byte K row, at shared address `addr` (1024-aligned, so base offset 0). No swizzle: core matrices of 8 rows
/// x 16 B stored [8-row group][16-byte K chunk], LBO 128 B (next core matrix along K), SBO 1024 B (next 8 rows).
/// 128B swizzle (layout type 1): 8-row atoms of 8 x 128 B, chunk index XOR row % 8; SBO 1024 B, LBO unused (1).
__device__ __forceinline__ std::uint64_t operand_desc(std::uint32_t addr, bool swz) {
  const std::uint64_t lbo = swz ? 1 : 128 >> 4, sbo = 1024 >> 4;
  return static_cast<std::uint64_t>((addr >> 4) & 0x3FFF) | (lbo << 16) | (sbo << 32) |
         (static_cast<std::uint64_t>(swz ? 1 : 0) << 62);
}

/// The 32-bit word at index i of the operands: 0, ones (1.0f tf32 / a pair of 1.0 bf16), or a hash in [-1, 1).
__device__ __forceinline__ std::uint32_t fill_word(int kind, int fill, std::uint32_t i) {
  if (fill == 0) return 0u;
  if (fill == 1) return kind == 0 ? 0x3F800000u : 0x3F803F80u;
  std::uint32_t z = (i + 1u) * 0x9E3779B9u;
  z ^= z >> 15, z *= 0x85EBCA6Bu, z ^= z >> 13;
  const std::uint32_t b = __float_as_uint(static_cast<float>(z >> 8) * (1.0f / 8388608.0f) - 1.0f);
  return kind == 0 ? b : (b & 0xFFFF0000u) | (b >> 16);
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// One block per SM, blockDim.x / 128 consumer warpgroups; each issues iters x kUnroll wgmmas. rec[4 * block]:
/// globaltimer at the start and end, clock64 cycles between them, %smid. sink[2 * block + warpgroup]: the sum over
/// the sets of the first accumulator of the warpgroup's thread 0 (every set must be read: ptxas drops a wgmma
/// chain whose results are never used).
template <int Kind, int N, bool RS, int G, int W, int ACC>
__global__ void __launch_bounds__(256, 1)
    rate_kernel(int iters, int swz, int fill, unsigned long long* rec, float* sink) {
  extern __shared__ unsigned char smem_raw[];
  constexpr int SB = stage_bytes(N);
  const std::uint32_t raw = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw));
  const std::uint32_t base = (raw + 1023u) & ~1023u;
  auto* words = reinterpret_cast<std::uint32_t*>(smem_raw + (base - raw));
  for (int i = threadIdx.x; i < kStages * SB / 4; i += blockDim.x) words[i] = fill_word(Kind, fill, i);
  std::uint32_t afrag[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) afrag[j] = fill_word(Kind, fill, 4 * threadIdx.x + j);
  wg::fence_proxy_async();
  __syncthreads();
  const int w = threadIdx.x / 128;
  const std::uint64_t da = operand_desc(base + w * kAbytes, swz != 0), db = operand_desc(base + 2 * kAbytes, swz != 0);
  const std::uint32_t kstep = swz ? 2u : 16u;  // 32 B of K in 16-byte units: the next chunk pair, or 32 B in the row
  const std::uint32_t one = 1u;
  float d[ACC][N / 2];
#pragma unroll
  for (int a = 0; a < ACC; ++a)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[a][i] = 0.0f;
  wg::fence();
  __syncthreads();
  const unsigned long long g0 = global_ns();
  const long long c0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const std::uint32_t off = (i / 4) * (SB >> 4) + (i % 4) * kstep;
      if constexpr (RS)
        mma<N>::template rs<Kind>(d[i % ACC], afrag, db + off, one);
      else
        mma<N>::template ss<Kind>(d[i % ACC], da + off, db + off, one);
      if ((i + 1) % G == 0) {
        wg::commit();
        wg::wait<W>();
      }
    }
  }
  wg::wait<0>();
  __syncthreads();
  const long long c1 = clock64();
  const unsigned long long g1 = global_ns();
  if (threadIdx.x == 0) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    rec[4 * blockIdx.x + 0] = g0, rec[4 * blockIdx.x + 1] = g1;
    rec[4 * blockIdx.x + 2] = static_cast<unsigned long long>(c1 - c0);
    rec[4 * blockIdx.x + 3] = smid | (CONVRED_HAS_WGMMA ? 0ull : 1ull << 32);  // bit 32: an image without wgmma
  }
  float sum = 0.0f;  // exact: integers below 2^24 with --fill one at --scale <= 8
#pragma unroll
  for (int a = 0; a < ACC; ++a) sum += d[a][0];
  if (threadIdx.x % 128 == 0) sink[2 * blockIdx.x + w] = sum;
}

using kernel_fn = void (*)(int, int, int, unsigned long long*, float*);
struct config { int kind, n, rs, g, wait, acc; kernel_fn k; };  // one kernel: kind 0 tf32 / 1 bf16, rs 1 = RS
template <int Kind, int N, bool RS, int G, int W, int ACC>
void add(std::vector<config>& v) {
  v.push_back({Kind, N, RS ? 1 : 0, G, W, ACC, rate_kernel<Kind, N, RS, G, W, ACC>});
}
template <int Kind, int N, bool RS, int ACC>
void add_sync(std::vector<config>& v) {
  add<Kind, N, RS, 1, 1, ACC>(v), add<Kind, N, RS, 4, 1, ACC>(v), add<Kind, N, RS, 1, 0, ACC>(v), add<Kind, N, RS, 4, 0, ACC>(v);
}
template <int Kind, int N>
void add_n(std::vector<config>& v) {
  add_sync<Kind, N, false, 1>(v), add_sync<Kind, N, true, 1>(v);
  if constexpr (N <= 64) add_sync<Kind, N, false, 4>(v), add_sync<Kind, N, true, 4>(v);  // 4 x N/2 <= 128 registers
}
template <int Kind>
void add_kind(std::vector<config>& v) {
  add_n<Kind, 16>(v), add_n<Kind, 32>(v), add_n<Kind, 64>(v), add_n<Kind, 128>(v), add_n<Kind, 256>(v);
}

std::vector<int> int_list(const char* s) {  // "16,32" -> {16, 32}
  std::vector<int> v;
  for (char* e = nullptr;; s = e + 1)
    if (v.push_back(static_cast<int>(std::strtol(s, &e, 10))), *e != ',') return v;
}
/// {0} if `v` names `a`, {1} if it names `b`, {0, 1} if both ("tf32,bf16").
std::vector<int> names(const std::string& v, const char* a, const char* b) {
  std::vector<int> r;
  if (v.find(a) != std::string::npos) r.push_back(0);
  if (v.find(b) != std::string::npos) r.push_back(1);
  return r;
}
bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("wgmma_n_rate: %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

struct result {
  config c;
  int wgs;
  double cyc, cyc_max, mac_clk, pct, tflops, ghz, peak_at_clk, model, bpc;
  bool check_ok;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> kinds{0, 1}, ns{16, 32, 64, 128, 256}, modes{0, 1}, wgs{1, 2}, gs{1, 4}, waits{1, 0}, accs{1, 4};
  int swz = 0, fill = 0, reps = 5;
  double scale = 1.0;
  const char* out = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string o = argv[i], v = argv[i + 1];
    if (o == "--kind") kinds = names(v, "tf32", "bf16");
    else if (o == "--mode") modes = names(v, "ss", "rs");
    else if (o == "--n") ns = int_list(v.c_str());
    else if (o == "--wg") wgs = int_list(v.c_str());
    else if (o == "--g") gs = int_list(v.c_str());
    else if (o == "--wait") waits = int_list(v.c_str());
    else if (o == "--acc") accs = int_list(v.c_str());
    else if (o == "--swizzle") swz = std::atoi(v.c_str()) == 128;
    else if (o == "--fill") fill = v == "one" ? 1 : v == "rand" ? 2 : 0;
    else if (o == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (o == "--scale") scale = std::max(0.01, std::atof(v.c_str()));
    else if (o == "--out") out = argv[i + 1];
    else return std::printf("wgmma_n_rate: unknown option %s (see the file comment)\n", o.c_str()), 1;
  }
  cudaDeviceProp prop{};
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      prop.major != 9 || prop.minor != 0)
    return std::printf("wgmma_n_rate: needs a compute-capability 9.0 GPU (sm_90a code)\n"), 2;
  std::vector<config> all;
  add_kind<0>(all), add_kind<1>(all);
  const int sms = prop.multiProcessorCount;
  unsigned long long* rec = nullptr;
  float* sink = nullptr;
  if (!ok(cudaMalloc(&rec, sms * 4 * sizeof(unsigned long long)), "cudaMalloc") ||
      !ok(cudaMalloc(&sink, sms * 2 * sizeof(float)), "cudaMalloc"))
    return 1;
  std::vector<unsigned long long> h(static_cast<std::size_t>(sms) * 4);
  std::vector<float> hs(static_cast<std::size_t>(sms) * 2);
  std::vector<result> res;
  bool failed = false;
  std::printf("%s, %d SMs; swizzle %s, fill %s, %d reps (median by wall time)\n", prop.name, sms, swz ? "128B" : "none",
              fill == 0 ? "zero" : fill == 1 ? "one" : "rand", reps);
  std::printf("kind  N    A   WG G wait acc | cyc/wgmma/SM (max) | model | MAC/clk/SM | %%dense | TFLOP/s | GHz  | 100%% at clk | smem B/clk\n");
  for (const config& c : all) {
    if (!has(kinds, c.kind) || !has(ns, c.n) || !has(modes, c.rs) || !has(gs, c.g) || !has(waits, c.wait) || !has(accs, c.acc))
      continue;
    const int smem = std::max(kStages * stage_bytes(c.n) + 1024, kMinSmem);
    if (!ok(cudaFuncSetAttribute(c.k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute"))
      return 1;
    for (int nw : wgs) {
      if (nw != 1 && nw != 2) continue;
      const int kdim = c.kind == 0 ? 8 : 16, dense = c.kind == 0 ? 1024 : 2048;
      const int iters = std::max(1, static_cast<int>(scale * (1 << 20) / c.n / nw / kUnroll));  // ~2^20/N per SM
      const double per_sm = static_cast<double>(iters) * kUnroll * nw;
      std::vector<result> runs;
      for (int r = 0; r <= reps; ++r) {  // run 0: warm-up
        c.k<<<sms, 128 * nw, smem>>>(iters, swz, fill, rec, sink);
        if (!ok(cudaGetLastError(), "launch") || !ok(cudaDeviceSynchronize(), "kernel") ||
            !ok(cudaMemcpy(h.data(), rec, h.size() * 8, cudaMemcpyDeviceToHost), "copy") ||
            !ok(cudaMemcpy(hs.data(), sink, hs.size() * 4, cudaMemcpyDeviceToHost), "copy"))
          return 1;
        unsigned long long t0 = ~0ull, t1 = 0;
        double cyc = 0, cyc_max = 0, ghz = 0;
        std::vector<unsigned> smid;
        bool check = true;
        const float expect = static_cast<float>(kdim) * iters * kUnroll;  // the sets together: all instructions x K
        for (int b = 0; b < sms; ++b) {
          t0 = std::min(t0, h[4 * b]), t1 = std::max(t1, h[4 * b + 1]);
          const double cb = static_cast<double>(h[4 * b + 2]);
          cyc += cb / sms, cyc_max = std::max(cyc_max, cb);
          ghz += cb / std::max(1.0, static_cast<double>(h[4 * b + 1] - h[4 * b])) / sms;
          if (h[4 * b + 3] >> 32) return std::printf("wgmma_n_rate: the binary has no sm_90a code (build for 90a)\n"), 2;
          smid.push_back(static_cast<unsigned>(h[4 * b + 3]));
          for (int w = 0; w < nw && fill == 1; ++w) check = check && hs[2 * b + w] == expect;
        }
        std::sort(smid.begin(), smid.end());
        if (std::unique(smid.begin(), smid.end()) != smid.end())
          std::printf("  warning: two blocks shared an SM; the per-SM numbers are wrong\n"), failed = true;
        const double flop = 2.0 * 64 * c.n * kdim * per_sm * sms;
        result x{c, nw, cyc / per_sm, cyc_max / per_sm, 0, 0, flop / std::max(1.0, static_cast<double>(t1 - t0)) / 1e3, ghz, 0,
                 0, 0, check};
        x.mac_clk = 64.0 * c.n * kdim / x.cyc, x.pct = 100.0 * x.mac_clk / dense, x.peak_at_clk = sms * dense * 2.0 * ghz / 1e3;
        x.model = c.rs ? c.n / 2.0 : std::max(c.n / 2.0, (64.0 + c.n) / 4.0);  // bench/winograd_model.py, micro 1
        x.bpc = ((c.rs ? 0.0 : 2048.0) + 32.0 * c.n) / x.cyc;  // operand bytes read from shared memory per SM clock
        if (r > 0) runs.push_back(x);
      }
      std::sort(runs.begin(), runs.end(), [](const result& a, const result& b) { return a.tflops < b.tflops; });
      const result& m = runs[runs.size() / 2];
      if (!m.check_ok) std::printf("  check FAILED: accumulators differ from instructions x K\n"), failed = true;
      std::printf("%-5s %-4d %-3s %-2d %-1d %-4d %-3d | %8.2f (%8.2f) | %5.1f | %10.0f | %5.1f%% | %7.1f | %.2f | %7.1f | %5.1f\n",
                  c.kind ? "bf16" : "tf32", c.n, c.rs ? "RS" : "SS", nw, c.g, c.wait, c.acc, m.cyc, m.cyc_max, m.model,
                  m.mac_clk, m.pct, m.tflops, m.ghz, m.peak_at_clk, m.bpc);
      res.push_back(m);
    }
  }
  // the dense peak the best per-SM rate implies, against the datasheet (at its 1.83 GHz) and cuBLAS (docs/performance.md)
  std::string json = "{\n  \"device\": \"" + std::string(prop.name) + "\", \"sms\": " + std::to_string(sms) +
                     ", \"swizzle\": " + std::to_string(swz ? 128 : 0) + ", \"fill\": " + std::to_string(fill) + ",\n  \"summary\": [";
  for (int kind = 0; kind < 2; ++kind) {
    const result* best = nullptr;
    for (const result& x : res)
      if (x.c.kind == kind && (!best || x.mac_clk > best->mac_clk)) best = &x;
    if (!best) continue;
    const double at183 = sms * best->mac_clk * 2.0 * 1.83 / 1e3, ds = kind ? 989.4 : 494.7, cublas = kind ? 756.0 : 394.0;
    std::printf("%s: best %.0f MAC/clk/SM (N=%d %s WG=%d G=%d wait %d acc %d) = %.1f%% of dense; implies %.1f TFLOP/s at "
                "%.2f GHz (measured clock), %.1f at 1.83 GHz (datasheet %.1f, cuBLAS measured %.0f)\n",
                kind ? "bf16" : "tf32", best->mac_clk, best->c.n, best->c.rs ? "RS" : "SS", best->wgs, best->c.g, best->c.wait,
                best->c.acc, best->pct, sms * best->mac_clk * 2.0 * best->ghz / 1e3, best->ghz, at183, ds, cublas);
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"kind\": \"%s\", \"best_mac_per_clk_sm\": %.1f, \"implied_tflops_at_measured_clock\": %.1f, "
                  "\"implied_tflops_at_1_83ghz\": %.1f, \"datasheet_tflops\": %.1f, \"cublas_tflops\": %.1f}",
                  json.back() == '[' ? "" : ",", kind ? "bf16" : "tf32", best->mac_clk,
                  sms * best->mac_clk * 2.0 * best->ghz / 1e3, at183, ds, cublas);
    json += buf;
  }
  json += "\n  ],\n  \"rows\": [";
  for (std::size_t i = 0; i < res.size(); ++i) {
    const result& x = res[i];
    char buf[600];
    std::snprintf(buf, sizeof buf,
                  "%s\n    {\"kind\": \"%s\", \"n\": %d, \"a\": \"%s\", \"warpgroups\": %d, \"g\": %d, \"wait\": %d, \"acc\": %d, "
                  "\"cycles_per_wgmma_sm\": %.3f, \"cycles_per_wgmma_sm_max\": %.3f, \"model_cycles\": %.1f, "
                  "\"mac_per_clk_sm\": %.1f, \"pct_dense\": %.2f, \"tflops\": %.2f, \"clock_ghz\": %.3f, "
                  "\"dense_tflops_at_clock\": %.1f, \"smem_operand_bytes_per_clk\": %.1f, \"check\": \"%s\"}",
                  i ? "," : "", x.c.kind ? "bf16" : "tf32", x.c.n, x.c.rs ? "RS" : "SS", x.wgs, x.c.g, x.c.wait, x.c.acc, x.cyc,
                  x.cyc_max, x.model, x.mac_clk, x.pct, x.tflops, x.ghz, x.peak_at_clk, x.bpc,
                  fill != 1 ? "n/a" : x.check_ok ? "ok" : "FAILED");
    json += buf;
  }
  json += "\n  ]\n}\n";
  if (out) {
    FILE* f = std::fopen(out, "w");
    if (!f || std::fputs(json.c_str(), f) < 0) return std::printf("wgmma_n_rate: cannot write %s\n", out), 1;
    std::fclose(f);
  }
  cudaFree(rec), cudaFree(sink);
  return failed ? 1 : 0;
}
