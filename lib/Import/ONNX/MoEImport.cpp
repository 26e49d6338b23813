//===- MoEImport.cpp - the rp.moe ops of a recognised MoE block -----------===//
//
// The handler of the node recognizeMoEBlocks (MoEBlocks.cpp) puts in place
// of a mixture-of-experts block: the rp.moe ops, over per-expert weights
// stacked here or stacks the model already holds (transformers 5; GPT-OSS's
// biased stacks and clamped SwiGLU too).
//
//===----------------------------------------------------------------------===//

#include "MoEBlocks.h"

#include <cmath>
#include <tuple>

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

/// DeepSeek-V3's routing (MoESigmoidRouter.h): the experts by the
/// group-limited top-k of `choice` (scores plus the correction bias), their
/// weights the `scores` of the chosen experts, through a one-hot mask so
/// that their gradient reaches the router. rp.moe.route orders its top-k as
/// PyTorch's topk does; its weights are not used.
static std::pair<Value, Value> routeSigmoid(NodeImporter &n, Value scores,
                                            Value choice, int64_t k) {
  auto st = cast<RankedTensorType>(scores.getType());
  int64_t t = st.getDimSize(0), e = st.getDimSize(1);
  Type f = st.getElementType();
  Type i64 = n.builder.getI64Type();
  auto ty = [&](ArrayRef<int64_t> shape, Type el) {
    return RankedTensorType::get(shape, el);
  };
  auto scalar = [&](double v) {
    return n.constant(
        DenseElementsAttr::get(ty({}, f), n.builder.getFloatAttr(f, v)));
  };
  auto top = [&](Value x, int64_t kk) -> Value {
    int64_t rows = cast<RankedTensorType>(x.getType()).getDimSize(0);
    return MoERouteOp::create(n.builder, n.loc, ty({rows, kk}, f),
                              ty({rows, kk}, i64), x, uint64_t(kk),
                              MoESoftmax::before, false)
        .getExperts();
  };
  // [R, K] ids -> [R, K, C] one-hot floats.
  auto oneHot = [&](Value ids, int64_t classes) -> Value {
    auto shape = cast<RankedTensorType>(ids.getType()).getShape();
    Value col = n.reshape(ids, {shape[0], shape[1], 1});
    SmallVector<int64_t> range =
        llvm::to_vector(llvm::seq<int64_t>(0, classes));
    Value hit = CmpOp::create(n.builder, n.loc, CmpPredicate::eq, col,
                              n.reshape(n.i64Constant(range), {1, 1, classes}));
    return n.castTo(hit, f);
  };
  auto sum = [&](Value x, ArrayRef<int64_t> dims, bool keep) -> Value {
    return ReduceOp::create(n.builder, n.loc, ReduceKind::sum, x, dims, keep);
  };
  Value sel = n.castTo(choice, f);
  int64_t groups = n.intAttr("groups", 1);
  if (groups > 1) {
    // A group's score is the sum of its best `group_top`; the experts of
    // all but the best `topk_group` groups get `fill`.
    int64_t per = e / groups, groupTop = n.intAttr("group_top", 2);
    int64_t keepGroups = n.intAttr("topk_group", 1);
    Value flat = n.reshape(sel, {t * groups, per});
    Value best =
        MulOp::create(n.builder, n.loc, oneHot(top(flat, groupTop), per),
                      n.reshape(flat, {t * groups, 1, per}));
    Value groupScores = n.reshape(sum(best, {1, 2}, false), {t, groups});
    Value keep = sum(oneHot(top(groupScores, keepGroups), groups), {1}, false);
    keep = BroadcastOp::create(n.builder, n.loc, ty({t, groups, per}, f),
                               n.reshape(keep, {t, groups, 1}));
    Value cond = CmpOp::create(n.builder, n.loc, CmpPredicate::gt,
                               n.reshape(keep, {t, e}), scalar(0.0));
    sel = WhereOp::create(n.builder, n.loc, cond, sel,
                          scalar(n.floatAttr("fill", -INFINITY)));
  }
  Value ids = top(sel, k);
  Value w = sum(MulOp::create(n.builder, n.loc, oneHot(ids, e),
                              n.reshape(scores, {t, 1, e})),
                {2}, false);
  if (n.intAttr("normalize", 0)) {
    Value den = AddOp::create(n.builder, n.loc, sum(w, {1}, true),
                              scalar(n.floatAttr("eps", 0.0f)));
    w = DivOp::create(n.builder, n.loc, w, den);
  }
  float scale = n.floatAttr("scale", 1.0f);
  if (scale != 1.0f)
    w = MulOp::create(n.builder, n.loc, w, scalar(scale));
  return {w, ids};
}

