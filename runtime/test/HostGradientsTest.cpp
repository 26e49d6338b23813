//===- HostGradientsTest.cpp - elementwise and movement backward tests ----===//
//
// unaryGrad against central differences of the unary forward in f64 (and
// the other dtypes against the f64 kernel), maxMinGrad's tie and NaN
// rules, sumToShape over broadcast patterns, reduceExtremumGrad's
// first-position rule, gatherGrad with repeated and negative indices (f32
// bitwise equal to a sequential scatter-add in index order), sliceGrad,
// and bitwise identical results for any thread count.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include "rp/runtime/kernels/Indexing.h"

#include <algorithm>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

struct UnaryCase {
  UnaryKind kind;
  const char *name;
  double lo, hi;
};

const UnaryCase kUnaryCases[] = {
    {UnaryKind::neg, "neg", -3, 3},
    {UnaryKind::exp, "exp", -3, 3},
    {UnaryKind::log, "log", 0.3, 3},
    {UnaryKind::sqrt, "sqrt", 0.3, 3},
    {UnaryKind::rsqrt, "rsqrt", 0.3, 3},
    {UnaryKind::tanh, "tanh", -3, 3},
    {UnaryKind::erf, "erf", -3, 3},
    {UnaryKind::sigmoid, "sigmoid", -6, 6},
    {UnaryKind::silu, "silu", -6, 6},
    {UnaryKind::relu, "relu", -3, 3},
    {UnaryKind::gelu, "gelu", -4, 4},
    {UnaryKind::geluTanh, "gelu_tanh", -4, 4},
};

/// Applies the f64 unary forward to x + shift elementwise.
Buffer unaryShifted(ThreadPool &pool, UnaryKind kind, const Buffer &x,
                    double shift) {
  Buffer shifted(DType::f64, x.shape), out(DType::f64, x.shape);
  for (int64_t i = 0; i < x.size(); ++i)
    shifted.set(i, x.get(i) + shift);
  EXPECT_TRUE(unary(pool, kind, shifted.ref(), out.ref()).isOk());
  return out;
}

TEST(HostGradientsTest, UnaryGradMatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(100);
  const double h = 1e-5;
  for (const UnaryCase &c : kUnaryCases) {
    Buffer x = randomBuffer(DType::f64, {7, 37}, rng, c.lo, c.hi);
    // Keep relu away from its kink, where differences are meaningless.
    for (int64_t i = 0; i < x.size(); ++i)
      if (std::fabs(x.get(i)) < 1e-3)
        x.set(i, 0.5);
    Buffer dy = randomBuffer(DType::f64, x.shape, rng);
    Buffer plus = unaryShifted(pool, c.kind, x, h),
           minus = unaryShifted(pool, c.kind, x, -h);
    std::vector<double> ref(x.size());
    for (int64_t i = 0; i < x.size(); ++i)
      ref[i] = dy.get(i) * (plus.get(i) - minus.get(i)) / (2 * h);
    Buffer dx(DType::f64, x.shape);
    ASSERT_TRUE(unaryGrad(pool, c.kind, x.ref(), dy.ref(), dx.ref()).isOk());
    EXPECT_GRAD_CLOSE(dx, ref, kF64GradTolerance) << " " << c.name;
  }
}

TEST(HostGradientsTest, UnaryGradLowPrecisionMatchesF64) {
  ThreadPool pool(2);
  Rng rng(101);
  for (const UnaryCase &c : kUnaryCases) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      Buffer x = randomBuffer(dtype, {5, 41}, rng, c.lo, c.hi);
      Buffer dy = randomBuffer(dtype, x.shape, rng);
      Buffer x64 = convert(x, DType::f64), dy64 = convert(dy, DType::f64);
      Buffer dx(dtype, x.shape), dx64(DType::f64, x.shape);
      ASSERT_TRUE(unaryGrad(pool, c.kind, x.ref(), dy.ref(), dx.ref()).isOk());
      ASSERT_TRUE(
          unaryGrad(pool, c.kind, x64.ref(), dy64.ref(), dx64.ref()).isOk());
      EXPECT_GRAD_CLOSE(dx, dx64.values(), gradTolerance(dtype))
          << " " << c.name;
    }
  }
}

