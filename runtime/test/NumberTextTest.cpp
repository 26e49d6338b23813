//===- NumberTextTest.cpp - the one strict parser of numbers in flags -----===//

#include "rp/contract/NumberText.h"

#include <gtest/gtest.h>

using namespace rp::numbers;

TEST(NumberTextTest, WholeNumbersAreDecimalDigitsOnly) {
  EXPECT_EQ(parseUnsignedText("0"), 0u);
  EXPECT_EQ(parseUnsignedText("18446744073709551615"), UINT64_MAX);
  // What CLI11, strtoul or LLVM's parsers took: empty (0), a sign (wraps),
  // spaces, hex, octal, exponents, overflow.
  for (const char *bad : {"", "-1", "+1", " 1", "1 ", "0x10", "010", "1e3",
                          "1.0", "18446744073709551616", "two"})
    EXPECT_FALSE(parseUnsignedText(bad)) << "'" << bad << "'";
}

TEST(NumberTextTest, SignedIntegersTakeAMinusWithinInt64) {
  EXPECT_EQ(parseSignedText("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(parseSignedText("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parseSignedText("-1"), -1);
  for (const char *bad : {"", "-", "--1", "9223372036854775808", "-0x1"})
    EXPECT_FALSE(parseSignedText(bad)) << "'" << bad << "'";
}

TEST(NumberTextTest, RealsAreFiniteDecimalNumbers) {
  EXPECT_EQ(parseRealText("1e-3"), 1e-3);
  EXPECT_EQ(parseRealText(".5"), 0.5);
  EXPECT_EQ(parseRealText("5."), 5.0);
  EXPECT_EQ(parseRealText("-2.5E+2"), -250.0);
  for (const char *bad : {"", ".", "e5", "1e", "1e-3x", " 1", "nan", "inf",
                          "-inf", "0x1p3", "1e999", "+1", "1,5"})
    EXPECT_FALSE(parseRealText(bad)) << "'" << bad << "'";
}

TEST(NumberTextTest, RefusedTextIsShownQuotedWhenItWouldLookAbsent) {
  EXPECT_EQ(shownText("1e-3x"), "1e-3x");
  EXPECT_EQ(shownText(""), "''");
  EXPECT_EQ(shownText(" 1"), "' 1'");
}
