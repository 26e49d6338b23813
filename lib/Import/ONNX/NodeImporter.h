//===- NodeImporter.h - per-node import state and handlers ------*- C++ -*-===//
//
// Private to the ONNX importer. A handler turns one ONNX node into rp ops
// through a NodeImporter, which gives typed access to inputs, constant
// inputs and attributes, and reports errors that name the node.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_NODEIMPORTER_H
#define RP_LIB_IMPORT_ONNX_NODEIMPORTER_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>

namespace mlir::rp::onnx_import {

/// Maps an ONNX element type to the rp element type, or null when rp does
/// not support it.
Type convertElementType(int32_t onnxType, MLIRContext *context);

/// The element type of a value the constant evaluator folds:
/// convertElementType's, or for the narrow integers rp has no tensors of (INT8,
/// UINT8, INT16, UINT16, UINT32) a signed or unsigned IntegerType. Exporters
/// cast index ranges to them (torch.eye as an arange compared with itself);
/// such a value stays in the evaluator and never becomes an rp.constant.
Type foldedElementType(int32_t onnxType, MLIRContext *context);

/// Whether values of `element` exist only inside the constant evaluator
/// (foldedElementType's narrow integers, the only signed or unsigned ones).
inline bool foldedOnly(Type element) {
  auto integer = dyn_cast<IntegerType>(element);
  return integer && !integer.isSignless();
}

/// The name of an ONNX element type for messages (FLOAT, UINT8, ...).
std::string elementTypeName(int32_t onnxType);

/// Where an externally stored tensor's bytes are: a file relative to the
/// model's folder, an offset and a length (-1 when the model omits it).
struct ExternalData {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};

/// The external data entry of `tensor`, if its data is stored outside.
std::optional<ExternalData> externalDataOf(const onnx::TensorProto &tensor);

/// The path of `ext`'s file, confined to the model's folder as onnxruntime
/// confines it: a location that is empty, ".", absolute, holds a ".."
/// component or a NUL, or resolves (through symbolic links) outside
/// `modelDir` or to something other than a regular file is an error naming
/// the tensor and the location. A file that does not exist is left to the
/// reader's message.
FailureOr<std::string> externalDataPath(const onnx::TensorProto &tensor,
                                        const ExternalData &ext,
                                        StringRef modelDir, Location loc);

/// The raw little-endian bytes of a tensor (one byte per bool), wherever
/// the model keeps them: raw data, typed fields, or an external data file
/// relative to `modelDir`.
FailureOr<std::string> readTensorBytes(const onnx::TensorProto &tensor,
                                       StringRef modelDir, Location loc);

/// Fails with an error unless `bytes` is exactly the size `type` needs.
LogicalResult checkTensorSize(const onnx::TensorProto &tensor, StringRef bytes,
                              RankedTensorType type, Location loc);

/// Reads the data of a tensor held in the model (raw, typed fields or
/// external data relative to `modelDir`) into a dense attribute of `type`.
FailureOr<DenseElementsAttr> readTensor(const onnx::TensorProto &tensor,
                                        RankedTensorType type,
                                        StringRef modelDir, Location loc);

/// Whether the raw little-endian `data` of `element`s holds a masking
/// value (InitializerKinds.cpp).
bool holdsMaskValue(StringRef data, Type element);

/// Whether `name` matches one of the regular expressions `patterns`.
bool matchesAny(StringRef name, ArrayRef<std::string> patterns);

class NodeImporter {
public:
  NodeImporter(const onnx::NodeProto &node, int64_t opset, OpBuilder &builder,
               Location loc, llvm::StringMap<Value> &values, StringRef modelDir)
      : node(node), opset(opset), builder(builder), loc(loc), values(values),
        modelDir(modelDir) {}

  const onnx::NodeProto &node;
  int64_t opset;
  OpBuilder &builder;
  Location loc;
  /// Sequence values (SplitToSequence) by name: the tensors they hold.
  llvm::StringMap<SmallVector<Value>> *sequences = nullptr;

  /// An error naming the node, its op type and the opset.
  InFlightDiagnostic error();

