//===- MoERoutedLoop.cpp - the eager experts loop behind any routing ------===//
//
// transformers 5's eager experts (`experts_implementation="eager"`, the form
// the TorchScript exporter can write) loop over the experts the example's
// routing hit; TorchScript unrolls the loop:
//
//   mask     = Transpose(OneHot(ids, E or E + 1), [2, 1, 0])     ([E, k, T])
//   for the i-th of the n experts hit, e_i (a Split of NonZero(hit)):
//     pos, tok = NonZero(mask[e_i])                   (its slots and tokens)
//     h        = act(x[tok] W13[e_i])                 (any row-wise act)
//     y        = (h W2[e_i]) * Flatten(Unsqueeze(w, 2))[tok * k + pos]
//     acc      = acc + ScatterElements(zeros, tok, y)             (index_add_)
//
// Each iteration is the same computation at its own expert and the stacks
// hold every expert, so the loop computes what the batched form computes,
// for any routing. It is cut as MoERouted.cpp cuts batched_mm experts with
// an activation between the matmuls (SplitExperts): the first iteration's
// up matmul becomes part 1 (every (token, slot) row times W13 at its
// expert), its activation nodes stay and run on those rows, and its down
// matmul, the weighting and the sum become part 2. The other iterations
// are checked to compute what the first does (the same ops, attributes and
// constants) and are dropped with the loop.
//
//===----------------------------------------------------------------------===//

#include "MoEMatch.h"
#include "MoERouted.h"

#include <map>

using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

namespace {
/// One iteration of the loop: the expert's index value, its slots and
/// tokens, its two matmuls, the Mul by its weights and the accumulation.
struct Iteration {
  std::string index, pos, tok, x, hidden;
  const onnx::NodeProto *up = nullptr, *down = nullptr, *weighted = nullptr;
  std::string upStack, downStack, weights;
  bool xAtW = false;
  /// An identity ("zero") expert (LongCat-Flash's): its tokens' rows
  /// weighted as they are, no matmul.
  bool identity = false;
};
} // namespace

static bool hasPerm(const GraphIndex &g, const onnx::NodeProto &t,
                    llvm::ArrayRef<int64_t> perm) {
  for (const auto &a : t.attribute())
    if (a.name() == "perm")
      return llvm::equal(a.ints(), perm);
  // No perm reverses the axes.
  return llvm::equal(llvm::reverse(perm),
                     llvm::seq<int64_t>(0, (int64_t)perm.size()));
}

/// The stack a MatMul operand gathers one expert of: Transpose(Gather(W,
/// e)) ([E, out, in], nn.Linear's layout) or Gather(W, e) (`xAtW`, [E, in,
/// out]); returns the stack and e.
static std::optional<std::pair<std::string, std::string>>
stackAt(const GraphIndex &g, StringRef value, bool &xAtW) {
  const onnx::NodeProto *n = g.producerOf(value);
  xAtW = true;
  if (n && n->op_type() == "Transpose") {
    if (!hasPerm(g, *n, {1, 0}))
      return std::nullopt;
    n = g.producerOf(inputOf(*n, 0));
    xAtW = false;
  }
  if (!n || n->op_type() != "Gather" || g.intAttr(*n, "axis", 0) != 0)
    return std::nullopt;
  const onnx::TensorProto *w = g.initializers.lookup(inputOf(*n, 0));
  if (!w || w->dims_size() != 3)
    return std::nullopt;
  return std::make_pair(inputOf(*n, 0), inputOf(*n, 1));
}

/// Whether every element of a constant tensor is zero.
static bool allZero(const onnx::TensorProto &t) {
  return llvm::all_of(t.raw_data(), [](char c) { return c == 0; }) &&
         llvm::all_of(t.float_data(), [](float v) { return v == 0; }) &&
         llvm::all_of(t.int64_data(), [](int64_t v) { return v == 0; }) &&
         llvm::all_of(t.int32_data(), [](int32_t v) { return v == 0; }) &&
         llvm::all_of(t.double_data(), [](double v) { return v == 0; });
}

