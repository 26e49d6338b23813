//===- FuseAttention.cpp - rp-fuse-attention ------------------------------===//
//
// Recognizes scaled dot-product attention written out,
//   softmax(scale * Q K^T + mask) V,
// and rewrites it into rp.attention, which devices run fused with memory
// linear in the sequence length. Handles the forms exporters emit: the scale
// on Q or on the scores, K^T as a transpose or a transposed matmul, masks as
// where(masked, -inf, scores) or an additive float tensor, a constant causal
// mask (which becomes the `causal` flag), the same mask computed from two
// index ranges (BandMask.h: how long-sequence imports write it, with no
// S x S constant), [batch*heads, seq, dim] tensors,
// key/value heads repeated for grouped-query attention (the repeat is
// dropped: rp.attention shares key/value heads itself), and torch 2's NaN
// guard where(p != p, 0, p) on the probabilities when no row can be fully
// masked.
//
//===----------------------------------------------------------------------===//

#include "PatternUtils.h"
#include "rp/Dialect/RP/BandMask.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::rp {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// Masked positions get scores at or below this; anything lower than any
/// real score counts as "excluded".
static constexpr double kMaskedScore = -1e4;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Peels `v * c` or `v / c` with a scalar constant c; multiplies `scale`.
static Value peelScale(Value v, double &scale) {
  Value x, c;
  if (auto div = v.getDefiningOp<DivOp>())
    if (auto k = splatValue(div.getRhs());
        k && *k != 0.0 && div.getType() == div.getLhs().getType()) {
      scale /= *k;
      return div.getLhs();
    }
  if (matchEither<MulOp>(v, x, c, [&](Value a, Value b) {
        return splatValue(b) && a.getType() == v.getType();
      })) {
    scale *= *splatValue(c);
    return x;
  }
  return v;
}

/// The permutation that swaps the last two dimensions.
static SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

/// For [B, H, T, D] produced by repeating [B, Hkv, T, D] heads
/// (reshape to [B, Hkv, 1, T, D], broadcast, reshape back), the unrepeated
/// tensor; otherwise `v` itself.
static Value stripHeadRepeat(Value v) {
  auto outer = v.getDefiningOp<ReshapeOp>();
  auto bc =
      outer ? outer.getInput().getDefiningOp<BroadcastOp>() : BroadcastOp();
  auto inner = bc ? bc.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner)
    return v;
  ArrayRef<int64_t> out = shapeOf(v), mid = shapeOf(bc),
                    src = shapeOf(inner.getInput()), pre = shapeOf(inner);
  if (out.size() != 4 || src.size() != 4 || mid.size() != 5 ||
      pre != ArrayRef<int64_t>{src[0], src[1], 1, src[2], src[3]} ||
      mid != ArrayRef<int64_t>{src[0], src[1], mid[2], src[2], src[3]} ||
      out != ArrayRef<int64_t>{src[0], src[1] * mid[2], src[2], src[3]})
    return v;
  return inner.getInput();
}

/// A constant keep-mask [.., S, T] that keeps exactly j <= i.
static bool isCausal(DenseElementsAttr keep) {
  ArrayRef<int64_t> shape = keep.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
    return false;
  int64_t n = shape.back();
  for (auto [i, v] : llvm::enumerate(keep.getValues<bool>())) {
    int64_t row = (i / n) % n, col = i % n;
    if (v != (col <= row))
      return false;
  }
  return true;
}

/// Whether the i1 value `cond`, computed from index ranges, keeps exactly
/// j <= i of square [.., S, S] scores (masks them when `dropWhenTrue`).
static bool isCausalBand(Value cond, bool dropWhenTrue) {
  ArrayRef<int64_t> shape = shapeOf(cond);
  if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
    return false;
  std::optional<BandMask> band = matchBandMask(cond);
  if (band && dropWhenTrue)
    band = band->complement();
  if (!band)
    return false;
  // Diagonals beyond the scores' extent change nothing.
  int64_t n = shape.back();
  return band->lo <= -(n - 1) && band->hi == 0;
}

