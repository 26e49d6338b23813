//===- RuntimeComposed.cpp - more ONNX ops as compositions of rp ops ------===//
//
// ONNX ops that rp folded only on input-independent values, now also on
// run-time values, each a composition of rp ops whose VJPs give PyTorch's
// gradient of the op the exporter wrote it for (the same compositions
// rp.trace writes, python/rp/_aten_pad.py, _aten_reduce.py):
//
//   Abs              x times its sign (a where on constants): gradient
//                    sign(x), 0 at 0 (Dory's norms)
//   Clip             max then min with x as the left operand, so a value
//                    on a bound keeps its gradient, as torch.clamp's
//                    (ProphetNet's positions)
//   And, Or, Xor     wheres on bool masks (Gemma 4's token-type masks,
//                    CPM-Ant's)
//   BitwiseAnd, BitwiseOr, BitwiseXor
//                    the same on integers known to hold 0s and 1s (masks
//                    cast to integers: CPM-Ant's, as dynamo writes it)
//   Trilu            x where a constant triangle, else 0 (the gated delta
//                    rule's masks: Qwen3.5, Qwen3-Next, Olmo-Hybrid)
//   Tile             a concat of copies per repeated axis (DiffLlama's
//                    value heads)
//   ReduceLogSumExp  m + log(sum(exp(x - m))), m the max kept as unit
//                    dims; m's own gradient cancels, the log-sum's weights
//                    summing to one (GraniteSWA's attention sinks)
//   ReduceL2         sqrt of the sum of squares, 0 (gradient 0) where the
//                    sum is 0, as torch.linalg.vector_norm's backward
//                    (Zaya's and Inkling's q/k norms)
//   EyeLike          a constant: it reads only its input's static shape
//                    (XLNet's relative attention)
//   Mod              a - b (a / b) with rp's truncating integer division
//                    (fmod = 1, C's %), then plus b where the rest and b
//                    have opposite signs (fmod = 0, Python's %: the
//                    divisor's sign): BLT's hashed byte n-gram ids, as
//                    dynamo writes them; floats (fmod = 1) truncate the
//                    quotient through int64, torch.fmod's gradient
//
//===----------------------------------------------------------------------===//

#include "ConstantEvaluator.h"
#include "NodeImporter.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

static Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

static LogicalResult importAbs(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  Type t = elementOf(x);
  Value zero = scalarOf(n, t, 0.0);
  if (!isa<FloatType>(t)) {
    Value neg = n.create<CmpOp>(CmpPredicate::lt, x, zero);
    n.setOutput(0, n.create<WhereOp>(neg, n.create<NegOp>(x), x));
    return success();
  }
  Value sign = n.create<WhereOp>(
      n.create<CmpOp>(CmpPredicate::gt, x, zero), scalarOf(n, t, 1.0),
      n.create<WhereOp>(n.create<CmpOp>(CmpPredicate::lt, x, zero),
                        scalarOf(n, t, -1.0), zero));
  n.setOutput(0, n.create<MulOp>(x, sign));
  return success();
}

static LogicalResult importClip(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  Type t = elementOf(x);
  Value y = x;
  // Bounds are inputs 1 and 2 from opset 11, attributes before.
  for (int i : {1, 2}) {
    Value bound;
    if (n.opset >= 11) {
      if (!n.hasInput(i))
        continue;
      bound = n.input(i);
      if (!bound)
        return failure();
      bound = n.castTo(bound, t);
    } else {
      const char *name = i == 1 ? "min" : "max";
      if (!n.attr(name))
        continue;
      bound = scalarOf(n, t, n.floatAttr(name, 0.0f));
    }
    y = i == 1 ? n.create<MaxOp>(y, bound) : n.create<MinOp>(y, bound);
  }
  n.setOutput(0, y);
  return success();
}

