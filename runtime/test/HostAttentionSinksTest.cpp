//===- HostAttentionSinksTest.cpp - GPT-OSS's attention sinks on the host -===//
//
// Attention sinks (a learned logit per query head, one more column in each
// row's softmax whose probability is dropped) in the host kernels: the
// forward against a naive reference in double in every float dtype, the
// backward (dq, dk, dv and the sinks' gradient) against central
// differences in f64, with windows, grouped heads, more keys than queries
// and packed rows' segment ids; a row whose keys are all masked gives 0
// (the sink takes its whole probability); the same bits for any thread
// count; the argument checks.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include <cmath>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;
using rp::runtime::kernels::AttentionExtras;

namespace {

struct SinksCase {
  int64_t b, h, hkv, s, t, d, dv;
  bool causal;
  int64_t window; // 0: none
  bool segments;  // i64 ids [b, t]: documents of 5 positions
  const char *name;
};

// Lengths cross the kernels' blocks of 16 keys and 16 query rows.
const SinksCase kCases[] = {
    {1, 2, 2, 9, 9, 4, 3, true, 0, false, "causal"},
    {2, 4, 2, 19, 19, 4, 4, true, 6, false, "window 6 over blocks, gqa"},
    {1, 2, 2, 5, 13, 4, 3, true, 0, false, "bottom-right causal"},
    {1, 2, 1, 7, 7, 4, 4, false, 0, false, "not causal"},
    {2, 2, 2, 17, 17, 3, 3, true, 4, true, "segments and window"},
};

double scaleOf(const SinksCase &c) {
  return 1.0 / std::sqrt(static_cast<double>(c.d));
}

int64_t segmentOf(int64_t b, int64_t j) { return (j + b) / 5; }

/// Naive attention in double with the causal band (bottom-right), the
/// window, the segments and the sink's column.
std::vector<double> reference(const SinksCase &c, const Buffer &q,
                              const Buffer &k, const Buffer &v,
                              const Buffer &sinks) {
  std::vector<double> out(c.b * c.h * c.s * c.dv, 0.0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h) {
      int64_t hk = h / (c.h / c.hkv);
      for (int64_t i = 0; i < c.s; ++i) {
        int64_t p = i + c.t - c.s;
        std::vector<double> s(c.t, -INFINITY);
        double m = sinks.get(h);
        for (int64_t j = 0; j < c.t; ++j) {
          if ((c.causal && j > p) || (c.window > 0 && j <= p - c.window) ||
              (c.segments && segmentOf(b, j) != segmentOf(b, p)))
            continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += q.get(((b * c.h + h) * c.s + i) * c.d + e) *
                   k.get(((b * c.hkv + hk) * c.t + j) * c.d + e);
          s[j] = dot * scaleOf(c);
          m = std::max(m, s[j]);
        }
        double sum = std::exp(sinks.get(h) - m);
        for (int64_t j = 0; j < c.t; ++j)
          sum += (s[j] = std::exp(s[j] - m));
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

struct Inputs {
  Buffer q, k, v, sinks, segments;
};

Inputs makeInputs(const SinksCase &c, DType dtype, Rng &rng) {
  std::vector<double> ids;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t j = 0; j < c.t; ++j)
      ids.push_back(static_cast<double>(segmentOf(b, j)));
  return {randomBuffer(dtype, {c.b, c.h, c.s, c.d}, rng, -2, 2),
          randomBuffer(dtype, {c.b, c.hkv, c.t, c.d}, rng, -2, 2),
          randomBuffer(dtype, {c.b, c.hkv, c.t, c.dv}, rng),
          // Around the scores' size, so that the sink takes a real share.
          randomBuffer(dtype, {c.h}, rng, -1, 2),
          fromValues(DType::i64, {c.b, c.t}, ids)};
}

std::optional<TensorRef> maskOf(const SinksCase &c, const Inputs &in) {
  if (!c.segments)
    return std::nullopt;
  return in.segments.ref();
}

Status forward(ThreadPool &pool, const SinksCase &c, const Inputs &in,
               const Buffer &out) {
  TensorRef sinks = in.sinks.ref();
  AttentionExtras e;
  e.window = c.window;
  e.sinks = &sinks;
  return attention(pool, in.q.ref(), in.k.ref(), in.v.ref(), maskOf(c, in),
                   c.causal, scaleOf(c), out.ref(), e);
}

struct Grads {
  Buffer dq, dk, dv, dsinks;
};

Grads backward(ThreadPool &pool, const SinksCase &c, const Inputs &in,
               const Buffer &dy) {
  DType dtype = in.q.dtype;
  Grads g{Buffer(dtype, in.q.shape), Buffer(dtype, in.k.shape),
          Buffer(dtype, in.v.shape), Buffer(dtype, in.sinks.shape)};
  TensorRef sinks = in.sinks.ref(), dsinks = g.dsinks.ref();
  AttentionExtras e;
  e.window = c.window;
  e.sinks = &sinks;
  e.sinksGrad = &dsinks;
  Status s = attentionGrad(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                           maskOf(c, in), c.causal, scaleOf(c), dy.ref(),
                           g.dq.ref(), g.dk.ref(), g.dv.ref(), e);
  EXPECT_TRUE(s.isOk()) << s.toString();
  return g;
}

TEST(HostAttentionSinksTest, ForwardMatchesReference) {
  ThreadPool pool(3);
  Rng rng(900);
  for (const SinksCase &c : kCases)
    for (DType dtype : kFloatTypes) {
      Inputs in = makeInputs(c, dtype, rng);
      Buffer out(dtype, {c.b, c.h, c.s, c.dv});
      Status s = forward(pool, c, in, out);
      ASSERT_TRUE(s.isOk()) << s.toString();
      EXPECT_CLOSE(out, reference(c, in.q, in.k, in.v, in.sinks))
          << c.name << ", " << dtypeName(dtype);
    }
}

TEST(HostAttentionSinksTest, BackwardMatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(901);
  for (const SinksCase &c : kCases) {
    Inputs in = makeInputs(c, DType::f64, rng);
    Buffer dy = randomBuffer(DType::f64, {c.b, c.h, c.s, c.dv}, rng);
    Buffer out(DType::f64, dy.shape);
    auto loss = [&]() {
      EXPECT_TRUE(forward(pool, c, in, out).isOk());
      return dotValues(out, dy);
    };
    Grads g = backward(pool, c, in, dy);
    EXPECT_GRAD_CLOSE(g.dq, numericGradient(in.q, loss), kF64GradTolerance)
        << " dq, " << c.name;
    EXPECT_GRAD_CLOSE(g.dk, numericGradient(in.k, loss), kF64GradTolerance)
        << " dk, " << c.name;
    EXPECT_GRAD_CLOSE(g.dv, numericGradient(in.v, loss), kF64GradTolerance)
        << " dv, " << c.name;
    EXPECT_GRAD_CLOSE(g.dsinks, numericGradient(in.sinks, loss),
                      kF64GradTolerance)
        << " dsinks, " << c.name;
  }
}

// A sink changes the output (the control: the same inputs without it), and
// a row whose keys are all masked (a boolean mask of all false) gives 0 and
// no gradient: the sink takes the row's whole probability.
TEST(HostAttentionSinksTest, SinkTakesItsShare) {
  ThreadPool pool(2);
  Rng rng(902);
  const SinksCase &c = kCases[0];
  Inputs in = makeInputs(c, DType::f64, rng);
  const Shape outShape{c.b, c.h, c.s, c.dv};
  Buffer with(DType::f64, outShape), without(DType::f64, outShape);
  ASSERT_TRUE(forward(pool, c, in, with).isOk());
  ASSERT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(), std::nullopt,
                        c.causal, scaleOf(c), without.ref())
                  .isOk());
  double diff = 0;
  for (int64_t i = 0; i < with.size(); ++i)
    diff = std::max(diff, std::fabs(with.get(i) - without.get(i)));
  EXPECT_GT(diff, 1e-3);

  Buffer none =
      fromValues(DType::i1, {c.s, c.t}, std::vector<double>(c.s * c.t, 0.0));
  TensorRef sinks = in.sinks.ref();
  AttentionExtras e;
  e.sinks = &sinks;
  ASSERT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(), none.ref(),
                        false, scaleOf(c), with.ref(), e)
                  .isOk());
  for (int64_t i = 0; i < with.size(); ++i)
    ASSERT_EQ(with.get(i), 0.0) << i;
}

