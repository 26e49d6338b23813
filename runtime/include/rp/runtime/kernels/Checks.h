//===- Checks.h - the kernels' argument checks, host and cuda ---*- C++ -*-===//
//
// What the host kernels and the cuda driver's dispatch both check before a
// kernel runs: shapes, dtypes and attributes, with the messages users see
// (they name the op and the offending tensor as describe() prints it), and
// the plans those checks produce (strided loops, matmul and attention
// shapes). Owned by both devices, private to neither, so that a call fails
// the same way on either; nothing here reads tensor data.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_KERNELS_CHECKS_H
#define RP_RUNTIME_KERNELS_CHECKS_H

#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"
#include "rp/runtime/kernels/Indexing.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace rp::runtime::kernels {

inline bool isInteger(DType t) { return t == DType::i32 || t == DType::i64; }

/// A non-negative shape, and data unless the tensor is empty.
Status checkTensor(const TensorRef &t, const char *role, const char *op);
/// checkTensor, plus the dtype `dtype`.
Status checkTensorOf(const TensorRef &t, DType dtype, const char *role,
                     const char *op);
/// checkTensor, plus `like`'s dtype and shape (a gradient and its primal).
Status checkLike(const char *op, const char *role, const TensorRef &t,
                 const TensorRef &like);
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
/// checkTensor, plus rank 2.
Status expectRank2(const char *op, const char *role, const TensorRef &t);
/// checkTensorOf `dtype`, plus exactly `shape`.
Status expectShape(const char *op, const char *role, const TensorRef &t,
                   DType dtype, const Shape &shape);
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

/// The rows of a softmax over one dimension: outer x n x inner elements,
/// each row n elements `inner` apart.
struct SoftmaxRows {
  int64_t outer = 1, n = 0, inner = 1;
};

/// A row op's operands (softmax, the norms): a float input and an output
/// of its dtype and shape.
Status checkRowOp(const char *op, const TensorRef &x, const TensorRef &out);
/// An elementwise op's input `x` and `out`: valid tensors, `out` of x's
/// dtype and element count (unary, dropout, the row ops).
Status checkUnaryOutput(const char *op, const TensorRef &x,
                        const TensorRef &out);

/// softmax and log_softmax (`log`): x float, out of its dtype and shape,
/// `dim` within its rank.
Status checkSoftmax(bool log, const TensorRef &x, int64_t dim,
                    const TensorRef &out, SoftmaxRows &rows);

/// softmax_grad and log_softmax_grad (`log`): y (the forward's output)
/// float, the output gradient dy and input gradient dx of its dtype and
/// shape, `dim` within its rank.
Status checkSoftmaxGrad(bool log, const TensorRef &y, const TensorRef &dy,
                        int64_t dim, const TensorRef &dx, SoftmaxRows &rows);

/// Checks concat's operands (at least one input, each of out's dtype and
/// shape but along `dim`, adding up to out's size along it); gives the
/// element counts before and after `dim`.
Status checkConcat(const std::vector<TensorRef> &inputs, int64_t dim,
                   const TensorRef &out, int64_t &outer, int64_t &inner);

//===----------------------------------------------------------------------===//
// The fused LM-head loss (lib/kernels/LossChecks.cpp)
//===----------------------------------------------------------------------===//

/// Tokens (rows), hidden width (k) and classes of a fused loss call.
struct LinearLossShape {
  int64_t rows = 0, k = 0, classes = 0;
};

/// Checks rp.linear_cross_entropy(_grad)'s operands: float `hidden`
/// [..., K], `weight` [classes, K] of its type, i32/i64 `labels` of
/// hidden's shape without the last dimension, a positive `chunk`. The
/// label values are the device's to check, where the labels are.
Status checkLinearLoss(const char *op, const TensorRef &hidden,
                       const TensorRef &weight, const TensorRef &labels,
                       int64_t chunk, LinearLossShape &shape);

/// Checks the gradient's outputs: hidden's and weight's dtype and shapes.
Status checkLinearLossGradients(const char *op, const TensorRef &hidden,
                                const TensorRef &weight,
                                const TensorRef &dhidden,
                                const TensorRef &dweight);

