//===- NormsGrad.h - layer norm and RMS norm backward of one row -*- C++ -*-=//
//
// The input gradient of one normalized row. The statistics are recomputed
// from x by the forward's own functions (Norms.h), and returned so
// that the host kernel can form the scale and bias gradients, which sum
// over rows, without computing them again. With g = dy * scale and
// xhat = (x - mean) * rstd (layer norm) or x * rstd (RMS norm):
//   layer norm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMS norm:   dx = rstd * (g - xhat * mean(g * xhat))
// `scale` may be null (g = dy).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_NORMSGRAD_H
#define RP_RUNTIME_KERNELS_NORMSGRAD_H

#include "rp/runtime/kernels/Norms.h"

namespace rp::runtime::kernels {

/// dx of one row given its statistics; `centered` selects layer norm
/// (subtracts mean(g)) over RMS norm.
template <typename T, typename Acc = Compute<T>>
RP_HD inline void normGradRow(const T *x, const T *scale, const T *dy, T *dx,
                              int64_t n, NormStats<Acc> stats, bool centered) {
  auto g = [&](int64_t i) {
    Acc v = load(dy[i]);
    return scale ? v * load(scale[i]) : v;
  };
  auto xhat = [&](int64_t i) { return (load(x[i]) - stats.mean) * stats.rstd; };
  Acc count = static_cast<Acc>(n);
  Acc meanG = centered
                  ? orderedSum<Acc>(n, [&](int64_t i) { return g(i); }) / count
                  : Acc(0);
  Acc meanGX =
      orderedSum<Acc>(n, [&](int64_t i) { return g(i) * xhat(i); }) / count;
  for (int64_t i = 0; i < n; ++i)
    dx[i] = store<T>(stats.rstd * ((g(i) - meanG) - xhat(i) * meanGX));
}

/// One element's term of the scale gradient, dy * xhat, which the scale
/// gradient sums over the rows (and the bias gradient sums dy alone).
template <typename T, typename Acc>
RP_HD inline Acc normScaleGradTerm(T x, T dy, NormStats<Acc> stats) {
  return load(dy) * ((load(x) - stats.mean) * stats.rstd);
}

/// Column `c` of a norm's scale and bias gradients: the sum, in row-block
/// order, of the `rowBlocks` partial sums per column (null: not wanted).
template <typename T, typename Acc>
RP_HD inline void normParamGradColumn(const Acc *scalePartials,
                                      const Acc *biasPartials,
                                      int64_t rowBlocks, int64_t n, int64_t c,
                                      T *dscale, T *dbias) {
  Acc s = Acc(0), b = Acc(0);
  for (int64_t rb = 0; rb < rowBlocks; ++rb) {
    if (dscale)
      s += scalePartials[rb * n + c];
    if (dbias)
      b += biasPartials[rb * n + c];
  }
  if (dscale)
    dscale[c] = store<T>(s);
  if (dbias)
    dbias[c] = store<T>(b);
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_NORMSGRAD_H
