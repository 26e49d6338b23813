//===- Indexing.h - row-major and broadcast index mapping -------*- C++ -*-===//
//
// Every data movement and broadcasting kernel reduces to one question: where
// in an operand does element `i` of the (contiguous, row-major) output come
// from? The answer is a stride per output dimension: the operand's own
// stride, 0 where the operand is stretched (broadcast), a permuted stride
// for transpose, a scaled one for strided slices. Fixed-size arrays keep
// these usable from device code; kMaxRank bounds the rank after adjacent
// dimensions are merged, which is far below what any model needs.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_INDEXING_H
#define RP_RUNTIME_KERNELS_INDEXING_H

#include "rp/runtime/kernels/Annotations.h"

#include <cstdint>

namespace rp::runtime::kernels {

constexpr int kMaxRank = 16;

/// Row-major strides (in elements) of a contiguous tensor.
RP_HD inline void contiguousStrides(const int64_t *shape, int rank,
                                    int64_t *strides) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
}

/// The strides with which a contiguous operand of shape `in` is read at the
/// indices of the broadcast shape `out` (numpy rules: shapes aligned at the
/// trailing dimension; a missing or stretched dimension reads with stride 0).
/// Returns false when `in` does not broadcast to `out`.
RP_HD inline bool broadcastStrides(const int64_t *in, int inRank,
                                   const int64_t *out, int outRank,
                                   int64_t *strides) {
  if (inRank > outRank)
    return false;
  int64_t stride = 1;
  for (int d = outRank - 1; d >= 0; --d) {
    int inDim = d - (outRank - inRank);
    if (inDim < 0) {
      strides[d] = 0;
      continue;
    }
    if (in[inDim] == out[d]) {
      strides[d] = in[inDim] == 1 ? 0 : stride;
    } else if (in[inDim] == 1) {
      strides[d] = 0;
    } else {
      return false;
    }
    stride *= in[inDim];
  }
  return true;
}

/// The offset, under `strides`, of the element at row-major position
/// `linear` of `shape`.
RP_HD inline int64_t offsetAt(int64_t linear, const int64_t *shape,
                              const int64_t *strides, int rank) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    int64_t size = shape[d];
    offset += (linear % size) * strides[d];
    linear /= size;
  }
  return offset;
}

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_INDEXING_H
