//===- HostLinearLossTest.cpp - fused chunked LM head + loss tests --------===//
//
// linearCrossEntropy and its gradient against the unfused kernels (matmul,
// crossEntropy, crossEntropyGrad, matmul) and against a float64 reference:
// the loss and hidden_grad bitwise equal to the unfused ones for every
// dtype (f32 and f64 also within tolerance of float64), weight_grad bitwise
// equal up to one GEMM group (128 rows) and within rounding beyond; the same
// bits for every chunk size and thread count; bad labels and shapes refused.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

#include "rp/runtime/host/Kernels.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

constexpr int64_t kIgnore = -100;

struct Problem {
  Buffer hidden, weight, labels;
  int64_t rows, k, classes;
};

/// hidden [rows, k], weight [classes, k], labels with every fifth ignored.
Problem makeProblem(DType dtype, int64_t rows, int64_t k, int64_t classes,
                    uint64_t seed) {
  Rng rng(seed);
  Problem p{randomBuffer(dtype, {rows, k}, rng, -1, 1),
            randomBuffer(dtype, {classes, k}, rng, -1, 1),
            randomBuffer(DType::i64, {rows}, rng, 0, classes - 1),
            rows,
            k,
            classes};
  for (int64_t i = 2; i < rows; i += 5)
    p.labels.set(i, kIgnore);
  return p;
}

DType sumType(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

/// loss_sum, count, hidden_grad, weight_grad of the fused kernels.
std::vector<Buffer> fused(ThreadPool &pool, const Problem &p, int64_t chunk,
                          double scale) {
  std::vector<Buffer> out;
  out.emplace_back(sumType(p.hidden.dtype), Shape{});
  out.emplace_back(DType::i64, Shape{});
  out.emplace_back(p.hidden.dtype, p.hidden.shape);
  out.emplace_back(p.hidden.dtype, p.weight.shape);
  EXPECT_TRUE(linearCrossEntropy(pool, p.hidden.ref(), p.weight.ref(),
                                 p.labels.ref(), kIgnore, chunk, out[0].ref(),
                                 out[1].ref())
                  .isOk());
  EXPECT_TRUE(linearCrossEntropyGrad(pool, p.hidden.ref(), p.weight.ref(),
                                     p.labels.ref(), kIgnore, chunk, scale,
                                     out[2].ref(), out[3].ref())
                  .isOk());
  return out;
}

/// The same from the unfused kernels, as the autodiff of matmul +
/// cross_entropy runs them.
std::vector<Buffer> unfused(ThreadPool &pool, const Problem &p, double scale) {
  DType t = p.hidden.dtype;
  Buffer logits(t, {p.rows, p.classes}), dlogits(t, {p.rows, p.classes});
  std::vector<Buffer> out;
  out.emplace_back(sumType(t), Shape{});
  out.emplace_back(DType::i64, Shape{});
  out.emplace_back(t, p.hidden.shape);
  out.emplace_back(t, p.weight.shape);
  EXPECT_TRUE(
      matmul(pool, p.hidden.ref(), p.weight.ref(), false, true, logits.ref())
          .isOk());
  EXPECT_TRUE(crossEntropy(pool, logits.ref(), p.labels.ref(), kIgnore,
                           out[0].ref(), out[1].ref())
                  .isOk());
  EXPECT_TRUE(crossEntropyGrad(pool, logits.ref(), p.labels.ref(), kIgnore,
                               scale, dlogits.ref())
                  .isOk());
  EXPECT_TRUE(
      matmul(pool, dlogits.ref(), p.weight.ref(), false, false, out[2].ref())
          .isOk());
  EXPECT_TRUE(
      matmul(pool, dlogits.ref(), p.hidden.ref(), true, false, out[3].ref())
          .isOk());
  return out;
}

/// Loss, hidden_grad and weight_grad in double.
void reference(const Problem &p, double scale, double &loss,
               std::vector<double> &dh, std::vector<double> &dw) {
  loss = 0;
  dh.assign(p.rows * p.k, 0);
  dw.assign(p.classes * p.k, 0);
  std::vector<double> z(p.classes);
  for (int64_t r = 0; r < p.rows; ++r) {
    auto label = static_cast<int64_t>(p.labels.get(r));
    if (label == kIgnore)
      continue;
    double m = -INFINITY;
    for (int64_t c = 0; c < p.classes; ++c) {
      z[c] = 0;
      for (int64_t i = 0; i < p.k; ++i)
        z[c] += p.hidden.get(r * p.k + i) * p.weight.get(c * p.k + i);
      m = std::max(m, z[c]);
    }
    double s = 0;
    for (int64_t c = 0; c < p.classes; ++c)
      s += std::exp(z[c] - m);
    loss += m + std::log(s) - z[label];
    for (int64_t c = 0; c < p.classes; ++c) {
      double g = scale * (std::exp(z[c] - m) / s - (c == label ? 1 : 0));
      for (int64_t i = 0; i < p.k; ++i) {
        dh[r * p.k + i] += g * p.weight.get(c * p.k + i);
        dw[c * p.k + i] += g * p.hidden.get(r * p.k + i);
      }
    }
  }
}

TEST(HostLinearLossTest, MatchesUnfusedAndFloat64Reference) {
  ThreadPool pool(3);
  for (DType dtype : kFloatTypes) {
    for (int64_t rows : {5, 128, 300}) {
      Problem p = makeProblem(dtype, rows, 24, 70, 17 + rows);
      const double scale = 1.0 / rows;
      std::vector<Buffer> f = fused(pool, p, 64, scale);
      std::vector<Buffer> u = unfused(pool, p, scale);
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " rows " +
                   std::to_string(rows));
      // The logits of a chunk are the unfused GEMM's tiles, so the loss and
      // hidden_grad keep the unfused bits.
      EXPECT_TRUE(f[0].sameBits(u[0]));
      EXPECT_TRUE(f[1].sameBits(u[1]));
      EXPECT_TRUE(f[2].sameBits(u[2]));
      // weight_grad sums over tokens in 128-row GEMM groups.
      if (rows <= 128)
        EXPECT_TRUE(f[3].sameBits(u[3]));
      else
        EXPECT_CLOSE(f[3], u[3].values());
      // 16-bit logits are rounded before the softmax, as unfused: the
      // bitwise checks above cover them; f32 and f64 also meet float64.
      if (dtype != DType::f32 && dtype != DType::f64)
        continue;
      double loss;
      std::vector<double> dh, dw;
      reference(p, scale, loss, dh, dw);
      EXPECT_CLOSE(f[0], std::vector<double>{loss});
      EXPECT_GRAD_CLOSE(f[2], dh, gradTolerance(dtype));
      EXPECT_GRAD_CLOSE(f[3], dw, gradTolerance(dtype));
    }
  }
}