TEST(HostGradientsTest, UnaryGradSpecialValues) {
  ThreadPool pool(1);
  Buffer x = fromValues(DType::f32, {3}, {0.0, NAN, -0.0});
  Buffer dy = fromValues(DType::f32, {3}, {2.0, 3.0, 4.0});
  Buffer dx(DType::f32, {3});
  ASSERT_TRUE(
      unaryGrad(pool, UnaryKind::relu, x.ref(), dy.ref(), dx.ref()).isOk());
  EXPECT_EQ(dx.values(), (std::vector<double>{0, 0, 0}));
  // gelu'(0) = 1/2 for both forms; silu'(0) = 1/2.
  for (UnaryKind kind :
       {UnaryKind::gelu, UnaryKind::geluTanh, UnaryKind::silu}) {
    Buffer zero = fromValues(DType::f64, {1}, {0.0});
    Buffer one = fromValues(DType::f64, {1}, {1.0});
    Buffer g(DType::f64, {1});
    ASSERT_TRUE(unaryGrad(pool, kind, zero.ref(), one.ref(), g.ref()).isOk());
    EXPECT_EQ(g.get(0), 0.5);
  }
}

TEST(HostGradientsTest, UnaryGradErrors) {
  ThreadPool pool(1);
  Buffer x(DType::f32, {4}), dy(DType::f32, {4}), dx(DType::f32, {5});
  EXPECT_FALSE(
      unaryGrad(pool, UnaryKind::exp, x.ref(), dy.ref(), dx.ref()).isOk());
  Buffer dyHalf(DType::f16, {4}), dx4(DType::f32, {4});
  EXPECT_FALSE(
      unaryGrad(pool, UnaryKind::exp, x.ref(), dyHalf.ref(), dx4.ref()).isOk());
  Buffer xi(DType::i32, {4}), dyi(DType::i32, {4}), dxi(DType::i32, {4});
  EXPECT_FALSE(
      unaryGrad(pool, UnaryKind::neg, xi.ref(), dyi.ref(), dxi.ref()).isOk());
}

//===----------------------------------------------------------------------===//
// maxMinGrad
//===----------------------------------------------------------------------===//

TEST(HostGradientsTest, MaxMinGradTiesAndNaN) {
  ThreadPool pool(3);
  Rng rng(102);
  const Shape out = {3, 5, 4}, lhsShape = {3, 1, 4}, rhsShape = {5, 1};
  for (DType dtype : kFloatTypes) {
    for (bool isMax : {true, false}) {
      // Small integers: many ties.
      Buffer lhs = randomBuffer(dtype, lhsShape, rng, -2, 2);
      Buffer rhs = randomBuffer(dtype, rhsShape, rng, -2, 2);
      for (int64_t i = 0; i < lhs.size(); ++i)
        lhs.set(i, std::round(lhs.get(i)));
      for (int64_t i = 0; i < rhs.size(); ++i)
        rhs.set(i, std::round(rhs.get(i)));
      lhs.set(1, NAN);
      rhs.set(2, NAN);
      Buffer dy = randomBuffer(dtype, out, rng);
      Buffer dl(dtype, out), dr(dtype, out);
      ASSERT_TRUE(maxMinGrad(pool, isMax, lhs.ref(), rhs.ref(), dy.ref(),
                             dl.ref(), dr.ref())
                      .isOk());
      int ties = 0;
      for (int64_t i = 0; i < dy.size(); ++i) {
        double a = lhs.get(broadcastIndex(out, lhsShape, i));
        double b = rhs.get(broadcastIndex(out, rhsShape, i));
        ties += a == b;
        // torch.maximum / minimum: NaN wins, ties go to lhs.
        bool left =
            std::isnan(a) || (!std::isnan(b) && (isMax ? a >= b : a <= b));
        EXPECT_EQ(dl.get(i), left ? dy.get(i) : 0.0) << i;
        EXPECT_EQ(dr.get(i), left ? 0.0 : dy.get(i)) << i;
      }
      EXPECT_GT(ties, 0);
    }
  }
}

