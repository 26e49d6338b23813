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
// masked. A causal mask with fewer queries than keys (the queries the last
// ones) or a sliding window (constant, or a band of index ranges) becomes
// the `causal` flag and `window`, and Gemma 2's soft-cap of the scores,
// tanh(s / cap) * cap between the scores and the mask, the `softcap`: so
// neither leaves an S x T mask operand nor keeps the attention unfused.
// GPT-OSS's sinks, a column of one logit per head concatenated to the
// scores and dropped after the softmax, become the `sinks` operand
// (FuseAttentionSinks.cpp).
//
//===----------------------------------------------------------------------===//

#include "FuseAttentionSinks.h"
#include "PatternUtils.h"
#include "rp/Analysis/BandMask.h"
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

/// rp.attention's causal mask as a band of diagonals of [S, T] scores:
/// keys j <= i + T - S (the queries the last S positions), and with a
/// window w > 0 also j > i + T - S - w.
static BandMask causalBand(int64_t rows, int64_t cols, int64_t window) {
  BandMask band{BandMask::kOpenLo, cols - rows};
  if (window > 0)
    band.lo = cols - rows - window + 1;
  return band;
}

/// The window of a band that keeps what rp.attention's causal mask (with
/// that window) keeps of [rows, cols] scores: 0 for the causal mask alone,
/// nullopt when the band is no causal one. Diagonals beyond the scores'
/// extent change nothing.
static std::optional<int64_t> causalWindowOf(BandMask band, int64_t rows,
                                             int64_t cols) {
  if (rows > cols || band.hi != cols - rows)
    return std::nullopt;
  if (band.lo <= -(rows - 1))
    return 0;
  return band.hi - band.lo + 1;
}

/// The window (0: none) of a constant keep-mask [.., S, T] of [.., S, T]
/// `scores` (not broadcast along either) that keeps exactly rp.attention's
/// causal band in every leading slice; nullopt when it keeps anything
/// else.
static std::optional<int64_t> causalWindowOf(DenseElementsAttr keep,
                                             ArrayRef<int64_t> scores) {
  ArrayRef<int64_t> shape = keep.getType().getShape();
  if (shape.size() < 2 || scores.size() < 2)
    return std::nullopt;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (rows != scores[scores.size() - 2] || cols != scores.back() ||
      rows > cols || rows == 0)
    return std::nullopt;
  SmallVector<bool> values(keep.getValues<bool>());
  if (keep.isSplat())
    values.assign(keep.getType().getNumElements(), values.front());
  // The last row has the most keys before its position: it keeps the
  // window (or all of its keys when there is none).
  int64_t kept = 0;
  for (int64_t j = 0; j < cols; ++j)
    kept += values[(rows - 1) * cols + j];
  int64_t window = kept == cols ? 0 : kept;
  if (kept == 0)
    return std::nullopt;
  BandMask band = causalBand(rows, cols, window);
  for (auto [i, v] : llvm::enumerate(values)) {
    int64_t row = (i / cols) % rows, col = i % cols;
    if (v != band.contains(row, col))
      return std::nullopt;
  }
  return window;
}

/// The window (0: none) when the i1 value `cond`, computed from index
/// ranges, keeps exactly rp.attention's causal band of [.., S, T] scores
/// (masks it when `dropWhenTrue`); nullopt otherwise.
static std::optional<int64_t> causalBandWindow(Value cond, bool dropWhenTrue,
                                               ArrayRef<int64_t> scores) {
  if (shapeOf(cond).size() < 2 || scores.size() < 2)
    return std::nullopt;
  std::optional<BandMask> band = matchBandMask(cond);
  if (band && dropWhenTrue)
    band = band->complement();
  if (!band)
    return std::nullopt;
  return causalWindowOf(*band, scores[scores.size() - 2], scores.back());
}

