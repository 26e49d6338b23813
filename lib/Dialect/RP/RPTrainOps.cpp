//===- RPTrainOps.cpp - rp loss and gradient op verifiers -----------------===//

#include "ShapeDiagnostics.h"
#include "rp/Dialect/RP/RPOps.h"

using namespace mlir;
using namespace mlir::rp;

/// Labels have the logits' shape without its last (class) dimension.
static LogicalResult verifyLabels(Operation *op, RankedTensorType logits,
                                  RankedTensorType labels) {
  if (logits.getRank() < 1 ||
      labels.getShape() != logits.getShape().drop_back())
    return op->emitOpError("expected labels of shape ")
           << ShapeStr{logits.getShape().drop_back()}
           << " (the logits without the class dimension) but got "
           << ShapeStr{labels.getShape()};
  return success();
}

static LogicalResult verifyFloatScalar(Operation *op, StringRef what,
                                       RankedTensorType type, Type element) {
  if (type.getRank() != 0 || type.getElementType() != element)
    return op->emitOpError("expected ")
           << what << " to be a " << element << " scalar but got " << type;
  return success();
}

/// The loss is summed in f32 (f64 for f64 logits), whatever the storage
/// type of the logits.
static Type lossType(RankedTensorType logits) {
  Type e = logits.getElementType();
  return e.isF64() ? e : Float32Type::get(e.getContext());
}

/// The results of both losses (rp.cross_entropy, rp.linear_cross_entropy):
/// the loss sum, a scalar of lossType(input), and the i64 scalar count.
static LogicalResult verifyLossResults(Operation *op, RankedTensorType input,
                                       RankedTensorType lossSum,
                                       RankedTensorType count) {
  if (failed(verifyFloatScalar(op, "loss_sum", lossSum, lossType(input))))
    return failure();
  if (count.getRank() != 0 || !count.getElementType().isInteger(64))
    return op->emitOpError("expected count to be an i64 scalar but got ")
           << count;
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = getLogits().getType();
  if (failed(verifyLabels(*this, logits, getLabels().getType())))
    return failure();
  return verifyLossResults(*this, logits, getLossSum().getType(),
                           getCount().getType());
}

LogicalResult CrossEntropyGradOp::verify() {
  auto logits = getLogits().getType();
  if (failed(verifyLabels(*this, logits, getLabels().getType())))
    return failure();
  return verifyFloatScalar(*this, "scale", getScale().getType(),
                           lossType(logits));
}

/// hidden [..., K], weight [C, K], labels hidden's shape without K, and a
/// positive chunk: what rp.linear_cross_entropy and its gradient share.
static LogicalResult verifyLinearLoss(Operation *op, RankedTensorType hidden,
                                      RankedTensorType weight,
                                      RankedTensorType labels, int64_t chunk) {
  if (hidden.getRank() < 1 || weight.getRank() != 2 ||
      weight.getShape()[1] != hidden.getShape().back())
    return op->emitOpError("expected a weight [classes, ")
           << (hidden.getRank() ? hidden.getShape().back() : 0)
           << "] for hidden " << ShapeStr{hidden.getShape()} << " but got "
           << ShapeStr{weight.getShape()};
  if (labels.getShape() != hidden.getShape().drop_back())
    return op->emitOpError("expected labels of shape ")
           << ShapeStr{hidden.getShape().drop_back()}
           << " (hidden without its last dimension) but got "
           << ShapeStr{labels.getShape()};
  if (chunk <= 0)
    return op->emitOpError("chunk must be a positive number of rows, got ")
           << chunk;
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  auto hidden = getHidden().getType();
  if (failed(verifyLinearLoss(*this, hidden, getWeight().getType(),
                              getLabels().getType(), getChunk())))
    return failure();
  return verifyLossResults(*this, hidden, getLossSum().getType(),
                           getCount().getType());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  auto hidden = getHidden().getType();
  if (failed(verifyLinearLoss(*this, hidden, getWeight().getType(),
                              getLabels().getType(), getChunk())))
    return failure();
  return verifyFloatScalar(*this, "scale", getScale().getType(),
                           lossType(hidden));
}

