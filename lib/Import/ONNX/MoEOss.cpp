//===- MoEOss.cpp - GPT-OSS's experts in an ONNX MoE block ----------------===//
//
// transformers' GptOssExperts hold `x @ W` stacks with biases and gate
// their hidden with a clamped SwiGLU:
//
//   gu   = x W13[e] + b13[e]            (W13 [E, H, 2F], b13 [E, 2F])
//   gate = gu[:, 0::2], up = gu[:, 1::2] (interleaved columns)
//   gate = Clip(gate, max = limit);  up = Clip(up, -limit, limit)
//   h    = (up + 1) * (gate * Sigmoid(gate * alpha))
//   y    = h W2[e] + b2[e]              (W2 [E, F, H], b2 [E, H])
//
// The TorchScript exporter writes it once per iteration of the eager
// expert loop, each stack and bias read by a Gather at the loop's expert
// index; the dynamo exporter (batched_mm experts) once, every stack and
// bias gathered at the chosen experts (GatherND) and multiplied per
// (token, slot) pair. Both are matched here from the expert's output, for
// MoEBlocks.cpp; the constants (alpha, limit) and the column layout are
// read from the graph, not assumed.
//
//===----------------------------------------------------------------------===//

#include "MoEOss.h"
#include "MoEBatched.h"

#include <array>
#include <functional>

using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::moe;

namespace {

/// The initializer of the given rank a value gathers one expert's slice
/// of, and the value it is gathered at; empty when it is not one.
using StackOf =
    std::function<std::pair<std::string, std::string>(StringRef, int)>;

/// `x W[i] + b[i]`: the stack, the bias, the index and the input `x`.
struct Biased {
  std::string weight, bias, index, input;
};

} // namespace

/// A one-element constant read as a double: a float or integer Constant or
/// initializer, through the casts and reshapes exporters write around one
/// (TorchScript's Cast of a Cast, dynamo's CastLike).
static std::optional<double> scalarFloat(const GraphIndex &g, StringRef value) {
  std::string v = value.str();
  const onnx::NodeProto *node = g.producerOf(v);
  while (node && llvm::is_contained({"Cast", "CastLike", "Identity", "Reshape",
                                     "Unsqueeze", "Squeeze"},
                                    node->op_type())) {
    v = inputOf(*node, 0);
    node = g.producerOf(v);
  }
  const onnx::TensorProto *t = g.initializers.lookup(v);
  if (node && node->op_type() == "Constant")
    for (const auto &a : node->attribute()) {
      if (a.name() == "value" && a.has_t())
        t = &a.t();
      if (a.name() == "value_float")
        return a.f();
      if (a.name() == "value_int")
        return double(a.i());
    }
  if (!t)
    return std::nullopt;
  if (auto f = scalarValue<double>(*t))
    return f;
  if (auto i = scalarValue<int64_t>(*t))
    return double(*i);
  return std::nullopt;
}

/// `Add(MatMul(x, W[i]), b[i])` at `value`, either operand order, looking
/// through the reshapes the batched form wraps its matmuls in.
static std::optional<Biased> biasedMatmul(const GraphIndex &g, StringRef value,
                                          const StackOf &stackOf,
                                          bool sameIndex = true) {
  const onnx::NodeProto *add = g.producerOf(reshapeRoot(g, value.str()));
  if (!add || add->op_type() != "Add")
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const onnx::NodeProto *mm =
        g.producerOf(reshapeRoot(g, inputOf(*add, side)));
    if (!mm || mm->op_type() != "MatMul")
      continue;
    auto [w, wi] = stackOf(inputOf(*mm, 1), 3);
    auto [b, bi] = stackOf(inputOf(*add, 1 - side), 2);
    if (!w.empty() && !b.empty() && (wi == bi || !sameIndex))
      return Biased{w, b, wi, inputOf(*mm, 0)};
  }
  return std::nullopt;
}

