//===- ElementwiseHandlers.cpp - ONNX elementwise ops ---------------------===//
//
// Arithmetic, comparisons, unary math, casts and the ops that import as
// nothing (Identity, Dropout without dropping, Constant).
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "llvm/ADT/SmallString.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

template <typename OpTy> static LogicalResult binary(NodeImporter &n) {
  Value lhs = n.input(0), rhs = n.input(1);
  if (!lhs || !rhs)
    return failure();
  if (std::is_same_v<OpTy, PowOp> && !isa<FloatType>(getElementTypeOrSelf(lhs)))
    return n.error() << "Pow of " << getElementTypeOrSelf(lhs)
                     << " tensors is not supported; rp raises floats only";
  // ONNX Pow allows an exponent of another type; rp does not promote. The
  // other ops take one type, and a mismatch is an error, not a cast.
  if (std::is_same_v<OpTy, PowOp>)
    rhs = n.castTo(rhs, getElementTypeOrSelf(lhs));
  if (getElementTypeOrSelf(lhs) != getElementTypeOrSelf(rhs))
    return n.error() << "operands have different element types: "
                     << lhs.getType() << " and " << rhs.getType();
  if (failed(broadcastShapes(cast<RankedTensorType>(lhs.getType()).getShape(),
                             cast<RankedTensorType>(rhs.getType()).getShape())))
    return n.error() << "operand shapes " << lhs.getType() << " and "
                     << rhs.getType() << " do not broadcast";
  n.setOutput(0, n.create<OpTy>(lhs, rhs));
  return success();
}

/// Max, Min and Sum take any number of inputs; they fold left to right.
template <typename OpTy> static LogicalResult variadic(NodeImporter &n) {
  Value acc = n.input(0);
  if (!acc)
    return failure();
  for (int i = 1; i < n.numInputs(); ++i) {
    Value next = n.input(i);
    if (!next)
      return failure();
    acc = n.create<OpTy>(acc, next);
  }
  n.setOutput(0, acc);
  return success();
}

static LogicalResult compare(NodeImporter &n, CmpPredicate predicate) {
  Value lhs = n.input(0), rhs = n.input(1);
  if (!lhs || !rhs)
    return failure();
  n.setOutput(0, n.create<CmpOp>(predicate, lhs, rhs));
  return success();
}

template <typename OpTy> static LogicalResult unary(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(getElementTypeOrSelf(x)) && !std::is_same_v<OpTy, NegOp>)
    return n.error() << "expects a float input but got " << x.getType();
  n.setOutput(0, n.create<OpTy>(x));
  return success();
}

static LogicalResult importCast(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  int64_t to = n.intAttr("to", 0);
  Type element = convertElementType(to, n.builder.getContext());
  if (!element)
    return n.error() << "cast to " << elementTypeName(to)
                     << " is not supported";
  n.setOutput(0, n.castTo(x, element));
  return success();
}

/// CastLike (opset 15): a cast to the element type of input 1, which
/// torch 2's dynamo exporter writes for scalar constants.
static LogicalResult importCastLike(NodeImporter &n) {
  Value x = n.input(0), like = n.input(1);
  if (!x || !like)
    return failure();
  n.setOutput(0, n.castTo(x, getElementTypeOrSelf(like)));
  return success();
}

/// IsNaN is x != x, which holds exactly for NaN; exporters apply it to
/// attention probabilities to zero fully masked rows.
static LogicalResult importIsNaN(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(getElementTypeOrSelf(x)))
    return n.error() << "expects a float input but got " << x.getType();
  n.setOutput(0, n.create<CmpOp>(CmpPredicate::ne, x, x));
  return success();
}

static LogicalResult importDropout(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  // Dropout drops nothing in inference form, or with ratio 0.
  bool training = false;
  if (n.hasInput(2)) {
    auto mode = n.constantInput(2, "training_mode");
    if (failed(mode))
      return failure();
    training = mode->getSplatValue<bool>();
  }
  if (training && n.hasInput(1)) {
    auto ratio = n.constantInput(1, "ratio");
    if (failed(ratio))
      return failure();
    APFloat r = (*ratio).getSplatValue<APFloat>();
    SmallString<16> text;
    r.toString(text);
    if (!r.isZero())
      return n.error() << "dropout with ratio " << text
                       << " in training mode is not supported; export in "
                          "eval mode (model.eval()) or with dropout 0 (rp "
                          "trains without dropout)";
  } else if (training) {
    return n.error() << "dropout in training mode with the default ratio 0.5 "
                        "is not supported; export in eval mode "
                        "(model.eval()) or with dropout 0";
  }
  n.setOutput(0, x);
  // Its mask keeps everything then; a training-mode export lists it.
  if (n.hasOutput(1)) {
    auto type = RankedTensorType::get(
        cast<RankedTensorType>(x.getType()).getShape(), n.builder.getI1Type());
    n.setOutput(1, n.constant(DenseElementsAttr::get(type, true)));
  }
  return success();
}

