//===- MoESigmoidRouter.cpp - DeepSeek-V3's router in an ONNX graph -------===//
//
// DeepSeek-V3's router (and the families that copy it: GLM-4-MoE, ...)
// scores experts with a sigmoid and picks them by `scores + bias` within
// the best groups, so it reaches TopK three times, none of them on a
// Softmax. The TorchScript exporter writes it as
//
//   s      = Sigmoid(logits);  c = Add(s, bias)
//   g      = ReduceSum(TopK(Reshape(c, [-1, G, E/G]), 2).values, -1)
//   keep   = ScatterElements(zeros, TopK(g, topk_group).indices, 1), then
//            Unsqueeze/Expand/Reshape to [T, E], Cast, Not
//   e      = TopK(Where(not keep, -inf, c), top_k).indices
//   w      = GatherElements(s, e) / (ReduceSum(...) + eps) * scale
//
// The mask's construction is checked by its op types only (each reads the
// chosen groups or constants); the parts that decide which experts win
// and their weights (the grouping shape, the two k, the fill value, the
// gathered scores, normalisation and scale) are read from the graph.
//
//===----------------------------------------------------------------------===//

#include "MoESigmoidRouter.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir::rp::onnx_import::moe;

const onnx::TensorProto *
mlir::rp::onnx_import::moe::constantTensor(const GraphIndex &g,
                                           StringRef value) {
  const onnx::NodeProto *node = g.producerOf(value);
  while (node && (node->op_type() == "Cast" || node->op_type() == "CastLike" ||
                  node->op_type() == "Identity")) {
    value = inputOf(*node, 0);
    node = g.producerOf(value);
  }
  if (!node)
    return g.initializers.lookup(value);
  if (node->op_type() == "Constant")
    for (const auto &a : node->attribute())
      if (a.name() == "value" && a.has_t())
        return &a.t();
  return nullptr;
}

/// A one-element float constant.
std::optional<double>
mlir::rp::onnx_import::moe::scalarFloat(const GraphIndex &g, StringRef value) {
  const onnx::TensorProto *t = constantTensor(g, value);
  if (!t)
    return std::nullopt;
  return scalarValue<double>(*t);
}

/// The values of an int64 constant (a Reshape's shape, a reduction's axes).
std::optional<SmallVector<int64_t>>
mlir::rp::onnx_import::moe::constantInts(const GraphIndex &g, StringRef value) {
  // dynamo writes a shape as a Concat of one-element constants, each a
  // Constant's value_ints.
  if (const onnx::NodeProto *node = g.producerOf(value)) {
    if (node->op_type() == "Concat") {
      SmallVector<int64_t> out;
      for (const std::string &in : node->input()) {
        auto part = constantInts(g, in);
        if (!part)
          return std::nullopt;
        out.append(*part);
      }
      return out;
    }
    if (node->op_type() == "Constant")
      for (const auto &a : node->attribute())
        if (a.name() == "value_ints")
          return SmallVector<int64_t>(a.ints().begin(), a.ints().end());
  }
  const onnx::TensorProto *t = constantTensor(g, value);
  if (!t || t->data_type() != onnx::TensorProto::INT64)
    return std::nullopt;
  SmallVector<int64_t> out(t->int64_data().begin(), t->int64_data().end());
  if (out.empty())
    for (size_t i = 0; i + 8 <= t->raw_data().size(); i += 8) {
      int64_t v;
      std::memcpy(&v, t->raw_data().data() + i, 8);
      out.push_back(v);
    }
  return out;
}

/// Whether `node` reads only the shape and type of `value` (dynamo's
/// zeros_like: Shape, and CastLike's target), never its data.
static bool readsShapeOnly(const onnx::NodeProto &node, StringRef value) {
  return node.op_type() == "Shape" ||
         (node.op_type() == "CastLike" && inputOf(node, 0) != value);
}

