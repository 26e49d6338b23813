//===- HostElementwiseTest.cpp - elementwise host kernel tests ------------===//
//
// binary, compare, where, unary and cast against double references, on odd
// sizes and broadcasting shapes, for every dtype each op allows.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"

#include <climits>
#include <functional>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

/// Operand shape pairs and the broadcast shape they give.
struct BroadcastCase {
  Shape a, b, out;
};

const BroadcastCase kBroadcastCases[] = {
    {{33}, {33}, {33}},
    {{1}, {17}, {17}},
    {{}, {3, 7}, {3, 7}},
    {{3, 1, 7}, {17, 7}, {3, 17, 7}},
    {{2, 3, 1, 5}, {3, 4, 1}, {2, 3, 4, 5}},
    {{7, 1}, {1, 33}, {7, 33}},
    {{1, 1, 1}, {3, 1, 7}, {3, 1, 7}},
    {{40, 33, 17}, {40, 1, 17}, {40, 33, 17}}, // Several chunks.
};

double referenceBinary(BinaryKind kind, double a, double b, bool integer) {
  switch (kind) {
  case BinaryKind::add:
    return a + b;
  case BinaryKind::sub:
    return a - b;
  case BinaryKind::mul:
    return a * b;
  case BinaryKind::div:
    return integer ? std::trunc(a / b) : a / b;
  case BinaryKind::pow:
    return std::pow(a, b);
  case BinaryKind::max:
    return std::max(a, b);
  case BinaryKind::min:
    return std::min(a, b);
  }
  return 0;
}

/// Expected output of a broadcasting op with two operands.
std::vector<double>
referenceBroadcast2(const Buffer &a, const Buffer &b, const Shape &out,
                    const std::function<double(double, double)> &fn) {
  std::vector<double> ref(numElements(out));
  for (int64_t i = 0; i < numElements(out); ++i)
    ref[i] = fn(a.get(broadcastIndex(out, a.shape, i)),
                b.get(broadcastIndex(out, b.shape, i)));
  return ref;
}

TEST(HostElementwiseTest, BinaryFloatsMatchReference) {
  ThreadPool pool(3);
  Rng rng(1);
  const BinaryKind kinds[] = {BinaryKind::add, BinaryKind::sub, BinaryKind::mul,
                              BinaryKind::div, BinaryKind::pow, BinaryKind::max,
                              BinaryKind::min};
  for (DType dtype : kFloatTypes) {
    for (BinaryKind kind : kinds) {
      for (const BroadcastCase &c : kBroadcastCases) {
        bool positive = kind == BinaryKind::pow || kind == BinaryKind::div;
        Buffer a = randomBuffer(dtype, c.a, rng, positive ? 0.1 : -2, 2);
        Buffer b = randomBuffer(dtype, c.b, rng, positive ? 0.5 : -2, 2);
        Buffer out(dtype, c.out);
        ASSERT_TRUE(binary(pool, kind, a.ref(), b.ref(), out.ref()).isOk());
        auto ref = referenceBroadcast2(a, b, c.out, [&](double x, double y) {
          return referenceBinary(kind, x, y, false);
        });
        EXPECT_CLOSE(out, ref) << " kind " << int(kind);
      }
    }
  }
}

TEST(HostElementwiseTest, BinaryIntegersAreExact) {
  ThreadPool pool(2);
  Rng rng(2);
  const BinaryKind kinds[] = {BinaryKind::add, BinaryKind::sub,
                              BinaryKind::mul, BinaryKind::div,
                              BinaryKind::max, BinaryKind::min};
  for (DType dtype : {DType::i32, DType::i64}) {
    for (BinaryKind kind : kinds) {
      for (const BroadcastCase &c : kBroadcastCases) {
        Buffer a = randomBuffer(dtype, c.a, rng, -1000, 1000);
        Buffer b = randomBuffer(dtype, c.b, rng, 1, 50);
        // Negative divisors too, without zeros.
        for (int64_t i = 0; i < b.size(); i += 2)
          b.set(i, -b.get(i));
        Buffer out(dtype, c.out);
        ASSERT_TRUE(binary(pool, kind, a.ref(), b.ref(), out.ref()).isOk());
        auto ref = referenceBroadcast2(a, b, c.out, [&](double x, double y) {
          return referenceBinary(kind, x, y, true);
        });
        EXPECT_EQ(out.values(), ref) << " kind " << int(kind);
      }
    }
  }
}

