//===- Norms.h - layer norm and RMS norm of one row -------------*- C++ -*-===//
//
// One normalized row (the contiguous trailing dimensions [axis, rank)). Mean
// and variance are computed in the compute type (f32 for 16-bit storage,
// f64 for f64) in two passes, which avoids the cancellation of
// E[x^2] - E[x]^2; the variance is the biased one, as ONNX
// LayerNormalization and torch.layer_norm. Sums use orderedSum's fixed
// order. `scale` and `bias` may be null.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_NORMS_H
#define RP_RUNTIME_KERNELS_NORMS_H

#include "rp/runtime/kernels/Numeric.h"

namespace rp::runtime::kernels {

/// Mean (0 for RMS norm) and 1 / sqrt(var + epsilon) of a row.
template <typename Acc> struct NormStats { Acc mean, rstd; };

/// The statistics of layerNormRow (and of its gradient).
template <typename T, typename Acc = Compute<T>>
RP_HD inline NormStats<Acc> layerNormStats(const T *x, int64_t n, Acc epsilon) {
  Acc count = static_cast<Acc>(n);
  Acc mean = orderedSum<Acc>(n, [&](int64_t i) { return load(x[i]); }) / count;
  Acc var = orderedSum<Acc>(n,
                            [&](int64_t i) {
                              Acc d = load(x[i]) - mean;
                              return d * d;
                            }) /
            count;
  return {mean, Acc(1) / kSqrt(var + epsilon)};
}

/// The statistics of rmsNormRow (and of its gradient); mean is 0.
template <typename T, typename Acc = Compute<T>>
RP_HD inline NormStats<Acc> rmsNormStats(const T *x, int64_t n, Acc epsilon) {
  Acc meanSquare = orderedSum<Acc>(n,
                                   [&](int64_t i) {
                                     Acc v = load(x[i]);
                                     return v * v;
                                   }) /
                   static_cast<Acc>(n);
  return {Acc(0), Acc(1) / kSqrt(meanSquare + epsilon)};
}

/// (x - mean) / sqrt(var + epsilon) * scale + bias.
template <typename T, typename Acc = Compute<T>>
RP_HD inline void layerNormRow(const T *x, const T *scale, const T *bias, T *y,
                               int64_t n, Acc epsilon) {
  const NormStats<Acc> stats = layerNormStats<T, Acc>(x, n, epsilon);
  for (int64_t i = 0; i < n; ++i) {
    Acc v = (load(x[i]) - stats.mean) * stats.rstd;
    if (scale)
      v *= load(scale[i]);
    if (bias)
      v += load(bias[i]);
    y[i] = store<T>(v);
  }
}

/// x / sqrt(mean(x^2) + epsilon) * scale, as Llama's RMSNorm (which
/// multiplies by rsqrt rather than dividing).
template <typename T, typename Acc = Compute<T>>
RP_HD inline void rmsNormRow(const T *x, const T *scale, T *y, int64_t n,
                             Acc epsilon) {
  const Acc rstd = rmsNormStats<T, Acc>(x, n, epsilon).rstd;
  for (int64_t i = 0; i < n; ++i) {
    Acc v = load(x[i]) * rstd;
    if (scale)
      v *= load(scale[i]);
    y[i] = store<T>(v);
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_NORMS_H