/// Whether `value` is zeros: a constant, or a ConstantOfShape of zeros
/// (`torch.zeros_like`).
static bool zeros(const GraphIndex &g, StringRef value) {
  if (const onnx::TensorProto *t = constantTensor(g, value))
    return allZero(*t);
  const onnx::NodeProto *n = g.producerOf(value);
  if (!n || n->op_type() != "ConstantOfShape")
    return false;
  return llvm::all_of(n->attribute(), [](const onnx::AttributeProto &a) {
    return a.name() != "value" || allZero(a.t());
  });
}

/// Whether the integer `value` is computed from the last dimension of
/// `rows` alone (torch's chunk(2) writes its bounds from the width at run
/// time): the dispatched rows keep that dimension, not the first.
static bool fromLastDim(const GraphIndex &g, StringRef value, StringRef rows,
                        int depth = 0) {
  if (g.scalarInt(value) || constantInts(g, value))
    return true;
  const onnx::NodeProto *n = g.producerOf(value);
  if (!n || depth > 16)
    return false;
  if (n->op_type() == "Gather") {
    const onnx::NodeProto *shape = g.producerOf(inputOf(*n, 0));
    auto at = constantInts(g, inputOf(*n, 1));
    return shape && shape->op_type() == "Shape" && inputOf(*shape, 0) == rows &&
           at && at->size() == 1 && (*at)[0] == -1;
  }
  if (!llvm::is_contained({"Add", "Sub", "Mul", "Div", "Cast", "Unsqueeze",
                           "Squeeze", "Reshape", "Identity"},
                          n->op_type()))
    return false;
  return llvm::all_of(n->input(), [&](const std::string &in) {
    return fromLastDim(g, in, rows, depth + 1);
  });
}

/// Whether `a` (back to `stopA`) computes what `b` (back to `stopB`) does:
/// the same ops with the same attributes on the same constants.
static bool sameComputation(const GraphIndex &g, StringRef a, StringRef b,
                            StringRef stopA, StringRef stopB, int depth = 0) {
  if (a == stopA || b == stopB)
    return a == stopA && b == stopB;
  if (a == b)
    return true;
  const onnx::NodeProto *pa = g.producerOf(a), *pb = g.producerOf(b);
  if (!pa || !pb || depth > 64 || pa->op_type() != pb->op_type() ||
      pa->input_size() != pb->input_size() ||
      pa->attribute_size() != pb->attribute_size())
    return false;
  for (int i = 0; i < pa->attribute_size(); ++i)
    if (pa->attribute(i).SerializeAsString() !=
        pb->attribute(i).SerializeAsString())
      return false;
  auto at = [](const onnx::NodeProto *n, StringRef v) {
    return llvm::find(n->output(), v) - n->output().begin();
  };
  if (at(pa, a) != at(pb, b))
    return false;
  for (int i = 0; i < pa->input_size(); ++i)
    if (!sameComputation(g, pa->input(i), pb->input(i), stopA, stopB,
                         depth + 1))
      return false;
  return true;
}

/// The slots and tokens of expert mask row `row` (`mask[e_i]`, [k, T]):
/// Squeeze(Split(Transpose(NonZero(row)), 2 on axis 1)) after any Cast.
static bool slotsAndTokens(const GraphIndex &g, std::string row,
                           Iteration &it) {
  while (const onnx::NodeProto *cast = g.onlyReader(row, "Cast"))
    row = outputOf(*cast, 0);
  const onnx::NodeProto *nz = g.onlyReader(row, "NonZero");
  const onnx::NodeProto *t =
      nz ? g.onlyReader(outputOf(*nz, 0), "Transpose") : nullptr;
  const onnx::NodeProto *split = t && hasPerm(g, *t, {1, 0})
                                     ? g.onlyReader(outputOf(*t, 0), "Split")
                                     : nullptr;
  if (!split || split->output_size() != 2 || g.intAttr(*split, "axis", 0) != 1)
    return false;
  std::string *out[] = {&it.pos, &it.tok};
  for (int i = 0; i < 2; ++i) {
    const onnx::NodeProto *sq = g.onlyReader(outputOf(*split, i), "Squeeze");
    auto axes = sq ? constantInts(g, inputOf(*sq, 1)) : std::nullopt;
    if (!axes || axes->size() != 1 || ((*axes)[0] != 1 && (*axes)[0] != -1))
      return false;
    *out[i] = outputOf(*sq, 0);
  }
  return true;
}

