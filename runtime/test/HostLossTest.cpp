//===- HostLossTest.cpp - cross-entropy loss and gradient tests -----------===//
//
// crossEntropy against a naive log-sum-exp in double (ignored labels, i32
// and i64 labels, every float dtype), crossEntropyGrad against central
// differences of crossEntropy in f64 and the other dtypes against f64,
// labels out of range reported with their position and value, and
// bitwise identical results for any thread count.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

constexpr int64_t kIgnore = -100;

/// Labels in [0, classes), every third one (from `first`) set to kIgnore.
Buffer randomLabels(DType dtype, const Shape &shape, int64_t classes, Rng &rng,
                    int64_t first = 1) {
  Buffer labels = randomBuffer(dtype, shape, rng, 0, classes - 1);
  for (int64_t i = first; i < labels.size(); i += 3)
    labels.set(i, kIgnore);
  return labels;
}

/// Sum over non-ignored rows of logsumexp(x) - x[label], and their count.
double referenceLoss(const Buffer &logits, const Buffer &labels,
                     int64_t ignoreIndex, int64_t &count) {
  int64_t classes = logits.shape.back();
  double sum = 0;
  count = 0;
  for (int64_t r = 0; r < labels.size(); ++r) {
    auto label = static_cast<int64_t>(labels.get(r));
    if (label == ignoreIndex)
      continue;
    double m = -INFINITY;
    for (int64_t c = 0; c < classes; ++c)
      m = std::max(m, logits.get(r * classes + c));
    double s = 0;
    for (int64_t c = 0; c < classes; ++c)
      s += std::exp(logits.get(r * classes + c) - m);
    sum += m + std::log(s) - logits.get(r * classes + label);
    ++count;
  }
  return sum;
}

const Shape kLogitShapes[] = {{2, 3, 5}, {7, 11}, {4}, {130, 33}};

TEST(HostLossTest, CrossEntropyMatchesReference) {
  ThreadPool pool(3);
  Rng rng(300);
  for (DType dtype : kFloatTypes) {
    for (DType labelType : {DType::i64, DType::i32}) {
      for (const Shape &shape : kLogitShapes) {
        Buffer logits = randomBuffer(dtype, shape, rng, -4, 4);
        Shape labelShape(shape.begin(), shape.end() - 1);
        Buffer labels = randomLabels(labelType, labelShape, shape.back(), rng);
        // The sum is f32 for every storage type but f64.
        Buffer loss(dtype == DType::f64 ? DType::f64 : DType::f32, {}),
            count(DType::i64, {});
        ASSERT_TRUE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                                 loss.ref(), count.ref())
                        .isOk());
        int64_t refCount = 0;
        double ref = referenceLoss(logits, labels, kIgnore, refCount);
        EXPECT_EQ(count.get(0), static_cast<double>(refCount));
        // Per-row losses in the compute type, summed in f64, rounded once.
        EXPECT_CLOSE(loss, std::vector<double>{ref})
            << " " << describe(logits.ref());
      }
    }
  }
}

