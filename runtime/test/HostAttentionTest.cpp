//===- HostAttentionTest.cpp - attention host kernel tests ----------------===//
//
// The online-softmax kernel against a naive softmax(scale Q K^T + mask) V in
// double, with causal masking, i1 and float masks (broadcast from smaller
// shapes), grouped-query heads, fully masked rows and every float dtype.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

struct AttentionCase {
  int64_t b, h, hkv, s, t, d, dv;
};

/// Naive attention in double. A row with every key masked gives zeros, the
/// documented convention of the kernel.
std::vector<double> referenceAttention(const AttentionCase &c, const Buffer &q,
                                       const Buffer &k, const Buffer &v,
                                       const Buffer *mask, bool causal,
                                       double scale) {
  std::vector<double> out(c.b * c.h * c.s * c.dv, 0.0);
  Shape scores = {c.b, c.h, c.s, c.t};
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      int64_t hk = h / (c.h / c.hkv);
      for (int64_t i = 0; i < c.s; ++i) {
        std::vector<double> s(c.t, -INFINITY);
        double m = -INFINITY;
        for (int64_t j = 0; j < c.t; ++j) {
          if (causal && j > i)
            continue;
          double bias = 0;
          if (mask) {
            double mv = mask->get(broadcastIndex(
                scores, mask->shape, ((b * c.h + h) * c.s + i) * c.t + j));
            if (mask->dtype == DType::i1 && mv == 0)
              continue;
            if (mask->dtype != DType::i1)
              bias = mv;
          }
          double dot = 0;
          for (int64_t p = 0; p < c.d; ++p)
            dot += q.get(((b * c.h + h) * c.s + i) * c.d + p) *
                   k.get(((b * c.hkv + hk) * c.t + j) * c.d + p);
          s[j] = dot * scale + bias;
          m = std::max(m, s[j]);
        }
        if (m == -INFINITY)
          continue;
        double sum = 0;
        for (double &x : s)
          sum += (x = std::exp(x - m));
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < c.t; ++j)
            acc += s[j] * v.get(((b * c.hkv + hk) * c.t + j) * c.dv + e);
          out[((b * c.h + h) * c.s + i) * c.dv + e] = acc / sum;
        }
      }
    }
  return out;
}

/// Runs one case in every float dtype and compares with the reference.
/// `maskShape` empty means no mask.
void checkAttention(const AttentionCase &c, bool causal, const Shape *maskShape,
                    bool boolMask, uint64_t seed) {
  ThreadPool pool(3);
  Rng rng(seed);
  for (DType dtype : kFloatTypes) {
    Buffer q = randomBuffer(dtype, {c.b, c.h, c.s, c.d}, rng, -2, 2);
    Buffer k = randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng, -2, 2);
    Buffer v = randomBuffer(dtype, {c.b, c.hkv, c.t, c.dv}, rng);
    std::optional<Buffer> mask;
    std::optional<TensorRef> maskRef;
    if (maskShape) {
      mask = boolMask ? randomBuffer(DType::i1, *maskShape, rng)
                      : randomBuffer(dtype, *maskShape, rng, -3, 1);
      if (!boolMask) // Some keys dropped by -inf, as additive masks do.
        for (int64_t i = 0; i < mask->size(); i += 5)
          mask->set(i, -INFINITY);
      maskRef = mask->ref();
    }
    double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    Buffer out(dtype, {c.b, c.h, c.s, c.dv});
    Status s = attention(pool, q.ref(), k.ref(), v.ref(), maskRef, causal,
                         scale, out.ref());
    ASSERT_TRUE(s.isOk()) << s.toString();
    EXPECT_CLOSE(out, referenceAttention(c, q, k, v, mask ? &*mask : nullptr,
                                         causal, scale))
        << " causal " << causal << " mask " << (maskShape != nullptr);
  }
}

TEST(HostAttentionTest, Plain) {
  checkAttention({2, 3, 3, 7, 33, 17, 5}, false, nullptr, false, 40);
  checkAttention({1, 1, 1, 1, 1, 1, 1}, false, nullptr, false, 41);
  checkAttention({1, 2, 2, 40, 17, 8, 9}, false, nullptr, false, 42);
}

TEST(HostAttentionTest, Causal) {
  checkAttention({2, 3, 3, 33, 33, 16, 16}, true, nullptr, false, 43);
  checkAttention({1, 1, 1, 1, 1, 3, 3}, true, nullptr, false, 44);
}