/// GPT-OSS's experts (MoEOss.h: inputs 2 to 5 the `x @ W` stacks [E, H,
/// 2F] and [E, F, H] and their biases [E, 2F] and [E, H]) over the
/// dispatched rows, as rp.trace writes them (python/rp/_moe_oss.py): a
/// grouped matmul by each stack; each row's expert bias as a grouped matmul
/// of a column of ones by the biases reshaped to [E, 1, n], so the bias's
/// gradient comes from the grouped matmul's VJP and no new op is needed;
/// strided slices for the gate and up columns; the clamps as rp.min and
/// rp.max (whose gradient goes to the clamped value on a tie, as torch's
/// clamp's does).
static Value ossExperts(NodeImporter &n, Value rows, Value counts,
                        int64_t experts, int64_t hidden) {
  Value w13 = n.input(2), w2 = n.input(3), b13 = n.input(4), b2 = n.input(5);
  if (!w13 || !w2 || !b13 || !b2)
    return nullptr;
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  int64_t ffn = shape(w2).size() == 3 ? shape(w2)[1] : 0;
  if (shape(w13) != ArrayRef<int64_t>{experts, hidden, 2 * ffn} ||
      shape(w2) != ArrayRef<int64_t>{experts, ffn, hidden} ||
      shape(b13) != ArrayRef<int64_t>{experts, 2 * ffn} ||
      shape(b2) != ArrayRef<int64_t>{experts, hidden})
    return n.error() << "GPT-OSS's expert stacks and biases " << w13.getType()
                     << ", " << w2.getType() << ", " << b13.getType() << " and "
                     << b2.getType() << " are not [E, " << hidden
                     << ", 2F], [E, F, " << hidden << "], [E, 2F] and [E, "
                     << hidden << "]",
           nullptr;
  auto rt = cast<RankedTensorType>(rows.getType());
  int64_t r = rt.getDimSize(0);
  Type f = rt.getElementType();
  auto ty = [&](int64_t width) { return RankedTensorType::get({r, width}, f); };
  auto scalar = [&](double v) {
    return n.constant(DenseElementsAttr::get(RankedTensorType::get({}, f),
                                             n.builder.getFloatAttr(f, v)));
  };
  Value ones = n.constant(DenseElementsAttr::get(
      RankedTensorType::get({r, 1}, f), n.builder.getFloatAttr(f, 1.0)));
  auto biased = [&](Value in, Value w, Value bias, int64_t width) -> Value {
    Value y = MoEGroupedMatmulOp::create(n.builder, n.loc, ty(width), in, w,
                                         counts, /*transpose_b=*/false);
    Value rowBias = MoEGroupedMatmulOp::create(
        n.builder, n.loc, ty(width), ones, n.reshape(bias, {experts, 1, width}),
        counts, /*transpose_b=*/false);
    return AddOp::create(n.builder, n.loc, y, rowBias);
  };
  Value gu = biased(rows, w13, b13, 2 * ffn);
  bool interleaved = n.intAttr("interleaved", 1) != 0;
  int64_t step = interleaved ? 2 : 1;
  auto columns = [&](int64_t first) -> Value {
    SmallVector<int64_t> offsets{0, first}, strides{1, step};
    return n.create<SliceOp>(ty(ffn), gu, offsets, strides);
  };
  float limit = n.floatAttr("limit", 0.0f);
  Value gate = MinOp::create(n.builder, n.loc, columns(0), scalar(limit));
  Value up = MaxOp::create(n.builder, n.loc,
                           MinOp::create(n.builder, n.loc,
                                         columns(interleaved ? 1 : ffn),
                                         scalar(limit)),
                           scalar(-limit));
  Value sig =
      SigmoidOp::create(n.builder, n.loc,
                        MulOp::create(n.builder, n.loc, gate,
                                      scalar(n.floatAttr("alpha", 1.0f))));
  Value h = MulOp::create(n.builder, n.loc,
                          AddOp::create(n.builder, n.loc, up, scalar(1.0)),
                          MulOp::create(n.builder, n.loc, gate, sig));
  return biased(h, w2, b2, hidden);
}

