//===- OptimizerTest.cpp - AdamW and SGD against torch --------------------===//
//
// The optimizers are checked three ways:
//  * against bits that torch 1.13 (torch.optim.AdamW / SGD, CPU, single-tensor
//    and foreach paths alike) produced for a small parameter (golden values);
//  * against a scalar reference written here that mirrors torch's CPU kernels
//    operation for operation in float, bitwise, over several steps and
//    parameters of odd sizes (1, 7, 1000003: one element, a vector tail only,
//    and many chunks with a ragged last one);
//  * against the textbook formulas in double, loosely, so that the reference
//    and the optimizer cannot share a wrong formula.
// Results must be bitwise identical for every pool size (1, 2, 3).
//
// bench/adamw_vs_torch.py compares with torch on 24M parameters. The
// gradient norm and clipping are in OptimizerNormTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "OptimizerTestUtil.h"

#include <gtest/gtest.h>

using namespace rp::runtime;
using namespace rp::runtime::optimizer_test;

namespace {

//===----------------------------------------------------------------------===//
// Golden values from torch 1.13
//===----------------------------------------------------------------------===//

// 19 elements: torch's AVX2 kernels take 16 in the vector loop and 3 in the
// scalar tail, so both paths are covered. Inputs are exact dyadic numbers,
// the same in Python and here:
//   w[i] = (i - 9) / 8;  g_k[i] = ((7 i + 3 k) mod 19 - 9) / 16,  k = 0, 1, 2
// and the bits below are torch's after three steps, from
//   p = torch.tensor(w, requires_grad=True); opt = torch.optim.X([p], ...)
//   for k in range(3): p.grad = torch.tensor(g_k); opt.step()
//   [hex(b) for b in p.detach().numpy().view(np.uint32)]   (and the state)
// with foreach=False, checked equal to foreach=True.
constexpr size_t kGoldenN = 19;

std::vector<float> goldenWeights() {
  std::vector<float> w(kGoldenN);
  for (size_t i = 0; i < kGoldenN; ++i)
    w[i] = (static_cast<float>(i) - 9.0f) / 8.0f;
  return w;
}

std::vector<float> goldenGrad(int k) {
  std::vector<float> g(kGoldenN);
  for (size_t i = 0; i < kGoldenN; ++i)
    g[i] =
        static_cast<float>(static_cast<int>((i * 7 + k * 3) % 19) - 9) / 16.0f;
  return g;
}

std::vector<float> fromBits(const std::vector<uint32_t> &bits) {
  std::vector<float> out;
  for (uint32_t b : bits)
    out.push_back(floatOf(b));
  return out;
}

// torch.optim.AdamW(lr=1e-2, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
const std::vector<uint32_t> kTorchAdamW[3] = {
    {0xbf8bf1e1, 0xbf7d829b, 0xbf64a8a1, 0xbf387b93, 0xbf23bc0c, 0xbf00576a,
     0xbeb33881, 0xbe8e87b6, 0xbe07a3f4, 0x3c6e2226, 0x3dd79668, 0x3e8ddf1a,
     0x3ebe84b9, 0x3ef3e237, 0x3f2627e7, 0x3f382d0d, 0x3f5dfc99, 0x3f8233df,
     0x3f8bc9d1},
    {0xbe2d9169, 0x3d343958, 0x3ca3d70c, 0xbdde3541, 0x3dd70a3e, 0xbddf3b65,
     0xbd428f5d, 0x3e29fbe8, 0xbd449ba6, 0x3c5d2f19, 0xbc2c0835, 0xbe0e5605,
     0x3d989375, 0x3d4ed915, 0xbd9fbe77, 0x3e0ac083, 0xbda0c49b, 0xbc8b4397,
     0x3e49374c},
    {0x3cba1581, 0x3b839581, 0x3cebc7ae, 0x3c415a1d, 0x3c0e8f5c, 0x3cfb79db,
     0x3baf1eb8, 0x3c922d0e, 0x3cd90b44, 0x3b5b2b02, 0x3ce32f1b, 0x3c88d0e5,
     0x3bbe1894, 0x3cfd8106, 0x3c0353f8, 0x3c5053f8, 0x3ce5b22c, 0x3b783127,
     0x3cc550e5},
};

// torch.optim.SGD(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)
const std::vector<uint32_t> kTorchSGDDampening[2] = {
    {0xbf80af2a, 0xbf7f3bd6, 0xbf6f6b41, 0xbf2a21e2, 0xbf27ff62, 0xbefc64dc,
     0xbea5cadf, 0xbea185e0, 0xbe1bd7ee, 0x3c8ae06e, 0x3da13cbb, 0x3eb2e1ee,
     0x3eb726ec, 0x3ed6c815, 0x3f30ad6a, 0x3f32cfe9, 0x3f5c9cdd, 0x3f83f4ee,
     0x3f85062d},
    {0xbf74a1ec, 0x3e18e857, 0x3e3df1f8, 0xbf21a0cf, 0x3ef27662, 0xbee740a3,
     0xbe9d3f6a, 0x3f4c3c4d, 0xbe027cd8, 0x3c8c2cd3, 0x3d5a3cf0, 0xbf437980,
     0x3eaec504, 0x3ec149d4, 0xbee0f0c8, 0x3f2a639e, 0xbe84efca, 0xbdebba46,
     0x3f7d64ba},
};

// torch.optim.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)
const std::vector<uint32_t> kTorchSGDNesterov[2] = {
    {0xbf748f11, 0xbf80dc8b, 0xbf7201d5, 0xbf21cfea, 0xbf2ef9ef, 0xbeec3117,
     0xbe9e2184, 0xbeb8758e, 0xbe0d658d, 0x3c6b9989, 0x3d9b2d46, 0x3ec72f26,
     0x3eacdb1d, 0x3ecc49a2, 0x3f3656bc, 0x3f292cb7, 0x3f620e1a, 0x3f848af2,
     0x3f7bebdf},
    {0xbf813694, 0x3e366c86, 0x3e368dac, 0xbf29357a, 0x3f06d2ce, 0xbf0a7493,
     0xbe9ffb9d, 0x3f600a7a, 0xbe44f39d, 0x3d139ddc, 0x3d142270, 0xbf4d96bf,
     0x3ec4e314, 0x3ec4f3a6, 0xbee8be26, 0x3f3ba936, 0xbeab3c55, 0xbdd93b30,
     0x3f8a7071},
};

TEST(OptimizerTest, AdamWMatchesTorchBits) {
  ThreadPool pool(2);
  std::vector<float> w = goldenWeights(), m(kGoldenN, 0.f), v(kGoldenN, 0.f);
  for (int k = 0; k < 3; ++k) {
    std::vector<float> g = goldenGrad(k);
    ASSERT_TRUE(adamwStep(pool, testAdamW(), k + 1,
                          {{w.data(), g.data(), m.data(), v.data(),
                            static_cast<int64_t>(kGoldenN)}})
                    .isOk());
  }
  EXPECT_BITWISE_EQ(w, fromBits(kTorchAdamW[0]));
  EXPECT_BITWISE_EQ(m, fromBits(kTorchAdamW[1]));
  EXPECT_BITWISE_EQ(v, fromBits(kTorchAdamW[2]));
}

TEST(OptimizerTest, SGDMatchesTorchBits) {
  ThreadPool pool(2);
  struct Case {
    SGDConfig config;
    const std::vector<uint32_t> *expected;
  };
  SGDConfig dampening;
  dampening.lr = 0.05;
  dampening.momentum = 0.9;
  dampening.dampening = 0.1;
  dampening.weightDecay = 0.01;
  SGDConfig nesterov;
  nesterov.lr = 0.05;
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  nesterov.weightDecay = 0.01;
  for (const Case &c : {Case{dampening, kTorchSGDDampening},
                        Case{nesterov, kTorchSGDNesterov}}) {
    std::vector<float> w = goldenWeights(), buf(kGoldenN, 0.f);
    for (int k = 0; k < 3; ++k) {
      std::vector<float> g = goldenGrad(k);
      ASSERT_TRUE(sgdStep(pool, c.config, k + 1,
                          {{w.data(), g.data(), buf.data(), nullptr,
                            static_cast<int64_t>(kGoldenN)}})
                      .isOk());
    }
    EXPECT_BITWISE_EQ(w, fromBits(c.expected[0]));
    EXPECT_BITWISE_EQ(buf, fromBits(c.expected[1]));
  }
}

//===----------------------------------------------------------------------===//
// Scalar references, many steps, odd sizes
//===----------------------------------------------------------------------===//

TEST(OptimizerTest, AdamWMatchesReference) {
  ThreadPool pool(2);
  const AdamWConfig config = testAdamW();
  std::vector<Param> params = makeParams(1), ref = makeParams(1);
  for (int64_t step = 1; step <= 5; ++step) {
    setGrads(params, step);
    setGrads(ref, step);
    ASSERT_TRUE(adamwStep(pool, config, step, slotsOf(params)).isOk());
    for (Param &r : ref)
      referenceAdamW(config, step, r.w.data(), r.g.data(), r.s0.data(),
                     r.s1.data(), r.w.size());
    for (size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + ", size " +
                   std::to_string(params[i].w.size()));
      EXPECT_BITWISE_EQ(params[i].w, ref[i].w);
      EXPECT_BITWISE_EQ(params[i].s0, ref[i].s0);
      EXPECT_BITWISE_EQ(params[i].s1, ref[i].s1);
    }
  }
}

