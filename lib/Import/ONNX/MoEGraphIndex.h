//===- MoEGraphIndex.h - an ONNX graph indexed for MoE matching -*- C++ -*-===//
//
// Private to MoEBlocks.cpp: producers, consumers, initializers and integer
// constants of an ONNX graph's values, and the weight forms an exported
// expert multiplies by, which the mixture-of-experts matcher walks.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEGRAPHINDEX_H
#define RP_LIB_IMPORT_ONNX_MOEGRAPHINDEX_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlir::rp::onnx_import::moe {

using llvm::SmallVector;
using llvm::StringRef;

/// Input or output `i` of a node, "" when it has fewer: a malformed graph
/// fails to match rather than reading past the end.
inline const std::string &inputOf(const onnx::NodeProto &node, int i) {
  static const std::string none;
  return i < node.input_size() ? node.input(i) : none;
}
inline const std::string &outputOf(const onnx::NodeProto &node, int i) {
  static const std::string none;
  return i < node.output_size() ? node.output(i) : none;
}

/// The first element of a tensor stored as `Stored`: its typed field, or
/// its raw bytes when they hold exactly one.
template <typename Stored, typename Field>
std::optional<Stored> firstElement(const onnx::TensorProto &t,
                                   const Field &field) {
  if (field.size())
    return Stored(field.Get(0));
  if (t.raw_data().size() != sizeof(Stored))
    return std::nullopt;
  Stored v;
  std::memcpy(&v, t.raw_data().data(), sizeof(Stored));
  return v;
}

/// The value of a one-element tensor whose type T reads: int64 or int32
/// for an integer T, float or double for a floating-point T (the integer
/// and float constant readers of the MoE matchers, one reader).
template <typename T> std::optional<T> scalarValue(const onnx::TensorProto &t) {
  int64_t count = 1;
  for (int64_t d : t.dims())
    count *= d;
  if (count != 1)
    return std::nullopt;
  auto widened = [](auto v) -> std::optional<T> {
    return v ? std::optional<T>(T(*v)) : std::nullopt;
  };
  if constexpr (std::is_integral_v<T>) {
    if (t.data_type() == onnx::TensorProto::INT64)
      return widened(firstElement<int64_t>(t, t.int64_data()));
    if (t.data_type() == onnx::TensorProto::INT32)
      return widened(firstElement<int32_t>(t, t.int32_data()));
  } else {
    if (t.data_type() == onnx::TensorProto::FLOAT)
      return widened(firstElement<float>(t, t.float_data()));
    if (t.data_type() == onnx::TensorProto::DOUBLE)
      return widened(firstElement<double>(t, t.double_data()));
  }
  return std::nullopt;
}

/// The module a node of a dynamo export comes from (its
/// `pkg.torch.onnx.name_scopes` metadata, a Python list of the scopes from
/// the root to the op: the last but one), "" when it has none. dynamo's
/// node names (`node_topk__1`) do not say where the node is in the model.
/// (The onnx this builds against predates NodeProto's metadata_props, field
/// 9, of StringStringEntryProto: it is read from the unknown fields.)
inline std::string modulePath(const onnx::NodeProto &node) {
  const google::protobuf::UnknownFieldSet &unknown =
      node.GetReflection()->GetUnknownFields(node);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &f = unknown.field(i);
    onnx::StringStringEntryProto p;
    if (f.number() != 9 ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
        !p.ParseFromString(f.length_delimited()) ||
        p.key() != "pkg.torch.onnx.name_scopes")
      continue;
    SmallVector<std::string> scopes;
    StringRef rest = p.value();
    for (;;) {
      size_t open = rest.find('\'');
      if (open == StringRef::npos)
        break;
      size_t close = rest.find('\'', open + 1);
      if (close == StringRef::npos)
        break;
      scopes.push_back(rest.substr(open + 1, close - open - 1).str());
      rest = rest.substr(close + 1);
    }
    if (scopes.size() >= 2)
      return scopes[scopes.size() - 2];
  }
  return "";
}