/// The numbers of elements of a ranked tensor.
static int64_t elementsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// A routed block (MoERouted.h: inputs x, the weights, the two stacks, the
/// chosen experts, all computed by the graph): x as [T, H], the weights
/// and the experts as [T, k].
static LogicalResult routedInputs(NodeImporter &n, int64_t k, Value &x,
                                  Value &weights, Value &chosen) {
  Value w13 = n.input(2), ids = n.input(4);
  x = n.input(0);
  weights = n.input(1);
  if (!x || !weights || !w13 || !ids)
    return failure();
  auto ws = cast<RankedTensorType>(w13.getType()).getShape();
  auto xs = cast<RankedTensorType>(x.getType()).getShape();
  int64_t hidden = ws.size() == 3 ? ws[2] : 0;
  if (!hidden || xs.empty() || xs.back() != hidden)
    return n.error() << "the tokens " << x.getType()
                     << " are not rows of the experts' width (the stack "
                     << w13.getType() << ")";
  int64_t tokens = elementsOf(x) / hidden;
  if (elementsOf(weights) != tokens * k || elementsOf(ids) != tokens * k)
    return n.error() << "the routing weights " << weights.getType()
                     << " and chosen experts " << ids.getType() << " are not "
                     << k << " per token of " << tokens;
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  x = n.reshape(x, {tokens, hidden});
  weights = n.reshape(n.castTo(weights, f), {tokens, k});
  chosen = n.reshape(n.castTo(ids, n.builder.getI64Type()), {tokens, k});
  return success();
}

/// The two parts of experts with another activation between their matmuls
/// (MoERouted.h, SplitExperts): part 1 dispatches the tokens and multiplies
/// by W13, part 2 multiplies the activation's rows by W2 and combines them.
/// LongCat-Flash's identity ("zero") experts, ids from `routed` on: whether
/// each of the [T, k] chosen experts is a routed one.
static Value routedSlots(NodeImporter &n, Value chosen, int64_t routed) {
  return CmpOp::create(n.builder, n.loc, CmpPredicate::lt, chosen,
                       n.constant(DenseElementsAttr::get(
                           RankedTensorType::get({}, n.builder.getI64Type()),
                           n.builder.getI64IntegerAttr(routed).getValue())));
}

/// `v` where `keep`, else 0 (of v's element type), as rp.trace writes it
/// (python/rp/_moe_stacked.py): the identity slots go to expert 0 with
/// weight 0.
static Value zeroUnless(NodeImporter &n, Value keep, Value v) {
  Type el = cast<RankedTensorType>(v.getType()).getElementType();
  auto scalar = RankedTensorType::get({}, el);
  Attribute zero = isa<FloatType>(el)
                       ? Attribute(n.builder.getFloatAttr(el, 0.0))
                       : Attribute(n.builder.getIntegerAttr(el, 0));
  return WhereOp::create(n.builder, n.loc, keep, v,
                         n.constant(DenseElementsAttr::get(scalar, zero)));
}

