//===- MoERegionCheck.cpp - every node of a matched MoE block accounted ---===//
//
// The whole-block matcher (MoEBlocks.cpp) replaces every node of a block's
// routing region, the nodes after its TopK that read a value depending on
// it, by one MoE node. It recognises the router, the normalisation, the
// one-hot classes and each expert's output; a node it did not look at
// would be dropped with the rest, and its effect lost without a word (a
// second scale of the weights, a shared expert added into the running sum,
// tokens scaled before the experts read them). This check gives every
// region node a role from what it reads and refuses a node whose effect the
// rp.moe ops do not reproduce, naming it.
//
// Roles (the `Role` enum): the routing's integers (chosen experts, the
// one-hot mask, hit lists, positions, shapes), the mask cast to floats, the
// routing weights (the TopK's values, normalised, masked and summed per
// expert), rows gathered from outside the region at routed positions (the
// experts' tokens, a stack's expert), the experts' hidden values (computed
// from those rows by a MatMul first), the weighted outputs and their sum,
// zeros. Moving, viewing, casting and indexing keep a role; the arithmetic
// each role admits is what the MoE node computes for it:
//
//   weights    TopK values (softmax scores), or Softmax of them (softmax
//              after), divided by their ReduceSum / ReduceL1; times the
//              one-hot mask and summed (a class's weight per token); a
//              sigmoid router's weights as MoESigmoidRouter.cpp matched
//   hidden     MatMul of routed rows, then any elementwise op, only inside
//              an expert the matcher recognised (an ancestor of its output)
//   output     Mul of a recognised expert's output by the weights, Add of
//              outputs (or zeros), scattered into zeros (index_add_)
//   integers   anything on integers: routing positions move rows; a weight
//              or an output never enters their arithmetic
//
//===----------------------------------------------------------------------===//

#include "MoEMatch.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

