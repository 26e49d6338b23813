//===- HostAttention.cpp - scaled dot-product attention on the host -------===//
//
// Work is split over (batch, head, block of kQueryBlock query rows); each
// row runs kernels::attentionRow (online softmax), so a worker holds only
// one accumulator of the value width and the result of a row never depends
// on which worker computed it. Grouped-query attention maps query head h to
// key/value head h / (H / Hkv), as PyTorch's enable_gqa and Llama's
// repeat_kv. An attention sink (GPT-OSS) is one more logit per head in
// every row's softmax (kernels::attentionRow).
//
//===----------------------------------------------------------------------===//

#include "HostAttentionCommon.h"

#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Attention.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Query rows per chunk.
constexpr int64_t kQueryBlock = 16;

template <typename T, MaskKind Kind>
void runAttention(ThreadPool &pool, const AttentionDims &dims, const T *q,
                  const T *k, const T *v, const void *mask, bool causal,
                  double scale, const AttentionExtras &extras, T *out) {
  using C = Compute<T>;
  const C cap = static_cast<C>(extras.softcap);
  const int64_t queryBlocks = (dims.s + kQueryBlock - 1) / kQueryBlock;
  const int64_t group = dims.h / dims.hkv;
  const C scaleC = static_cast<C>(scale);
  const int64_t *ms = dims.maskStrides;
  const MaskReader<T, Kind> maskAt{mask, ms, dims.t - dims.s};
  const T *sinks = extras.sinks ? extras.sinks->as<const T>() : nullptr;
  parallelRanges(
      pool, dims.b * dims.h * queryBlocks, 1, [&](int64_t item, int64_t) {
        int64_t bh = item / queryBlocks;
        int64_t i0 = (item % queryBlocks) * kQueryBlock;
        int64_t b = bh / dims.h, h = bh % dims.h, hk = h / group;
        const T *kHead = k + (b * dims.hkv + hk) * dims.t * dims.d;
        const T *vHead = v + (b * dims.hkv + hk) * dims.t * dims.dv;
        std::vector<C> acc(dims.dv);
        const C sink = sinks ? load(sinks[h]) : -kInfinity<C>();
        for (int64_t i = i0; i < std::min(dims.s, i0 + kQueryBlock); ++i) {
          const T *qRow = q + (bh * dims.s + i) * dims.d;
          T *outRow = out + (bh * dims.s + i) * dims.dv;
          // Keys after the query never enter the loop at all. Those before
          // a window are masked; whole key blocks of them are skipped,
          // which changes no bit (a block with every key masked adds
          // nothing to the online softmax).
          int64_t first = 0, end = dims.t;
          attentionKeyRange(i, dims.s, dims.t, causal, extras.window, first,
                            end);
          int64_t skip = first / kAttentionKeyBlock * kAttentionKeyBlock;
          int64_t maskBase = b * ms[0] + h * ms[1] + i * ms[2];
          attentionRow<T>(
              qRow, kHead + skip * dims.d, vHead + skip * dims.dv, outRow,
              end - skip, dims.d, dims.dv, scaleC,
              [&](int64_t j) {
                return j + skip < first ? -kInfinity<C>()
                                        : maskAt(maskBase, i, j + skip);
              },
              acc.data(), cap, sink);
        }
      });
}

} // namespace

Status attention(ThreadPool &pool, const TensorRef &q, const TensorRef &k,
                 const TensorRef &v, const std::optional<TensorRef> &mask,
                 bool causal, double scale, const TensorRef &out,
                 const AttentionExtras &extras) {
  AttentionDims dims;
  if (Status s = checkAttentionArgs(q, k, v, mask, causal, scale, out,
                                    /*grads=*/nullptr, dims, extras);
      s.failed())
    return s;
  if (out.size() == 0)
    return {};
  MaskKind kind = maskKind(mask);
  const void *maskData = mask ? mask->data : nullptr;
  visitDType(q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<Compute<T>>) {
      const T *qd = q.as<const T>(), *kd = k.as<const T>(),
              *vd = v.as<const T>();
      T *o = out.as<T>();
      switch (kind) {
      case MaskKind::none:
        return runAttention<T, MaskKind::none>(pool, dims, qd, kd, vd, maskData,
                                               causal, scale, extras, o);
      case MaskKind::boolean:
        return runAttention<T, MaskKind::boolean>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, o);
      case MaskKind::additive:
        return runAttention<T, MaskKind::additive>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, o);
      case MaskKind::segments:
        return runAttention<T, MaskKind::segments>(
            pool, dims, qd, kd, vd, maskData, causal, scale, extras, o);
      }
    }
  });
  return {};
}

} // namespace rp::runtime::host
