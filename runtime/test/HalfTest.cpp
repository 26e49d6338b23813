//===- HalfTest.cpp - bf16 and f16 conversion tests -----------------------===//
//
// Known values at every boundary (ties, the subnormals, overflow, NaN, signed
// zero), exhaustive round trips of all 2^16 patterns, and a sweep over float
// bit patterns against an independent reference: the compiler's _Float16
// where it has one, and for bf16 a nearest-of-two-neighbours search in
// double.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace rp::runtime;

namespace {

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

uint16_t f16Bits(double v) { return f16(static_cast<float>(v)).bits; }
uint16_t bf16Bits(double v) { return bf16(static_cast<float>(v)).bits; }

TEST(HalfTest, F16KnownValues) {
  EXPECT_EQ(f16Bits(0.0), 0x0000);
  EXPECT_EQ(f16Bits(-0.0), 0x8000);
  EXPECT_EQ(f16Bits(1.0), 0x3C00);
  EXPECT_EQ(f16Bits(-2.0), 0xC000);
  EXPECT_EQ(f16Bits(65504.0), 0x7BFF); // Largest finite.
  EXPECT_EQ(f16Bits(0x1p-14), 0x0400); // Smallest normal.
  EXPECT_EQ(f16Bits(0x1p-24), 0x0001); // Smallest subnormal.
  EXPECT_EQ(f16Bits(INFINITY), 0x7C00);
  EXPECT_EQ(f16Bits(-INFINITY), 0xFC00);
  EXPECT_FLOAT_EQ(float(f16::fromBits(0x3555)), 0.333251953125f);
}

TEST(HalfTest, F16RoundsToNearestEven) {
  // Ties between 1 and 1 + 2^-10 go to 1 (even); the next tie goes up.
  EXPECT_EQ(f16Bits(1.0 + 0x1p-11), 0x3C00);
  EXPECT_EQ(f16Bits(1.0 + 3 * 0x1p-11), 0x3C02);
  EXPECT_EQ(f16Bits(1.0 + 0x1p-11 + 0x1p-20), 0x3C01); // Past the tie.
  // 65520 is the tie between 65504 and 2^16: overflow to infinity.
  EXPECT_EQ(f16Bits(65519.99), 0x7BFF);
  EXPECT_EQ(f16Bits(65520.0), 0x7C00);
  EXPECT_EQ(f16Bits(1e6), 0x7C00);
  // Subnormal ties: 2^-25 -> 0, 3 * 2^-25 -> 2 * 2^-24.
  EXPECT_EQ(f16Bits(0x1p-25), 0x0000);
  EXPECT_EQ(f16Bits(-0x1p-25), 0x8000);
  EXPECT_EQ(f16Bits(0x1.000002p-25), 0x0001);
  EXPECT_EQ(f16Bits(3 * 0x1p-25), 0x0002);
  // Rounding up out of the subnormals gives the smallest normal.
  EXPECT_EQ(f16Bits(0x1p-14 - 0x1p-26), 0x0400);
  // Float subnormals are far below f16's range.
  EXPECT_EQ(f16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(HalfTest, F16NaNStaysNaN) {
  f16 h(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h.bits & 0x7C00, 0x7C00);
  EXPECT_NE(h.bits & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(float(h)));
  // A signaling NaN whose payload lives in the low bits only.
  EXPECT_TRUE(std::isnan(float(f16(bitsFloat(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(float(f16(bitsFloat(0xFF800001u)))));
}

TEST(HalfTest, F16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    f16 h = f16::fromBits(static_cast<uint16_t>(bits));
    float f = float(h);
    if (std::isnan(f)) {
      EXPECT_EQ(bits & 0x7C00, 0x7C00u);
      EXPECT_TRUE(std::isnan(float(f16(f))));
      continue;
    }
    ASSERT_EQ(f16(f).bits, bits) << std::hex << bits;
#ifdef __FLT16_MANT_DIG__
    _Float16 reference;
    std::memcpy(&reference, &bits, 2);
    ASSERT_EQ(floatBits(f), floatBits(static_cast<float>(reference)))
        << std::hex << bits;
#endif
  }
}

#ifdef __FLT16_MANT_DIG__
TEST(HalfTest, F16MatchesCompilerConversionOverFloats) {
  // An odd step visits every exponent with varied low mantissa bits.
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    float f = bitsFloat(static_cast<uint32_t>(u));
    _Float16 reference = static_cast<_Float16>(f);
    uint16_t referenceBits;
    std::memcpy(&referenceBits, &reference, 2);
    uint16_t bits = f16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(float(f16::fromBits(bits))));
    } else {
      ASSERT_EQ(bits, referenceBits) << std::hex << u;
    }
  }
}
#endif

TEST(HalfTest, Bf16KnownValues) {
  EXPECT_EQ(bf16Bits(0.0), 0x0000);
  EXPECT_EQ(bf16Bits(-0.0), 0x8000);
  EXPECT_EQ(bf16Bits(1.0), 0x3F80);
  EXPECT_EQ(bf16Bits(-2.0), 0xC000);
  EXPECT_EQ(bf16Bits(INFINITY), 0x7F80);
  EXPECT_EQ(bf16Bits(-INFINITY), 0xFF80);
  // Ties to even: 1 + 2^-8 -> 1; 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(bf16Bits(1.0 + 0x1p-8), 0x3F80);
  EXPECT_EQ(bf16Bits(1.0 + 3 * 0x1p-8), 0x3F82);
  EXPECT_EQ(bf16Bits(1.0 + 0x1p-8 + 0x1p-20), 0x3F81);
  // The largest float rounds past bf16's largest finite to infinity.
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()).bits, 0x7F80);
  EXPECT_EQ(bf16(bitsFloat(0x7F7F7FFFu)).bits, 0x7F7F);
  // Subnormals (bf16 shares float's exponent range): ties and carries.
  EXPECT_EQ(bf16(bitsFloat(0x00000001u)).bits, 0x0000);
  EXPECT_EQ(bf16(bitsFloat(0x00008000u)).bits, 0x0000);
  EXPECT_EQ(bf16(bitsFloat(0x00018000u)).bits, 0x0002);
  EXPECT_EQ(bf16(bitsFloat(0x00010000u)).bits, 0x0001);
  EXPECT_EQ(bf16(bitsFloat(0x007FFFFFu)).bits, 0x0080); // To min normal.
  EXPECT_EQ(float(bf16::fromBits(0x0001)), bitsFloat(0x00010000u));
}

TEST(HalfTest, Bf16NaNStaysNaN) {
  EXPECT_TRUE(std::isnan(float(bf16(std::numeric_limits<float>::quiet_NaN()))));
  // Payload in the dropped half only: must not turn into infinity.
  EXPECT_TRUE(std::isnan(float(bf16(bitsFloat(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(float(bf16(bitsFloat(0xFF800001u)))));
  EXPECT_EQ(bf16(bitsFloat(0xFFC00000u)).bits, 0xFFC0); // Sign kept.
}

TEST(HalfTest, Bf16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    float f = float(bf16::fromBits(static_cast<uint16_t>(bits)));
    ASSERT_EQ(floatBits(f), bits << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(bf16(f).bits, bits);
    }
  }
}

TEST(HalfTest, Bf16IsNearestEvenOverFloats) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    float f = bitsFloat(static_cast<uint32_t>(u));
    if (std::isnan(f))
      continue;
    // The two bf16 neighbours: truncated, and one step away from zero.
    uint32_t down = static_cast<uint32_t>(u) & 0xFFFF0000u;
    double dDown = bitsFloat(down), dUp = bitsFloat(down + 0x10000u);
    if (std::isnan(dUp)) // Above the largest finite: neighbour is infinity.
      dUp = std::copysign(INFINITY, f);
    double distDown = std::fabs(f - dDown), distUp = std::fabs(dUp - f);
    if (std::isinf(dUp))
      distUp = std::fabs(std::ldexp(1.0, 128) - std::fabs(double(f)));
    bool pickUp =
        distUp < distDown || (distUp == distDown && ((down >> 16) & 1u) == 1u);
    uint32_t expected = pickUp ? (down + 0x10000u) >> 16 : down >> 16;
    ASSERT_EQ(bf16(f).bits, expected) << std::hex << u;
  }
}

TEST(HalfTest, FromDoubleRoundsOnce) {
  // Just above a tie of the 16-bit format but below float's precision:
  // double -> float -> half would see an exact tie and round to even
  // (down); rounding once goes up.
  double f16Case = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(f16(static_cast<float>(f16Case)).bits, 0x3C00);
  EXPECT_EQ(f16(f16Case).bits, 0x3C01);
  double bf16Case = 1.0 + 0x1p-8 + 0x1p-40;
  EXPECT_EQ(bf16(static_cast<float>(bf16Case)).bits, 0x3F80);
  EXPECT_EQ(bf16(bf16Case).bits, 0x3F81);
  // Exact values and the edges still convert as from float.
  EXPECT_EQ(f16(1.0 + 0x1p-11).bits, 0x3C00);
  EXPECT_EQ(f16(65520.0).bits, 0x7C00);
  EXPECT_EQ(f16(65519.999999).bits, 0x7BFF);
  EXPECT_EQ(f16(1e300).bits, 0x7C00);
  EXPECT_EQ(bf16(1e300).bits, 0x7F80);
  EXPECT_EQ(bf16(-1e300).bits, 0xFF80);
  EXPECT_EQ(f16(1e-300).bits, 0x0000);
  EXPECT_EQ(f16(-1e-300).bits, 0x8000);
  EXPECT_EQ(bf16(1e-300).bits, 0x0000);
  EXPECT_EQ(f16(0x1p-25 + 0x1p-60).bits, 0x0001);
  EXPECT_TRUE(std::isnan(float(f16(std::nan("")))));
  EXPECT_TRUE(std::isnan(float(bf16(std::nan("")))));
  EXPECT_EQ(f16(-INFINITY * 1.0).bits, 0xFC00);
}

} // namespace
