//===- FuseActivations.cpp - rp-fuse-gelu and rp-fuse-silu ----------------===//
//
// Recognizes GELU (erf and tanh forms) and SiLU written out elementwise and
// rewrites each into its rp op.
//
//===----------------------------------------------------------------------===//

#include "PatternUtils.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::rp {
#define GEN_PASS_DEF_FUSEGELUPASS
#define GEN_PASS_DEF_FUSESILUPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// Finds the value 0.5 * x * t built from `t` in any association order:
/// (x * t) * 0.5, (t * x) * 0.5, x * (t * 0.5), (x * 0.5) * t. Returns null
/// when `t` is not used that way.
static Value matchHalfXTimes(Value t, Value x) {
  auto first = dyn_cast_or_null<MulOp>(singleUser(t));
  if (!first)
    return {};
  Value other = otherOperand(first, t);
  if (other == x) {
    auto second = dyn_cast_or_null<MulOp>(singleUser(first));
    if (second && isSplatNear(otherOperand(second, first), 0.5))
      return second;
    return {};
  }
  if (isSplatNear(other, 0.5)) {
    auto second = dyn_cast_or_null<MulOp>(singleUser(first));
    if (second && otherOperand(second, first) == x)
      return second;
    return {};
  }
  Value a, b;
  if (matchEither<MulOp>(other, a, b, [&](Value p, Value q) {
        return p == x && isSplatNear(q, 0.5);
      }))
    return first;
  return {};
}

/// The shared tail of both GELU forms: `core` (erf or tanh of x) is used
/// once, in `1 + core`, which is multiplied by 0.5 * x.
static LogicalResult rewriteGeluTail(Operation *core, Value x,
                                     GeluApproximation approximation,
                                     PatternRewriter &rewriter) {
  auto add = dyn_cast_or_null<AddOp>(singleUser(core->getResult(0)));
  if (!add || !isSplatNear(otherOperand(add, core->getResult(0)), 1.0))
    return failure();
  Value result = matchHalfXTimes(add, x);
  if (!result || result.getType() != x.getType())
    return failure();
  rewriter.setInsertionPoint(result.getDefiningOp());
  rewriter.replaceOpWithNewOp<GeluOp>(result.getDefiningOp(), x, approximation);
  return success();
}

namespace {

/// 0.5 * x * (1 + erf(x / sqrt(2))), also with x * (1 / sqrt(2)).
struct FuseErfGelu : OpRewritePattern<ErfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ErfOp erf,
                                PatternRewriter &rewriter) const override {
    Value x, c;
    Value arg = erf.getInput();
    bool scaled = false;
    if (auto div = arg.getDefiningOp<DivOp>()) {
      x = div.getLhs();
      scaled = isSplatNear(div.getRhs(), std::sqrt(2.0));
    } else {
      scaled = matchEither<MulOp>(arg, x, c, [](Value, Value k) {
        return isSplatNear(k, 1.0 / std::sqrt(2.0));
      });
    }
    if (!scaled)
      return failure();
    return rewriteGeluTail(erf, x, GeluApproximation::none, rewriter);
  }
};

/// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
struct FuseTanhGelu : OpRewritePattern<TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TanhOp tanh,
                                PatternRewriter &rewriter) const override {
    Value inner, k;
    if (!matchEither<MulOp>(tanh.getInput(), inner, k, [](Value, Value c) {
          return isSplatNear(c, std::sqrt(2.0 / M_PI));
        }))
      return failure();
    Value x, cubic;
    auto isCubicTerm = [&](Value candidateX, Value term) {
      Value p, c;
      return matchEither<MulOp>(term, p, c, [&](Value pw, Value coeff) {
        auto pow = pw.getDefiningOp<PowOp>();
        return pow && pow.getLhs() == candidateX &&
               isSplatNear(pow.getRhs(), 3.0) && isSplatNear(coeff, 0.044715);
      });
    };
    if (!matchEither<AddOp>(inner, x, cubic, isCubicTerm))
      return failure();
    return rewriteGeluTail(tanh, x, GeluApproximation::tanh, rewriter);
  }
};

/// x * sigmoid(x).
struct FuseSilu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    Value x, s;
    if (!matchEither<MulOp>(mul, x, s,
                            [](Value a, Value b) {
                              auto sig = b.getDefiningOp<SigmoidOp>();
                              return sig && sig.getInput() == a;
                            }) ||
        x.getType() != mul.getType())
      return failure();
    rewriter.replaceOpWithNewOp<SiluOp>(mul, x);
    return success();
  }
};

struct FuseGeluPass : rp::impl::FuseGeluPassBase<FuseGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseErfGelu, FuseTanhGelu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

struct FuseSiluPass : rp::impl::FuseSiluPassBase<FuseSiluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseSilu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
