//===- HostAttentionSegmentsTest.cpp - attention within documents ---------===//
//
// rp.attention's segments mask (an i64 [batch, keys] document id per key
// position; packed rows, memory linear in the sequence) on the host: the
// forward and backward bitwise equal to the same block-diagonal mask given
// as a dense i1 [batch, 1, queries, keys] mask, with the causal flag, a
// window, grouped-query heads and more keys than queries; and the checks.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include <cmath>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;
using rp::runtime::kernels::AttentionExtras;

namespace {

struct SegmentCase {
  int64_t b, h, hkv, s, t, d;
  bool causal;
  int64_t window; // 0: none (causal only)
  /// Each row's document lengths over the t key positions (-1: padding).
  std::vector<std::vector<int64_t>> docs;
  const char *name;
};

const SegmentCase kCases[] = {
    {2, 2, 2, 20, 20, 4, true, 0, {{5, 9, 6}, {20}}, "causal, two rows"},
    {1, 4, 2, 37, 37, 4, true, 0, {{3, 17, 1, 16}}, "over blocks, gqa"},
    {1, 2, 2, 9, 24, 4, true, 0, {{10, 10, 4}}, "more keys than queries"},
    {1, 2, 1, 33, 33, 3, true, 6, {{12, 21}}, "window"},
    {1, 2, 2, 18, 18, 4, false, 0, {{7, 11}}, "not causal"},
};

/// The segment ids of a case: document k of a row holds id k; the rest of
/// the row (if the lengths fall short) is padding, id -1.
std::vector<double> segmentIds(const SegmentCase &c) {
  std::vector<double> ids;
  for (const auto &row : c.docs) {
    int64_t n = 0;
    for (size_t k = 0; k < row.size(); ++k)
      for (int64_t e = 0; e < row[k]; ++e, ++n)
        ids.push_back(static_cast<double>(k));
    for (; n < c.t; ++n)
      ids.push_back(-1);
  }
  return ids;
}

/// The same keep set as an i1 [b, 1, s, t] mask (the band is the flags').
Buffer denseMask(const SegmentCase &c, const std::vector<double> &ids) {
  std::vector<double> keep;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t i = 0; i < c.s; ++i)
      for (int64_t j = 0; j < c.t; ++j)
        keep.push_back(ids[b * c.t + i + c.t - c.s] == ids[b * c.t + j]);
  return fromValues(DType::i1, {c.b, 1, c.s, c.t}, keep);
}

TEST(HostAttentionSegmentsTest, SegmentsAreTheDenseBlockMaskBitwise) {
  ThreadPool pool(2);
  Rng rng(811);
  for (const SegmentCase &c : kCases)
    for (DType dtype : {DType::f32, DType::bf16}) {
      std::vector<double> ids = segmentIds(c);
      ASSERT_EQ(static_cast<int64_t>(ids.size()), c.b * c.t) << c.name;
      Buffer segments = fromValues(DType::i64, {c.b, c.t}, ids);
      Buffer dense = denseMask(c, ids);
      Buffer q = randomBuffer(dtype, {c.b, c.h, c.s, c.d}, rng, -2, 2);
      Buffer k = randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng, -2, 2);
      Buffer v = randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng);
      AttentionExtras extras;
      extras.window = c.window;
      double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
      Buffer a(dtype, {c.b, c.h, c.s, c.d}), b(dtype, a.shape);
      Status sa = attention(pool, q.ref(), k.ref(), v.ref(), segments.ref(),
                            c.causal, scale, a.ref(), extras);
      ASSERT_TRUE(sa.isOk()) << sa.toString();
      ASSERT_TRUE(attention(pool, q.ref(), k.ref(), v.ref(), dense.ref(),
                            c.causal, scale, b.ref(), extras)
                      .isOk());
      EXPECT_EQ(a.values(), b.values()) << c.name;
      Buffer dy = randomBuffer(dtype, a.shape, rng);
      Buffer gq[2] = {Buffer(dtype, q.shape), Buffer(dtype, q.shape)};
      Buffer gk[2] = {Buffer(dtype, k.shape), Buffer(dtype, k.shape)};
      Buffer gv[2] = {Buffer(dtype, v.shape), Buffer(dtype, v.shape)};
      for (int x = 0; x < 2; ++x) {
        Status s = attentionGrad(pool, q.ref(), k.ref(), v.ref(),
                                 x ? dense.ref() : segments.ref(), c.causal,
                                 scale, dy.ref(), gq[x].ref(), gk[x].ref(),
                                 gv[x].ref(), extras);
        ASSERT_TRUE(s.isOk()) << s.toString();
      }
      EXPECT_EQ(gq[0].values(), gq[1].values()) << c.name;
      EXPECT_EQ(gk[0].values(), gk[1].values()) << c.name;
      EXPECT_EQ(gv[0].values(), gv[1].values()) << c.name;
      // Documents do matter: the plain causal attention differs.
      Buffer plain(dtype, a.shape);
      ASSERT_TRUE(attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt,
                            c.causal, scale, plain.ref(), extras)
                      .isOk());
      if (c.docs[0].size() > 1)
        EXPECT_NE(a.values(), plain.values()) << c.name;
    }
}

TEST(HostAttentionSegmentsTest, SegmentsMustBeBatchByKeys) {
  ThreadPool pool(1);
  Rng rng(812);
  Buffer q = randomBuffer(DType::f32, {2, 2, 8, 4}, rng);
  Buffer out(DType::f32, q.shape);
  Buffer wrong = fromValues(DType::i64, {1, 8}, std::vector<double>(8, 0));
  Status s = attention(pool, q.ref(), q.ref(), q.ref(), wrong.ref(), true, 0.5,
                       out.ref(), {});
  ASSERT_TRUE(s.failed());
  EXPECT_NE(s.getMessage().find("attention: segments i64[1, 8] must be "
                                "[batch, keys] = [2, 8]"),
            std::string::npos)
      << s.getMessage();
}

} // namespace