/// The clamped SwiGLU at `value` over the columns of a [rows, 2F] value:
/// that value, the layout, alpha and limit.
static std::optional<OssExpert> clampedSwiGLU(const GraphIndex &g,
                                              StringRef value, int64_t ffn,
                                              std::string &gu) {
  const onnx::NodeProto *h = g.producerOf(reshapeRoot(g, value.str()));
  if (!h || h->op_type() != "Mul")
    return std::nullopt;
  auto clip = [&](StringRef v) -> const onnx::NodeProto * {
    const onnx::NodeProto *c = g.producerOf(v);
    return c && c->op_type() == "Clip" && c->input_size() == 3 ? c : nullptr;
  };
  for (int i = 0; i < 2; ++i) {
    const onnx::NodeProto *plus = g.producerOf(inputOf(*h, i));
    const onnx::NodeProto *glu = g.producerOf(inputOf(*h, 1 - i));
    if (!plus || plus->op_type() != "Add" || !glu || glu->op_type() != "Mul")
      continue;
    // up + 1
    const onnx::NodeProto *upClip = nullptr;
    for (int j = 0; j < 2 && !upClip; ++j)
      if (scalarFloat(g, inputOf(*plus, 1 - j)) == 1.0)
        upClip = clip(inputOf(*plus, j));
    // gate * Sigmoid(gate * alpha)
    const onnx::NodeProto *gateClip = nullptr;
    std::optional<double> alpha;
    for (int j = 0; j < 2 && !gateClip; ++j) {
      const std::string &gate = inputOf(*glu, j);
      const onnx::NodeProto *s = g.producerOf(inputOf(*glu, 1 - j));
      const onnx::NodeProto *m = s && s->op_type() == "Sigmoid"
                                     ? g.producerOf(inputOf(*s, 0))
                                     : nullptr;
      if (!m || m->op_type() != "Mul")
        continue;
      for (int k = 0; k < 2 && !gateClip; ++k)
        if (inputOf(*m, k) == gate &&
            (alpha = scalarFloat(g, inputOf(*m, 1 - k))))
          gateClip = clip(gate);
    }
    if (!upClip || !gateClip || !inputOf(*gateClip, 1).empty())
      continue;
    // The gate clamped above only, the up to [-limit, limit].
    auto limit = scalarFloat(g, inputOf(*gateClip, 2));
    if (!limit || scalarFloat(g, inputOf(*upClip, 2)) != *limit ||
        scalarFloat(g, inputOf(*upClip, 1)) != -*limit)
      continue;
    // Two Slices of the last axis of one value: the even and odd columns,
    // or the halves [0, F) and [F, 2F).
    const onnx::NodeProto *gs = g.producerOf(inputOf(*gateClip, 0));
    const onnx::NodeProto *us = g.producerOf(inputOf(*upClip, 0));
    auto slice =
        [&](const onnx::NodeProto *s) -> std::optional<std::array<int64_t, 3>> {
      if (!s || s->op_type() != "Slice" || s->input_size() < 4)
        return std::nullopt;
      auto axis = g.scalarInt(inputOf(*s, 3));
      auto start = g.scalarInt(inputOf(*s, 1));
      auto end = g.scalarInt(inputOf(*s, 2));
      auto step =
          s->input_size() > 4 ? g.scalarInt(inputOf(*s, 4)) : int64_t(1);
      if (!axis || (*axis != -1 && *axis != 1) || !start || !end || !step)
        return std::nullopt;
      return std::array<int64_t, 3>{*start, *end, *step};
    };
    auto a = slice(gs), b = slice(us);
    if (!a || !b ||
        reshapeRoot(g, inputOf(*gs, 0)) != reshapeRoot(g, inputOf(*us, 0)))
      continue;
    bool interleaved = (*a)[0] == 0 && (*a)[2] == 2 && (*b)[0] == 1 &&
                       (*b)[2] == 2 && (*a)[1] >= 2 * ffn - 1 &&
                       (*b)[1] >= 2 * ffn;
    bool halves = (*a)[0] == 0 && (*a)[1] == ffn && (*a)[2] == 1 &&
                  (*b)[0] == ffn && (*b)[1] >= 2 * ffn && (*b)[2] == 1;
    if (!interleaved && !halves)
      continue;
    gu = inputOf(*gs, 0);
    OssExpert e;
    e.interleaved = interleaved;
    e.alpha = *alpha;
    e.limit = *limit;
    return e;
  }
  return std::nullopt;
}