TEST(HostLossTest, CrossEntropyCustomIgnoreIndexAndAllIgnored) {
  ThreadPool pool(2);
  Rng rng(301);
  Buffer logits = randomBuffer(DType::f64, {6, 4}, rng);
  // ignoreIndex 2 lies inside [0, C): those labels are left out.
  Buffer labels = fromValues(DType::i64, {6}, {0, 2, 3, 2, 1, 0});
  Buffer loss(DType::f64, {}), count(DType::i64, {});
  ASSERT_TRUE(
      crossEntropy(pool, logits.ref(), labels.ref(), 2, loss.ref(), count.ref())
          .isOk());
  int64_t refCount = 0;
  double ref = referenceLoss(logits, labels, 2, refCount);
  EXPECT_EQ(count.get(0), 4.0);
  EXPECT_NEAR(loss.get(0), ref, 1e-13 * std::fabs(ref));
  Buffer dlogits(DType::f64, {6, 4});
  ASSERT_TRUE(
      crossEntropyGrad(pool, logits.ref(), labels.ref(), 2, 0.25, dlogits.ref())
          .isOk());
  for (int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(dlogits.get(1 * 4 + c), 0.0);
    EXPECT_EQ(dlogits.get(3 * 4 + c), 0.0);
  }

  Buffer ignored = fromValues(DType::i32, {6}, std::vector<double>(6, -100));
  ASSERT_TRUE(crossEntropy(pool, logits.ref(), ignored.ref(), kIgnore,
                           loss.ref(), count.ref())
                  .isOk());
  EXPECT_EQ(loss.get(0), 0.0);
  EXPECT_EQ(count.get(0), 0.0);
  ASSERT_TRUE(crossEntropyGrad(pool, logits.ref(), ignored.ref(), kIgnore, 1.0,
                               dlogits.ref())
                  .isOk());
  EXPECT_EQ(dlogits.values(), std::vector<double>(24, 0.0));
}

TEST(HostLossTest, CrossEntropyGradMatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(302);
  for (const Shape &shape : kLogitShapes) {
    if (numElements(shape) > 500)
      continue; // Differences cost two losses per element.
    Buffer logits = randomBuffer(DType::f64, shape, rng, -4, 4);
    Shape labelShape(shape.begin(), shape.end() - 1);
    Buffer labels =
        randomLabels(DType::i64, labelShape, shape.back(), rng, /*first=*/0);
    // scale as the executor passes it: 1 / (non-ignored labels).
    Buffer loss(DType::f64, {}), count(DType::i64, {});
    ASSERT_TRUE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                             loss.ref(), count.ref())
                    .isOk());
    double scale = 1.0 / std::max(1.0, count.get(0));
    auto meanLoss = [&]() {
      EXPECT_TRUE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                               loss.ref(), count.ref())
                      .isOk());
      return loss.get(0) * scale;
    };
    std::vector<double> ref = numericGradient(logits, meanLoss);
    Buffer dlogits(DType::f64, shape);
    ASSERT_TRUE(crossEntropyGrad(pool, logits.ref(), labels.ref(), kIgnore,
                                 scale, dlogits.ref())
                    .isOk());
    EXPECT_GRAD_CLOSE(dlogits, ref, kF64GradTolerance)
        << " " << describe(logits.ref());
    // Ignored rows get exact zeros.
    int64_t classes = shape.back();
    for (int64_t r = 0; r < labels.size(); ++r) {
      if (labels.get(r) != kIgnore)
        continue;
      for (int64_t c = 0; c < classes; ++c)
        EXPECT_EQ(dlogits.get(r * classes + c), 0.0);
    }
  }
}

TEST(HostLossTest, CrossEntropyGradLowPrecisionMatchesF64) {
  ThreadPool pool(2);
  Rng rng(303);
  for (const Shape &shape : kLogitShapes) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      Buffer logits = randomBuffer(dtype, shape, rng, -4, 4);
      Shape labelShape(shape.begin(), shape.end() - 1);
      Buffer labels = randomLabels(DType::i32, labelShape, shape.back(), rng);
      Buffer logits64 = convert(logits, DType::f64);
      Buffer dl(dtype, shape), dl64(DType::f64, shape);
      ASSERT_TRUE(crossEntropyGrad(pool, logits.ref(), labels.ref(), kIgnore,
                                   0.1, dl.ref())
                      .isOk());
      ASSERT_TRUE(crossEntropyGrad(pool, logits64.ref(), labels.ref(), kIgnore,
                                   0.1, dl64.ref())
                      .isOk());
      EXPECT_GRAD_CLOSE(dl, dl64.values(), gradTolerance(dtype))
          << " " << describe(logits.ref());
    }
  }
}

