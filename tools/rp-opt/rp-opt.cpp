//===- rp-opt.cpp - rp optimizer driver -----------------------------------===//
//
// Parses rp modules, runs rp passes and pipelines, prints the result. An
// input ending in `.onnx` is imported first, exactly as rp-import would
// (same flags, then the rp-prepare pipeline), so `rp-opt model.onnx --pass`
// works without an intermediate file. An IR file is checked against the
// fingerprints of its weight files first (rp-verify-weights), so that the
// new weights of an interrupted rp-import are refused beside the old IR.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/InitAllPasses.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Support/WeightsWriter.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

/// Imports an ONNX model and returns its IR as the buffer MlirOptMain reads.
static std::unique_ptr<llvm::MemoryBuffer>
importToBuffer(StringRef input, StringRef output,
               const rp::ImportCLOptions &cl) {
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  auto options = cl.get(input, output, &context);
  if (failed(options))
    return nullptr;
  OwningOpRef<ModuleOp> module = rp::importONNXModel(input, &context, *options);
  if (!module || failed(rp::runPreparePipeline(*module, options->weightsPath,
                                               options->irDir)))
    return nullptr;
  rp::recordWeightFingerprints(*module, options->irDir);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return llvm::MemoryBuffer::getMemBufferCopy(text, input);
}

int main(int argc, char **argv) {
  rp::installLastResort("rp-opt");
  rp::registerAllPasses();
  // Passes, their options and MLIR's flags are registered below, by
  // registerAndParseCLIOptions; what is registered now is LLVM's own
  // (ToolOptions.cpp).
  rp::dropForeignOptions({});
  DialectRegistry registry;
  rp::registerAllDialects(registry);
  rp::ImportCLOptions importOptions;
  auto [input, output] =
      registerAndParseCLIOptions(argc, argv, "rp optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> buffer;
  std::string error;
  if (std::string why = rp::checkOutputTarget(output, "-o"); !why.empty()) {
    llvm::errs() << "rp-opt: " << why << "\n";
    return 1;
  }
  if (StringRef(input).ends_with(".onnx")) {
    buffer = importToBuffer(input, output, importOptions);
    if (!buffer)
      return 1;
  } else {
    if (std::string why = rp::checkRegularInput(input, "the input");
        !why.empty()) {
      llvm::errs() << "rp-opt: " << why << "\n";
      return 1;
    }
    buffer = openInputFile(input, &error);
    if (!buffer) {
      llvm::errs() << "rp-opt: " << error << "\n";
      return 1;
    }
    // Params name their files relative to the IR's folder; from stdin that
    // folder is unknown, so only a file is checked.
    if (input != "-") {
      std::string irDir = llvm::sys::path::parent_path(input).str();
      MlirOptMainConfig passes = config;
      config.setPassPipelineSetupFn(
          [passes, irDir](PassManager &pm) -> LogicalResult {
            pm.addPass(rp::createVerifyWeightsPass(
                {irDir.empty() ? std::string(".") : irDir}));
            return passes.setupPassPipeline(pm);
          });
    }
  }
  if (output == "-")
    return failed(
        MlirOptMain(llvm::outs(), std::move(buffer), registry, config));
  // A file goes through the tools' one atomic writer (AtomicWrite.h): never
  // half written, and never replacing a FIFO, a device or a link.
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(MlirOptMain(os, std::move(buffer), registry, config)))
    return 1;
  if (llvm::Error err = rp::writeFileAtomically(
          output, [&](llvm::raw_ostream &out) { out << text; })) {
    llvm::errs() << "rp-opt: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
