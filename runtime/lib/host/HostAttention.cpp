//===- HostAttention.cpp - scaled dot-product attention on the host -------===//
//
// Work is split over (batch, head, block of kQueryBlock query rows); each
// row runs kernels::attentionRow (online softmax), so a worker holds only
// one accumulator of the value width and the result of a row never depends
// on which worker computed it. Grouped-query attention maps query head h to
// key/value head h / (H / Hkv), as PyTorch's enable_gqa and Llama's
// repeat_kv.
//
//===----------------------------------------------------------------------===//

#include "HostCommon.h"

#include "rp/runtime/host/Kernels.h"
#include "rp/runtime/kernels/Attention.h"

#include <type_traits>

namespace rp::runtime::host {

using namespace detail;
using namespace kernels;

namespace {

/// Query rows per chunk.
constexpr int64_t kQueryBlock = 16;

enum class MaskKind { none, boolean, additive };

struct AttentionDims {
  int64_t b, h, s, d, hkv, t, dv;
  int64_t maskStrides[4] = {0, 0, 0, 0};
};

template <typename T, MaskKind Kind>
void runAttention(ThreadPool &pool, const AttentionDims &dims, const T *q,
                  const T *k, const T *v, const void *mask, bool causal,
                  double scale, T *out) {
  using C = Compute<T>;
  const int64_t queryBlocks = (dims.s + kQueryBlock - 1) / kQueryBlock;
  const int64_t group = dims.h / dims.hkv;
  const C scaleC = static_cast<C>(scale);
  const int64_t *ms = dims.maskStrides;
  parallelRanges(
      pool, dims.b * dims.h * queryBlocks, 1, [&](int64_t item, int64_t) {
        int64_t bh = item / queryBlocks;
        int64_t i0 = (item % queryBlocks) * kQueryBlock;
        int64_t b = bh / dims.h, h = bh % dims.h, hk = h / group;
        const T *kHead = k + (b * dims.hkv + hk) * dims.t * dims.d;
        const T *vHead = v + (b * dims.hkv + hk) * dims.t * dims.dv;
        std::vector<C> acc(dims.dv);
        for (int64_t i = i0; i < std::min(dims.s, i0 + kQueryBlock); ++i) {
          const T *qRow = q + (bh * dims.s + i) * dims.d;
          T *outRow = out + (bh * dims.s + i) * dims.dv;
          // Causal: keys after the query never enter the loop at all.
          int64_t numKeys = causal ? i + 1 : dims.t;
          int64_t maskBase = b * ms[0] + h * ms[1] + i * ms[2];
          auto maskBias = [&](int64_t j) -> C {
            if constexpr (Kind == MaskKind::boolean)
              return static_cast<const Bool8 *>(mask)[maskBase + j * ms[3]]
                         ? C(0)
                         : -kInfinity<C>();
            else if constexpr (Kind == MaskKind::additive)
              return load(static_cast<const T *>(mask)[maskBase + j * ms[3]]);
            else
              return C(0);
          };
          attentionRow<T>(qRow, kHead, vHead, outRow, numKeys, dims.d, dims.dv,
                          scaleC, maskBias, acc.data());
        }
      });
}

Status checkAttention(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const std::optional<TensorRef> &mask,
                      bool causal, double scale, const TensorRef &out,
                      AttentionDims &dims) {
  const char *op = "attention";
  if (Status s = checkTensor(q, "query", op); s.failed())
    return s;
  if (!isFloat(q.dtype))
    return unsupportedDType(op, q.dtype);
  if (Status s = checkTensorOf(k, q.dtype, "key", op); s.failed())
    return s;
  if (Status s = checkTensorOf(v, q.dtype, "value", op); s.failed())
    return s;
  if (Status s = checkTensorOf(out, q.dtype, "output", op); s.failed())
    return s;
  std::string shapes = describe(q) + ", " + describe(k) + ", " + describe(v) +
                       " -> " + describe(out);
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4 ||
      out.shape.size() != 4)
    return invalidArgument(std::string(op) +
                           ": query, key, value and output must be "
                           "[batch, heads, seq, dim], got " +
                           shapes);
  dims.b = q.shape[0];
  dims.h = q.shape[1];
  dims.s = q.shape[2];
  dims.d = q.shape[3];
  dims.hkv = k.shape[1];
  dims.t = k.shape[2];
  dims.dv = v.shape[3];
  bool consistent = k.shape[0] == dims.b && v.shape[0] == dims.b &&
                    k.shape[3] == dims.d && v.shape[1] == dims.hkv &&
                    v.shape[2] == dims.t && dims.hkv > 0 &&
                    dims.h % dims.hkv == 0 &&
                    out.shape == Shape{dims.b, dims.h, dims.s, dims.dv};
  if (!consistent)
    return invalidArgument(std::string(op) + ": inconsistent shapes " + shapes);
  if (causal && dims.s != dims.t)
    return invalidArgument(std::string(op) +
                           ": causal attention needs equal query and key "
                           "lengths, got " +
                           shapes);
  if (!(scale > 0.0))
    return invalidArgument(std::string(op) + ": scale must be positive");
  if (mask) {
    if (Status s = checkTensor(*mask, "mask", op); s.failed())
      return s;
    if (mask->dtype != DType::i1 && mask->dtype != q.dtype)
      return invalidArgument(std::string(op) + ": mask " + describe(*mask) +
                             " must be i1 or the query's element type " +
                             dtypeName(q.dtype));
    Shape scores{dims.b, dims.h, dims.s, dims.t};
    if (!kernels::broadcastStrides(mask->shape.data(),
                                   static_cast<int>(mask->shape.size()),
                                   scores.data(), 4, dims.maskStrides))
      return invalidArgument(std::string(op) + ": mask " + describe(*mask) +
                             " does not broadcast to the scores shape " +
                             describeShape(scores));
  }
  return {};
}

} // namespace

Status attention(ThreadPool &pool, const TensorRef &q, const TensorRef &k,
                 const TensorRef &v, const std::optional<TensorRef> &mask,
                 bool causal, double scale, const TensorRef &out) {
  AttentionDims dims;
  if (Status s = checkAttention(q, k, v, mask, causal, scale, out, dims);
      s.failed())
    return s;
  if (out.size() == 0)
    return {};
  MaskKind kind = !mask                      ? MaskKind::none
                  : mask->dtype == DType::i1 ? MaskKind::boolean
                                             : MaskKind::additive;
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
                                               causal, scale, o);
      case MaskKind::boolean:
        return runAttention<T, MaskKind::boolean>(pool, dims, qd, kd, vd,
                                                  maskData, causal, scale, o);
      case MaskKind::additive:
        return runAttention<T, MaskKind::additive>(pool, dims, qd, kd, vd,
                                                   maskData, causal, scale, o);
      }
    }
  });
  return {};
}

} // namespace rp::runtime::host