/// The up matmul `x[tok] W13[e]` of an iteration.
static bool upMatmul(const GraphIndex &g, Iteration &it) {
  for (const onnx::NodeProto *gather : g.readersOf(it.tok, "Gather")) {
    if (inputOf(*gather, 1) != it.tok || g.intAttr(*gather, "axis", 0) != 0)
      continue;
    const onnx::NodeProto *mm = g.onlyReader(outputOf(*gather, 0), "MatMul");
    if (!mm || inputOf(*mm, 0) != outputOf(*gather, 0))
      continue;
    auto stack = stackAt(g, inputOf(*mm, 1), it.xAtW);
    if (!stack || stack->second != it.index)
      continue;
    it.x = inputOf(*gather, 0);
    it.up = mm;
    it.upStack = stack->first;
    return true;
  }
  return false;
}

/// The weighting of an iteration, `y * Flatten(Unsqueeze(w, 2))[tok * k +
/// pos]` (viewed back to [n, 1]), and its down matmul `h W2[e]`.
static bool weightedDown(const GraphIndex &g, Iteration &it) {
  for (const onnx::NodeProto *add : g.readersOf(it.pos, "Add")) {
    int other = inputOf(*add, 0) == it.pos ? 1 : 0;
    const onnx::NodeProto *mul = g.producerOf(inputOf(*add, other));
    if (!mul || mul->op_type() != "Mul")
      continue;
    int tokAt = inputOf(*mul, 0) == it.tok ? 0 : 1;
    if (inputOf(*mul, tokAt) != it.tok)
      continue;
    // k: the width of the weights' Unsqueeze (a Gather of its Shape at 1).
    const onnx::NodeProto *kAt = g.producerOf(inputOf(*mul, 1 - tokAt));
    const onnx::NodeProto *shape = kAt && kAt->op_type() == "Gather"
                                       ? g.producerOf(inputOf(*kAt, 0))
                                       : nullptr;
    auto dim = kAt ? constantInts(g, inputOf(*kAt, 1)) : std::nullopt;
    if (!shape || shape->op_type() != "Shape" || !dim || dim->size() != 1 ||
        (*dim)[0] != 1)
      continue;
    const onnx::NodeProto *unsq = g.producerOf(inputOf(*shape, 0));
    auto axes = unsq && unsq->op_type() == "Unsqueeze"
                    ? constantInts(g, inputOf(*unsq, 1))
                    : std::nullopt;
    if (!axes || axes->size() != 1 || (*axes)[0] != 2)
      continue;
    auto gathers = g.readersOf(outputOf(*add, 0), "Gather");
    const onnx::NodeProto *gather = gathers.size() == 1 ? gathers[0] : nullptr;
    const onnx::NodeProto *flat =
        gather ? g.producerOf(inputOf(*gather, 0)) : nullptr;
    if (!flat || flat->op_type() != "Flatten" ||
        inputOf(*flat, 0) != outputOf(*unsq, 0) ||
        g.intAttr(*flat, "axis", 1) != 2 || g.intAttr(*gather, "axis", 0) != 0)
      continue;
    it.weights = inputOf(*unsq, 0);
    // The gathered weights viewed back to a column, then the Mul.
    std::string w = outputOf(*gather, 0);
    const onnx::NodeProto *r;
    while ((r = g.onlyReader(w, "Reshape")))
      w = outputOf(*r, 0);
    const onnx::NodeProto *weighted = g.onlyReader(w, "Mul");
    if (!weighted)
      continue;
    int yAt = inputOf(*weighted, 0) == w ? 1 : 0;
    const onnx::NodeProto *down = g.producerOf(inputOf(*weighted, yAt));
    // An identity expert weighs its tokens' rows themselves.
    if (!it.up && down && down->op_type() == "Gather" &&
        inputOf(*down, 1) == it.tok && g.intAttr(*down, "axis", 0) == 0) {
      it.identity = true;
      it.weighted = weighted;
      it.x = inputOf(*down, 0);
      return true;
    }
    bool xAtW = false;
    auto stack = down && down->op_type() == "MatMul"
                     ? stackAt(g, inputOf(*down, 1), xAtW)
                     : std::nullopt;
    if (!stack || stack->second != it.index || xAtW != it.xAtW)
      continue;
    it.weighted = weighted;
    it.down = down;
    it.downStack = stack->first;
    it.hidden = inputOf(*down, 0);
    return true;
  }
  return false;
}

