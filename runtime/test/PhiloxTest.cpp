//===- PhiloxTest.cpp - the counter-based generator and host dropout ------===//
//
// Philox4x32-10 against Random123's known answers (kat_vectors) and
// python/rp/_philox.py's values (test/python/philox.py holds the same
// known answers there), and the
// host dropout kernel: the mask is a function of each element's global
// index alone (the same bits whole, in 2 or 4 slices with their offsets, on
// 1 or 8 threads), p of the elements dropped, the kept ones scaled by
// 1 / (1 - p), and a mask that depends on the seed, step and tensor.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/kernels/Philox.h"
#include "rp/runtime/host/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace rp::runtime;
using namespace rp::runtime::kernels;

namespace {

TEST(PhiloxTest, KnownAnswers) {
  // Random123 1.14 tests/kat_vectors: counter, key, result.
  const struct {
    Philox4 counter;
    uint32_t k0, k1;
    Philox4 want;
  } cases[] = {
      {{{0, 0, 0, 0}},
       0,
       0,
       {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const auto &c : cases) {
    Philox4 got = philox4x32(c.counter, c.k0, c.k1);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.v[i], c.want.v[i]) << "word " << i;
  }
}

TEST(PhiloxTest, MatchesThePythonReference) {
  // python/rp/_philox.py's dropout_bits(0x123456789abcdef0, 7, 3, index).
  DropoutKey key;
  key.seed = 0x1234'5678'9abc'def0ull;
  key.step = 7;
  key.tensor = 3;
  const std::pair<uint64_t, uint32_t> want[] = {
      {0, 0xaba7b3d8u},       {1, 0x8dce32f5u},
      {2, 0xa3b2baeau},       {3, 0x05e481fbu},
      {4, 0x226c3135u},       {5, 0x8540d29cu},
      {1000001, 0x032cb7dfu}, {(1ull << 33) + 2, 0x9f3a81d8u}};
  for (auto [index, bits] : want)
    EXPECT_EQ(dropoutBits(key, index), bits) << index;
}

std::vector<float> ramp(int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = 0.25f + float(i % 97) * 0.5f;
  return x;
}

std::vector<float> runDropout(const DropoutKey &key, std::vector<float> x,
                              unsigned threads = 1) {
  ThreadPool pool(threads);
  std::vector<float> y(x.size(), -1.0f);
  Shape shape{int64_t(x.size())};
  Status s = host::dropout(pool, key, TensorRef{x.data(), DType::f32, shape},
                           TensorRef{y.data(), DType::f32, shape});
  EXPECT_TRUE(s.isOk()) << s.toString();
  return y;
}

TEST(PhiloxTest, DropoutIsAFunctionOfTheGlobalIndex) {
  DropoutKey key;
  key.seed = 0x1234'5678'9abc'def0ull;
  key.step = 7;
  key.tensor = 3;
  key.p = 0.25f;
  const int64_t n = 1 << 17;
  std::vector<float> x = ramp(n);
  std::vector<float> whole = runDropout(key, x);
  EXPECT_EQ(runDropout(key, x, 8), whole);
  // Microbatches on 2 or 4 devices: each slice at its global offset.
  for (int64_t parts : {2, 4}) {
    std::vector<float> joined;
    for (int64_t k = 0; k < parts; ++k) {
      DropoutKey at = key;
      at.offset = uint64_t(k * n / parts);
      std::vector<float> slice(x.begin() + k * n / parts,
                               x.begin() + (k + 1) * n / parts);
      std::vector<float> y = runDropout(at, slice);
      joined.insert(joined.end(), y.begin(), y.end());
    }
    EXPECT_EQ(joined, whole) << parts << " slices";
  }
  int64_t dropped = 0;
  float scale = 1.0f / 0.75f;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = dropoutBits(key, uint64_t(i)) >= dropoutThreshold(key.p);
    EXPECT_EQ(whole[i], keep ? x[i] * scale : 0.0f) << i;
    dropped += !keep;
  }
  // Binomial(n, 0.25): the standard deviation is about 157.
  EXPECT_NEAR(double(dropped) / double(n), 0.25, 0.005);
}

TEST(PhiloxTest, TheMaskDependsOnSeedStepAndTensor) {
  DropoutKey key;
  key.p = 0.5f;
  std::vector<float> x = ramp(4096);
  std::vector<float> base = runDropout(key, x);
  for (int field = 0; field < 3; ++field) {
    DropoutKey other = key;
    if (field == 0)
      other.seed += 1;
    else if (field == 1)
      other.step += 1;
    else
      other.tensor += 1;
    EXPECT_NE(runDropout(other, x), base) << "field " << field;
  }
  // p = 0 keeps everything as it is.
  key.p = 0.0f;
  EXPECT_EQ(runDropout(key, x), x);
}

TEST(PhiloxTest, RefusesAProbabilityOutsideZeroToOne) {
  ThreadPool pool(1);
  std::vector<float> x(4), y(4);
  DropoutKey key;
  key.p = 1.0f;
  Status s = host::dropout(pool, key, TensorRef{x.data(), DType::f32, {4}},
                           TensorRef{y.data(), DType::f32, {4}});
  EXPECT_FALSE(s.isOk());
}

TEST(PhiloxTest, APlanKeyRowPlacesTheMicrobatch) {
  // A plan's dropout reads (seed, step, microbatch, on) from its
  // dropout_key row: microbatch m of n elements starts at global element
  // m * n, so the rows of a 3-microbatch batch are the whole batch's mask.
  const int64_t n = 1000;
  std::vector<float> x = ramp(3 * n);
  DropoutKey whole;
  whole.seed = 11;
  whole.step = 4;
  whole.tensor = 9;
  whole.p = 0.3f;
  std::vector<float> want = runDropout(whole, x), joined;
  for (int64_t m = 0; m < 3; ++m) {
    int64_t row[4] = {11, 4, m, 1};
    DropoutKey key;
    bool on = false;
    Status s = host::dropoutKeyOf(TensorRef{row, DType::i64, {1, 4}}, n, 9, 0.3,
                                  key, on);
    ASSERT_TRUE(s.isOk()) << s.toString();
    EXPECT_TRUE(on);
    EXPECT_EQ(key.offset, uint64_t(m * n));
    std::vector<float> part(x.begin() + m * n, x.begin() + (m + 1) * n);
    std::vector<float> y = runDropout(key, part);
    joined.insert(joined.end(), y.begin(), y.end());
  }
  EXPECT_EQ(joined, want);
  // on = 0 (an eval pass) says so; a key of another shape is refused.
  int64_t off[4] = {11, 4, 0, 0};
  DropoutKey key;
  bool on = true;
  EXPECT_TRUE(
      host::dropoutKeyOf(TensorRef{off, DType::i64, {1, 4}}, n, 9, 0.3, key, on)
          .isOk());
  EXPECT_FALSE(on);
  EXPECT_FALSE(
      host::dropoutKeyOf(TensorRef{off, DType::i64, {1, 3}}, n, 9, 0.3, key, on)
          .isOk());
}

} // namespace