/// a and b = b where a, else false; a or b = true where a, else b;
/// a xor b = not b where a, else b (bool tensors).
static Value logic(NodeImporter &n, Value a, Value b, StringRef op) {
  Type i1 = n.builder.getI1Type();
  Value f = scalarOf(n, i1, 0.0), t = scalarOf(n, i1, 1.0);
  if (op == "And")
    return n.create<WhereOp>(a, b, f);
  if (op == "Or")
    return n.create<WhereOp>(a, t, b);
  return n.create<WhereOp>(a, n.create<CmpOp>(CmpPredicate::eq, b, f), b);
}

static LogicalResult importLogic(NodeImporter &n, StringRef op) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  if (!elementOf(a).isInteger(1) || !elementOf(b).isInteger(1))
    return n.error() << op << " of non-bool tensors " << a.getType() << " and "
                     << b.getType();
  n.setOutput(0, logic(n, a, b, op));
  return success();
}

/// Whether every element of the integer `v` is 0 or 1: a bool cast to an
/// integer, a constant of 0s and 1s, or a reshape, broadcast, cast or
/// where of such.
static bool zeroOrOne(Value v, int depth = 0) {
  Type el = elementOf(v);
  if (el.isInteger(1))
    return true;
  if (!isa<IntegerType>(el) || depth > 16)
    return false;
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    auto values = dyn_cast<DenseIntElementsAttr>(c.getValue());
    return values &&
           llvm::all_of(values.getValues<APInt>(),
                        [](const APInt &x) { return x.isZero() || x.isOne(); });
  }
  Operation *op = v.getDefiningOp();
  if (isa_and_nonnull<CastOp, ReshapeOp, BroadcastOp>(op))
    return zeroOrOne(op->getOperand(0), depth + 1);
  if (auto w = dyn_cast_or_null<WhereOp>(op))
    return zeroOrOne(w.getOnTrue(), depth + 1) &&
           zeroOrOne(w.getOnFalse(), depth + 1);
  return false;
}

/// BitwiseAnd/Or/Xor of integers that hold 0s and 1s only (masks cast to
/// integers: CPM-Ant's attention mask), as And/Or/Xor of the masks, cast
/// back; other integers stay errors (their bits are not masks).
static LogicalResult importBitwise(NodeImporter &n, StringRef op) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  if (!zeroOrOne(a) || !zeroOrOne(b))
    return n.error() << "Bitwise" << op
                     << " on run-time values is mapped for integers that "
                        "hold 0s and 1s only (bool masks cast to integers); "
                        "these are "
                     << a.getType() << " and " << b.getType()
                     << ", not known to be masks";
  Type el = elementOf(a);
  auto mask = [&](Value v) {
    return n.create<CmpOp>(CmpPredicate::ne, v, scalarOf(n, elementOf(v), 0.0));
  };
  n.setOutput(0, n.castTo(logic(n, mask(a), mask(b), op), el));
  return success();
}

/// A rows x cols mask becomes a constant of that many elements: checked
/// before the loop that fills it (a fuzzed shape would run for minutes).
static LogicalResult checkMaskSize(NodeImporter &n, int64_t rows,
                                   int64_t cols) {
  if (cols <= 0 || rows <= kMaxEvalElements / cols)
    return success();
  return n.error() << "its mask of " << rows << " x " << cols
                   << " elements is more than the " << kMaxEvalElements
                   << " rp makes a constant of";
}

static LogicalResult importTrilu(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto given = n.constantInts(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return n.error() << "k is not one integer";
    k = (*given)[0];
  }
  bool upper = n.intAttr("upper", 1) != 0;
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2)
    return n.error() << "Trilu of a rank-" << xt.getRank() << " tensor";
  int64_t rows = xt.getShape()[xt.getRank() - 2], cols = xt.getShape().back();
  if (failed(checkMaskSize(n, rows, cols)))
    return failure();
  // Kept: j - i >= k (upper) or j - i <= k (lower).
  SmallVector<bool> keep;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep.push_back(upper ? j - i >= k : j - i <= k);
  Value mask = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({rows, cols}, n.builder.getI1Type()),
      ArrayRef<bool>(keep)));
  n.setOutput(
      0, n.create<WhereOp>(mask, x, scalarOf(n, xt.getElementType(), 0.0)));
  return success();
}

