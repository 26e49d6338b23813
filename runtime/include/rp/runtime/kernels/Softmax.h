//===- Softmax.h - row softmax and log-softmax ------------------*- C++ -*-===//
//
// One row of rp.softmax / rp.log_softmax: `n` elements `stride` apart (the
// softmax dimension need not be the last one). The maximum is subtracted
// before exp so that no finite input overflows; a row whose maximum is -inf
// (all -inf) or NaN gives NaN, as torch.softmax. All arithmetic is in the
// compute type, sums in orderedSum's fixed order.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_SOFTMAX_H
#define RP_RUNTIME_KERNELS_SOFTMAX_H

#include "rp/runtime/kernels/Numeric.h"

#include <type_traits>

namespace rp::runtime::kernels {

/// The row maximum, NaN if any element is NaN.
template <typename T, typename Acc = Compute<T>>
RP_HD inline Acc rowMax(const T *x, int64_t n, int64_t stride) {
  Acc m = -kInfinity<Acc>();
  for (int64_t i = 0; i < n; ++i) {
    Acc v = load(x[i * stride]);
    if (kIsNan(v))
      return v;
    if (v > m)
      m = v;
  }
  return m;
}

template <typename T, typename Acc = Compute<T>>
RP_HD inline void softmaxRow(const T *x, T *y, int64_t n, int64_t stride) {
  Acc m = rowMax<T, Acc>(x, n, stride);
  Acc sum;
  if constexpr (std::is_same_v<T, Acc>) {
    // The output can hold exp(x - m) exactly: compute it once.
    for (int64_t i = 0; i < n; ++i)
      y[i * stride] = kExp(x[i * stride] - m);
    sum = orderedSum<Acc>(n, [&](int64_t i) { return y[i * stride]; });
    for (int64_t i = 0; i < n; ++i)
      y[i * stride] = y[i * stride] / sum;
  } else {
    // A 16-bit output would round exp(x - m): recompute it instead.
    sum = orderedSum<Acc>(
        n, [&](int64_t i) { return kExp(load(x[i * stride]) - m); });
    for (int64_t i = 0; i < n; ++i)
      y[i * stride] = store<T>(kExp(load(x[i * stride]) - m) / sum);
  }
}

/// x - max - log(sum(exp(x - max))).
template <typename T, typename Acc = Compute<T>>
RP_HD inline void logSoftmaxRow(const T *x, T *y, int64_t n, int64_t stride) {
  Acc m = rowMax<T, Acc>(x, n, stride);
  Acc sum = orderedSum<Acc>(
      n, [&](int64_t i) { return kExp(load(x[i * stride]) - m); });
  Acc logSum = kLog(sum);
  for (int64_t i = 0; i < n; ++i)
    y[i * stride] = store<T>((load(x[i * stride]) - m) - logSum);
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_SOFTMAX_H
