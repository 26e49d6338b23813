//===- Numeric.h - storage, compute types and math of kernels ---*- C++ -*-===//
//
// Every kernel is a template on the storage type of its elements. Values are
// loaded into the compute type `Compute<T>` (float for f32, f16 and bf16;
// double for f64; the integer itself for integers; bool for i1), computed
// there, and rounded once when stored. The math wrappers pick the float or
// double libm function explicitly, so the same code resolves to the same
// function in host and device builds.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_NUMERIC_H
#define RP_RUNTIME_KERNELS_NUMERIC_H

#include "rp/runtime/Half.h"
#include "rp/runtime/kernels/Annotations.h"

// <math.h>, not <cmath>: the wrappers call the C names (::expf, ::exp),
// which CUDA also declares for device code.
#include <math.h>

#include <cstdint>
#include <type_traits>

namespace rp::runtime::kernels {

/// The storage of an i1 element: one byte, any nonzero value reads as true
/// (kernels write 0 or 1). A struct rather than bool, since loading a byte
/// other than 0 or 1 as bool is undefined behaviour.
struct Bool8 {
  uint8_t bits;

  Bool8() = default;
  RP_HD explicit Bool8(bool b) : bits(b ? 1 : 0) {}
  RP_HD operator bool() const { return bits != 0; }
};

template <typename T> struct ComputeType;
template <> struct ComputeType<float> { using type = float; };
template <> struct ComputeType<f16> { using type = float; };
template <> struct ComputeType<bf16> { using type = float; };
template <> struct ComputeType<double> { using type = double; };
template <> struct ComputeType<int32_t> { using type = int32_t; };
template <> struct ComputeType<int64_t> { using type = int64_t; };
template <> struct ComputeType<Bool8> { using type = bool; };

/// The type a kernel computes and accumulates in for storage type T.
template <typename T> using Compute = typename ComputeType<T>::type;

template <typename T> RP_HD inline Compute<T> load(T v) {
  return static_cast<Compute<T>>(v);
}

template <typename T> RP_HD inline T store(Compute<T> v) { return T(v); }

//===----------------------------------------------------------------------===//
// libm, float and double explicitly
//===----------------------------------------------------------------------===//

RP_HD inline float kExp(float x) { return ::expf(x); }
RP_HD inline double kExp(double x) { return ::exp(x); }
RP_HD inline float kLog(float x) { return ::logf(x); }
RP_HD inline double kLog(double x) { return ::log(x); }
RP_HD inline float kSqrt(float x) { return ::sqrtf(x); }
RP_HD inline double kSqrt(double x) { return ::sqrt(x); }
RP_HD inline float kTanh(float x) { return ::tanhf(x); }
RP_HD inline double kTanh(double x) { return ::tanh(x); }
RP_HD inline float kErf(float x) { return ::erff(x); }
RP_HD inline double kErf(double x) { return ::erf(x); }
RP_HD inline float kPow(float x, float y) { return ::powf(x, y); }
RP_HD inline double kPow(double x, double y) { return ::pow(x, y); }

template <typename A> RP_HD inline A kInfinity() {
  return static_cast<A>(HUGE_VAL);
}

template <typename A> RP_HD inline bool kIsNan(A x) { return x != x; }

//===----------------------------------------------------------------------===//
// Sums in a fixed order
//===----------------------------------------------------------------------===//

/// Number of independent partial sums of orderedSum. Part of the numerics:
/// changing it changes the rounding of every row reduction that uses it.
constexpr int kSumLanes = 8;

/// Sums f(i) for i in [0, n) in a fixed order: element i goes to partial
/// sum i % kSumLanes, the partials are added left to right as they fill, and
/// combined pairwise at the end. Independent partials let the compiler
/// vectorize without reassociating (no fast-math), and are more accurate
/// than one running sum over long rows.
template <typename Acc, typename F>
RP_HD inline Acc orderedSum(int64_t n, const F &f) {
  Acc lanes[kSumLanes];
  for (int l = 0; l < kSumLanes; ++l)
    lanes[l] = Acc(0);
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l)
      lanes[l] += f(i + l);
  for (int l = 0; i < n; ++i, ++l)
    lanes[l] += f(i);
  static_assert(kSumLanes == 8, "the final combination assumes 8 lanes");
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/// Dot product of two rows in the compute type, in orderedSum's order.
template <typename Acc, typename T, typename U>
RP_HD inline Acc dotProduct(const T *a, const U *b, int64_t n) {
  return orderedSum<Acc>(n, [&](int64_t i) {
    return static_cast<Acc>(a[i]) * static_cast<Acc>(b[i]);
  });
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_NUMERIC_H
