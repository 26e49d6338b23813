//===- HostNNTest.cpp - reduce, softmax and norm host kernel tests --------===//
//
// Row kernels against double references over every float dtype (and the
// integer reductions exactly), with the reduced or normalized dimensions in
// every position, and bitwise identical results for any thread count.
//
//===----------------------------------------------------------------------===//

#include "HostKernelsTestUtil.h"

#include <algorithm>
#include <climits>

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> dims;
};

// {5, 1, 3} over {1} reduces only a size-1 dimension; {3, 600, 7} and
// {1000, 70} need inner blocks and several chunks.
const ReduceCase kReduceCases[] = {
    {{33}, {0}},          {{7, 17}, {1}},    {{7, 17}, {0}},
    {{3, 7, 17}, {0, 2}}, {{3, 7, 17}, {1}}, {{3, 1, 5, 2}, {1, 2}},
    {{1, 1}, {0, 1}},     {{5, 1, 3}, {1}},  {{3, 600, 7}, {0, 1}},
    {{1000, 70}, {0}},
};

const ReduceKind kReduceKinds[] = {ReduceKind::sum, ReduceKind::mean,
                                   ReduceKind::max, ReduceKind::min};

/// Reference reduce in double; also gives the output shape.
std::vector<double> referenceReduce(const Buffer &x, ReduceKind kind,
                                    const std::vector<int64_t> &dims,
                                    bool keepDims, Shape &outShape) {
  const Shape &shape = x.shape;
  outShape.clear();
  Shape keptShape;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool reduced = std::count(dims.begin(), dims.end(), int64_t(d)) > 0;
    if (!reduced)
      keptShape.push_back(shape[d]);
    if (!reduced || keepDims)
      outShape.push_back(reduced ? 1 : shape[d]);
  }
  int64_t numOut = numElements(keptShape);
  std::vector<double> acc(numOut, 0);
  std::vector<int64_t> seen(numOut, 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t linear = i, outIndex = 0, outStride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      int64_t coord = linear % shape[d];
      linear /= shape[d];
      if (std::count(dims.begin(), dims.end(), int64_t(d)))
        continue;
      outIndex += coord * outStride;
      outStride *= shape[d];
    }
    double v = x.get(i);
    double &a = acc[outIndex];
    if (seen[outIndex]++ == 0 && kind != ReduceKind::sum &&
        kind != ReduceKind::mean)
      a = v;
    else if (kind == ReduceKind::max)
      a = std::max(a, v);
    else if (kind == ReduceKind::min)
      a = std::min(a, v);
    else
      a += v;
  }
  if (kind == ReduceKind::mean)
    for (int64_t o = 0; o < numOut; ++o)
      acc[o] /= static_cast<double>(seen[o]);
  return acc;
}

TEST(HostNNTest, ReduceFloatsMatchReference) {
  ThreadPool pool(3);
  Rng rng(30);
  for (DType dtype : kFloatTypes) {
    for (ReduceKind kind : kReduceKinds) {
      for (const ReduceCase &c : kReduceCases) {
        for (bool keepDims : {false, true}) {
          Buffer x = randomBuffer(dtype, c.shape, rng);
          Shape outShape;
          auto ref = referenceReduce(x, kind, c.dims, keepDims, outShape);
          Buffer out(dtype, outShape);
          ASSERT_TRUE(
              reduce(pool, kind, x.ref(), c.dims, keepDims, out.ref()).isOk());
          EXPECT_CLOSE(out, ref)
              << " kind " << int(kind) << " on " << describe(x.ref());
        }
      }
    }
  }
}

TEST(HostNNTest, ReduceIntegersAreExact) {
  ThreadPool pool(2);
  Rng rng(31);
  for (DType dtype : {DType::i32, DType::i64}) {
    for (ReduceKind kind :
         {ReduceKind::sum, ReduceKind::max, ReduceKind::min}) {
      for (const ReduceCase &c : kReduceCases) {
        Buffer x = randomBuffer(dtype, c.shape, rng, -1000, 1000);
        Shape outShape;
        auto ref = referenceReduce(x, kind, c.dims, false, outShape);
        Buffer out(dtype, outShape);
        ASSERT_TRUE(
            reduce(pool, kind, x.ref(), c.dims, false, out.ref()).isOk());
        EXPECT_EQ(out.values(), ref);
      }
    }
    Buffer x(dtype, {3}), out(dtype, {});
    EXPECT_EQ(reduce(pool, ReduceKind::mean, x.ref(), {0}, false, out.ref())
                  .getCode(),
              StatusCode::InvalidArgument);
  }
}