/// The activation's nodes from `up`'s output to `hidden`: row-wise, their
/// other inputs constants (or, a Slice's bounds, computed from the rows'
/// width), nothing outside them reading what they compute.
static std::optional<llvm::DenseSet<int>> activation(const GraphIndex &g,
                                                     const Iteration &it) {
  std::string rows = outputOf(*it.up, 0);
  llvm::DenseSet<int> region;
  SmallVector<std::string> work{it.hidden};
  while (!work.empty()) {
    std::string v = work.pop_back_val();
    if (v == rows)
      continue;
    const onnx::NodeProto *p = g.producerOf(v);
    if (!p || !rowwise(g, *p) || region.size() > 64)
      return std::nullopt;
    if (!region.insert(g.producer.lookup(v)).second)
      continue;
    for (auto [i, in] : llvm::enumerate(p->input())) {
      if (in.empty() || scalarFloat(g, in) || g.scalarInt(in) ||
          (p->op_type() == "Slice" && i > 0 && fromLastDim(g, in, rows)))
        continue;
      work.push_back(in);
    }
  }
  // What the rows and the activation compute is read by the activation,
  // the down matmul, or a Shape (the chunk's bounds, checked above).
  int down = g.producer.lookup(outputOf(*it.down, 0));
  auto inside = [&](StringRef v) {
    return !g.outputs.count(v) &&
           llvm::all_of(g.consumers.lookup(v), [&](int reader) {
             return region.count(reader) || reader == down ||
                    g.graph.node(reader).op_type() == "Shape";
           });
  };
  if (!inside(rows))
    return std::nullopt;
  for (int i : region)
    for (const std::string &o : g.graph.node(i).output())
      if (!inside(o))
        return std::nullopt;
  return region;
}

/// The accumulation of iteration `it` into `acc`: Add(acc, ScatterElements(
/// zeros, Expand(Unsqueeze(tok)), Expand(Cast(weighted)))) on axis 0; the
/// Add, or null.
static const onnx::NodeProto *accumulate(const GraphIndex &g,
                                         const Iteration &it, StringRef acc,
                                         llvm::DenseSet<int> &nodes) {
  // The weighted rows through Casts and Expands (a Shape of them, the
  // indices' Expand to their shape, reads no value).
  std::string y = outputOf(*it.weighted, 0);
  const onnx::NodeProto *scatter = nullptr;
  while (!scatter && !g.outputs.count(y)) {
    SmallVector<const onnx::NodeProto *> readers;
    for (int i : g.consumers.lookup(y))
      if (g.graph.node(i).op_type() != "Shape")
        readers.push_back(&g.graph.node(i));
    if (readers.size() != 1)
      return nullptr;
    const std::string &op = readers[0]->op_type();
    if (op == "ScatterElements")
      scatter = readers[0];
    else if ((op == "Cast" || op == "Expand") && inputOf(*readers[0], 0) == y)
      y = outputOf(*readers[0], 0);
    else
      return nullptr;
  }
  const onnx::NodeProto *n;
  if (!scatter || inputOf(*scatter, 2) != y ||
      g.intAttr(*scatter, "axis", 0) != 0 || !zeros(g, inputOf(*scatter, 0)) ||
      llvm::any_of(scatter->attribute(),
                   [](const auto &a) { return a.name() == "reduction"; }))
    return nullptr;
  std::string index = inputOf(*scatter, 1);
  while ((n = g.producerOf(index)) &&
         (n->op_type() == "Expand" || n->op_type() == "Unsqueeze"))
    index = inputOf(*n, 0);
  const onnx::NodeProto *add = g.onlyReader(outputOf(*scatter, 0), "Add");
  if (index != it.tok || !add)
    return nullptr;
  StringRef other = inputOf(*add, inputOf(*add, 0) == outputOf(*scatter, 0));
  if (other != acc && !(acc.empty() && zeros(g, other)))
    return nullptr;
  nodes.insert(g.producer.lookup(outputOf(*scatter, 0)));
  nodes.insert(g.producer.lookup(outputOf(*add, 0)));
  return add;
}

