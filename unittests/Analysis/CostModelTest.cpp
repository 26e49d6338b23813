//===- CostModelTest.cpp - profiles parsed once, costs derived once -------===//
//
// The CostModel analysis keeps what it parsed for the whole pass-manager
// run and the layer costs only while the passes preserve it: a stale cost
// after a pass that changed the graph would plan the wrong step silently.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/CostModel.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// One layer: an 8x8 f32 matmul whose 256-byte weight is trainable.
const char *const kModel = R"mlir(
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %h = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %h : tensor<2x8xf32>
}
)mlir";

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context.loadDialect<RPDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kModel, &context);
  }

  func::FuncOp main() { return *module->getOps<func::FuncOp>().begin(); }

  int64_t gradBytes(CostModel &model) {
    FailureOr<const std::vector<LayerCost> *> costs =
        model.layerCosts(main(), "host", "");
    return succeeded(costs) ? (*costs)->front().gradBytes : -1;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(CostModelTest, ParsesEachProfileOnceForEveryPass) {
  ASSERT_TRUE(module);
  CostModel model(*module);
  FailureOr<const CostInputs *> host = model.inputs("host", "", &context);
  ASSERT_TRUE(succeeded(host));
  EXPECT_EQ(*model.inputs("host", "", &context), *host);
  FailureOr<const CostInputs *> gpu = model.inputs("rtx4090", "", &context);
  ASSERT_TRUE(succeeded(gpu));
  EXPECT_NE(*gpu, *host);
  EXPECT_EQ((*gpu)->hw.name, "rtx4090");
  // A pass that preserves nothing leaves the parsed profiles alone: no IR
  // change alters a file.
  AnalysisManager::PreservedAnalyses none;
  EXPECT_FALSE(model.isInvalidated(none));
  EXPECT_EQ(*model.inputs("host", "", &context), *host);
  // A scratch model (for a copy of the IR) shares them too.
  CostModel scratch = model.forScratch();
  EXPECT_EQ(*scratch.inputs("host", "", &context), *host);
}

TEST_F(CostModelTest, KeepsLayerCostsOnlyWhilePreserved) {
  ASSERT_TRUE(module);
  CostModel model(*module);
  EXPECT_EQ(gradBytes(model), 256);
  // Freezing the weight changes the costs; a pass that says it kept them
  // keeps the old ones, one that does not gets them derived again.
  ParamOp w = *main().getOps<ParamOp>().begin();
  w.setTrainable(false);
  AnalysisManager::PreservedAnalyses kept;
  kept.preserve<CostModel>();
  EXPECT_FALSE(model.isInvalidated(kept));
  EXPECT_EQ(gradBytes(model), 256);
  AnalysisManager::PreservedAnalyses none;
  EXPECT_FALSE(model.isInvalidated(none));
  EXPECT_EQ(gradBytes(model), 0);
  // A scratch model derives its own.
  w.setTrainable(true);
  CostModel scratch = model.forScratch();
  EXPECT_EQ(gradBytes(scratch), 256);
  EXPECT_EQ(gradBytes(model), 0);
}

TEST_F(CostModelTest, ReportsAnUnknownProfileEveryTime) {
  ASSERT_TRUE(module);
  std::vector<std::string> messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    messages.push_back(d.str());
    return success();
  });
  CostModel model(*module);
  EXPECT_TRUE(failed(model.inputs("rtx5090", "", &context)));
  EXPECT_TRUE(failed(model.layerCosts(main(), "rtx5090", "")));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[1].find("unknown hardware profile 'rtx5090'"),
            std::string::npos)
      << messages[1];
}

} // namespace
