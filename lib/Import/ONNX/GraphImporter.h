//===- GraphImporter.h - one ONNX graph into an rp function -----*- C++ -*-===//
//
// The importer's state for one graph (Importer.cpp): its values, its
// initializers and the handler table. Importer.cpp walks the nodes;
// ImportInitializers.cpp makes arguments and initializers.
//
//===----------------------------------------------------------------------===//

#ifndef RP_IMPORT_ONNX_GRAPHIMPORTER_H
#define RP_IMPORT_ONNX_GRAPHIMPORTER_H

#include "BandEval.h"
#include "NodeImporter.h"
#include "rp/Import/ONNX/Importer.h"
#include "rp/Support/WeightsWriter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

namespace mlir::rp::onnx_import {

/// Integer initializers up to this size are shape data and become
/// constants, so that the arithmetic on them folds.
inline constexpr int64_t kMaxConstantElements = 1 << 16;
/// The most elements a graph input may have (2^40, 4 TiB of f32): beyond
/// any device's memory, and far from where an element count overflows.
inline constexpr uint64_t kMaxInputElements = uint64_t(1) << 40;

class GraphImporter {
public:
  GraphImporter(const onnx::ModelProto &model, StringRef path, int64_t opset,
                MLIRContext *context, const ONNXImportOptions &options)
      : graph(model.graph()), path(path), opset(opset), context(context),
        options(options), builder(context),
        modelDir(llvm::sys::path::parent_path(path)),
        dynamoExport(isDynamoExport(model)) {
    if (modelDir.empty())
      modelDir = ".";
  }

  OwningOpRef<ModuleOp> run();

private:
  // ExporterForms.cpp: what the PyTorch exporters lose.
  /// Whether torch.onnx.export(dynamo=True) wrote `model`.
  static bool isDynamoExport(const onnx::ModelProto &model);
  /// Refuses float initializers the dynamo exporter folded from parameters
  /// (unnamed derived constants), naming the option that keeps the names.
  LogicalResult checkFoldedParameters();
  /// After the Gather `node` of an embedding given --padding-idx: positions
  /// holding the padding row read it as a constant (no gradient).
  LogicalResult applyPaddingIdx(const onnx::NodeProto &node, Location loc);

  Location nodeLoc(const onnx::NodeProto &node, int index);
  FailureOr<RankedTensorType> inputType(const onnx::ValueInfoProto &info);
  /// Creates the rp.param or rp.constant of initializer `name` on first use.
  Value lookupInitializer(StringRef name);
  FailureOr<Value> importInitializer(const onnx::TensorProto &tensor);
  LogicalResult importNode(const onnx::NodeProto &node, int index);
  LogicalResult importNodeImpl(const onnx::NodeProto &node, int index);
  /// The value of `v` when it is input-independent: a constant, or a param
  /// of a buffer (see `buffers`); null otherwise.
  FailureOr<DenseElementsAttr> constantValue(Value v);
  /// Folds `node` into constants when the evaluator knows its op and every
  /// input is input-independent; returns true when it did.
  FailureOr<bool> tryEvaluate(NodeImporter &importer);

  const onnx::GraphProto &graph;
  std::string path;
  int64_t opset;
  MLIRContext *context;
  const ONNXImportOptions &options;
  OpBuilder builder;
  SmallString<128> modelDir;
  bool dynamoExport;

  llvm::StringMap<Value> values;
  /// Folded values of element types rp has no tensors of (foldedOnly: the
  /// narrow integers), by name: only further folds read them.
  llvm::StringMap<DenseElementsAttr> foldedValues;
  llvm::StringMap<SmallVector<Value>> sequences;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<Handler> handlers;
  /// Params and constants of initializers go to the top of the function,
  /// in first-use order.
  Block *entry = nullptr;
  Operation *lastInitializerOp = nullptr;
  std::unique_ptr<WeightsWriter> weights;
  bool initializerFailed = false;
  /// Initializers that are buffers rather than weights: integer and bool
  /// tensors, and floats named like the buffers exporters write (rotary
  /// frequencies and tables, masks, position ids). Their params fold; a
  /// frozen weight stays a param.
  llvm::StringSet<> buffers;
  /// The --shape changes of dimensions the model fixes, for messages.
  SmallVector<std::string> overrides;
  llvm::DenseMap<Operation *, DenseElementsAttr> bufferValues;
  /// Input-independent masks kept as bands (BandEval.h), by the value that
  /// computes them in the IR.
  llvm::DenseMap<Value, LazyBand> bands;
};

} // namespace mlir::rp::onnx_import

#endif // RP_IMPORT_ONNX_GRAPHIMPORTER_H
