//===- ConstantEvaluator.h - ONNX nodes on constant inputs ------*- C++ -*-===//
//
// Private to the ONNX importer. Exporters compute causal masks, rotary
// tables and position ids in the graph from shapes, constants and buffers;
// rp folds every such input-independent node into a constant at import,
// whatever its op type, with one evaluator: elementwise kernels over
// broadcast operands, data movement as index maps, and reductions. Integer
// ops are exact; float ops compute in the element type (f32 in float, as
// onnxruntime's CPU kernels do; f16 and bf16 in float, rounded per op).
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_CONSTANTEVALUATOR_H
#define RP_LIB_IMPORT_ONNX_CONSTANTEVALUATOR_H

#include "NodeImporter.h"

#include <string>
#include <vector>

namespace mlir::rp::onnx_import {

/// Folding a result bigger than this would take more memory than a model's
/// masks and tables ever need; such a node is left to the handlers.
inline constexpr int64_t kMaxEvalElements = int64_t(1) << 26;
/// The most multiply-adds one fold (MatMul, Einsum) does: about a second.
inline constexpr int64_t kMaxEvalWork = int64_t(1) << 30;

/// No tensor of a model may have more elements than this (4 TiB of f32, far
/// beyond any device): larger shapes are refused at import, before a pass
/// multiplies them into sizes that overflow.
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// What to do about a result over kMaxEvalElements, for its error.
inline constexpr const char *kTooLargeHint =
    " (rp keeps causal and sliding-window masks computed from index ranges "
    "without their elements, but this value has another form: export with "
    "rp.trace, or with fewer tokens)";

/// Whether the evaluator computes nodes of `opType`.
bool canEvaluate(StringRef opType);

/// The op types the evaluator computes, sorted.
std::vector<std::string> evaluatedOps();

/// Computes the outputs of `n` from `inputs`, the constant values of its
/// inputs (null for a skipped optional input). Errors name the node.
FailureOr<SmallVector<DenseElementsAttr>>
evaluateNode(NodeImporter &n, ArrayRef<DenseElementsAttr> inputs);

} // namespace mlir::rp::onnx_import

#endif // RP_LIB_IMPORT_ONNX_CONSTANTEVALUATOR_H