// The textbook AdamW in double: catches a formula that both the reference
// and the optimizer might get wrong the same way.
TEST(OptimizerTest, AdamWFollowsTextbookFormula) {
  ThreadPool pool(1);
  const AdamWConfig c = testAdamW();
  const size_t n = 4099;
  std::vector<float> w = pseudoRandom(n, 7, 1.0f), m(n, 0.f), v(n, 0.f);
  std::vector<double> dw(w.begin(), w.end()), dm(n, 0.0), dv(n, 0.0);
  for (int64_t t = 1; t <= 6; ++t) {
    std::vector<float> g = pseudoRandom(n, 100 + t, 0.1f);
    ASSERT_TRUE(adamwStep(pool, c, t,
                          {{w.data(), g.data(), m.data(), v.data(),
                            static_cast<int64_t>(n)}})
                    .isOk());
    for (size_t i = 0; i < n; ++i) {
      dw[i] -= c.lr * c.weightDecay * dw[i];
      dm[i] = c.beta1 * dm[i] + (1 - c.beta1) * g[i];
      dv[i] = c.beta2 * dv[i] + (1 - c.beta2) * double(g[i]) * g[i];
      double mHat = dm[i] / (1 - std::pow(c.beta1, double(t)));
      double vHat = dv[i] / (1 - std::pow(c.beta2, double(t)));
      dw[i] -= c.lr * mHat / (std::sqrt(vHat) + c.eps);
    }
  }
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(w[i], dw[i], 1e-5 * (1 + std::fabs(dw[i]))) << "at " << i;
}