TEST(HostGradientsTest, MaxMinGradErrors) {
  ThreadPool pool(1);
  Buffer a(DType::f32, {3}), b(DType::f32, {4}), dy(DType::f32, {3}),
      dl(DType::f32, {3}), dr(DType::f32, {3});
  EXPECT_FALSE(
      maxMinGrad(pool, true, a.ref(), b.ref(), dy.ref(), dl.ref(), dr.ref())
          .isOk());
  Buffer b1(DType::f32, {1}), dlSmall(DType::f32, {1});
  EXPECT_FALSE(maxMinGrad(pool, true, a.ref(), b1.ref(), dy.ref(), dl.ref(),
                          dlSmall.ref())
                   .isOk()); // Gradients have the broadcast shape.
  EXPECT_TRUE(
      maxMinGrad(pool, true, a.ref(), b1.ref(), dy.ref(), dl.ref(), dr.ref())
          .isOk());
}

//===----------------------------------------------------------------------===//
// sumToShape
//===----------------------------------------------------------------------===//

struct SumCase {
  Shape in, out;
};

const SumCase kSumCases[] = {
    {{2, 3, 4}, {4}},          {{2, 3, 4}, {3, 1}},
    {{2, 3, 4}, {1, 3, 1}},    {{2, 3, 4}, {2, 1, 4}},
    {{2, 3, 4}, {}},           {{2, 3, 4}, {2, 3, 4}},
    {{2, 3, 4}, {1, 1, 1}},    {{5, 1, 3}, {1, 1, 3}},
    {{5, 1, 3}, {1, 3}},       {{1, 6}, {6}},
    {{3, 600, 7}, {600, 1}},   {{4096, 16}, {16}},
    {{7, 1, 9, 2}, {1, 1, 2}},
};

std::vector<double> referenceSumToShape(const Buffer &x, const Shape &out) {
  std::vector<double> ref(numElements(out), 0.0);
  for (int64_t i = 0; i < x.size(); ++i)
    ref[broadcastIndex(x.shape, out, i)] += x.get(i);
  return ref;
}

TEST(HostGradientsTest, SumToShapeMatchesReference) {
  ThreadPool pool(3);
  Rng rng(103);
  for (DType dtype : kFloatTypes) {
    for (const SumCase &c : kSumCases) {
      Buffer x = randomBuffer(dtype, c.in, rng);
      Buffer out(dtype, c.out);
      ASSERT_TRUE(sumToShape(pool, x.ref(), out.ref()).isOk())
          << describeShape(c.in) << " -> " << describeShape(c.out);
      EXPECT_GRAD_CLOSE(out, referenceSumToShape(x, c.out),
                        dtype == DType::f64 ? 1e-12 : gradTolerance(dtype))
          << " " << describeShape(c.in) << " -> " << describeShape(c.out);
    }
  }
  // Integers are exact.
  Buffer xi = randomBuffer(DType::i64, {4, 3, 5}, rng, -100, 100);
  Buffer oi(DType::i64, {3, 1});
  ASSERT_TRUE(sumToShape(pool, xi.ref(), oi.ref()).isOk());
  EXPECT_EQ(oi.values(), referenceSumToShape(xi, {3, 1}));
}

TEST(HostGradientsTest, SumToShapeErrors) {
  ThreadPool pool(1);
  Buffer x(DType::f32, {2, 3}), wrong(DType::f32, {2}),
      bigger(DType::f32, {1, 2, 3});
  EXPECT_FALSE(sumToShape(pool, x.ref(), wrong.ref()).isOk());
  EXPECT_FALSE(sumToShape(pool, x.ref(), bigger.ref()).isOk());
  Buffer otherType(DType::f64, {3});
  EXPECT_FALSE(sumToShape(pool, x.ref(), otherType.ref()).isOk());
}

//===----------------------------------------------------------------------===//
// reduceExtremumGrad
//===----------------------------------------------------------------------===//

