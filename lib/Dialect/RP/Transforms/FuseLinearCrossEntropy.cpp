//===- FuseLinearCrossEntropy.cpp - rp-fuse-linear-cross-entropy ----------===//
//
// The LM head's logits are [tokens, vocabulary]: 151,936 x 73k x 2 bytes is
// 22 GB for Qwen3 at RoundPipe's sequence length, more than the rest of the
// stage. When they feed nothing but the loss, the head and the loss become
// one rp.linear_cross_entropy, whose kernels compute the logits a chunk of
// tokens at a time, forward and backward.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <algorithm>

namespace mlir::rp {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPYPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Rows per chunk when the pass is not told: as many as keep a chunk's f32
/// logits within kChunkBytes, in whole multiples of kRowGrain (the host
/// kernel's GEMM row block, so a chunk never splits one), at least one.
constexpr int64_t kChunkBytes = int64_t(64) << 20;
constexpr int64_t kRowGrain = 128;

int64_t defaultChunk(int64_t classes) {
  int64_t rows = kChunkBytes / (std::max<int64_t>(classes, 1) * 4);
  return std::max<int64_t>(kRowGrain, rows / kRowGrain * kRowGrain);
}

/// cross_entropy(matmul(h, W^T)) or cross_entropy(matmul(h, W)) with a 2-D
/// weight, whose logits have no other reader.
struct FuseLinearCrossEntropy : OpRewritePattern<CrossEntropyOp> {
  FuseLinearCrossEntropy(MLIRContext *context, int64_t chunk)
      : OpRewritePattern(context), chunk(chunk) {}

  LogicalResult matchAndRewrite(CrossEntropyOp ce,
                                PatternRewriter &rewriter) const override {
    auto mm = ce.getLogits().getDefiningOp<MatmulOp>();
    if (!mm)
      return rewriter.notifyMatchFailure(ce, "logits are not a matmul");
    if (!mm->hasOneUse())
      return rewriter.notifyMatchFailure(ce, "the logits have other readers");
    auto weightType = cast<RankedTensorType>(mm.getRhs().getType());
    auto hiddenType = cast<RankedTensorType>(mm.getLhs().getType());
    if (mm.getTransposeA() || weightType.getRank() != 2 ||
        hiddenType.getRank() < 2)
      return rewriter.notifyMatchFailure(ce, "not a linear layer's matmul");
    Value weight = mm.getRhs();
    // The op takes the [classes, K] layout; a [K, classes] head is
    // transposed once (weight-sized, not logits-sized).
    if (!mm.getTransposeB())
      weight = TransposeOp::create(rewriter, mm.getLoc(), weight,
                                   ArrayRef<int64_t>{1, 0});
    int64_t classes = cast<RankedTensorType>(weight.getType()).getShape()[0];
    // Both locations, the loss's last (the name a plan gives the op), so
    // that rp-choose-loss-fusion can give each op back its own.
    Location loc = rewriter.getFusedLoc({mm.getLoc(), ce.getLoc()});
    auto fused = LinearCrossEntropyOp::create(
        rewriter, loc, ce->getResultTypes(), mm.getLhs(), weight,
        ce.getLabels(), ce.getIgnoreIndex(),
        chunk > 0 ? chunk : defaultChunk(classes));
    rewriter.replaceOp(ce, fused->getResults());
    rewriter.eraseOp(mm);
    return success();
  }

  int64_t chunk;
};

struct FuseLinearCrossEntropyPass
    : rp::impl::FuseLinearCrossEntropyPassBase<FuseLinearCrossEntropyPass> {
  using FuseLinearCrossEntropyPassBase::FuseLinearCrossEntropyPassBase;

  void runOnOperation() override {
    if (chunk < 0) {
      mlir::emitError(getOperation()->getLoc(),
                      "rp-fuse-linear-cross-entropy: chunk must be 0 "
                      "(automatic) or a positive number of rows, got ")
          << static_cast<int64_t>(chunk);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLinearCrossEntropy>(&getContext(), chunk);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
