//===- HostGradientsAttentionTest.cpp - attention backward tests ----------===//
//
// attentionGrad against central differences of the attention forward in
// f64 (dq, dk, dv), with causal masking, i1 and float masks (broadcast,
// with -inf entries, with fully masked rows), grouped-query heads and
// several query and key blocks; the other dtypes against the f64 kernel;
// bitwise identical results for any thread count.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include "rp/runtime/kernels/AttentionGrad.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

struct AttentionCase {
  int64_t b, h, hkv, s, t, d, dv;
};

enum class Mask { none, boolean, additive };

struct GradCase {
  AttentionCase dims;
  bool causal;
  Mask mask;
  Shape maskShape;
  const char *name;
};

const GradCase kGradCases[] = {
    {{2, 2, 2, 5, 7, 4, 3}, false, Mask::none, {}, "plain"},
    {{1, 2, 2, 9, 9, 4, 4}, true, Mask::none, {}, "causal"},
    {{1, 1, 1, 20, 20, 3, 3}, true, Mask::none, {}, "causal, 2 blocks"},
    {{1, 2, 1, 6, 37, 5, 2}, false, Mask::none, {}, "gqa 2:1, 3 key blocks"},
    {{1, 4, 2, 7, 9, 4, 3}, false, Mask::none, {}, "gqa 4:2"},
    {{1, 4, 2, 8, 8, 3, 3}, true, Mask::none, {}, "gqa 4:2 causal"},
    {{2, 2, 2, 5, 7, 4, 3}, false, Mask::boolean, {2, 2, 5, 7}, "i1 mask"},
    {{2, 2, 2, 5, 7, 4, 3},
     false,
     Mask::boolean,
     {2, 1, 1, 7},
     "i1 key padding"},
    {{1, 4, 2, 6, 6, 3, 3}, true, Mask::boolean, {6, 6}, "gqa causal i1"},
    {{2, 2, 2, 5, 7, 4, 3},
     false,
     Mask::additive,
     {1, 2, 1, 7},
     "float mask per head"},
    {{1, 4, 2, 5, 18, 4, 3},
     false,
     Mask::additive,
     {1, 4, 5, 18},
     "gqa float mask"},
};

struct Inputs {
  Buffer q, k, v;
  std::optional<Buffer> mask;
};

Inputs makeInputs(const GradCase &c, DType dtype, Rng &rng) {
  const AttentionCase &a = c.dims;
  Inputs in{randomBuffer(dtype, {a.b, a.h, a.s, a.d}, rng, -1.5, 1.5),
            randomBuffer(dtype, {a.b, a.hkv, a.t, a.d}, rng, -1.5, 1.5),
            randomBuffer(dtype, {a.b, a.hkv, a.t, a.dv}, rng), std::nullopt};
  if (c.mask == Mask::boolean) {
    in.mask = randomBuffer(DType::i1, c.maskShape, rng);
    // The first row of the mask drops every key: a fully masked row.
    int64_t keys = c.maskShape.back();
    if (c.maskShape.size() < 2 || c.maskShape[c.maskShape.size() - 2] > 1)
      for (int64_t j = 0; j < keys; ++j)
        in.mask->set(j, 0);
    in.mask->set(in.mask->size() - 1, 1);
  } else if (c.mask == Mask::additive) {
    in.mask = randomBuffer(dtype, c.maskShape, rng, -2, 1);
    for (int64_t i = 0; i < in.mask->size(); i += 5)
      in.mask->set(i, -INFINITY);
  }
  return in;
}

std::optional<TensorRef> maskRef(const Inputs &in) {
  if (!in.mask)
    return std::nullopt;
  return in.mask->ref();
}

double defaultScale(const GradCase &c) {
  return 1.0 / std::sqrt(static_cast<double>(c.dims.d));
}

struct Grads {
  Buffer dq, dk, dv;
};

Grads runGrad(ThreadPool &pool, const GradCase &c, const Inputs &in,
              const Buffer &dy) {
  DType dtype = in.q.dtype;
  Grads g{Buffer(dtype, in.q.shape), Buffer(dtype, in.k.shape),
          Buffer(dtype, in.v.shape)};
  Status s = attentionGrad(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                           maskRef(in), c.causal, defaultScale(c), dy.ref(),
                           g.dq.ref(), g.dk.ref(), g.dv.ref());
  EXPECT_TRUE(s.isOk()) << s.toString();
  return g;
}