namespace {

enum class Role {
  Index,   // integers of the routing
  Mask,    // the one-hot mask as floats
  Logits,  // the TopK's values when a Softmax over them is the weights
  Raw,     // the TopK's values when they are the weights (softmax before)
  Unused,  // the TopK's values a sigmoid router does not weigh by
  Weights, // the routing weights
  Masked,  // weights times the one-hot mask (summed: one class's weight)
  Norm,    // the sum or L1 norm of the raw weights
  Router,  // a sigmoid router's weights on their way (MoESigmoidRouter.cpp)
  Rows,    // values from outside the region gathered at routed positions
  Hidden,  // an expert's values computed from rows
  Output,  // weighted expert outputs and their sums
  Zero,    // zeros filled to a routed shape (the running sum's start)
};

const char *describe(Role r) {
  switch (r) {
  case Role::Index:
    return "the routing's integers (chosen experts, mask, positions)";
  case Role::Mask:
    return "the one-hot expert mask";
  case Role::Logits:
    return "the chosen router logits";
  case Role::Raw:
  case Role::Weights:
  case Role::Masked:
  case Role::Router:
    return "the routing weights";
  case Role::Unused:
    return "the chosen scores a sigmoid router does not weigh by";
  case Role::Norm:
    return "the routing weights' sum";
  case Role::Rows:
    return "rows gathered at the routed tokens";
  case Role::Hidden:
    return "an expert's hidden values";
  case Role::Output:
    return "the experts' weighted outputs";
  case Role::Zero:
    return "zeros";
  }
  return "";
}

bool isMove(StringRef op) {
  return llvm::is_contained(
      {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
       "Expand", "Tile", "Gather", "GatherND", "GatherElements", "Slice",
       "Split", "SplitToSequence", "SequenceAt", "Concat", "Cast", "CastLike"},
      op);
}

bool isIntegerOp(StringRef op) {
  return llvm::is_contained({"OneHot",      "NonZero",   "Equal",
                             "Greater",     "Less",      "GreaterOrEqual",
                             "LessOrEqual", "Not",       "And",
                             "Or",          "Xor",       "Range",
                             "ArgMax",      "ArgMin",    "ReduceMax",
                             "ReduceMin",   "ReduceSum", "ReduceProd",
                             "Add",         "Sub",       "Mul",
                             "Div",         "Mod",       "Neg",
                             "Abs",         "Where",     "CumSum",
                             "Min",         "Max"},
                            op);
}

/// Elementwise ops an expert applies between its matmuls (activations,
/// clamps, biases, gates).
bool isElementwise(StringRef op) {
  return llvm::is_contained(
      {"Add",  "Sub",  "Mul",   "Div",       "Sigmoid",  "Tanh",
       "Relu", "Clip", "Pow",   "Neg",       "Exp",      "Erf",
       "Min",  "Max",  "Silu",  "Swish",     "Softplus", "Gelu",
       "Sqrt", "Abs",  "Where", "LeakyRelu", "Elu",      "HardSigmoid"},
      op);
}

bool isFloatCast(const GraphIndex &g, const onnx::NodeProto &cast) {
  if (cast.op_type() != "Cast")
    return false;
  int64_t to = g.intAttr(cast, "to", 0);
  return llvm::is_contained(
      {onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16,
       onnx::TensorProto::BFLOAT16, onnx::TensorProto::DOUBLE},
      to);
}

/// A ConstantOfShape filling zeros (its default), or ints.
std::optional<Role> constantFill(const onnx::NodeProto &node) {
  for (const auto &a : node.attribute()) {
    if (a.name() != "value" || !a.has_t())
      continue;
    const onnx::TensorProto &t = a.t();
    if (t.data_type() == onnx::TensorProto::INT64 ||
        t.data_type() == onnx::TensorProto::INT32 ||
        t.data_type() == onnx::TensorProto::BOOL)
      return Role::Index;
    auto v = scalarValue<double>(t);
    return v && *v == 0.0 ? std::optional<Role>(Role::Zero) : std::nullopt;
  }
  return Role::Zero;
}

/// True when `value`, from outside the region, is zeros: a ConstantOfShape
/// of zeros or a constant tensor of zeros, through views and casts.
bool outsideZero(const GraphIndex &g, StringRef value) {
  const onnx::NodeProto *n = g.producerOf(value);
  while (n && llvm::is_contained({"Expand", "Cast", "CastLike", "Reshape",
                                  "Identity", "Unsqueeze"},
                                 n->op_type())) {
    value = inputOf(*n, 0);
    n = g.producerOf(value);
  }
  if (n && n->op_type() == "ConstantOfShape")
    return constantFill(*n) == Role::Zero;
  const onnx::TensorProto *t = constantTensor(g, value);
  if (!t)
    return false;
  // Every element zero: a typed field or raw bytes all zero.
  if (!t->raw_data().empty())
    return llvm::all_of(t->raw_data(), [](char c) { return c == 0; });
  return llvm::all_of(t->float_data(), [](float v) { return v == 0; }) &&
         llvm::all_of(t->double_data(), [](double v) { return v == 0; });
}

} // namespace

