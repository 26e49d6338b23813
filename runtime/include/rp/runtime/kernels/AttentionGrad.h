//===- AttentionGrad.h - scaled dot-product attention backward --*- C++ -*-===//
//
// The backward of softmax(scale * q K^T + mask) V in two passes, as flash
// attention's: nothing of size S x T is ever stored.
//
// Pass 1, one query row at a time (attentionGradQueryRow): the scores
// s_j of every key, their maximum m and sum l = sum_j exp(s_j - m), the
// probabilities P_j = exp(s_j - m) / l, dP_j = dout . v_j, the row's
// delta = sum_j P_j dP_j (= dout . out), and dq = scale * sum_j dS_j k_j
// with dS_j = P_j (dP_j - delta). Scratch: two arrays of the key count.
// The row keeps (m, l, delta).
//
// Pass 2, one block of keys at a time (attentionGradKeyRows): for each
// query row in a fixed order, P_j and dS_j are recomputed from the row's
// (m, l, delta) with the same arithmetic as pass 1, and
// dv_j += P_j dout, dk_j += scale dS_j q.
//
// With a soft-cap (softCap), dS_j also carries the cap's slope
// 1 - tanh(x_j / cap)^2 at the key's scaled score x_j.
//
// An attention sink (GPT-OSS) is one more logit in the row's max and sum
// with no value; its gradient is attentionSinkGrad's -P_sink delta.
//
// Masked keys (bias -inf) and probabilities that underflow to 0 contribute
// nothing, as in the forward. A row whose keys are all masked has a
// constant (zero) output, so it gives dq = 0 and nothing to dk and dv. A
// NaN score makes the row's statistics NaN, so its gradients come out NaN
// as its output did.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_ATTENTIONGRAD_H
#define RP_RUNTIME_KERNELS_ATTENTIONGRAD_H

#include "rp/runtime/kernels/Attention.h"