static LogicalResult importMoEPart(NodeImporter &n, int64_t part) {
  int64_t k = n.intAttr("top_k", 1);
  // With identity experts (LongCat-Flash): the routed experts' count.
  int64_t routed = n.intAttr("routed_experts", 0);
  // The stacks in the `x @ W` layout ([E, in, out], Aria's), else [E, out,
  // in].
  bool xAtW = n.intAttr("x_at_w", 0) != 0;
  int inAxis = xAtW ? 1 : 2, outAxis = xAtW ? 2 : 1;
  Type i32 = n.builder.getI32Type();
  if (part == 1) {
    Value x = n.input(0), ids = n.input(1), w13 = n.input(2);
    if (!x || !ids || !w13)
      return failure();
    auto ws = cast<RankedTensorType>(w13.getType()).getShape();
    auto xs = cast<RankedTensorType>(x.getType()).getShape();
    if (ws.size() != 3 || xs.empty() || xs.back() != ws[inAxis])
      return n.error() << "the tokens " << x.getType()
                       << " are not rows of the experts' width (the stack "
                       << w13.getType() << ")";
    int64_t hidden = xs.back(), tokens = elementsOf(x) / hidden;
    if (elementsOf(ids) != tokens * k)
      return n.error() << "the chosen experts " << ids.getType() << " are not "
                       << k << " per token of " << tokens;
    Type f = cast<RankedTensorType>(x.getType()).getElementType();
    x = n.reshape(x, {tokens, hidden});
    Value chosen =
        n.reshape(n.castTo(ids, n.builder.getI64Type()), {tokens, k});
    SmallVector<int64_t> stack(ws);
    if (routed) {
      // Only the routed experts' rows of W13 are read.
      if (routed > ws[0])
        return n.error() << "the up stack " << w13.getType() << " has fewer "
                         << "than its " << routed << " routed experts";
      chosen = zeroUnless(n, routedSlots(n, chosen, routed), chosen);
      stack[0] = routed;
      w13 = n.create<SliceOp>(
          RankedTensorType::get(
              stack, cast<RankedTensorType>(w13.getType()).getElementType()),
          w13, SmallVector<int64_t>{0, 0, 0}, SmallVector<int64_t>{1, 1, 1});
    }
    auto dispatch = MoEDispatchOp::create(
        n.builder, n.loc, RankedTensorType::get({tokens * k, hidden}, f),
        RankedTensorType::get({tokens, k}, i32),
        RankedTensorType::get({stack[0]}, i32), x, chosen);
    n.setOutput(0, MoEGroupedMatmulOp::create(
                       n.builder, n.loc,
                       RankedTensorType::get({tokens * k, ws[outAxis]}, f),
                       dispatch.getRows(), w13, dispatch.getCounts(),
                       /*transpose_b=*/!xAtW));
    n.setOutput(1, dispatch.getPositions());
    n.setOutput(2, dispatch.getCounts());
    return success();
  }
  Value h = n.input(0), w2 = n.input(1), positions = n.input(2),
        counts = n.input(3), weights = n.input(4);
  if (!h || !w2 || !positions || !counts || !weights)
    return failure();
  auto hs = cast<RankedTensorType>(h.getType()).getShape();
  auto ds = cast<RankedTensorType>(w2.getType()).getShape();
  auto ps = cast<RankedTensorType>(positions.getType()).getShape();
  int64_t tokens = ps[0];
  if (hs.size() != 2 || ds.size() != 3 || hs[1] != ds[inAxis] ||
      hs[0] != tokens * k || elementsOf(weights) != tokens * k)
    return n.error() << "the experts' activation rows " << h.getType()
                     << ", down stack " << w2.getType() << " and weights "
                     << weights.getType() << " are not [T k, F], "
                     << (xAtW ? "[E, F, H]" : "[E, H, F]")
                     << " and T k values (T = " << tokens << ", k = " << k
                     << ")";
  Type f = cast<RankedTensorType>(h.getType()).getElementType();
  int64_t out = ds[outAxis];
  Value y = MoEGroupedMatmulOp::create(
      n.builder, n.loc, RankedTensorType::get({hs[0], out}, f), h, w2, counts,
      /*transpose_b=*/!xAtW);
  Value w = n.reshape(n.castTo(weights, f), {tokens, k});
  Value keptW = w, keep;
  if (routed) {
    Value ids = n.input(6);
    if (!ids)
      return failure();
    keep = routedSlots(
        n, n.reshape(n.castTo(ids, n.builder.getI64Type()), {tokens, k}),
        routed);
    keptW = zeroUnless(n, keep, w);
  }
  Value combined = MoECombineOp::create(n.builder, n.loc,
                                        RankedTensorType::get({tokens, out}, f),
                                        y, positions, keptW);
  if (routed) {
    // The identity experts: each token's row times the sum of its
    // identity slots' weights.
    Value x = n.input(5);
    if (!x || elementsOf(x) != tokens * out)
      return n.error() << "the tokens of the identity experts are not ["
                       << tokens << ", " << out << "]";
    Value idW = ReduceOp::create(n.builder, n.loc, ReduceKind::sum,
                                 SubOp::create(n.builder, n.loc, w, keptW),
                                 SmallVector<int64_t>{1}, true);
    combined = AddOp::create(
        n.builder, n.loc, combined,
        MulOp::create(n.builder, n.loc,
                      n.reshape(n.castTo(x, f), {tokens, out}), idW));
  }
  n.setOutput(0, combined);
  return success();
}

