//===- Gradients.h - backward kernels and the loss on the host --*- C++ -*-===//
//
// The kernels the backward half of a training plan calls: the loss and its
// gradient, and the vector-Jacobian products of the ops whose backward is
// not itself a composition of forward ops. Same contract as Kernels.h:
// contiguous row-major tensors, preallocated outputs, fixed chunking so the
// bits do not depend on the thread count, f32/f16/bf16 storage with f32
// accumulation and f64 as the reference, the math in kernels/*.h as RP_HD
// functions.
//
// Every output gradient is written, not accumulated into: the executor sums
// the gradients of a value used twice.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HOST_GRADIENTS_H
#define RP_RUNTIME_HOST_GRADIENTS_H

#include "rp/runtime/host/Kernels.h"

namespace rp::runtime::host {

/// Cross-entropy of `logits` [..., C] against integer `labels` [...]:
/// writes the sum over non-ignored positions of -log_softmax(logits)[label]
/// to `lossSum` (an f32 scalar, f64 for f64 logits; accumulated in f64 in
/// a fixed order) and the number of non-ignored
/// positions to `count` (an i64 scalar). A label outside [0, C) that is not
/// `ignoreIndex` is an InvalidArgument status naming its position.
Status crossEntropy(ThreadPool &pool, const TensorRef &logits,
                    const TensorRef &labels, int64_t ignoreIndex,
                    const TensorRef &lossSum, const TensorRef &count);

/// dlogits = scale * (softmax(logits) - onehot(label)) on non-ignored
/// positions, 0 on ignored ones. `scale` is dLoss/dlossSum (1 / the number
/// of non-ignored labels in the global batch, for a token-weighted mean).
Status crossEntropyGrad(ThreadPool &pool, const TensorRef &logits,
                        const TensorRef &labels, int64_t ignoreIndex,
                        double scale, const TensorRef &dlogits);

/// rp.linear_cross_entropy: crossEntropy(hidden * weight^T, labels) with
/// hidden [..., K] and weight [C, K], computing the logits `chunk` rows at a
/// time (HostLinearLoss.cpp). The bits do not depend on `chunk`.
Status linearCrossEntropy(ThreadPool &pool, const TensorRef &hidden,
                          const TensorRef &weight, const TensorRef &labels,
                          int64_t ignoreIndex, int64_t chunk,
                          const TensorRef &lossSum, const TensorRef &count);

/// rp.linear_cross_entropy_grad: with dl = crossEntropyGrad(hidden *
/// weight^T, ...), dhidden = dl * weight and dweight = dl^T * hidden, dl
/// held `chunk` rows at a time.
Status linearCrossEntropyGrad(ThreadPool &pool, const TensorRef &hidden,
                              const TensorRef &weight, const TensorRef &labels,
                              int64_t ignoreIndex, int64_t chunk, double scale,
                              const TensorRef &dhidden,
                              const TensorRef &dweight);

/// dx = dy * f'(x) for every UnaryKind (f'(x) recomputed from x).
Status unaryGrad(ThreadPool &pool, UnaryKind kind, const TensorRef &x,
                 const TensorRef &dy, const TensorRef &dx);

/// Sums `x` over the dimensions that numpy broadcasting stretched to make
/// x's shape from `out`'s shape (leading dimensions and size-1 ones): the
/// VJP of every broadcasting op. Fixed summation order.
Status sumToShape(ThreadPool &pool, const TensorRef &x, const TensorRef &out);

/// Gradients of binary max/min: dy goes to lhs where lhs wins (ties to lhs,
/// NaN to the NaN side as the forward propagates it), else to rhs. `dlhs`
/// and `drhs` have the broadcast (output) shape; callers reduce with
/// sumToShape.
Status maxMinGrad(ThreadPool &pool, bool isMax, const TensorRef &lhs,
                  const TensorRef &rhs, const TensorRef &dy,
                  const TensorRef &dlhs, const TensorRef &drhs);

/// Gradient of reduce max/min: dy (the reduced shape, keepDims or not) goes
/// to the first position along the reduced dims that attains the extremum.
Status reduceExtremumGrad(ThreadPool &pool, bool isMax, const TensorRef &x,
                          const std::vector<int64_t> &dims, bool keepDims,
                          const TensorRef &dy, const TensorRef &dx);

/// Softmax backward from the forward output y: dx = y * (dy - sum(dy * y));
/// log-softmax: dx = dy - exp(y) * sum(dy).
Status softmaxGrad(ThreadPool &pool, const TensorRef &y, const TensorRef &dy,
                   int64_t dim, bool log, const TensorRef &dx);

/// Layer norm backward over dims [axis, rank); recomputes mean and rstd
/// from x. dscale / dbias (optional, the normalized shape) are summed over
/// the leading dimensions in a fixed order.
Status layerNormGrad(ThreadPool &pool, const TensorRef &x,
                     const std::optional<TensorRef> &scale, int64_t axis,
                     double epsilon, const TensorRef &dy, const TensorRef &dx,
                     const std::optional<TensorRef> &dscale,
                     const std::optional<TensorRef> &dbias);

/// RMS norm backward; dscale optional.
Status rmsNormGrad(ThreadPool &pool, const TensorRef &x,
                   const std::optional<TensorRef> &scale, int64_t axis,
                   double epsilon, const TensorRef &dy, const TensorRef &dx,
                   const std::optional<TensorRef> &dscale);

/// Attention backward (shapes as attention()): recomputes the probabilities
/// row by row (memory O(T) per worker, as the fused GPU kernel), writes dq,
/// dk and dv; with grouped-query attention dk/dv sum over the query heads
/// that share a key/value head, in a fixed order. The mask gets no
/// gradient.
Status attentionGrad(ThreadPool &pool, const TensorRef &q, const TensorRef &k,
                     const TensorRef &v, const std::optional<TensorRef> &mask,
                     bool causal, double scale, const TensorRef &dy,
                     const TensorRef &dq, const TensorRef &dk,
                     const TensorRef &dv,
                     const kernels::AttentionExtras &extras = {});

/// Gather backward: dx = zeros, then dy scatter-added at the indices along
/// `axis` (negative indices count from the end); repeated indices
/// accumulate in index order, so the result is deterministic.
Status gatherGrad(ThreadPool &pool, const TensorRef &indices, int64_t axis,
                  const TensorRef &dy, const TensorRef &dx);

/// Slice backward: dx = zeros with dy written into the strided window.
Status sliceGrad(ThreadPool &pool, const TensorRef &dy,
                 const std::vector<int64_t> &offsets,
                 const std::vector<int64_t> &strides, const TensorRef &dx);

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_GRADIENTS_H
