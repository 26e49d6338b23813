//===- RPNNOps.cpp - rp neural network op verifiers -----------------------===//
//
// Shape rules of matmul, reductions, softmax, normalizations and attention.
//
//===----------------------------------------------------------------------===//

#include "ShapeDiagnostics.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// The operand dimensions a matmul contracts and keeps, after the
/// transpose flags.
struct MatmulDims {
  int64_t m, k, kRhs, n;
};
} // namespace

static MatmulDims matmulDims(RankedTensorType lhs, RankedTensorType rhs,
                             bool transposeA, bool transposeB) {
  int64_t lr = lhs.getRank(), rr = rhs.getRank();
  MatmulDims d;
  d.m = lhs.getDimSize(transposeA ? lr - 1 : lr - 2);
  d.k = lhs.getDimSize(transposeA ? lr - 2 : lr - 1);
  d.kRhs = rhs.getDimSize(transposeB ? rr - 1 : rr - 2);
  d.n = rhs.getDimSize(transposeB ? rr - 2 : rr - 1);
  return d;
}

void MatmulOp::build(OpBuilder &builder, OperationState &state, Value lhs,
                     Value rhs, bool transposeA, bool transposeB) {
  auto lt = cast<RankedTensorType>(lhs.getType());
  auto rt = cast<RankedTensorType>(rhs.getType());
  SmallVector<int64_t> shape(lt.getShape());
  if (lt.getRank() >= 2 && rt.getRank() >= 2) {
    MatmulDims d = matmulDims(lt, rt, transposeA, transposeB);
    auto batch =
        broadcastShapes(lt.getShape().drop_back(2), rt.getShape().drop_back(2));
    if (succeeded(batch)) {
      shape = *batch;
      shape.push_back(d.m);
      shape.push_back(d.n);
    }
  }
  build(builder, state, RankedTensorType::get(shape, lt.getElementType()), lhs,
        rhs, transposeA, transposeB);
}

