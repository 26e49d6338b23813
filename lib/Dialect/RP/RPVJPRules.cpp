//===- RPVJPRules.cpp - vector-Jacobian products of the rp ops ------------===//
//
// One rule per op, as its ODS description states it. Rules only emit ops;
// the autodiff pass decides which values need gradients and sums the
// gradients of values used more than once. Integer operands, masks and
// indices get no gradient (a null entry).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::rp;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static Value scalar(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

/// Sums `g` over the dimensions broadcasting stretched to reach its shape
/// from `target`'s: the gradient of every broadcast operand.
static Value reduceTo(OpBuilder &b, Location loc, Value g,
                      RankedTensorType target) {
  auto type = tensorType(g);
  if (type.getShape() == target.getShape())
    return g;
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead ||
        (target.getDimSize(d - lead) == 1 && type.getDimSize(d) != 1))
      dims.push_back(d);
  Value sum = dims.empty() ? g
                           : ReduceOp::create(b, loc, ReduceKind::sum, g, dims,
                                              /*keepDims=*/true)
                                 .getResult();
  return ReshapeOp::create(b, loc, target, sum);
}

template <typename Op>
static Value binaryAt(OpBuilder &b, Location loc, Value x, Value y) {
  return Op::create(b, loc, x, y);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.assign({reduceTo(b, getLoc(), dys[0], getLhs().getType()),
              reduceTo(b, getLoc(), dys[0], getRhs().getType())});
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  Value neg = NegOp::create(b, getLoc(), dys[0]);
  dxs.assign({reduceTo(b, getLoc(), dys[0], getLhs().getType()),
              reduceTo(b, getLoc(), neg, getRhs().getType())});
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  dxs.assign({reduceTo(b, loc, binaryAt<MulOp>(b, loc, dys[0], getRhs()),
                       getLhs().getType()),
              reduceTo(b, loc, binaryAt<MulOp>(b, loc, dys[0], getLhs()),
                       getRhs().getType())});
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  // d/drhs (lhs / rhs) = -(lhs / rhs) / rhs: reuses the forward result.
  Value dl = binaryAt<DivOp>(b, loc, dys[0], getRhs());
  Value dr = NegOp::create(
      b, loc,
      binaryAt<DivOp>(b, loc, binaryAt<MulOp>(b, loc, dys[0], getResult()),
                      getRhs()));
  dxs.assign({reduceTo(b, loc, dl, getLhs().getType()),
              reduceTo(b, loc, dr, getRhs().getType())});
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Type element = getType().getElementType();
  Value one = scalar(b, loc, element, 1.0);
  Value expm1 = binaryAt<SubOp>(b, loc, getRhs(), one);
  Value dl = binaryAt<MulOp>(b, loc, binaryAt<MulOp>(b, loc, dys[0], getRhs()),
                             binaryAt<PowOp>(b, loc, getLhs(), expm1));
  Value dr =
      binaryAt<MulOp>(b, loc, binaryAt<MulOp>(b, loc, dys[0], getResult()),
                      LogOp::create(b, loc, getLhs()));
  dxs.assign({reduceTo(b, loc, dl, getLhs().getType()),
              reduceTo(b, loc, dr, getRhs().getType())});
  return success();
}

/// max/min: dy goes to the operand that wins, to lhs on ties.
static void extremumVJP(OpBuilder &b, Operation *op, CmpPredicate lhsWins,
                        Value dy, SmallVectorImpl<Value> &dxs) {
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value mask = CmpOp::create(b, loc, lhsWins, lhs, rhs);
  Value zero = scalar(b, loc, tensorType(dy).getElementType(), 0.0);
  dxs.assign({reduceTo(b, loc, WhereOp::create(b, loc, mask, dy, zero),
                       tensorType(lhs)),
              reduceTo(b, loc, WhereOp::create(b, loc, mask, zero, dy),
                       tensorType(rhs))});
}

LogicalResult MaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  extremumVJP(b, *this, CmpPredicate::ge, dys[0], dxs);
  return success();
}

LogicalResult MinOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  extremumVJP(b, *this, CmpPredicate::le, dys[0], dxs);
  return success();
}

LogicalResult WhereOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value zero = scalar(b, loc, getType().getElementType(), 0.0);
  dxs.assign(
      {Value(),
       reduceTo(b, loc, WhereOp::create(b, loc, getCondition(), dys[0], zero),
                getOnTrue().getType()),
       reduceTo(b, loc, WhereOp::create(b, loc, getCondition(), zero, dys[0]),
                getOnFalse().getType())});
  return success();
}

