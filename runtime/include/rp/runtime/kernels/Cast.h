//===- Cast.h - element type conversion of rp.cast --------------*- C++ -*-===//
//
// rp.cast: floats round to nearest even, float to integer truncates toward
// zero, anything to i1 is `x != 0`, i1 reads as 0 or 1. Where the dialect
// leaves a case open, C++ leaves it undefined, so it is fixed here:
// - float to integer saturates at the integer's range and maps NaN to 0
//   (what a GPU's cvt.rzi.sat does);
// - integer to narrower integer wraps (keeps the low bits), as torch;
// - i64 beyond 2^53 to f16/bf16 rounds to double first; every such value
//   overflows f16 anyway and is far outside what bf16 distinguishes.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_CAST_H
#define RP_RUNTIME_KERNELS_CAST_H

#include "rp/runtime/kernels/Numeric.h"

#include <cstdint>
#include <type_traits>

namespace rp::runtime::kernels {

/// Truncation toward zero with saturation; NaN gives 0.
template <typename I> RP_HD inline I floatToInt(double d) {
  static_assert(std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>,
                "i32 or i64");
  if (d != d)
    return 0;
  // -2^(bits-1) is exact in double; so is its negation, the first value past
  // the largest integer.
  const double lowest = sizeof(I) == 4 ? -2147483648.0 : -9223372036854775808.0;
  if (d >= -lowest)
    return static_cast<I>(~(std::make_unsigned_t<I>(1) << (sizeof(I) * 8 - 1)));
  if (d <= lowest)
    return static_cast<I>(std::make_unsigned_t<I>(1) << (sizeof(I) * 8 - 1));
  return static_cast<I>(d);
}

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

/// One element of rp.cast from storage type From to storage type To.
template <typename To, typename From> RP_HD inline To castValue(From v) {
  if constexpr (std::is_same_v<From, Bool8>) {
    return castValue<To>(static_cast<int32_t>(static_cast<bool>(v) ? 1 : 0));
  } else if constexpr (std::is_same_v<To, Bool8>) {
    return Bool8(load(v) != 0); // NaN != 0 is true, as torch.
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>)
      return static_cast<To>(v);
    else
      return floatToInt<To>(static_cast<double>(load(v)));
  } else if constexpr (kIsHalf<To>) {
    if constexpr (std::is_same_v<From, double>)
      return To(v);
    else if constexpr (std::is_integral_v<From>)
      return To(static_cast<double>(v));
    else
      return To(static_cast<float>(v));
  } else {
    // float or double: C++ conversions round to nearest even.
    if constexpr (std::is_integral_v<From>)
      return static_cast<To>(v);
    else
      return static_cast<To>(load(v));
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_CAST_H
