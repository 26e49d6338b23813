//===- HostGradientsNNTest.cpp - softmax and norm backward tests ----------===//
//
// softmaxGrad (softmax and log-softmax, along inner and strided
// dimensions), layerNormGrad and rmsNormGrad (with and without scale and
// bias, several row blocks and column tiles of the parameter gradients)
// against central differences of the forward kernels in f64; the other
// dtypes against the f64 kernel; bitwise identical results for any
// thread count.
//
//===----------------------------------------------------------------------===//

#include "HostGradientsTestUtil.h"

using namespace rp::runtime;
using namespace rp::runtime::host;
using namespace rp::runtime::testing;

namespace {

//===----------------------------------------------------------------------===//
// softmax / log-softmax
//===----------------------------------------------------------------------===//

struct SoftmaxCase {
  Shape shape;
  int64_t dim;
};

const SoftmaxCase kSoftmaxCases[] = {{{4, 9}, 1},    {{3, 5, 4}, 1},
                                     {{6}, 0},       {{2, 3, 7}, 2},
                                     {{5, 2, 3}, 0}, {{2, 40}, 1}};

TEST(HostGradientsNNTest, SoftmaxGradMatchesFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(200);
  for (bool log : {false, true}) {
    for (const SoftmaxCase &c : kSoftmaxCases) {
      Buffer x = randomBuffer(DType::f64, c.shape, rng, -3, 3);
      Buffer dy = randomBuffer(DType::f64, c.shape, rng);
      Buffer y(DType::f64, c.shape);
      auto loss = [&]() {
        EXPECT_TRUE(softmax(pool, x.ref(), c.dim, log, y.ref()).isOk());
        return dotValues(y, dy);
      };
      std::vector<double> ref = numericGradient(x, loss);
      ASSERT_TRUE(softmax(pool, x.ref(), c.dim, log, y.ref()).isOk());
      Buffer dx(DType::f64, c.shape);
      ASSERT_TRUE(
          softmaxGrad(pool, y.ref(), dy.ref(), c.dim, log, dx.ref()).isOk());
      EXPECT_GRAD_CLOSE(dx, ref, kF64GradTolerance)
          << " log " << log << " " << describe(x.ref()) << " dim " << c.dim;
    }
  }
}

TEST(HostGradientsNNTest, SoftmaxGradLowPrecisionMatchesF64) {
  ThreadPool pool(2);
  Rng rng(201);
  for (bool log : {false, true}) {
    for (const SoftmaxCase &c : kSoftmaxCases) {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        Buffer x = randomBuffer(dtype, c.shape, rng, -3, 3);
        Buffer dy = randomBuffer(dtype, c.shape, rng);
        Buffer y(dtype, c.shape);
        ASSERT_TRUE(softmax(pool, x.ref(), c.dim, log, y.ref()).isOk());
        Buffer y64 = convert(y, DType::f64), dy64 = convert(dy, DType::f64);
        Buffer dx(dtype, c.shape), dx64(DType::f64, c.shape);
        ASSERT_TRUE(
            softmaxGrad(pool, y.ref(), dy.ref(), c.dim, log, dx.ref()).isOk());
        ASSERT_TRUE(
            softmaxGrad(pool, y64.ref(), dy64.ref(), c.dim, log, dx64.ref())
                .isOk());
        EXPECT_GRAD_CLOSE(dx, dx64.values(), gradTolerance(dtype))
            << " log " << log << " " << describe(x.ref()) << " dim " << c.dim;
      }
    }
  }
}

TEST(HostGradientsNNTest, SoftmaxGradErrors) {
  ThreadPool pool(1);
  Buffer y(DType::f32, {2, 3}), dy(DType::f32, {2, 3}), dx(DType::f32, {2, 3});
  EXPECT_FALSE(softmaxGrad(pool, y.ref(), dy.ref(), 2, false, dx.ref()).isOk());
  Buffer dyT(DType::f32, {3, 2});
  EXPECT_FALSE(
      softmaxGrad(pool, y.ref(), dyT.ref(), 1, false, dx.ref()).isOk());
  Buffer dx16(DType::f16, {2, 3});
  EXPECT_FALSE(
      softmaxGrad(pool, y.ref(), dy.ref(), 1, true, dx16.ref()).isOk());
  // The messages are the kernels' shared check's (kernels::
  // checkSoftmaxGrad), the cuda dispatch's too.
  Status s = softmaxGrad(pool, y.ref(), dyT.ref(), 1, false, dx.ref());
  EXPECT_NE(s.getMessage().find("softmax_grad: output gradient f32[3, 2] "
                                "should have shape [2, 3]"),
            std::string::npos)
      << s.getMessage();
  s = softmaxGrad(pool, y.ref(), dy.ref(), 2, true, dx.ref());
  EXPECT_NE(s.getMessage().find("log_softmax_grad: dimension 2 is out of "
                                "range for f32[2, 3]"),
            std::string::npos)
      << s.getMessage();
}

//===----------------------------------------------------------------------===//
// layer norm / RMS norm
//===----------------------------------------------------------------------===//