/// The expert whose output is `value`, its stacks read through `stackOf`.
static std::optional<OssExpert> matchOss(const GraphIndex &g, StringRef value,
                                         const StackOf &stackOf) {
  auto down = biasedMatmul(g, value, stackOf);
  if (!down)
    return std::nullopt;
  const onnx::TensorProto *w2 = g.initializers.lookup(down->weight);
  const onnx::TensorProto *b2 = g.initializers.lookup(down->bias);
  int64_t experts = w2->dims(0), ffn = w2->dims(1), hidden = w2->dims(2);
  std::string gu;
  auto e = clampedSwiGLU(g, down->input, ffn, gu);
  auto up = e ? biasedMatmul(g, gu, stackOf) : std::nullopt;
  if (!up || up->index != down->index)
    return std::nullopt;
  const onnx::TensorProto *w13 = g.initializers.lookup(up->weight);
  const onnx::TensorProto *b13 = g.initializers.lookup(up->bias);
  // [E, H, 2F], [E, 2F], [E, F, H], [E, H].
  if (w13->dims(0) != experts || w13->dims(1) != hidden ||
      w13->dims(2) != 2 * ffn || b13->dims(0) != experts ||
      b13->dims(1) != 2 * ffn || b2->dims(0) != experts ||
      b2->dims(1) != hidden)
    return std::nullopt;
  e->gateUp = up->weight;
  e->gateUpBias = up->bias;
  e->down = down->weight;
  e->downBias = down->bias;
  e->index = down->index;
  e->input = up->input;
  return e;
}

/// `Gather(W, i)` on axis 0 of an initializer of rank `rank`.
static std::pair<std::string, std::string>
loopStack(const GraphIndex &g, StringRef value, int rank) {
  const onnx::NodeProto *n = g.producerOf(value);
  if (!n || n->op_type() != "Gather" || g.intAttr(*n, "axis", 0) != 0)
    return {};
  const onnx::TensorProto *w = g.initializers.lookup(inputOf(*n, 0));
  if (!w || w->dims_size() != rank)
    return {};
  return {inputOf(*n, 0), inputOf(*n, 1)};
}

std::optional<OssExpert> moe::matchOssLoopExpert(const GraphIndex &g,
                                                 StringRef value) {
  return matchOss(g, value,
                  [&](StringRef v, int rank) { return loopStack(g, v, rank); });
}

bool moe::looksLikeBiasedExpert(const GraphIndex &g, StringRef value) {
  // Any index: a bias read at another expert's index is a near miss.
  return biasedMatmul(
             g, value,
             [&](StringRef v, int rank) { return loopStack(g, v, rank); },
             /*sameIndex=*/false)
      .has_value();
}

std::optional<OssExpert>
moe::matchOssBatchedExpert(const GraphIndex &g, const onnx::NodeProto &weighted,
                           StringRef ids, StringRef x) {
  StackOf stackOf = [&](StringRef v, int rank) {
    std::string w = gatheredStack(g, v, ids, rank);
    return std::make_pair(w, w.empty() ? "" : ids.str());
  };
  for (int side = 0; side < 2; ++side) {
    auto e = matchOss(g, inputOf(weighted, side), stackOf);
    // The tokens repeated per slot: `x` through the reshapes.
    if (e && reshapeRoot(g, e->input) == reshapeRoot(g, x.str()))
      return e;
  }
  return std::nullopt;
}
