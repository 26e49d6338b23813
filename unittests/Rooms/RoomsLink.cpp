//===- RoomsLink.cpp - the importer and the exporter without the passes ---===//
//
// Built, never run: a program that takes the importer's and the plan
// exporter's entry points and links only their libraries (RPImportONNX,
// RPPlanExport and what they name: the dialect, lib/Analysis, lib/Support,
// the contract). A call from either into a file of the passes
// (MLIRRPTransforms) leaves a symbol this link cannot find, so the rooms of
// docs/architecture.md are kept by the build, not by review.
//
//===----------------------------------------------------------------------===//

#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/Import/ONNX/Importer.h"
#include "rp/Target/PlanExport.h"

#include <cstdio>

int main() {
  using namespace mlir::rp;
  // Taking each address pulls its object file, and what it calls, in.
  mlir::FailureOr<size_t> (*toFile)(mlir::ModuleOp, const PlanExportOptions &,
                                    llvm::StringRef) = exportPlanToFile;
  const void *entries[] = {reinterpret_cast<const void *>(&importONNXModel),
                           reinterpret_cast<const void *>(&printLayerSummary),
                           reinterpret_cast<const void *>(&exportPlan),
                           reinterpret_cast<const void *>(toFile),
                           reinterpret_cast<const void *>(&predictedStep)};
  // Printed, so that the optimizer keeps every reference.
  for (const void *entry : entries)
    std::printf("%p\n", entry);
  return 0;
}
