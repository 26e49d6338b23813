//===- ONNXMutator.cpp - structure-aware mutations of an ONNX model -------===//
//
// libFuzzer's byte mutations almost never keep a protobuf parseable, so on
// their own they test the protobuf parser and little of the importer. This
// custom mutator parses the input as an onnx::ModelProto and changes one
// thing a hostile or broken exporter could write: a node's operator, its
// inputs or outputs (dangling, duplicated, cyclic names), the node order,
// an attribute's value or type, an initializer's dims, type, bytes or
// external-data location, a graph input's dims or element type, the opset.
// The result is a valid protobuf holding an invalid model, which is what
// reaches the importer's checks. One mutation in eight is libFuzzer's own
// byte mutation, so the protobuf parser stays covered.
//
// Debian's onnx is built with `optimize_for = LITE_RUNTIME` (no
// reflection), and libprotobuf-mutator is not packaged, so the mutations
// are written against the generated accessors: they know ONNX's fields,
// which a generic mutator would not.
//
//===----------------------------------------------------------------------===//

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Rng = std::minstd_rand;

size_t below(Rng &rng, size_t n) { return n ? rng() % n : 0; }

/// Integers at the edges of every range the importer converts into:
/// int32/int64 limits, zero, negatives, sizes past any memory.
int64_t edgeInt(Rng &rng, int64_t old) {
  static const int64_t edges[] = {0,
                                  1,
                                  -1,
                                  2,
                                  -2,
                                  std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max(),
                                  int64_t(1) << 31,
                                  int64_t(1) << 40,
                                  int64_t(1) << 62};
  // Wrapping arithmetic: the mutator runs under UBSan too.
  switch (below(rng, 4)) {
  case 0:
    return int64_t(uint64_t(old) + 1);
  case 1:
    return int64_t(uint64_t(old) - 1);
  case 2:
    return int64_t(0 - uint64_t(old));
  default:
    return edges[below(rng, sizeof(edges) / sizeof(edges[0]))];
  }
}

float edgeFloat(Rng &rng, float old) {
  static const float edges[] = {std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                0.0f,
                                -0.0f,
                                3e38f,
                                1e-45f,
                                -1.0f};
  if (below(rng, 3) == 0)
    return old * 2.0f;
  return edges[below(rng, sizeof(edges) / sizeof(edges[0]))];
}

/// Operators the importer handles, a few it refuses, one that does not
/// exist: a node given another's operator meets that operator's checks
/// with the wrong inputs and attributes.
const char *const kOps[] = {"MatMul",
                            "Gemm",
                            "Add",
                            "Mul",
                            "Div",
                            "Sub",
                            "Pow",
                            "Sqrt",
                            "Reshape",
                            "Transpose",
                            "Softmax",
                            "Gather",
                            "Concat",
                            "Slice",
                            "Range",
                            "Expand",
                            "Where",
                            "Cast",
                            "Shape",
                            "Unsqueeze",
                            "Squeeze",
                            "ReduceMean",
                            "ReduceSum",
                            "Einsum",
                            "TopK",
                            "Conv",
                            "LayerNormalization",
                            "ConstantOfShape",
                            "Constant",
                            "ScatterElements",
                            "GatherND",
                            "Split",
                            "Trilu",
                            "CumSum",
                            "OneHot",
                            "Tile",
                            "Loop",
                            "If",
                            "NoSuchOp"};

const char *const kAttrNames[] = {"axis",  "axes",   "perm",     "shape",
                                  "value", "to",     "keepdims", "epsilon",
                                  "split", "transA", "transB",   "upper"};

/// A name already in the graph (so the edit makes duplicates, dangling
/// references or cycles), or one no graph should hold.
std::string someName(Rng &rng, const onnx::GraphProto &g) {
  std::vector<const std::string *> names;
  for (const onnx::NodeProto &n : g.node()) {
    for (const std::string &s : n.input())
      names.push_back(&s);
    for (const std::string &s : n.output())
      names.push_back(&s);
  }
  for (const onnx::TensorProto &t : g.initializer())
    names.push_back(&t.name());
  for (const onnx::ValueInfoProto &v : g.input())
    names.push_back(&v.name());
  if (!names.empty() && below(rng, 4) != 0)
    return *names[below(rng, names.size())];
  static const char *const odd[] = {"", "x", "..", "../w.bin", "/etc/passwd"};
  return odd[below(rng, 5)];
}

template <typename Repeated> void editRepeated(Rng &rng, Repeated &r) {
  if (r.empty())
    return;
  int i = int(below(rng, r.size()));
  switch (below(rng, 3)) {
  case 0: // drop one
    r.SwapElements(i, r.size() - 1);
    r.RemoveLast();
    break;
  case 1: // duplicate one
    *r.Add() = r.Get(i);
    break;
  default: // swap two
    r.SwapElements(i, int(below(rng, r.size())));
  }
}

void mutateNode(Rng &rng, onnx::GraphProto &g, onnx::NodeProto &n) {
  switch (below(rng, 5)) {
  case 0:
    n.set_op_type(kOps[below(rng, sizeof(kOps) / sizeof(kOps[0]))]);
    break;
  case 1:
    if (n.input_size() && below(rng, 2))
      n.set_input(int(below(rng, n.input_size())), someName(rng, g));
    else
      editRepeated(rng, *n.mutable_input());
    break;
  case 2:
    if (n.output_size() && below(rng, 2))
      n.set_output(int(below(rng, n.output_size())), someName(rng, g));
    else
      editRepeated(rng, *n.mutable_output());
    break;
  case 3:
    n.set_domain(below(rng, 2) ? "com.microsoft" : "no.such.domain");
    break;
  default:
    editRepeated(rng, *g.mutable_node());
  }
}