TEST(HostLossTest, BadLabelIsAnErrorNamingItsPosition) {
  ThreadPool pool(2);
  Rng rng(304);
  Buffer logits = randomBuffer(DType::f32, {2, 3, 5}, rng);
  for (DType labelType : {DType::i64, DType::i32}) {
    for (double bad : {5.0, -1.0, 1e9}) {
      Buffer labels = randomLabels(labelType, {2, 3}, 5, rng);
      labels.set(5, bad); // Position [1, 2].
      Buffer loss = fromValues(DType::f32, {}, {42.0});
      Buffer count = fromValues(DType::i64, {}, {7.0});
      Status s = crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                              loss.ref(), count.ref());
      ASSERT_FALSE(s.isOk());
      EXPECT_EQ(s.getCode(), StatusCode::InvalidArgument);
      std::string label = std::to_string(static_cast<int64_t>(bad));
      EXPECT_NE(s.getMessage().find("label " + label + " at position [1, 2]"),
                std::string::npos)
          << s.getMessage();
      EXPECT_EQ(loss.get(0), 42.0); // Untouched.
      EXPECT_EQ(count.get(0), 7.0);
      Buffer dlogits(DType::f32, {2, 3, 5});
      s = crossEntropyGrad(pool, logits.ref(), labels.ref(), kIgnore, 1.0,
                           dlogits.ref());
      ASSERT_FALSE(s.isOk());
      EXPECT_NE(s.getMessage().find("label " + label + " at position [1, 2]"),
                std::string::npos)
          << s.getMessage();
    }
  }
}

TEST(HostLossTest, ShapeAndTypeErrors) {
  ThreadPool pool(1);
  Buffer logits(DType::f32, {2, 3, 5}), loss(DType::f32, {}),
      count(DType::i64, {});
  Buffer wrongLabels(DType::i64, {2, 5});
  EXPECT_FALSE(crossEntropy(pool, logits.ref(), wrongLabels.ref(), kIgnore,
                            loss.ref(), count.ref())
                   .isOk());
  Buffer floatLabels(DType::f32, {2, 3});
  EXPECT_FALSE(crossEntropy(pool, logits.ref(), floatLabels.ref(), kIgnore,
                            loss.ref(), count.ref())
                   .isOk());
  Buffer labels(DType::i64, {2, 3});
  Buffer loss64(DType::f64, {}), count32(DType::i32, {}),
      lossVec(DType::f32, {2});
  EXPECT_FALSE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                            loss64.ref(), count.ref())
                   .isOk());
  EXPECT_FALSE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                            loss.ref(), count32.ref())
                   .isOk());
  EXPECT_FALSE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                            lossVec.ref(), count.ref())
                   .isOk());
  EXPECT_TRUE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                           loss.ref(), count.ref())
                  .isOk());
  Buffer dlogits(DType::f32, {2, 15});
  EXPECT_FALSE(crossEntropyGrad(pool, logits.ref(), labels.ref(), kIgnore, 1.0,
                                dlogits.ref())
                   .isOk());
}

TEST(HostLossTest, SameBitsForAnyThreadCount) {
  Rng rng(305);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    Buffer logits = randomBuffer(dtype, {300, 1000}, rng, -5, 5);
    Buffer labels = randomLabels(DType::i64, {300}, 1000, rng);
    expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
      Buffer loss(dtype == DType::f64 ? DType::f64 : DType::f32, {}),
          count(DType::i64, {}), dl(dtype, {300, 1000});
      EXPECT_TRUE(crossEntropy(pool, logits.ref(), labels.ref(), kIgnore,
                               loss.ref(), count.ref())
                      .isOk());
      EXPECT_TRUE(crossEntropyGrad(pool, logits.ref(), labels.ref(), kIgnore,
                                   1.0 / 200, dl.ref())
                      .isOk());
      std::vector<Buffer> outs;
      outs.push_back(std::move(loss));
      outs.push_back(std::move(count));
      outs.push_back(std::move(dl));
      return outs;
    });
  }
}

} // namespace