TEST(HostAttentionSinksTest, SameBitsForAnyThreadCount) {
  Rng rng(903);
  const SinksCase &c = kCases[4];
  Inputs in = makeInputs(c, DType::f32, rng);
  Buffer dy = randomBuffer(DType::f32, {c.b, c.h, c.s, c.dv}, rng);
  expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
    Buffer out(DType::f32, dy.shape);
    EXPECT_TRUE(forward(pool, c, in, out).isOk());
    Grads g = backward(pool, c, in, dy);
    return std::vector<Buffer>{out, g.dq, g.dk, g.dv, g.dsinks};
  });
}

TEST(HostAttentionSinksTest, ArgumentErrors) {
  ThreadPool pool(1);
  Buffer q(DType::f32, {1, 2, 4, 4}), k(DType::f32, {1, 2, 4, 4}),
      v(DType::f32, {1, 2, 4, 4}), out(DType::f32, {1, 2, 4, 4});
  Buffer perKvHead(DType::f32, {1}), wrongType(DType::f64, {2}),
      good(DType::f32, {2});
  auto run = [&](const Buffer &sinks) {
    TensorRef ref = sinks.ref();
    AttentionExtras e;
    e.sinks = &ref;
    return attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt, true, 1.0,
                     out.ref(), e);
  };
  Status s = run(perKvHead);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.toString().find("must be [query heads] = [2]"), std::string::npos)
      << s.toString();
  EXPECT_FALSE(run(wrongType).isOk());
  EXPECT_TRUE(run(good).isOk());
  // A sinks gradient belongs to attention_grad, with its sinks.
  TensorRef grad = good.ref();
  AttentionExtras e;
  e.sinksGrad = &grad;
  EXPECT_FALSE(attention(pool, q.ref(), k.ref(), v.ref(), std::nullopt, true,
                         1.0, out.ref(), e)
                   .isOk());
}

} // namespace