LogicalResult MatmulOp::verify() {
  auto lt = getLhs().getType(), rt = getRhs().getType();
  if (lt.getRank() < 2 || rt.getRank() < 2)
    return emitOpError("expected operands of rank >= 2 but got ranks ")
           << lt.getRank() << " and " << rt.getRank()
           << "; reshape vectors to matrices first";
  MatmulDims d = matmulDims(lt, rt, getTransposeA(), getTransposeB());
  if (d.k != d.kRhs)
    return emitOpError("contraction sizes differ: lhs has ")
           << d.k << " and rhs has " << d.kRhs << " (shapes "
           << ShapeStr{lt.getShape()} << " and " << ShapeStr{rt.getShape()}
           << (getTransposeA() ? ", lhs transposed" : "")
           << (getTransposeB() ? ", rhs transposed" : "") << ")";
  auto batch =
      broadcastShapes(lt.getShape().drop_back(2), rt.getShape().drop_back(2));
  if (failed(batch))
    return emitOpError("batch dimensions ")
           << ShapeStr{lt.getShape().drop_back(2)} << " and "
           << ShapeStr{rt.getShape().drop_back(2)} << " do not broadcast";
  SmallVector<int64_t> expected(*batch);
  expected.push_back(d.m);
  expected.push_back(d.n);
  if (getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << ShapeStr{expected} << " but got "
           << ShapeStr{getType().getShape()};
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp
//===----------------------------------------------------------------------===//

static SmallVector<int64_t> reducedShape(ArrayRef<int64_t> in,
                                         ArrayRef<int64_t> dims, bool keep) {
  SmallVector<int64_t> shape;
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (!llvm::is_contained(dims, d))
      shape.push_back(in[d]);
    else if (keep)
      shape.push_back(1);
  }
  return shape;
}

void ReduceOp::build(OpBuilder &builder, OperationState &state, ReduceKind kind,
                     Value input, ArrayRef<int64_t> dims, bool keepDims) {
  auto type = cast<RankedTensorType>(input.getType());
  auto resultType = RankedTensorType::get(
      reducedShape(type.getShape(), dims, keepDims), type.getElementType());
  build(builder, state, resultType, kind, input, dims, keepDims);
}

LogicalResult ReduceOp::verify() {
  auto in = getInput().getType();
  ArrayRef<int64_t> dims = getDims();
  if (dims.empty())
    return emitOpError("expected at least one dimension to reduce");
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= in.getRank())
      return emitOpError("dimension ")
             << d << " is out of range for rank " << in.getRank();
    if (i > 0 && d <= dims[i - 1])
      return emitOpError("expected strictly increasing dimensions but got ")
             << ShapeStr{dims};
  }
  if (getKind() == ReduceKind::mean && !isa<FloatType>(in.getElementType()))
    return emitOpError("'mean' needs a float element type but got ")
           << in.getElementType();
  SmallVector<int64_t> expected =
      reducedShape(in.getShape(), dims, getKeepDims());
  if (getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << ShapeStr{expected} << " but got "
           << ShapeStr{getType().getShape()};
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax, normalizations
//===----------------------------------------------------------------------===//

static LogicalResult verifyDimInRange(Operation *op, StringRef what,
                                      int64_t dim, int64_t rank) {
  if (dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyDimInRange(*this, "dimension", getDim(), getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyDimInRange(*this, "dimension", getDim(), getType().getRank());
}

/// Checks an optional affine operand of a normalization: it must have the
/// normalized (trailing) shape and the input's element type.
static LogicalResult verifyNormOperand(Operation *op, StringRef what,
                                       Value operand, RankedTensorType input,
                                       int64_t axis) {
  if (!operand)
    return success();
  auto type = cast<RankedTensorType>(operand.getType());
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  if (type.getShape() != normalized)
    return op->emitOpError()
           << what << " has shape " << ShapeStr{type.getShape()}
           << " but the normalized shape is " << ShapeStr{normalized};
  if (type.getElementType() != input.getElementType())
    return op->emitOpError()
           << what << " has element type " << type.getElementType()
           << " but the input has " << input.getElementType();
  return success();
}

static LogicalResult verifyNorm(Operation *op, RankedTensorType input,
                                int64_t axis, double epsilon, Value scale,
                                Value bias) {
  if (failed(verifyDimInRange(op, "axis", axis, input.getRank())))
    return failure();
  if (!(epsilon >= 0.0))
    return op->emitOpError("expected a non-negative epsilon but got ")
           << epsilon;
  if (failed(verifyNormOperand(op, "scale", scale, input, axis)))
    return failure();
  return verifyNormOperand(op, "bias", bias, input, axis);
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput().getType(), getAxis(),
                    getEpsilon().convertToDouble(), getScale(), getBias());
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput().getType(), getAxis(),
                    getEpsilon().convertToDouble(), getScale(), Value());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult mlir::rp::verifyAttentionShapes(
    Operation *op, RankedTensorType q, RankedTensorType k, RankedTensorType v,
    Value mask, bool causal, std::optional<double> scale,
    RankedTensorType result, std::optional<int64_t> window,
    std::optional<double> softcap, Value sinks) {
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"query", q},
                            {"key", k},
                            {"value", v},
                            {"result", result}})
    if (type.getRank() != 4)
      return op->emitOpError("expected ")
             << name << " of rank 4 ([batch, heads, seq, dim]) but got rank "
             << type.getRank();
  int64_t b = q.getDimSize(0), h = q.getDimSize(1), s = q.getDimSize(2),
          d = q.getDimSize(3);
  int64_t hkv = k.getDimSize(1), t = k.getDimSize(2);
  if (k.getDimSize(0) != b || v.getDimSize(0) != b)
    return op->emitOpError(
               "query, key and value must share the batch size, but "
               "got ")
           << b << ", " << k.getDimSize(0) << " and " << v.getDimSize(0);
  if (k.getDimSize(3) != d)
    return op->emitOpError("key head dim ")
           << k.getDimSize(3) << " differs from query head dim " << d;
  if (v.getDimSize(1) != hkv || v.getDimSize(2) != t)
    return op->emitOpError("value shape ")
           << ShapeStr{v.getShape()}
           << " must match key shape in heads and sequence, key is "
           << ShapeStr{k.getShape()};
  if (hkv == 0 || h % hkv != 0)
    return op->emitOpError("query heads (")
           << h << ") must be a multiple of key/value heads (" << hkv << ")";
  SmallVector<int64_t> expected = {b, h, s, v.getDimSize(3)};
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("expected result shape ")
           << ShapeStr{expected} << " but got " << ShapeStr{result.getShape()};
  // Causal queries are the last S of the T positions (bottom-right), so
  // every query sees at least its own key.
  if (causal && s > t)
    return op->emitOpError(
               "causal attention needs no more queries than keys, but got ")
           << s << " queries and " << t << " keys";
  if (window && !causal)
    return op->emitOpError("a sliding window needs `causal` (it bounds the "
                           "keys before each query's own position)");
  if (scale && !(*scale > 0.0))
    return op->emitOpError("expected a positive scale but got ") << *scale;
  if (softcap && !(*softcap > 0.0))
    return op->emitOpError("expected a positive softcap but got ") << *softcap;
  if (sinks) {
    // GPT-OSS's sinks: one logit per query head.
    auto st = cast<RankedTensorType>(sinks.getType());
    if (st.getShape() != ArrayRef<int64_t>{h} ||
        st.getElementType() != q.getElementType())
      return op->emitOpError("sinks must be one ")
             << q.getElementType() << " per query head, "
             << RankedTensorType::get({h}, q.getElementType()) << ", but got "
             << st;
  }
  if (mask && cast<RankedTensorType>(mask.getType())
                  .getElementType()
                  .isSignlessInteger(64)) {
    // Segments: each key position's document, [batch, keys].
    auto mt = cast<RankedTensorType>(mask.getType());
    SmallVector<int64_t> expected = {b, t};
    if (mt.getShape() != ArrayRef<int64_t>(expected))
      return op->emitOpError("segments (an i64 mask) of shape ")
             << ShapeStr{mt.getShape()} << " must be [batch, keys] "
             << ShapeStr{expected};
  } else if (mask) {
    auto mt = cast<RankedTensorType>(mask.getType());
    SmallVector<int64_t> scores = {b, h, s, t};
    auto merged = broadcastShapes(mt.getShape(), scores);
    if (mt.getRank() > 4 || failed(merged) ||
        ArrayRef<int64_t>(*merged) != ArrayRef<int64_t>(scores))
      return op->emitOpError("mask of shape ")
             << ShapeStr{mt.getShape()}
             << " does not broadcast to the scores shape " << ShapeStr{scores};
    Type me = mt.getElementType();
    if (!me.isInteger(1) && me != q.getElementType())
      return op->emitOpError("mask element type must be i1, i64 (segments) "
                             "or the query's ")
             << q.getElementType() << " but got " << me;
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  std::optional<double> scale;
  if (getScale())
    scale = getScale()->convertToDouble();
  return verifyAttentionShapes(*this, getQuery().getType(), getKey().getType(),
                               getValue().getType(), getMask(), getCausal(),
                               scale, getType(), getWindow(),
                               optionalDouble(getSoftcap()), getSinks());
}

double AttentionOp::getEffectiveScale() {
  if (auto scale = getScale())
    return scale->convertToDouble();
  return 1.0 /
         std::sqrt(static_cast<double>(getQuery().getType().getDimSize(3)));
}
