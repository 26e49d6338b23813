//===- OptimizerNormTest.cpp - global gradient norm, clipping, arguments --===//
//
// The global gradient norm (bitwise for every pool size), clipping as
// torch's clip_grad_norm_, and the optimizers' argument checks.
//
//===----------------------------------------------------------------------===//

#include "OptimizerTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace rp::runtime;
using namespace rp::runtime::optimizer_test;

namespace {

//===----------------------------------------------------------------------===//
// Global gradient norm and clipping
//===----------------------------------------------------------------------===//

TEST(OptimizerTest, GlobalGradNormMatchesDoubleReference) {
  std::vector<Param> params = makeParams(21);
  setGrads(params, 4);
  // Magnitudes spread wider than the gradients above.
  params[2].g = pseudoRandom(params[2].w.size(), 77, 1e3f);
  long double sum = 0;
  for (const Param &p : params)
    for (float g : p.g)
      sum += static_cast<long double>(g) * g;
  const double expected = static_cast<double>(std::sqrt(sum));
  std::vector<double> norms;
  for (unsigned threads : kPoolSizes) {
    ThreadPool pool(threads);
    norms.push_back(globalGradNorm(pool, slotsOf(params)));
  }
  EXPECT_NEAR(norms[0], expected, 1e-13 * expected);
  for (double n : norms) // bitwise for every pool size
    EXPECT_EQ(std::memcmp(&n, &norms[0], sizeof n), 0) << n << " " << norms[0];
}

TEST(OptimizerTest, GlobalGradNormEdgeCases) {
  ThreadPool pool(2);
  EXPECT_EQ(globalGradNorm(pool, {}), 0.0);
  std::vector<float> g = {3.0f, 4.0f}, h = {12.0f};
  // A parameter without a gradient and an empty one contribute nothing.
  std::vector<ParamSlot> slots = {{nullptr, g.data(), nullptr, nullptr, 2},
                                  {nullptr, nullptr, nullptr, nullptr, 5},
                                  {nullptr, nullptr, nullptr, nullptr, 0},
                                  {nullptr, h.data(), nullptr, nullptr, 1}};
  EXPECT_EQ(globalGradNorm(pool, slots), 13.0);
  std::vector<float> inf = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(
      globalGradNorm(pool, {{nullptr, inf.data(), nullptr, nullptr, 2}})));
}

