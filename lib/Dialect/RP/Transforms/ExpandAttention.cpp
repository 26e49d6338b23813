//===- ExpandAttention.cpp - rp.attention as the ops it stands for --------===//
//
// rp-autodiff's rewrite of an attention whose float mask needs a gradient.
//
//===----------------------------------------------------------------------===//

#include "ExpandAttention.h"

#include "mlir/IR/Builders.h"

#include <limits>

using namespace mlir;
using namespace mlir::rp;

/// The trainable parameter `mask` is, reshaped or cast at most (through
/// layer operands too), or null: an ONNX initializer holding a buffer looks
/// just like one.
static ParamOp maskParameter(Value mask) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(mask)) {
      auto layer = dyn_cast<LayerOp>(arg.getOwner()->getParentOp());
      if (!layer)
        return nullptr;
      mask = layer.getInputs()[arg.getArgNumber()];
      continue;
    }
    Operation *def = mask.getDefiningOp();
    if (auto p = dyn_cast<ParamOp>(def))
      return p.getTrainable() ? p : nullptr;
    if (!isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp, CastOp>(def))
      return nullptr;
    mask = def->getOperand(0);
  }
}

/// Rewrites `a` as matmul, scale, add of the mask, causal where, softmax and
/// matmul: rp.attention gives its mask no gradient, and a learned mask (a
/// relative position bias) needs one.
LogicalResult mlir::rp::expandAttention(AttentionOp a) {
  auto q = cast<RankedTensorType>(a.getQuery().getType());
  auto k = cast<RankedTensorType>(a.getKey().getType());
  int64_t rank = q.getRank();
  if (a.getSinks())
    return a.emitOpError("has attention sinks and its mask needs a gradient "
                         "(it depends on a trainable parameter); rp "
                         "differentiates a learned mask only without sinks");
  if (q.getDimSize(rank - 3) != k.getDimSize(rank - 3))
    return a.emitOpError("shares key/value heads among query heads and its "
                         "mask needs a gradient (it depends on a trainable "
                         "parameter); rp differentiates a learned mask only "
                         "with as many key/value heads as query heads");
  if (ParamOp p = maskParameter(a.getMask()))
    a.emitWarning("adds the trainable parameter '")
        << p.getName()
        << "' to its scores as a mask, so it gets a gradient and is "
           "trained; if it is a buffer (an ONNX initializer holding a "
           "constant bias), freeze it with --frozen";
  OpBuilder b(a);
  Location loc = a.getLoc();
  Type element = q.getElementType();
  auto scalar = [&](double x) -> Value {
    auto t = RankedTensorType::get({}, element);
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, b.getFloatAttr(element, x)));
  };
  Value scores =
      MatmulOp::create(b, loc, a.getQuery(), a.getKey(), false, true);
  if (double scale = a.getEffectiveScale(); scale != 1.0)
    scores = MulOp::create(b, loc, scores, scalar(scale));
  // Gemma 2's order: divide, tanh, multiply, then the mask.
  if (std::optional<APFloat> cap = a.getSoftcap()) {
    Value c = scalar(cap->convertToDouble());
    scores = DivOp::create(b, loc, scores, c);
    scores = TanhOp::create(b, loc, scores);
    scores = MulOp::create(b, loc, scores, c);
  }
  scores = AddOp::create(b, loc, scores, a.getMask());
  if (a.getCausal()) {
    auto st = cast<RankedTensorType>(scores.getType());
    int64_t rows = st.getDimSize(rank - 2), cols = st.getDimSize(rank - 1);
    // Bottom-right: query i is at position i + cols - rows.
    int64_t window = a.getWindow().value_or(cols + 1);
    SmallVector<bool> keep;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t p = i + cols - rows;
        keep.push_back(j <= p && j > p - window);
      }
    auto kt = RankedTensorType::get({rows, cols}, b.getI1Type());
    Value kept = ConstantOp::create(b, loc, DenseElementsAttr::get(kt, keep));
    scores = WhereOp::create(b, loc, kept, scores,
                             scalar(-std::numeric_limits<double>::infinity()));
  }
  Value probs = SoftmaxOp::create(b, loc, scores, rank - 1);
  Value out = MatmulOp::create(b, loc, probs, a.getValue());
  a.replaceAllUsesWith(out);
  a.erase();
  return success();
}