  int numInputs() const { return node.input_size(); }
  /// True when input `i` is given (ONNX marks skipped optional inputs "").
  bool hasInput(int i) const {
    return i < node.input_size() && !node.input(i).empty();
  }
  /// The value of input `i`; null (after an error) when it is missing.
  Value input(int i);
  /// The constant value of input `i` after folding, or an error saying the
  /// input must be constant (`what` names its role, e.g. "shape").
  FailureOr<DenseElementsAttr> constantInput(int i, StringRef what);
  /// Integer values of constant input `i`.
  FailureOr<SmallVector<int64_t>> constantInts(int i, StringRef what);

  bool hasOutput(int i) const {
    return i < node.output_size() && !node.output(i).empty();
  }
  void setOutput(int i, Value v);
  /// Fails with an error when an output other than the first is requested
  /// (for example the mask of Dropout or the statistics of
  /// LayerNormalization), which rp does not produce.
  LogicalResult onlyFirstOutput();

  const onnx::AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t dflt) const;
  float floatAttr(StringRef name, float dflt) const;
  std::optional<SmallVector<int64_t>> intsAttr(StringRef name) const;
  std::string stringAttr(StringRef name, StringRef dflt) const;

  /// Normalizes a possibly negative axis against `rank`; errors when out of
  /// range.
  FailureOr<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                   StringRef what = "axis");

  /// Folds as it builds so that shape arithmetic becomes constants.
  template <typename OpTy, typename... Args> Value create(Args &&...args) {
    return builder.createOrFold<OpTy>(loc, std::forward<Args>(args)...);
  }
  Value constant(DenseElementsAttr value) {
    return ConstantOp::create(builder, loc, value);
  }
  Value i64Constant(ArrayRef<int64_t> values);
  Value reshape(Value v, ArrayRef<int64_t> shape);
  /// Reads a tensor attribute (Constant, ConstantOfShape); external data is
  /// relative to the model's folder.
  FailureOr<DenseElementsAttr> readTensorAttr(const onnx::TensorProto &t,
                                              RankedTensorType type) {
    return readTensor(t, type, modelDir, loc);
  }
  /// Casts `v` to the element type `type` (no-op when equal).
  Value castTo(Value v, Type elementType);

private:
  llvm::StringMap<Value> &values;
  StringRef modelDir;
};

using Handler = std::function<LogicalResult(NodeImporter &)>;

/// The sorted, normalized axes of a Reduce* node over a rank-`rank` input:
/// input 1 when `axesInput` (opset 18; ReduceSum from 13), else the `axes`
/// attribute; all axes when none are given, none with
/// noop_with_empty_axes (NNHandlers.cpp).
FailureOr<SmallVector<int64_t>> reduceAxes(NodeImporter &n, int64_t rank,
                                           bool axesInput);

/// Adds the handlers of one family to `table`, keyed by op type.
void registerElementwiseHandlers(llvm::StringMap<Handler> &table);
void registerShapeHandlers(llvm::StringMap<Handler> &table);
void registerNNHandlers(llvm::StringMap<Handler> &table);
/// Conv, Pad and GatherND (ConvHandlers.cpp; registerNNHandlers adds them).
void registerConvHandlers(llvm::StringMap<Handler> &table);
void registerScatterHandlers(llvm::StringMap<Handler> &table);
void registerComposedHandlers(llvm::StringMap<Handler> &table);
/// Abs, Clip, And/Or/Xor, Trilu, Tile, ReduceLogSumExp and EyeLike on
/// run-time values (RuntimeComposed.cpp; registerComposedHandlers adds them).
void registerRuntimeComposedHandlers(llvm::StringMap<Handler> &table);

/// Einsum on run-time values (EinsumHandler.cpp; registerComposedHandlers
/// adds it).
void registerEinsumHandler(llvm::StringMap<Handler> &table);

/// A rank-0 constant `v` of element type `element` (ComposedHandlers.cpp).
Value scalarOf(NodeImporter &n, Type element, double v);

/// hit[.., m, j]: whether index m of `indices` (along the last axis of a
/// dimension of `c`, negative ones counting from the end) is j; the
/// one-hot that GatherElements, TopK and ScatterElements on run-time
/// indices select or write through.
Value lastAxisOneHot(NodeImporter &n, Value indices, int64_t c);

/// Input 0 and the constant integers of input 1 (`what`: a TopK's k, a
/// Tile's repeats).
FailureOr<std::pair<Value, SmallVector<int64_t>>> inputAndInts(NodeImporter &n,
                                                               StringRef what);

} // namespace mlir::rp::onnx_import

#endif // RP_LIB_IMPORT_ONNX_NODEIMPORTER_H
