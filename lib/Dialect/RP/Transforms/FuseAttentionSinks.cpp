//===- FuseAttentionSinks.cpp - attention sinks for rp-fuse-attention -----===//
//
// GPT-OSS's eager attention (and its ONNX exports) computes the sinks as
//   c = concat([scores, broadcast(sinks[1, H, 1, 1])], -1)
//   p = softmax(c - max(c, -1, keepdim))[..., :-1]
// The row maximum changes nothing (softmax is shift invariant) and the sink
// column holds one value per head, so this is rp.attention with `sinks`;
// fused, no S x (T + 1) tensor is left. Anything else (a column varying by
// row, a slice that keeps the sink or drops a key) is left decomposed.
//
//===----------------------------------------------------------------------===//

#include "FuseAttentionSinks.h"
#include "PatternUtils.h"

#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::rp;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// `x - max(x, last dim, keep_dims)` gives x; anything else itself.
static Value peelRowMax(Value v) {
  auto sub = v.getDefiningOp<SubOp>();
  if (!sub || sub.getLhs().getType() != v.getType())
    return v;
  auto max = sub.getRhs().getDefiningOp<ReduceOp>();
  int64_t rank = static_cast<int64_t>(shapeOf(v).size());
  if (!max || max.getKind() != ReduceKind::max || !max.getKeepDims() ||
      max.getInput() != sub.getLhs() ||
      max.getDims() != ArrayRef<int64_t>{rank - 1})
    return v;
  return sub.getLhs();
}

/// The source of a [B, H, S, 1] sink column with its broadcasts stripped,
/// when it holds one value per head (or one for all): every dimension,
/// aligned to the right as numpy broadcasting aligns it, is 1 but the
/// heads'. Null otherwise.
static Value sinkSource(Value column) {
  ArrayRef<int64_t> full = shapeOf(column);
  if (full.size() != 4 || full[3] != 1)
    return {};
  Value v = column;
  while (auto b = v.getDefiningOp<BroadcastOp>())
    v = b.getInput();
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() > 4)
    return {};
  int64_t pad = 4 - static_cast<int64_t>(shape.size());
  for (auto [i, d] : llvm::enumerate(shape)) {
    int64_t at = static_cast<int64_t>(i) + pad;
    if (d != 1 && (at != 1 || d != full[1]))
      return {};
  }
  return v;
}

std::optional<SinkSoftmax> mlir::rp::matchSinkSoftmax(SoftmaxOp softmax) {
  int64_t rank = softmax.getType().getRank();
  if (rank != 4 || static_cast<int64_t>(softmax.getDim()) != rank - 1)
    return std::nullopt;
  auto slice = dyn_cast_or_null<SliceOp>(singleUser(softmax.getResult()));
  if (!slice ||
      !llvm::all_of(slice.getStrides(), [](int64_t s) { return s == 1; }))
    return std::nullopt;
  auto concat = peelRowMax(softmax.getInput()).getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 ||
      static_cast<int64_t>(concat.getDim()) != rank - 1)
    return std::nullopt;
  Value first = concat.getInputs()[0], second = concat.getInputs()[1];
  // The slice keeps the scores' columns: [0, T) with the sink last,
  // [1, T + 1) with it first; every other dimension whole.
  ArrayRef<int64_t> offsets = slice.getOffsets();
  if (llvm::any_of(offsets.drop_back(), [](int64_t o) { return o != 0; }))
    return std::nullopt;
  Value scores, column;
  if (shapeOf(second).back() == 1 && offsets.back() == 0) {
    scores = first;
    column = second;
  } else if (shapeOf(first).back() == 1 && offsets.back() == 1) {
    scores = second;
    column = first;
  } else {
    return std::nullopt;
  }
  if (shapeOf(slice.getResult()) != shapeOf(scores))
    return std::nullopt;
  Value source = sinkSource(column);
  if (!source)
    return std::nullopt;
  return SinkSoftmax{scores, source, slice.getResult()};
}

Value mlir::rp::buildSinks(PatternRewriter &rewriter, Location loc,
                           const SinkSoftmax &match, int64_t heads,
                           Type elementType) {
  Value v = match.column;
  Type type = getElementTypeOrSelf(v);
  int64_t count = cast<RankedTensorType>(v.getType()).getNumElements();
  // transformers reshapes the [H] parameter to [1, H, 1, 1]: take it back.
  auto reshape = v.getDefiningOp<ReshapeOp>();
  if (reshape && shapeOf(reshape.getInput()).size() == 1)
    v = reshape.getInput();
  else
    v = ReshapeOp::create(rewriter, loc, RankedTensorType::get({count}, type),
                          v);
  if (count != heads)
    v = BroadcastOp::create(rewriter, loc, RankedTensorType::get({heads}, type),
                            v);
  if (type != elementType)
    v = CastOp::create(rewriter, loc,
                       RankedTensorType::get({heads}, elementType), v);
  return v;
}
