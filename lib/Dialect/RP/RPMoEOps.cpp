//===- RPMoEOps.cpp - rp mixture-of-experts verifiers and VJPs ------------===//
//
// The shape rules of the rp.moe.* ops and the vector-Jacobian products of
// the differentiable ones (kept here rather than in RPVJPRules.cpp so the
// mixture-of-experts family reads as one unit).
//
//===----------------------------------------------------------------------===//

#include "ShapeDiagnostics.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::rp;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `what` has exactly `shape`.
static LogicalResult expectShape(Operation *op, StringRef what, Value v,
                                 ArrayRef<int64_t> shape) {
  auto t = tensorType(v);
  if (t.getShape() != shape)
    return op->emitOpError("expected ")
           << what << " of shape " << ShapeStr{shape} << " but got "
           << ShapeStr{t.getShape()};
  return success();
}

static LogicalResult expectRank(Operation *op, StringRef what, Value v,
                                int64_t rank, StringRef meaning) {
  auto t = tensorType(v);
  if (t.getRank() != rank)
    return op->emitOpError("expected ")
           << what << " of rank " << rank << " (" << meaning << ") but got "
           << ShapeStr{t.getShape()};
  return success();
}

/// Positions and counts are i32: kernels index rows with them.
static LogicalResult expectI32(Operation *op, StringRef what, Value v) {
  if (!tensorType(v).getElementType().isInteger(32))
    return op->emitOpError("expected ")
           << what << " of element type i32 but got "
           << tensorType(v).getElementType();
  return success();
}

/// Expert indices are i64, as PyTorch's topk gives them.
static LogicalResult expectI64(Operation *op, Value experts) {
  if (!tensorType(experts).getElementType().isInteger(64))
    return op->emitOpError("expected experts of element type i64 but got ")
           << tensorType(experts).getElementType();
  return success();
}

static LogicalResult expectElement(Operation *op, StringRef what, Value v,
                                   Type element) {
  if (tensorType(v).getElementType() != element)
    return op->emitOpError("expected ")
           << what << " of element type " << element << " but got "
           << tensorType(v).getElementType();
  return success();
}

