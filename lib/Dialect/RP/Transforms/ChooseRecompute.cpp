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
    if (!grains.empty()) {
      if (!attr) {
        func->emitError("has no rp.partition attribute; run rp-partition "
                        "first");
        return signalPassFailure();
      }
      SmallVector<StringRef> names;
      StringRef(grains).split(names, ',');
      SmallVector<RecomputeGrain> given;
      for (StringRef name : names) {
        std::optional<RecomputeGrain> g = symbolizeRecomputeGrain(name.trim());
        if (!g || *g == RecomputeGrain::automatic) {
          func->emitError("recompute grain '")
              << name.trim() << "' in '" << grains
              << "': each backward stage's grain is stage or layer";
          return signalPassFailure();
        }
        given.push_back(*g);
      }
      size_t stages = attr.getBackward().size() - 1;
      if (given.size() != stages) {
        func->emitError("'")
            << grains << "' gives " << given.size() << " recompute grain"
            << (given.size() == 1 ? "" : "s") << " but the partition has "
            << stages << " backward stage" << (stages == 1 ? "" : "s")
            << " after the tail; give one per stage, in the order of "
            << "the bwd list after the tail";
        return signalPassFailure();
      }
      (*func)->setAttr("rp.partition", attr.withGrains(given));
      return;
    }
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
