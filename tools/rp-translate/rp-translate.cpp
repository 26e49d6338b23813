//===- rp-translate.cpp - rp IR to other formats --------------------------===//
//
// rp-translate --rp-export-plan PLAN.mlir -o MODEL.rpplan
//
// Writes the versioned plan file the runtime loads. Weight files are
// referenced relative to the plan's folder. Exit codes: 0 ok, 1 bad input.
//
//===----------------------------------------------------------------------===//

#include "rp/InitAllDialects.h"
#include "rp/Support/AtomicWrite.h"
#include "rp/Support/ToolGuards.h"
#include "rp/Support/WeightsWriter.h"
#include "rp/Target/PlanExport.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputPath(cl::Positional, cl::desc("<plan.mlir>"),
                                      cl::init("-"));
static cl::opt<std::string> outputPath("o", cl::desc("output file"),
                                       cl::value_desc("file"), cl::init("-"));
static cl::opt<bool> exportPlanFlag(
    "rp-export-plan",
    cl::desc("write the .rpplan file the runtime loads (contract/schema/"
             "plan.fbs)"));

/// The folder of `path`, "." for a bare file name or stdin/stdout.
static std::string folderOf(StringRef path) {
  StringRef dir = llvm::sys::path::parent_path(path);
  return path == "-" || dir.empty() ? "." : dir.str();
}

int main(int argc, char **argv) {
  rp::installLastResort("rp-translate");
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  rp::dropForeignOptions({"o", "rp-export-plan"});
  cl::ParseCommandLineOptions(argc, argv, "rp translation tool\n");
  if (!exportPlanFlag) {
    llvm::errs() << "rp-translate: choose a translation: --rp-export-plan\n";
    return 1;
  }

  DialectRegistry registry;
  rp::registerAllDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  if (std::string why = rp::checkRegularInput(inputPath, "the input");
      !why.empty()) {
    llvm::errs() << "rp-translate: " << why << "\n";
    return 1;
  }
  if (std::string why = rp::checkOutputTarget(outputPath, "-o"); !why.empty()) {
    llvm::errs() << "rp-translate: " << why << "\n";
    return 1;
  }
  auto file = openInputFile(inputPath, &error);
  if (!file) {
    llvm::errs() << "rp-translate: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  // The plan reads the weights the params name: refuse files that are not
  // the ones the IR was written with (rp-verify-weights).
  if (!module || failed(verify(*module)) ||
      failed(rp::verifyWeightFingerprints(*module, folderOf(inputPath))))
    return 1;

  rp::PlanExportOptions options;
  options.irDir = folderOf(inputPath);
  options.planDir = folderOf(outputPath);
  options.producer = "rp-translate " + inputPath;
  if (failed(rp::exportPlanToFile(*module, options, outputPath)))
    return 1;
  return 0;
}
