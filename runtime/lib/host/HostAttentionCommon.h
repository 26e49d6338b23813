//===- HostAttentionCommon.h - attention's shared checks --------*- C++ -*-===//
//
// Private to lib/host: the mask reading that HostAttention.cpp and
// HostGradientsAttention.cpp share, so that the forward and the backward
// read the mask the same way. Their argument checks are the kernels'
// shared ones (rp/runtime/kernels/Checks.h), as the cuda driver's are.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LIB_HOST_HOSTATTENTIONCOMMON_H
#define RP_RUNTIME_LIB_HOST_HOSTATTENTIONCOMMON_H

#include "HostCommon.h"

#include <optional>

namespace rp::runtime::host::detail {

using kernels::AttentionDims;
using kernels::AttentionGradRefs;
using kernels::checkAttentionArgs;
using kernels::MaskKind;
using kernels::maskKind;

/// Reads the mask bias (compute type) of query row and key.
template <typename T, MaskKind Kind> struct MaskReader {
  const void *mask;
  const int64_t *strides;
  /// t - s: query row i is at key position i + shift (segments).
  int64_t shift = 0;

  /// The bias of key j for query row i, whose mask offset is `base`.
  kernels::Compute<T> operator()(int64_t base, int64_t i, int64_t j) const {
    using C = kernels::Compute<T>;
    if constexpr (Kind == MaskKind::segments) {
      const int64_t *segment = static_cast<const int64_t *>(mask) + base;
      return segment[i + shift] == segment[j] ? C(0) : -kernels::kInfinity<C>();
    } else if constexpr (Kind == MaskKind::boolean)
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
