//===- HostAttentionExtrasTest.cpp - window, bottom-right causal, soft-cap ===//
//
// rp.attention's sliding window, its causal mask with more keys than
// queries (aligned bottom-right) and Gemma 2's soft-cap on the host: the
// forward against a naive reference in double in every float dtype, the
// backward against central differences in f64, the window bitwise equal to
// the same band given as a dense i1 mask (forward and backward), the same
// bits for any thread count, and the argument checks.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include <cmath>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;
using rp::runtime::kernels::AttentionExtras;

namespace {

struct ExtrasCase {
  int64_t b, h, hkv, s, t, d, dv;
  int64_t window; // 0: none
  double softcap; // 0: none
  const char *name;
};

// Causal throughout: a window needs it. Lengths cross the kernels' blocks
// of 16 keys and 16 query rows.
const ExtrasCase kCases[] = {
    {1, 2, 2, 9, 9, 4, 3, 3, 0, "window 3"},
    {1, 2, 1, 37, 37, 4, 4, 20, 0, "window 20 over blocks, gqa"},
    {2, 2, 2, 5, 13, 4, 3, 0, 0, "bottom-right causal"},
    {1, 2, 2, 7, 40, 3, 3, 18, 0, "bottom-right with window"},
    {1, 2, 2, 9, 9, 4, 4, 0, 0.7, "soft-cap"},
    {1, 4, 2, 6, 21, 4, 4, 5, 0.9, "everything"},
    {1, 1, 1, 8, 8, 4, 4, 100, 0, "window wider than the sequence"},
};

/// Naive attention in double with the causal band (bottom-right), the
/// window and the soft-cap.
std::vector<double> reference(const ExtrasCase &c, const Buffer &q,
                              const Buffer &k, const Buffer &v, double scale) {
  std::vector<double> out(c.b * c.h * c.s * c.dv, 0.0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      int64_t hk = h / (c.h / c.hkv);
      for (int64_t i = 0; i < c.s; ++i) {
        int64_t p = i + c.t - c.s;
        std::vector<double> s(c.t, 0.0);
        std::vector<bool> kept(c.t, false);
        double m = -INFINITY;
        for (int64_t j = 0; j < c.t; ++j) {
          if (j > p || (c.window > 0 && j <= p - c.window))
            continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += q.get(((b * c.h + h) * c.s + i) * c.d + e) *
                   k.get(((b * c.hkv + hk) * c.t + j) * c.d + e);
          double x = dot * scale;
          s[j] = c.softcap > 0 ? c.softcap * std::tanh(x / c.softcap) : x;
          kept[j] = true;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.t; ++j)
          sum += kept[j] ? (s[j] = std::exp(s[j] - m)) : (s[j] = 0.0);
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

AttentionExtras extrasOf(const ExtrasCase &c) {
  AttentionExtras e;
  e.window = c.window;
  e.softcap = c.softcap;
  return e;
}

double scaleOf(const ExtrasCase &c) {
  return 1.0 / std::sqrt(static_cast<double>(c.d));
}

struct Inputs {
  Buffer q, k, v;
};

Inputs makeInputs(const ExtrasCase &c, DType dtype, Rng &rng) {
  return {randomBuffer(dtype, {c.b, c.h, c.s, c.d}, rng, -2, 2),
          randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng, -2, 2),
          randomBuffer(dtype, {c.b, c.hkv, c.t, c.dv}, rng)};
}

/// The band rp.attention's causal mask and window keep, as a [S, T] i1
/// mask.
Buffer bandMask(const ExtrasCase &c) {
  std::vector<double> keep;
  for (int64_t i = 0; i < c.s; ++i)
    for (int64_t j = 0; j < c.t; ++j) {
      int64_t p = i + c.t - c.s;
      keep.push_back(j <= p && (c.window == 0 || j > p - c.window));
    }
  return fromValues(DType::i1, {c.s, c.t}, keep);
}

TEST(HostAttentionExtrasTest, ForwardMatchesReference) {
  ThreadPool pool(3);
  Rng rng(700);
  for (const ExtrasCase &c : kCases)
    for (DType dtype : kFloatTypes) {
      Inputs in = makeInputs(c, dtype, rng);
      Buffer out(dtype, {c.b, c.h, c.s, c.dv});
      Status s =
          attention(pool, in.q.ref(), in.k.ref(), in.v.ref(), std::nullopt,
                    true, scaleOf(c), out.ref(), extrasOf(c));
      ASSERT_TRUE(s.isOk()) << s.toString();
      EXPECT_CLOSE(out, reference(c, in.q, in.k, in.v, scaleOf(c)))
          << c.name << ", " << dtypeName(dtype);
    }
}

struct Grads {
  Buffer dq, dk, dv;
};

Grads runGrad(ThreadPool &pool, const ExtrasCase &c, const Inputs &in,
              const std::optional<TensorRef> &mask, const AttentionExtras &e,
              const Buffer &dy) {
  DType dtype = in.q.dtype;
  Grads g{Buffer(dtype, in.q.shape), Buffer(dtype, in.k.shape),
          Buffer(dtype, in.v.shape)};
  Status s = attentionGrad(pool, in.q.ref(), in.k.ref(), in.v.ref(), mask, true,
                           scaleOf(c), dy.ref(), g.dq.ref(), g.dk.ref(),
                           g.dv.ref(), e);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return g;
}

TEST(HostAttentionExtrasTest, BackwardMatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(701);
  for (const ExtrasCase &c : kCases) {
    Inputs in = makeInputs(c, DType::f64, rng);
    Buffer dy = randomBuffer(DType::f64, {c.b, c.h, c.s, c.dv}, rng);
    Buffer out(DType::f64, dy.shape);
    auto loss = [&]() {
      EXPECT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                            std::nullopt, true, scaleOf(c), out.ref(),
                            extrasOf(c))
                      .isOk());
      return dotValues(out, dy);
    };
    Grads g = runGrad(pool, c, in, std::nullopt, extrasOf(c), dy);
    EXPECT_GRAD_CLOSE(g.dq, numericGradient(in.q, loss), kF64GradTolerance)
        << " dq, " << c.name;
    EXPECT_GRAD_CLOSE(g.dk, numericGradient(in.k, loss), kF64GradTolerance)
        << " dk, " << c.name;
    EXPECT_GRAD_CLOSE(g.dv, numericGradient(in.v, loss), kF64GradTolerance)
        << " dv, " << c.name;
  }
}

// The window and the bottom-right diagonal skip what they drop; what they
// compute is what the same band as a dense i1 mask computes, bit for bit.
TEST(HostAttentionExtrasTest, WindowIsTheDenseBandBitwise) {
  ThreadPool pool(2);
  Rng rng(702);
  for (const ExtrasCase &c : kCases)
    for (DType dtype : {DType::f32, DType::bf16}) {
      Inputs in = makeInputs(c, dtype, rng);
      Buffer mask = bandMask(c);
      AttentionExtras capOnly;
      capOnly.softcap = c.softcap;
      Buffer a(dtype, {c.b, c.h, c.s, c.dv}), b(dtype, a.shape);
      ASSERT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                            std::nullopt, true, scaleOf(c), a.ref(),
                            extrasOf(c))
                      .isOk());
      // Bottom-right causal as a mask: no flag (the flag needs S == T to
      // mean the same), the band says it all.
      ASSERT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                            mask.ref(), false, scaleOf(c), b.ref(), capOnly)
                      .isOk());
      EXPECT_EQ(a.values(), b.values()) << c.name;
      Buffer dy = randomBuffer(dtype, a.shape, rng);
      Grads ga = runGrad(pool, c, in, std::nullopt, extrasOf(c), dy);
      DType dt = dtype;
      Grads gb{Buffer(dt, in.q.shape), Buffer(dt, in.k.shape),
               Buffer(dt, in.v.shape)};
      ASSERT_TRUE(attentionGrad(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                                mask.ref(), false, scaleOf(c), dy.ref(),
                                gb.dq.ref(), gb.dk.ref(), gb.dv.ref(), capOnly)
                      .isOk());
      EXPECT_EQ(ga.dq.values(), gb.dq.values()) << c.name;
      EXPECT_EQ(ga.dk.values(), gb.dk.values()) << c.name;
      EXPECT_EQ(ga.dv.values(), gb.dv.values()) << c.name;
    }
}