void mutateAttribute(Rng &rng, onnx::NodeProto &n) {
  if (n.attribute_size() == 0 || below(rng, 4) == 0) {
    onnx::AttributeProto *a = n.add_attribute();
    a->set_name(
        kAttrNames[below(rng, sizeof(kAttrNames) / sizeof(kAttrNames[0]))]);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(edgeInt(rng, 0));
    return;
  }
  onnx::AttributeProto &a =
      *n.mutable_attribute(int(below(rng, n.attribute_size())));
  switch (below(rng, 6)) {
  case 0:
    a.set_i(edgeInt(rng, a.i()));
    break;
  case 1:
    if (a.ints_size())
      a.set_ints(int(below(rng, a.ints_size())),
                 edgeInt(rng, a.ints(int(below(rng, a.ints_size())))));
    else
      a.add_ints(edgeInt(rng, 0));
    break;
  case 2:
    a.set_f(edgeFloat(rng, a.f()));
    break;
  case 3: // a type that disagrees with the field set
    a.set_type(onnx::AttributeProto::AttributeType(below(rng, 15)));
    break;
  case 4:
    editRepeated(rng, *a.mutable_ints());
    break;
  default:
    editRepeated(rng, *n.mutable_attribute());
  }
}

void mutateTensor(Rng &rng, onnx::TensorProto &t) {
  switch (below(rng, 6)) {
  case 0:
    if (t.dims_size())
      t.set_dims(int(below(rng, t.dims_size())),
                 edgeInt(rng, t.dims(int(below(rng, t.dims_size())))));
    else
      t.add_dims(edgeInt(rng, 1));
    break;
  case 1:
    editRepeated(rng, *t.mutable_dims());
    break;
  case 2:
    t.set_data_type(int32_t(below(rng, 24)));
    break;
  case 3: { // bytes short or long of what the dims claim
    std::string raw = t.raw_data();
    raw.resize(below(rng, 2) ? raw.size() / 2
                             : raw.size() + 1 + below(rng, 64));
    t.set_raw_data(raw);
    break;
  }
  case 4: { // external data pointing anywhere
    static const char *const where[] = {"../../../../etc/passwd",
                                        ".",
                                        "../w.bin",
                                        "/etc/passwd",
                                        "missing.bin",
                                        ""};
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_external_data();
    onnx::StringStringEntryProto *e = t.add_external_data();
    e->set_key("location");
    e->set_value(where[below(rng, 6)]);
    if (below(rng, 2)) {
      e = t.add_external_data();
      e->set_key(below(rng, 2) ? "offset" : "length");
      e->set_value(std::to_string(edgeInt(rng, 0)));
    }
    break;
  }
  default:
    if (t.float_data_size())
      t.set_float_data(int(below(rng, t.float_data_size())),
                       edgeFloat(rng, 1.0f));
    else
      t.add_int64_data(edgeInt(rng, 0));
  }
}

void mutateValueInfo(Rng &rng, onnx::ValueInfoProto &v) {
  onnx::TypeProto::Tensor &tt = *v.mutable_type()->mutable_tensor_type();
  if (below(rng, 3) == 0) {
    tt.set_elem_type(int32_t(below(rng, 24)));
    return;
  }
  onnx::TensorShapeProto &shape = *tt.mutable_shape();
  if (shape.dim_size() == 0 || below(rng, 4) == 0) {
    editRepeated(rng, *shape.mutable_dim());
    if (shape.dim_size() == 0)
      shape.add_dim()->set_dim_value(edgeInt(rng, 1));
    return;
  }
  onnx::TensorShapeProto::Dimension &d =
      *shape.mutable_dim(int(below(rng, shape.dim_size())));
  if (below(rng, 4) == 0)
    d.set_dim_param(below(rng, 2) ? "batch" : "");
  else
    d.set_dim_value(edgeInt(rng, d.dim_value()));
}

/// One structural change; false when the model has nothing of that kind.
bool mutateModel(Rng &rng, onnx::ModelProto &m) {
  onnx::GraphProto &g = *m.mutable_graph();
  switch (below(rng, 6)) {
  case 0:
  case 1:
    if (g.node_size() == 0)
      return false;
    mutateNode(rng, g, *g.mutable_node(int(below(rng, g.node_size()))));
    return true;
  case 2:
    if (g.node_size() == 0)
      return false;
    mutateAttribute(rng, *g.mutable_node(int(below(rng, g.node_size()))));
    return true;
  case 3:
    if (g.initializer_size() == 0)
      return false;
    mutateTensor(rng,
                 *g.mutable_initializer(int(below(rng, g.initializer_size()))));
    return true;
  case 4: {
    auto &values = below(rng, 3) ? *g.mutable_input() : *g.mutable_output();
    if (values.empty())
      return false;
    mutateValueInfo(rng, *values.Mutable(int(below(rng, values.size()))));
    return true;
  }
  default:
    if (m.opset_import_size() == 0)
      m.add_opset_import()->set_version(edgeInt(rng, 17));
    else
      m.mutable_opset_import(0)->set_version(
          below(rng, 2) ? int64_t(below(rng, 25)) : edgeInt(rng, 17));
    return true;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  Rng rng(seed ? seed : 1);
  onnx::ModelProto model;
  if (below(rng, 8) == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  bool changed = false;
  for (int tries = 0; tries < 8 && !changed; ++tries)
    changed = mutateModel(rng, model);
  // Sometimes two changes at once: a check that one edit passes may not
  // hold against a second.
  if (changed && below(rng, 4) == 0)
    mutateModel(rng, model);
  std::string out;
  if (!changed || !model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
