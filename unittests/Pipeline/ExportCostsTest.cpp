//===- ExportCostsTest.cpp - the plan export reuses the passes' profiles --===//
//
// rp-compile runs the plan export as its pass manager's last step, handing
// it the CostModel analysis, so the plan's predicted times take the
// hardware profile the passes parsed instead of parsing it again. Checked
// by removing the profile file after the passes: the export that reuses the
// analysis still succeeds, one without it cannot read the file.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/TrainPipeline.h"
#include "rp/Import/ONNX/ImportPipeline.h"
#include "rp/InitAllDialects.h"
#include "rp/Target/PlanExport.h"
#include "rp/timing/Hardware.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace mlir;

namespace {

/// The export as a pass manager's last step (as rp-compile runs it), after
/// the profile file is gone.
struct ExportAfterRemoving
    : public PassWrapper<ExportAfterRemoving, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExportAfterRemoving)

  ExportAfterRemoving(std::string profile, std::string dir,
                      FailureOr<size_t> &reused, FailureOr<size_t> &alone)
      : profile(std::move(profile)), dir(std::move(dir)), reused(reused),
        alone(alone) {}

  void runOnOperation() override {
    ASSERT_FALSE(llvm::sys::fs::remove(profile));
    mlir::rp::PlanExportOptions out;
    out.irDir = dir;
    out.planDir = dir;
    reused = mlir::rp::exportPlanToFile(getOperation(), out, dir + "/a.rpplan",
                                        getAnalysisManager());
    alone = mlir::rp::exportPlanToFile(getOperation(), out, dir + "/b.rpplan");
    markAllAnalysesPreserved();
  }

  std::string profile, dir;
  FailureOr<size_t> &reused, &alone;
};

TEST(ExportCostsTest, ReusesTheProfileThePassesParsed) {
  SmallString<128> scratch;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("rp-export-costs", scratch));
  std::string dir = scratch.str().str();
  // A profile of its own, in a file: the host profile's text.
  std::string text, source, error;
  ASSERT_TRUE(::rp::timing::readHardwareProfile("host", text, source, error))
      << error;
  std::string profile = dir + "/hw.json";
  std::ofstream(profile) << text;

  DialectRegistry registry;
  mlir::rp::registerAllDialects(registry);
  MLIRContext context(registry);
  mlir::rp::ONNXImportOptions import;
  import.weightsPath = dir + "/model.weights.bin";
  import.irDir = dir;
  OwningOpRef<ModuleOp> module = mlir::rp::importONNXModel(
      std::string(RP_TEST_MODELS) + "/gpt_op17.onnx", &context, import);
  ASSERT_TRUE(module);
  ASSERT_TRUE(succeeded(
      mlir::rp::runPreparePipeline(*module, import.weightsPath, import.irDir)));

  PassManager pm(&context);
  mlir::rp::TrainPipelineOptions options;
  options.devices = 2;
  options.hw = profile;
  mlir::rp::buildTrainPipeline(pm, options);
  FailureOr<size_t> reused = failure(), alone = failure();
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    messages.push_back(d.str());
    return success();
  });
  pm.addPass(
      std::make_unique<ExportAfterRemoving>(profile, dir, reused, alone));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  EXPECT_TRUE(succeeded(reused));
  EXPECT_TRUE(failed(alone));
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.back().find("hw.json"), std::string::npos)
      << messages.back();
}

} // namespace