/// dx of reduce max/min, written independently of the kernel: walk x in
/// row-major order (which visits each output's reduced indices in their
/// row-major order) and keep the first NaN, else the first extremum.
std::vector<double> referenceExtremumGrad(const Buffer &x, bool isMax,
                                          const std::vector<int64_t> &dims,
                                          const Buffer &dy) {
  const Shape &shape = x.shape;
  std::vector<int64_t> best(dy.size(), -1);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t linear = i, o = 0, stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      int64_t coord = linear % shape[d];
      linear /= shape[d];
      if (std::count(dims.begin(), dims.end(), int64_t(d)))
        continue;
      o += coord * stride;
      stride *= shape[d];
    }
    double v = x.get(i);
    if (best[o] < 0) {
      best[o] = i;
      continue;
    }
    double b = x.get(best[o]);
    if (std::isnan(b))
      continue;
    if (std::isnan(v) || (isMax ? v > b : v < b))
      best[o] = i;
  }
  std::vector<double> ref(x.size(), 0.0);
  for (int64_t o = 0; o < dy.size(); ++o)
    ref[best[o]] = dy.get(o);
  return ref;
}

Shape reducedShape(const Shape &shape, const std::vector<int64_t> &dims,
                   bool keepDims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool reduced = std::count(dims.begin(), dims.end(), int64_t(d)) > 0;
    if (!reduced)
      out.push_back(shape[d]);
    else if (keepDims)
      out.push_back(1);
  }
  return out;
}

TEST(HostGradientsTest, ReduceExtremumGradFirstPosition) {
  ThreadPool pool(3);
  Rng rng(104);
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const Case cases[] = {{{7, 9}, {1}},    {{7, 9}, {0}},    {{3, 4, 5}, {0, 2}},
                        {{3, 4, 5}, {1}}, {{2, 1, 6}, {1}}, {{4, 5}, {0, 1}},
                        {{300, 70}, {0}}};
  for (DType dtype : kFloatTypes) {
    for (bool isMax : {true, false}) {
      for (const Case &c : cases) {
        for (bool keepDims : {false, true}) {
          // Few distinct values: ties everywhere.
          Buffer x = randomBuffer(dtype, c.shape, rng, -3, 3);
          for (int64_t i = 0; i < x.size(); ++i)
            x.set(i, std::round(x.get(i)));
          if (x.size() > 20) {
            x.set(11, NAN);
            x.set(17, NAN);
          }
          Buffer dy =
              randomBuffer(dtype, reducedShape(c.shape, c.dims, keepDims), rng);
          Buffer dx(dtype, c.shape);
          ASSERT_TRUE(reduceExtremumGrad(pool, isMax, x.ref(), c.dims, keepDims,
                                         dy.ref(), dx.ref())
                          .isOk());
          EXPECT_EQ(dx.values(), referenceExtremumGrad(x, isMax, c.dims, dy))
              << describe(x.ref()) << " max " << isMax;
        }
      }
    }
  }
}

TEST(HostGradientsTest, ReduceExtremumGradExplicitTie) {
  ThreadPool pool(1);
  // Row 0: max 3 at positions 1 and 3 -> position 1. Row 1: min -1 at 0, 2.
  Buffer x = fromValues(DType::f32, {2, 4}, {1, 3, 2, 3, -1, 0, -1, 5});
  Buffer dy = fromValues(DType::f32, {2}, {10, 20});
  Buffer dx(DType::f32, {2, 4});
  ASSERT_TRUE(
      reduceExtremumGrad(pool, true, x.ref(), {1}, false, dy.ref(), dx.ref())
          .isOk());
  EXPECT_EQ(dx.values(), (std::vector<double>{0, 10, 0, 0, 0, 0, 0, 20}));
  ASSERT_TRUE(
      reduceExtremumGrad(pool, false, x.ref(), {1}, false, dy.ref(), dx.ref())
          .isOk());
  EXPECT_EQ(dx.values(), (std::vector<double>{10, 0, 0, 0, 20, 0, 0, 0}));
  Buffer badDy(DType::f32, {2, 1});
  EXPECT_FALSE(
      reduceExtremumGrad(pool, true, x.ref(), {1}, false, badDy.ref(), dx.ref())
          .isOk()); // keepDims = false wants [2].
  EXPECT_FALSE(
      reduceExtremumGrad(pool, true, x.ref(), {1, 1}, false, dy.ref(), dx.ref())
          .isOk());
}

//===----------------------------------------------------------------------===//
// gatherGrad, sliceGrad
//===----------------------------------------------------------------------===//