struct NormCase {
  Shape shape;
  int64_t axis;
  bool scale, bias;
};

// {260, 3}: three row blocks of the parameter gradients; {2, 300}: two
// column tiles; {3, 4, 5} axis 1: a normalized shape of rank 2.
const NormCase kNormCases[] = {
    {{3, 4, 5}, 1, true, true}, {{5, 7}, 1, false, false},
    {{4, 6}, 1, true, false},   {{4, 6}, 1, false, true},
    {{2, 3, 4}, 2, true, true}, {{7}, 0, true, true},
    {{260, 3}, 1, true, true},  {{2, 300}, 1, true, true}};

Shape normalizedShape(const NormCase &c) {
  return Shape(c.shape.begin() + c.axis, c.shape.end());
}

std::optional<TensorRef> optionalRef(const std::optional<Buffer> &b) {
  if (!b)
    return std::nullopt;
  return b->ref();
}

/// Runs the layer norm (rms = false) or RMS norm backward.
Status runNormGrad(ThreadPool &pool, bool rms, const Buffer &x,
                   const std::optional<Buffer> &scale, int64_t axis, double eps,
                   const Buffer &dy, const Buffer &dx,
                   const std::optional<Buffer> &dscale,
                   const std::optional<Buffer> &dbias) {
  if (rms)
    return rmsNormGrad(pool, x.ref(), optionalRef(scale), axis, eps, dy.ref(),
                       dx.ref(), optionalRef(dscale));
  return layerNormGrad(pool, x.ref(), optionalRef(scale), axis, eps, dy.ref(),
                       dx.ref(), optionalRef(dscale), optionalRef(dbias));
}

TEST(HostGradientsNNTest, NormGradsMatchFiniteDifferences) {
  ThreadPool pool(3);
  Rng rng(202);
  const double eps = 1e-5;
  for (bool rms : {false, true}) {
    for (const NormCase &c : kNormCases) {
      const bool hasBias = c.bias && !rms;
      Shape normalized = normalizedShape(c);
      Buffer x = randomBuffer(DType::f64, c.shape, rng, -2, 2);
      Buffer dy = randomBuffer(DType::f64, c.shape, rng);
      std::optional<Buffer> scale, bias;
      if (c.scale)
        scale = randomBuffer(DType::f64, normalized, rng, 0.5, 1.5);
      if (hasBias)
        bias = randomBuffer(DType::f64, normalized, rng);
      Buffer y(DType::f64, c.shape);
      auto loss = [&]() {
        Status s = rms ? rmsNorm(pool, x.ref(), optionalRef(scale), c.axis, eps,
                                 y.ref())
                       : layerNorm(pool, x.ref(), optionalRef(scale),
                                   optionalRef(bias), c.axis, eps, y.ref());
        EXPECT_TRUE(s.isOk());
        return dotValues(y, dy);
      };
      Buffer dx(DType::f64, c.shape);
      std::optional<Buffer> dscale, dbias;
      // The scale gradient is asked for even without a scale (it is the
      // gradient a scale of ones would get).
      dscale.emplace(DType::f64, normalized);
      if (!rms)
        dbias.emplace(DType::f64, normalized);
      ASSERT_TRUE(
          runNormGrad(pool, rms, x, scale, c.axis, eps, dy, dx, dscale, dbias)
              .isOk());
      std::string what = std::string(rms ? "rms_norm " : "layer_norm ") +
                         describe(x.ref()) + " axis " + std::to_string(c.axis);
      EXPECT_GRAD_CLOSE(dx, numericGradient(x, loss), kF64GradTolerance)
          << " dx of " << what;
      if (scale) {
        EXPECT_GRAD_CLOSE(*dscale, numericGradient(*scale, loss),
                          kF64GradTolerance)
            << " dscale of " << what;
      }
      if (bias) {
        EXPECT_GRAD_CLOSE(*dbias, numericGradient(*bias, loss),
                          kF64GradTolerance)
            << " dbias of " << what;
      }
      if (!scale) {
        // dscale = sum(dy * xhat) with xhat the unscaled output.
        std::vector<double> ref(dscale->size(), 0.0);
        loss(); // Recomputes y = xhat (+ bias) at the unperturbed x.
        for (int64_t i = 0; i < y.size(); ++i) {
          int64_t j = i % dscale->size();
          double xhat = y.get(i) - (bias ? bias->get(j) : 0.0);
          ref[j] += dy.get(i) * xhat;
        }
        EXPECT_GRAD_CLOSE(*dscale, ref, kF64GradTolerance)
            << " dscale (no scale) of " << what;
      }
    }
  }
}

