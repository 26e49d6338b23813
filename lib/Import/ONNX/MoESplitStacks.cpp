//===- MoESplitStacks.cpp - experts of three flat stacks (DBRX) -----------===//
//
// DBRX keeps its experts in three flat parameters, `w1`, `v1` and `w2`,
// each [E x F, H], and its eager loop (TorchScript unrolls it as the
// stacked loop of MoEBlocks.cpp) views each as [E, F, H] and reads the
// expert at its hit:
//
//   gate = x[tok] Transpose(Reshape(w1, [-1, F, H])[e])
//   up   = x[tok] Transpose(Reshape(v1, [-1, F, H])[e])
//   y    = (silu(gate) * up) Reshape(w2, [-1, F, H])[e]     (untransposed)
//
// then views y as [-1, H] before weighting it. The gate and up stacks are
// separate (not the halves of one [E, 2F, H] stack) and the down one is in
// the `x @ W` layout. The MoE node takes the three 3-D values (the Reshapes
// stay in the graph and import as reshapes of the named parameters, so the
// gradients reach the model's own `w1`, `v1` and `w2`).
//
//===----------------------------------------------------------------------===//

#include "MoEMatch.h"

using namespace mlir;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

namespace {
/// One expert of a 3-D stack: the stack's value, its shape and the index.
struct StackAt {
  std::string stack, index;
  SmallVector<int64_t> shape;
  bool xAtW = false;
};
} // namespace

/// The shape of a 3-D stack value: a 3-D initializer, or a Reshape of an
/// initializer to a constant 3-D shape (one -1 at most) of as many elements.
static std::optional<SmallVector<int64_t>> stackShape(const GraphIndex &g,
                                                      StringRef value) {
  if (const onnx::TensorProto *w = g.initializers.lookup(value)) {
    if (w->dims_size() != 3)
      return std::nullopt;
    return SmallVector<int64_t>(w->dims().begin(), w->dims().end());
  }
  const onnx::NodeProto *r = g.producerOf(value);
  if (!r || r->op_type() != "Reshape")
    return std::nullopt;
  const onnx::TensorProto *w = g.initializers.lookup(inputOf(*r, 0));
  auto shape = constantInts(g, inputOf(*r, 1));
  if (!w || !shape || shape->size() != 3)
    return std::nullopt;
  int64_t total = 1, known = 1, unknown = -1;
  for (int64_t d : w->dims())
    total *= d;
  for (auto [i, d] : llvm::enumerate(*shape)) {
    if (d == -1 && unknown < 0)
      unknown = i;
    else if (d > 0)
      known *= d;
    else
      return std::nullopt;
  }
  if (unknown >= 0) {
    if (total % known)
      return std::nullopt;
    (*shape)[unknown] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return shape;
}

/// The expert of a stack a MatMul multiplies by: Transpose(Gather(S, e))
/// (nn.Linear's [E, out, in]) or Gather(S, e) (`xAtW`, [E, in, out]).
static std::optional<StackAt> stackOperand(const GraphIndex &g,
                                           StringRef value) {
  StackAt s;
  const onnx::NodeProto *n = g.producerOf(value);
  s.xAtW = true;
  if (n && n->op_type() == "Transpose") {
    for (const auto &a : n->attribute())
      if (a.name() == "perm" &&
          (a.ints_size() != 2 || a.ints(0) != 1 || a.ints(1) != 0))
        return std::nullopt;
    n = g.producerOf(inputOf(*n, 0));
    s.xAtW = false;
  }
  if (!n || n->op_type() != "Gather" || g.intAttr(*n, "axis", 0) != 0)
    return std::nullopt;
  auto shape = stackShape(g, inputOf(*n, 0));
  if (!shape)
    return std::nullopt;
  s.stack = inputOf(*n, 0);
  s.index = inputOf(*n, 1);
  s.shape = *shape;
  return s;
}

std::optional<Expert>
Matcher::matchSplitStackedExpert(const onnx::NodeProto &down) const {
  if (down.op_type() != "MatMul")
    return std::nullopt;
  auto w2 = stackOperand(g, inputOf(down, 1));
  const onnx::NodeProto *h = g.producerOf(inputOf(down, 0));
  if (!w2 || !h || h->op_type() != "Mul")
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::string a = siluInput(g.producerOf(inputOf(*h, i)));
    const onnx::NodeProto *gate = a.empty() ? nullptr : g.producerOf(a);
    const onnx::NodeProto *up = g.producerOf(inputOf(*h, 1 - i));
    if (!gate || !up || gate->op_type() != "MatMul" ||
        up->op_type() != "MatMul" || inputOf(*gate, 0) != inputOf(*up, 0))
      continue;
    auto w1 = stackOperand(g, inputOf(*gate, 1));
    auto w3 = stackOperand(g, inputOf(*up, 1));
    // Both nn.Linear-layout [E, F, H] stacks of one shape, read at the
    // down stack's expert; the down stack [E, F, H] (x @ W) or [E, H, F].
    if (!w1 || !w3 || w1->xAtW || w3->xAtW || w1->stack == w3->stack ||
        w1->shape != w3->shape || w1->index != w2->index ||
        w3->index != w2->index)
      continue;
    int64_t e = w1->shape[0], f = w1->shape[1], hidden = w1->shape[2];
    SmallVector<int64_t> want = w2->xAtW ? SmallVector<int64_t>{e, f, hidden}
                                         : SmallVector<int64_t>{e, hidden, f};
    if (w2->shape != want)
      continue;
    // The tokens: rows gathered from one value.
    const onnx::NodeProto *rows = g.producerOf(inputOf(*gate, 0));
    if (!rows || rows->op_type() != "Gather" ||
        g.intAttr(*rows, "axis", 0) != 0)
      continue;
    Expert x{w1->stack, w3->stack, w2->stack};
    x.stacked = x.split = true;
    x.downXAtW = w2->xAtW;
    x.index = w2->index;
    x.count = e;
    x.hidden = hidden;
    x.tokens = inputOf(*rows, 0);
    return x;
  }
  return std::nullopt;
}