TEST(HostElementwiseTest, IntegerDivisionTruncatesAndWraps) {
  ThreadPool pool(1);
  Buffer a = fromValues(DType::i32, {5}, {-7, 7, -7, INT_MIN, INT_MAX});
  Buffer b = fromValues(DType::i32, {5}, {2, -2, -2, -1, 1});
  Buffer out(DType::i32, {5});
  ASSERT_TRUE(
      binary(pool, BinaryKind::div, a.ref(), b.ref(), out.ref()).isOk());
  EXPECT_EQ(out.values(), (std::vector<double>{-3, -3, 3, INT_MIN, INT_MAX}));
  // Overflowing add wraps instead of being undefined.
  Buffer one = fromValues(DType::i32, {1}, {1});
  Buffer big = fromValues(DType::i32, {1}, {INT_MAX});
  Buffer sum(DType::i32, {1});
  ASSERT_TRUE(
      binary(pool, BinaryKind::add, big.ref(), one.ref(), sum.ref()).isOk());
  EXPECT_EQ(sum.get(0), INT_MIN);
}

TEST(HostElementwiseTest, BinaryErrors) {
  ThreadPool pool(1);
  Buffer a = fromValues(DType::i64, {3}, {1, 2, 3});
  Buffer zero = fromValues(DType::i64, {3}, {1, 0, 1});
  Buffer out(DType::i64, {3});
  Status s = binary(pool, BinaryKind::div, a.ref(), zero.ref(), out.ref());
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument);
  EXPECT_NE(s.getMessage().find("division by zero"), std::string::npos);
  s = binary(pool, BinaryKind::pow, a.ref(), a.ref(), out.ref());
  EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument);

  Buffer f(DType::f32, {3}), g(DType::f32, {4}), h(DType::f64, {3});
  Buffer fo(DType::f32, {3});
  EXPECT_FALSE(
      binary(pool, BinaryKind::add, f.ref(), g.ref(), fo.ref()).isOk());
  EXPECT_FALSE(
      binary(pool, BinaryKind::add, f.ref(), h.ref(), fo.ref()).isOk());
  Buffer wrongShape(DType::f32, {1, 3});
  EXPECT_FALSE(
      binary(pool, BinaryKind::add, f.ref(), f.ref(), wrongShape.ref()).isOk());
  Buffer bools(DType::i1, {3});
  EXPECT_FALSE(
      binary(pool, BinaryKind::add, bools.ref(), bools.ref(), bools.ref())
          .isOk());
}

TEST(HostElementwiseTest, MaxMinPropagateNaN) {
  ThreadPool pool(1);
  for (DType dtype : kFloatTypes) {
    Buffer a = fromValues(dtype, {3}, {NAN, 1, 2});
    Buffer b = fromValues(dtype, {3}, {1, NAN, 2});
    Buffer out(dtype, {3});
    for (BinaryKind kind : {BinaryKind::max, BinaryKind::min}) {
      ASSERT_TRUE(binary(pool, kind, a.ref(), b.ref(), out.ref()).isOk());
      EXPECT_TRUE(std::isnan(out.get(0)));
      EXPECT_TRUE(std::isnan(out.get(1)));
      EXPECT_EQ(out.get(2), 2);
    }
  }
}

