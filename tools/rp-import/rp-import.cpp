//===- rp-import.cpp - ONNX model to rp graph -----------------------------===//
//
// rp-import MODEL.onnx -o OUT.mlir [--shape NAME=2x2048] [--frozen REGEX]
//
// Imports (mechanically: the importer runs no pass), then runs the
// rp-prepare pipeline (fold the shape arithmetic, fuse, group layers,
// verify) unless --prepare=false. Exit codes: 0 ok, 1 bad input, 2 internal
// error.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/Import/ONNX/Importer.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Support/WeightsWriter.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"));
static cl::opt<bool> listOps("list-ops",
                             cl::desc("print the ONNX ops rp-import handles"));
static cl::opt<bool> listFoldedOps(
    "list-folded-ops",
    cl::desc("print the ONNX ops rp-import folds into constants when their "
             "inputs are input-independent"));
static cl::opt<std::string> outputPath("o",
                                       cl::desc("output .mlir ('-' is "
                                                "stdout)"),
                                       cl::value_desc("file"), cl::init("-"));
static cl::opt<bool>
    prepare("prepare", cl::init(true),
            cl::desc("run the rp-prepare pipeline on the import (false: the "
                     "mechanical import alone)"));
static cl::opt<bool> printLayers(
    "print-layers",
    cl::desc("print the layers found, with op and parameter counts"));

int main(int argc, char **argv) {
  rp::installLastResort("rp-import");
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  // rp-import's flags only (ToolOptions.cpp): LLVM's were 320 lines of
  // --help, and a bad value to some of them was an internal error.
  rp::dropForeignOptions(
      {"o", "list-ops", "list-folded-ops", "prepare", "print-layers"});
  rp::ImportCLOptions importOptions;
  cl::ParseCommandLineOptions(argc, argv, "rp ONNX importer\n");

  if (listOps || listFoldedOps) {
    for (const std::string &op :
         listOps ? rp::supportedONNXOps() : rp::foldedONNXOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (inputPath.empty()) {
    llvm::errs() << "rp-import: give a model: rp-import MODEL.onnx -o "
                    "OUT.mlir\n";
    return 1;
  }
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  // Before any work: a FIFO or /dev/null is never replaced by the IR.
  if (std::string why = rp::checkOutputTarget(outputPath, "-o"); !why.empty()) {
    llvm::errs() << "rp-import: " << why << "\n";
    return 1;
  }
  auto options = importOptions.get(inputPath, outputPath, &context);
  if (failed(options))
    return 1;
  OwningOpRef<ModuleOp> module =
      rp::importONNXModel(inputPath, &context, *options);
  if (!module ||
      (prepare && failed(rp::runPreparePipeline(*module, options->weightsPath,
                                                options->irDir))))
    return 1;
  // The weight files are complete (the weights renamed into place, the
  // folded constants appended): the IR records their fingerprints, so a
  // crash before the IR's rename below leaves a pair rp-opt and rp-compile
  // refuse (rp-verify-weights) instead of the old IR over the new weights.
  rp::recordWeightFingerprints(*module, options->irDir);
  if (printLayers)
    rp::printLayerSummary(*module, llvm::outs());

  if (outputPath == "-" && printLayers)
    return 0;
  // Atomic and durable (AtomicWrite.h): a reader never sees a half-written
  // file, a full disk is an error.
  llvm::Error err = rp::writeFileAtomically(outputPath, [&](raw_ostream &os) {
    module->print(os);
    os << "\n";
  });
  if (err) {
    llvm::errs() << "rp-import: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  return 0;
}