static LogicalResult verifyNormalize(Operation *op, MoESoftmax softmax,
                                     bool normalize) {
  if (normalize && softmax == MoESoftmax::after)
    return op->emitOpError("normalize applies only with softmax = before (the "
                           "weights of softmax = after already sum to 1)");
  return success();
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult MoERouteOp::verify() {
  if (failed(expectRank(*this, "logits", getLogits(), 2, "[tokens, experts]")))
    return failure();
  auto logits = getLogits().getType();
  int64_t tokens = logits.getDimSize(0), experts = logits.getDimSize(1);
  int64_t k = getTopK();
  if (k > experts)
    return emitOpError("top_k = ")
           << k << " is more than the " << experts << " experts";
  if (failed(expectShape(*this, "weights", getWeights(), {tokens, k})) ||
      failed(expectElement(*this, "weights", getWeights(),
                           logits.getElementType())) ||
      failed(expectShape(*this, "experts", getExperts(), {tokens, k})) ||
      failed(expectI64(*this, getExperts())))
    return failure();
  return verifyNormalize(*this, getSoftmax(), getNormalize());
}

LogicalResult MoERouteGradOp::verify() {
  if (failed(
          expectRank(*this, "logits", getLogits(), 2, "[tokens, experts]")) ||
      failed(expectRank(*this, "experts", getExperts(), 2, "[tokens, top_k]")))
    return failure();
  auto logits = getLogits().getType();
  auto experts = getExperts().getType();
  int64_t k = experts.getDimSize(1);
  if (experts.getDimSize(0) != logits.getDimSize(0) || k > logits.getDimSize(1))
    return emitOpError("expected experts of shape [")
           << logits.getDimSize(0) << ", k] with k <= " << logits.getDimSize(1)
           << " but got " << ShapeStr{experts.getShape()};
  if (failed(expectI64(*this, getExperts())) ||
      failed(expectShape(*this, "grad", getGrad(), experts.getShape())) ||
      failed(expectElement(*this, "grad", getGrad(), logits.getElementType())))
    return failure();
  return verifyNormalize(*this, getSoftmax(), getNormalize());
}

LogicalResult MoEDispatchOp::verify() {
  if (failed(expectRank(*this, "input", getInput(), 2, "[tokens, hidden]")) ||
      failed(
          expectRank(*this, "experts", getExperts(), 2, "[tokens, top_k]")) ||
      failed(expectRank(*this, "counts", getCounts(), 1, "[experts]")))
    return failure();
  auto in = getInput().getType();
  auto experts = getExperts().getType();
  int64_t tokens = in.getDimSize(0), hidden = in.getDimSize(1);
  int64_t k = experts.getDimSize(1);
  if (experts.getDimSize(0) != tokens)
    return emitOpError("expected experts for ")
           << tokens << " tokens but got " << ShapeStr{experts.getShape()};
  if (failed(expectI64(*this, getExperts())))
    return failure();
  if (failed(expectShape(*this, "rows", getRows(), {tokens * k, hidden})) ||
      failed(expectElement(*this, "rows", getRows(), in.getElementType())) ||
      failed(expectShape(*this, "positions", getPositions(), {tokens, k})) ||
      failed(expectI32(*this, "positions", getPositions())) ||
      failed(expectI32(*this, "counts", getCounts())))
    return failure();
  if (getCounts().getType().getDimSize(0) < 1)
    return emitOpError("expected at least one expert");
  return success();
}

/// rp.moe.grouped_matmul and its weight gradient share the layout of the
/// weight stack: [E, K, N], or [E, N, K] with transpose_b.
static LogicalResult verifyGroupedShapes(Operation *op, Value input,
                                         Value weight, StringRef weightWhat,
                                         Value counts, Value output,
                                         StringRef outputWhat,
                                         bool transposeB) {
  if (failed(expectRank(op, "input", input, 2, "[rows, in]")) ||
      failed(expectRank(op, weightWhat, weight, 3,
                        transposeB ? "[experts, out, in]"
                                   : "[experts, in, out]")) ||
      failed(expectRank(op, "counts", counts, 1, "[experts]")) ||
      failed(expectI32(op, "counts", counts)))
    return failure();
  auto in = tensorType(input), w = tensorType(weight);
  int64_t experts = w.getDimSize(0);
  int64_t kIn = w.getDimSize(transposeB ? 2 : 1);
  int64_t nOut = w.getDimSize(transposeB ? 1 : 2);
  if (tensorType(counts).getDimSize(0) != experts)
    return op->emitOpError("expected counts for the ")
           << experts << " experts of the " << weightWhat << " but got "
           << ShapeStr{tensorType(counts).getShape()};
  if (in.getDimSize(1) != kIn)
    return op->emitOpError("input rows have ")
           << in.getDimSize(1) << " features but the " << weightWhat
           << " takes " << kIn;
  return expectShape(op, outputWhat, output, {in.getDimSize(0), nOut});
}

LogicalResult MoEGroupedMatmulOp::verify() {
  return verifyGroupedShapes(*this, getInput(), getWeight(), "weight",
                             getCounts(), getResult(), "result",
                             getTransposeB());
}

LogicalResult MoEGroupedMatmulWGradOp::verify() {
  return verifyGroupedShapes(*this, getInput(), getResult(), "result",
                             getCounts(), getGrad(), "grad", getTransposeB());
}

/// rows [R, H], positions [T, K] i32, weights [T, K], combined [T, H].
static LogicalResult verifyCombineShapes(Operation *op, Value rows,
                                         Value positions, Value weights,
                                         Value combined, StringRef what) {
  if (failed(expectRank(op, "rows", rows, 2, "[rows, hidden]")) ||
      failed(expectRank(op, "positions", positions, 2, "[tokens, top_k]")) ||
      failed(expectI32(op, "positions", positions)))
    return failure();
  auto pos = tensorType(positions);
  int64_t tokens = pos.getDimSize(0), k = pos.getDimSize(1);
  if (pos.getNumElements() > tensorType(rows).getDimSize(0))
    return op->emitOpError("positions name ")
           << pos.getNumElements() << " rows but there are only "
           << tensorType(rows).getDimSize(0);
  if (weights && (failed(expectShape(op, "weights", weights, {tokens, k})) ||
                  failed(expectElement(op, "weights", weights,
                                       tensorType(rows).getElementType()))))
    return failure();
  if (failed(expectShape(op, what, combined,
                         {tokens, tensorType(rows).getDimSize(1)})) ||
      failed(
          expectElement(op, what, combined, tensorType(rows).getElementType())))
    return failure();
  return success();
}

LogicalResult MoECombineOp::verify() {
  return verifyCombineShapes(*this, getRows(), getPositions(), getWeights(),
                             getResult(), "result");
}

LogicalResult MoECombineGradOp::verify() {
  if (failed(verifyCombineShapes(*this, getRows(), getPositions(), getWeights(),
                                 getGrad(), "grad")))
    return failure();
  if (getRowsGrad().getType() != getRows().getType())
    return emitOpError("expected the rows' gradient to have the rows' type ")
           << getRows().getType();
  size_t expected = getWeights() ? 1 : 0;
  if (getWeightsGrad().size() != expected)
    return emitOpError("expected ")
           << expected << " weights gradient" << (expected == 1 ? "" : "s")
           << " (one with weights) but got " << getWeightsGrad().size();
  if (getWeights() && getWeightsGrad()[0].getType() != getWeights().getType())
    return emitOpError("expected the weights' gradient to have the weights' "
                       "type ")
           << getWeights().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// VJP rules
//===----------------------------------------------------------------------===//

LogicalResult MoERouteOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                   SmallVectorImpl<Value> &dxs) {
  dxs.assign({Value()});
  // Only the weights carry a gradient; the experts are integers.
  if (!dys[0])
    return success();
  dxs[0] = MoERouteGradOp::create(b, getLoc(), getLogits().getType(),
                                  getLogits(), getExperts(), dys[0],
                                  getSoftmax(), getNormalize());
  return success();
}

LogicalResult MoEDispatchOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &dxs) {
  dxs.assign({Value(), Value()});
  if (!dys[0])
    return success();
  dxs[0] = MoECombineOp::create(b, getLoc(), getInput().getType(), dys[0],
                                getPositions(), Value());
  return success();
}

LogicalResult MoEGroupedMatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                           SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  bool tb = getTransposeB();
  // y = x W (W [K, N]) gives dx = dy W^T; y = x W^T (W [N, K]) gives dx =
  // dy W: the same stack read with the other transpose.
  Value dx = MoEGroupedMatmulOp::create(b, loc, getInput().getType(), dys[0],
                                        getWeight(), getCounts(), !tb);
  Value dw = MoEGroupedMatmulWGradOp::create(
      b, loc, getWeight().getType(), getInput(), dys[0], getCounts(), tb);
  dxs.assign({dx, dw, Value()});
  return success();
}

LogicalResult MoECombineOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &dxs) {
  SmallVector<Type> weightGradTypes;
  if (getWeights())
    weightGradTypes.push_back(getWeights().getType());
  auto grad = MoECombineGradOp::create(b, getLoc(), getRows().getType(),
                                       weightGradTypes, getRows(),
                                       getPositions(), getWeights(), dys[0]);
  dxs.assign({grad.getRowsGrad(), Value()});
  if (getWeights())
    dxs.push_back(grad.getWeightsGrad()[0]);
  return success();
}