TEST(HostElementwiseTest, CompareMatchesReference) {
  ThreadPool pool(3);
  Rng rng(3);
  const CmpKind kinds[] = {CmpKind::eq, CmpKind::ne, CmpKind::lt,
                           CmpKind::le, CmpKind::gt, CmpKind::ge};
  auto cmp = [](CmpKind kind, double x, double y) -> double {
    switch (kind) {
    case CmpKind::eq:
      return x == y;
    case CmpKind::ne:
      return x != y;
    case CmpKind::lt:
      return x < y;
    case CmpKind::le:
      return x <= y;
    case CmpKind::gt:
      return x > y;
    case CmpKind::ge:
      return x >= y;
    }
    return 0;
  };
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64,
                      DType::i32, DType::i64, DType::i1}) {
    for (CmpKind kind : kinds) {
      for (const BroadcastCase &c : kBroadcastCases) {
        // Few distinct values, so that equality happens.
        Buffer a = randomBuffer(dtype, c.a, rng, 0, 3);
        Buffer b = randomBuffer(dtype, c.b, rng, 0, 3);
        if (isFloat(dtype)) {
          for (int64_t i = 0; i < a.size(); ++i)
            a.set(i, std::floor(a.get(i)));
          for (int64_t i = 0; i < b.size(); i += 3)
            b.set(i, i % 2 ? NAN : std::floor(b.get(i)));
        }
        Buffer out(DType::i1, c.out);
        ASSERT_TRUE(compare(pool, kind, a.ref(), b.ref(), out.ref()).isOk());
        auto ref = referenceBroadcast2(
            a, b, c.out, [&](double x, double y) { return cmp(kind, x, y); });
        EXPECT_EQ(out.values(), ref)
            << dtypeName(dtype) << " kind " << int(kind);
      }
    }
  }
}

TEST(HostElementwiseTest, WhereBroadcastsAllThree) {
  ThreadPool pool(2);
  Rng rng(4);
  struct Case {
    Shape c, t, f, out;
  };
  const Case cases[] = {
      {{7, 1}, {1, 33}, {}, {7, 33}},
      {{1, 1, 3, 3}, {2, 4, 3, 3}, {1}, {2, 4, 3, 3}},
      {{17}, {17}, {17}, {17}},
      {{33, 1, 17}, {1, 40, 17}, {33, 40, 1}, {33, 40, 17}},
  };
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64,
                      DType::i32, DType::i64, DType::i1}) {
    for (const Case &c : cases) {
      Buffer cond = randomBuffer(DType::i1, c.c, rng);
      Buffer t = randomBuffer(dtype, c.t, rng, -100, 100);
      Buffer f = randomBuffer(dtype, c.f, rng, -100, 100);
      Buffer out(dtype, c.out);
      ASSERT_TRUE(where(pool, cond.ref(), t.ref(), f.ref(), out.ref()).isOk());
      std::vector<double> ref(out.size());
      for (int64_t i = 0; i < out.size(); ++i)
        ref[i] = cond.get(broadcastIndex(c.out, c.c, i))
                     ? t.get(broadcastIndex(c.out, c.t, i))
                     : f.get(broadcastIndex(c.out, c.f, i));
      EXPECT_EQ(out.values(), ref) << dtypeName(dtype);
    }
  }
  Buffer notBool(DType::f32, {3}), x(DType::f32, {3});
  EXPECT_FALSE(where(pool, notBool.ref(), x.ref(), x.ref(), x.ref()).isOk());
}