namespace {

/// What to do with the mask, decided before anything is rewritten.
struct MaskPlan {
  enum Kind { none, causal, keep, keepWhere, dropWhere, additive } kind = none;
  DenseElementsAttr keepConstant; // kind == keep
  Value value; // keepWhere: keep condition; dropWhere: masked condition;
               // additive: float mask
};

/// Turns a constant keep mask into the causal flag or a constant operand.
static MaskPlan planKeep(DenseElementsAttr keep) {
  MaskPlan plan;
  plan.kind = isCausal(keep) ? MaskPlan::causal : MaskPlan::keep;
  plan.keepConstant = keep;
  return plan;
}

/// Peels the mask off the softmax input: where(masked, -big, s),
/// where(kept, s, -big) or s + additive. Returns s (the scores itself when
/// there is no mask), or null when the mask has a form rp.attention cannot
/// take.
static Value peelMask(Value scores, MaskPlan &plan) {
  if (auto where = scores.getDefiningOp<WhereOp>()) {
    auto fillTrue = splatValue(where.getOnTrue());
    auto fillFalse = splatValue(where.getOnFalse());
    bool dropWhenTrue = fillTrue && *fillTrue <= kMaskedScore;
    bool dropWhenFalse = fillFalse && *fillFalse <= kMaskedScore;
    if (dropWhenTrue == dropWhenFalse)
      return {};
    DenseElementsAttr cond;
    if (matchPattern(where.getCondition(), m_Constant(&cond))) {
      SmallVector<bool> keep;
      for (bool c : cond.getValues<bool>())
        keep.push_back(dropWhenTrue ? !c : c);
      plan = planKeep(DenseElementsAttr::get(cond.getType(), keep));
    } else if (isCausalBand(where.getCondition(), dropWhenTrue)) {
      plan.kind = MaskPlan::causal;
    } else {
      plan.kind = dropWhenTrue ? MaskPlan::dropWhere : MaskPlan::keepWhere;
      plan.value = where.getCondition();
    }
    return dropWhenTrue ? where.getOnFalse() : where.getOnTrue();
  }
  Value s, additive;
  if (matchEither<AddOp>(scores, s, additive, [&](Value a, Value m) {
        return a.getType() == scores.getType() &&
               (a.getDefiningOp<MatmulOp>() || a.getDefiningOp<MulOp>() ||
                a.getDefiningOp<DivOp>());
      })) {
    DenseElementsAttr m;
    if (matchPattern(additive, m_Constant(&m))) {
      // A 0 / -big float mask says which positions to keep.
      SmallVector<bool> keep;
      for (const APFloat &x : m.getValues<APFloat>()) {
        double d = x.convertToDouble();
        if (d != 0.0 && d > kMaskedScore) {
          keep.clear();
          break;
        }
        keep.push_back(d == 0.0);
      }
      if (!keep.empty()) {
        auto type = RankedTensorType::get(m.getType().getShape(),
                                          IntegerType::get(m.getContext(), 1));
        plan = planKeep(DenseElementsAttr::get(type, keep));
        return s;
      }
    }
    // where(keep, 0, -big) or where(drop, -big, 0) of an index-range band.
    if (auto where = additive.getDefiningOp<WhereOp>()) {
      auto onTrue = splatValue(where.getOnTrue());
      auto onFalse = splatValue(where.getOnFalse());
      bool keepWhenTrue =
          onTrue && onFalse && *onTrue == 0.0 && *onFalse <= kMaskedScore;
      bool dropWhenTrue =
          onTrue && onFalse && *onFalse == 0.0 && *onTrue <= kMaskedScore;
      if ((keepWhenTrue || dropWhenTrue) &&
          isCausalBand(where.getCondition(), dropWhenTrue)) {
        plan.kind = MaskPlan::causal;
        return s;
      }
    }
    plan.kind = MaskPlan::additive;
    plan.value = additive;
    return s;
  }
  return scores;
}

/// torch 2's exporters guard the probabilities against fully masked rows,
/// whose softmax is NaN: where(p != p, 0, p). Returns that where when it is
/// all `softmax` feeds.
static WhereOp nanGuard(SoftmaxOp softmax) {
  Value p = softmax.getResult();
  CmpOp cmp;
  WhereOp where;
  for (Operation *user : p.getUsers()) {
    if (auto c = dyn_cast<CmpOp>(user)) {
      if (c.getPredicate() != CmpPredicate::ne || c.getLhs() != p ||
          c.getRhs() != p || (cmp && cmp != c))
        return {};
      cmp = c;
    } else if (auto w = dyn_cast<WhereOp>(user)) {
      if (where && where != w)
        return {};
      where = w;
    } else {
      return {};
    }
  }
  if (!cmp || !where || singleUser(cmp.getResult()) != where ||
      where.getCondition() != cmp.getResult() || where.getOnFalse() != p ||
      !matchPattern(where.getOnTrue(), m_AnyZeroFloat()))
    return {};
  return where;
}

/// Whether every row (last dimension) of a keep mask keeps a position, so
/// that no softmax row is NaN and a NaN guard changes nothing.
static bool everyRowKeeps(DenseElementsAttr keep) {
  int64_t n = keep.getType().getShape().back(), kept = 0, i = 0;
  for (bool v : keep.getValues<bool>()) {
    kept += v;
    if (++i % n == 0) {
      if (!kept)
        return false;
      kept = 0;
    }
  }
  return true;
}

struct FuseAttention : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    // Match everything first: a pattern that fails must not have changed
    // the IR.
    int64_t rank = softmax.getType().getRank();
    if ((rank != 3 && rank != 4) ||
        static_cast<int64_t>(softmax.getDim()) != rank - 1)
      return failure();
    Value probs = softmax.getResult();
    WhereOp guard = singleUser(probs) ? WhereOp() : nanGuard(softmax);
    if (guard)
      probs = guard.getResult();
    auto pv = dyn_cast_or_null<MatmulOp>(singleUser(probs));
    if (!pv || pv.getLhs() != probs || pv.getTransposeA() || pv.getTransposeB())
      return failure();
    MaskPlan mask;
    Value scores = peelMask(softmax.getInput(), mask);
    if (!scores)
      return failure();
    // The guard changes nothing only when no row is fully masked: no mask,
    // the causal one, or a constant mask keeping a position in every row.
    if (guard && mask.kind != MaskPlan::none && mask.kind != MaskPlan::causal &&
        !(mask.kind == MaskPlan::keep && everyRowKeeps(mask.keepConstant)))
      return failure();
    double scale = 1.0;
    scores = peelScale(scores, scale);
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk || qk.getTransposeA())
      return failure();
    Value q = peelScale(qk.getLhs(), scale);
    Value v = pv.getRhs();
    // K is the right operand of Q K^T with its last two dimensions swapped
    // back: a transposed matmul, the input of a transpose, or a new
    // transpose.
    Value kSource = qk.getRhs();
    SmallVector<int64_t> kPerm;
    if (!qk.getTransposeB()) {
      kPerm = swapLastTwo(rank);
      if (auto t = kSource.getDefiningOp<TransposeOp>()) {
        kPerm.assign(t.getPermutation().begin(), t.getPermutation().end());
        std::swap(kPerm[rank - 1], kPerm[rank - 2]);
        kSource = t.getInput();
        if (llvm::equal(kPerm, llvm::seq<int64_t>(0, rank)))
          kPerm.clear();
      }
    }
    SmallVector<int64_t> kShape(shapeOf(kSource));
    if (!kPerm.empty())
      for (int64_t d = 0; d < rank; ++d)
        kShape[d] = shapeOf(kSource)[kPerm[d]];
    if (shapeOf(q).size() != (size_t)rank ||
        shapeOf(v).size() != (size_t)rank ||
        shapeOf(q).drop_back(2) != ArrayRef<int64_t>(kShape).drop_back(2) ||
        ArrayRef<int64_t>(kShape).drop_back(2) != shapeOf(v).drop_back(2))
      return failure();

    // The mask must broadcast to the scores, and a float mask must have the
    // scores' element type.
    ArrayRef<int64_t> scoresShape = softmax.getType().getShape();
    if (mask.kind == MaskPlan::keep || mask.value) {
      auto type = mask.kind == MaskPlan::keep
                      ? cast<RankedTensorType>(mask.keepConstant.getType())
                      : cast<RankedTensorType>(mask.value.getType());
      auto merged = broadcastShapes(type.getShape(), scoresShape);
      if (failed(merged) || ArrayRef<int64_t>(*merged) != scoresShape)
        return failure();
      if (mask.kind == MaskPlan::additive &&
          type.getElementType() != softmax.getType().getElementType())
        return failure();
    }
    Location loc = softmax.getLoc();
    rewriter.setInsertionPoint(pv);
    Value k =
        kPerm.empty()
            ? kSource
            : TransposeOp::create(rewriter, loc, kSource, kPerm).getResult();
    Value maskValue;
    switch (mask.kind) {
    case MaskPlan::none:
    case MaskPlan::causal:
      break;
    case MaskPlan::keep:
      maskValue = ConstantOp::create(rewriter, loc, mask.keepConstant);
      break;
    case MaskPlan::keepWhere:
    case MaskPlan::additive:
      maskValue = mask.value;
      break;
    case MaskPlan::dropWhere: {
      auto no = ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(
              RankedTensorType::get({}, rewriter.getI1Type()), false));
      maskValue =
          CmpOp::create(rewriter, loc, CmpPredicate::eq, mask.value, no);
      break;
    }
    }
    if (rank == 4) {
      Value k0 = stripHeadRepeat(k), v0 = stripHeadRepeat(v);
      if (k0 != k && v0 != v && shapeOf(k0)[1] == shapeOf(v0)[1]) {
        k = k0;
        v = v0;
      }
    } else {
      // [batch*heads, seq, dim]: one head per batch entry.
      auto addHeadDim = [&](Value x) {
        ArrayRef<int64_t> s = shapeOf(x);
        auto type = RankedTensorType::get({s[0], 1, s[1], s[2]},
                                          getElementTypeOrSelf(x));
        return ReshapeOp::create(rewriter, loc, type, x).getResult();
      };
      q = addHeadDim(q);
      k = addHeadDim(k);
      v = addHeadDim(v);
      if (maskValue && shapeOf(maskValue).size() == 3)
        maskValue = addHeadDim(maskValue);
    }
    ArrayRef<int64_t> qs = shapeOf(q);
    auto type = RankedTensorType::get({qs[0], qs[1], qs[2], shapeOf(v)[3]},
                                      getElementTypeOrSelf(q));
    double natural = 1.0 / std::sqrt(static_cast<double>(qs[3]));
    FloatAttr scaleAttr;
    if (std::abs(scale - natural) > 1e-6 * natural)
      scaleAttr = rewriter.getF64FloatAttr(scale);
    Value out = AttentionOp::create(rewriter, loc, type, q, k, v, maskValue,
                                    mask.kind == MaskPlan::causal, scaleAttr);
    if (rank == 3)
      out = ReshapeOp::create(rewriter, loc, pv.getType(), out);
    rewriter.replaceOp(pv, out);
    return success();
  }
};

struct FuseAttentionPass : rp::impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
