//===- HostAttentionCommon.h - attention's shared checks --------*- C++ -*-===//
//
// Private to lib/host: the argument checks, shapes and mask reading that
// HostAttention.cpp and HostGradientsAttention.cpp share, so that the
// forward and the backward accept exactly the same problems and read the
// mask the same way.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LIB_HOST_HOSTATTENTIONCOMMON_H
#define RP_RUNTIME_LIB_HOST_HOSTATTENTIONCOMMON_H

#include "HostCommon.h"

#include <optional>

namespace rp::runtime::host::detail {

enum class MaskKind { none, boolean, additive };

inline MaskKind maskKind(const std::optional<TensorRef> &mask) {
  return !mask                      ? MaskKind::none
         : mask->dtype == DType::i1 ? MaskKind::boolean
                                    : MaskKind::additive;
}

/// q [b, h, s, d], k [b, hkv, t, d], v [b, hkv, t, dv], and the output (or
/// output gradient) [b, h, s, dv]; the mask's strides broadcast to the
/// scores [b, h, s, t] (all 0 without a mask).
struct AttentionDims {
  int64_t b, h, s, d, hkv, t, dv;
  int64_t maskStrides[4] = {0, 0, 0, 0};
};

/// The gradients attention_grad writes, each of its primal's shape.
struct AttentionGradRefs {
  const TensorRef &dq, &dk, &dv;
};

/// The checks of attention (`grads` null: `y` is the output) and of
/// attention_grad (`y` is the output gradient, `grads` the gradients it
/// writes), in the order both have always run them, and the dims they
/// imply.
Status checkAttentionArgs(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v,
                          const std::optional<TensorRef> &mask, bool causal,
                          double scale, const TensorRef &y,
                          const AttentionGradRefs *grads, AttentionDims &dims);

/// Reads the mask bias (compute type) of query row and key.
template <typename T, MaskKind Kind> struct MaskReader {
  const void *mask;
  const int64_t *strides;

  /// The bias of key j for the query row whose mask offset is `base`.
  kernels::Compute<T> operator()(int64_t base, int64_t j) const {
    using C = kernels::Compute<T>;
    if constexpr (Kind == MaskKind::boolean)
      return static_cast<const Bool8 *>(mask)[base + j * strides[3]]
                 ? C(0)
                 : -kernels::kInfinity<C>();
    else if constexpr (Kind == MaskKind::additive)
      return kernels::load(static_cast<const T *>(mask)[base + j * strides[3]]);
    else
      return C(0);
  }
};

} // namespace rp::runtime::host::detail

#endif // RP_RUNTIME_LIB_HOST_HOSTATTENTIONCOMMON_H