LogicalResult mlir::rp::onnx_import::importMoENode(NodeImporter &n) {
  if (int64_t part = n.intAttr("part", 0))
    return importMoEPart(n, part);
  bool stacked = n.intAttr("stacked", 0) != 0;
  // A sigmoid router passes its scores as `logits` and the scores it picks
  // experts by as the last input.
  bool sigmoid = n.intAttr("sigmoid", 0) != 0;
  bool routed = n.intAttr("routed", 0) != 0;
  int64_t k = n.intAttr("top_k", 1);
  Value weights, chosen;
  Value x = n.input(0), logits = n.input(1);
  if (!x || !logits)
    return failure();
  if (routed && failed(routedInputs(n, k, x, weights, chosen)))
    return failure();
  int experts = (n.numInputs() - 2 - sigmoid) / 3;
  if (stacked) {
    Value w13 = n.input(2);
    if (!w13)
      return failure();
    experts = cast<RankedTensorType>(w13.getType()).getDimSize(0);
  }
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(logits.getType());
  if (!routed &&
      (xt.getRank() != 2 || lt.getRank() != 2 || lt.getDimSize(1) != experts ||
       lt.getDimSize(0) != xt.getDimSize(0)))
    return n.error() << "the tokens " << x.getType() << " and router logits "
                     << logits.getType() << " are not [T, H] and [T, "
                     << experts << "] (one row per token, " << experts
                     << " experts)";
  int64_t tokens = xt.getDimSize(0), hidden = xt.getDimSize(1);
  if (k > experts)
    return n.error() << "top_k " << k << " is more than the " << experts
                     << " experts";
  Type f = xt.getElementType();
  MLIRContext *ctx = n.builder.getContext();
  Type i64 = IntegerType::get(ctx, 64), i32 = IntegerType::get(ctx, 32);
  if (lt.getElementType() != f && !routed)
    logits = n.castTo(logits, f);
  if (routed) {
    // The graph computed the weights and the chosen experts.
  } else if (sigmoid) {
    Value choice = n.input(n.numInputs() - 1);
    if (!choice)
      return failure();
    std::tie(weights, chosen) = routeSigmoid(n, logits, choice, k);
  } else {
    // The softmax over the k chosen logits equals the renormalised softmax
    // of all of them; `after` computes it (and its gradient) from the k.
    bool after = n.intAttr("softmax_after", 0) != 0;
    auto route = MoERouteOp::create(
        n.builder, n.loc, RankedTensorType::get({tokens, k}, f),
        RankedTensorType::get({tokens, k}, i64), logits, uint64_t(k),
        after ? MoESoftmax::after : MoESoftmax::before,
        !after && n.intAttr("normalize", 0) != 0);
    weights = route.getWeights();
    chosen = route.getExperts();
  }
  int64_t rows = tokens * k;
  auto dispatch = MoEDispatchOp::create(
      n.builder, n.loc, RankedTensorType::get({rows, hidden}, f),
      RankedTensorType::get({tokens, k}, i32),
      RankedTensorType::get({experts}, i32), x, chosen);
  Value counts = dispatch.getCounts();
  auto grouped = [&](Value in, Value w, int64_t width,
                     bool transposeB = true) -> Value {
    return MoEGroupedMatmulOp::create(n.builder, n.loc,
                                      RankedTensorType::get({rows, width}, f),
                                      in, w, counts, transposeB);
  };
  if (n.intAttr("oss", 0)) {
    Value y = ossExperts(n, dispatch.getRows(), counts, experts, hidden);
    if (!y)
      return failure();
    n.setOutput(0, MoECombineOp::create(n.builder, n.loc, xt, y,
                                        dispatch.getPositions(), weights));
    return success();
  }
  Value g, u, down;
  // DBRX's three stacks: gate and up [E, F, H], down [E, F, H] in the
  // `x @ W` layout (down_x_at_w) or [E, H, F].
  bool split = stacked && n.intAttr("split", 0) != 0;
  bool downXAtW = split && n.intAttr("down_x_at_w", 0) != 0;
  if (split) {
    Value gate = n.input(2), up = n.input(3);
    down = n.input(4);
    if (!gate || !up || !down)
      return failure();
    auto gs = cast<RankedTensorType>(gate.getType()).getShape();
    auto ds = cast<RankedTensorType>(down.getType()).getShape();
    int64_t ffn = gs.size() == 3 ? gs[1] : 0;
    SmallVector<int64_t> wantDown{experts, downXAtW ? ffn : hidden,
                                  downXAtW ? hidden : ffn};
    if (gs.size() != 3 || gs[2] != hidden || up.getType() != gate.getType() ||
        ds != ArrayRef<int64_t>(wantDown))
      return n.error() << "the expert stacks " << gate.getType() << ", "
                       << up.getType() << " and " << down.getType()
                       << " are not [E, F, " << hidden << "] twice and "
                       << (downXAtW ? "[E, F, H]" : "[E, H, F]");
    g = grouped(dispatch.getRows(), gate, ffn);
    u = grouped(dispatch.getRows(), up, ffn);
  } else if (stacked) {
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
  Value y = grouped(h, down, hidden, /*transposeB=*/!downXAtW);
  n.setOutput(0, MoECombineOp::create(n.builder, n.loc, xt, y,
                                      dispatch.getPositions(), weights));
  return success();
}