/// `w` through the nodes that pass it on unchanged: Identity, and
/// dynamo's CastLike to the router's own logits or scores (`type_as`, the
/// weights' own type).
static std::string unchanged(const GraphIndex &g, std::string w,
                             StringRef logits, StringRef scores) {
  while (const onnx::NodeProto *n = g.onlyReader(w)) {
    bool sameType = n->op_type() == "CastLike" && inputOf(*n, 0) == w &&
                    (inputOf(*n, 1) == logits || inputOf(*n, 1) == scores);
    if (n->op_type() != "Identity" && !sameType)
      break;
    w = outputOf(*n, 0);
  }
  return w;
}

/// Whether `node` reduces over the last axis only (rank `rank`).
static bool reducesLastAxis(const GraphIndex &g, const onnx::NodeProto &node,
                            int64_t rank) {
  std::optional<SmallVector<int64_t>> axes;
  if (node.input_size() > 1)
    axes = constantInts(g, inputOf(node, 1));
  else
    for (const auto &a : node.attribute())
      if (a.name() == "axes")
        axes = SmallVector<int64_t>(a.ints().begin(), a.ints().end());
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

bool mlir::rp::onnx_import::moe::matchSigmoidRouter(const GraphIndex &g,
                                                    int topKIndex,
                                                    SigmoidRouter &r,
                                                    std::string &why, int &at) {
  const onnx::NodeProto &first = g.graph.node(topKIndex);
  const onnx::NodeProto *view = g.producerOf(inputOf(first, 0));
  bool grouped = view && view->op_type() == "Reshape";
  std::string choice = grouped ? inputOf(*view, 0) : inputOf(first, 0);
  const onnx::NodeProto *add = g.producerOf(choice);
  if (!add || add->op_type() != "Add")
    return false;
  for (int i = 0; i < 2; ++i) {
    const onnx::NodeProto *s = g.producerOf(inputOf(*add, i));
    if (s && s->op_type() == "Sigmoid")
      r.scores = inputOf(*add, i);
  }
  if (r.scores.empty())
    return false;
  r.choice = choice;
  at = topKIndex;
  auto fail = [&](const onnx::NodeProto &node, const std::string &what) {
    at = g.producer.lookup(outputOf(node, 0));
    why = "sigmoid scores with a correction bias (DeepSeek-V3's routing), "
          "but " +
          what +
          "; rp maps DeepSeek-V3's group-limited top-k as transformers "
          "writes it, rp.trace maps the other forms";
    return false;
  };
  r.expertTopK = topKIndex;
  if (grouped) {
    auto shape = constantInts(g, inputOf(*view, 1));
    if (!shape || shape->size() != 3 || (*shape)[1] < 1 || (*shape)[2] < 1)
      return fail(*view, "its scores are not viewed as [-1, groups, experts "
                         "per group] by a constant shape");
    r.groups = (*shape)[1];
    auto k = g.scalarInt(inputOf(first, 1));
    if (!k || *k < 1 || *k > (*shape)[2])
      return fail(first, "its top-k within a group has no constant k");
    r.groupTop = *k;
    // The group scores: the sum of the group's best.
    const onnx::NodeProto *sum = g.onlyReader(outputOf(first, 0));
    if (!sum || sum->op_type() != "ReduceSum" ||
        g.intAttr(*sum, "keepdims", 1) != 0 || !reducesLastAxis(g, *sum, 3) ||
        !g.consumers.lookup(outputOf(first, 1)).empty())
      return fail(first, "a group's score is not the sum of the top-k values "
                         "of its experts");
    // One TopK reads the group scores; dynamo's zeros_like(scores) reads
    // only their shape and type (Shape, CastLike's target).
    const onnx::NodeProto *pick = nullptr;
    int picks = 0, others = 0;
    for (int i : g.consumers.lookup(outputOf(*sum, 0))) {
      const onnx::NodeProto &reader = g.graph.node(i);
      if (reader.op_type() == "TopK")
        pick = &reader, ++picks;
      else if (!readsShapeOnly(reader, outputOf(*sum, 0)))
        ++others;
    }
    if (picks != 1 || others || g.outputs.count(outputOf(*sum, 0)))
      pick = nullptr;
    auto groupK = pick && pick->op_type() == "TopK"
                      ? g.scalarInt(inputOf(*pick, 1))
                      : std::nullopt;
    if (!groupK || *groupK < 1 || *groupK > r.groups ||
        g.intAttr(*pick, "largest", 1) != 1 ||
        !g.consumers.lookup(outputOf(*pick, 0)).empty())
      return fail(*sum, "the group scores are not read by one TopK of the "
                        "best groups with a constant k");
    r.topkGroup = *groupK;
    // The mask: every node reading the chosen groups up to the TopK that
    // picks the experts, which reads Where(mask, fill, choice).
    llvm::DenseSet<int> nodes{topKIndex, g.producer.lookup(outputOf(*sum, 0)),
                              g.producer.lookup(outputOf(*pick, 0))};
    llvm::StringSet<> masked{outputOf(*pick, 1)};
    int pickIndex = g.producer.lookup(outputOf(*pick, 0));
    r.expertTopK = -1;
    for (int i = pickIndex + 1, n = g.graph.node_size(); i < n; ++i) {
      const onnx::NodeProto &node = g.graph.node(i);
      if (llvm::none_of(node.input(), [&](const std::string &in) {
            return masked.count(in) > 0;
          }))
        continue;
      if (node.op_type() == "TopK") {
        r.expertTopK = i;
        break;
      }
      if (!llvm::is_contained({"Shape", "Expand", "ScatterElements",
                               "Unsqueeze", "Squeeze", "Reshape", "Cast", "Not",
                               "Where", "Equal", "Mul", "Tile", "Concat",
                               "ConstantOfShape", "Identity"},
                              node.op_type()))
        return fail(node, "the chosen groups are read by a " + node.op_type() +
                              ", not only the ops that make them a mask");
      nodes.insert(i);
      for (const std::string &o : node.output())
        masked.insert(o);
    }
    if (r.expertTopK < 0)
      return fail(*pick, "no TopK picks experts among the chosen groups");
    const onnx::NodeProto &expertTopK = g.graph.node(r.expertTopK);
    const onnx::NodeProto *where = g.producerOf(inputOf(expertTopK, 0));
    std::optional<double> fill;
    if (where && where->op_type() == "Where" &&
        masked.count(inputOf(*where, 0))) {
      if (inputOf(*where, 2) == choice)
        fill = scalarFloat(g, inputOf(*where, 1));
    }
    if (!fill)
      return fail(expertTopK, "the experts are not picked from the scores "
                              "with the other groups' replaced by a constant");
    r.fill = *fill;
    // The mask is used by nothing else.
    for (int i : nodes)
      for (const std::string &o : g.graph.node(i).output())
        for (int reader : g.consumers.lookup(o))
          if (reader != r.expertTopK && !nodes.count(reader) &&
              !readsShapeOnly(g.graph.node(reader), o))
            return fail(g.graph.node(reader),
                        "this node reads the group mask outside the router");
    r.nodes.assign(nodes.begin(), nodes.end());
    llvm::sort(r.nodes);
  }

  // The weights: the sigmoid scores of the chosen experts.
  const onnx::NodeProto &expertTopK = g.graph.node(r.expertTopK);
  SmallVector<const onnx::NodeProto *> gathers =
      g.readersOf(outputOf(expertTopK, 1), "GatherElements");
  // dynamo casts the indices to int64 first (a no-op: TopK's are int64).
  for (const onnx::NodeProto *cast :
       g.readersOf(outputOf(expertTopK, 1), "Cast"))
    if (g.intAttr(*cast, "to", 0) == onnx::TensorProto::INT64)
      gathers.append(g.readersOf(outputOf(*cast, 0), "GatherElements"));
  if (gathers.size() != 1 || inputOf(*gathers[0], 0) != r.scores ||
      g.intAttr(*gathers[0], "axis", 0) != 1 ||
      !g.consumers.lookup(outputOf(expertTopK, 0)).empty())
    return fail(expertTopK, "its weights are not the sigmoid scores of the "
                            "chosen experts (one GatherElements)");
  std::string logits = inputOf(*g.producerOf(r.scores), 0);
  std::string w = unchanged(g, outputOf(*gathers[0], 0), logits, r.scores);
  SmallVector<const onnx::NodeProto *> sums = g.readersOf(w, "ReduceSum");
  if (!sums.empty()) {
    // w / (ReduceSum(w) + eps)
    const onnx::NodeProto *den = g.onlyReader(outputOf(*sums[0], 0));
    std::optional<double> eps = 0.0;
    std::string denominator = outputOf(*sums[0], 0);
    if (den && den->op_type() == "Add") {
      int other = inputOf(*den, 0) == denominator ? 1 : 0;
      eps = scalarFloat(g, inputOf(*den, other));
      denominator = outputOf(*den, 0);
    }
    SmallVector<const onnx::NodeProto *> divs = g.readersOf(w, "Div");
    if (sums.size() != 1 || !reducesLastAxis(g, *sums[0], 2) ||
        g.intAttr(*sums[0], "keepdims", 1) != 1 || !eps || divs.size() != 1 ||
        inputOf(*divs[0], 0) != w || inputOf(*divs[0], 1) != denominator ||
        g.consumers.lookup(w).size() != 2 || g.outputs.count(w))
      return fail(*sums[0], "its weights are not divided by their sum");
    r.normalize = true;
    r.eps = *eps;
    w = unchanged(g, outputOf(*divs[0], 0), logits, r.scores);
  }
  if (const onnx::NodeProto *mul = g.onlyReader(w, "Mul")) {
    int other = inputOf(*mul, 0) == w ? 1 : 0;
    if (auto scale = scalarFloat(g, inputOf(*mul, other))) {
      r.scale = *scale;
      w = unchanged(g, outputOf(*mul, 0), logits, r.scores);
    }
  }
  r.weights = w;
  // Everything the weights go through on the way to the experts' outputs
  // must be a view or an index: any arithmetic left over (a second scale,
  // a clamp) is routing the replacement would not compute.
  SmallVector<std::string> work{w};
  while (!work.empty()) {
    std::string v = work.pop_back_val();
    if (g.outputs.count(v))
      return fail(expertTopK, "its routing weights are a graph output");
    for (int i : g.consumers.lookup(v)) {
      const onnx::NodeProto &reader = g.graph.node(i);
      if (readsShapeOnly(reader, v))
        continue;
      if (llvm::is_contained({"Reshape", "Unsqueeze", "Squeeze", "Expand",
                              "Flatten", "Identity", "Transpose", "Gather",
                              "GatherND", "Slice", "Concat", "Cast",
                              "CastLike"},
                             reader.op_type()) &&
          inputOf(reader, 0) == v) {
        work.push_back(outputOf(reader, 0));
        continue;
      }
      int other = inputOf(reader, 0) == v ? 1 : 0;
      if (reader.op_type() == "Mul" && !scalarFloat(g, inputOf(reader, other)))
        continue; // the weighting of an expert's output
      at = i;
      why = "sigmoid scores with a correction bias (DeepSeek-V3's routing), "
            "but its weights (the chosen scores, divided by their sum, "
            "times a constant) are then read by a " +
            reader.op_type() +
            " that is not the weighting of an expert's output; rp maps the "
            "weights as transformers' DeepSeek-V3 computes them, rp.trace "
            "maps the other forms";
      return false;
    }
  }
  return true;
}
