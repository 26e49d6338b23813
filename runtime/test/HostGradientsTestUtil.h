//===- HostGradientsTestUtil.h - helpers of the gradient tests --*- C++ -*-===//
//
// The gradient tests check each backward kernel twice:
// - in f64 against a float64 reference: central finite differences of the
//   forward kernel (also run in f64) or a naive formula, within
//   kF64GradTolerance;
// - in f32, f16 and bf16 against the f64 kernel run on the very same
//   (already rounded) inputs, with DESIGN.md's gradient measure
//   ||a - b||_2 / ||ref||_2 within gradTolerance(dtype).
// And bitwise identical results for pools of 1, 2 and 3 threads.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_TEST_HOSTGRADIENTSTESTUTIL_H
#define RP_RUNTIME_TEST_HOSTGRADIENTSTESTUTIL_H

#include "HostKernelsTestUtil.h"

#include "rp/runtime/host/Gradients.h"

#include <functional>

namespace rp::runtime::testing {

/// f64 kernel against finite differences of the f64 forward: the central
/// difference's own error (h^2 truncation, eps / h rounding) is far below.
constexpr double kF64GradTolerance = 1e-6;

/// ||a - b||_2 / ||ref||_2 bounds of a kernel against the f64 kernel.
/// 16-bit storage rounds the output once (relative 2^-11 for f16, 2^-8
/// for bf16 at worst, about a third of that in the 2-norm) after f32
/// arithmetic; the bounds leave room for f32 rounding in long sums.
inline double gradTolerance(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return 1e-5;
  case DType::f16:
    return 1e-3;
  case DType::bf16:
    return 8e-3;
  default:
    return kF64GradTolerance;
  }
}

/// ||got - ref||_2 / ||ref||_2 (||got - ref||_2 when ref is all zeros).
/// A NaN anywhere gives NaN, which fails every bound.
inline double l2Error(const Buffer &got, const std::vector<double> &ref) {
  EXPECT_EQ(got.size(), static_cast<int64_t>(ref.size()));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = got.get(static_cast<int64_t>(i)) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  diff = std::sqrt(diff);
  return norm > 0 ? diff / std::sqrt(norm) : diff;
}

/// The same values stored as `dtype` (exact when widening).
inline Buffer convert(const Buffer &b, DType dtype) {
  Buffer out(dtype, b.shape);
  for (int64_t i = 0; i < b.size(); ++i)
    out.set(i, b.get(i));
  return out;
}

/// sum(a * b) in double.
inline double dotValues(const Buffer &a, const Buffer &b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i)
    sum += a.get(i) * b.get(i);
  return sum;
}

/// The central-difference gradient of `loss` with respect to the f64
/// buffer `x`, one element at a time (x is restored).
inline std::vector<double> numericGradient(Buffer &x,
                                           const std::function<double()> &loss,
                                           double h = 1e-5) {
  EXPECT_EQ(x.dtype, DType::f64);
  std::vector<double> grad(x.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    double v = x.get(i);
    x.set(i, v + h);
    double plus = loss();
    x.set(i, v - h);
    double minus = loss();
    x.set(i, v);
    grad[i] = (plus - minus) / (2 * h);
  }
  return grad;
}

#define EXPECT_GRAD_CLOSE(got, ref, tol)                                       \
  EXPECT_LE(::rp::runtime::testing::l2Error((got), (ref)), (tol))              \
      << "dtype " << dtypeName((got).dtype)

/// Runs `run(pool)` with pools of 1, 2 and 3 threads and expects every
/// buffer of the vector it returns to be bitwise identical.
template <typename Fn> void expectSameBitsForAnyThreadCountAll(Fn &&run) {
  std::vector<Buffer> first;
  for (unsigned threads : {1u, 2u, 3u}) {
    ThreadPool pool(threads);
    std::vector<Buffer> outs = run(pool);
    if (threads == 1) {
      first = std::move(outs);
      continue;
    }
    ASSERT_EQ(outs.size(), first.size());
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_TRUE(first[i].sameBits(outs[i]))
          << "output " << i << " differs with " << threads << " threads";
  }
}

} // namespace rp::runtime::testing

#endif // RP_RUNTIME_TEST_HOSTGRADIENTSTESTUTIL_H