TEST(HostGradientsAttentionTest, MatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(400);
  for (const GradCase &c : kGradCases) {
    const AttentionCase &a = c.dims;
    Inputs in = makeInputs(c, DType::f64, rng);
    Buffer dy = randomBuffer(DType::f64, {a.b, a.h, a.s, a.dv}, rng);
    Buffer out(DType::f64, dy.shape);
    auto loss = [&]() {
      EXPECT_TRUE(attention(pool, in.q.ref(), in.k.ref(), in.v.ref(),
                            maskRef(in), c.causal, defaultScale(c), out.ref())
                      .isOk());
      return dotValues(out, dy);
    };
    Grads g = runGrad(pool, c, in, dy);
    EXPECT_GRAD_CLOSE(g.dq, numericGradient(in.q, loss), kF64GradTolerance)
        << " dq, " << c.name;
    EXPECT_GRAD_CLOSE(g.dk, numericGradient(in.k, loss), kF64GradTolerance)
        << " dk, " << c.name;
    EXPECT_GRAD_CLOSE(g.dv, numericGradient(in.v, loss), kF64GradTolerance)
        << " dv, " << c.name;
  }
}

TEST(HostGradientsAttentionTest, LowPrecisionMatchesF64) {
  ThreadPool pool(2);
  Rng rng(401);
  for (const GradCase &c : kGradCases) {
    const AttentionCase &a = c.dims;
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      Inputs in = makeInputs(c, dtype, rng);
      Buffer dy = randomBuffer(dtype, {a.b, a.h, a.s, a.dv}, rng);
      Inputs in64{convert(in.q, DType::f64), convert(in.k, DType::f64),
                  convert(in.v, DType::f64), std::nullopt};
      if (in.mask)
        in64.mask = convert(*in.mask, in.mask->dtype == DType::i1 ? DType::i1
                                                                  : DType::f64);
      Grads g = runGrad(pool, c, in, dy);
      Grads ref = runGrad(pool, c, in64, convert(dy, DType::f64));
      EXPECT_GRAD_CLOSE(g.dq, ref.dq.values(), gradTolerance(dtype))
          << " dq, " << c.name;
      EXPECT_GRAD_CLOSE(g.dk, ref.dk.values(), gradTolerance(dtype))
          << " dk, " << c.name;
      EXPECT_GRAD_CLOSE(g.dv, ref.dv.values(), gradTolerance(dtype))
          << " dv, " << c.name;
    }
  }
}

TEST(HostGradientsAttentionTest, FullyMaskedRowGivesNoGradient) {
  ThreadPool pool(1);
  Rng rng(402);
  GradCase c{{1, 1, 1, 2, 3, 4, 4}, false, Mask::boolean, {2, 3}, "masked"};
  for (DType dtype : kFloatTypes) {
    Inputs in = makeInputs(c, dtype, rng);
    // Row 0 keeps nothing, row 1 keeps key 2 only.
    in.mask = fromValues(DType::i1, {2, 3}, {0, 0, 0, 0, 0, 1});
    Buffer dy = randomBuffer(dtype, {1, 1, 2, 4}, rng);
    Grads g = runGrad(pool, c, in, dy);
    // Row 1's output is v[2] whatever q and k are: dq = 0, dk = 0, and dv
    // gets dy of row 1 at key 2 only.
    EXPECT_EQ(g.dq.values(), std::vector<double>(8, 0.0));
    EXPECT_EQ(g.dk.values(), std::vector<double>(12, 0.0));
    std::vector<double> dv(12, 0.0);
    for (int64_t e = 0; e < 4; ++e)
      dv[8 + e] = dy.get(4 + e);
    EXPECT_EQ(g.dv.values(), dv);
  }
}

TEST(HostGradientsAttentionTest, NoQueryRowsGiveZeroKeyGradients) {
  ThreadPool pool(2);
  Rng rng(404);
  Buffer q(DType::f32, {1, 2, 0, 4}), dy(DType::f32, {1, 2, 0, 3}),
      dq(DType::f32, {1, 2, 0, 4});
  Buffer k = randomBuffer(DType::f32, {1, 1, 5, 4}, rng);
  Buffer v = randomBuffer(DType::f32, {1, 1, 5, 3}, rng);
  Buffer dk = randomBuffer(DType::f32, k.shape, rng);
  Buffer dv = randomBuffer(DType::f32, v.shape, rng);
  ASSERT_TRUE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), std::nullopt,
                            false, 0.5, dy.ref(), dq.ref(), dk.ref(), dv.ref())
                  .isOk());
  EXPECT_EQ(dk.values(), std::vector<double>(20, 0.0));
  EXPECT_EQ(dv.values(), std::vector<double>(15, 0.0));
}

