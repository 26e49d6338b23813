//===- MoEBlocks.cpp - mixture-of-experts blocks of an ONNX graph ---------===//
//
// An exported mixture-of-experts block is not a fixed sequence of ONNX ops:
// TorchScript unrolls the expert loop, bakes the example input's token lists
// into constants (`top_x.tolist()` in transformers' Mixtral) and leaves out
// experts no example token reached; the routing goes through TopK, OneHot,
// NonZero and ScatterElements, whose shapes depend on the data. rp's static
// shapes cannot import those ops one by one, so this stage, run on the
// graph before any node is imported (MoERecognize.cpp drives it), finds
// each block by what it must compute and replaces its routing-dependent
// nodes by one node of a private domain, which the importer maps to the
// rp.moe ops (importMoENode). This file matches a block whole, router and
// experts, from its TopK (docs/moe.md):
//
//   logits = MatMul(x, W_router)          (or Gemm; stays in the graph)
//   p      = Softmax(logits), maybe Cast
//   w, e   = TopK(p, k)                   (largest, last axis)
//   w      = w / ReduceSum(w)             (optional: `normalize`)
//   or the top-k first (GraniteMoE, Cohere2-MoE, Aria, GPT-OSS):
//   v, e   = TopK(logits, k);  w = Softmax(v)   (`softmax_after`)
//   one expert per OneHot class c: a Gather of the one-hot mask at c, and a
//   Mul of the routing weights with W2_c(silu(W1_c x_c) * W3_c x_c), the
//   three W initializers (nn.Linear layout, through Transpose or not);
//   stacked experts (transformers 5), GPT-OSS's (MoEOss.cpp) and DBRX's
//   three flat stacks (MoESplitStacks.cpp) alike; DBRX normalises by the
//   L1 norm of the chosen softmax scores (ReduceL1), their sum
//
// and the block ends where every value that depends on TopK has been used
// except one (the combined [T, H] output). DeepSeek-V3's router (sigmoid
// scores, a correction bias, group-limited top-k) is matched from its
// first TopK by MoESigmoidRouter.cpp; the block then starts at the TopK
// that picks the experts. A block of no such form is tried as batched_mm
// experts behind a router imported op by op (MoERouted.cpp); anything else
// is refused with an error naming the node: rp never guesses at routing it
// did not check.
//
//===----------------------------------------------------------------------===//

#include "MoEBatched.h"
#include "MoEMatch.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <map>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

std::optional<Expert> Matcher::matchExpert(const onnx::NodeProto &down) const {
  std::string w2 = g.linearWeight(down);
  const onnx::NodeProto *h = g.producerOf(inputOf(down, 0));
  if (w2.empty() || !h || h->op_type() != "Mul")
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::string a = siluInput(g.producerOf(inputOf(*h, i)));
    const onnx::NodeProto *gate = a.empty() ? nullptr : g.producerOf(a);
    const onnx::NodeProto *up = g.producerOf(inputOf(*h, 1 - i));
    if (!gate || !up)
      continue;
    std::string w1 = g.linearWeight(*gate), w3 = g.linearWeight(*up);
    if (!w1.empty() && !w3.empty() && inputOf(*gate, 0) == inputOf(*up, 0))
      return Expert{w1, w3, w2};
  }
  return std::nullopt;
}

