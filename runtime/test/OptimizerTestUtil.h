//===- OptimizerTestUtil.h - what the optimizer tests share ---*- C++ -*-===//
//
// Parameters, pseudo-random gradients, the scalar torch references and the
// bitwise comparison used by OptimizerTest.cpp and OptimizerNormTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_OPTIMIZERTESTUTIL_H
#define RP_RUNTIME_TEST_OPTIMIZERTESTUTIL_H

#include "rp/runtime/Optimizer.h"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <memory>
#include <vector>

namespace rp::runtime::optimizer_test {

const unsigned kPoolSizes[] = {1, 2, 3};

inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Values over several magnitudes from a fixed LCG (the same on every
/// standard library), `scale` times a number in [-1, 1).
inline std::vector<float> pseudoRandom(size_t n, uint64_t seed, float scale) {
  std::vector<float> data(n);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (float &value : data) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    float unit = static_cast<float>(state >> 40) / float(1 << 23) - 1.0f;
    int exponent = -static_cast<int>((state >> 20) % 6);
    value = scale * std::ldexp(unit, exponent);
  }
  return data;
}

/// One parameter with its gradient and both state arrays.
struct Param {
  std::vector<float> w, g, s0, s1;

  Param(size_t n, uint64_t seed)
      : w(pseudoRandom(n, seed, 1.0f)), g(n), s0(n, 0.0f), s1(n, 0.0f) {}

  ParamSlot slot() {
    return {w.data(), g.data(), s0.data(), s1.data(),
            static_cast<int64_t>(w.size())};
  }
};

inline std::vector<ParamSlot> slotsOf(std::vector<Param> &params) {
  std::vector<ParamSlot> slots;
  for (Param &p : params)
    slots.push_back(p.slot());
  return slots;
}

const size_t kOddSizes[] = {1, 7, 1000003};

inline std::vector<Param> makeParams(uint64_t seed) {
  std::vector<Param> params;
  for (size_t i = 0; i < std::size(kOddSizes); ++i)
    params.emplace_back(kOddSizes[i], seed + i);
  return params;
}

/// The gradients of step `step` (different every step and parameter; a few
/// exact zeros, which AdamW must survive).
inline void setGrads(std::vector<Param> &params, int64_t step) {
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].g = pseudoRandom(params[i].w.size(), 1000 * step + i, 0.1f);
    if (params[i].g.size() > 5)
      params[i].g[5] = 0.0f;
  }
}

//===----------------------------------------------------------------------===//
// Scalar references: torch 1.13's CPU kernels in float. torch's AVX2
// kernels compute add_(x, alpha=a) as fma(x, a, self) and addcmul_(x, y,
// value=a) as fma(a * x, y, self); every scalar is a double rounded to float.
// The only multiply-adds here are the explicit fmas, so no compiler
// contraction can change these references.
//===----------------------------------------------------------------------===//

inline void referenceAdamW(const AdamWConfig &c, int64_t step, float *w,
                           const float *g, float *m, float *v, size_t n,
                           double gradScale = 1.0) {
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(c.beta1, t);
  const double bc2 = 1.0 - std::pow(c.beta2, t);
  const float scale = static_cast<float>(gradScale);
  const float decay = static_cast<float>(1.0 - c.lr * c.weightDecay);
  const float b1 = static_cast<float>(c.beta1);
  const float omb1 = static_cast<float>(1.0 - c.beta1);
  const float b2 = static_cast<float>(c.beta2);
  const float omb2 = static_cast<float>(1.0 - c.beta2);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(c.eps);
  const float negStepSize = static_cast<float>(-(c.lr / bc1));
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * scale;       // clip_grad_norm_: g.mul_(coef)
    float wi = w[i] * decay;       // p.mul_(1 - lr * wd)
    float mb = m[i] * b1;          // exp_avg.mul_(beta1)
    m[i] = std::fma(gi, omb1, mb); //   .add_(g, alpha=1 - beta1)
    float vb = v[i] * b2;          // exp_avg_sq.mul_(beta2)
    float sg = omb2 * gi;          //   .addcmul_(g, g, value=1 - beta2)
    v[i] = std::fma(sg, gi, vb);
    float root = std::sqrt(v[i]);   // exp_avg_sq.sqrt()
    float denom = root / bc2Sqrt;   //   / bias_correction2_sqrt
    denom = denom + eps;            //   .add_(eps)
    float num = negStepSize * m[i]; // p.addcdiv_(m, denom, -step_size)
    w[i] = wi + num / denom;
  }
}

inline void referenceSGD(const SGDConfig &c, int64_t step, float *w,
                         const float *g, float *buf, size_t n,
                         double gradScale = 1.0) {
  const float scale = static_cast<float>(gradScale);
  const float wd = static_cast<float>(c.weightDecay);
  const float mu = static_cast<float>(c.momentum);
  const float omd = static_cast<float>(1.0 - c.dampening);
  const float negLr = static_cast<float>(-c.lr);
  for (size_t i = 0; i < n; ++i) {
    float d = g[i] * scale;
    if (c.weightDecay != 0)
      d = std::fma(w[i], wd, d); // d_p.add(p, alpha=wd)
    if (c.momentum != 0) {
      if (step == 1) {
        buf[i] = d; // clone(d_p)
      } else {
        float bm = buf[i] * mu;        // buf.mul_(momentum)
        buf[i] = std::fma(d, omd, bm); //   .add_(d_p, alpha=1 - dampening)
      }
      d = c.nesterov ? std::fma(buf[i], mu, d) : buf[i];
    }
    w[i] = std::fma(d, negLr, w[i]); // p.add_(d_p, alpha=-lr)
  }
}

/// The first index where two arrays differ in bits, or -1.
inline int64_t firstBitDifference(const std::vector<float> &a,
                                  const std::vector<float> &b) {
  if (a.size() != b.size())
    return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (bitsOf(a[i]) != bitsOf(b[i]))
      return static_cast<int64_t>(i);
  return -1;
}

#define EXPECT_BITWISE_EQ(a, b)                                                \
  do {                                                                         \
    int64_t at = firstBitDifference(a, b);                                     \
    EXPECT_EQ(at, -1) << "first difference at " << at << ": "                  \
                      << (at >= 0 && size_t(at) < (a).size() ? (a)[at] : 0.f)  \
                      << " vs "                                                \
                      << (at >= 0 && size_t(at) < (b).size() ? (b)[at] : 0.f); \
  } while (0)

inline AdamWConfig testAdamW() {
  AdamWConfig c;
  c.lr = 1e-2;
  c.beta1 = 0.8;
  c.beta2 = 0.95;
  c.eps = 1e-6;
  c.weightDecay = 0.1;
  return c;
}

} // namespace rp::runtime::optimizer_test

#endif // RP_RUNTIME_TEST_OPTIMIZERTESTUTIL_H
