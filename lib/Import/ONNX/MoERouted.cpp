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
  if (!unsq || unsq->op_type() != "Unsqueeze" || !shape ||
      shape->size() != 3 || (*shape)[0] != 1 || (*shape)[1] < 1 ||
      (*shape)[2] != 1)
    return std::nullopt;
  auto axes = constantInts(g, inputOf(*unsq, 1));
  if (!axes || axes->size() != 1 || (*axes)[0] != 1)
    return std::nullopt;
  return std::make_pair(inputOf(*unsq, 0), (*shape)[1]);
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
    // The weighted rows summed over each token's k slots.
    auto only = [&](StringRef v) -> int {
      auto readers = g.consumers.lookup(v);
      return readers.size() == 1 && !g.outputs.count(v) ? readers[0] : -1;
    };
    int reshape = only(outputOf(weighted, 0));
    int sum = reshape < 0 ? -1 : only(outputOf(g.graph.node(reshape), 0));
    if (sum < 0 || g.graph.node(reshape).op_type() != "Reshape" ||
        g.graph.node(sum).op_type() != "ReduceSum" ||
        g.intAttr(g.graph.node(sum), "keepdims", 1) != 0)
      return std::nullopt;
    auto shape = constantInts(g, inputOf(g.graph.node(reshape), 1));
    auto axes = constantInts(g, inputOf(g.graph.node(sum), 1));
    if (!shape || shape->size() != 3 || (*shape)[1] != r.topK || !axes ||
        axes->size() != 1 || (*axes)[0] != 1)
      return std::nullopt;
    r.nodes = {mul, reshape, sum};
    r.last = sum;
    r.output = outputOf(g.graph.node(sum), 0);
    return r;
  }
  return std::nullopt;
}