TEST(HostAttentionTest, BoolMask) {
  Shape full = {2, 3, 7, 17}, perBatch = {2, 1, 1, 17}, square = {7, 17};
  checkAttention({2, 3, 3, 7, 17, 8, 8}, false, &full, true, 45);
  checkAttention({2, 3, 3, 7, 17, 8, 8}, false, &perBatch, true, 46);
  checkAttention({2, 3, 3, 7, 17, 8, 8}, false, &square, true, 47);
}

TEST(HostAttentionTest, FloatMask) {
  Shape heads = {1, 3, 1, 17}, full = {2, 3, 7, 17};
  checkAttention({2, 3, 3, 7, 17, 8, 4}, false, &heads, false, 48);
  checkAttention({2, 3, 3, 7, 17, 8, 4}, false, &full, false, 49);
}

TEST(HostAttentionTest, CausalWithMask) {
  Shape keyPadding = {2, 1, 1, 17};
  checkAttention({2, 2, 2, 17, 17, 8, 8}, true, &keyPadding, true, 50);
}

TEST(HostAttentionTest, GroupedQueryHeads) {
  checkAttention({2, 4, 2, 7, 17, 8, 8}, false, nullptr, false, 51);
  checkAttention({1, 4, 2, 33, 33, 8, 8}, true, nullptr, false, 52);
  checkAttention({1, 6, 1, 5, 9, 4, 4}, false, nullptr, false, 53);
}

TEST(HostAttentionTest, FullyMaskedRowIsZero) {
  ThreadPool pool(2);
  Rng rng(54);
  for (DType dtype : kFloatTypes) {
    Buffer q = randomBuffer(dtype, {1, 1, 2, 4}, rng);
    Buffer k = randomBuffer(dtype, {1, 1, 3, 4}, rng);
    Buffer v = randomBuffer(dtype, {1, 1, 3, 4}, rng);
    // Row 0 keeps nothing, row 1 keeps key 2 only.
    Buffer mask = fromValues(DType::i1, {2, 3}, {0, 0, 0, 0, 0, 1});
    Buffer out(dtype, {1, 1, 2, 4});
    ASSERT_TRUE(attention(pool, q.ref(), k.ref(), v.ref(), mask.ref(), false,
                          0.5, out.ref())
                    .isOk());
    for (int64_t e = 0; e < 4; ++e) {
      EXPECT_EQ(out.get(e), 0.0);
      EXPECT_EQ(out.get(4 + e), v.get(8 + e));
    }
  }
}

TEST(HostAttentionTest, ShapeErrors) {
  ThreadPool pool(1);
  Buffer q(DType::f32, {1, 3, 4, 8}), k(DType::f32, {1, 2, 4, 8}),
      v(DType::f32, {1, 2, 4, 8}), out(DType::f32, {1, 3, 4, 8});
  // 3 query heads over 2 key/value heads.
  EXPECT_FALSE(attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt, false,
                         1.0, out.ref())
                   .isOk());
  Buffer q2(DType::f32, {1, 2, 4, 8}), k2(DType::f32, {1, 2, 5, 8}),
      v2(DType::f32, {1, 2, 5, 8}), out2(DType::f32, {1, 2, 4, 8});
  EXPECT_TRUE(attention(pool, q2.ref(), k2.ref(), v2.ref(), std::nullopt, false,
                        1.0, out2.ref())
                  .isOk());
  // Causal with more keys than queries aligns bottom-right
  // (HostAttentionExtrasTest); more queries than keys is refused there.
  EXPECT_TRUE(attention(pool, q2.ref(), k2.ref(), v2.ref(), std::nullopt, true,
                        1.0, out2.ref())
                  .isOk());
  Buffer badMask(DType::i1, {3, 5});
  EXPECT_FALSE(attention(pool, q2.ref(), k2.ref(), v2.ref(), badMask.ref(),
                         false, 1.0, out2.ref())
                   .isOk());
  Buffer f64Mask(DType::f64, {4, 5});
  EXPECT_FALSE(attention(pool, q2.ref(), k2.ref(), v2.ref(), f64Mask.ref(),
                         false, 1.0, out2.ref())
                   .isOk());
}

TEST(HostAttentionTest, SameBitsForAnyThreadCount) {
  Rng rng(55);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    Buffer q = randomBuffer(dtype, {2, 4, 50, 16}, rng);
    Buffer k = randomBuffer(dtype, {2, 2, 50, 16}, rng);
    Buffer v = randomBuffer(dtype, {2, 2, 50, 16}, rng);
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, {2, 4, 50, 16});
      EXPECT_TRUE(attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt, true,
                            0.25, out.ref())
                      .isOk());
      return out;
    });
  }
}

} // namespace