static LogicalResult importTile(NodeImporter &n) {
  auto operands = inputAndInts(n, "repeats");
  if (failed(operands))
    return failure();
  auto [x, repeats] = *operands;
  auto xt = cast<RankedTensorType>(x.getType());
  if ((int64_t)repeats.size() != xt.getRank())
    return n.error() << "expected " << xt.getRank() << " repeats but got "
                     << repeats.size();
  SmallVector<int64_t> shape(xt.getShape());
  for (auto [axis, r] : llvm::enumerate(repeats)) {
    if (r < 0)
      return n.error() << "a negative repeat " << r;
    if (r == 1)
      continue;
    if (r == 0)
      return n.error() << "a repeat of 0 (an empty tensor) on axis " << axis;
    shape[axis] *= r;
    SmallVector<Value> copies(r, x);
    x = n.create<ConcatOp>(RankedTensorType::get(shape, xt.getElementType()),
                           copies, uint64_t(axis));
  }
  n.setOutput(0, x);
  return success();
}

/// A float reduction's input and axes (`op` names it in the error).
static FailureOr<std::pair<Value, SmallVector<int64_t>>>
floatReduction(NodeImporter &n, StringRef op) {
  Value x = n.input(0);
  if (!x)
    return failure();
  auto xt = cast<RankedTensorType>(x.getType());
  if (!isa<FloatType>(xt.getElementType()))
    return n.error() << op << " of a non-float tensor";
  auto axes = reduceAxes(n, xt.getRank(), n.opset >= 18);
  if (failed(axes))
    return failure();
  return std::make_pair(x, *axes);
}

static LogicalResult importLogSumExp(NodeImporter &n) {
  auto operands = floatReduction(n, "ReduceLogSumExp");
  if (failed(operands))
    return failure();
  auto [x, axes] = *operands;
  auto xt = cast<RankedTensorType>(x.getType());
  Type f = xt.getElementType();
  if (axes.empty()) {
    // noop_with_empty_axes: log(exp(x)).
    n.setOutput(0, x);
    return success();
  }
  Value m = n.create<ReduceOp>(ReduceKind::max, x, axes, true);
  // A row all -inf takes m = 0, so it is -inf, as the op, rather than NaN.
  Value ninf = scalarOf(n, f, -std::numeric_limits<double>::infinity());
  m = n.create<WhereOp>(n.create<CmpOp>(CmpPredicate::eq, m, ninf),
                        scalarOf(n, f, 0.0), m);
  Value ex = n.create<ExpOp>(n.create<SubOp>(x, m));
  Value sum = n.create<ReduceOp>(ReduceKind::sum, ex, axes, true);
  Value lse = n.create<AddOp>(n.create<LogOp>(sum), m);
  if (n.intAttr("keepdims", 1) == 0) {
    SmallVector<int64_t> shape;
    for (auto [d, s] : llvm::enumerate(xt.getShape()))
      if (!llvm::is_contained(axes, int64_t(d)))
        shape.push_back(s);
    lse = n.reshape(lse, shape);
  }
  n.setOutput(0, lse);
  return success();
}

static LogicalResult importReduceL2(NodeImporter &n) {
  auto operands = floatReduction(n, "ReduceL2");
  if (failed(operands))
    return failure();
  auto [x, axes] = *operands;
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  bool keep = n.intAttr("keepdims", 1) != 0;
  Value sum = n.create<MulOp>(x, x);
  // noop_with_empty_axes: sqrt(x^2) elementwise.
  if (!axes.empty())
    sum = n.create<ReduceOp>(ReduceKind::sum, sum, axes, keep);
  Value zero = scalarOf(n, f, 0.0);
  Value some = n.create<CmpOp>(CmpPredicate::gt, sum, zero);
  // The sqrt reads 1 where the sum is 0, so its gradient there is finite
  // and the where sends it nowhere.
  Value safe = n.create<WhereOp>(some, sum, scalarOf(n, f, 1.0));
  n.setOutput(0, n.create<WhereOp>(some, n.create<SqrtOp>(safe), zero));
  return success();
}