/// The loss sum's type for logits (or hidden states) of `dtype`: f32, f64
/// for f64. A bf16 sum would round the printed loss to 3 digits, an f16
/// one overflow past 65504.
inline DType lossSumType(DType dtype) {
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

/// The outputs of a loss kernel (rp.cross_entropy, rp.linear_cross_entropy
/// on either device): a scalar loss sum of lossSumType(dtype) and a scalar
/// i64 count.
Status checkLossOutputs(const char *op, DType dtype, const TensorRef &lossSum,
                        const TensorRef &count);

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The mask operand: none, i1 (true keeps), additive (the query's float
/// type), or segments: an i64 [b, t] of each key position's document, the
/// query at position p = i + t - s keeping the keys of its own document
/// (packed rows; memory O(t), not the O(s t) of a boolean mask).
enum class MaskKind { none, boolean, additive, segments };

inline MaskKind maskKind(const std::optional<TensorRef> &mask) {
  return !mask                       ? MaskKind::none
         : mask->dtype == DType::i1  ? MaskKind::boolean
         : mask->dtype == DType::i64 ? MaskKind::segments
                                     : MaskKind::additive;
}

/// q [b, h, s, d], k [b, hkv, t, d], v [b, hkv, t, dv], and the output (or
/// output gradient) [b, h, s, dv]; the mask's strides broadcast to the
/// scores [b, h, s, t] (all 0 without a mask; segments: {t, 0, 0, 1}).
struct AttentionDims {
  int64_t b, h, s, d, hkv, t, dv;
  int64_t maskStrides[4] = {0, 0, 0, 0};
};

/// What rp.attention's `window` and `softcap` attributes add (0: none).
/// The plan carries them as attention's third int and second float.
struct AttentionExtras {
  /// A sliding window of causal attention: the query at position p sees
  /// the keys in (p - window, p].
  int64_t window = 0;
  /// Soft-capping of the scaled scores, cap * tanh(x / cap).
  double softcap = 0;
  /// GPT-OSS's attention sinks: a learned logit per query head ([h], the
  /// query's dtype), one more column in each row's softmax whose
  /// probability is dropped (the sink has no value). Null: none.
  const TensorRef *sinks = nullptr;
  /// attention_grad only: the sinks' gradient [h], written whole (not
  /// added to). Null: not wanted.
  const TensorRef *sinksGrad = nullptr;
};

/// The extras of a plan call's attributes: ints [causal, has_mask,
/// (window)], floats [scale, (softcap)].
inline AttentionExtras attentionExtrasOf(const std::vector<int64_t> &ints,
                                         const std::vector<double> &floats) {
  AttentionExtras e;
  e.window = ints.size() > 2 ? ints[2] : 0;
  e.softcap = floats.size() > 1 ? floats[1] : 0.0;
  return e;
}

/// Whether a plan call's ints [causal, has_mask, window, has_sinks] give
/// the attention sinks: an input after the mask (and attention_grad's
/// fourth output, their gradient).
inline bool attentionHasSinks(const std::vector<int64_t> &ints) {
  return ints.size() > 3 && ints[3] != 0;
}

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
                          const AttentionGradRefs *grads, AttentionDims &dims,
                          const AttentionExtras &extras = {});

//===----------------------------------------------------------------------===//
// Mixture of experts (MoEChecks.cpp)
//===----------------------------------------------------------------------===//
//
// The shapes and dtypes of the rp.moe.* kernels, checked the same way on
// both devices. What needs the data (expert indices in range, counts that
// fit, positions in range and unique) is the host kernels' and the cuda
// kernels' own business: the cuda device never reads a count on the host.
// Names: T tokens, E experts, K choices per token, H hidden, R rows.

/// moe_route: logits [T, E] float, weights [T, K] of its dtype with
/// 1 <= K <= E, experts [T, K] i64.
Status checkMoERoute(const TensorRef &logits, const TensorRef &weights,
                     const TensorRef &experts);

/// moe_route_grad: logits [T, E] float, experts [T, K] i64, and the
/// weights' gradient [T, K] and logits' gradient [T, E] of logits' dtype.
Status checkMoERouteGrad(const TensorRef &logits, const TensorRef &experts,
                         const TensorRef &dweights, const TensorRef &dlogits);

/// moe_dispatch: x [T, H], experts [T, K] i64, rows [T*K, H] of x's dtype,
/// positions [T, K] i32 (T*K fits in i32), counts [E] i32.
Status checkMoEDispatch(const TensorRef &x, const TensorRef &experts,
                        const TensorRef &rows, const TensorRef &positions,
                        const TensorRef &counts);

/// moe_grouped_matmul: x [R, Kin] float, weight [E, Kin, N] of its dtype
/// ([E, N, Kin] with transposeB), out [R, N], counts [E] i32.
Status checkMoEGroupedMatmul(const TensorRef &x, const TensorRef &weight,
                             const TensorRef &counts, bool transposeB,
                             const TensorRef &out);

/// moe_grouped_matmul_wgrad: x [R, Kin] float, dy [R, N], dweight
/// [E, Kin, N] ([E, N, Kin] with transposeB), counts [E] i32.
Status checkMoEGroupedMatmulWGrad(const TensorRef &x, const TensorRef &dy,
                                  const TensorRef &counts, bool transposeB,
                                  const TensorRef &dweight);

/// moe_combine: rows [R, H] float, positions [T, K] i32, optional weights
/// [T, K] and out [T, H] of rows' dtype.
Status checkMoECombine(const TensorRef &rows, const TensorRef &positions,
                       const std::optional<TensorRef> &weights,
                       const TensorRef &out);

/// moe_combine_grad: moe_combine's operands with the output gradient dy in
/// out's place, the rows' gradient (rows' shape) and, exactly when there
/// are weights, the weights' gradient [T, K].
Status checkMoECombineGrad(const TensorRef &rows, const TensorRef &positions,
                           const std::optional<TensorRef> &weights,
                           const TensorRef &dy, const TensorRef &drows,
                           const std::optional<TensorRef> &dweights);

} // namespace rp::runtime::kernels

#endif // RP_RUNTIME_KERNELS_CHECKS_H
