//===- ImportPipeline.h - what the tools share on an ONNX file --*- C++ -*-===//
//
// rp-import, rp-opt and rp-compile share the import flags, so that
// `rp-opt model.onnx` and `rp-import model.onnx` give the same graph. The
// importer is mechanical and runs no pass: the tools run the `rp-prepare`
// pipeline (rp/Dialect/RP/PreparePipeline.h) on what it returns.
//
//===----------------------------------------------------------------------===//

#ifndef RP_IMPORT_ONNX_IMPORTPIPELINE_H
#define RP_IMPORT_ONNX_IMPORTPIPELINE_H

#include "rp/Import/ONNX/Importer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::rp {

/// The import flags (--shape, --frozen, --padding-idx, --weights); construct
/// before parsing the command line.
struct ImportCLOptions {
  llvm::cl::list<std::string> shapes{
      "shape", llvm::cl::desc("static shape of an input: NAME=2x2048"),
      llvm::cl::value_desc("name=dims")};
  llvm::cl::list<std::string> frozen{
      "frozen",
      llvm::cl::desc("freeze float initializers matching this regular "
                     "expression (adds to the defaults)"),
      llvm::cl::value_desc("regex")};
  llvm::cl::list<std::string> paddingIdx{
      "padding-idx",
      llvm::cl::desc("the embedding initializer NAME is gathered with a "
                     "padding row ROW (nn.Embedding's padding_idx, which ONNX "
                     "drops): that row gets no gradient"),
      llvm::cl::value_desc("name=row")};
  llvm::cl::opt<std::string> weights{
      "weights",
      llvm::cl::desc("file for inline initializers (default: beside the "
                     "output, <output>.weights.bin)"),
      llvm::cl::value_desc("file")};

  /// Builds the import options for `input` written to `output` ('-' for
  /// stdout); errors are emitted on `context`.
  FailureOr<ONNXImportOptions> get(StringRef input, StringRef output,
                                   MLIRContext *context) const;
};

/// One line per layer: name, op count, parameter count and bytes.
void printLayerSummary(ModuleOp module, llvm::raw_ostream &os);

} // namespace mlir::rp

#endif // RP_IMPORT_ONNX_IMPORTPIPELINE_H
