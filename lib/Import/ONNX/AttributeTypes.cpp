//===- AttributeTypes.cpp - ONNX attributes checked against the schema ----===//

#include "AttributeTypes.h"

#include <onnx/defs/schema.h>

#include "llvm/ADT/STLExtras.h"

#include <limits>
#include <set>

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

/// The last opset of `domain` whose schemas this libonnx holds.
int64_t lastKnownOpset(const std::string &domain) {
  const auto &ranges =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(domain);
  return it == ranges.end() ? 0 : it->second.second;
}

} // namespace

LogicalResult
mlir::rp::onnx_import::checkAttributeTypes(NodeImporter &importer) {
  const onnx::NodeProto &node = importer.node;
  // "ai.onnx" is the default domain's long name; libonnx registers it as "".
  // Nodes of any other domain (custom operators, which have no schema to
  // check against) are refused before this, by the importer.
  std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), int(importer.opset), domain);
  // An operator without a schema at this opset is refused by the handler
  // table.
  if (!schema)
    return success();
  // Inputs and outputs are positional: one too many is read by no handler
  // (Sqrt(x, y) would fold as a binary op), one too few is read past the
  // end. Past the last opset libonnx knows (17), the schema it returns is
  // the operator's opset-17 version; the ones whose counts changed in
  // opsets 18 to 21 (ONNX's changelog) are not held to it.
  bool held = importer.opset <= lastKnownOpset(domain) ||
              !llvm::is_contained(
                  {"DFT", "OptionalHasElement", "Pad", "ReduceL1", "ReduceL2",
                   "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                   "ReduceMin", "ReduceProd", "ReduceSumSquare"},
                  node.op_type());
  auto count = [&](int have, int least, int most, const char *what,
                   const char *verb) -> LogicalResult {
    if (!held || (have >= least && have <= most))
      return success();
    std::string range = std::to_string(least);
    if (most == std::numeric_limits<int>::max())
      range += " or more";
    else if (most != least)
      range += " to " + std::to_string(most);
    return importer.error()
           << "has " << have << " " << what << (have == 1 ? "" : "s") << "; "
           << node.op_type() << " (opset " << importer.opset << ") " << verb
           << " " << range
           << "; re-export the model (onnx.checker refuses it too)";
  };
  if (failed(count(node.input_size(), schema->min_input(), schema->max_input(),
                   "input", "takes")) ||
      failed(count(node.output_size(), schema->min_output(),
                   schema->max_output(), "output", "gives")))
    return failure();
  std::set<std::string> seen;
  for (const onnx::AttributeProto &a : node.attribute()) {
    // Two attributes of one name: the handlers would read one of them.
    if (!seen.insert(a.name()).second)
      return importer.error()
             << "attribute '" << a.name()
             << "' appears more than once; re-export the model "
                "(onnx.checker refuses it too)";
    auto declared = schema->attributes().find(a.name());
    if (declared == schema->attributes().end()) {
      // onnx.checker lets through names starting with "__" (an exporter's
      // implementation details) and every attribute of the schemas marked
      // AllowUncheckedAttributes; libonnx does not expose that mark, and
      // LayerNormalization is the one operator it sets it on.
      if (a.name().rfind("__", 0) == 0 ||
          node.op_type() == "LayerNormalization")
        continue;
      // Past the last opset libonnx knows, the schema it returns may be an
      // older version of the operator (Split's num_outputs came in opset
      // 18): a name it lacks may be the newer version's.
      if (importer.opset > lastKnownOpset(domain))
        continue;
      // Any other name is a misspelling or another opset's attribute that
      // the handler would ignore: a silent wrong answer.
      InFlightDiagnostic diag = importer.error()
                                << "attribute '" << a.name() << "' is not one "
                                << node.op_type() << " (opset "
                                << importer.opset << ") declares (it has ";
      if (schema->attributes().empty())
        diag << "none";
      llvm::interleaveComma(schema->attributes(), diag,
                            [&](const auto &kv) { diag << kv.first; });
      return diag << "); re-export the model without it (onnx.checker "
                     "refuses it too)";
    }
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