TEST(OptimizerTest, ClipScaleIsTorchClipGradNorm) {
  EXPECT_EQ(clipScale(0.5, 1.0), 1.0);
  EXPECT_EQ(clipScale(0.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clipScale(1.0, 1.0), 1.0 / (1.0 + 1e-6));
  EXPECT_EQ(clipScale(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_EQ(clipScale(10.0, 2.5), 2.5 / (10.0 + 1e-6));
  EXPECT_EQ(clipScale(std::numeric_limits<double>::infinity(), 1.0), 0.0);
  EXPECT_TRUE(std::isnan(clipScale(std::nan(""), 1.0)));
}

TEST(OptimizerTest, ClippingEndToEnd) {
  // norm -> clipScale -> gradScale, as the optimizer thread uses them.
  ThreadPool pool(2);
  std::vector<Param> params = makeParams(31), ref = makeParams(31);
  setGrads(params, 1);
  setGrads(ref, 1);
  const double norm = globalGradNorm(pool, slotsOf(params));
  const double scale = clipScale(norm, 0.25 * norm);
  ASSERT_LT(scale, 0.26);
  ASSERT_TRUE(adamwStep(pool, testAdamW(), 1, slotsOf(params), scale).isOk());
  for (Param &r : ref)
    referenceAdamW(testAdamW(), 1, r.w.data(), r.g.data(), r.s0.data(),
                   r.s1.data(), r.w.size(), scale);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_BITWISE_EQ(params[i].w, ref[i].w);
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

TEST(OptimizerTest, RejectsBadArguments) {
  ThreadPool pool(1);
  std::vector<float> w(8, 1.f), g(8, 1.f), m(8, 0.f), v(8, 0.f);
  const std::vector<ParamSlot> good = {
      {w.data(), g.data(), m.data(), v.data(), 8}};
  auto adamwCode = [&](const AdamWConfig &c, int64_t step,
                       const std::vector<ParamSlot> &p) {
    return adamwStep(pool, c, step, p).getCode();
  };
  auto sgdCode = [&](const SGDConfig &c, int64_t step,
                     const std::vector<ParamSlot> &p) {
    return sgdStep(pool, c, step, p).getCode();
  };
  const StatusCode bad = StatusCode::InvalidArgument;

  EXPECT_EQ(adamwCode(AdamWConfig(), 0, good), bad);
  AdamWConfig c;
  c.lr = -1;
  EXPECT_EQ(adamwCode(c, 1, good), bad);
  c = AdamWConfig();
  c.beta2 = 1.0;
  EXPECT_EQ(adamwCode(c, 1, good), bad);
  c = AdamWConfig();
  c.eps = std::nan("");
  EXPECT_EQ(adamwCode(c, 1, good), bad);
  c = AdamWConfig();
  c.weightDecay = -0.1;
  EXPECT_EQ(adamwCode(c, 1, good), bad);

  // Missing state, missing weights, negative sizes.
  EXPECT_EQ(
      adamwCode(AdamWConfig(), 1, {{w.data(), g.data(), m.data(), nullptr, 8}}),
      bad);
  EXPECT_EQ(
      adamwCode(AdamWConfig(), 1, {{nullptr, g.data(), m.data(), v.data(), 8}}),
      bad);
  EXPECT_EQ(adamwCode(AdamWConfig(), 1,
                      {{w.data(), g.data(), m.data(), v.data(), -1}}),
            bad);
  // Written arrays that overlap each other or a gradient.
  EXPECT_EQ(adamwCode(AdamWConfig(), 1,
                      {{w.data(), g.data(), w.data() + 2, v.data(), 4}}),
            bad);
  EXPECT_EQ(adamwCode(AdamWConfig(), 1,
                      {{w.data(), w.data(), m.data(), v.data(), 8}}),
            bad);
  EXPECT_EQ(
      adamwCode(AdamWConfig(), 1,
                {{w.data(), g.data(), m.data(), v.data(), 4},
                 {w.data() + 2, g.data() + 4, m.data() + 4, v.data() + 4, 4}}),
      bad);
  // Nothing was written by the rejected calls.
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(w[i], 1.f);
    EXPECT_EQ(m[i], 0.f);
    EXPECT_EQ(v[i], 0.f);
  }

  // Two parameters may share (read-only) gradient memory.
  EXPECT_EQ(
      adamwCode(AdamWConfig(), 1,
                {{w.data(), g.data(), m.data(), v.data(), 4},
                 {w.data() + 4, g.data(), m.data() + 4, v.data() + 4, 4}}),
      StatusCode::Ok);
  // A size-0 parameter needs no arrays.
  EXPECT_EQ(
      adamwCode(AdamWConfig(), 1, {{nullptr, nullptr, nullptr, nullptr, 0}}),
      StatusCode::Ok);

  SGDConfig s;
  s.nesterov = true; // without momentum
  EXPECT_EQ(sgdCode(s, 1, good), bad);
  s.momentum = 0.9;
  s.dampening = 0.1; // nesterov needs zero dampening
  EXPECT_EQ(sgdCode(s, 1, good), bad);
  s = SGDConfig();
  s.momentum = 0.9; // momentum needs its buffer
  EXPECT_EQ(sgdCode(s, 1, {{w.data(), g.data(), nullptr, nullptr, 8}}), bad);
  s.momentum = -0.5;
  EXPECT_EQ(sgdCode(s, 1, good), bad);
  EXPECT_EQ(sgdCode(SGDConfig(), 0, good), bad);
  EXPECT_EQ(
      sgdCode(SGDConfig(), 1, {{w.data(), g.data(), nullptr, nullptr, 8}}),
      StatusCode::Ok);
}

} // namespace
