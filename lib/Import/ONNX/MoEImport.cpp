//===- MoEImport.cpp - the rp.moe ops of a recognised MoE block -----------===//
//
// The handler of the node recognizeMoEBlocks (MoEBlocks.cpp) puts in place
// of a mixture-of-experts block: the rp.moe ops, over per-expert weights
// stacked here or stacks the model already holds (transformers 5).
//
//===----------------------------------------------------------------------===//

#include "MoEBlocks.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

/// [E, a, b] from E weights [a, b]: a reshape each and one concat.
static Value stackWeights(NodeImporter &n, int first, int count) {
  SmallVector<Value> parts;
  for (int i = first; i < first + count; ++i) {
    Value w = n.input(i);
    if (!w)
      return nullptr;
    SmallVector<int64_t> shape{1};
    llvm::append_range(shape, cast<RankedTensorType>(w.getType()).getShape());
    parts.push_back(n.reshape(w, shape));
  }
  auto one = cast<RankedTensorType>(parts.front().getType());
  SmallVector<int64_t> shape(one.getShape());
  shape[0] = count;
  for (Value p : parts)
    if (p.getType() != one)
      return n.error() << "the experts' weights differ in shape ("
                       << p.getType() << " and " << one
                       << "); rp stacks experts of one shape",
             nullptr;
  return n.create<ConcatOp>(RankedTensorType::get(shape, one.getElementType()),
                            parts, uint64_t(0));
}

LogicalResult mlir::rp::onnx_import::importMoENode(NodeImporter &n) {
  bool stacked = n.intAttr("stacked", 0) != 0;
  Value x = n.input(0), logits = n.input(1);
  if (!x || !logits)
    return failure();
  int experts = (n.numInputs() - 2) / 3;
  if (stacked) {
    Value w13 = n.input(2);
    if (!w13)
      return failure();
    experts = cast<RankedTensorType>(w13.getType()).getDimSize(0);
  }
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(logits.getType());
  if (xt.getRank() != 2 || lt.getRank() != 2 || lt.getDimSize(1) != experts ||
      lt.getDimSize(0) != xt.getDimSize(0))
    return n.error() << "the tokens " << x.getType() << " and router logits "
                     << logits.getType() << " are not [T, H] and [T, "
                     << experts << "] (one row per token, " << experts
                     << " experts)";
  int64_t tokens = xt.getDimSize(0), hidden = xt.getDimSize(1);
  int64_t k = n.intAttr("top_k", 1);
  if (k > experts)
    return n.error() << "top_k " << k << " is more than the " << experts
                     << " experts";
  Type f = xt.getElementType();
  MLIRContext *ctx = n.builder.getContext();
  Type i64 = IntegerType::get(ctx, 64), i32 = IntegerType::get(ctx, 32);
  if (lt.getElementType() != f)
    logits = n.castTo(logits, f);
  auto route = MoERouteOp::create(
      n.builder, n.loc, RankedTensorType::get({tokens, k}, f),
      RankedTensorType::get({tokens, k}, i64), logits, uint64_t(k),
      MoESoftmax::before, n.intAttr("normalize", 0) != 0);
  int64_t rows = tokens * k;
  auto dispatch = MoEDispatchOp::create(
      n.builder, n.loc, RankedTensorType::get({rows, hidden}, f),
      RankedTensorType::get({tokens, k}, i32),
      RankedTensorType::get({experts}, i32), x, route.getExperts());
  Value counts = dispatch.getCounts();
  auto grouped = [&](Value in, Value w, int64_t width) -> Value {
    return MoEGroupedMatmulOp::create(n.builder, n.loc,
                                      RankedTensorType::get({rows, width}, f),
                                      in, w, counts, /*transpose_b=*/true);
  };
  Value g, u, down;
  if (stacked) {
    // One grouped matmul by the [E, 2F, H] stack; its halves are W1 x and
    // W3 x in the order the model slices them.
    Value w13 = n.input(2);
    down = n.input(3);
    if (!down)
      return failure();
    auto ws = cast<RankedTensorType>(w13.getType()).getShape();
    auto ds = cast<RankedTensorType>(down.getType()).getShape();
    if (ws.size() != 3 || ds.size() != 3 || ws[2] != hidden ||
        ds[0] != experts || ds[1] != hidden || ws[1] != 2 * ds[2])
      return n.error() << "the stacked expert weights " << w13.getType()
                       << " and " << down.getType() << " are not [E, 2F, "
                       << hidden << "] and [E, " << hidden << ", F]";
    int64_t ffn = ds[2];
    Value both = grouped(dispatch.getRows(), w13, 2 * ffn);
    auto half = [&](int64_t offset) -> Value {
      SmallVector<int64_t> offsets{0, offset}, strides{1, 1};
      return n.create<SliceOp>(RankedTensorType::get({rows, ffn}, f), both,
                               offsets, strides);
    };
    bool gateFirst = n.intAttr("gate_first", 1) != 0;
    g = half(gateFirst ? 0 : ffn);
    u = half(gateFirst ? ffn : 0);
  } else {
    Value gate = stackWeights(n, 2, experts);
    Value up = gate ? stackWeights(n, 2 + experts, experts) : nullptr;
    down = up ? stackWeights(n, 2 + 2 * experts, experts) : nullptr;
    if (!down)
      return failure();
    auto gs = cast<RankedTensorType>(gate.getType()).getShape();
    auto ds = cast<RankedTensorType>(down.getType()).getShape();
    if (gs[2] != hidden || up.getType() != gate.getType() || ds[1] != hidden ||
        ds[2] != gs[1])
      return n.error() << "the expert weights " << gate.getType() << ", "
                       << up.getType() << " and " << down.getType()
                       << " do not make a gated MLP of width " << hidden;
    g = grouped(dispatch.getRows(), gate, gs[1]);
    u = grouped(dispatch.getRows(), up, gs[1]);
  }
  Value h =
      MulOp::create(n.builder, n.loc, SiluOp::create(n.builder, n.loc, g), u);
  Value y = grouped(h, down, hidden);
  n.setOutput(0, MoECombineOp::create(n.builder, n.loc, xt, y,
                                      dispatch.getPositions(),
                                      route.getWeights()));
  return success();
}