LogicalResult SoftmaxGradOp::verify() {
  // dim is non-negative (IntNonNegative), so it fits int64_t.
  if (static_cast<int64_t>(getDim()) >= getOutput().getType().getRank())
    return emitOpError("dimension ") << getDim() << " is out of range for rank "
                                     << getOutput().getType().getRank();
  return success();
}

LogicalResult NormGradOp::verify() {
  auto in = getInput().getType();
  if (static_cast<int64_t>(getAxis()) >= in.getRank())
    return emitOpError("axis ")
           << getAxis() << " is out of range for rank " << in.getRank();
  if (getGrad().getType() != in || getInputGrad().getType() != in)
    return emitOpError("expected the gradient and the input gradient to have "
                       "the input's type ")
           << in;
  if (getRms() && getWithBias())
    return emitOpError("an RMS norm has no bias");
  ArrayRef<int64_t> normalized = in.getShape().drop_front(getAxis());
  if (getScale() &&
      cast<RankedTensorType>(getScale().getType()).getShape() != normalized)
    return emitOpError("scale has shape ")
           << ShapeStr{cast<RankedTensorType>(getScale().getType()).getShape()}
           << " but the normalized shape is " << ShapeStr{normalized};
  size_t expected = (getScale() ? 1 : 0) + (getWithBias() ? 1 : 0);
  if (getAffineGrads().size() != expected)
    return emitOpError("expected ")
           << expected << " affine gradients (scale, then bias) but got "
           << getAffineGrads().size();
  for (Value g : getAffineGrads()) {
    auto t = cast<RankedTensorType>(g.getType());
    if (t.getShape() != normalized || t.getElementType() != in.getElementType())
      return emitOpError("affine gradients must have the normalized shape ")
             << ShapeStr{normalized} << " and type " << in.getElementType()
             << ", but one is " << t;
  }
  return success();
}

LogicalResult AttentionGradOp::verify() {
  std::optional<double> scale;
  if (getScale())
    scale = getScale()->convertToDouble();
  if (failed(verifyAttentionShapes(
          *this, getQuery().getType(), getKey().getType(), getValue().getType(),
          getMask(), getCausal(), scale,
          cast<RankedTensorType>(getGrad().getType()), getWindow(),
          optionalDouble(getSoftcap()), getSinks())))
    return failure();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError("expected the gradients to have the types of query, "
                       "key and value");
  if (bool(getSinks()) != bool(getSinksGrad()) ||
      (getSinks() && getSinksGrad().getType() != getSinks().getType()))
    return emitOpError("expected a sinks gradient of the sinks' type exactly "
                       "when the attention has sinks");
  return success();
}

LogicalResult GatherGradOp::verify() {
  auto out = getType();
  int64_t axis = getAxis();
  if (axis >= out.getRank())
    return emitOpError("axis ")
           << axis << " is out of range for rank " << out.getRank();
  SmallVector<int64_t> expected(out.getShape().take_front(axis));
  llvm::append_range(expected, getIndices().getType().getShape());
  llvm::append_range(expected, out.getShape().drop_front(axis + 1));
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected a gradient of shape ")
           << ShapeStr{expected} << " but got "
           << ShapeStr{getGrad().getType().getShape()};
  if (getGrad().getType().getElementType() != out.getElementType())
    return emitOpError("expected the gradient's element type ")
           << out.getElementType();
  return success();
}

LogicalResult SliceGradOp::verify() {
  return verifySliceWindow(*this, getType(), getGrad().getType(), getOffsets(),
                           getStrides());
}

LogicalResult ExtremumGradOp::verify() {
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::min)
    return emitOpError("takes max or min, not ")
           << stringifyReduceKind(getKind());
  auto in = getInput().getType();
  ArrayRef<int64_t> dims = getDims();
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (!llvm::is_contained(dims, d))
      expected.push_back(in.getDimSize(d));
    else if (getKeepDims())
      expected.push_back(1);
  }
  for (int64_t d : dims)
    if (d < 0 || d >= in.getRank())
      return emitOpError("dimension ") << d << " is out of range";
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected a gradient of shape ")
           << ShapeStr{expected} << " but got "
           << ShapeStr{getGrad().getType().getShape()};
  return success();
}
