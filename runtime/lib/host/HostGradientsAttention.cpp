//===- HostGradientsAttention.cpp - attention backward on the host --------===//
//
// Two passes (kernels/AttentionGrad.h), each deterministic on its own:
//
// 1. Query rows, split over (batch, head, block of kQueryBlock rows) like
//    the forward. Each row is computed whole by one worker: it writes its
//    dq row and keeps (max, sum, delta), three compute-type values per
//    query row, for pass 2. Scratch per worker: 2 T + D values.
// 2. Keys, split over (batch, key/value head, block of kKeyBlock keys). A
//    block owns its dk and dv rows outright and accumulates them over the
//    query heads that share the key/value head (in head order) and, within
//    each head, over the query rows (in row order), recomputing each
//    probability from the row's statistics. No two chunks write the same
//    element and every sum has an order fixed by the shapes alone, so dk
//    and dv have the same bits for any thread count, with neither atomics
//    nor per-thread partials. Scratch per worker: kKeyBlock (D + Dv).
//
// An attention sink (GPT-OSS) enters each row's statistics in pass 1, so
// pass 2 is unchanged; its gradient, -sum over rows of P_sink delta, is
// summed per head after pass 1 in a fixed order.
//
// Pass 2 recomputes the scores, so the backward costs about twice the
// forward's arithmetic, the price flash attention's backward also pays
// for memory linear in the sequence length.
//
//===----------------------------------------------------------------------===//

#include "HostAttentionCommon.h"

#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/kernels/AttentionGrad.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Query rows per chunk of pass 1.
constexpr int64_t kQueryBlock = 16;
/// Keys per chunk of pass 2. Not part of the numerics: each key's sums run
/// over the query rows alone, whichever block it is in.
constexpr int64_t kKeyBlock = 16;

