//===- MoERouted.cpp - batched_mm experts behind any routing --------------===//
//
// Routers differ from family to family (sigmoid or softmax scores, a bias
// added before the top-k, a sentinel expert masked out, weights gathered
// from other scores, clamped sums), but transformers 5's batched_mm experts
// read only two values of the routing: the chosen experts and their
// weights, both [T, k]. When a block's router is none of the forms
// MoEBlocks.cpp maps as a whole, rp-import imports the router op by op
// (TopK and GatherElements along the last axis have handlers; the values
// are exact and their gradients reach the router as PyTorch's do) and only
// the experts become the rp.moe ops, reading those two values — as
// rp.trace maps a router it does not know (python/rp/_moe_grouped.py's
// patch_experts). Matched here from the Mul by the weights:
//
//   x_rep = Reshape(Expand(Unsqueeze(x, 1), [1, k, 1]))   (repeat_interleave)
//   y     = W2[ids] @ (silu(gate) * up), [gate, up] = chunk(W13[ids] @ x_rep)
//   out   = ReduceSum(Reshape(y * w, [T, k, H]), 1)
//
//===----------------------------------------------------------------------===//

#include "MoERouted.h"
#include "MoESigmoidRouter.h"

using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

/// `value` through the reshapes that keep its elements in row-major order
/// (not Expand, which would repeat them).
static std::string viewRoot(const GraphIndex &g, std::string value) {
  while (const onnx::NodeProto *n = g.producerOf(value)) {
    if (!llvm::is_contained(
            {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"},
            n->op_type()))
      break;
    value = inputOf(*n, 0);
  }
  return value;
}

/// The tokens `x_rep` repeats k times each and that k: Reshape(Expand(
/// Unsqueeze(x, axis 1), [1, k, 1])).
static std::optional<std::pair<std::string, int64_t>>
repeatedTokens(const GraphIndex &g, StringRef rep) {
  const onnx::NodeProto *reshape = g.producerOf(rep);
  if (!reshape || reshape->op_type() != "Reshape")
    return std::nullopt;
  const onnx::NodeProto *expand = g.producerOf(inputOf(*reshape, 0));
  if (!expand || expand->op_type() != "Expand")
    return std::nullopt;
  const onnx::NodeProto *unsq = g.producerOf(inputOf(*expand, 0));
  auto shape = constantInts(g, inputOf(*expand, 1));
  if (!unsq || unsq->op_type() != "Unsqueeze" || !shape || shape->size() != 3 ||
      (*shape)[0] != 1 || (*shape)[1] < 1 || (*shape)[2] != 1)
    return std::nullopt;
  auto axes = constantInts(g, inputOf(*unsq, 1));
  if (!axes || axes->size() != 1 || (*axes)[0] != 1)
    return std::nullopt;
  return std::make_pair(inputOf(*unsq, 0), (*shape)[1]);
}

/// The only reader of `v`, -1 if it has more or is a graph output.
static int onlyReader(const GraphIndex &g, StringRef v) {
  auto readers = g.consumers.lookup(v);
  return readers.size() == 1 && !g.outputs.count(v) ? readers[0] : -1;
}

/// The Reshape to [T, k, H] and the ReduceSum over its axis 1 that sum the
/// weighted rows of node `mul` over each token's k slots.
static std::optional<std::pair<int, int>> slotSum(const GraphIndex &g, int mul,
                                                  int64_t k) {
  int reshape = onlyReader(g, outputOf(g.graph.node(mul), 0));
  int sum =
      reshape < 0 ? -1 : onlyReader(g, outputOf(g.graph.node(reshape), 0));
  if (sum < 0 || g.graph.node(reshape).op_type() != "Reshape" ||
      g.graph.node(sum).op_type() != "ReduceSum" ||
      g.intAttr(g.graph.node(sum), "keepdims", 1) != 0)
    return std::nullopt;
  auto shape = constantInts(g, inputOf(g.graph.node(reshape), 1));
  auto axes = constantInts(g, inputOf(g.graph.node(sum), 1));
  if (!shape || shape->size() != 3 || (*shape)[1] != k || !axes ||
      axes->size() != 1 || (*axes)[0] != 1)
    return std::nullopt;
  return std::make_pair(reshape, sum);
}

/// `W[ids] @ Unsqueeze(v, -1)` squeezed back, as dynamo writes a batched
/// matmul by a stack gathered at the chosen experts ([E, out, in] weights),
/// or `Unsqueeze(v, 1) @ W[ids]` (`xAtW`: Aria's [E, in, out]): the
/// MatMul, the stack (rank 3), the ids (before dynamo's reshapes) and `v`.
struct GatheredMatmul {
  const onnx::NodeProto *squeeze = nullptr, *matmul = nullptr;
  std::string stack, ids, input;
  bool xAtW = false;
};
static std::optional<GatheredMatmul> gatheredMatmul(const GraphIndex &g,
                                                    StringRef value) {
  GatheredMatmul m;
  m.squeeze = g.producerOf(value);
  if (!m.squeeze || m.squeeze->op_type() != "Squeeze")
    return std::nullopt;
  m.matmul = g.producerOf(inputOf(*m.squeeze, 0));
  if (!m.matmul || m.matmul->op_type() != "MatMul")
    return std::nullopt;
  auto gatherOf = [&](int operand) -> const onnx::NodeProto * {
    const onnx::NodeProto *gather = g.producerOf(inputOf(*m.matmul, operand));
    if (gather && gather->op_type() == "Transpose")
      gather = g.producerOf(inputOf(*gather, 0));
    return gather && gather->op_type() == "GatherND" ? gather : nullptr;
  };
  // The rows as a column (Unsqueeze at -1) or as a row (at 1).
  auto squeezedAt = [&](const onnx::NodeProto *n, int64_t axis) {
    auto a = n ? g.scalarInt(inputOf(*n, 1)) : std::nullopt;
    return n && (n->op_type() == "Unsqueeze" || n->op_type() == "Squeeze") &&
           a && (*a == axis || (axis == 1 && *a == -2));
  };
  const onnx::NodeProto *gather = gatherOf(0);
  const onnx::NodeProto *col = g.producerOf(inputOf(*m.matmul, 1));
  if (!gather) {
    gather = gatherOf(1);
    col = g.producerOf(inputOf(*m.matmul, 0));
    m.xAtW = true;
  }
  int64_t axis = m.xAtW ? 1 : -1;
  if (!gather || !squeezedAt(col, axis) || !squeezedAt(m.squeeze, axis))
    return std::nullopt;
  m.ids = reshapeRoot(g, inputOf(*gather, 1));
  m.stack = gatheredStack(g, inputOf(*m.matmul, m.xAtW ? 1 : 0), m.ids);
  if (m.stack.empty())
    return std::nullopt;
  m.input = inputOf(*col, 0);
  return m;
}

/// Whether `node` computes each row of its outputs from the same row of
/// its run-time inputs alone (the rows being the dispatched (token, slot)
/// pairs, in any order): an elementwise op, or a split of the last axis.
static bool rowwise(const GraphIndex &g, const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  if (llvm::is_contained(
          {"Add",     "Sub",        "Mul",         "Div",      "Pow",  "Tanh",
           "Sigmoid", "Relu",       "Exp",         "Log",      "Neg",  "Abs",
           "Erf",     "Sqrt",       "Clip",        "Softplus", "Gelu", "Elu",
           "Selu",    "LeakyRelu",  "HardSigmoid", "Identity", "Cast", "Max",
           "Min",     "Reciprocal", "Softsign"},
          op))
    return true;
  auto lastAxis = [](int64_t a) { return a == -1 || a == 1; };
  if (op == "Split" || op == "SplitToSequence")
    return lastAxis(g.intAttr(node, "axis", 0));
  if (op == "SequenceAt")
    return g.scalarInt(inputOf(node, 1)).has_value();
  if (op == "Slice") {
    auto axes = node.input_size() > 3 ? constantInts(g, inputOf(node, 3))
                                      : std::nullopt;
    return axes && axes->size() == 1 && lastAxis((*axes)[0]);
  }
  return false;
}

std::optional<SplitExperts> moe::matchSplitExperts(const GraphIndex &g,
                                                   int mul) {
  const onnx::NodeProto &weighted = g.graph.node(mul);
  if (weighted.op_type() != "Mul")
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto down = gatheredMatmul(g, inputOf(weighted, side));
    if (!down)
      continue;
    SplitExperts r;
    r.ids = down->ids;
    r.down = down->stack;
    r.hidden = down->input;
    // Back from the hidden rows to the first matmul's output, through
    // row-wise nodes only; their other inputs are one-element constants.
    llvm::DenseSet<int> region;
    std::optional<GatheredMatmul> up;
    SmallVector<std::string> work{r.hidden};
    bool ok = true;
    while (ok && !work.empty()) {
      std::string v = work.pop_back_val();
      if (up && v == outputOf(*up->squeeze, 0))
        continue;
      if (auto m = gatheredMatmul(g, v);
          m && m->ids == r.ids && m->xAtW == down->xAtW && !up) {
        up = m;
        continue;
      }
      const onnx::NodeProto *p = g.producerOf(v);
      int at = p ? g.producer.lookup(v) : -1;
      if (!p || !rowwise(g, *p) || region.size() > 64) {
        ok = false;
        break;
      }
      if (!region.insert(at).second)
        continue;
      for (const std::string &in : p->input()) {
        if (in.empty() || scalarFloat(g, in) || g.scalarInt(in))
          continue;
        work.push_back(in);
      }
    }
    if (!ok || !up)
      continue;
    // Nothing outside reads the rows in the experts' order.
    r.upValue = outputOf(*up->squeeze, 0);
    // (A CastLike that takes a constant to the rows' type, or a Shape,
    // reads no row.)
    auto inside = [&](StringRef v, int allowed) {
      if (g.outputs.count(v))
        return false;
      for (int reader : g.consumers.lookup(v)) {
        const onnx::NodeProto &n = g.graph.node(reader);
        if (!region.count(reader) && reader != allowed &&
            n.op_type() != "Shape" &&
            !(n.op_type() == "CastLike" && inputOf(n, 0) != v))
          return false;
      }
      return true;
    };
    int downCol = g.producer.lookup(inputOf(*down->matmul, down->xAtW ? 0 : 1));
    if (!inside(r.upValue, -1) || !inside(r.hidden, downCol) ||
        llvm::any_of(region, [&](int i) {
          return llvm::any_of(g.graph.node(i).output(),
                              [&](const std::string &o) {
                                return o != r.hidden && !inside(o, -1);
                              });
        }))
      continue;
    auto tokens = repeatedTokens(g, up->input);
    const onnx::TensorProto *s13 = g.initializers.lookup(up->stack);
    const onnx::TensorProto *s2 = g.initializers.lookup(r.down);
    // The width H: W13 [E, n, H] and W2 [E, H, F], or [E, H, n] and [E,
    // F, H] (x @ W).
    r.xAtW = down->xAtW;
    int inAxis = r.xAtW ? 1 : 2, outAxis = r.xAtW ? 2 : 1;
    if (!tokens || s13->dims(0) != s2->dims(0) ||
        s13->dims(inAxis) != s2->dims(outAxis))
      continue;
    r.x = tokens->first;
    r.topK = tokens->second;
    r.gateUp = up->stack;
    r.weights = viewRoot(g, inputOf(weighted, 1 - side));
    auto sum = slotSum(g, mul, r.topK);
    if (!sum)
      continue;
    r.upAt = g.producer.lookup(r.upValue);
    r.nodes = {r.upAt,
               g.producer.lookup(outputOf(*up->matmul, 0)),
               downCol,
               g.producer.lookup(outputOf(*down->matmul, 0)),
               g.producer.lookup(outputOf(*down->squeeze, 0)),
               mul,
               sum->first,
               sum->second};
    r.last = sum->second;
    r.output = outputOf(g.graph.node(r.last), 0);
    return r;
  }
  return std::nullopt;
}

