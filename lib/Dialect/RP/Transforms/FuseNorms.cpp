//===- FuseNorms.cpp - rp-fuse-layer-norm and rp-fuse-rms-norm ------------===//
//
// Recognizes normalizations that exporters decompose (opset < 17 layer
// norm, every RMSNorm) and rewrites each into one rp.layer_norm or
// rp.rms_norm, so the runtime runs one kernel and autodiff one rule.
//
//===----------------------------------------------------------------------===//

#include "PatternUtils.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rp {
#define GEN_PASS_DEF_FUSELAYERNORMPASS
#define GEN_PASS_DEF_FUSERMSNORMPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale [+ bias]]
struct FuseLayerNorm : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp div,
                                PatternRewriter &rewriter) const override {
    Value centered, s, x;
    int64_t axis, meanAxis;
    double eps;
    if (!matchDivision(div, centered, s) ||
        !matchRootMeanSquare(s, x, axis, eps) || x != centered)
      return failure();
    auto sub = centered.getDefiningOp<SubOp>();
    Value input;
    if (!sub || !matchTrailingMean(sub.getRhs(), input, meanAxis) ||
        input != sub.getLhs() || meanAxis != axis ||
        div.getType() != sub.getLhs().getType())
      return failure();
    ArrayRef<int64_t> normalized = div.getType().getShape().drop_front(axis);
    Value scale, bias;
    Value last = matchAffine(div, normalized, /*withBias=*/true, scale, bias);
    rewriter.setInsertionPoint(last.getDefiningOp());
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        last.getDefiningOp(), div.getType(), input, scale, bias,
        rewriter.getI64IntegerAttr(axis), rewriter.getF64FloatAttr(eps));
    return success();
  }
};

/// x / sqrt(mean(x^2) + eps) [* scale], also as x * (1 / sqrt(...)).
struct FuseRmsNorm : OpRewritePattern<SqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SqrtOp sqrt,
                                PatternRewriter &rewriter) const override {
    Value x;
    int64_t axis;
    double eps;
    if (!matchRootMeanSquare(sqrt, x, axis, eps))
      return failure();
    // x - mean(x) squared is a layer norm, which rp-fuse-layer-norm owns.
    Value unused;
    int64_t unusedAxis;
    if (auto sub = x.getDefiningOp<SubOp>())
      if (matchTrailingMean(sub.getRhs(), unused, unusedAxis))
        return failure();
    for (Operation *user : sqrt->getUsers()) {
      Value numerator, denominator;
      Value normalized = user->getResult(0);
      if (auto inv = dyn_cast<DivOp>(user);
          inv && isSplatNear(inv.getLhs(), 1.0)) {
        if (!singleUser(inv))
          continue;
        normalized = singleUser(inv)->getResult(0);
      }
      if (!matchDivision(normalized, numerator, denominator) ||
          numerator != x || denominator != sqrt.getResult() ||
          normalized.getType() != x.getType())
        continue;
      auto type = cast<RankedTensorType>(x.getType());
      Value scale, bias;
      Value last = matchAffine(normalized, type.getShape().drop_front(axis),
                               /*withBias=*/false, scale, bias);
      rewriter.setInsertionPoint(last.getDefiningOp());
      rewriter.replaceOpWithNewOp<RmsNormOp>(
          last.getDefiningOp(), type, x, scale,
          rewriter.getI64IntegerAttr(axis), rewriter.getF64FloatAttr(eps));
      return success();
    }
    return failure();
  }
};

template <typename Pattern, typename Base> struct FusePass : Base {
  void runOnOperation() override {
    RewritePatternSet patterns(&this->getContext());
    patterns.add<Pattern>(&this->getContext());
    if (failed(
            applyPatternsGreedily(this->getOperation(), std::move(patterns))))
      this->signalPassFailure();
  }
};

struct FuseLayerNormPass
    : FusePass<FuseLayerNorm,
               rp::impl::FuseLayerNormPassBase<FuseLayerNormPass>> {};
struct FuseRmsNormPass
    : FusePass<FuseRmsNorm, rp::impl::FuseRmsNormPassBase<FuseRmsNormPass>> {};

} // namespace