TEST(HostGradientsTest, GatherGradRepeatedIndices) {
  ThreadPool pool(3);
  Rng rng(105);
  struct Case {
    Shape x;
    Shape indices;
    int64_t axis;
  };
  const Case cases[] = {{{10, 6}, {3, 8}, 0},
                        {{4, 7, 3}, {12}, 1},
                        {{5, 4}, {}, 1},
                        {{3, 5}, {2, 2}, 1},
                        {{50, 130}, {40, 30}, 0}};
  for (DType dtype : kFloatTypes) {
    for (DType indexType : {DType::i64, DType::i32}) {
      for (const Case &c : cases) {
        int64_t axisSize = c.x[c.axis];
        // Few distinct indices, some negative: repeats everywhere.
        Buffer indices = randomBuffer(indexType, c.indices, rng, -axisSize,
                                      std::min<int64_t>(axisSize - 1, 3));
        Shape dyShape(c.x.begin(), c.x.begin() + c.axis);
        dyShape.insert(dyShape.end(), c.indices.begin(), c.indices.end());
        dyShape.insert(dyShape.end(), c.x.begin() + c.axis + 1, c.x.end());
        Buffer dy = randomBuffer(dtype, dyShape, rng);
        Buffer dx(dtype, c.x);
        ASSERT_TRUE(
            gatherGrad(pool, indices.ref(), c.axis, dy.ref(), dx.ref()).isOk());
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < c.axis; ++d)
          outer *= c.x[d];
        for (size_t d = c.axis + 1; d < c.x.size(); ++d)
          inner *= c.x[d];
        std::vector<double> ref(dx.size(), 0.0);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < indices.size(); ++i) {
            int64_t a = static_cast<int64_t>(indices.get(i));
            if (a < 0)
              a += axisSize;
            for (int64_t e = 0; e < inner; ++e)
              ref[(o * axisSize + a) * inner + e] +=
                  dy.get((o * indices.size() + i) * inner + e);
          }
        EXPECT_GRAD_CLOSE(dx, ref,
                          dtype == DType::f64 ? 1e-14 : gradTolerance(dtype))
            << " " << describe(dx.ref());
        if (dtype == DType::f32) {
          // Accumulation in index order: exactly a sequential float loop.
          std::vector<float> seq(dx.size(), 0.0f);
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < indices.size(); ++i) {
              int64_t a = static_cast<int64_t>(indices.get(i));
              if (a < 0)
                a += axisSize;
              for (int64_t e = 0; e < inner; ++e)
                seq[(o * axisSize + a) * inner + e] += static_cast<float>(
                    dy.get((o * indices.size() + i) * inner + e));
            }
          EXPECT_EQ(std::memcmp(seq.data(), dx.data(), dx.bytes()), 0)
              << describe(dx.ref());
        }
      }
    }
  }
}

TEST(HostGradientsTest, GatherGradErrors) {
  ThreadPool pool(1);
  Buffer indices = fromValues(DType::i64, {3}, {0, 4, 1});
  Buffer dy(DType::f32, {3, 2}), dx(DType::f32, {4, 2});
  Status s = gatherGrad(pool, indices.ref(), 0, dy.ref(), dx.ref());
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.getMessage().find("index 4 at position 1"), std::string::npos)
      << s.getMessage();
  Buffer good = fromValues(DType::i64, {3}, {0, -4, 1});
  Buffer badDy(DType::f32, {3, 3});
  EXPECT_FALSE(gatherGrad(pool, good.ref(), 0, badDy.ref(), dx.ref()).isOk());
  EXPECT_TRUE(gatherGrad(pool, good.ref(), 0, dy.ref(), dx.ref()).isOk());
  Buffer floatIndices(DType::f32, {3});
  EXPECT_FALSE(
      gatherGrad(pool, floatIndices.ref(), 0, dy.ref(), dx.ref()).isOk());
}