std::optional<RoutedExperts> moe::matchRoutedExperts(const GraphIndex &g,
                                                     int mul) {
  const onnx::NodeProto &weighted = g.graph.node(mul);
  if (weighted.op_type() != "Mul")
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    // The chosen experts: the ids W2's stack is gathered at.
    const onnx::NodeProto *down = g.producerOf(inputOf(weighted, side));
    if (down && down->op_type() == "Squeeze")
      down = g.producerOf(inputOf(*down, 0));
    if (!down || down->op_type() != "MatMul")
      continue;
    const onnx::NodeProto *gather = g.producerOf(inputOf(*down, 0));
    if (gather && gather->op_type() == "Transpose")
      gather = g.producerOf(inputOf(*gather, 0));
    if (!gather || gather->op_type() != "GatherND")
      continue;
    std::string ids = reshapeRoot(g, inputOf(*gather, 1));
    std::optional<BatchedExpert> e = matchBatchedExpert(g, weighted, ids, "");
    if (!e)
      continue;
    auto tokens = repeatedTokens(g, e->repeated);
    if (!tokens)
      continue;
    RoutedExperts r;
    r.x = tokens->first;
    r.topK = tokens->second;
    r.ids = ids;
    r.weights = viewRoot(g, inputOf(weighted, 1 - side));
    r.experts = *e;
    auto sum = slotSum(g, mul, r.topK);
    if (!sum)
      return std::nullopt;
    r.nodes = {mul, sum->first, sum->second};
    r.last = sum->second;
    r.output = outputOf(g.graph.node(r.last), 0);
    return r;
  }
  return std::nullopt;
}