struct SGDCase {
  const char *name;
  double momentum, dampening, weightDecay;
  bool nesterov;
};

const SGDCase kSGDCases[] = {
    {"plain", 0, 0, 0, false},
    {"weight-decay", 0, 0, 0.05, false},
    {"momentum", 0.9, 0, 0, false},
    {"momentum-dampening-wd", 0.9, 0.3, 0.01, false},
    {"nesterov", 0.8, 0, 0, true},
    {"nesterov-wd", 0.9, 0, 0.02, true},
};

SGDConfig configOf(const SGDCase &c) {
  SGDConfig config;
  config.lr = 0.03;
  config.momentum = c.momentum;
  config.dampening = c.dampening;
  config.weightDecay = c.weightDecay;
  config.nesterov = c.nesterov;
  return config;
}

TEST(OptimizerTest, SGDMatchesReference) {
  ThreadPool pool(2);
  for (const SGDCase &c : kSGDCases) {
    const SGDConfig config = configOf(c);
    std::vector<Param> params = makeParams(3), ref = makeParams(3);
    std::vector<ParamSlot> slots = slotsOf(params);
    if (c.momentum == 0)
      for (ParamSlot &s : slots) // the buffer may be absent without momentum
        s.state0 = s.state1 = nullptr;
    for (int64_t step = 1; step <= 4; ++step) {
      setGrads(params, step);
      setGrads(ref, step);
      for (size_t i = 0; i < slots.size(); ++i)
        slots[i].grad = params[i].g.data();
      ASSERT_TRUE(sgdStep(pool, config, step, slots).isOk()) << c.name;
      for (Param &r : ref)
        referenceSGD(config, step, r.w.data(), r.g.data(), r.s0.data(),
                     r.w.size());
      for (size_t i = 0; i < params.size(); ++i) {
        SCOPED_TRACE(std::string(c.name) + ", step " + std::to_string(step) +
                     ", size " + std::to_string(params[i].w.size()));
        EXPECT_BITWISE_EQ(params[i].w, ref[i].w);
        if (c.momentum != 0)
          EXPECT_BITWISE_EQ(params[i].s0, ref[i].s0);
      }
    }
  }
}

TEST(OptimizerTest, SGDFollowsTextbookFormula) {
  ThreadPool pool(1);
  SGDConfig c;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.dampening = 0.5;
  c.weightDecay = 0.01;
  const size_t n = 1001;
  std::vector<float> w = pseudoRandom(n, 9, 1.0f), buf(n, 0.f);
  std::vector<double> dw(w.begin(), w.end()), dbuf(n, 0.0);
  for (int64_t t = 1; t <= 5; ++t) {
    std::vector<float> g = pseudoRandom(n, 200 + t, 0.1f);
    ASSERT_TRUE(sgdStep(pool, c, t,
                        {{w.data(), g.data(), buf.data(), nullptr,
                          static_cast<int64_t>(n)}})
                    .isOk());
    for (size_t i = 0; i < n; ++i) {
      double d = g[i] + c.weightDecay * dw[i];
      dbuf[i] = t == 1 ? d : c.momentum * dbuf[i] + (1 - c.dampening) * d;
      dw[i] -= c.lr * dbuf[i];
    }
  }
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(w[i], dw[i], 1e-5 * (1 + std::fabs(dw[i]))) << "at " << i;
}