namespace rp::runtime::kernels {

/// What pass 2 needs of a query row: max and sum of the softmax, and
/// delta = sum_j P_j dP_j. sum == 0 marks a row with every key masked.
template <typename Acc> struct AttentionRowStats { Acc max, sum, delta; };

/// Pass 1 for one query row. `q`, `dout` are rows of [d] and [dv]; `k` is
/// [numKeys, d], `v` is [numKeys, dv]; writes `dq` [d]. `p` and `dp` are
/// scratch of numKeys compute-type values, `acc` of d.
template <typename T, typename Acc = Compute<T>, typename MaskFn>
RP_HD inline AttentionRowStats<Acc>
attentionGradQueryRow(const T *q, const T *k, const T *v, const T *dout, T *dq,
                      int64_t numKeys, int64_t d, int64_t dv, Acc scale,
                      const MaskFn &maskBias, Acc *p, Acc *dp, Acc *acc,
                      Acc cap = Acc(0), Acc sink = -kInfinity<Acc>()) {
  const Acc kNegInf = -kInfinity<Acc>();
  Acc m = kNegInf;
  bool sawNan = false;
  for (int64_t j = 0; j < numKeys; ++j) {
    Acc bias = maskBias(j);
    Acc s = bias == kNegInf
                ? kNegInf
                : softCap(dotProduct<Acc>(q, k + j * d, d) * scale, cap) + bias;
    p[j] = s;
    sawNan = sawNan || kIsNan(s);
    if (s > m)
      m = s;
  }
  if (sink != kNegInf) {
    sawNan = sawNan || kIsNan(sink);
    if (sink > m)
      m = sink;
  }
  if (sawNan) {
    Acc nan = kInfinity<Acc>() - kInfinity<Acc>();
    for (int64_t c = 0; c < d; ++c)
      dq[c] = store<T>(nan);
    return {nan, nan, nan};
  }
  if (m == kNegInf) {
    for (int64_t c = 0; c < d; ++c)
      dq[c] = store<T>(Acc(0));
    return {m, Acc(0), Acc(0)};
  }
  for (int64_t j = 0; j < numKeys; ++j)
    p[j] = kExp(p[j] - m);
  Acc sum = orderedSum<Acc>(numKeys, [&](int64_t j) { return p[j]; });
  if (sink != kNegInf)
    sum += kExp(sink - m);
  for (int64_t j = 0; j < numKeys; ++j) {
    p[j] = p[j] / sum;
    dp[j] = p[j] == Acc(0) ? Acc(0) : dotProduct<Acc>(dout, v + j * dv, dv);
  }
  Acc delta = orderedSum<Acc>(numKeys, [&](int64_t j) { return p[j] * dp[j]; });
  for (int64_t c = 0; c < d; ++c)
    acc[c] = Acc(0);
  for (int64_t j = 0; j < numKeys; ++j) {
    if (p[j] == Acc(0))
      continue;
    Acc ds = p[j] * (dp[j] - delta);
    if (cap != Acc(0))
      ds *= softCapSlope(dotProduct<Acc>(q, k + j * d, d) * scale, cap);
    const T *kRow = k + j * d;
    for (int64_t c = 0; c < d; ++c)
      acc[c] += ds * load(kRow[c]);
  }
  for (int64_t c = 0; c < d; ++c)
    dq[c] = store<T>(acc[c] * scale);
  return {m, sum, delta};
}

/// Pass 1 without the two arrays of the key count: the same values in the
/// same order as attentionGradQueryRow, each score recomputed from q and k
/// whenever it is needed (four sweeps over the keys instead of one), so the
/// memory per row is the `acc` of d values alone. What a GPU thread runs,
/// where one row's scratch of the key count times every resident row would
/// be quadratic in the sequence length.
template <typename T, typename Acc = Compute<T>, typename MaskFn>
RP_HD inline AttentionRowStats<Acc> attentionGradQueryRowStreaming(
    const T *q, const T *k, const T *v, const T *dout, T *dq, int64_t numKeys,
    int64_t d, int64_t dv, Acc scale, const MaskFn &maskBias, Acc *acc,
    Acc cap = Acc(0), Acc sink = -kInfinity<Acc>()) {
  const Acc kNegInf = -kInfinity<Acc>();
  auto score = [&](int64_t j) {
    Acc bias = maskBias(j);
    return bias == kNegInf
               ? kNegInf
               : softCap(dotProduct<Acc>(q, k + j * d, d) * scale, cap) + bias;
  };
  Acc m = kNegInf;
  bool sawNan = false;
  for (int64_t j = 0; j < numKeys; ++j) {
    Acc s = score(j);
    sawNan = sawNan || kIsNan(s);
    if (s > m)
      m = s;
  }
  if (sink != kNegInf) {
    sawNan = sawNan || kIsNan(sink);
    if (sink > m)
      m = sink;
  }
  if (sawNan) {
    Acc nan = kInfinity<Acc>() - kInfinity<Acc>();
    for (int64_t c = 0; c < d; ++c)
      dq[c] = store<T>(nan);
    return {nan, nan, nan};
  }
  if (m == kNegInf) {
    for (int64_t c = 0; c < d; ++c)
      dq[c] = store<T>(Acc(0));
    return {m, Acc(0), Acc(0)};
  }
  Acc sum =
      orderedSum<Acc>(numKeys, [&](int64_t j) { return kExp(score(j) - m); });
  if (sink != kNegInf)
    sum += kExp(sink - m);
  auto prob = [&](int64_t j) { return kExp(score(j) - m) / sum; };
  auto dprob = [&](int64_t j, Acc p) {
    return p == Acc(0) ? Acc(0) : dotProduct<Acc>(dout, v + j * dv, dv);
  };
  Acc delta = orderedSum<Acc>(numKeys, [&](int64_t j) {
    Acc p = prob(j);
    return p * dprob(j, p);
  });
  for (int64_t c = 0; c < d; ++c)
    acc[c] = Acc(0);
  for (int64_t j = 0; j < numKeys; ++j) {
    Acc p = prob(j);
    if (p == Acc(0))
      continue;
    Acc ds = p * (dprob(j, p) - delta);
    if (cap != Acc(0))
      ds *= softCapSlope(dotProduct<Acc>(q, k + j * d, d) * scale, cap);
    const T *kRow = k + j * d;
    for (int64_t c = 0; c < d; ++c)
      acc[c] += ds * load(kRow[c]);
  }
  for (int64_t c = 0; c < d; ++c)
    dq[c] = store<T>(acc[c] * scale);
  return {m, sum, delta};
}

/// A query row's part of its head's sink gradient: the sink's column has
/// no value, so dP_sink = 0 and dS_sink = P_sink (0 - delta), with
/// P_sink = exp(sink - max) / sum from the row's statistics (which count
/// the sink). Pass 2 is unchanged: its probabilities divide by that sum.
template <typename Acc>
RP_HD inline Acc attentionSinkGrad(AttentionRowStats<Acc> stats, Acc sink) {
  if (stats.sum == Acc(0))
    return Acc(0);
  return -(kExp(sink - stats.max) / stats.sum) * stats.delta;
}

/// Pass 2: adds one query row's contribution to `count` consecutive keys.
/// `k` and `v` point at the first of them; `maskBias(jj)` is the bias of
/// key jj of the block; `dkAcc` [count, d] and `dvAcc` [count, dv] are the
/// compute-type accumulators of the block.
template <typename T, typename Acc = Compute<T>, typename MaskFn>
RP_HD inline void
attentionGradKeyRows(const T *q, const T *dout, const T *k, const T *v,
                     int64_t count, int64_t d, int64_t dv, Acc scale,
                     const MaskFn &maskBias, AttentionRowStats<Acc> stats,
                     Acc *dkAcc, Acc *dvAcc, Acc cap = Acc(0)) {
  const Acc kNegInf = -kInfinity<Acc>();
  if (stats.sum == Acc(0))
    return; // Every key of the row is masked: no gradient flows.
  for (int64_t jj = 0; jj < count; ++jj) {
    Acc bias = maskBias(jj);
    if (bias == kNegInf)
      continue;
    const T *kRow = k + jj * d;
    const T *vRow = v + jj * dv;
    Acc x = dotProduct<Acc>(q, kRow, d) * scale;
    Acc s = softCap(x, cap) + bias;
    Acc p = kExp(s - stats.max) / stats.sum;
    if (p == Acc(0))
      continue;
    Acc dp = dotProduct<Acc>(dout, vRow, dv);
    Acc ds = p * (dp - stats.delta);
    if (cap != Acc(0))
      ds *= softCapSlope(x, cap);
    ds *= scale;
    Acc *dkRow = dkAcc + jj * d;
    Acc *dvRow = dvAcc + jj * dv;
    for (int64_t c = 0; c < dv; ++c)
      dvRow[c] += p * load(dout[c]);
    for (int64_t c = 0; c < d; ++c)
      dkRow[c] += ds * load(q[c]);
  }
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_ATTENTIONGRAD_H
