//===- HostCommon.h - shared machinery of the host kernels ------*- C++ -*-===//
//
// Private to lib/host: dtype dispatch, argument checks that produce the
// messages users see, fixed chunking, and the strided loop that every
// broadcasting and data movement kernel is built on.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_LIB_HOST_HOSTCOMMON_H
#define RP_RUNTIME_LIB_HOST_HOSTCOMMON_H

#include "rp/runtime/Half.h"
#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/ThreadPool.h"
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
using kernels::kMaxRank;
using kernels::Tag;
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

inline bool isInteger(DType t) { return t == DType::i32 || t == DType::i64; }

/// A non-negative shape, and data unless the tensor is empty.
Status checkTensor(const TensorRef &t, const char *role, const char *op);
/// checkTensor, plus the dtype `dtype`.
Status checkTensorOf(const TensorRef &t, DType dtype, const char *role,
                     const char *op);
/// Same element count, for the ops whose output shape is the input's.
Status checkSameShape(const TensorRef &a, const TensorRef &b, const char *op);
/// The axis and epsilon of layer_norm and rms_norm and of their gradients:
/// the normalized dimensions are x's from `axis` on.
Status checkNormAxis(const char *op, const TensorRef &x, int64_t axis,
                     double epsilon);
/// `t`, when present, has x's dtype and the normalized shape (x's dimensions
/// from `axis` on): the scale and bias of the norms and their gradients.
Status checkNormalized(const char *op, const char *role,
                       const std::optional<TensorRef> &t, const TensorRef &x,
                       int64_t axis);
/// "op: <what> is not supported for <dtype>".
Status unsupportedDType(const char *op, DType dtype, const char *what = "");

/// Reduction dimensions: non-empty, strictly increasing, within `x`'s rank.
Status checkReduceDims(const char *op, const std::vector<int64_t> &dims,
                       const TensorRef &x);

/// Checks that `window` (described as `role`) is the slice of `full` at
/// `offsets` with `strides`, and gives the slice's first element in `full`
/// (`base`) and its stride per dimension (`fullStrides`), both in elements.
/// slice reads this window and slice_grad writes it.
Status sliceWindow(const char *op, const TensorRef &full,
                   const TensorRef &window, const char *role,
                   const std::vector<int64_t> &offsets,
                   const std::vector<int64_t> &strides, int64_t &base,
                   std::vector<int64_t> &fullStrides);

/// Checks gather's indices (i32 or i64), `axis` of `x`, and that `gathered`
/// (described as `role`) has x's shape with dimension `axis` replaced by
/// the indices' shape; then gives every index resolved into [0, size of
/// `axis`) (negative ones count from the end). gather reads x through them
/// and gather_grad scatters back into x's gradient.
Status gatherIndices(const char *op, const TensorRef &x,
                     const TensorRef &indices, int64_t axis,
                     const TensorRef &gathered, const char *role,
                     std::vector<int64_t> &normalized);

/// The numpy broadcast of `shapes`, or false.
bool broadcastShapes(const std::vector<const Shape *> &shapes, Shape &result);

/// Output elements per chunk of the elementwise and movement kernels.
constexpr int64_t kElementGrain = int64_t(1) << 15;

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

constexpr int kMaxOperands = 3;

/// A contiguous output read from up to kMaxOperands operands, each through
/// a stride per output dimension. Dimensions of size 1 are dropped and
/// neighbours that every operand walks contiguously are merged, so the loop
/// sees the fewest and longest runs possible. Rank is at least 1.
struct StridedPlan {
  int rank = 0;
  int numOperands = 0;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxOperands][kMaxRank];

  int64_t innerStride(int operand) const { return strides[operand][rank - 1]; }
};

/// `strides[k]` holds operand k's stride for every dimension of `shape`.
Status makeStridedPlan(const Shape &shape,
                       const std::vector<std::vector<int64_t>> &strides,
                       StridedPlan &plan, const char *op);

/// The plan of operands broadcast to `shape` (numpy rules).
Status makeBroadcastPlan(const Shape &shape,
                         const std::vector<const TensorRef *> &operands,
                         StridedPlan &plan, const char *op);

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

/// The problem after shape checks: `batch` independent [m, k] x [k, n]
/// products reading operand matrices at the given element offsets.
struct MatmulProblem {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  std::vector<int64_t> aOffset, bOffset;
};

/// Checks a matmul's operands (rp.matmul: [batch..., M, K] x [batch...,
/// K, N], numpy-broadcast batches, transpose flags on the last two) and
/// plans it; shared by the host and cuda kernels.
Status planMatmul(const TensorRef &a, const TensorRef &b, bool ta, bool tb,
                  const TensorRef &out, MatmulProblem &p);

/// Checks the operands of a broadcasting op (numpy rules; the output has
/// the broadcast shape) and plans its loop.
Status planBroadcastOp(const char *op,
                       const std::vector<const TensorRef *> &operands,
                       const TensorRef &out, StridedPlan &plan);

/// Checks logits [..., C] and integer labels [...] (their shapes, not the
/// label values); gives the number of rows and of classes.
Status checkLogitsShape(const char *op, const TensorRef &logits,
                        const TensorRef &labels, int64_t &rows,
                        int64_t &classes);

/// Checks a gather's shapes (`gathered` is x with dimension `axis`
/// replaced by the indices' shape; not the index values); gives the
/// element counts before and after `axis`.
Status gatherShape(const char *op, const TensorRef &x, const TensorRef &indices,
                   int64_t axis, const TensorRef &gathered, const char *role,
                   int64_t &outer, int64_t &inner);

} // namespace rp::runtime::host::detail

#endif // RP_RUNTIME_LIB_HOST_HOSTCOMMON_H
