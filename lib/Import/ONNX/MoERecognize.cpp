//===- MoERecognize.cpp - the MoE stage of the ONNX importer --------------===//
//
// Runs before any node is imported: each TopK starts a mixture-of-experts
// block, which MoEBlocks.cpp matches whole (router and experts) where it
// can, and which becomes one node of the private domain kMoEDomain. A TopK
// whose router is of no form matched whole still makes a block when
// transformers 5's batched_mm experts (MoERouted.cpp) or its eager loop
// (MoERoutedLoop.cpp) read what it chose:
// then only the experts are replaced and the router is imported op by op.
// Otherwise the whole-block matcher's error stands.
//
//===----------------------------------------------------------------------===//

#include "MoEBlocks.h"
#include "MoEMatch.h"
#include "MoERouted.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

static void setInt(onnx::NodeProto &node, StringRef name, int64_t v) {
  auto *a = node.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

static void setFloat(onnx::NodeProto &node, StringRef name, float v) {
  auto *a = node.add_attribute();
  a->set_name(name.str());
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

/// The replacement of a block matched whole (MoEBlocks.h documents its
/// inputs and attributes).
static onnx::NodeProto wholeBlockNode(MoEMatch &b, std::string name) {
  onnx::NodeProto moe;
  moe.set_domain(kMoEDomain.str());
  moe.set_op_type("MoE");
  moe.set_name(std::move(name));
  moe.add_input(b.x);
  // A sigmoid router's weights are read from its scores, not the logits.
  moe.add_input(b.isSigmoid ? b.sigmoid.scores : b.logits);
  if (b.stacked) {
    moe.add_input(b.experts[0].gate);
    if (b.split)
      moe.add_input(b.experts[0].up);
    moe.add_input(b.experts[0].down);
    if (b.oss) {
      moe.add_input(b.oss->gateUpBias);
      moe.add_input(b.oss->downBias);
    }
  } else {
    for (const Expert &e : b.experts)
      moe.add_input(e.gate);
    for (const Expert &e : b.experts)
      moe.add_input(e.up);
    for (const Expert &e : b.experts)
      moe.add_input(e.down);
  }
  if (b.isSigmoid)
    moe.add_input(b.sigmoid.choice);
  moe.add_output(b.output);
  if (b.isSigmoid) {
    const SigmoidRouter &r = b.sigmoid;
    setInt(moe, "sigmoid", 1);
    setInt(moe, "groups", r.groups);
    setInt(moe, "group_top", r.groupTop);
    setInt(moe, "topk_group", r.topkGroup);
    setFloat(moe, "fill", r.fill);
    setFloat(moe, "eps", r.eps);
    setFloat(moe, "scale", r.scale);
    b.normalize = r.normalize;
  }
  setInt(moe, "top_k", b.topK);
  setInt(moe, "normalize", b.normalize);
  if (b.softmaxAfter)
    setInt(moe, "softmax_after", 1);
  if (b.stacked) {
    setInt(moe, "stacked", 1);
    setInt(moe, "gate_first", b.gateFirst);
    if (b.split) {
      setInt(moe, "split", 1);
      setInt(moe, "down_x_at_w", b.downXAtW);
    }
  }
  if (b.oss) {
    setInt(moe, "oss", 1);
    setInt(moe, "interleaved", b.oss->interleaved);
    setFloat(moe, "alpha", b.oss->alpha);
    setFloat(moe, "limit", b.oss->limit);
  }
  return moe;
}

/// The replacement of batched_mm experts behind a router imported op by op:
/// inputs x, the weights, the two stacks, the chosen experts.
static onnx::NodeProto routedNode(const RoutedExperts &r, std::string name) {
  onnx::NodeProto moe;
  moe.set_domain(kMoEDomain.str());
  moe.set_op_type("MoE");
  moe.set_name(std::move(name));
  for (const std::string *in :
       {&r.x, &r.weights, &r.experts.gateUp, &r.experts.down, &r.ids})
    moe.add_input(*in);
  moe.add_output(r.output);
  setInt(moe, "routed", 1);
  setInt(moe, "stacked", 1);
  setInt(moe, "gate_first", r.experts.gateFirst);
  setInt(moe, "top_k", r.topK);
  return moe;
}

/// The two replacements of experts with another activation (MoERouted.h):
/// part 1 (inputs x, the chosen experts, W13; outputs the rows times W13,
/// the dispatch's positions and counts) and part 2 (inputs the activation's
/// rows, W2, the positions, the counts, the weights; output the block's).
static std::pair<onnx::NodeProto, onnx::NodeProto>
splitNodes(const SplitExperts &r, const std::string &name) {
  onnx::NodeProto up, down;
  for (onnx::NodeProto *n : {&up, &down}) {
    n->set_domain(kMoEDomain.str());
    n->set_op_type("MoE");
    setInt(*n, "top_k", r.topK);
    if (r.xAtW)
      setInt(*n, "x_at_w", 1);
    if (r.routedExperts)
      setInt(*n, "routed_experts", r.routedExperts);
  }
  up.set_name(name + "/up");
  down.set_name(name + "/down");
  const std::string positions = r.upValue + "/positions",
                    counts = r.upValue + "/counts";
  for (const std::string *in : {&r.x, &r.ids, &r.gateUp})
    up.add_input(*in);
  for (const std::string *out : {&r.upValue, &positions, &counts})
    up.add_output(*out);
  setInt(up, "part", 1);
  for (const std::string *in :
       {&r.hidden, &r.down, &positions, &counts, &r.weights})
    down.add_input(*in);
  // Identity experts: part 2 adds each token's row times its identity
  // slots' weights.
  if (r.routedExperts) {
    down.add_input(r.x);
    down.add_input(r.ids);
  }
  down.add_output(r.output);
  setInt(down, "part", 2);
  return {up, down};
}

/// The values computed from node `from`'s outputs.
static llvm::StringSet<> downstream(const GraphIndex &g, int from) {
  llvm::StringSet<> reach;
  for (const std::string &o : g.graph.node(from).output())
    reach.insert(o);
  for (int i = from + 1, n = g.graph.node_size(); i < n; ++i) {
    const onnx::NodeProto &node = g.graph.node(i);
    if (llvm::any_of(node.input(),
                     [&](const std::string &in) { return reach.count(in); }))
      for (const std::string &o : node.output())
        reach.insert(o);
  }
  return reach;
}

/// The index of the node that writes `value`, -1 if none.
static int producerIndex(const onnx::GraphProto &graph, StringRef value) {
  for (auto [i, node] : llvm::enumerate(graph.node()))
    if (llvm::is_contained(node.output(), value))
      return i;
  return -1;
}

/// Replaces every batched_mm expert block, and every eager experts loop
/// (MoERoutedLoop.cpp), whose chosen experts are computed from the TopK
/// writing `indices` by routed MoE nodes. True when the TopK's choices
/// reach experts so replaced (now or in an earlier round: a group-limited
/// router's first TopK reaches the same experts as its last). `why` says
/// why an eager loop that reads them does not map (experts left out).
static bool replaceRoutedExperts(onnx::GraphProto &graph, StringRef indices,
                                 std::string &why) {
  bool reached = false;
  for (int count = 0;; ++count) {
    GraphIndex g(graph);
    int topK = producerIndex(graph, indices);
    llvm::StringSet<> reach = downstream(g, topK);
    std::optional<RoutedExperts> r;
    std::optional<SplitExperts> s;
    for (int i = topK + 1, n = graph.node_size(); i < n && !r && !s; ++i) {
      const onnx::NodeProto &node = graph.node(i);
      if (node.domain() == kMoEDomain &&
          llvm::any_of(node.input(),
                       [&](const std::string &in) { return reach.count(in); }))
        reached = true;
      // transformers 5's eager loop (TorchScript) one-hot encodes the
      // chosen experts.
      if (node.op_type() == "OneHot" && reach.count(inputOf(node, 0))) {
        s = matchLoopExperts(g, i, why);
        continue;
      }
      if (node.op_type() != "Mul")
        continue;
      if ((r = matchRoutedExperts(g, i)) && !reach.count(r->ids))
        r.reset();
      if (!r && (s = matchSplitExperts(g, i)) && !reach.count(s->ids))
        s.reset();
    }
    if (!r && !s)
      return reached;
    std::string name = graph.node(topK).name();
    name = (name.empty() ? "moe" : name) + "/experts_" + std::to_string(count);
    if (r) {
      replaceNodes(graph, r->nodes, r->last, routedNode(*r, name));
    } else {
      auto [up, down] = splitNodes(*s, name);
      replaceNodes(
          graph, s->nodes,
          {std::make_pair(s->upAt, up), std::make_pair(s->last, down)});
    }
    reached = true;
  }
}

/// The op that reads the TopK's indices as an expert block reads them: a
/// OneHot, NonZero, Gather or GatherND, through casts and reshapes; "" when
/// none does. A TopK whose indices only build a mask (ScatterElements,
/// GatherElements, comparisons: a sparse attention's choice of keys,
/// DeepSeek-V3.2's indexer) is no mixture-of-experts block and is imported
/// op by op.
static std::string expertReader(const GraphIndex &g, StringRef indices) {
  SmallVector<std::string> work{indices.str()};
  llvm::StringSet<> seen;
  while (!work.empty()) {
    std::string v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (int i : g.consumers.lookup(v)) {
      const onnx::NodeProto &reader = g.graph.node(i);
      const std::string &op = reader.op_type();
      if (llvm::is_contained({"OneHot", "NonZero", "Gather", "GatherND"}, op))
        return op;
      // (A Where passes the indices on: Zaya's router replaces its
      // sentinel expert's.)
      if (llvm::is_contained({"Cast", "Reshape", "Unsqueeze", "Squeeze",
                              "Expand", "Identity", "Flatten", "Concat",
                              "Transpose", "Where"},
                             op))
        work.push_back(outputOf(reader, 0));
    }
  }
  return "";
}

LogicalResult mlir::rp::onnx_import::recognizeMoEBlocks(onnx::GraphProto &graph,
                                                        Location fileLoc) {
  for (const auto &node : graph.node())
    if (node.domain() == kMoEDomain)
      return emitError(fileLoc)
             << "node '" << node.name() << "' is in the domain '" << kMoEDomain
             << "', which rp-import keeps for itself";
  // The TopKs left to the op-by-op import (their indices' names).
  llvm::StringSet<> opByOp;
  for (int round = 0;; ++round) {
    GraphIndex g(graph);
    int topKIndex = -1;
    for (auto [i, node] : llvm::enumerate(graph.node())) {
      if (node.op_type() == "TopK" &&
          (node.domain().empty() || node.domain() == "ai.onnx") &&
          !opByOp.count(outputOf(node, 1))) {
        topKIndex = i;
        break;
      }
    }
    if (topKIndex < 0)
      break;
    // The whole-block matcher's error is reported only when no routed
    // experts read the TopK's choices either.
    SmallVector<std::pair<Location, std::string>> errors;
    FailureOr<MoEMatch> b = failure();
    Matcher matcher(g, fileLoc);
    {
      ScopedDiagnosticHandler keep(fileLoc.getContext(), [&](Diagnostic &d) {
        errors.emplace_back(d.getLocation(), d.str());
        return success();
      });
      b = matcher.match(topKIndex);
    }
    const onnx::NodeProto &topK = graph.node(topKIndex);
    if (failed(b)) {
      std::string indices = outputOf(topK, 1);
      std::string reader = indices.empty() ? "" : expertReader(g, indices);
      // A TopK of a router form the matcher knows keeps its error even
      // when no expert reads its indices (a group-limited router's first
      // TopK, whose groups only make a mask).
      std::string loopWhy;
      if (!indices.empty() && (replaceRoutedExperts(graph, indices, loopWhy) ||
                               (reader.empty() && !matcher.knownRouter))) {
        opByOp.insert(indices);
        continue;
      }
      for (auto &[loc, message] : errors) {
        InFlightDiagnostic diag = emitError(loc) << message;
        if (!loopWhy.empty())
          diag << "; nor do transformers 5's eager experts map: " << loopWhy;
        if (reader == "GatherND")
          diag << "; nor do transformers 5's batched_mm experts read its "
                  "chosen experts (both stacks gathered at them, the tokens "
                  "repeated per slot, the weighted rows summed over the "
                  "slots), which rp maps behind any router it imports op by "
                  "op";
      }
      return failure();
    }
    onnx::NodeProto moe =
        wholeBlockNode(*b, topK.name().empty() ? "moe_" + std::to_string(round)
                                               : topK.name() + "/moe");
    // Nodes that only fed the replaced ones (the baked-in token gathers,
    // the experts' own matmuls) are dropped with them.
    replaceNodes(graph, b->nodes, b->last, moe);
  }
  // A router that picks its experts by ArgMax (PhiMoE's sparsemixer, one
  // expert at a time) has no TopK, nor one that looks them up
  // (DeepSeek-V4's hash layers: a constant table gathered at the token
  // ids): the experts its choices reach map the same way, an eager loop
  // found from the OneHot that encodes them. Any other OneHot or NonZero
  // stays an error of its own.
  for (StringRef start : {"ArgMax", "OneHot"}) {
    llvm::StringSet<> done;
    for (;;) {
      auto node = llvm::find_if(graph.node(), [&](const onnx::NodeProto &n) {
        return n.op_type() == start &&
               (n.domain().empty() || n.domain() == "ai.onnx") &&
               !done.count(start == "OneHot" ? inputOf(n, 0) : outputOf(n, 0));
      });
      if (node == graph.node().end())
        break;
      // (A copy: the replacement rewrites the graph's nodes.) From a
      // OneHot, the experts are read from the value it encodes.
      std::string chosen =
          start == "OneHot" ? inputOf(*node, 0) : outputOf(*node, 0);
      std::string why;
      done.insert(chosen);
      if (producerIndex(graph, chosen) >= 0)
        replaceRoutedExperts(graph, chosen, why);
    }
  }
  return success();
}