/// How many experts per token `ids` holds: the k of the TopK that chose
/// them (through casts, reshapes and a Where replacing some of them:
/// Zaya's sentinel expert), 1 for an ArgMax, the k of a constant [V, k]
/// table gathered at the tokens, the sum over a Concat along the last axis
/// (PhiMoE's sparsemixer picks its two one at a time).
static std::optional<int64_t> chosenK(const GraphIndex &g,
                                      const std::string &ids, int depth = 0) {
  const onnx::NodeProto *n = g.producerOf(ids);
  if (!n || depth > 16)
    return std::nullopt;
  const std::string &op = n->op_type();
  if (op == "TopK")
    return outputOf(*n, 1) == ids ? g.scalarInt(inputOf(*n, 1)) : std::nullopt;
  if (op == "ArgMax")
    return 1;
  if (op == "Concat") {
    if (g.intAttr(*n, "axis", 0) != -1)
      return std::nullopt;
    int64_t k = 0;
    for (const std::string &in : n->input()) {
      auto part = chosenK(g, in, depth + 1);
      if (!part)
        return std::nullopt;
      k += *part;
    }
    return k;
  }
  // A constant table of each token's k experts gathered at the token ids
  // (DeepSeek-V4's hash routing: `tid2eid[input_ids]`).
  if (op == "Gather") {
    // (The exporter shares equal tables: another layer's through Identity.)
    std::string name = inputOf(*n, 0);
    for (const onnx::NodeProto *p = g.producerOf(name);
         p && p->op_type() == "Identity"; p = g.producerOf(name))
      name = inputOf(*p, 0);
    const onnx::TensorProto *table = g.initializers.lookup(name);
    if (!table || table->dims_size() != 2 || g.intAttr(*n, "axis", 0) != 0)
      return std::nullopt;
    return table->dims(1);
  }
  // The TopK's indices are one branch of a Where, a constant the other.
  if (op == "Where")
    return chosenK(g, inputOf(*n, g.scalarInt(inputOf(*n, 2)) ? 1 : 2),
                   depth + 1);
  if (!llvm::is_contained(
          {"Cast", "Reshape", "Identity", "Squeeze", "Unsqueeze"}, op))
    return std::nullopt;
  return chosenK(g, inputOf(*n, 0), depth + 1);
}