//===----------------------------------------------------------------------===//
// Determinism across pool sizes
//===----------------------------------------------------------------------===//

TEST(OptimizerTest, AdamWBitwiseAcrossPoolSizes) {
  std::vector<std::vector<Param>> results;
  for (unsigned threads : kPoolSizes) {
    ThreadPool pool(threads);
    std::vector<Param> params = makeParams(5);
    for (int64_t step = 1; step <= 3; ++step) {
      setGrads(params, step);
      ASSERT_TRUE(
          adamwStep(pool, AdamWConfig(), step, slotsOf(params), 0.75).isOk());
    }
    results.push_back(std::move(params));
  }
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t i = 0; i < results[r].size(); ++i) {
      SCOPED_TRACE("pool " + std::to_string(kPoolSizes[r]) + ", param " +
                   std::to_string(i));
      EXPECT_BITWISE_EQ(results[r][i].w, results[0][i].w);
      EXPECT_BITWISE_EQ(results[r][i].s0, results[0][i].s0);
      EXPECT_BITWISE_EQ(results[r][i].s1, results[0][i].s1);
    }
}

TEST(OptimizerTest, SGDBitwiseAcrossPoolSizes) {
  const SGDConfig config = configOf(kSGDCases[5]);
  std::vector<std::vector<Param>> results;
  for (unsigned threads : kPoolSizes) {
    ThreadPool pool(threads);
    std::vector<Param> params = makeParams(6);
    for (int64_t step = 1; step <= 3; ++step) {
      setGrads(params, step);
      ASSERT_TRUE(sgdStep(pool, config, step, slotsOf(params), 0.5).isOk());
    }
    results.push_back(std::move(params));
  }
  for (size_t r = 1; r < results.size(); ++r)
    for (size_t i = 0; i < results[r].size(); ++i) {
      EXPECT_BITWISE_EQ(results[r][i].w, results[0][i].w);
      EXPECT_BITWISE_EQ(results[r][i].s0, results[0][i].s0);
    }
}

//===----------------------------------------------------------------------===//
// gradScale
//===----------------------------------------------------------------------===//

TEST(OptimizerTest, GradScaleMultipliesGradientsFirst) {
  ThreadPool pool(3);
  const double scale = 0.3712345678901;
  const AdamWConfig adamw = testAdamW();
  const SGDConfig sgd = configOf(kSGDCases[3]);
  for (bool useAdamW : {true, false}) {
    SCOPED_TRACE(useAdamW ? "adamw" : "sgd");
    std::vector<Param> scaled = makeParams(11), prescaled = makeParams(11),
                       ref = makeParams(11);
    for (int64_t step = 1; step <= 3; ++step) {
      setGrads(scaled, step);
      setGrads(prescaled, step);
      setGrads(ref, step);
      // What clip_grad_norm_ does in torch: g.mul_(coef) with coef in f32.
      for (Param &p : prescaled)
        for (float &g : p.g)
          g *= static_cast<float>(scale);
      if (useAdamW) {
        ASSERT_TRUE(
            adamwStep(pool, adamw, step, slotsOf(scaled), scale).isOk());
        ASSERT_TRUE(adamwStep(pool, adamw, step, slotsOf(prescaled)).isOk());
        for (Param &r : ref)
          referenceAdamW(adamw, step, r.w.data(), r.g.data(), r.s0.data(),
                         r.s1.data(), r.w.size(), scale);
      } else {
        ASSERT_TRUE(sgdStep(pool, sgd, step, slotsOf(scaled), scale).isOk());
        ASSERT_TRUE(sgdStep(pool, sgd, step, slotsOf(prescaled)).isOk());
        for (Param &r : ref)
          referenceSGD(sgd, step, r.w.data(), r.g.data(), r.s0.data(),
                       r.w.size(), scale);
      }
    }
    for (size_t i = 0; i < scaled.size(); ++i) {
      EXPECT_BITWISE_EQ(scaled[i].w, prescaled[i].w);
      EXPECT_BITWISE_EQ(scaled[i].w, ref[i].w);
      EXPECT_BITWISE_EQ(scaled[i].s0, ref[i].s0);
      if (useAdamW)
        EXPECT_BITWISE_EQ(scaled[i].s1, ref[i].s1);
    }
    // The gradients themselves are left alone.
    std::vector<Param> fresh = makeParams(11);
    setGrads(fresh, 3);
    EXPECT_BITWISE_EQ(scaled.back().g, fresh.back().g);
  }
}

} // namespace