TEST(HostAttentionExtrasTest, SameBitsForAnyThreadCount) {
  Rng rng(703);
  const ExtrasCase &c = kCases[5];
  Inputs in = makeInputs(c, DType::f32, rng);
  Buffer dy = randomBuffer(DType::f32, {c.b, c.h, c.s, c.dv}, rng);
  expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
    Buffer out(DType::f32, dy.shape);
    EXPECT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                          std::nullopt, true, scaleOf(c), out.ref(),
                          extrasOf(c))
                    .isOk());
    Grads g = runGrad(pool, c, in, std::nullopt, extrasOf(c), dy);
    return std::vector<Buffer>{out, g.dq, g.dk, g.dv};
  });
}

TEST(HostAttentionExtrasTest, ArgumentErrors) {
  ThreadPool pool(1);
  Buffer q(DType::f32, {1, 1, 5, 4}), k(DType::f32, {1, 1, 4, 4}),
      v(DType::f32, {1, 1, 4, 4}), out(DType::f32, {1, 1, 5, 4});
  // More queries than keys: no bottom-right diagonal to align to.
  EXPECT_FALSE(attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt, true,
                         1.0, out.ref())
                   .isOk());
  Buffer q2(DType::f32, {1, 1, 4, 4}), out2(DType::f32, {1, 1, 4, 4});
  AttentionExtras window;
  window.window = 2;
  // A window needs causal.
  EXPECT_FALSE(attention(pool, q2.ref(), k.ref(), v.ref(), std::nullopt, false,
                         1.0, out2.ref(), window)
                   .isOk());
  EXPECT_TRUE(attention(pool, q2.ref(), k.ref(), v.ref(), std::nullopt, true,
                        1.0, out2.ref(), window)
                  .isOk());
  AttentionExtras badCap;
  badCap.softcap = -1;
  EXPECT_FALSE(attention(pool, q2.ref(), k.ref(), v.ref(), std::nullopt, true,
                         1.0, out2.ref(), badCap)
                   .isOk());
}

} // namespace