template <typename T, MaskKind Kind>
void runAttentionGrad(ThreadPool &pool, const AttentionDims &dims, const T *q,
                      const T *k, const T *v, const void *mask, bool causal,
                      double scale, const AttentionExtras &extras, const T *dy,
                      T *dq, T *dk, T *dv) {
  using C = Compute<T>;
  const C cap = static_cast<C>(extras.softcap);
  // Keys outside a row's range (causal, window) are masked; the mask
  // operand is read only inside it.
  auto biasOf = [&](const MaskReader<T, Kind> &maskAt, int64_t i, int64_t base,
                    int64_t j) {
    int64_t first = 0, end = dims.t;
    attentionKeyRange(i, dims.s, dims.t, causal, extras.window, first, end);
    return j < first || j >= end ? -kInfinity<C>() : maskAt(base, i, j);
  };
  const int64_t group = dims.h / dims.hkv;
  const C scaleC = static_cast<C>(scale);
  const int64_t *ms = dims.maskStrides;
  const MaskReader<T, Kind> maskAt{mask, ms, dims.t - dims.s};
  std::vector<AttentionRowStats<C>> stats(dims.b * dims.h * dims.s);
  const T *sinks = extras.sinks ? extras.sinks->as<const T>() : nullptr;
  auto sinkOf = [&](int64_t h) {
    return sinks ? load(sinks[h]) : -kInfinity<C>();
  };

  // Pass 1: dq and the row statistics.
  const int64_t queryBlocks = (dims.s + kQueryBlock - 1) / kQueryBlock;
  parallelRanges(
      pool, dims.b * dims.h * queryBlocks, 1, [&](int64_t item, int64_t) {
        int64_t bh = item / queryBlocks;
        int64_t i0 = (item % queryBlocks) * kQueryBlock;
        int64_t b = bh / dims.h, h = bh % dims.h, hk = h / group;
        const T *kHead = k + (b * dims.hkv + hk) * dims.t * dims.d;
        const T *vHead = v + (b * dims.hkv + hk) * dims.t * dims.dv;
        std::vector<C> p(dims.t), dp(dims.t), acc(dims.d);
        for (int64_t i = i0; i < std::min(dims.s, i0 + kQueryBlock); ++i) {
          int64_t row = bh * dims.s + i;
          int64_t first = 0, numKeys = dims.t;
          attentionKeyRange(i, dims.s, dims.t, causal, extras.window, first,
                            numKeys);
          int64_t maskBase = b * ms[0] + h * ms[1] + i * ms[2];
          stats[row] = attentionGradQueryRow<T>(
              q + row * dims.d, kHead, vHead, dy + row * dims.dv,
              dq + row * dims.d, numKeys, dims.d, dims.dv, scaleC,
              [&](int64_t j) { return biasOf(maskAt, i, maskBase, j); },
              p.data(), dp.data(), acc.data(), cap, sinkOf(h));
        }
      });

  // The sinks' gradient: each head's rows in (batch, row) order, on one
  // thread (B S terms a head), so its bits never depend on the pool.
  if (extras.sinksGrad) {
    T *dsinks = extras.sinksGrad->as<T>();
    for (int64_t h = 0; h < dims.h; ++h) {
      C sum = C(0);
      for (int64_t b = 0; b < dims.b; ++b)
        for (int64_t i = 0; i < dims.s; ++i)
          sum += attentionSinkGrad(stats[(b * dims.h + h) * dims.s + i],
                                   sinkOf(h));
      dsinks[h] = store<T>(sum);
    }
  }

  // Pass 2: dk and dv, one block of keys per item.
  const int64_t keyBlocks = (dims.t + kKeyBlock - 1) / kKeyBlock;
  parallelRanges(
      pool, dims.b * dims.hkv * keyBlocks, 1, [&](int64_t item, int64_t) {
        int64_t bhk = item / keyBlocks;
        int64_t j0 = (item % keyBlocks) * kKeyBlock;
        int64_t j1 = std::min(dims.t, j0 + kKeyBlock);
        int64_t b = bhk / dims.hkv, hk = bhk % dims.hkv;
        const T *kBlock = k + (bhk * dims.t + j0) * dims.d;
        const T *vBlock = v + (bhk * dims.t + j0) * dims.dv;
        std::vector<C> dkAcc((j1 - j0) * dims.d, C(0)),
            dvAcc((j1 - j0) * dims.dv, C(0));
        for (int64_t g = 0; g < group; ++g) {
          int64_t h = hk * group + g, bh = b * dims.h + h;
          // Causal: row i sees keys j <= i + t - s, so rows before
          // j0 - (t - s) see none of the block; with a window, nor do rows
          // from j1 - 1 - (t - s) + window on. Rows that see none add
          // nothing, so skipping them changes no bit.
          int64_t shift = dims.t - dims.s;
          int64_t iBegin = causal ? std::max<int64_t>(0, j0 - shift) : 0;
          int64_t iEnd = causal && extras.window > 0
                             ? std::min(dims.s, j1 - 1 - shift + extras.window)
                             : dims.s;
          for (int64_t i = iBegin; i < iEnd; ++i) {
            int64_t row = bh * dims.s + i;
            int64_t first = 0, end = dims.t;
            attentionKeyRange(i, dims.s, dims.t, causal, extras.window, first,
                              end);
            int64_t count = std::min(j1, end) - j0;
            if (count <= 0)
              continue;
            int64_t maskBase = b * ms[0] + h * ms[1] + i * ms[2];
            attentionGradKeyRows<T>(
                q + row * dims.d, dy + row * dims.dv, kBlock, vBlock, count,
                dims.d, dims.dv, scaleC,
                [&](int64_t jj) {
                  return j0 + jj < first ? -kInfinity<C>()
                                         : maskAt(maskBase, i, j0 + jj);
                },
                stats[row], dkAcc.data(), dvAcc.data(), cap);
          }
        }
        T *dkOut = dk + (bhk * dims.t + j0) * dims.d;
        T *dvOut = dv + (bhk * dims.t + j0) * dims.dv;
        for (size_t e = 0; e < dkAcc.size(); ++e)
          dkOut[e] = store<T>(dkAcc[e]);
        for (size_t e = 0; e < dvAcc.size(); ++e)
          dvOut[e] = store<T>(dvAcc[e]);
      });
}

} // namespace

Status attentionGrad(ThreadPool &pool, const TensorRef &q, const TensorRef &k,
                     const TensorRef &v, const std::optional<TensorRef> &mask,
                     bool causal, double scale, const TensorRef &dy,
                     const TensorRef &dq, const TensorRef &dk,
                     const TensorRef &dv, const AttentionExtras &extras) {
  AttentionDims dims;
  const AttentionGradRefs grads{dq, dk, dv};
  if (Status s = checkAttentionArgs(q, k, v, mask, causal, scale, dy, &grads,
                                    dims, extras);
      s.failed())
    return s;
  MaskKind kind = maskKind(mask);
  const void *maskData = mask ? mask->data : nullptr;
  visitDType(q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Compute<T>>) {
      const T *qd = q.as<const T>(), *kd = k.as<const T>(),
              *vd = v.as<const T>(), *dyd = dy.as<const T>();
      T *dqd = dq.as<T>(), *dkd = dk.as<T>(), *dvd = dv.as<T>();
      switch (kind) {
      case MaskKind::none:
        return runAttentionGrad<T, MaskKind::none>(pool, dims, qd, kd, vd,
                                                   maskData, causal, scale,
                                                   extras, dyd, dqd, dkd, dvd);
      case MaskKind::boolean:
        return runAttentionGrad<T, MaskKind::boolean>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, dyd, dqd,
            dkd, dvd);
      case MaskKind::additive:
        return runAttentionGrad<T, MaskKind::additive>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, dyd, dqd,
            dkd, dvd);
      case MaskKind::segments:
        return runAttentionGrad<T, MaskKind::segments>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, dyd, dqd,
            dkd, dvd);
      }
    }
  });
  return {};
}

} // namespace rp::runtime::host
