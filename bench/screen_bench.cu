// Certified screening on the seed problem (issue 28, docs/screening.md): the screened plan (fp16 pass 1 +
// exact fp32 recompute) against the plans of the other maths, its result against the SIMT kernel's
// (math::ieee) bit for bit, and pass 2's work: channels recomputed per pixel and pixels recomputed in
// full, from pass 1's outputs and the bound (on the host).
//
//   screen_bench [--n N] [--iters I] [--rand] [--equal]   (default: the seed, N = 64, x ~ N(0,1); --rand: x ~ U[0,1);
//                                                         --equal: every filter and bias equal, the worst case:
//                                                         every pixel recomputed in full)
#include <convred/device/conv2d_reduce_plan.cuh>
#include <convred/device/family/screen.cuh>

#include <thrust/device_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace cr = convred;
namespace dev = convred::device;
namespace fam = convred::device::family;
using screen_list = fam::family_list<fam::screen<float, cr::math::accurate>, fam::simt<float, cr::math::accurate>>;

template <class F>
double median_ms(int iters, F&& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  f();  // warm-up
  std::vector<float> t;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  int n = 64, iters = 20;
  bool rand01 = false, equal = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) n = std::atoi(argv[++i]);
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--rand") rand01 = true;
    else if (a == "--equal") equal = true;
    else {
      std::printf("usage: screen_bench [--n N] [--iters I] [--rand] [--equal]\n");
      return 2;
    }
  }
  cr::conv2d_problem p;
  p.N = n, p.C = 64, p.H = 256, p.W = 256, p.K = 128, p.R = 3, p.S = 3;
  const std::int64_t M = p.gemm_m(), L = p.gemm_k();
  std::printf("seed problem N=%d C=64 256x256 K=128 3x3, x ~ %s, W, b ~ U(+-1/sqrt(576))%s; y = min_k 2 * conv\n", n,
              rand01 ? "U[0,1)" : "N(0,1)", equal ? ", every channel equal" : "");
  std::vector<float> x(static_cast<std::size_t>(p.x_elements())), w(static_cast<std::size_t>(p.w_elements())),
      b(static_cast<std::size_t>(p.K));
  {
    std::mt19937 rng(12345);
    std::normal_distribution<float> nd;
    std::uniform_real_distribution<float> ud(0.0f, 1.0f), wd(-1.0f / 24.0f, 1.0f / 24.0f);
    for (float& v : x) v = rand01 ? ud(rng) : nd(rng);
    for (float& v : w) v = wd(rng);
    for (float& v : b) v = wd(rng);
    if (equal) {  // every channel the same: exact ties everywhere, no channel ruled out
      for (std::int64_t k = 1; k < p.K; ++k) std::copy(w.begin(), w.begin() + L, w.begin() + k * L);
      std::fill(b.begin(), b.end(), b[0]);
    }
  }
  thrust::device_vector<float> dx(x), dw(w), db(b), y(M), y_ref(M), gaps(M);
  thrust::device_vector<std::int64_t> idx(M), idx_ref(M), packed(M);
  const float* X = thrust::raw_pointer_cast(dx.data());
  const float* Wt = thrust::raw_pointer_cast(dw.data());
  const float* B = thrust::raw_pointer_cast(db.data());
  float* Y = thrust::raw_pointer_cast(y.data());
  const cr::epilogue::scale<float> e{2.0f};

  dev::conv2d_reduce_plan<float, cr::math::accurate, screen_list> screened(p);
  std::printf("screened plan: %s\n", screened.description().c_str());
  if (screened.kernel() != dev::kernel_kind::screen || screened.prepare(Wt) != cr::status::success) {
    std::printf("the screening family does not serve this problem here\n");
    return 1;
  }
  // the SIMT kernel (math::ieee's) once, as the reference for the bitwise check
  using simt = cr::default_simt_policy<float>::type;
  const double t_ieee = median_ms(1, [&] {
    dev::conv2d_reduce<simt>(p, X, Wt, B, thrust::raw_pointer_cast(y_ref.data()), thrust::raw_pointer_cast(idx_ref.data()),
                             cr::op::argmin{}, e);
  });
  const double t_screen = median_ms(iters, [&] {
    screened.run(X, B, Y, thrust::raw_pointer_cast(idx.data()), cr::op::argmin{}, e);
  });
  const double t_screen_min = median_ms(iters, [&] { screened.run(X, B, Y, nullptr, cr::op::min{}, e); });
  cudaDeviceSynchronize();
  // bitwise check of the argmin run
  screened.run(X, B, Y, thrust::raw_pointer_cast(idx.data()), cr::op::argmin{}, e);
  cudaDeviceSynchronize();
  std::vector<float> hy(M), hr(M);
  std::vector<std::int64_t> hi(M), hir(M);
  thrust::copy(y.begin(), y.end(), hy.begin());
  thrust::copy(y_ref.begin(), y_ref.end(), hr.begin());
  thrust::copy(idx.begin(), idx.end(), hi.begin());
  thrust::copy(idx_ref.begin(), idx_ref.end(), hir.begin());
  const bool same = std::memcmp(hy.data(), hr.data(), M * sizeof(float)) == 0 && hi == hir;

  // pass 1 alone: the fp16 plan with the screening op
  dev::conv2d_reduce_plan<float, cr::math::fp16> fp16(p);
  fp16.prepare(Wt);
  const double t_pass1 = median_ms(iters, [&] {
    fp16.run(X, B, thrust::raw_pointer_cast(gaps.data()), thrust::raw_pointer_cast(packed.data()),
             cr::kernel::screen_op<false>{}, e);
  });
  const double t_fp16 = median_ms(iters, [&] { fp16.run(X, B, Y, nullptr, cr::op::min{}, e); });
  dev::conv2d_reduce_plan<float, cr::math::tf32> tf32(p);
  tf32.prepare(Wt);
  const double t_tf32 = median_ms(iters, [&] { tf32.run(X, B, Y, nullptr, cr::op::min{}, e); });
  dev::conv2d_reduce_plan<float, cr::math::accurate> acc(p);
  acc.prepare(Wt);
  const double t_acc = median_ms(iters, [&] { acc.run(X, B, Y, nullptr, cr::op::min{}, e); });
  cudaDeviceSynchronize();
  const cudaError_t err = cudaGetLastError();

  // pass 2's work from pass 1's outputs (the argmin op's gaps) and the bound, on the host
  fp16.run(X, B, thrust::raw_pointer_cast(gaps.data()), thrust::raw_pointer_cast(packed.data()),
           cr::kernel::screen_op<false>{}, e);
  cudaDeviceSynchronize();
  std::vector<float> hg(M);
  std::vector<std::int64_t> hp(M);
  thrust::copy(gaps.begin(), gaps.end(), hg.begin());
  thrust::copy(packed.begin(), packed.end(), hp.begin());
  double wsq = 0, bmax = 0;
  for (std::int64_t k = 0; k < p.K; ++k) {
    double s = 0;
    for (std::int64_t i = 0; i < L; ++i) s += double(w[k * L + i]) * w[k * L + i];
    wsq = std::max(wsq, s), bmax = std::max(bmax, std::fabs(double(b[k])));
  }
  const std::int64_t P = p.P(), Q = p.Q();
  double channels = 0;
  std::int64_t full = 0, hist[3] = {0, 0, 0};
  for (std::int64_t m = 0; m < M; ++m) {
    const std::int64_t nn = m / (P * Q), pq = m % (P * Q), h0 = pq / Q, w0 = pq % Q;
    double sumsq = 0;
    for (std::int64_t c = 0; c < p.C; ++c)
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) {
          const double v = x[((nn * p.C + c) * p.H + h0 + r) * p.W + w0 + s];
          sumsq += v * v;
        }
    const double E2 = 2 * cr::kernel::screen_bound(sumsq, wsq, bmax, 2.0, L, cr::kernel::screen_precision_of<cr::math::fp16>());
    std::uint32_t gb;
    std::memcpy(&gb, &hg[m], 4);
    const auto u = static_cast<std::uint64_t>(hp[m]);
    auto f = [](std::uint32_t bits16) {
      const std::uint32_t v = bits16 << 16;
      float r;
      std::memcpy(&r, &v, 4);
      return double(r);
    };
    const double g2 = f(gb & 0xFFFF), g3 = f(gb >> 16);
    (void)u;
    if (!(g3 > E2)) {
      ++full, ++hist[2], channels += p.K;
      continue;
    }
    const int c = 1 + !(g2 > E2);
    ++hist[c - 1], channels += c;
  }
  const double gflop = 2.0 * M * p.K * L / 1e9;
  std::printf("times (median of %d, ms): screened argmin %.3f, screened min %.3f (pass 1 alone %.3f); fp16 min %.3f, "
              "tf32 min %.3f, accurate (3xTF32) min %.3f, ieee SIMT argmin %.3f (1 run)\n",
              iters, t_screen, t_screen_min, t_pass1, t_fp16, t_tf32, t_acc, t_ieee);
  std::printf("screened argmin vs the SIMT kernel: %s\n", same ? "bitwise identical (values and indices)" : "DIFFERENT");
  std::printf("pass 2: %.4f channels recomputed per pixel (%.3f%% of the dense conv's %lld; 2 are computed, the "
              "second used where needed); pixels with 1, 2 candidates: %.4f%%, %.4f%%; recomputed in full (3rd best "
              "within the bound, all %lld channels): %lld (%.4f%%)\n",
              channels / M, 100.0 * channels / M / p.K, static_cast<long long>(p.K), 100.0 * hist[0] / M,
              100.0 * hist[1] / M, static_cast<long long>(p.K), static_cast<long long>(full), 100.0 * full / M);
  std::printf("dense work %.1f GFLOP; CUDA: %s\n", gflop, cudaGetErrorString(err));
  return same && err == cudaSuccess ? 0 : 1;
}
