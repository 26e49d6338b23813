//===- ExporterForms.cpp - what the PyTorch exporters lose ----------------===//
//
// Two things a PyTorch model says that its ONNX export does not:
// - the names of parameters torch 2's dynamo exporter folds into derived
//   constants (its default optimize=True stores W^T of a linear layer as
//   `val_43`, a rotary table as `unsqueeze_14`), which would train under
//   names the user's model does not have: refused, naming the option that
//   keeps them;
// - nn.Embedding's padding_idx (ONNX's Gather has none): given with
//   --padding-idx, the padding row reads as a constant, so it gets no
//   gradient, as in PyTorch.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

LogicalResult mlir::rp::parsePaddingIdxOption(StringRef text,
                                              ONNXImportOptions &options,
                                              std::string &error) {
  auto [name, row] = text.rsplit('=');
  int64_t r;
  if (name.empty() || row.getAsInteger(10, r) || r < 0) {
    error = "expected --padding-idx NAME=ROW (for example "
            "model.embed_tokens.weight=0), got '" +
            text.str() + "'";
    return failure();
  }
  options.paddingIdx[name] = r;
  return success();
}

bool GraphImporter::isDynamoExport(const onnx::ModelProto &model) {
  // The TorchScript exporter names nodes by module path (/model/Gather),
  // the dynamo one node_<fx name>.
  if (model.producer_name() != "pytorch")
    return false;
  return llvm::any_of(model.graph().node(), [](const onnx::NodeProto &n) {
    return StringRef(n.name()).starts_with("node_");
  });
}

LogicalResult GraphImporter::checkFoldedParameters() {
  if (!dynamoExport)
    return success();
  // Parameters and buffers keep their module paths (dotted names); what
  // the exporter's constant folding makes is named after an fx node or an
  // ONNX value: val_43, unsqueeze_14, embedding_1, repeat_interleave_2.
  llvm::Regex folded("^[a-z][a-z0-9_]*_[0-9]+$");
  SmallVector<std::string> names;
  for (const auto &t : graph.initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    Type element = convertElementType(t.data_type(), context);
    if (!element || !isa<FloatType>(element) || n <= 1 ||
        !folded.match(t.name()) || matchesAny(t.name(), options.frozenPatterns))
      continue;
    names.push_back(t.name());
  }
  if (names.empty())
    return success();
  InFlightDiagnostic diag =
      emitError(FileLineColLoc::get(context, path, 0, 0))
      << "the dynamo exporter folded parameters into derived constants ("
      << names.size() << " float initializers named like '" << names.front()
      << "'";
  if (names.size() > 1)
    diag << ", '" << names[1] << "'";
  diag << "): rp would train them under names your model does not have. "
          "Export with torch.onnx.export(..., dynamo=True, optimize=False), "
          "which keeps every parameter as an initializer under its "
          "state_dict name (or with dynamo=False); or --frozen the names "
          "if they are buffers";
  return diag;
}

LogicalResult GraphImporter::applyPaddingIdx(const onnx::NodeProto &node,
                                             Location loc) {
  StringRef name = node.input(0);
  int64_t row = options.paddingIdx.lookup(name);
  NodeImporter n(node, opset, builder, loc, values, modelDir);
  if (n.intAttr("axis", 0) != 0)
    return n.error() << "--padding-idx names '" << name
                     << "', which this Gather reads along axis "
                     << n.intAttr("axis", 0) << "; a padding row is axis 0";
  Value out = values.lookup(node.output(0));
  Value ids = values.lookup(node.input(1));
  const onnx::TensorProto *tensor = initializers.lookup(name);
  auto weightType = dyn_cast<RankedTensorType>(values.lookup(name).getType());
  if (!out || !ids || !tensor || !weightType || weightType.getRank() != 2 ||
      row >= weightType.getDimSize(0))
    return n.error() << "--padding-idx " << name << "=" << row
                     << " needs a [rows, width] embedding with that row";
  // The row's value as the model holds it (PyTorch never changes it: the
  // row gets no gradient); a zero row, nn.Embedding's default, is a splat.
  auto bytes = readTensorBytes(*tensor, modelDir, loc);
  if (failed(bytes))
    return failure();
  int64_t width = weightType.getDimSize(1);
  int64_t rowBytes = width * getElementSizeInBytes(weightType);
  if (static_cast<int64_t>(bytes->size()) < (row + 1) * rowBytes)
    return n.error() << "initializer '" << name << "' is shorter than "
                     << weightType;
  StringRef data = StringRef(*bytes).substr(row * rowBytes, rowBytes);
  auto rowType = RankedTensorType::get({width}, weightType.getElementType());
  bool zero = llvm::all_of(data, [](char c) { return c == 0; });
  DenseElementsAttr rowValue =
      zero ? DenseElementsAttr::get(
                 RankedTensorType::get({}, weightType.getElementType()),
                 builder.getZeroAttr(weightType.getElementType()))
           : DenseElementsAttr::getFromRawBuffer(
                 rowType, ArrayRef<char>(data.data(), data.size()));
  auto idsType = cast<RankedTensorType>(ids.getType());
  auto padType = RankedTensorType::get({}, idsType.getElementType());
  Value pad = n.constant(DenseElementsAttr::get(
      padType, builder.getIntegerAttr(idsType.getElementType(), row)));
  Value keep = n.create<CmpOp>(CmpPredicate::ne, ids, pad);
  SmallVector<int64_t> shape(idsType.getShape());
  shape.push_back(1);
  keep = n.reshape(keep, shape);
  values[node.output(0)] = n.create<WhereOp>(keep, out, n.constant(rowValue));
  return success();
}
