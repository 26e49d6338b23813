//===- SoftmaxGrad.h - softmax backward and cross-entropy rows --*- C++ -*-===//
//
// One row of the softmax / log-softmax VJP from the forward output y, and
// one row of the cross-entropy loss and its gradient from the logits. Rows
// are `n` elements `stride` apart, as in Softmax.h; arithmetic is in the
// compute type and row sums in orderedSum's fixed order.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_SOFTMAXGRAD_H
#define RP_RUNTIME_KERNELS_SOFTMAXGRAD_H

#include "rp/runtime/kernels/Softmax.h"

namespace rp::runtime::kernels {

/// dx = y * (dy - sum(dy * y)).
template <typename T, typename Acc = Compute<T>>
RP_HD inline void softmaxGradRow(const T *y, const T *dy, T *dx, int64_t n,
                                 int64_t stride) {
  Acc dot = orderedSum<Acc>(
      n, [&](int64_t i) { return load(y[i * stride]) * load(dy[i * stride]); });
  for (int64_t i = 0; i < n; ++i)
    dx[i * stride] =
        store<T>(load(y[i * stride]) * (load(dy[i * stride]) - dot));
}

/// dx = dy - exp(y) * sum(dy).
template <typename T, typename Acc = Compute<T>>
RP_HD inline void logSoftmaxGradRow(const T *y, const T *dy, T *dx, int64_t n,
                                    int64_t stride) {
  Acc sum = orderedSum<Acc>(n, [&](int64_t i) { return load(dy[i * stride]); });
  for (int64_t i = 0; i < n; ++i)
    dx[i * stride] =
        store<T>(load(dy[i * stride]) - kExp(load(y[i * stride])) * sum);
}

/// The statistics of a contiguous logits row: its maximum and
/// sum(exp(x - max)), as logSoftmaxRow computes them.
template <typename Acc> struct LogitsRowStats { Acc max, sum; };

template <typename T, typename Acc = Compute<T>>
RP_HD inline LogitsRowStats<Acc> logitsRowStats(const T *x, int64_t n) {
  Acc m = rowMax<T, Acc>(x, n, 1);
  Acc sum = orderedSum<Acc>(n, [&](int64_t i) { return kExp(load(x[i]) - m); });
  return {m, sum};
}

/// -log_softmax(x)[label] in logSoftmaxRow's arithmetic; label in [0, n).
template <typename T, typename Acc = Compute<T>>
RP_HD inline Acc crossEntropyRow(const T *x, int64_t n, int64_t label) {
  LogitsRowStats<Acc> stats = logitsRowStats<T, Acc>(x, n);
  return -((load(x[label]) - stats.max) - kLog(stats.sum));
}

/// dx = scale * (softmax(x) - onehot(label)); label in [0, n).
template <typename T, typename Acc = Compute<T>>
RP_HD inline void crossEntropyGradRow(const T *x, T *dx, int64_t n,
                                      int64_t label, Acc scale) {
  LogitsRowStats<Acc> stats = logitsRowStats<T, Acc>(x, n);
  for (int64_t i = 0; i < n; ++i) {
    Acc p = kExp(load(x[i]) - stats.max) / stats.sum;
    dx[i] = store<T>(scale * (i == label ? p - Acc(1) : p));
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_SOFTMAXGRAD_H