std::optional<std::pair<int, std::string>>
moe::uncheckedRegionNode(const GraphIndex &g, const MoEMatch &b, int topK) {
  llvm::StringMap<Role> role;
  auto roleOf = [&](StringRef v) -> std::optional<Role> {
    auto it = role.find(v);
    return it == role.end() ? std::nullopt : std::optional<Role>(it->second);
  };
  // The values whose readers MoESigmoidRouter.cpp checked: the region's
  // ancestors of the weights it matched.
  llvm::DenseSet<int> routerNodes;
  if (b.isSigmoid) {
    SmallVector<std::string> work{b.sigmoid.weights};
    while (!work.empty()) {
      std::string v = work.pop_back_val();
      auto it = g.producer.find(v);
      if (it == g.producer.end() || it->second == topK ||
          !b.nodes.count(it->second) || !routerNodes.insert(it->second).second)
        continue;
      for (const std::string &in : g.graph.node(it->second).input())
        work.push_back(in);
    }
  }

  const onnx::NodeProto &top = g.graph.node(topK);
  role[outputOf(top, 0)] = b.isSigmoid      ? Role::Unused
                           : b.softmaxAfter ? Role::Logits
                                            : Role::Raw;
  role[outputOf(top, 1)] = Role::Index;

  SmallVector<int> order(b.nodes.begin(), b.nodes.end());
  llvm::sort(order);
  // The nodes computing hidden values, checked to lie inside an expert.
  SmallVector<int> expertSide;
  for (int i : order) {
    if (i <= topK) // the TopK, a sigmoid router's group choice before it
      continue;
    const onnx::NodeProto &node = g.graph.node(i);
    if (node.domain() != "" && node.domain() != "ai.onnx")
      return std::make_pair(i, "it is of the domain '" + node.domain() +
                                   "', which rp-import cannot check");
    StringRef op = node.op_type();
    SmallVector<std::optional<Role>> in;
    for (const std::string &v : node.input())
      in.push_back(v.empty() ? std::nullopt : roleOf(v));
    auto has = [&](Role r) {
      return llvm::any_of(in, [&](auto x) { return x == r; });
    };
    auto only = [&](std::initializer_list<Role> rs) {
      return llvm::all_of(
          in, [&](auto x) { return !x || llvm::is_contained(rs, *x); });
    };
    std::optional<Role> out;
    // The first region role among the inputs, for the message.
    Role seen = Role::Index;
    for (auto r : in)
      if (r) {
        seen = *r;
        break;
      }
    if (routerNodes.count(i)) {
      out =
          outputOf(node, 0) == b.sigmoid.weights ? Role::Weights : Role::Router;
    } else if (op == "Shape" || op == "Size") {
      out = Role::Index;
    } else if (op == "ConstantOfShape") {
      out = constantFill(node);
    } else if (isMove(op)) {
      // Data is input 0 (Concat: every input); the rest index or shape it.
      std::optional<Role> data = in.empty() ? std::nullopt : in[0];
      if (op == "Concat") {
        // (Shapes are concatenated with constants.)
        bool mixed = llvm::any_of(in, [&](auto r) { return r && *r != seen; });
        if (mixed || (seen != Role::Index &&
                      llvm::any_of(in, [](auto r) { return !r; })))
          return std::make_pair(i, std::string("it concatenates ") +
                                       describe(seen) + " with other values");
        data = seen;
      }
      const onnx::TensorProto *c =
          data ? nullptr : constantTensor(g, inputOf(node, 0));
      if (!data && outsideZero(g, inputOf(node, 0)))
        out = Role::Zero;
      else if (c && c->data_type() != onnx::TensorProto::FLOAT &&
               c->data_type() != onnx::TensorProto::FLOAT16 &&
               c->data_type() != onnx::TensorProto::BFLOAT16 &&
               c->data_type() != onnx::TensorProto::DOUBLE)
        out = Role::Index; // an integer constant at routed positions
      else if (!data)
        out = Role::Rows; // outside values at routed positions
      else if (*data == Role::Index && isFloatCast(g, node))
        out = Role::Mask;
      else if (*data == Role::Mask && op == "Cast" && !isFloatCast(g, node))
        out = Role::Index;
      else if (*data == Role::Raw && (op == "Cast" || op == "CastLike"))
        out = Role::Raw;
      else if (*data == Role::Raw || *data == Role::Masked)
        out = Role::Weights; // a view of the weights, no longer summed
      else
        out = *data;
    } else if (only({Role::Index})) {
      if (!isIntegerOp(op))
        return std::make_pair(i, std::string("it computes ") + op.str() +
                                     " of the routing's integers");
      out = Role::Index;
    } else if (op == "Softmax" && b.softmaxAfter && in.size() == 1 &&
               in[0] == Role::Logits) {
      out = Role::Weights;
    } else if ((op == "ReduceSum" || op == "ReduceL1") &&
               inputOf(node, 0) == outputOf(top, 0) && in[0] == Role::Raw) {
      out = Role::Norm; // the matcher's `normalize` (it refuses other norms)
    } else if (op == "Div" && in.size() == 2 &&
               (in[0] == Role::Raw || in[0] == Role::Weights) &&
               in[1] == Role::Norm) {
      out = Role::Weights;
    } else if (op == "Mul" && in.size() == 2 && has(Role::Mask) &&
               (has(Role::Raw) || has(Role::Weights))) {
      out = Role::Masked;
    } else if (op == "ReduceSum" && in[0] == Role::Masked) {
      out = Role::Weights;
    } else if (op == "Mul" && in.size() == 2 &&
               (has(Role::Raw) || has(Role::Weights)) &&
               (b.weighing.count(i) ||
                b.expertOutputs.count(inputOf(node, 0)) ||
                b.expertOutputs.count(inputOf(node, 1)))) {
      // A recognised expert's output (or the batched experts' rows the
      // matcher checked) weighted by the routing weights.
      out = Role::Output;
    } else if ((op == "MatMul" || op == "Gemm") &&
               (has(Role::Rows) || has(Role::Hidden)) &&
               only({Role::Rows, Role::Hidden})) {
      out = Role::Hidden;
      expertSide.push_back(i);
    } else if (isElementwise(op) && has(Role::Hidden) &&
               only({Role::Hidden, Role::Rows})) {
      out = Role::Hidden;
      expertSide.push_back(i);
    } else if (op == "Add" && in.size() == 2 && has(Role::Output) &&
               llvm::all_of(llvm::seq(0, 2), [&](int k) {
                 return in[k] == Role::Output || in[k] == Role::Zero ||
                        (!in[k] && outsideZero(g, inputOf(node, k)));
               })) {
      out = Role::Output;
    } else if ((op == "ScatterElements" || op == "ScatterND") &&
               in.size() == 3 && in[2] == Role::Output &&
               (in[0] == Role::Output || in[0] == Role::Zero ||
                (!in[0] && outsideZero(g, inputOf(node, 0)))) &&
               (in[1] == Role::Index)) {
      out = Role::Output;
    } else if (op == "ReduceSum" && in[0] == Role::Output) {
      out = Role::Output; // the batched experts' sum over the k slots
    }
    if (!out) {
      std::string what = describe(seen);
      for (auto r : in)
        if (r && describe(*r) != what) {
          what += std::string(" and ") + describe(*r);
          break;
        }
      for (auto [k, r] : llvm::enumerate(in))
        if (!r && !inputOf(node, k).empty()) {
          what += " and '" + inputOf(node, k) +
                  "' from outside the block (not an expert's output)";
          break;
        }
      return std::make_pair(i, "it computes " + op.str() + " of " + what);
    }
    for (const std::string &o : node.output())
      if (!o.empty())
        role[o] = *out;
  }
  // Hidden values are an expert's only when they lead to an output the
  // matcher recognised.
  llvm::DenseSet<int> inside;
  SmallVector<std::string> work;
  for (const auto &e : b.expertOutputs)
    work.push_back(e.getKey().str());
  for (int i : b.weighing)
    for (const std::string &v : g.graph.node(i).input())
      work.push_back(v);
  while (!work.empty()) {
    std::string v = work.pop_back_val();
    auto it = g.producer.find(v);
    if (it == g.producer.end() || !b.nodes.count(it->second) ||
        !inside.insert(it->second).second)
      continue;
    for (const std::string &u : g.graph.node(it->second).input())
      work.push_back(u);
  }
  for (int i : expertSide)
    if (!inside.count(i))
      return std::make_pair(
          i, "it computes " + g.graph.node(i).op_type() +
                 " of rows gathered at the routed tokens outside any expert "
                 "the matcher recognised");
  return std::nullopt;
}