std::optional<Expert>
Matcher::matchStackedExpert(const onnx::NodeProto &down) const {
  auto [w2, index] = g.stackedWeight(down);
  const onnx::NodeProto *h = g.producerOf(inputOf(down, 0));
  if (w2.empty() || !h || h->op_type() != "Mul")
    return std::nullopt;
  // A Slice of the last axis of a rank-2 value, steps 1.
  auto halfOf = [&](const onnx::NodeProto *s) -> const onnx::NodeProto * {
    if (!s || s->op_type() != "Slice" || s->input_size() < 4)
      return nullptr;
    auto axis = g.scalarInt(inputOf(*s, 3));
    if (!axis || (*axis != -1 && *axis != 1) ||
        (s->input_size() > 4 && g.scalarInt(inputOf(*s, 4)) != 1))
      return nullptr;
    return g.producerOf(inputOf(*s, 0));
  };
  for (int i = 0; i < 2; ++i) {
    std::string a = siluInput(g.producerOf(inputOf(*h, i)));
    const onnx::NodeProto *gate = a.empty() ? nullptr : g.producerOf(a);
    const onnx::NodeProto *up = g.producerOf(inputOf(*h, 1 - i));
    const onnx::NodeProto *both = halfOf(gate);
    if (!both || both != halfOf(up))
      continue;
    auto [w13, index13] = g.stackedWeight(*both);
    if (w13.empty() || index13 != index)
      continue;
    // The first half starts at 0 and ends where the second starts (torch's
    // chunk(2) writes both bounds from the width at run time).
    bool gateFirst = g.scalarInt(inputOf(*gate, 1)) == 0 &&
                     inputOf(*gate, 2) == inputOf(*up, 1);
    bool upFirst = g.scalarInt(inputOf(*up, 1)) == 0 &&
                   inputOf(*up, 2) == inputOf(*gate, 1);
    if (gateFirst == upFirst)
      continue;
    Expert e{w13, w13, w2};
    e.stacked = true;
    e.gateFirst = gateFirst;
    e.index = index;
    return e;
  }
  return std::nullopt;
}

std::optional<std::pair<int64_t, int64_t>> moe::hitClass(const GraphIndex &g,
                                                         StringRef index) {
  std::string value = index.str();
  const onnx::NodeProto *node = g.producerOf(value);
  // `expert_hit[i][0]`: through a Gather at 0 and the reshapes around it.
  while (node && (llvm::is_contained(
                      {"Squeeze", "Reshape", "Unsqueeze", "Cast", "Identity"},
                      node->op_type()) ||
                  (node->op_type() == "Gather" &&
                   g.scalarInt(inputOf(*node, 1)) == 0))) {
    value = inputOf(*node, 0);
    node = g.producerOf(value);
  }
  if (!node || node->op_type() != "Split")
    return std::nullopt;
  const onnx::NodeProto *nonZero = g.producerOf(inputOf(*node, 0));
  if (nonZero && nonZero->op_type() == "Transpose")
    nonZero = g.producerOf(inputOf(*nonZero, 0));
  if (!nonZero || nonZero->op_type() != "NonZero")
    return std::nullopt;
  for (int i = 0; i < node->output_size(); ++i)
    if (node->output(i) == value)
      return std::make_pair(int64_t(i), int64_t(node->output_size()));
  return std::nullopt;
}

bool Matcher::softmaxAfterTopK(int topKIndex) const {
  const onnx::NodeProto &topK = g.graph.node(topKIndex);
  const onnx::NodeProto *router = g.sourceOf(inputOf(topK, 0));
  if (!router || (router->op_type() != "MatMul" && router->op_type() != "Gemm"))
    return false;
  // The router logits are [T, E]: the last axis is 1 or -1.
  auto lastAxis = [&](const onnx::NodeProto &node, int64_t dflt) {
    int64_t axis = g.intAttr(node, "axis", dflt);
    return axis == -1 || axis == 1;
  };
  // `softmax(v, dtype=float)` reads the values through a Cast.
  std::string values = outputOf(topK, 0);
  for (;;) {
    auto readers = g.consumers.lookup(values);
    if (values.empty() || g.outputs.count(values) || readers.size() != 1)
      return false;
    const onnx::NodeProto &reader = g.graph.node(readers[0]);
    if (reader.op_type() == "Cast" || reader.op_type() == "Identity") {
      values = outputOf(reader, 0);
      continue;
    }
    if (reader.op_type() != "Softmax" || !lastAxis(reader, -1))
      return false;
    break;
  }
  return lastAxis(topK, -1);
}