namespace {

/// What to do with the mask, decided before anything is rewritten.
struct MaskPlan {
  enum Kind { none, causal, keep, keepWhere, dropWhere, additive } kind = none;
  int64_t window = 0;             // causal: the sliding window, 0 for none
  DenseElementsAttr keepConstant; // kind == keep
  Value value; // keepWhere: keep condition; dropWhere: masked condition;
               // additive: float mask
};

/// Turns a constant keep mask into the causal flag or a constant operand.
static MaskPlan planKeep(DenseElementsAttr keep, ArrayRef<int64_t> scores) {
  MaskPlan plan;
  std::optional<int64_t> window = causalWindowOf(keep, scores);
  plan.kind = window ? MaskPlan::causal : MaskPlan::keep;
  plan.window = window.value_or(0);
  plan.keepConstant = keep;
  return plan;
}

/// Peels the mask off the softmax input: where(masked, -big, s),
/// where(kept, s, -big) or s + additive. Returns s (the scores itself when
/// there is no mask), or null when the mask has a form rp.attention cannot
/// take.
static Value peelMask(Value scores, MaskPlan &plan) {
  ArrayRef<int64_t> scoresShape = shapeOf(scores);
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
      plan =
          planKeep(DenseElementsAttr::get(cond.getType(), keep), scoresShape);
    } else if (std::optional<int64_t> window = causalBandWindow(
                   where.getCondition(), dropWhenTrue, scoresShape)) {
      plan.kind = MaskPlan::causal;
      plan.window = *window;
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
        plan = planKeep(DenseElementsAttr::get(type, keep), scoresShape);
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
      std::optional<int64_t> window;
      if (keepWhenTrue || dropWhenTrue)
        window =
            causalBandWindow(where.getCondition(), dropWhenTrue, scoresShape);
      if (window) {
        plan.kind = MaskPlan::causal;
        plan.window = *window;
        return s;
      }
    }
    plan.kind = MaskPlan::additive;
    plan.value = additive;
    return s;
  }
  return scores;
}

/// Peels Gemma 2's soft-cap off the scores, tanh(x / cap) * cap (or the
/// division as a multiplication by 1 / cap); returns x and sets `cap`, or
/// returns `v` itself.
static Value peelSoftcap(Value v, double &cap) {
  Value t, c;
  if (!matchEither<MulOp>(v, t, c, [&](Value a, Value b) {
        return a.getDefiningOp<TanhOp>() && splatValue(b) &&
               a.getType() == v.getType();
      }))
    return v;
  double k = *splatValue(c);
  if (!(k > 0.0))
    return v;
  Value inner = t.getDefiningOp<TanhOp>().getInput();
  if (auto div = inner.getDefiningOp<DivOp>()) {
    auto d = splatValue(div.getRhs());
    if (d && *d == k && div.getLhs().getType() == v.getType()) {
      cap = k;
      return div.getLhs();
    }
  }
  Value x, r;
  if (matchEither<MulOp>(inner, x, r, [&](Value a, Value b) {
        auto m = splatValue(b);
        return m && std::abs(*m * k - 1.0) < 1e-6 && a.getType() == v.getType();
      })) {
    cap = k;
    return x;
  }
  return v;
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
    // GPT-OSS's sinks: a column of the softmax, dropped after it.
    std::optional<SinkSoftmax> sinks = matchSinkSoftmax(softmax);
    if (sinks)
      probs = sinks->dropped;
    WhereOp guard = sinks || singleUser(probs) ? WhereOp() : nanGuard(softmax);
    if (guard)
      probs = guard.getResult();
    auto pv = dyn_cast_or_null<MatmulOp>(singleUser(probs));
    if (!pv || pv.getLhs() != probs || pv.getTransposeA() || pv.getTransposeB())
      return failure();
    MaskPlan mask;
    Value scores = peelMask(sinks ? sinks->scores : softmax.getInput(), mask);
    if (!scores)
      return failure();
    // The guard changes nothing only when no row is fully masked: no mask,
    // the causal one, or a constant mask keeping a position in every row.
    if (guard && mask.kind != MaskPlan::none && mask.kind != MaskPlan::causal &&
        !(mask.kind == MaskPlan::keep && everyRowKeeps(mask.keepConstant)))
      return failure();
    // The cap comes between the scaled scores and the mask.
    double softcap = 0.0;
    scores = peelSoftcap(scores, softcap);
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
    ArrayRef<int64_t> scoresShape = shapeOf(probs);
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
    IntegerAttr windowAttr;
    if (mask.kind == MaskPlan::causal && mask.window > 0)
      windowAttr = rewriter.getI64IntegerAttr(mask.window);
    FloatAttr softcapAttr;
    if (softcap > 0.0)
      softcapAttr = rewriter.getF64FloatAttr(softcap);
    Value sinksValue;
    if (sinks)
      sinksValue =
          buildSinks(rewriter, loc, *sinks, qs[1], getElementTypeOrSelf(q));
    Value out = AttentionOp::create(rewriter, loc, type, q, k, v, maskValue,
                                    sinksValue, mask.kind == MaskPlan::causal,
                                    scaleAttr, windowAttr, softcapAttr);
    if (rank == 3)
      out = ReshapeOp::create(rewriter, loc, pv.getType(), out);
    rewriter.replaceOp(pv, out);
    return success();
  }
};