TEST(HostGradientsTest, SliceGradScattersIntoZeros) {
  ThreadPool pool(2);
  Rng rng(106);
  struct Case {
    Shape x, out;
    std::vector<int64_t> offsets, strides;
  };
  const Case cases[] = {{{6, 8}, {2, 3}, {1, 2}, {2, 2}},
                        {{4, 5, 6}, {4, 2, 6}, {0, 3, 0}, {1, 1, 1}},
                        {{9}, {3}, {2}, {3}},
                        {{3, 4}, {0, 4}, {0, 0}, {1, 1}},
                        {{200, 300}, {100, 150}, {1, 0}, {2, 2}}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
    for (const Case &c : cases) {
      Buffer dy = randomBuffer(dtype, c.out, rng, -50, 50);
      Buffer dx = randomBuffer(dtype, c.x, rng, -50, 50); // Overwritten.
      ASSERT_TRUE(
          sliceGrad(pool, dy.ref(), c.offsets, c.strides, dx.ref()).isOk());
      std::vector<double> ref(dx.size(), 0.0);
      std::vector<int64_t> xStrides(c.x.size());
      kernels::contiguousStrides(c.x.data(), static_cast<int>(c.x.size()),
                                 xStrides.data());
      for (int64_t i = 0; i < dy.size(); ++i) {
        int64_t linear = i, at = 0;
        for (size_t d = c.out.size(); d-- > 0;) {
          at +=
              (c.offsets[d] + (linear % c.out[d]) * c.strides[d]) * xStrides[d];
          linear /= c.out[d];
        }
        ref[at] = dy.get(i);
      }
      EXPECT_EQ(dx.values(), ref) << describe(dx.ref());
      // The forward slice of dx gives dy back.
      Buffer back(dtype, c.out);
      ASSERT_TRUE(
          slice(pool, dx.ref(), c.offsets, c.strides, back.ref()).isOk());
      EXPECT_TRUE(back.sameBits(dy));
    }
  }
  Buffer dy(DType::f32, {3}), dx(DType::f32, {5});
  EXPECT_FALSE(sliceGrad(pool, dy.ref(), {1}, {2}, dx.ref()).isOk());
  EXPECT_TRUE(sliceGrad(pool, dy.ref(), {0}, {2}, dx.ref()).isOk());
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

TEST(HostGradientsTest, SameBitsForAnyThreadCount) {
  Rng rng(107);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    Buffer x = randomBuffer(dtype, {300, 400}, rng, -3, 3);
    Buffer dy = randomBuffer(dtype, x.shape, rng);
    Buffer rhs = randomBuffer(dtype, {400}, rng, -3, 3);
    Buffer indices = randomBuffer(DType::i64, {4000}, rng, -50, 49);
    Buffer gdy = randomBuffer(dtype, {4000, 40}, rng);
    expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
      std::vector<Buffer> outs;
      Buffer dx(dtype, x.shape);
      EXPECT_TRUE(
          unaryGrad(pool, UnaryKind::gelu, x.ref(), dy.ref(), dx.ref()).isOk());
      outs.push_back(std::move(dx));
      Buffer dl(dtype, x.shape), dr(dtype, x.shape);
      EXPECT_TRUE(maxMinGrad(pool, true, x.ref(), rhs.ref(), dy.ref(), dl.ref(),
                             dr.ref())
                      .isOk());
      outs.push_back(std::move(dl));
      outs.push_back(std::move(dr));
      Buffer summed(dtype, {400}), summedCol(dtype, {300, 1});
      EXPECT_TRUE(sumToShape(pool, dy.ref(), summed.ref()).isOk());
      EXPECT_TRUE(sumToShape(pool, dy.ref(), summedCol.ref()).isOk());
      outs.push_back(std::move(summed));
      outs.push_back(std::move(summedCol));
      Buffer dxr(dtype, x.shape);
      Buffer dyr = convert(outs[3], dtype); // [400]
      EXPECT_TRUE(reduceExtremumGrad(pool, true, x.ref(), {0}, false, dyr.ref(),
                                     dxr.ref())
                      .isOk());
      outs.push_back(std::move(dxr));
      Buffer embedding(dtype, {100, 40});
      EXPECT_TRUE(gatherGrad(pool, indices.ref(), 0, gdy.ref(), embedding.ref())
                      .isOk());
      outs.push_back(std::move(embedding));
      return outs;
    });
  }
}

} // namespace
