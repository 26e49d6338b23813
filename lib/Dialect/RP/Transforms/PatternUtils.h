//===- PatternUtils.h - matching helpers of the rp fusion passes -*- C++
//-*-===//
//
// Private to the rp transforms. Exporters write the same formula in several
// association orders; these helpers let a pattern state the formula once.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_TRANSFORMS_PATTERNUTILS_H
#define RP_LIB_DIALECT_RP_TRANSFORMS_PATTERNUTILS_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <optional>

namespace mlir::rp {

/// The value of a float constant whose elements are all equal.
inline std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// True when `v` is a splat constant within a relative 1e-6 of `expected`
/// (exporters round their constants to float).
inline bool isSplatNear(Value v, double expected) {
  auto x = splatValue(v);
  return x && std::abs(*x - expected) <= 1e-6 * std::abs(expected);
}

/// Matches `v = OpTy(a, b)` with `match(a, b)` true for one of the two
/// operand orders; the matched order is stored in (lhs, rhs).
template <typename OpTy, typename Fn>
bool matchEither(Value v, Value &lhs, Value &rhs, Fn &&match) {
  auto op = v ? v.getDefiningOp<OpTy>() : OpTy();
  if (!op)
    return false;
  if (match(op.getLhs(), op.getRhs())) {
    lhs = op.getLhs();
    rhs = op.getRhs();
    return true;
  }
  if (match(op.getRhs(), op.getLhs())) {
    lhs = op.getRhs();
    rhs = op.getLhs();
    return true;
  }
  return false;
}

/// The single user of `v`, or null when it has none or several.
inline Operation *singleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

/// The operand of binary `op` that is not `known`.
inline Value otherOperand(Operation *op, Value known) {
  return op->getOperand(0) == known ? op->getOperand(1) : op->getOperand(0);
}

/// Matches a mean over trailing dimensions with keep_dims; returns its input
/// and the first reduced dimension.
inline bool matchTrailingMean(Value v, Value &input, int64_t &axis) {
  auto mean = v ? v.getDefiningOp<ReduceOp>() : ReduceOp();
  if (!mean || mean.getKind() != ReduceKind::mean || !mean.getKeepDims())
    return false;
  ArrayRef<int64_t> dims = mean.getDims();
  int64_t rank = mean.getInput().getType().getRank();
  for (auto [i, d] : llvm::enumerate(dims))
    if (d != rank - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(i))
      return false;
  input = mean.getInput();
  axis = dims.front();
  return true;
}

/// Matches x^2 written as pow(x, 2) or x * x.
inline bool matchSquare(Value v, Value &x) {
  if (auto pow = v ? v.getDefiningOp<PowOp>() : PowOp())
    if (isSplatNear(pow.getRhs(), 2.0)) {
      x = pow.getLhs();
      return true;
    }
  if (auto mul = v ? v.getDefiningOp<MulOp>() : MulOp())
    if (mul.getLhs() == mul.getRhs()) {
      x = mul.getLhs();
      return true;
    }
  return false;
}

/// Matches the denominator of a normalization, sqrt(mean(d^2) + eps) over
/// trailing dimensions; returns d, the first normalized axis and eps.
inline bool matchRootMeanSquare(Value s, Value &d, int64_t &axis, double &eps) {
  auto sqrt = s ? s.getDefiningOp<SqrtOp>() : SqrtOp();
  if (!sqrt)
    return false;
  Value var, epsilon;
  if (!matchEither<AddOp>(sqrt.getInput(), var, epsilon, [](Value, Value e) {
        return splatValue(e).has_value();
      }))
    return false;
  Value squared;
  if (!matchTrailingMean(var, squared, axis) || !matchSquare(squared, d))
    return false;
  eps = *splatValue(epsilon);
  return eps >= 0.0;
}

/// Matches `v = x / s` or `v = x * (1 / s)`; returns x and s.
inline bool matchDivision(Value v, Value &x, Value &s) {
  if (auto div = v ? v.getDefiningOp<DivOp>() : DivOp()) {
    x = div.getLhs();
    s = div.getRhs();
    return true;
  }
  Value recip;
  return matchEither<MulOp>(v, x, recip, [&](Value, Value r) {
    auto inv = r.getDefiningOp<DivOp>();
    if (!inv || !isSplatNear(inv.getLhs(), 1.0))
      return false;
    s = inv.getRhs();
    return true;
  });
}

/// Extends a normalized value `n` by the elementwise affine that follows it:
/// `n * scale` then, when `withBias`, `+ bias`, each only when `n`'s one
/// user applies a tensor of the normalized shape. Returns the value the
/// fused op replaces.
inline Value matchAffine(Value n, ArrayRef<int64_t> normalized, bool withBias,
                         Value &scale, Value &bias) {
  auto isParamShaped = [&](Value p) {
    auto t = cast<RankedTensorType>(p.getType());
    return t.getShape() == normalized &&
           t.getElementType() == getElementTypeOrSelf(n);
  };
  Value last = n;
  if (auto mul = dyn_cast_or_null<MulOp>(singleUser(last))) {
    Value other = otherOperand(mul, last);
    if (isParamShaped(other) && mul.getType() == n.getType()) {
      scale = other;
      last = mul;
    }
  }
  if (!withBias || !scale)
    return last;
  if (auto add = dyn_cast_or_null<AddOp>(singleUser(last))) {
    Value other = otherOperand(add, last);
    if (isParamShaped(other) && add.getType() == n.getType()) {
      bias = other;
      last = add;
    }
  }
  return last;
}

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_TRANSFORMS_PATTERNUTILS_H