double referenceUnary(UnaryKind kind, double x) {
  const double kPi = 3.14159265358979323846;
  switch (kind) {
  case UnaryKind::neg:
    return -x;
  case UnaryKind::exp:
    return std::exp(x);
  case UnaryKind::log:
    return std::log(x);
  case UnaryKind::sqrt:
    return std::sqrt(x);
  case UnaryKind::rsqrt:
    return 1 / std::sqrt(x);
  case UnaryKind::tanh:
    return std::tanh(x);
  case UnaryKind::erf:
    return std::erf(x);
  case UnaryKind::sigmoid:
    return 1 / (1 + std::exp(-x));
  case UnaryKind::silu:
    return x / (1 + std::exp(-x));
  case UnaryKind::relu:
    return x > 0 ? x : 0;
  case UnaryKind::gelu:
    return x * 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
  case UnaryKind::geluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

TEST(HostElementwiseTest, UnaryFloatsMatchReference) {
  ThreadPool pool(3);
  Rng rng(5);
  const UnaryKind kinds[] = {
      UnaryKind::neg,   UnaryKind::exp,  UnaryKind::log,  UnaryKind::sqrt,
      UnaryKind::rsqrt, UnaryKind::tanh, UnaryKind::erf,  UnaryKind::sigmoid,
      UnaryKind::silu,  UnaryKind::relu, UnaryKind::gelu, UnaryKind::geluTanh};
  for (DType dtype : kFloatTypes) {
    for (UnaryKind kind : kinds) {
      for (const Shape &shape :
           {Shape{}, Shape{1}, Shape{7, 3}, Shape{17, 33, 3}, Shape{70000}}) {
        bool positive = kind == UnaryKind::log || kind == UnaryKind::sqrt ||
                        kind == UnaryKind::rsqrt;
        Buffer x = randomBuffer(dtype, shape, rng, positive ? 0.05 : -6, 6);
        Buffer out(dtype, shape);
        ASSERT_TRUE(unary(pool, kind, x.ref(), out.ref()).isOk());
        std::vector<double> ref = x.values();
        for (double &v : ref)
          v = referenceUnary(kind, v);
        EXPECT_CLOSE(out, ref) << " kind " << int(kind);
      }
    }
  }
}

TEST(HostElementwiseTest, UnaryEdgeValues) {
  ThreadPool pool(1);
  Buffer x = fromValues(DType::f32, {5}, {-1000, 1000, NAN, -0.0, 88.0});
  Buffer out(DType::f32, {5});
  ASSERT_TRUE(unary(pool, UnaryKind::sigmoid, x.ref(), out.ref()).isOk());
  EXPECT_EQ(out.values()[0], 0.0);
  EXPECT_EQ(out.values()[1], 1.0);
  EXPECT_TRUE(std::isnan(out.get(2)));
  ASSERT_TRUE(unary(pool, UnaryKind::silu, x.ref(), out.ref()).isOk());
  EXPECT_EQ(out.get(0), 0.0); // No inf * 0.
  EXPECT_EQ(out.get(1), 1000.0);
  ASSERT_TRUE(unary(pool, UnaryKind::relu, x.ref(), out.ref()).isOk());
  EXPECT_TRUE(std::isnan(out.get(2)));
  EXPECT_EQ(out.get(0), 0.0);
}

TEST(HostElementwiseTest, UnaryIntegers) {
  ThreadPool pool(1);
  for (DType dtype : {DType::i32, DType::i64}) {
    Buffer x = fromValues(dtype, {3}, {5, -7, 0});
    Buffer out(dtype, {3});
    ASSERT_TRUE(unary(pool, UnaryKind::neg, x.ref(), out.ref()).isOk());
    EXPECT_EQ(out.values(), (std::vector<double>{-5, 7, 0}));
    EXPECT_EQ(unary(pool, UnaryKind::exp, x.ref(), out.ref()).getCode(),
              StatusCode::InvalidArgument);
  }
  Buffer minInt = fromValues(DType::i32, {1}, {INT_MIN});
  Buffer out(DType::i32, {1});
  ASSERT_TRUE(unary(pool, UnaryKind::neg, minInt.ref(), out.ref()).isOk());
  EXPECT_EQ(out.get(0), INT_MIN); // Wraps.
}

TEST(HostElementwiseTest, CastBetweenAllTypes) {
  ThreadPool pool(2);
  const DType all[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                       DType::i32, DType::i64, DType::i1};
  // Values every type represents exactly, so any pair round-trips them.
  std::vector<double> values = {0, 1, -1, 2, 5, -8, 100, 0, 1, 3};
  for (DType from : all) {
    for (DType to : all) {
      std::vector<double> in = values;
      if (from == DType::i1)
        for (double &v : in)
          v = v != 0;
      Buffer x = fromValues(from, {2, 5}, in);
      Buffer out(to, {2, 5});
      ASSERT_TRUE(cast(pool, x.ref(), out.ref()).isOk());
      std::vector<double> ref = in;
      if (to == DType::i1)
        for (double &v : ref)
          v = v != 0;
      EXPECT_EQ(out.values(), ref)
          << dtypeName(from) << " -> " << dtypeName(to);
    }
  }
}

TEST(HostElementwiseTest, CastRoundsAndTruncates) {
  ThreadPool pool(1);
  Buffer x = fromValues(DType::f32, {8},
                        {2.7, -2.7, 0.5, -0.99, NAN, 1e20, -1e20, 2147483520});
  Buffer i32(DType::i32, {8});
  ASSERT_TRUE(cast(pool, x.ref(), i32.ref()).isOk());
  EXPECT_EQ(i32.values(), (std::vector<double>{2, -2, 0, 0, 0, INT_MAX, INT_MIN,
                                               2147483520}));
  Buffer i64(DType::i64, {8});
  ASSERT_TRUE(cast(pool, x.ref(), i64.ref()).isOk());
  EXPECT_EQ(i64.get(0), 2);
  EXPECT_EQ(i64.get(1), -2);
  EXPECT_EQ(i64.ref().as<int64_t>()[5], INT64_MAX); // Saturates.
  EXPECT_EQ(i64.ref().as<int64_t>()[6], INT64_MIN);
  Buffer bools(DType::i1, {8});
  ASSERT_TRUE(cast(pool, x.ref(), bools.ref()).isOk());
  EXPECT_EQ(bools.values(), (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1}));

  // int -> i1 is x != 0; i64 -> i32 keeps the low 32 bits.
  Buffer ints(DType::i64, {4});
  ints.ref().as<int64_t>()[0] = 0;
  ints.ref().as<int64_t>()[1] = -3;
  ints.ref().as<int64_t>()[2] = int64_t(1) << 32;
  ints.ref().as<int64_t>()[3] = (int64_t(1) << 32) + 7;
  Buffer ib(DType::i1, {4});
  ASSERT_TRUE(cast(pool, ints.ref(), ib.ref()).isOk());
  EXPECT_EQ(ib.values(), (std::vector<double>{0, 1, 1, 1}));
  Buffer narrow(DType::i32, {4});
  ASSERT_TRUE(cast(pool, ints.ref(), narrow.ref()).isOk());
  EXPECT_EQ(narrow.values(), (std::vector<double>{0, -3, 0, 7}));

  // f32 -> bf16 / f16 round to nearest even; f64 -> f16 rounds once.
  Buffer ties = fromValues(DType::f32, {2}, {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8});
  Buffer b16(DType::bf16, {2});
  ASSERT_TRUE(cast(pool, ties.ref(), b16.ref()).isOk());
  EXPECT_EQ(b16.values(), (std::vector<double>{1.0, 1.0 + 0x1p-6}));
  Buffer wide = fromValues(DType::f64, {1}, {1.0 + 0x1p-11 + 0x1p-40});
  Buffer h16(DType::f16, {1});
  ASSERT_TRUE(cast(pool, wide.ref(), h16.ref()).isOk());
  EXPECT_EQ(h16.get(0), 1.0 + 0x1p-10);

  Buffer wrong(DType::f32, {3});
  EXPECT_FALSE(cast(pool, x.ref(), wrong.ref()).isOk());
}

} // namespace