/// Producers, consumers and integer constants of a graph's values.
struct GraphIndex {
  explicit GraphIndex(const onnx::GraphProto &graph) : graph(graph) {
    for (const auto &t : graph.initializer())
      initializers[t.name()] = &t;
    for (const auto &out : graph.output())
      outputs.insert(out.name());
    for (auto [i, node] : llvm::enumerate(graph.node())) {
      for (const std::string &o : node.output())
        if (!o.empty())
          producer[o] = i;
      for (const std::string &in : node.input())
        if (!in.empty())
          consumers[in].push_back(i);
    }
  }

  const onnx::NodeProto *producerOf(StringRef value) const {
    auto it = producer.find(value);
    return it == producer.end() ? nullptr : &graph.node(it->second);
  }

  /// The producer of `value`, looking through Cast and Identity.
  const onnx::NodeProto *sourceOf(StringRef value) const {
    const onnx::NodeProto *node = producerOf(value);
    while (node && (node->op_type() == "Cast" || node->op_type() == "Identity"))
      node = producerOf(inputOf(*node, 0));
    return node;
  }

  /// A one-element integer tensor held in a Constant node or initializer.
  std::optional<int64_t> scalarInt(StringRef value) const {
    const onnx::TensorProto *t = initializers.lookup(value);
    const onnx::NodeProto *node = producerOf(value);
    // Exporters reshape scalars to [1] and back; the value is the same.
    while (node && llvm::is_contained(
                       {"Reshape", "Unsqueeze", "Squeeze", "Cast", "Identity"},
                       node->op_type())) {
      t = initializers.lookup(inputOf(*node, 0));
      node = producerOf(inputOf(*node, 0));
    }
    if (node && node->op_type() == "Constant")
      for (const auto &a : node->attribute()) {
        if (a.name() == "value" && a.has_t())
          t = &a.t();
        // dynamo writes small integer constants as value_int(s).
        if (a.name() == "value_int")
          return a.i();
        if (a.name() == "value_ints" && a.ints_size() == 1)
          return a.ints(0);
      }
    if (!t)
      return std::nullopt;
    return scalarValue<int64_t>(*t);
  }

  /// The initializer a MatMul multiplies by, as an nn.Linear weight ([out,
  /// in]): through a Transpose with perm [1, 0]; empty when it is not one.
  std::string linearWeight(const onnx::NodeProto &matmul) const {
    if (matmul.op_type() != "MatMul" || matmul.input_size() != 2)
      return "";
    const onnx::NodeProto *t = producerOf(inputOf(matmul, 1));
    if (!t || t->op_type() != "Transpose" ||
        !initializers.count(inputOf(*t, 0)))
      return "";
    for (const auto &a : t->attribute())
      if (a.name() == "perm" &&
          (a.ints_size() != 2 || a.ints(0) != 1 || a.ints(1) != 0))
        return "";
    return inputOf(*t, 0);
  }

  /// The stacked initializer ([E, out, in]) a MatMul multiplies by one
  /// expert of, and the expert's index value: `MatMul(x, Transpose(
  /// Gather(W, i)))` (transformers 5's `F.linear(x, W[i])`); empty when not.
  std::pair<std::string, std::string>
  stackedWeight(const onnx::NodeProto &matmul) const {
    if (matmul.op_type() != "MatMul" || matmul.input_size() != 2)
      return {};
    const onnx::NodeProto *t = producerOf(inputOf(matmul, 1));
    if (!t || t->op_type() != "Transpose")
      return {};
    for (const auto &a : t->attribute())
      if (a.name() == "perm" &&
          (a.ints_size() != 2 || a.ints(0) != 1 || a.ints(1) != 0))
        return {};
    const onnx::NodeProto *gather = producerOf(inputOf(*t, 0));
    if (!gather || gather->op_type() != "Gather" ||
        intAttr(*gather, "axis", 0) != 0)
      return {};
    const onnx::TensorProto *w = initializers.lookup(inputOf(*gather, 0));
    if (!w || w->dims_size() != 3)
      return {};
    return {inputOf(*gather, 0), inputOf(*gather, 1)};
  }