TEST(HostNNTest, ReduceEdgeCases) {
  ThreadPool pool(1);
  Buffer x = fromValues(DType::f32, {4}, {1, NAN, 3, -2});
  Buffer out(DType::f32, {});
  ASSERT_TRUE(
      reduce(pool, ReduceKind::max, x.ref(), {0}, false, out.ref()).isOk());
  EXPECT_TRUE(std::isnan(out.get(0)));
  // Empty reductions: a sum is 0, max has no value.
  Buffer empty(DType::f32, {3, 0});
  Buffer sums = fromValues(DType::f32, {3}, {9, 9, 9});
  ASSERT_TRUE(reduce(pool, ReduceKind::sum, empty.ref(), {1}, false, sums.ref())
                  .isOk());
  EXPECT_EQ(sums.values(), (std::vector<double>{0, 0, 0}));
  EXPECT_FALSE(
      reduce(pool, ReduceKind::max, empty.ref(), {1}, false, sums.ref())
          .isOk());
  Buffer wrong(DType::f32, {2});
  EXPECT_FALSE(
      reduce(pool, ReduceKind::sum, x.ref(), {0}, false, wrong.ref()).isOk());
  Buffer y(DType::f32, {2, 3}), o(DType::f32, {});
  EXPECT_FALSE(
      reduce(pool, ReduceKind::sum, y.ref(), {1, 0}, false, o.ref()).isOk());
}

/// Reference softmax / log-softmax along `dim`.
std::vector<double> referenceSoftmax(const Buffer &x, int64_t dim, bool log) {
  const Shape &s = x.shape;
  int64_t outer = 1, inner = 1, n = s[dim];
  for (int64_t d = 0; d < dim; ++d)
    outer *= s[d];
  for (size_t d = dim + 1; d < s.size(); ++d)
    inner *= s[d];
  std::vector<double> ref(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j)
        m = std::max(m, x.get(at(j)));
      for (int64_t j = 0; j < n; ++j)
        sum += std::exp(x.get(at(j)) - m);
      for (int64_t j = 0; j < n; ++j)
        ref[at(j)] = log ? x.get(at(j)) - m - std::log(sum)
                         : std::exp(x.get(at(j)) - m) / sum;
    }
  return ref;
}

TEST(HostNNTest, SoftmaxMatchesReference) {
  ThreadPool pool(3);
  Rng rng(32);
  const Shape shapes[] = {{1},        {33},         {7, 17},
                          {3, 7, 17}, {2, 5, 1, 3}, {40, 1000}};
  for (DType dtype : kFloatTypes) {
    for (bool log : {false, true}) {
      for (const Shape &shape : shapes) {
        for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim) {
          // Large magnitudes: without max subtraction exp would overflow.
          Buffer x = randomBuffer(dtype, shape, rng, -8, 8);
          if (x.size() > 2)
            x.set(1, dtype == DType::f16 ? 60000.0 : 1e4);
          Buffer out(dtype, shape);
          ASSERT_TRUE(softmax(pool, x.ref(), dim, log, out.ref()).isOk());
          EXPECT_CLOSE(out, referenceSoftmax(x, dim, log))
              << " dim " << dim << " log " << log << " " << describe(x.ref());
        }
      }
    }
  }
  Buffer x(DType::f32, {3}), out(DType::f32, {3});
  EXPECT_FALSE(softmax(pool, x.ref(), 1, false, out.ref()).isOk());
  Buffer ints(DType::i32, {3});
  EXPECT_FALSE(softmax(pool, ints.ref(), 0, false, ints.ref()).isOk());
  // The message is the kernels' shared check's (kernels::checkSoftmax), the
  // cuda dispatch's too.
  Status s = softmax(pool, x.ref(), 1, true, out.ref());
  EXPECT_NE(s.getMessage().find("log_softmax: dimension 1 is out of range "
                                "for f32[3]"),
            std::string::npos)
      << s.getMessage();
}

TEST(HostNNTest, SoftmaxOfAllMinusInfinityIsNaN) {
  ThreadPool pool(1);
  Buffer x = fromValues(DType::f32, {2, 2}, {-INFINITY, -INFINITY, 0, 0});
  Buffer out(DType::f32, {2, 2});
  ASSERT_TRUE(softmax(pool, x.ref(), 1, false, out.ref()).isOk());
  EXPECT_TRUE(std::isnan(out.get(0)));
  EXPECT_EQ(out.get(2), 0.5);
}

