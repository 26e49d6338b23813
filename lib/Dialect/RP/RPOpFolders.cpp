//===- RPOpFolders.cpp - rp folders and canonicalization patterns ---------===//
//
// Folds are exact: a folded graph computes the same bits as the original,
// so that the equivalence contract (bitwise losses across device counts)
// survives canonicalization. That is why, for example, `x + 0.0` does not
// fold (it turns -0.0 into +0.0) while `x + -0.0` does.
//
//===----------------------------------------------------------------------===//

#include "FoldUtils.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/CommonFolders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/APSInt.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The splat value of a constant operand, if it is one.
static std::optional<Attribute> splatOf(Attribute attr) {
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(attr))
    return splat.getSplatValue<Attribute>();
  return std::nullopt;
}

static bool isSplatFloat(Attribute attr, double value, bool negativeZero) {
  auto v = splatOf(attr);
  if (!v)
    return false;
  auto f = dyn_cast<FloatAttr>(*v);
  if (!f)
    return false;
  const APFloat &x = f.getValue();
  if (value == 0.0)
    return x.isZero() && x.isNegative() == negativeZero;
  return x.isExactlyValue(value);
}

static bool isSplatInt(Attribute attr, int64_t value) {
  auto v = splatOf(attr);
  auto i = v ? dyn_cast<IntegerAttr>(*v) : IntegerAttr();
  return i && i.getValue().getSExtValue() == value;
}

/// Folds `op(x, c)` to `x` when `c` is the op's exact identity and no
/// broadcast happens.
static OpFoldResult foldRightIdentity(Value lhs, Attribute rhs, Type result,
                                      double floatIdentity, bool negativeZero,
                                      int64_t intIdentity) {
  if (lhs.getType() != result)
    return {};
  if (isSplatFloat(rhs, floatIdentity, negativeZero) ||
      isSplatInt(rhs, intIdentity))
    return lhs;
  return {};
}

/// Constant-folds a binary op whose operands are constants of the result
/// type (no broadcast).
template <typename FloatFn, typename IntFn>
static Attribute foldBinaryConstants(ArrayRef<Attribute> operands, Type result,
                                     FloatFn &&floatFn, IntFn &&intFn) {
  if (!operands[0] || !operands[1] || !isSmall(result))
    return {};
  // Broadcasting happens on the constants first, so `shape * -1` folds.
  SmallVector<Attribute, 2> expanded;
  for (Attribute a : operands) {
    ElementsAttr e = broadcastElements(a, cast<RankedTensorType>(result));
    if (!e)
      return {};
    expanded.push_back(e);
  }
  operands = expanded;
  if (isa<FloatType>(getElementTypeOrSelf(result)))
    return constFoldBinaryOpConditional<FloatAttr, APFloat, void>(
        operands, result, [&](APFloat a, APFloat b) -> std::optional<APFloat> {
          return floatFn(a, b);
        });
  return constFoldBinaryOpConditional<IntegerAttr, APInt, void>(
      operands, result,
      [&](APInt a, APInt b) -> std::optional<APInt> { return intFn(a, b); });
}

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (Attribute c = foldBinaryConstants(
          adaptor.getOperands(), getType(),
          [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
            a.add(b, APFloat::rmNearestTiesToEven);
            return a;
          },
          [](const APInt &a, const APInt &b) -> std::optional<APInt> {
            return a + b;
          }))
    return c;
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 0.0,
                           /*negativeZero=*/true, 0);
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (Attribute c = foldBinaryConstants(
          adaptor.getOperands(), getType(),
          [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
            a.subtract(b, APFloat::rmNearestTiesToEven);
            return a;
          },
          [](const APInt &a, const APInt &b) -> std::optional<APInt> {
            return a - b;
          }))
    return c;
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 0.0,
                           /*negativeZero=*/false, 0);
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (Attribute c = foldBinaryConstants(
          adaptor.getOperands(), getType(),
          [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
            a.multiply(b, APFloat::rmNearestTiesToEven);
            return a;
          },
          [](const APInt &a, const APInt &b) -> std::optional<APInt> {
            return a * b;
          }))
    return c;
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 1.0, false,
                           1);
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (Attribute c = foldBinaryConstants(
          adaptor.getOperands(), getType(),
          [](APFloat a, const APFloat &b) -> std::optional<APFloat> {
            a.divide(b, APFloat::rmNearestTiesToEven);
            return a;
          },
          [](const APInt &a, const APInt &b) -> std::optional<APInt> {
            // Left to the runtime, which reports it with the op's location.
            if (b.isZero())
              return std::nullopt;
            return a.sdiv(b);
          }))
    return c;
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 1.0, false,
                           1);
}

OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  // pow(x, 1) is exactly x (IEEE pow); other exponents are left to kernels,
  // whose results the folder could not reproduce bit for bit.
  return foldRightIdentity(getLhs(), adaptor.getRhs(), getType(), 1.0, false,
                           1);
}

OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinaryConstants(
      adaptor.getOperands(), getType(),
      [](const APFloat &a, const APFloat &b) -> std::optional<APFloat> {
        return llvm::maximum(a, b);
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sge(b) ? a : b;
      });
}

OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinaryConstants(
      adaptor.getOperands(), getType(),
      [](const APFloat &a, const APFloat &b) -> std::optional<APFloat> {
        return llvm::minimum(a, b);
      },
      [](const APInt &a, const APInt &b) -> std::optional<APInt> {
        return a.sle(b) ? a : b;
      });
}

static bool compare(CmpPredicate p, int order) {
  switch (p) {
  case CmpPredicate::eq:
    return order == 0;
  case CmpPredicate::ne:
    return order != 0;
  case CmpPredicate::lt:
    return order < 0;
  case CmpPredicate::le:
    return order <= 0;
  case CmpPredicate::gt:
    return order > 0;
  case CmpPredicate::ge:
    return order >= 0;
  }
  llvm_unreachable("unknown predicate");
}

OpFoldResult CmpOp::fold(FoldAdaptor adaptor) {
  if (!isSmall(getType()))
    return {};
  auto lhs = dyn_cast_or_null<DenseElementsAttr>(
      broadcastElements(adaptor.getLhs(), getType()));
  auto rhs = dyn_cast_or_null<DenseElementsAttr>(
      broadcastElements(adaptor.getRhs(), getType()));
  if (!lhs || !rhs)
    return {};
  SmallVector<bool> out;
  if (isa<FloatType>(lhs.getElementType())) {
    for (auto [a, b] :
         llvm::zip(lhs.getValues<APFloat>(), rhs.getValues<APFloat>())) {
      APFloat::cmpResult r = a.compare(b);
      if (r == APFloat::cmpUnordered) {
        out.push_back(getPredicate() == CmpPredicate::ne);
        continue;
      }
      out.push_back(compare(getPredicate(), r == APFloat::cmpLessThan ? -1
                                            : r == APFloat::cmpEqual  ? 0
                                                                      : 1));
    }
  } else {
    for (auto [a, b] :
         llvm::zip(lhs.getValues<APInt>(), rhs.getValues<APInt>()))
      out.push_back(compare(getPredicate(), a.slt(b) ? -1 : a == b ? 0 : 1));
  }
  return DenseElementsAttr::get(getType(), out);
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  Value chosen;
  if (getOnTrue() == getOnFalse())
    chosen = getOnTrue();
  else if (auto c = splatOf(adaptor.getCondition()))
    chosen = cast<BoolAttr>(*c).getValue() ? getOnTrue() : getOnFalse();
  if (chosen && chosen.getType() == getType())
    return chosen;
  // Masks built from constants (causal masks of a fixed length) fold whole.
  if (!isSmall(getType()))
    return {};
  auto expand = [&](Attribute a) {
    return dyn_cast_or_null<DenseElementsAttr>(broadcastElements(a, getType()));
  };
  auto cond = expand(adaptor.getCondition());
  auto onTrue = expand(adaptor.getOnTrue());
  auto onFalse = expand(adaptor.getOnFalse());
  if (!cond || !onTrue || !onFalse)
    return {};
  SmallVector<Attribute> out;
  auto t = onTrue.getValues<Attribute>(), f = onFalse.getValues<Attribute>();
  for (auto [i, c] : llvm::enumerate(cond.getValues<bool>()))
    out.push_back(c ? t[i] : f[i]);
  return DenseElementsAttr::get(getType(), out);
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  auto in = dyn_cast_or_null<ElementsAttr>(adaptor.getInput());
  if (!in || !isSmall(getType()))
    return {};
  if (isa<FloatType>(getType().getElementType()))
    return constFoldUnaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(), [](const APFloat &a) { return -a; });
  return constFoldUnaryOp<IntegerAttr, APInt, void>(
      adaptor.getOperands(), [](const APInt &a) { return -a; });
}

OpFoldResult SqrtOp::fold(FoldAdaptor adaptor) {
  // A correctly rounded sqrt in double, rounded again to a narrower type,
  // is the correctly rounded narrow sqrt: the fold matches any IEEE kernel.
  if (!adaptor.getInput() || !isSmall(getType()))
    return {};
  return constFoldUnaryOp<FloatAttr, APFloat, void>(
      adaptor.getOperands(), [](const APFloat &a) {
        bool lost;
        APFloat d = a;
        d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
        APFloat r(std::sqrt(d.convertToDouble()));
        r.convert(a.getSemantics(), APFloat::rmNearestTiesToEven, &lost);
        return r;
      });
}

namespace {
/// neg(neg(x)) -> x: negation is exact, so twice is the identity.
struct FoldDoubleNegation : OpRewritePattern<NegOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(NegOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<NegOp>();
    if (!inner)
      return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};
} // namespace

void NegOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                        MLIRContext *context) {
  results.add<FoldDoubleNegation>(context);
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

/// Converts one constant element to `to`, or nothing when the conversion is
/// not one the folder handles exactly like the runtime does.
static std::optional<Attribute> convertElement(Attribute value, Type to) {
  if (auto f = dyn_cast<FloatAttr>(value)) {
    if (auto toFloat = dyn_cast<FloatType>(to)) {
      APFloat x = f.getValue();
      bool lost;
      x.convert(toFloat.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      return FloatAttr::get(to, x);
    }
    auto toInt = cast<IntegerType>(to);
    if (toInt.getWidth() == 1)
      return IntegerAttr::get(to, APInt(1, !f.getValue().isZero()));
    APSInt out(toInt.getWidth(), /*isUnsigned=*/false);
    bool exact;
    // NaN and out-of-range values have no defined result: leave them to
    // the runtime rather than fold an arbitrary one.
    if (f.getValue().convertToInteger(out, APFloat::rmTowardZero, &exact) &
        APFloat::opInvalidOp)
      return std::nullopt;
    return IntegerAttr::get(to, out);
  }
  auto i = dyn_cast<IntegerAttr>(value);
  if (!i)
    return std::nullopt;
  APInt x = i.getValue();
  bool isBool = x.getBitWidth() == 1;
  if (auto toInt = dyn_cast<IntegerType>(to)) {
    if (toInt.getWidth() == 1)
      return IntegerAttr::get(to, APInt(1, !x.isZero()));
    return IntegerAttr::get(to, isBool ? x.zext(toInt.getWidth())
                                       : x.sextOrTrunc(toInt.getWidth()));
  }
  auto toFloat = cast<FloatType>(to);
  APFloat y(toFloat.getFloatSemantics());
  y.convertFromAPInt(x, /*IsSigned=*/!isBool, APFloat::rmNearestTiesToEven);
  return FloatAttr::get(to, y);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  Type to = getType().getElementType();
  if (auto v = splatOf(adaptor.getInput())) {
    if (auto converted = convertElement(*v, to))
      return SplatElementsAttr::get(getType(), *converted);
    return {};
  }
  auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (!dense || !isSmall(getType()))
    return {};
  SmallVector<Attribute> out;
  for (Attribute v : dense.getValues<Attribute>()) {
    auto converted = convertElement(v, to);
    if (!converted)
      return {};
    out.push_back(*converted);
  }
  return DenseElementsAttr::get(getType(), out);
}

/// True when every value of `narrow` is exactly representable in `wide`.
static bool widensExactly(Type narrow, Type wide) {
  auto n = dyn_cast<FloatType>(narrow), w = dyn_cast<FloatType>(wide);
  if (!n || !w)
    return false;
  const llvm::fltSemantics &ns = n.getFloatSemantics(),
                           &ws = w.getFloatSemantics();
  return APFloat::semanticsPrecision(ns) <= APFloat::semanticsPrecision(ws) &&
         APFloat::semanticsMaxExponent(ns) <=
             APFloat::semanticsMaxExponent(ws) &&
         APFloat::semanticsMinExponent(ns) >= APFloat::semanticsMinExponent(ws);
}

namespace {
/// cast(cast(x : A) : B) : A -> x when B holds every value of A exactly
/// (f16 -> f32 -> f16, bf16 -> f64 -> bf16). A narrowing round trip
/// (f32 -> bf16 -> f32) rounds and is kept.
struct FoldLosslessCastRoundTrip : OpRewritePattern<CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner || inner.getInput().getType() != op.getType())
      return failure();
    if (!widensExactly(op.getType().getElementType(),
                       inner.getType().getElementType()))
      return failure();
    rewriter.replaceOp(op, inner.getInput());
    return success();
  }
};
} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<FoldLosslessCastRoundTrip>(context);
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

namespace {
/// matmul(a, transpose(b)) with a transpose of the last two dimensions only
/// -> matmul(a, b) with the transpose flag toggled: exporters transpose
/// every [out, in] weight, and the kernels read either layout.
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  static Value swappedInput(Value v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t)
      return {};
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t rank = perm.size();
    for (int64_t d = 0; d < rank; ++d) {
      int64_t expected =
          d < rank - 2 ? d : (d == rank - 2 ? rank - 1 : rank - 2);
      if (perm[d] != expected)
        return {};
    }
    return t.getInput();
  }
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value lhs = swappedInput(op.getLhs()), rhs = swappedInput(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(
        op, op.getType(), lhs ? lhs : op.getLhs(), rhs ? rhs : op.getRhs(),
        lhs ? !op.getTransposeA() : op.getTransposeA(),
        rhs ? !op.getTransposeB() : op.getTransposeB());
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

OpFoldResult ReduceOp::fold(FoldAdaptor) {
  // Reducing only size-1 dimensions and keeping them is the identity for
  // every kind (a mean over one element divides by 1, exactly).
  if (getInput().getType() == getType())
    return getInput();
  return {};
}