TEST(HostGradientsNNTest, NormGradsLowPrecisionMatchF64) {
  ThreadPool pool(2);
  Rng rng(203);
  for (bool rms : {false, true}) {
    for (const NormCase &c : kNormCases) {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        Shape normalized = normalizedShape(c);
        Buffer x = randomBuffer(dtype, c.shape, rng, -2, 2);
        Buffer dy = randomBuffer(dtype, c.shape, rng);
        std::optional<Buffer> scale, scale64;
        if (c.scale) {
          scale = randomBuffer(dtype, normalized, rng, 0.5, 1.5);
          scale64 = convert(*scale, DType::f64);
        }
        Buffer x64 = convert(x, DType::f64), dy64 = convert(dy, DType::f64);
        Buffer dx(dtype, c.shape), dx64(DType::f64, c.shape);
        std::optional<Buffer> ds(std::in_place, dtype, normalized),
            ds64(std::in_place, DType::f64, normalized), db, db64;
        if (!rms) {
          db.emplace(dtype, normalized);
          db64.emplace(DType::f64, normalized);
        }
        ASSERT_TRUE(
            runNormGrad(pool, rms, x, scale, c.axis, 1e-5, dy, dx, ds, db)
                .isOk());
        ASSERT_TRUE(runNormGrad(pool, rms, x64, scale64, c.axis, 1e-5, dy64,
                                dx64, ds64, db64)
                        .isOk());
        std::string what =
            std::string(rms ? "rms_norm " : "layer_norm ") + describe(x.ref());
        EXPECT_GRAD_CLOSE(dx, dx64.values(), gradTolerance(dtype))
            << " dx of " << what;
        EXPECT_GRAD_CLOSE(*ds, ds64->values(), gradTolerance(dtype))
            << " dscale of " << what;
        if (db) {
          EXPECT_GRAD_CLOSE(*db, db64->values(), gradTolerance(dtype))
              << " dbias of " << what;
        }
      }
    }
  }
}

TEST(HostGradientsNNTest, NormGradErrors) {
  ThreadPool pool(1);
  Buffer x(DType::f32, {4, 6}), dy(DType::f32, {4, 6}), dx(DType::f32, {4, 6});
  Buffer wrongParam(DType::f32, {4}), param(DType::f32, {6});
  EXPECT_FALSE(layerNormGrad(pool, x.ref(), std::nullopt, 1, 1e-5, dy.ref(),
                             dx.ref(), wrongParam.ref(), std::nullopt)
                   .isOk());
  EXPECT_FALSE(layerNormGrad(pool, x.ref(), std::nullopt, 1, 1e-5, dy.ref(),
                             dx.ref(), std::nullopt, wrongParam.ref())
                   .isOk());
  EXPECT_FALSE(layerNormGrad(pool, x.ref(), wrongParam.ref(), 1, 1e-5, dy.ref(),
                             dx.ref(), std::nullopt, std::nullopt)
                   .isOk());
  EXPECT_FALSE(rmsNormGrad(pool, x.ref(), param.ref(), 2, 1e-5, dy.ref(),
                           dx.ref(), std::nullopt)
                   .isOk());
  EXPECT_FALSE(rmsNormGrad(pool, x.ref(), param.ref(), 1, -1.0, dy.ref(),
                           dx.ref(), std::nullopt)
                   .isOk());
  Buffer dyWrong(DType::f32, {6, 4});
  EXPECT_FALSE(rmsNormGrad(pool, x.ref(), param.ref(), 1, 1e-5, dyWrong.ref(),
                           dx.ref(), std::nullopt)
                   .isOk());
  EXPECT_TRUE(rmsNormGrad(pool, x.ref(), param.ref(), 1, 1e-5, dy.ref(),
                          dx.ref(), param.ref())
                  .isOk());
}

TEST(HostGradientsNNTest, SameBitsForAnyThreadCount) {
  Rng rng(204);
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    // 600 rows: 5 row blocks of the parameter gradients and 6 chunks of
    // dx; 300 columns: 2 column tiles.
    Buffer x = randomBuffer(dtype, {600, 300}, rng, -2, 2);
    Buffer dy = randomBuffer(dtype, x.shape, rng);
    Buffer scale = randomBuffer(dtype, {300}, rng, 0.5, 1.5);
    expectSameBitsForAnyThreadCountAll([&](ThreadPool &pool) {
      std::vector<Buffer> outs;
      Buffer dx(dtype, x.shape), ds(dtype, {300}), db(dtype, {300});
      EXPECT_TRUE(layerNormGrad(pool, x.ref(), scale.ref(), 1, 1e-5, dy.ref(),
                                dx.ref(), ds.ref(), db.ref())
                      .isOk());
      outs.push_back(std::move(dx));
      outs.push_back(std::move(ds));
      outs.push_back(std::move(db));
      Buffer rdx(dtype, x.shape), rds(dtype, {300});
      EXPECT_TRUE(rmsNormGrad(pool, x.ref(), scale.ref(), 1, 1e-6, dy.ref(),
                              rdx.ref(), rds.ref())
                      .isOk());
      outs.push_back(std::move(rdx));
      outs.push_back(std::move(rds));
      for (bool log : {false, true}) {
        Buffer sdx(dtype, x.shape);
        EXPECT_TRUE(
            softmaxGrad(pool, x.ref(), dy.ref(), 0, log, sdx.ref()).isOk());
        outs.push_back(std::move(sdx));
      }
      return outs;
    });
  }
}

} // namespace
