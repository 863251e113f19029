/// @file detail/fast_divmod.cuh
/// @brief Division by a run-time invariant divisor via multiply-high (Granlund & Montgomery, PLDI 1994;
/// Hacker's Delight 10-9): q = (umulhi(n, m) + n) >> s, exact for 0 <= n < 2^31.
#pragma once

#include <cstdint>

namespace convred::detail {

/// @brief Precomputed divisor d in [1, 2^31): `div(n)` and `divmod(n, q, r)` for 0 <= n < 2^31.
struct fast_divmod {
  std::int32_t d = 1;        ///< divisor
  std::uint32_t mul = 0;     ///< magic multiplier
  std::uint32_t shift = 0;   ///< post shift

  fast_divmod() = default;
  /// Precomputes the magic numbers on the host for divisor d in [1, 2^31); a divisor < 1 (a caller's
  /// bug) is taken as 1 rather than looping forever.
  explicit fast_divmod(std::int32_t divisor) : d(divisor < 1 ? 1 : divisor) {
    divisor = d;
    std::uint32_t s = 0;
    while (s < 31 && (std::uint64_t(1) << s) < std::uint64_t(divisor)) ++s;
    shift = s;
    mul = static_cast<std::uint32_t>(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << s) - divisor)) / divisor + 1);
  }
  /// Quotient n / d for 0 <= n < 2^31.
  __host__ __device__ std::int32_t div(std::int32_t n) const {
#ifdef __CUDA_ARCH__
    const std::uint32_t hi = __umulhi(static_cast<std::uint32_t>(n), mul);
#else
    const std::uint32_t hi = static_cast<std::uint32_t>((std::uint64_t(std::uint32_t(n)) * mul) >> 32);
#endif
    return static_cast<std::int32_t>((hi + static_cast<std::uint32_t>(n)) >> shift);
  }
  /// Quotient and remainder of n / d for 0 <= n < 2^31.
  __host__ __device__ void divmod(std::int32_t n, std::int32_t& q, std::int32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace convred::detail
