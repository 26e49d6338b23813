//===- HostCommon.h - shared machinery of the host kernels ------*- C++ -*-===//
//
// Private to lib/host: dtype dispatch, fixed chunking, and the strided loop
// that every broadcasting and data movement kernel is built on. The
// argument checks are the kernels' shared ones (rp/runtime/kernels/
// Checks.h, which the cuda driver uses too), brought into this namespace.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LIB_HOST_HOSTCOMMON_H
#define RP_RUNTIME_LIB_HOST_HOSTCOMMON_H

#include "rp/runtime/Half.h"
#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/kernels/Checks.h"
#include "rp/runtime/kernels/Indexing.h"
#include "rp/runtime/kernels/Numeric.h"
#include "rp/runtime/kernels/Visit.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace rp::runtime::host::detail {

using kernels::Bool8;
using kernels::broadcastShapes;
using kernels::checkConcat;
using kernels::checkLogitsShape;
using kernels::checkNormalized;
using kernels::checkNormAxis;
using kernels::checkReduceDims;
using kernels::checkRowOp;
using kernels::checkSameShape;
using kernels::checkSoftmax;
using kernels::checkSoftmaxGrad;
using kernels::checkTensor;
using kernels::checkTensorOf;
using kernels::gatherIndices;
using kernels::gatherShape;
using kernels::isInteger;
using kernels::kMaxOperands;
using kernels::kMaxRank;
using kernels::makeBroadcastPlan;
using kernels::makeStridedPlan;
using kernels::MatmulProblem;
using kernels::planBroadcastOp;
using kernels::planMatmul;
using kernels::sliceWindow;
using kernels::SoftmaxRows;
using kernels::StridedPlan;
using kernels::Tag;
using kernels::unsupportedDType;
using kernels::visitDType;
using kernels::visitElementSize;

/// Calls fn(Tag<T>{}) for the float storage type of `dtype`; nothing for
/// the others, which the callers reject before.
template <typename Fn> void visitFloat(DType dtype, Fn &&fn) {
  visitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<kernels::Compute<T>>)
      fn(tag);
  });
}

/// Output elements per chunk of the elementwise and movement kernels.
constexpr int64_t kElementGrain = int64_t(1) << 15;

/// Calls f(i) for every element index i < n, in chunks of kElementGrain
/// over the pool: the loop of the elementwise kernels (unary, cast,
/// dropout).
template <typename F> void forEachElement(ThreadPool &pool, int64_t n, F &&f) {
  parallelRanges(pool, n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      f(i);
  });
}

/// Rows per chunk for row kernels whose rows hold `rowSize` elements: about
/// kElementGrain elements of work per chunk, at least one row.
inline int64_t rowGrain(int64_t rowSize) {
  return std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, rowSize));
}

/// Runs fn(begin, end) over the fixed chunks of [0, n).
template <typename Fn>
void parallelRanges(ThreadPool &pool, int64_t n, int64_t grain, Fn &&fn) {
  ChunkPlan plan = fixedChunks(n, grain);
  pool.parallelFor(plan.numChunks, [&](int64_t chunk) {
    fn(plan.begin(chunk), plan.end(chunk));
  });
}

//===----------------------------------------------------------------------===//
// Strided loops
//===----------------------------------------------------------------------===//

/// Calls fn(outIndex, offsets, count) for every run of the innermost merged
/// dimension within output positions [begin, end): output elements
/// outIndex + i read operand k at offsets[k] + i * plan.innerStride(k).
template <typename Fn>
void forEachRun(const StridedPlan &plan, int64_t begin, int64_t end, Fn &&fn) {
  const int rank = plan.rank, last = rank - 1;
  int64_t index[kMaxRank];
  int64_t offsets[kMaxOperands] = {0, 0, 0};
  int64_t linear = begin;
  for (int d = last; d >= 0; --d) {
    index[d] = linear % plan.shape[d];
    linear /= plan.shape[d];
    for (int k = 0; k < plan.numOperands; ++k)
      offsets[k] += index[d] * plan.strides[k][d];
  }
  for (int64_t pos = begin; pos < end;) {
    int64_t count = std::min(plan.shape[last] - index[last], end - pos);
    fn(pos, static_cast<const int64_t *>(offsets), count);
    pos += count;
    if (pos >= end)
      return;
    // The run ended at the end of the innermost dimension: wrap it to 0 and
    // carry into the outer ones.
    for (int k = 0; k < plan.numOperands; ++k)
      offsets[k] -= index[last] * plan.strides[k][last];
    index[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      for (int k = 0; k < plan.numOperands; ++k)
        offsets[k] += plan.strides[k][d];
      if (++index[d] < plan.shape[d])
        break;
      for (int k = 0; k < plan.numOperands; ++k)
        offsets[k] -= index[d] * plan.strides[k][d];
      index[d] = 0;
    }
  }
}

/// Copies elements of `elementSize` bytes from `in` (through plan operand 0)
/// to the contiguous `out`: transpose, slice and broadcast are all this.
void stridedCopy(ThreadPool &pool, const StridedPlan &plan, size_t elementSize,
                 const void *in, void *out, int64_t total);

} // namespace rp::runtime::host::detail

#endif // RP_RUNTIME_LIB_HOST_HOSTCOMMON_H