TEST(HostLinearLossTest, SameBitsForEveryChunkAndThreadCount) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    Problem p = makeProblem(dtype, 400, 16, 50, 5);
    ThreadPool one(1);
    std::vector<Buffer> first = fused(one, p, 400, 0.01);
    for (int64_t chunk : {1, 100, 128, 129, 256, 1000}) {
      expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
        std::vector<Buffer> out = fused(pool, p, chunk, 0.01);
        for (size_t i = 0; i < out.size(); ++i)
          EXPECT_TRUE(first[i].sameBits(out[i]))
              << "output " << i << " differs with chunk " << chunk;
        return out;
      });
    }
  }
}

TEST(HostLinearLossTest, RefusesBadLabelsAndShapes) {
  ThreadPool pool(2);
  Problem p = makeProblem(DType::f32, 6, 8, 10, 3);
  Buffer loss(DType::f32, {}), count(DType::i64, {});
  loss.set(0, 7.0);
  p.labels.set(4, 10);
  Status s =
      linearCrossEntropy(pool, p.hidden.ref(), p.weight.ref(), p.labels.ref(),
                         kIgnore, 128, loss.ref(), count.ref());
  ASSERT_TRUE(s.failed());
  EXPECT_NE(s.getMessage().find("label 10 at row 4 is out of range [0, 10)"),
            std::string::npos)
      << s.getMessage();
  EXPECT_EQ(loss.get(0), 7.0); // nothing written
  p.labels.set(4, 1);
  Buffer badWeight(DType::f32, {10, 7});
  s = linearCrossEntropy(pool, p.hidden.ref(), badWeight.ref(), p.labels.ref(),
                         kIgnore, 128, loss.ref(), count.ref());
  ASSERT_TRUE(s.failed());
  EXPECT_NE(s.getMessage().find("should be [classes, K]"), std::string::npos)
      << s.getMessage();
  Buffer dh(DType::f32, p.hidden.shape), dw(DType::f32, {10, 8});
  s = linearCrossEntropyGrad(pool, p.hidden.ref(), p.weight.ref(),
                             p.labels.ref(), kIgnore, 0, 1.0, dh.ref(),
                             dw.ref());
  ASSERT_TRUE(s.failed());
  EXPECT_NE(s.getMessage().find("chunk 0 must be positive"), std::string::npos)
      << s.getMessage();
}

} // namespace
