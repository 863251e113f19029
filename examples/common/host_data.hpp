/// @file examples/common/host_data.hpp
/// @brief Host-side data helpers shared by the examples: a parallel loop, random tensors (reproducible
/// for a seed whatever the thread count), element conversions and an NCHW -> NHWC reorder.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include <convred/numeric.cuh>

namespace convred_examples {

/// Calls f(i) for i in [0, count) on all host cores (dynamic schedule). f must not throw.
template <class F>
void parallel_for(std::size_t count, F&& f) {
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t nt = std::min<std::size_t>(std::min<std::size_t>(hw, 64), count);
  if (nt <= 1) {
    for (std::size_t i = 0; i < count; ++i) f(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(nt);
  for (std::size_t t = 0; t < nt; ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < count;) f(i);
    });
  for (auto& th : pool) th.join();
}

/// double -> element type T (round to nearest; half and bf16 via float).
template <class T>
T to_elem(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return convred::from_compute<T>(static_cast<float>(v));
  }
}

/// A fresh seed (std::random_device mixed with the clock), for examples that draw new data on every run
/// and print the seed so that a failure can be repeated with --seed.
inline std::uint64_t fresh_seed() {
  std::random_device rd;
  const auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return ((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ t) & 0xffffffffffffull;  // short enough to type
}

/// Fills v with i.i.d. N(0,1) (normal) or U(-bound, bound) values, rounded to T. Deterministic for
/// (seed, tensor_id) whatever the number of threads: each chunk of 2^16 elements has its own engine.
template <class T>
void fill_random(std::vector<T>& v, bool normal, double bound, std::uint64_t seed, std::uint32_t tensor_id) {
  constexpr std::size_t chunk = std::size_t(1) << 16;
  const std::size_t chunks = (v.size() + chunk - 1) / chunk;
  parallel_for(chunks, [&](std::size_t c) {
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), tensor_id,
                      static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(std::uint64_t(c) >> 32)};
    std::mt19937_64 eng(seq);
    std::normal_distribution<double> nd(0.0, 1.0);
    std::uniform_real_distribution<double> ud(-bound, bound);
    const std::size_t end = std::min(v.size(), (c + 1) * chunk);
    for (std::size_t i = c * chunk; i < end; ++i) v[i] = to_elem<T>(normal ? nd(eng) : ud(eng));
  });
}

/// A vector of n random elements: N(0,1) when bound is 0, else U(-bound, bound) (see fill_random).
template <class T>
std::vector<T> random_vector(std::size_t n, double bound, std::uint64_t seed, std::uint32_t tensor_id) {
  std::vector<T> v(n);
  fill_random(v, bound == 0.0, bound, seed, tensor_id);
  return v;
}

/// Reorders a logical (N, C, H, W) C-order tensor into NHWC storage.
template <class T>
std::vector<T> nchw_to_nhwc(const std::vector<T>& src, std::int64_t N, std::int64_t C, std::int64_t H,
                            std::int64_t W) {
  std::vector<T> dst(src.size());
  parallel_for(static_cast<std::size_t>(N * H), [&](std::size_t nh) {
    const std::int64_t n = static_cast<std::int64_t>(nh) / H, h = static_cast<std::int64_t>(nh) % H;
    for (std::int64_t w = 0; w < W; ++w)
      for (std::int64_t c = 0; c < C; ++c) dst[((n * H + h) * W + w) * C + c] = src[((n * C + c) * H + h) * W + w];
  });
  return dst;
}

/// True if no element is NaN or infinite.
template <class T>
bool all_finite(const std::vector<T>& v) {
  for (const T& e : v)
    if (!std::isfinite(convred::to_double(e))) return false;
  return true;
}

/// Name of an element type: "float", "double", "half", "bf16".
template <class T>
const char* type_label() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, __half>) return "half";
  else return "bf16";
}

}  // namespace convred_examples
