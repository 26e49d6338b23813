//===- PreparePipeline.h - the cleanups after an import ---------*- C++ -*-===//
//
// `--rp-prepare="weights=FILE ir-dir=DIR"`: what every graph goes through
// between its producer (rp-import's mechanical import, rp.trace's text, a
// hand-written .mlir) and the training or forward compile: canonicalize
// and CSE (shape arithmetic folds away), the fusions, the large constants
// out of the text, layer grouping and graph verification. rp-import,
// rp-opt (on a .onnx input), rp-compile and rp.trace all run it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_PREPAREPIPELINE_H
#define RP_DIALECT_RP_PREPAREPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::rp {

struct PrepareOptions : public PassPipelineOptions<PrepareOptions> {
  Option<std::string> weights{
      *this, "weights",
      llvm::cl::desc("the weights file large folded constants are appended "
                     "to (empty: they stay in the IR)"),
      llvm::cl::init("")};
  Option<std::string> irDir{
      *this, "ir-dir",
      llvm::cl::desc("the folder the IR's param paths are relative to"),
      llvm::cl::init(".")};
};

/// canonicalize, cse, canonicalize, the fusions (layer norm first: its core
/// would otherwise also read as an RMS norm), canonicalize, cse,
/// rp-externalize-constants, rp-group-layers, rp-verify-graph.
void buildPreparePipeline(OpPassManager &pm, const PrepareOptions &options);

void registerPreparePipeline();

/// Runs rp-prepare on `module`: what a tool does after an import, with the
/// import's weights file and IR folder (ONNXImportOptions).
LogicalResult runPreparePipeline(ModuleOp module, llvm::StringRef weights,
                                 llvm::StringRef irDir);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_PREPAREPIPELINE_H