FailureOr<MoEMatch> Matcher::match(int topKIndex) {
  MoEMatch b;
  const onnx::NodeProto *softmax =
      g.sourceOf(inputOf(g.graph.node(topKIndex), 0));
  if (softmaxAfterTopK(topKIndex)) {
    b.softmaxAfter = true;
  } else if (!softmax || softmax->op_type() != "Softmax") {
    // DeepSeek-V3's routing reaches TopK through sigmoid scores; its first
    // TopKs choose groups, the block's region starts at the one that picks
    // experts.
    std::string why;
    int at = topKIndex;
    if (!matchSigmoidRouter(g, topKIndex, b.sigmoid, why, at)) {
      knownRouter = !why.empty();
      if (!why.empty())
        return error(g.graph.node(at), at) << why;
      return error(g.graph.node(topKIndex), topKIndex)
             << "its scores are not a Softmax of router logits, nor router "
                "logits whose k values only a Softmax reads (the routings "
                "rp maps are softmax then top-k, as Mixtral and Qwen-MoE "
                "route, top-k then softmax, as GraniteMoE routes, or "
                "sigmoid scores plus a correction bias, as DeepSeek-V3 "
                "routes); trace the model with rp.trace, or route that way";
    }
    b.isSigmoid = true;
    topKIndex = b.sigmoid.expertTopK;
  }
  // (A softmax router whose choices reach no expert is imported op by op:
  // JetMoE's experts picked by a comparison with every class, as
  // rp.onnx_patches writes them.)
  knownRouter = b.isSigmoid;
  const onnx::NodeProto &topK = g.graph.node(topKIndex);
  auto k =
      topK.input_size() == 2 ? g.scalarInt(inputOf(topK, 1)) : std::nullopt;
  if (!k || *k < 1)
    return error(topK, topKIndex)
           << "its k is not a positive constant; export with a fixed "
              "num_experts_per_tok";
  b.topK = *k;
  if (g.intAttr(topK, "largest", 1) != 1)
    return error(topK, topKIndex)
           << "it takes the smallest scores (largest = 0); experts are "
              "chosen by the largest";
  b.logits = b.isSigmoid      ? inputOf(*g.producerOf(b.sigmoid.scores), 0)
             : b.softmaxAfter ? inputOf(topK, 0)
                              : inputOf(*softmax, 0);
  const onnx::NodeProto *router = g.sourceOf(b.logits);
  if (!router || (router->op_type() != "MatMul" && router->op_type() != "Gemm"))
    return error(topK, topKIndex)
           << "the router logits '" << b.logits
           << "' do not come from a MatMul or Gemm of the tokens";
  b.x = inputOf(*router, 0);
  if (b.x.empty() || outputOf(topK, 1).empty())
    return error(topK, topKIndex)
           << "its router or its TopK lacks an input or an output";

  // The region: every node after TopK that reads a value depending on it.
  // It ends where only one such value is still to be read: the output.
  llvm::StringSet<> region;
  std::map<std::string, int64_t> open; // value -> readers not yet seen
  auto produce = [&](const onnx::NodeProto &node) {
    for (const std::string &o : node.output()) {
      if (o.empty())
        continue;
      region.insert(o);
      int64_t readers = g.consumers.lookup(o).size() + g.outputs.count(o);
      if (readers)
        open[o] = readers;
    }
  };
  b.nodes.insert(topKIndex);
  b.nodes.insert(b.sigmoid.nodes.begin(), b.sigmoid.nodes.end());
  produce(topK);
  int end = -1;
  for (int i = topKIndex + 1, n = g.graph.node_size(); i < n; ++i) {
    const onnx::NodeProto &node = g.graph.node(i);
    bool inRegion = false;
    for (const std::string &in : node.input())
      if (region.count(in)) {
        inRegion = true;
        if (--open[in] == 0)
          open.erase(in);
      }
    if (!inRegion)
      continue;
    b.nodes.insert(i);
    produce(node);
    if (open.size() == 1) {
      end = i;
      break;
    }
  }
  if (end < 0 || g.outputs.count(outputOf(topK, 1)))
    return error(topK, topKIndex)
           << "its routing does not end in one combined output (the chosen "
              "experts or weights are used outside the block)";
  b.output = open.begin()->first;
  b.last = end;

  // Normalisation, the expert count (OneHot's depth), the experts in the
  // order of the one-hot classes the block reads, and their outputs.
  SmallVector<int64_t> classes;
  llvm::StringMap<int64_t> classOf; // run-time expert index -> class
  int64_t hit = -1;                 // experts the stacked loop runs over
  std::optional<int64_t> depth;
  llvm::StringSet<> mask; // the one-hot expert mask, permuted or cast
  SmallVector<int> order(b.nodes.begin(), b.nodes.end());
  llvm::sort(order);
  for (int i : order) {
    const onnx::NodeProto &node = g.graph.node(i);
    const std::string &op = node.op_type();
    if (op == "ReduceSum" && inputOf(node, 0) == outputOf(topK, 0))
      b.normalize = true;
    else if (StringRef(op).starts_with("Reduce") &&
             inputOf(node, 0) == outputOf(topK, 0)) {
      // DBRX divides by the p-norm of the chosen weights: for p = 1 of
      // softmax scores (none negative) that is their sum.
      if (op != "ReduceL1" || b.isSigmoid || b.softmaxAfter)
        return error(node, i)
               << "it normalises the chosen weights by " << op
               << " (rp maps their sum, or the L1 norm of softmax scores: "
                  "moe_normalize_expert_weights = 1); trace the model with "
                  "rp.trace";
      b.normalize = true;
    } else if (op == "OneHot") {
      depth = g.scalarInt(inputOf(node, 1));
      mask.insert(outputOf(node, 0));
    } else if ((op == "Transpose" || op == "Cast") &&
               mask.count(inputOf(node, 0))) {
      mask.insert(outputOf(node, 0));
    } else if (op == "Gather" && g.intAttr(node, "axis", 0) == 0 &&
               mask.count(inputOf(node, 0))) {
      // The expert loop's `expert_mask[e]`: one class of the one-hot.
      if (auto c = g.scalarInt(inputOf(node, 1))) {
        classes.push_back(*c);
      } else if (auto c = hitClass(g, inputOf(node, 1))) {
        classes.push_back(c->first);
        classOf[inputOf(node, 1)] = c->first;
        hit = c->second;
      }
    } else if (std::optional<BatchedExpert> e;
               op == "Mul" && !b.batched &&
               (e = matchBatchedExpert(g, node, outputOf(topK, 1), b.x))) {
      // One Mul weighs every (token, slot) pair's expert output; a sigmoid
      // router's weights are the value it matched (nothing in between).
      if (b.isSigmoid &&
          reshapeRoot(g, inputOf(node, 0)) != b.sigmoid.weights &&
          reshapeRoot(g, inputOf(node, 1)) != b.sigmoid.weights)
        return error(node, i)
               << "its experts' outputs are weighted by a value other than "
                  "the routing weights '"
               << b.sigmoid.weights
               << "' (the chosen sigmoid scores, normalised and scaled); "
                  "rp.trace maps the other forms";
      Expert stacked{e->gateUp, e->gateUp, e->down};
      stacked.stacked = b.stacked = b.batched = true;
      stacked.gateFirst = b.gateFirst = e->gateFirst;
      b.weighing.insert(i);
      b.experts.push_back(stacked);
    } else if (std::optional<OssExpert> e;
               op == "Mul" && !b.batched &&
               (e = matchOssBatchedExpert(g, node, outputOf(topK, 1), b.x))) {
      Expert stacked{e->gateUp, e->gateUp, e->down};
      stacked.stacked = b.stacked = b.batched = true;
      b.oss = e;
      b.weighing.insert(i);
      b.experts.push_back(stacked);
    } else if (op == "Mul") {
      for (const std::string &in : node.input()) {
        const onnx::NodeProto *src = g.producerOf(in);
        std::optional<Expert> expert;
        std::optional<OssExpert> oss;
        if (src && looksLikeBiasedExpert(g, in)) {
          // GPT-OSS's eager loop: a biased expert per hit class (MoEOss.h).
          if (!(oss = matchOssLoopExpert(g, in)))
            return error(*src, indexOf(src))
                   << "this expert's output, weighted by the routing, is a "
                      "biased matmul of stacked weights but not GPT-OSS's "
                      "clamped SwiGLU ((clip(up, -limit, limit) + 1) * gate "
                      "* sigmoid(alpha * gate), gate clipped above at limit, "
                      "gate and up the even and odd columns, or the halves, "
                      "of x W13[i] + b13[i]); rp.trace maps the other forms";
          expert = Expert{oss->gateUp, oss->gateUp, oss->down};
          expert->stacked = true;
          expert->index = oss->index;
        } else {
          // DBRX views its expert's rows as [-1, H] before weighting them.
          const onnx::NodeProto *viewed = src && src->op_type() == "Reshape"
                                              ? g.producerOf(inputOf(*src, 0))
                                              : nullptr;
          // (A view of its [n, H] rows as [-1, H], which changes nothing.)
          auto view = viewed ? constantInts(g, inputOf(*src, 1)) : std::nullopt;
          if (viewed && viewed->op_type() == "MatMul" && view &&
              view->size() == 2 && (*view)[0] == -1 &&
              (expert = matchSplitStackedExpert(*viewed)) &&
              (*view)[1] == expert->hidden) {
            src = viewed;
          } else if (expert) {
            continue; // another view: not this form
          } else if (!src || src->op_type() != "MatMul") {
            continue;
          }
          // Experts reading routed tokens have their own matmuls in the
          // region; only a matmul of a product (W2 h) is an output.
          const onnx::NodeProto *h = g.producerOf(inputOf(*src, 0));
          if (!expert && region.count(in) && (!h || h->op_type() != "Mul"))
            continue;
          if (!expert)
            expert = matchExpert(*src);
          if (!expert)
            expert = matchStackedExpert(*src);
          if (!expert)
            expert = matchSplitStackedExpert(*src);
          if (!expert)
            return error(*src, indexOf(src))
                   << "this MatMul's output is weighted by the routing but is "
                      "not a gated SiLU expert (W2(silu(W1 x) * W3 x) with "
                      "nn.Linear weights, slices of stacked [E, 2F, H] "
                      "and [E, H, F] weights, or DBRX's [E, F, H] stacks); "
                      "rp maps SwiGLU experts from ONNX, rp.trace maps the "
                      "other forms";
          // The experts' rows are the router's tokens (through views).
          if (expert->split &&
              reshapeRoot(g, expert->tokens) != reshapeRoot(g, b.x))
            return error(*src, indexOf(src))
                   << "this expert reads rows of '" << expert->tokens
                   << "', not of the router's tokens '" << b.x
                   << "'; rp.trace maps such blocks";
        }
        if (expert->stacked) {
          // Every expert reads the same two stacks (and, GPT-OSS's, the
          // same biases and constants), each at the class its one-hot mask
          // was read at, in class order.
          const Expert *first = b.experts.empty() ? nullptr : &b.experts[0];
          auto c = classOf.find(expert->index);
          if ((first &&
               (!first->stacked || first->gate != expert->gate ||
                first->up != expert->up || first->down != expert->down ||
                first->split != expert->split ||
                first->downXAtW != expert->downXAtW ||
                first->gateFirst != expert->gateFirst ||
                b.oss.has_value() != oss.has_value() ||
                (oss && !oss->sameAs(*b.oss)))) ||
              c == classOf.end() || c->second != (int64_t)b.experts.size())
            return error(*src, indexOf(src))
                   << "this expert's stacked weights are not read at the "
                      "one-hot class of its tokens, or differ from the other "
                      "experts'; rp maps one stack per block read in class "
                      "order, rp.trace maps the other forms";
          b.stacked = true;
          b.gateFirst = expert->gateFirst;
          b.split = expert->split;
          b.downXAtW = expert->downXAtW;
          b.oss = oss;
        }
        b.experts.push_back(*expert);
        b.expertOutputs.insert(in);
      }
    }
  }
  if (b.batched) {
    // Every expert of the stack is there: the batched form gathers them at
    // run time, so no expert can be left out of the graph.
    if (b.experts.size() != 1 || depth)
      return error(topK, topKIndex)
             << "its experts are gathered from stacked weights at the chosen "
                "experts (batched_mm) but also read otherwise; export one "
                "experts implementation per block";
    // The region ends at the weighted [T k, H] rows; the block's output is
    // their sum over each token's k slots: ReduceSum(Reshape(rows, [T, k,
    // H]), axis 1).
    auto only = [&](StringRef v) -> int {
      auto readers = g.consumers.lookup(v);
      return readers.size() == 1 && !g.outputs.count(v) ? readers[0] : -1;
    };
    int reshape = only(b.output);
    int sum = reshape < 0 ? -1 : only(outputOf(g.graph.node(reshape), 0));
    const onnx::NodeProto *shape =
        reshape < 0 ? nullptr : g.producerOf(inputOf(g.graph.node(reshape), 1));
    if (sum < 0 || g.graph.node(reshape).op_type() != "Reshape" || !shape ||
        shape->op_type() != "Concat" || shape->input_size() != 3 ||
        g.scalarInt(inputOf(*shape, 1)) != b.topK ||
        g.graph.node(sum).op_type() != "ReduceSum" ||
        g.intAttr(g.graph.node(sum), "keepdims", 1) != 0 ||
        g.scalarInt(inputOf(g.graph.node(sum), 1)) != 1)
      return error(topK, topKIndex)
             << "its batched_mm experts' weighted rows are not summed over "
                "each token's "
             << b.topK << " slots (ReduceSum of a [T, " << b.topK
             << ", H] reshape on axis 1)";
    b.nodes.insert(reshape);
    b.nodes.insert(sum);
    b.last = sum;
    b.output = outputOf(g.graph.node(sum), 0);
    return checked(b, topKIndex);
  }
  if (!depth)
    return error(topK, topKIndex)
           << "no OneHot with a constant depth (the number of experts) "
              "reads its chosen experts (the experts are none of the forms "
              "docs/moe.md lists); trace the model with rp.trace";
  // The stacked form counts its experts by the stack and may one-hot to one
  // more class (transformers 5's expert-parallel sentinel, never chosen).
  int64_t count = *depth;
  if (b.stacked) {
    count = b.split ? b.experts[0].count
                    : g.initializers.lookup(b.experts[0].gate)->dims(0);
    if (*depth != count && *depth != count + 1)
      return error(topK, topKIndex)
             << "its OneHot has " << *depth << " classes for " << count
             << " stacked experts";
  }
  // The stacked loop runs over the experts the example's routing hit, each
  // iteration the same computation on the stacks at its own hit (checked
  // above); the stacks hold every expert, so the block is the same for any
  // routing even when the example hit only some (`hit` < E). Every
  // iteration must be there.
  int64_t iterations = b.stacked && hit >= 1 && hit <= count ? hit : count;
  SmallVector<int64_t> want =
      llvm::to_vector(llvm::seq<int64_t>(0, iterations));
  if (classes != want || (int64_t)b.experts.size() != iterations ||
      (b.stacked && hit != iterations)) {
    InFlightDiagnostic diag = error(topK, topKIndex)
                              << "the graph holds " << b.experts.size()
                              << " experts of the " << iterations
                              << " it routes to (one-hot classes read:";
    for (int64_t c : classes)
      diag << " " << c;
    diag << "). The exporter leaves out an expert no token of the example "
            "input was routed to: export with a longer input (more tokens) "
            "so every expert gets one, or trace the model with rp.trace";
    return diag;
  }
  return checked(b, topKIndex);
}

FailureOr<MoEMatch> Matcher::checked(MoEMatch &b, int topKIndex) {
  // Every region node is dropped with the block: one whose effect the MoE
  // node does not reproduce is refused rather than lost.
  auto bad = uncheckedRegionNode(g, b, topKIndex);
  if (!bad)
    return b;
  return error(g.graph.node(bad->first), bad->first)
         << bad->second
         << ", which the rp.moe ops replacing the block would not reproduce "
            "(rp-import drops every node of the block's routing); trace the "
            "model with rp.trace, or export the block in a form docs/moe.md "
            "lists";
}
