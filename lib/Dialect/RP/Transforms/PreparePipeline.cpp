//===- PreparePipeline.cpp - rp-prepare -----------------------------------===//

#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::rp;

void mlir::rp::buildPreparePipeline(OpPassManager &pm,
                                    const PrepareOptions &options) {
  // CSE merges the per-layer copies of exporter constants, which exposes
  // folds the first round could not see.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  // Decomposed norms, activations and attention become one op each, so the
  // runtime runs one kernel and autodiff applies one rule. Layer norm goes
  // first: its core would otherwise also read as an RMS norm.
  pm.addPass(createFuseLayerNormPass());
  pm.addPass(createFuseRmsNormPass());
  pm.addPass(createFuseGeluPass());
  pm.addPass(createFuseSiluPass());
  pm.addPass(createFuseAttentionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // After fusion, which reads constant masks (a causal one becomes a flag),
  // and before grouping, which passes params into layers.
  ExternalizeConstantsPassOptions externalize;
  externalize.weights = options.weights;
  externalize.irDir = options.irDir;
  pm.addPass(createExternalizeConstantsPass(externalize));
  pm.addPass(createGroupLayersPass());
  pm.addPass(createVerifyGraphPass());
}

void mlir::rp::registerPreparePipeline() {
  PassPipelineRegistration<PrepareOptions>(
      "rp-prepare",
      "the cleanups after an import: canonicalize, cse, fusions, large "
      "constants out of the text, layer grouping, graph verification",
      buildPreparePipeline);
}

LogicalResult mlir::rp::runPreparePipeline(ModuleOp module, StringRef weights,
                                           StringRef irDir) {
  PrepareOptions options;
  options.weights = weights.str();
  options.irDir = irDir.str();
  PassManager pm(module.getContext());
  buildPreparePipeline(pm, options);
  return pm.run(module);
}
