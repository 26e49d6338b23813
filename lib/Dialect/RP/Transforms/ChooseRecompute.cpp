//===- ChooseRecompute.cpp - rp-choose-recompute --------------------------===//
//
// Resolves `recompute = "auto"` into one grain per backward stage: layer
// grain only where stage grain does not fit the device budget.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/RecomputeChoice.h"

namespace mlir::rp {
#define GEN_PASS_DEF_CHOOSERECOMPUTEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct ChooseRecomputePass
    : mlir::rp::impl::ChooseRecomputePassBase<ChooseRecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (budgetGiB < 0) {
      mlir::emitError(module.getLoc())
          << "rp-choose-recompute: budget-gib must not be negative, got "
          << static_cast<double>(budgetGiB);
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> func = layeredFunction(module);
    if (failed(func))
      return signalPassFailure();
    auto attr = (*func)->getAttrOfType<PartitionAttr>("rp.partition");
    // Only attributes change: the layer costs stay valid.
    markAnalysesPreserved<CostModel>();
    if (!attr || attr.isMixed() ||
        attr.getRecompute() != RecomputeGrain::automatic)
      return;
    FailureOr<PipelineInputs> in =
        loadPipelineInputs(module, getAnalysis<CostModel>());
    if (failed(in))
      return signalPassFailure();
    GrainTarget target;
    target.kind = attr.getSchedule();
    target.devices = attr.getDevices();
    target.microbatches = attr.getMicrobatches();
    target.hw = in->hw;
    target.budget = budgetGiB > 0
                        ? static_cast<int64_t>(budgetGiB * (1ull << 30))
                        : static_cast<int64_t>(in->hw.memoryBytes());
    std::string error;
    FailureOr<GrainChoice> choice =
        chooseRecomputeGrains(in->partition, in->costs, target, error);
    if (failed(choice)) {
      in->func.emitError(error);
      return signalPassFailure();
    }
    SmallVector<RecomputeGrain> grains;
    for (bool layer : choice->layerGrain)
      grains.push_back(layer ? RecomputeGrain::layer : RecomputeGrain::stage);
    // No backward stage after the tail: nothing to recompute.
    if (grains.empty())
      grains.push_back(RecomputeGrain::stage);
    (*func)->setAttr("rp.partition", attr.withGrains(grains));
  }
};

} // namespace
