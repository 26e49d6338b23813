//===- HostQuantTest.cpp - the host dequantize kernel ---------------------===//
//
// The host kernel is the reference every device matches (DESIGN.md,
// Quantized base): its f32 output is the contract's dequantization, its
// bf16 and f16 outputs that value rounded once, and its bits do not depend
// on the thread count. A blob of the wrong size is refused.
//
//===----------------------------------------------------------------------===//

#include "rp/contract/Quantize.h"
#include "rp/runtime/Half.h"
#include "rp/runtime/host/Quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace rp::runtime;
namespace quant = rp::quant;

namespace {

std::vector<float> randomWeights(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n));
  for (float &v : w)
    v = normal(gen);
  w[3] = 1.5f; // an outlier in the first block
  return w;
}

std::vector<uint8_t> quantized(quant::QuantKind kind,
                               const std::vector<float> &w) {
  int64_t n = int64_t(w.size());
  std::vector<uint8_t> blob(
      static_cast<size_t>(quant::layoutOf(kind, n).bytes));
  quant::quantize(kind, w.data(), n, blob.data());
  return blob;
}

TensorRef ref(void *data, DType dtype, Shape shape) {
  return TensorRef{static_cast<uint8_t *>(data), dtype, std::move(shape)};
}

class HostQuantTest : public ::testing::TestWithParam<quant::QuantKind> {};

TEST_P(HostQuantTest, MatchesTheContractAndRoundsOnce) {
  // 64 x 300 values: 300 blocks, two blocks of the 8-bit level (nf4).
  const int64_t rows = 64, cols = 300, n = rows * cols;
  quant::QuantKind kind = GetParam();
  std::vector<float> w = randomWeights(n, 1);
  std::vector<uint8_t> blob = quantized(kind, w);
  std::vector<float> want(static_cast<size_t>(n));
  quant::dequantize(kind, blob.data(), n, 0, n, want.data());

  Shape blobShape{int64_t(blob.size())};
  ThreadPool one(1), four(4);
  std::vector<float> got1(want.size()), got4(want.size());
  ASSERT_TRUE(host::dequantize(one, ref(blob.data(), DType::u8, blobShape),
                               int64_t(kind),
                               ref(got1.data(), DType::f32, {rows, cols}))
                  .isOk());
  ASSERT_TRUE(host::dequantize(four, ref(blob.data(), DType::u8, blobShape),
                               int64_t(kind),
                               ref(got4.data(), DType::f32, {rows, cols}))
                  .isOk());
  EXPECT_EQ(0, std::memcmp(want.data(), got1.data(), 4 * want.size()));
  EXPECT_EQ(0, std::memcmp(got1.data(), got4.data(), 4 * want.size()));

  std::vector<bf16> half(want.size());
  ASSERT_TRUE(host::dequantize(four, ref(blob.data(), DType::u8, blobShape),
                               int64_t(kind),
                               ref(half.data(), DType::bf16, {rows, cols}))
                  .isOk());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(bf16(want[i]).bits, half[i].bits) << "value " << i;

  // The round trip stays within half the widest gap between levels times
  // the block's absmax (nf4: NF4's widest, -1 to -0.696; int8: 1/127) plus
  // the error of the scale itself.
  double gap = 0.5 / 127;
  if (kind == quant::QuantKind::nf4) {
    gap = 0;
    for (int i = 0; i + 1 < 16; ++i)
      gap = std::max(gap,
                     0.5 * (quant::nf4Levels()[i + 1] - quant::nf4Levels()[i]));
  }
  for (int64_t b = 0; b < n / quant::kBlock; ++b) {
    float absmax = 0;
    for (int64_t i = b * 64; i < (b + 1) * 64; ++i)
      absmax = std::max(absmax, std::fabs(w[size_t(i)]));
    double scale = quant::blockScale(kind, blob.data(), n, b);
    if (kind == quant::QuantKind::int8)
      scale *= 127;
    for (int64_t i = b * 64; i < (b + 1) * 64; ++i)
      ASSERT_LE(std::fabs(w[size_t(i)] - want[size_t(i)]),
                absmax * gap + std::fabs(absmax - scale) + 1e-7)
          << "value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, HostQuantTest,
                         ::testing::Values(quant::QuantKind::nf4,
                                           quant::QuantKind::int8));

TEST(HostQuant, NF4LevelsTimesTheAbsmaxRoundTripExactly) {
  // One block: the centered absmax is 0, so the double-quantized absmax is
  // the offset, the absmax itself, and every level times it comes back.
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i)
    w[size_t(i)] = quant::nf4Levels()[i % 16] * 2.0f;
  std::vector<uint8_t> blob = quantized(quant::QuantKind::nf4, w);
  std::vector<float> back(64);
  quant::dequantize(quant::QuantKind::nf4, blob.data(), 64, 0, 64, back.data());
  EXPECT_EQ(w, back);
}

TEST(HostQuant, RefusesABlobOfAnotherSize) {
  std::vector<uint8_t> blob(10);
  std::vector<float> out(64);
  ThreadPool pool(1);
  Status s = host::dequantize(pool, ref(blob.data(), DType::u8, {10}), 0,
                              ref(out.data(), DType::f32, {64}));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(
      s.getMessage().find("a blob of 10 bytes for 64 values, which take 44"),
      std::string::npos)
      << s.getMessage();
  s = host::dequantize(pool, ref(blob.data(), DType::u8, {10}), 7,
                       ref(out.data(), DType::f32, {64}));
  EXPECT_NE(s.getMessage().find("unknown quantized format 7"),
            std::string::npos);
}

} // namespace
