//===- MoEBatched.cpp - batched_mm experts of an ONNX MoE block ----------===//
//
// transformers 5's `batched_mm` experts implementation, the one the dynamo
// exporter can write (its default `grouped_mm` stops at a custom op with no
// ONNX function, the eager loop at a data-dependent guard): each (token,
// slot) pair gathers its expert's slice of both stacks at the chosen
// experts and multiplies by it,
//
//   h = chunk(W13[ids] @ x_rep, 2) -> silu(gate) * up
//   y = (W2[ids] @ h) * w,  summed over the k slots of each token
//
// with `x_rep` the tokens repeated per slot. Matched here, for MoEBlocks.cpp,
// from the Mul by the routing weights.
//
//===----------------------------------------------------------------------===//

#include "MoEBatched.h"

using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

/// `value` with the reshapes an exporter writes around it looked through
/// (the routed tokens are `x` repeated per slot, the chosen experts the
/// TopK indices flattened): the value they all start from.
std::string moe::reshapeRoot(const GraphIndex &g, std::string value) {
  while (const onnx::NodeProto *n = g.producerOf(value)) {
    const std::string &op = n->op_type();
    if (!llvm::is_contained({"Reshape", "Unsqueeze", "Squeeze", "Expand",
                             "Cast", "Identity", "Flatten"},
                            op) &&
        !(op == "Concat" && n->input_size() == 1))
      break;
    value = inputOf(*n, 0);
  }
  return value;
}

std::string moe::gatheredStack(const GraphIndex &g, StringRef value,
                               StringRef ids, int rank) {
  const onnx::NodeProto *n = g.producerOf(value);
  // dynamo writes `W[ids]` as Transpose(GatherND(Transpose(W), ids'))
  // with identity permutations.
  auto identity = [&](const onnx::NodeProto *t) {
    if (!t || t->op_type() != "Transpose")
      return false;
    for (const auto &a : t->attribute())
      if (a.name() == "perm")
        for (int i = 0; i < a.ints_size(); ++i)
          if (a.ints(i) != i)
            return false;
    return true;
  };
  if (identity(n))
    n = g.producerOf(inputOf(*n, 0));
  if (!n || (n->op_type() != "Gather" && n->op_type() != "GatherND") ||
      (n->op_type() == "Gather" && g.intAttr(*n, "axis", 0) != 0) ||
      (n->op_type() == "GatherND" && g.intAttr(*n, "batch_dims", 0) != 0))
    return "";
  std::string w = inputOf(*n, 0);
  if (const onnx::NodeProto *t = g.producerOf(w); identity(t))
    w = inputOf(*t, 0);
  const onnx::TensorProto *stack = g.initializers.lookup(w);
  if (!stack || stack->dims_size() != rank)
    return "";
  // GatherND's index is the ids with a trailing axis of one; the Expand
  // that dynamo writes broadcasts the ids to their own shape.
  if (reshapeRoot(g, inputOf(*n, 1)) != ids)
    return "";
  return w;
}

std::optional<BatchedExpert>
moe::matchBatchedExpert(const GraphIndex &g, const onnx::NodeProto &weighted,
                        StringRef ids, StringRef x) {
  // The MatMul's output, squeezed from [S, n, 1] to [S, n].
  auto bmm = [&](StringRef value) -> const onnx::NodeProto * {
    const onnx::NodeProto *n = g.producerOf(value);
    if (n && n->op_type() == "Squeeze")
      n = g.producerOf(inputOf(*n, 0));
    return n && n->op_type() == "MatMul" ? n : nullptr;
  };
  // The two halves of `chunk(2, -1)`: SequenceAt 0 and 1 of one
  // SplitToSequence, outputs 0 and 1 of one two-way Split, or two Slices.
  auto half = [&](const onnx::NodeProto *n) -> std::pair<std::string, int> {
    if (!n)
      return {"", -1};
    if (n->op_type() == "SequenceAt") {
      const onnx::NodeProto *s = g.producerOf(inputOf(*n, 0));
      auto i = g.scalarInt(inputOf(*n, 1));
      if (s && s->op_type() == "SplitToSequence" && i &&
          (g.intAttr(*s, "axis", 0) == -1 || g.intAttr(*s, "axis", 0) == 1))
        return {inputOf(*s, 0), int(*i)};
    } else if (n->op_type() == "Split" && n->output_size() == 2 &&
               (n->input_size() < 2 || inputOf(*n, 1).empty()) &&
               (g.intAttr(*n, "axis", 0) == -1 ||
                g.intAttr(*n, "axis", 0) == 1)) {
      return {inputOf(*n, 0), -2}; // which output: resolved by the caller
    }
    return {"", -1};
  };
  for (int side = 0; side < 2; ++side) {
    const onnx::NodeProto *down = bmm(inputOf(weighted, side));
    if (!down)
      continue;
    std::string w2 = gatheredStack(g, inputOf(*down, 0), ids);
    const onnx::NodeProto *u = g.producerOf(inputOf(*down, 1));
    if (w2.empty() || !u || u->op_type() != "Unsqueeze")
      continue;
    const onnx::NodeProto *h = g.producerOf(inputOf(*u, 0));
    if (!h || h->op_type() != "Mul")
      continue;
    for (int i = 0; i < 2; ++i) {
      std::string a = g.siluInput(g.producerOf(inputOf(*h, i)));
      std::string b = inputOf(*h, 1 - i);
      if (a.empty())
        continue;
      const onnx::NodeProto *pa = g.producerOf(a), *pb = g.producerOf(b);
      auto [va, ia] = half(pa);
      auto [vb, ib] = half(pb);
      if (va.empty() || va != vb)
        continue;
      if (ia == -2) { // a two-way Split: the output index says the half
        ia = outputOf(*pa, 0) == a ? 0 : 1;
        ib = outputOf(*pb, 0) == b ? 0 : 1;
        if (pa != pb)
          continue;
      } else if (pa->op_type() == "SequenceAt" &&
                 inputOf(*pa, 0) != inputOf(*pb, 0)) {
        continue;
      }
      if (ia + ib != 1)
        continue;
      const onnx::NodeProto *up = bmm(va);
      if (!up)
        continue;
      std::string w13 = gatheredStack(g, inputOf(*up, 0), ids);
      const onnx::NodeProto *xu = g.producerOf(inputOf(*up, 1));
      if (w13.empty() || !xu || xu->op_type() != "Unsqueeze" ||
          (!x.empty() &&
           reshapeRoot(g, inputOf(*xu, 0)) != reshapeRoot(g, x.str())))
        continue;
      const onnx::TensorProto *s13 = g.initializers.lookup(w13);
      const onnx::TensorProto *s2 = g.initializers.lookup(w2);
      // [E, 2F, H] and [E, H, F]: the halves are even only when the split
      // is into two equal parts, which the widths check.
      if (s13->dims(0) != s2->dims(0) || s13->dims(1) != 2 * s2->dims(2) ||
          s13->dims(2) != s2->dims(1))
        continue;
      if (pa->op_type() == "SequenceAt") { // chunks of F columns
        const onnx::NodeProto *split = g.producerOf(inputOf(*pa, 0));
        auto size = g.scalarInt(inputOf(*split, 1));
        if (!size || *size != s2->dims(2))
          continue;
      }
      return BatchedExpert{w13, w2, ia == 0, inputOf(*xu, 0)};
    }
  }
  return std::nullopt;
}