LogicalResult NegOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &dxs) {
  dxs.assign({NegOp::create(b, getLoc(), dys[0])});
  return success();
}

#define RP_UNARY_VJP(Op, Kind)                                                 \
  LogicalResult Op::buildVJP(OpBuilder &b, ArrayRef<Value> dys,                \
                             SmallVectorImpl<Value> &dxs) {                    \
    dxs.assign({UnaryGradOp::create(                                           \
        b, getLoc(), getType(), UnaryGradKind::Kind, getInput(), dys[0])});    \
    return success();                                                          \
  }
RP_UNARY_VJP(ExpOp, exp)
RP_UNARY_VJP(LogOp, log)
RP_UNARY_VJP(SqrtOp, sqrt)
RP_UNARY_VJP(RsqrtOp, rsqrt)
RP_UNARY_VJP(TanhOp, tanh)
RP_UNARY_VJP(ErfOp, erf)
RP_UNARY_VJP(SigmoidOp, sigmoid)
RP_UNARY_VJP(SiluOp, silu)
RP_UNARY_VJP(ReluOp, relu)
#undef RP_UNARY_VJP

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &dxs) {
  auto kind = getApproximate() == GeluApproximation::tanh
                  ? UnaryGradKind::gelu_tanh
                  : UnaryGradKind::gelu;
  dxs.assign(
      {UnaryGradOp::create(b, getLoc(), getType(), kind, getInput(), dys[0])});
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &dxs) {
  auto in = getInput().getType();
  dxs.assign({isa<FloatType>(in.getElementType())
                  ? CastOp::create(b, getLoc(), in, dys[0]).getResult()
                  : Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.assign({ReshapeOp::create(b, getLoc(), getInput().getType(), dys[0])});
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &dxs) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  dxs.assign({TransposeOp::create(b, getLoc(), dys[0], inverse)});
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                SmallVectorImpl<Value> &dxs) {
  dxs.assign({SliceGradOp::create(b, getLoc(), getInput().getType(), dys[0],
                                  getOffsets(), getStrides())});
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &dxs) {
  int64_t dim = getDim(), offset = 0;
  dxs.clear();
  for (Value in : getInputs()) {
    auto type = tensorType(in);
    SmallVector<int64_t> offsets(type.getRank(), 0), strides(type.getRank(), 1);
    offsets[dim] = offset;
    offset += type.getDimSize(dim);
    dxs.push_back(
        isa<FloatType>(type.getElementType())
            ? SliceOp::create(b, getLoc(), type, dys[0], offsets, strides)
                  .getResult()
            : Value());
  }
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &dxs) {
  dxs.assign({reduceTo(b, getLoc(), dys[0], getInput().getType())});
  return success();
}

LogicalResult GatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &dxs) {
  dxs.assign({GatherGradOp::create(b, getLoc(), getInput().getType(),
                                   getIndices(), dys[0], getAxis()),
              Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Neural network ops
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  Value a = getLhs(), w = getRhs(), dc = dys[0];
  bool ta = getTransposeA(), tb = getTransposeB();
  auto aType = tensorType(a), wType = tensorType(w);
  // A shared 2-D weight under batched activations (a linear layer): fold the
  // batch into rows, so its gradient is one GEMM rather than a GEMM per
  // batch entry and a sum.
  Value aRows = a, dcRows = dc;
  if (wType.getRank() == 2 && aType.getRank() > 2 && !ta) {
    int64_t rows = aType.getNumElements() / aType.getShape().back();
    aRows =
        ReshapeOp::create(b, loc,
                          RankedTensorType::get({rows, aType.getShape().back()},
                                                aType.getElementType()),
                          a);
    auto cType = tensorType(dc);
    dcRows =
        ReshapeOp::create(b, loc,
                          RankedTensorType::get({rows, cType.getShape().back()},
                                                cType.getElementType()),
                          dc);
  }
  Value da = ta ? MatmulOp::create(b, loc, w, dc, tb, true).getResult()
                : MatmulOp::create(b, loc, dc, w, false, !tb).getResult();
  Value dw =
      tb ? MatmulOp::create(b, loc, dcRows, aRows, true, ta).getResult()
         : MatmulOp::create(b, loc, aRows, dcRows, !ta, false).getResult();
  dxs.assign({reduceTo(b, loc, da, aType), reduceTo(b, loc, dw, wType)});
  return success();
}

LogicalResult ReduceOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &dxs) {
  Location loc = getLoc();
  auto in = getInput().getType();
  if (getKind() == ReduceKind::max || getKind() == ReduceKind::min) {
    dxs.assign({ExtremumGradOp::create(b, loc, in, getKind(), getInput(),
                                       dys[0], getDims(), getKeepDims())});
    return success();
  }
  SmallVector<int64_t> kept(in.getShape());
  int64_t n = 1;
  for (int64_t d : getDims()) {
    n *= kept[d];
    kept[d] = 1;
  }
  Value g = ReshapeOp::create(
      b, loc, RankedTensorType::get(kept, in.getElementType()), dys[0]);
  if (getKind() == ReduceKind::mean)
    g = binaryAt<MulOp>(b, loc, g,
                        scalar(b, loc, in.getElementType(), 1.0 / double(n)));
  dxs.assign({BroadcastOp::create(b, loc, in, g)});
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.assign({SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), dys[0],
                                    getDim(), /*log=*/false)});
  return success();
}

LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                     SmallVectorImpl<Value> &dxs) {
  dxs.assign({SoftmaxGradOp::create(b, getLoc(), getType(), getResult(), dys[0],
                                    getDim(), /*log=*/true)});
  return success();
}

/// Shared by layer_norm and rms_norm: one rp.norm_grad, its results spread
/// over the operands (input, [scale], [bias]).
static void normVJP(OpBuilder &b, Operation *op, Value x, Value scale,
                    Value bias, int64_t axis, APFloat eps, bool rms, Value dy,
                    SmallVectorImpl<Value> &dxs) {
  auto in = tensorType(x);
  auto affine = RankedTensorType::get(in.getShape().drop_front(axis),
                                      in.getElementType());
  SmallVector<Type> affineTypes;
  if (scale)
    affineTypes.push_back(affine);
  if (bias)
    affineTypes.push_back(affine);
  auto grad = NormGradOp::create(b, op->getLoc(), in, affineTypes, x, scale, dy,
                                 axis, std::move(eps), bias != nullptr, rms);
  dxs.clear();
  dxs.push_back(grad.getInputGrad());
  unsigned next = 0;
  if (scale)
    dxs.push_back(grad.getAffineGrads()[next++]);
  if (bias)
    dxs.push_back(grad.getAffineGrads()[next++]);
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &dxs) {
  normVJP(b, *this, getInput(), getScale(), getBias(), getAxis(), getEpsilon(),
          /*rms=*/false, dys[0], dxs);
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &dxs) {
  normVJP(b, *this, getInput(), getScale(), Value(), getAxis(), getEpsilon(),
          /*rms=*/true, dys[0], dxs);
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &dxs) {
  SmallVector<Type> types{getQuery().getType(), getKey().getType(),
                          getValue().getType()};
  if (getSinks())
    types.push_back(getSinks().getType());
  auto grad = AttentionGradOp::create(b, getLoc(), types, getQuery(), getKey(),
                                      getValue(), getMask(), getSinks(), dys[0],
                                      getCausal(), getScaleAttr(),
                                      getWindowAttr(), getSoftcapAttr());
  // One gradient an operand, in operand order: q, k, v, [mask], [sinks].
  dxs.assign({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (getMask())
    dxs.push_back(Value());
  if (getSinks())
    dxs.push_back(grad.getSinksGrad());
  return success();
}

/// Query, key, value and the sinks; never the mask.
bool AttentionOp::isDifferentiableOperand(unsigned index) {
  // The sinks, when present, are the last operand.
  return index < 3 || (getSinks() && index == getNumOperands() - 1);
}

LogicalResult LinearCrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                             SmallVectorImpl<Value> &dxs) {
  dxs.assign({Value(), Value(), Value()});
  if (!dys[0])
    return success();
  auto grad = LinearCrossEntropyGradOp::create(
      b, getLoc(), TypeRange{getHidden().getType(), getWeight().getType()},
      getHidden(), getWeight(), getLabels(), dys[0], getIgnoreIndex(),
      getChunk());
  dxs[0] = grad.getHiddenGrad();
  dxs[1] = grad.getWeightGrad();
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &dxs) {
  dxs.assign({Value(), Value()});
  if (!dys[0])
    return success();
  dxs[0] = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                      getLogits(), getLabels(), dys[0],
                                      getIgnoreIndex());
  return success();
}