  /// SiLU(a) as an exporter writes it: Mul(a, Sigmoid(a)) either way round,
  /// or one Silu/Swish node; returns a's value or "".
  std::string siluInput(const onnx::NodeProto *node) const {
    if (!node)
      return "";
    if ((node->op_type() == "Silu" || node->op_type() == "Swish") &&
        node->input_size() == 1)
      return inputOf(*node, 0);
    if (node->op_type() != "Mul")
      return "";
    for (int i = 0; i < 2; ++i) {
      const onnx::NodeProto *s = producerOf(inputOf(*node, 1 - i));
      if (s && s->op_type() == "Sigmoid" && inputOf(*s, 0) == inputOf(*node, i))
        return inputOf(*node, i);
    }
    return "";
  }
  /// The one node reading `value` (of op type `op` when one is given), or
  /// null when it has several readers, none, or is a graph output.
  const onnx::NodeProto *onlyReader(StringRef value, StringRef op = "") const {
    auto readers = consumers.lookup(value);
    if (readers.size() != 1 || outputs.count(value))
      return nullptr;
    const onnx::NodeProto &n = graph.node(readers[0]);
    return op.empty() || n.op_type() == op ? &n : nullptr;
  }

  /// The readers of `value` that are `op` nodes.
  SmallVector<const onnx::NodeProto *> readersOf(StringRef value,
                                                 StringRef op) const {
    SmallVector<const onnx::NodeProto *> out;
    for (int i : consumers.lookup(value))
      if (graph.node(i).op_type() == op)
        out.push_back(&graph.node(i));
    return out;
  }

  int64_t intAttr(const onnx::NodeProto &node, StringRef name,
                  int64_t dflt) const {
    for (const auto &a : node.attribute())
      if (a.name() == name)
        return a.i();
    return dflt;
  }

  const onnx::GraphProto &graph;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringSet<> outputs;
  llvm::StringMap<int> producer;
  llvm::StringMap<SmallVector<int>> consumers;
};

/// `graph`'s nodes with those in `drop` removed, `node` in the place of the
/// one at `at`, and then every node whose outputs nothing reads any more
/// (what only the dropped nodes read: an MoE block's baked-in token
/// gathers, its experts' own matmuls).
/// Each node of `put` takes the place of the node at its index.
inline void replaceNodes(onnx::GraphProto &graph,
                         const llvm::DenseSet<int> &drop,
                         llvm::ArrayRef<std::pair<int, onnx::NodeProto>> put) {
  std::vector<onnx::NodeProto> kept;
  kept.reserve(graph.node_size());
  for (auto [i, n] : llvm::enumerate(graph.node())) {
    const auto *at = llvm::find_if(
        put, [&, i = i](const auto &p) { return p.first == (int)i; });
    if (at != put.end())
      kept.push_back(at->second); // a copy: each index is met once
    else if (!drop.count(i))
      kept.push_back(n);
  }
  llvm::StringMap<int64_t> readers;
  for (const auto &n : kept)
    for (const std::string &in : n.input())
      ++readers[in];
  for (const auto &out : graph.output())
    ++readers[out.name()];
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
      if (it->op_type().empty())
        continue;
      bool used = llvm::any_of(it->output(), [&](const std::string &o) {
        return readers.lookup(o) > 0;
      });
      if (used)
        continue;
      for (const std::string &in : it->input())
        --readers[in];
      it->clear_op_type(); // marked dead
      changed = true;
    }
  }
  graph.clear_node();
  for (auto &n : kept)
    if (!n.op_type().empty())
      *graph.add_node() = std::move(n);
}

inline void replaceNodes(onnx::GraphProto &graph,
                         const llvm::DenseSet<int> &drop, int at,
                         const onnx::NodeProto &node) {
  replaceNodes(graph, drop, {std::make_pair(at, node)});
}

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOEGRAPHINDEX_H