static LogicalResult importEyeLike(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() != 2)
    return n.error() << "EyeLike of a rank-" << xt.getRank() << " tensor";
  Type element = xt.getElementType();
  if (const auto *a = n.attr("dtype")) {
    element = convertElementType(a->i(), n.builder.getContext());
    if (!element)
      return n.error() << "EyeLike to " << elementTypeName(a->i())
                       << " is not supported";
  }
  int64_t k = n.intAttr("k", 0), rows = xt.getShape()[0],
          cols = xt.getShape()[1];
  if (failed(checkMaskSize(n, rows, cols)))
    return failure();
  SmallVector<float> eye;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      eye.push_back(j - i == k ? 1.0f : 0.0f);
  Value c = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({rows, cols}, n.builder.getF32Type()),
      ArrayRef<float>(eye)));
  n.setOutput(0, n.castTo(c, element));
  return success();
}

static LogicalResult importMod(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  Type t = elementOf(a);
  bool isFloat = isa<FloatType>(t);
  if (t.isInteger(1) || (isFloat && n.intAttr("fmod", 0) == 0))
    return n.error() << "Mod of " << a.getType()
                     << (isFloat ? " with fmod = 0 (ONNX asks fmod = 1 of "
                                   "floats)"
                                 : " values is not defined");
  if (elementOf(b) != t)
    return n.error() << "operands have different element types: " << a.getType()
                     << " and " << b.getType();
  if (failed(broadcastShapes(cast<RankedTensorType>(a.getType()).getShape(),
                             cast<RankedTensorType>(b.getType()).getShape())))
    return n.error() << "operand shapes " << a.getType() << " and "
                     << b.getType() << " do not broadcast";
  // Floats: the quotient truncated through int64 (torch.fmod's gradient:
  // 1 for a, -trunc(a / b) for b; the cast passes none).
  Value quotient = n.create<DivOp>(a, b);
  if (isFloat)
    quotient = n.castTo(n.castTo(quotient, n.builder.getI64Type()), t);
  Value rest = n.create<SubOp>(a, n.create<MulOp>(b, quotient));
  if (n.intAttr("fmod", 0) == 0) {
    // Opposite signs exactly when rest * b < 0 (rest is 0 or smaller than
    // b in magnitude, so the product cannot overflow for |b| < 2^31).
    Value opposite = n.create<CmpOp>(CmpPredicate::lt, n.create<MulOp>(rest, b),
                                     scalarOf(n, t, 0.0));
    rest = n.create<WhereOp>(opposite, n.create<AddOp>(rest, b), rest);
  }
  n.setOutput(0, rest);
  return success();
}

void onnx_import::registerRuntimeComposedHandlers(llvm::StringMap<Handler> &t) {
  t["Abs"] = importAbs;
  t["Clip"] = importClip;
  t["And"] = [](NodeImporter &n) { return importLogic(n, "And"); };
  t["Or"] = [](NodeImporter &n) { return importLogic(n, "Or"); };
  t["Xor"] = [](NodeImporter &n) { return importLogic(n, "Xor"); };
  t["BitwiseAnd"] = [](NodeImporter &n) { return importBitwise(n, "And"); };
  t["BitwiseOr"] = [](NodeImporter &n) { return importBitwise(n, "Or"); };
  t["BitwiseXor"] = [](NodeImporter &n) { return importBitwise(n, "Xor"); };
  t["Trilu"] = importTrilu;
  t["Tile"] = importTile;
  t["ReduceLogSumExp"] = importLogSumExp;
  t["ReduceL2"] = importReduceL2;
  t["EyeLike"] = importEyeLike;
  t["Mod"] = importMod;
}
