//===- AttributeTypes.cpp - ONNX attributes checked against the schema ----===//

#include "AttributeTypes.h"

#include <onnx/defs/schema.h>

using namespace mlir;
using namespace mlir::rp::onnx_import;

namespace {

/// Whether the field of `a`'s declared type is the one that holds its value:
/// a FLOAT attribute whose value sits in `i` reads as 0.0.
bool holdsDeclaredField(const onnx::AttributeProto &a) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
  case A::FLOAT:
    return a.has_f();
  case A::INT:
    return a.has_i();
  case A::STRING:
    return a.has_s();
  case A::TENSOR:
    return a.has_t();
  case A::GRAPH:
    return a.has_g();
  case A::FLOATS:
    return a.ints_size() == 0 && a.strings_size() == 0;
  case A::INTS:
    return a.floats_size() == 0 && a.strings_size() == 0;
  case A::STRINGS:
    return a.floats_size() == 0 && a.ints_size() == 0;
  default:
    return true;
  }
}

std::string typeName(int type) {
  if (!onnx::AttributeProto::AttributeType_IsValid(type))
    return "type " + std::to_string(type);
  return onnx::AttributeProto::AttributeType_Name(
      static_cast<onnx::AttributeProto::AttributeType>(type));
}

} // namespace

LogicalResult
mlir::rp::onnx_import::checkAttributeTypes(NodeImporter &importer) {
  const onnx::NodeProto &node = importer.node;
  // "ai.onnx" is the default domain's long name; libonnx registers it as "".
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), int(importer.opset), domain);
  // An operator without a schema is refused by the handler table.
  if (!schema)
    return success();
  for (const onnx::AttributeProto &a : node.attribute()) {
    auto declared = schema->attributes().find(a.name());
    // Attributes the schema does not name are left to the handlers, which
    // read only the ones they know.
    if (declared == schema->attributes().end())
      continue;
    int want = declared->second.type;
    if (a.type() != want || !holdsDeclaredField(a))
      return importer.error()
             << "attribute '" << a.name() << "' is stored as "
             << typeName(a.type())
             << (a.type() == want ? " without its value" : "") << ", but "
             << node.op_type() << " (opset " << importer.opset
             << ") declares it " << typeName(want)
             << "; re-export the model (onnx.checker refuses it too)";
  }
  return success();
}