/// Reference layer norm (bias may be null) or RMS norm (`rms`).
std::vector<double> referenceNorm(const Buffer &x, const Buffer *scale,
                                  const Buffer *bias, int64_t axis, double eps,
                                  bool rms) {
  int64_t n = 1;
  for (size_t d = axis; d < x.shape.size(); ++d)
    n *= x.shape[d];
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      mean += x.get(r * n + i);
    mean /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = x.get(r * n + i);
      var += rms ? v * v : (v - mean) * (v - mean);
    }
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = x.get(r * n + i);
      double y =
          rms ? v / std::sqrt(var + eps) : (v - mean) / std::sqrt(var + eps);
      if (scale)
        y *= scale->get(i);
      if (bias)
        y += bias->get(i);
      ref[r * n + i] = y;
    }
  }
  return ref;
}

TEST(HostNNTest, NormsMatchReference) {
  ThreadPool pool(3);
  Rng rng(33);
  const std::pair<Shape, int64_t> cases[] = {{{33}, 0},       {{7, 17}, 1},
                                             {{3, 7, 17}, 1}, {{3, 7, 17}, 2},
                                             {{1, 1}, 1},     {{300, 130}, 1}};
  for (DType dtype : kFloatTypes) {
    for (const auto &[shape, axis] : cases) {
      Shape normalized(shape.begin() + axis, shape.end());
      // An offset mean, which a one-pass variance would cancel badly.
      Buffer x = randomBuffer(dtype, shape, rng, 2, 4);
      Buffer scale = randomBuffer(dtype, normalized, rng, 0.5, 1.5);
      Buffer bias = randomBuffer(dtype, normalized, rng);
      for (int affine = 0; affine < 3; ++affine) {
        const Buffer *g = affine >= 1 ? &scale : nullptr;
        const Buffer *b = affine >= 2 ? &bias : nullptr;
        std::optional<TensorRef> gRef, bRef;
        if (g)
          gRef = g->ref();
        if (b)
          bRef = b->ref();
        Buffer out(dtype, shape);
        ASSERT_TRUE(
            layerNorm(pool, x.ref(), gRef, bRef, axis, 1e-5, out.ref()).isOk());
        EXPECT_CLOSE(out, referenceNorm(x, g, b, axis, 1e-5, false))
            << " layer_norm affine " << affine << " " << describe(x.ref());
        ASSERT_TRUE(rmsNorm(pool, x.ref(), gRef, axis, 1e-6, out.ref()).isOk());
        EXPECT_CLOSE(out, referenceNorm(x, g, nullptr, axis, 1e-6, true))
            << " rms_norm affine " << affine << " " << describe(x.ref());
      }
    }
  }
  Buffer x(DType::f32, {3, 4}), out(DType::f32, {3, 4}), g(DType::f32, {3});
  EXPECT_FALSE(
      layerNorm(pool, x.ref(), g.ref(), std::nullopt, 1, 1e-5, out.ref())
          .isOk());
  EXPECT_FALSE(rmsNorm(pool, x.ref(), std::nullopt, 2, 1e-5, out.ref()).isOk());
}

TEST(HostNNTest, SameBitsForAnyThreadCount) {
  Rng rng(34);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    Buffer x = randomBuffer(dtype, {64, 3, 1031}, rng, -3, 3);
    Buffer scale = randomBuffer(dtype, {3, 1031}, rng);
    Buffer bias = randomBuffer(dtype, {3, 1031}, rng);
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, {64, 3});
      EXPECT_TRUE(
          reduce(pool, ReduceKind::sum, x.ref(), {2}, false, out.ref()).isOk());
      return out;
    });
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, {3, 1031});
      EXPECT_TRUE(reduce(pool, ReduceKind::mean, x.ref(), {0}, false, out.ref())
                      .isOk());
      return out;
    });
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, x.shape);
      EXPECT_TRUE(softmax(pool, x.ref(), 2, false, out.ref()).isOk());
      return out;
    });
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, x.shape);
      EXPECT_TRUE(softmax(pool, x.ref(), 0, true, out.ref()).isOk());
      return out;
    });
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, x.shape);
      EXPECT_TRUE(
          layerNorm(pool, x.ref(), scale.ref(), bias.ref(), 1, 1e-5, out.ref())
              .isOk());
      return out;
    });
    expectSameBitsForAnyThreadCount([&](ThreadPool &pool) {
      Buffer out(dtype, x.shape);
      EXPECT_TRUE(
          rmsNorm(pool, x.ref(), scale.ref(), 1, 1e-6, out.ref()).isOk());
      return out;
    });
  }
}

} // namespace
