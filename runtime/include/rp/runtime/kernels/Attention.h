//===- Attention.h - one query row of scaled dot-product attention -*- C++ -*-//
//
// softmax(scale * q K^T + mask) V for a single query row, with the online
// softmax of flash attention: keys are visited in blocks of
// kAttentionKeyBlock, a running maximum and a running sum of exp(s - max)
// are kept, and the output accumulator is rescaled whenever the maximum
// grows. Nothing of size T is stored, so a device can run it with memory
// linear in the sequence length; the host runs the very same code.
//
// Masked keys (bias -inf) contribute nothing. A row whose keys are all
// masked outputs zeros, as flash attention and PyTorch's math path since
// 2.5 (`_safe_softmax`), rather than the NaN of a literal softmax: such rows
// come from padding and must not poison a training step.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_ATTENTION_H
#define RP_RUNTIME_KERNELS_ATTENTION_H

#include "rp/runtime/kernels/Numeric.h"

namespace rp::runtime::kernels {

/// Keys scored per step of the online softmax. Part of the numerics: the
/// rescaling points, hence the rounding, depend on it.
constexpr int kAttentionKeyBlock = 16;

/// Gemma 2's soft-capping of a scaled score: cap * tanh(x / cap) in that
/// order (transformers' division, tanh, multiplication); x for cap 0.
template <typename Acc> RP_HD inline Acc softCap(Acc x, Acc cap) {
  return cap == Acc(0) ? x : cap * kTanh(x / cap);
}

/// d softCap(x) / dx = 1 - tanh(x / cap)^2; 1 for cap 0.
template <typename Acc> RP_HD inline Acc softCapSlope(Acc x, Acc cap) {
  if (cap == Acc(0))
    return Acc(1);
  Acc t = kTanh(x / cap);
  return Acc(1) - t * t;
}

/// The keys [first, end) that query row i of s sees among t keys.
/// Causal is aligned bottom-right: the queries are the last s of the t
/// positions, so row i is at position p = i + t - s and sees keys j <= p;
/// a sliding window (window > 0, causal only) also drops j <= p - window.
/// Keys outside the range are masked, whatever the mask operand says.
RP_HD inline void attentionKeyRange(int64_t i, int64_t s, int64_t t,
                                    bool causal, int64_t window, int64_t &first,
                                    int64_t &end) {
  first = 0;
  end = t;
  if (!causal)
    return;
  int64_t p = i + t - s;
  end = p + 1 < t ? p + 1 : t;
  if (window > 0 && p - window + 1 > 0)
    first = p - window + 1;
}

/// `q` is one row [d]; `k` is [numKeys, d] and `v` is [numKeys, dv], both
/// contiguous; `out` receives [dv]. `maskBias(j)` is added to the score of
/// key j: 0 keeps it, -inf drops it, a float mask passes its value. `acc` is
/// caller-provided scratch of dv compute-type values. `cap` soft-caps the
/// scaled score before the bias is added (softCap). `sink` (GPT-OSS's
/// attention sink; -inf: none) is one more logit in the softmax, with no
/// value: it only adds exp(sink - max) to the row's sum, after the keys.
template <typename T, typename Acc = Compute<T>, typename MaskFn>
RP_HD inline void attentionRow(const T *q, const T *k, const T *v, T *out,
                               int64_t numKeys, int64_t d, int64_t dv,
                               Acc scale, const MaskFn &maskBias, Acc *acc,
                               Acc cap = Acc(0), Acc sink = -kInfinity<Acc>()) {
  const Acc kNegInf = -kInfinity<Acc>();
  Acc runningMax = kNegInf;
  Acc runningSum = Acc(0);
  // A NaN score is never a maximum; remembered so that a row whose other
  // keys are all masked still comes out NaN.
  bool sawNan = false;
  for (int64_t c = 0; c < dv; ++c)
    acc[c] = Acc(0);

  Acc scores[kAttentionKeyBlock];
  for (int64_t j0 = 0; j0 < numKeys; j0 += kAttentionKeyBlock) {
    int64_t count =
        numKeys - j0 < kAttentionKeyBlock ? numKeys - j0 : kAttentionKeyBlock;
    Acc blockMax = kNegInf;
    for (int64_t jj = 0; jj < count; ++jj) {
      int64_t j = j0 + jj;
      Acc bias = maskBias(j);
      Acc s =
          bias == kNegInf
              ? kNegInf
              : softCap(dotProduct<Acc>(q, k + j * d, d) * scale, cap) + bias;
      scores[jj] = s;
      sawNan = sawNan || kIsNan(s);
      if (s > blockMax)
        blockMax = s;
    }
    Acc newMax = blockMax > runningMax ? blockMax : runningMax;
    if (newMax == kNegInf)
      continue; // Every key so far is masked.
    if (newMax != runningMax) {
      // exp(-inf) = 0 drops the (empty) state of a row that had no key yet.
      Acc correction = kExp(runningMax - newMax);
      runningSum *= correction;
      for (int64_t c = 0; c < dv; ++c)
        acc[c] *= correction;
      runningMax = newMax;
    }
    for (int64_t jj = 0; jj < count; ++jj) {
      Acc p = kExp(scores[jj] - runningMax);
      if (p == Acc(0))
        continue;
      runningSum += p;
      const T *vRow = v + (j0 + jj) * dv;
      for (int64_t c = 0; c < dv; ++c)
        acc[c] += p * load(vRow[c]);
    }
  }

  if (sink != kNegInf) {
    // After the keys, so a row without a sink keeps its bits.
    sawNan = sawNan || kIsNan(sink);
    if (sink > runningMax) {
      Acc correction = kExp(runningMax - sink);
      runningSum *= correction;
      for (int64_t c = 0; c < dv; ++c)
        acc[c] *= correction;
      runningMax = sink;
    }
    runningSum += kExp(sink - runningMax);
  }
  if (sawNan) {
    for (int64_t c = 0; c < dv; ++c)
      out[c] = store<T>(kInfinity<Acc>() - kInfinity<Acc>());
    return;
  }
  if (runningSum == Acc(0)) {
    for (int64_t c = 0; c < dv; ++c)
      out[c] = store<T>(Acc(0));
    return;
  }
  for (int64_t c = 0; c < dv; ++c)
    out[c] = store<T>(acc[c] / runningSum);
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_ATTENTION_H
