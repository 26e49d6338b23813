//===- Half.h - bf16 and f16 storage types ----------------------*- C++ -*-===//
//
// 16-bit floats as the runtime stores them: plain structs holding the bits,
// with no arithmetic of their own. Kernels load them into float, compute
// there and round once when storing (Kernels.h), so the only operations
// these types need are exact conversions:
// - to float: exact (every bf16 and f16 value is a float);
// - from float: round to nearest, ties to even, with overflow to infinity,
//   gradual underflow through the subnormals and NaN kept a (quiet) NaN;
// - from double: also correctly rounded. Going through float first would
//   round twice, so double is first rounded to float *to odd*, which is
//   exact for a second rounding to any format at least two bits narrower.
// Conversions use integer bit manipulation only, so they do not depend on
// the floating-point environment (flush-to-zero, fast-math) of the caller.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HALF_H
#define RP_RUNTIME_HALF_H

#include "rp/runtime/kernels/Annotations.h"

#include <cstdint>
#include <cstring>

namespace rp::runtime {

namespace half_detail {

RP_HD inline uint32_t floatToBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

RP_HD inline float bitsToFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

/// `d` rounded to float toward zero, with the last bit set when inexact
/// ("round to odd"). A later round-to-nearest-even to a narrower format then
/// gives the correctly rounded result of `d`, which double -> float -> half
/// with two nearest roundings does not.
RP_HD inline float roundToOddFloat(double d) {
  float f = static_cast<float>(d);
  if (f != f || static_cast<double>(f) == d)
    return f; // NaN or exact.
  uint32_t u = floatToBits(f);
  double absF = static_cast<double>(f) < 0 ? -static_cast<double>(f)
                                           : static_cast<double>(f);
  double absD = d < 0 ? -d : d;
  // Magnitudes are monotonic in the bits, so one step down in the bits is
  // one step toward zero (f cannot be zero here, since |f| > |d| >= 0).
  if (absF > absD)
    u -= 1;
  return bitsToFloat(u | 1u);
}

RP_HD inline uint16_t floatToBf16Bits(float f) {
  uint32_t u = floatToBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep sign and payload, quiet.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds half to even; a carry out of
  // the mantissa correctly bumps the exponent (up to infinity).
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

RP_HD inline float bf16BitsToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

RP_HD inline uint16_t floatToF16Bits(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absU = u & 0x7FFFFFFFu;
  if (absU >= 0x7F800000u) {
    if (absU == 0x7F800000u)
      return static_cast<uint16_t>(sign | 0x7C00u);
    return static_cast<uint16_t>(sign | 0x7E00u | ((absU >> 13) & 0x3FFu));
  }
  // 65520 is halfway between the largest f16 (65504, odd mantissa) and
  // 2^16, so it and everything above rounds to infinity.
  if (absU >= 0x477FF000u)
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (absU < 0x38800000u) {
    // Below 2^-14: an f16 subnormal, counted in units of 2^-24. 2^-25 itself
    // is the tie between 0 and the smallest subnormal and goes to 0 (even).
    if (absU <= 0x33000000u)
      return static_cast<uint16_t>(sign);
    uint32_t exponent = absU >> 23; // 102..112
    uint32_t mantissa = (absU & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126u - exponent; // 14..24
    uint32_t result = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u)))
      ++result; // A carry into bit 10 is the smallest normal, as it should.
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias the exponent (127 - 15 = 112) and drop 13 mantissa bits.
  uint32_t result = (absU - 0x38000000u) >> 13;
  uint32_t rest = absU & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u)))
    ++result;
  return static_cast<uint16_t>(sign | result);
}

RP_HD inline float f16BitsToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu)
    return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0)
      return bitsToFloat(sign);
    // Subnormal: normalize into a float exponent (2^-14 is float exponent
    // 113 with the implicit bit at position 10).
    uint32_t floatExponent = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --floatExponent;
    }
    return bitsToFloat(sign | (floatExponent << 23) |
                       ((mantissa & 0x3FFu) << 13));
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// The storage and conversions bf16 and f16 share; `Format` supplies the
/// bit conversions (toBits, toFloat) and `Derived` is the type itself, so
/// that fromBits returns it. One definition keeps the two formats' APIs
/// from drifting apart.
template <typename Derived, typename Format> struct Float16Storage {
  uint16_t bits;

  Float16Storage() = default;
  RP_HD explicit Float16Storage(float f) : bits(Format::toBits(f)) {}
  RP_HD explicit Float16Storage(double d)
      : bits(Format::toBits(roundToOddFloat(d))) {}
  RP_HD static Derived fromBits(uint16_t bits) {
    Derived h;
    h.bits = bits;
    return h;
  }
  RP_HD operator float() const { return Format::toFloat(bits); }
};

struct Bf16Format {
  RP_HD static uint16_t toBits(float f) { return floatToBf16Bits(f); }
  RP_HD static float toFloat(uint16_t bits) { return bf16BitsToFloat(bits); }
};

struct F16Format {
  RP_HD static uint16_t toBits(float f) { return floatToF16Bits(f); }
  RP_HD static float toFloat(uint16_t bits) { return f16BitsToFloat(bits); }
};

} // namespace half_detail

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits (float's upper half).
struct bf16 : half_detail::Float16Storage<bf16, half_detail::Bf16Format> {
  using Float16Storage::Float16Storage;
};

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits.
struct f16 : half_detail::Float16Storage<f16, half_detail::F16Format> {
  using Float16Storage::Float16Storage;
};

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2,
              "16-bit floats must be stored in two bytes");

} // namespace rp::runtime

#endif // RP_RUNTIME_HALF_H