static LogicalResult importConstant(NodeImporter &n) {
  MLIRContext *ctx = n.builder.getContext();
  if (const auto *a = n.attr("value")) {
    Type element = convertElementType(a->t().data_type(), ctx);
    if (!element)
      return n.error() << "constant of data type "
                       << elementTypeName(a->t().data_type())
                       << " is not supported";
    SmallVector<int64_t> shape(a->t().dims().begin(), a->t().dims().end());
    auto data = n.readTensorAttr(a->t(), RankedTensorType::get(shape, element));
    if (failed(data))
      return failure();
    n.setOutput(0, n.constant(*data));
    return success();
  }
  Builder b(ctx);
  if (const auto *a = n.attr("value_float")) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    n.setOutput(0, n.constant(DenseElementsAttr::get(type, a->f())));
  } else if (const auto *a = n.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    auto type = RankedTensorType::get({(int64_t)v.size()}, b.getF32Type());
    n.setOutput(0, n.constant(DenseElementsAttr::get(type, ArrayRef(v))));
  } else if (const auto *a = n.attr("value_int")) {
    auto type = RankedTensorType::get({}, b.getI64Type());
    n.setOutput(0, n.constant(DenseElementsAttr::get(type, a->i())));
  } else if (const auto *a = n.attr("value_ints")) {
    n.setOutput(0, n.i64Constant(SmallVector<int64_t>(a->ints().begin(),
                                                      a->ints().end())));
  } else {
    return n.error() << "only tensor, float and int constants are supported";
  }
  return success();
}

static LogicalResult importReciprocal(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  if (!isa<FloatType>(getElementTypeOrSelf(x)))
    return n.error() << "expects a float input but got " << x.getType();
  auto type = RankedTensorType::get({}, getElementTypeOrSelf(x));
  auto one = n.constant(DenseElementsAttr::get(
      type, n.builder.getFloatAttr(type.getElementType(), 1.0)));
  n.setOutput(0, n.create<DivOp>(one, x));
  return success();
}

void onnx_import::registerElementwiseHandlers(llvm::StringMap<Handler> &t) {
  t["Add"] = binary<AddOp>;
  t["Sub"] = binary<SubOp>;
  t["Mul"] = binary<MulOp>;
  t["Div"] = binary<DivOp>;
  t["Pow"] = binary<PowOp>;
  t["Max"] = variadic<MaxOp>;
  t["Min"] = variadic<MinOp>;
  t["Sum"] = variadic<AddOp>;
  t["Equal"] = [](NodeImporter &n) { return compare(n, CmpPredicate::eq); };
  t["Less"] = [](NodeImporter &n) { return compare(n, CmpPredicate::lt); };
  t["LessOrEqual"] = [](NodeImporter &n) {
    return compare(n, CmpPredicate::le);
  };
  t["Greater"] = [](NodeImporter &n) { return compare(n, CmpPredicate::gt); };
  t["GreaterOrEqual"] = [](NodeImporter &n) {
    return compare(n, CmpPredicate::ge);
  };
  t["Not"] = [](NodeImporter &n) {
    Value x = n.input(0);
    if (!x)
      return failure();
    auto type = RankedTensorType::get({}, n.builder.getI1Type());
    Value f = n.constant(DenseElementsAttr::get(type, false));
    n.setOutput(0, n.create<CmpOp>(CmpPredicate::eq, x, f));
    return success();
  };
  t["Where"] = [](NodeImporter &n) {
    Value c = n.input(0), a = n.input(1), b = n.input(2);
    if (!c || !a || !b)
      return failure();
    n.setOutput(0, n.create<WhereOp>(c, a, b));
    return success();
  };
  t["Neg"] = unary<NegOp>;
  t["Exp"] = unary<ExpOp>;
  t["Log"] = unary<LogOp>;
  t["Sqrt"] = unary<SqrtOp>;
  t["Tanh"] = unary<TanhOp>;
  t["Erf"] = unary<ErfOp>;
  t["Sigmoid"] = unary<SigmoidOp>;
  t["Relu"] = unary<ReluOp>;
  t["Reciprocal"] = importReciprocal;
  t["Cast"] = importCast;
  t["CastLike"] = importCastLike;
  t["IsNaN"] = importIsNaN;
  t["Identity"] = [](NodeImporter &n) {
    Value x = n.input(0);
    n.setOutput(0, x);
    return success(x != nullptr);
  };
  t["Dropout"] = importDropout;
  t["Constant"] = importConstant;
}