TEST(HostGradientsAttentionTest, ShapeErrors) {
  ThreadPool pool(1);
  Buffer q(DType::f32, {1, 4, 5, 8}), k(DType::f32, {1, 2, 5, 8}),
      v(DType::f32, {1, 2, 5, 6}), dy(DType::f32, {1, 4, 5, 6});
  Buffer dq(DType::f32, q.shape), dk(DType::f32, k.shape),
      dv(DType::f32, v.shape);
  EXPECT_TRUE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), std::nullopt, true,
                            0.5, dy.ref(), dq.ref(), dk.ref(), dv.ref())
                  .isOk());
  Buffer dyWrong(DType::f32, {1, 4, 5, 8});
  EXPECT_FALSE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), std::nullopt,
                             false, 0.5, dyWrong.ref(), dq.ref(), dk.ref(),
                             dv.ref())
                   .isOk());
  // dk must have k's shape, not q's.
  Buffer dkWrong(DType::f32, {1, 4, 5, 8});
  EXPECT_FALSE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), std::nullopt,
                             false, 0.5, dy.ref(), dq.ref(), dkWrong.ref(),
                             dv.ref())
                   .isOk());
  Buffer dvHalf(DType::f16, v.shape);
  EXPECT_FALSE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), std::nullopt,
                             false, 0.5, dy.ref(), dq.ref(), dk.ref(),
                             dvHalf.ref())
                   .isOk());
  Buffer badMask(DType::i1, {3, 5});
  EXPECT_FALSE(attentionGrad(pool, q.ref(), k.ref(), v.ref(), badMask.ref(),
                             false, 0.5, dy.ref(), dq.ref(), dk.ref(), dv.ref())
                   .isOk());
  Buffer k4(DType::f32, {1, 2, 4, 8}), v4(DType::f32, {1, 2, 4, 6}),
      dk4(DType::f32, k4.shape), dv4(DType::f32, v4.shape);
  EXPECT_FALSE(attentionGrad(pool, q.ref(), k4.ref(), v4.ref(), std::nullopt,
                             true, 0.5, dy.ref(), dq.ref(), dk4.ref(),
                             dv4.ref())
                   .isOk()); // Causal needs S <= T.
}

TEST(HostGradientsAttentionTest, SameBitsForAnyThreadCount) {
  Rng rng(403);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    for (bool causal : {false, true}) {
      GradCase c{{2, 4, 2, 50, 50, 16, 16},
                 causal,
                 causal ? Mask::none : Mask::boolean,
                 {2, 1, 1, 50},
                 "determinism"};
      Inputs in = makeInputs(c, dtype, rng);
      Buffer dy = randomBuffer(dtype, {2, 4, 50, 16}, rng);
      expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
        Grads g = runGrad(pool, c, in, dy);
        std::vector<Buffer> outs;
        outs.push_back(std::move(g.dq));
        outs.push_back(std::move(g.dk));
        outs.push_back(std::move(g.dv));
        return outs;
      });
    }
  }
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The GPU's pass 1 (attentionGradQueryRowStreaming) recomputes what the
// host's keeps in two arrays; it must give the very same bits, masked and
// fully masked keys included.
TEST(HostGradientsAttentionTest, StreamingQueryRowMatchesTheStoredOne) {
  const int64_t t = 37, d = 5, dv = 3;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> q(d), k(t * d), v(t * dv), dout(dv);
  for (auto *vec : {&q, &k, &v, &dout})
    for (float &x : *vec)
      x = dist(rng);
  for (int maskEvery : {0, 3, 1}) {
    SCOPED_TRACE("mask every " + std::to_string(maskEvery));
    auto mask = [&](int64_t j) {
      return maskEvery && j % maskEvery == 0 ? -INFINITY : 0.0f;
    };
    std::vector<float> p(t), dp(t), acc(d), dq1(d), dq2(d);
    auto a = kernels::attentionGradQueryRow<float>(
        q.data(), k.data(), v.data(), dout.data(), dq1.data(), t, d, dv, 0.4f,
        mask, p.data(), dp.data(), acc.data());
    auto b = kernels::attentionGradQueryRowStreaming<float>(
        q.data(), k.data(), v.data(), dout.data(), dq2.data(), t, d, dv, 0.4f,
        mask, acc.data());
    // Bitwise, member by member.
    EXPECT_EQ(bitsOf(a.max), bitsOf(b.max));
    EXPECT_EQ(bitsOf(a.sum), bitsOf(b.sum));
    EXPECT_EQ(bitsOf(a.delta), bitsOf(b.delta));
    EXPECT_EQ(dq1, dq2);
  }
}

} // namespace
