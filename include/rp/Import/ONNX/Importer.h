//===- Importer.h - ONNX models into the rp graph ---------------*- C++ -*-===//
//
// The importer is mechanical and 1:1: each ONNX node becomes the rp ops of
// its handler (keyed by op type and since-version), a node whose inputs are
// all input-independent folds into constants (one evaluator for every op
// type it knows), and every op carries the node's name as its location.
// Cleanups, pattern fusion and layer grouping are rp passes run afterwards.
//
// Contract:
// - opsets 13-21 of the default domain; anything else is an error naming
//   the opset (and, past 21, the first node);
// - every dimension static: dynamic ones come from `shapes`, or the import
//   fails naming the input; `shapes` may also change a fixed dimension, and
//   a node that baked the exported size then fails with a note saying so;
// - every node whose inputs are input-independent (constants, integer
//   initializers, buffer-named float initializers) folds into a constant;
// - weights are referenced, never copied into the IR: external data in
//   place (file, offset), inline initializers appended to `weightsPath`;
// - an unsupported op, attribute value or data type is an error naming the
//   node, its op type and the opset.
//
//===----------------------------------------------------------------------===//

#ifndef RP_IMPORT_ONNX_IMPORTER_H
#define RP_IMPORT_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace mlir::rp {

struct ONNXImportOptions {
  /// Static shapes for inputs with dynamic dimensions, by input name.
  llvm::StringMap<SmallVector<int64_t>> shapes;
  /// Float initializers whose name matches one of these regular expressions
  /// are frozen (not trainable). The defaults name common buffers.
  std::vector<std::string> frozenPatterns = defaultFrozenPatterns();
  /// Where inline initializers are written. Params reference it relative to
  /// `irDir`.
  std::string weightsPath;
  /// The folder the .mlir will be written to; param file paths are relative
  /// to it when the weight file lies inside it, absolute otherwise.
  std::string irDir;
  /// Embedding weights gathered with a padding row, by initializer name
  /// (--padding-idx NAME=ROW): ONNX has no padding_idx, so the exporters drop
  /// it; the row then reads as a constant and gets no gradient, as in
  /// PyTorch's nn.Embedding(padding_idx=ROW).
  llvm::StringMap<int64_t> paddingIdx;

  static std::vector<std::string> defaultFrozenPatterns() {
    return {"inv_freq", "(^|\\.)(cos|sin)_cached$", "(^|\\.)attn\\.bias$",
            "masked_bias", "position_ids"};
  }
};

/// Parses `--shape` values: `NAME=2x2048`. Returns failure with a message in
/// `error` when malformed.
LogicalResult parseShapeOption(StringRef text, ONNXImportOptions &options,
                               std::string &error);

/// Parses `--padding-idx` values: `NAME=ROW`.
LogicalResult parsePaddingIdxOption(StringRef text, ONNXImportOptions &options,
                                    std::string &error);

/// The ONNX op types rp-import has handlers for, sorted.
std::vector<std::string> supportedONNXOps();

/// The ONNX op types rp-import folds into constants when every input is
/// input-independent (constants, buffers, static shapes), sorted.
std::vector<std::string> foldedONNXOps();

/// Imports the ONNX model at `path` into a module holding `func.func @main`.
/// Diagnostics go to the context's handler.
OwningOpRef<ModuleOp> importONNXModel(StringRef path, MLIRContext *context,
                                      const ONNXImportOptions &options);

} // namespace mlir::rp

#endif // RP_IMPORT_ONNX_IMPORTER_H