std::optional<SplitExperts>
moe::matchLoopExperts(const GraphIndex &g, int oneHotIndex, std::string &why) {
  const onnx::NodeProto &oneHot = g.graph.node(oneHotIndex);
  auto depth = g.scalarInt(inputOf(oneHot, 1));
  auto values = constantInts(g, inputOf(oneHot, 2));
  if (oneHot.op_type() != "OneHot" || !depth ||
      g.intAttr(oneHot, "axis", -1) != -1 || !values ||
      *values != SmallVector<int64_t>{0, 1})
    return std::nullopt;
  // The expert mask [E, k, T], read one expert at a time at the hits.
  const onnx::NodeProto *maskT = g.onlyReader(outputOf(oneHot, 0), "Transpose");
  if (!maskT || !hasPerm(g, *maskT, {2, 1, 0}))
    return std::nullopt;
  std::optional<int64_t> topK = chosenK(g, inputOf(oneHot, 0));
  if (!topK)
    return std::nullopt;
  std::vector<Iteration> its;
  // The loop runs over the n experts hit (a Split of NonZero(hit)), or,
  // where the model calls `.item()` on each, over constants: then only an
  // expert the example reached is in the graph.
  int64_t hits = 0;
  bool constant = false;
  std::map<int64_t, Iteration> byClass;
  for (const onnx::NodeProto *row :
       g.readersOf(outputOf(*maskT, 0), "Gather")) {
    auto c = hitClass(g, inputOf(*row, 1));
    if (auto e = g.scalarInt(inputOf(*row, 1)); !c && e) {
      c = std::make_pair(*e, int64_t(-1));
      constant = true;
    }
    if (!c || g.intAttr(*row, "axis", 0) != 0 || byClass.count(c->first))
      return std::nullopt;
    hits = c->second;
    Iteration it;
    it.index = inputOf(*row, 1);
    if (!slotsAndTokens(g, outputOf(*row, 0), it))
      return std::nullopt;
    // (An identity expert, known by its class only at export, is an
    // iteration of constant class: the model branches on `.item()`.)
    if ((!upMatmul(g, it) && !constant) || !weightedDown(g, it) ||
        (!it.up && !it.identity))
      return std::nullopt;
    byClass[c->first] = it;
  }
  if (byClass.empty())
    return std::nullopt;
  its.reserve(byClass.size());
  for (auto &[c, it] : byClass)
    its.push_back(it);
  const Iteration &first = its.front();
  if (first.identity)
    return std::nullopt;
  const onnx::TensorProto *w13 = g.initializers.lookup(first.upStack);
  const onnx::TensorProto *w2 = g.initializers.lookup(first.downStack);
  // The routed experts are the down stack's; identity experts follow
  // them (LongCat-Flash's up stack holds rows for them too, never read).
  int64_t experts = w2->dims(0);
  int64_t routed = experts;
  int64_t identities =
      llvm::count_if(its, [](const Iteration &it) { return it.identity; });
  if (identities) {
    // The one-hot's classes: every expert, routed and identity, whether
    // the example reached it or not.
    experts = *depth;
    for (auto &[c, it] : byClass)
      if (it.identity != (c >= routed))
        return std::nullopt;
  }
  if (w13->dims(0) < routed || (!identities && w13->dims(0) != routed) ||
      (*depth != experts && *depth != experts + 1))
    return std::nullopt;
  if (constant)
    hits = experts;
  if (hits < 1 || hits > experts || (int64_t)byClass.size() != hits ||
      byClass.rbegin()->first != hits - 1) {
    why = "the graph holds " + std::to_string(byClass.size()) +
          " experts of the " + std::to_string(hits) +
          " its eager loop routes to (the model reads each expert's index "
          "with .item(), so the exporter keeps only the experts the "
          "example input reached): export with a longer input (more "
          "tokens) so every expert gets one, or trace the model with "
          "rp.trace";
    return std::nullopt;
  }
  auto region = activation(g, first);
  if (!region)
    return std::nullopt;
  SplitExperts r;
  r.nodes.insert(g.producer.lookup(outputOf(*first.down, 0)));
  std::string acc;
  const onnx::NodeProto *add = nullptr;
  for (const Iteration &it : its) {
    if (it.x != first.x || it.weights != first.weights ||
        (!it.identity &&
         (it.upStack != first.upStack || it.downStack != first.downStack ||
          it.xAtW != first.xAtW ||
          !sameComputation(g, it.hidden, first.hidden, outputOf(*it.up, 0),
                           outputOf(*first.up, 0)))) ||
        !(add = accumulate(g, it, acc, r.nodes)))
      return std::nullopt;
    r.nodes.insert(g.producer.lookup(outputOf(*it.weighted, 0)));
    acc = outputOf(*add, 0);
  }
  r.x = first.x;
  r.ids = inputOf(oneHot, 0);
  r.weights = first.weights;
  r.gateUp = first.upStack;
  r.down = first.downStack;
  r.upValue = outputOf(*first.up, 0);
  r.hidden = first.hidden;
  r.output = acc;
  r.topK = *topK;
  r.xAtW = first.xAtW;
  if (identities)
    r.routedExperts = routed;
  r.upAt = g.producer.lookup(r.upValue);
  r.last = g.producer.lookup(acc);
  r.nodes.insert(r.upAt);
  return r;
}