/// The window (0: none) when an rp.attention mask operand keeps exactly
/// the causal band of its [.., S, T] scores: a constant i1 or 0 / -big
/// float mask, an i1 band of index ranges, or where(band, 0, -big).
static std::optional<int64_t> maskAsCausalWindow(Value mask,
                                                 ArrayRef<int64_t> scores) {
  DenseElementsAttr m;
  if (matchPattern(mask, m_Constant(&m))) {
    SmallVector<bool> keep;
    if (m.getElementType().isInteger(1)) {
      keep.assign(m.getValues<bool>().begin(), m.getValues<bool>().end());
    } else {
      for (const APFloat &x : m.getValues<APFloat>()) {
        double d = x.convertToDouble();
        if (d != 0.0 && d > kMaskedScore)
          return std::nullopt;
        keep.push_back(d == 0.0);
      }
    }
    auto type = RankedTensorType::get(m.getType().getShape(),
                                      IntegerType::get(m.getContext(), 1));
    return causalWindowOf(DenseElementsAttr::get(type, keep), scores);
  }
  if (getElementTypeOrSelf(mask).isInteger(1))
    return causalBandWindow(mask, /*dropWhenTrue=*/false, scores);
  if (auto where = mask.getDefiningOp<WhereOp>()) {
    auto onTrue = splatValue(where.getOnTrue());
    auto onFalse = splatValue(where.getOnFalse());
    if (!onTrue || !onFalse)
      return std::nullopt;
    if (*onTrue == 0.0 && *onFalse <= kMaskedScore)
      return causalBandWindow(where.getCondition(), false, scores);
    if (*onFalse == 0.0 && *onTrue <= kMaskedScore)
      return causalBandWindow(where.getCondition(), true, scores);
  }
  return std::nullopt;
}

/// rp.attention built with its mask as an operand (rp.trace's
/// scaled_dot_product_attention with transformers' causal or sliding-window
/// mask, already a constant there) whose mask is the causal band: the
/// `causal` flag and `window` instead, so no S x T operand reaches the
/// device and cuDNN takes its diagonal band.
struct AttentionBandMaskToFlags : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Value mask = op.getMask();
    if (!mask)
      return failure();
    auto q = op.getQuery().getType();
    auto k = op.getKey().getType();
    SmallVector<int64_t> scores = {q.getDimSize(0), q.getDimSize(1),
                                   q.getDimSize(2), k.getDimSize(2)};
    std::optional<int64_t> window = maskAsCausalWindow(mask, scores);
    if (!window)
      return failure();
    // Already causal: the band AND-ed with the causal mask is the band.
    // A window already set and another one in the mask: the narrower.
    int64_t w = *window;
    if (auto had = op.getWindow())
      w = w == 0 ? int64_t(*had) : std::min<int64_t>(w, *had);
    auto fused = AttentionOp::create(
        rewriter, op.getLoc(), op.getType(), op.getQuery(), op.getKey(),
        op.getValue(), Value(), op.getSinks(), /*causal=*/true,
        op.getScaleAttr(),
        w > 0 ? rewriter.getI64IntegerAttr(w) : IntegerAttr(),
        op.getSoftcapAttr());
    rewriter.replaceOp(op, fused.getResult());
    return success();
  }
};

struct FuseAttentionPass : rp::impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttention, AttentionBandMaskToFlags>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
