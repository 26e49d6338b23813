//===- PartitionPass.cpp - rp-partition -----------------------------------===//
//
// Records the stages a partitioner cuts as the function's rp.partition.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"
#include "rp/Analysis/PartitionPolicy.h"

#include "rp/Analysis/HostMemory.h"

#include "llvm/Support/FileSystem.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PARTITIONPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct PartitionPass : mlir::rp::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The schedule, the partitioner and the dispatch are enum options: a
    // name outside their ODS enums is refused when the options are parsed.
    const ScheduleKind kind = schedule;
    const Partitioner how = partitioner;
    if (devices == 0 || !(weightBudget > 0 && weightBudget <= 1) ||
        stageBytes < 0 || budgetGiB < 0 || !(hostBudgetGiB >= 0) ||
        !(hostSlackPct >= 0 && hostSlackPct <= 100)) {
      module.emitError() << "rp-partition needs devices >= 1, 0 < "
                            "weight-budget <= 1, stage-bytes >= 0, "
                            "budget-gib >= 0, host-budget-gib >= 0 and "
                            "0 <= host-slack-pct <= 100";
      return signalPassFailure();
    }
    if (tailJobs > 2 || (tailJobs == 2 && kind != ScheduleKind::roundRobin)) {
      module.emitError() << "rp-partition tail-jobs=" << unsigned(tailJobs)
                         << ": plans run the fused tail as 1 or 2 round-robin "
                            "stage jobs (0 lets rp's partitioner choose); a "
                            "tail split by layers is in the timing model only "
                            "(rp-print-partition tail-pair=N)";
      return signalPassFailure();
    }
    if (how == Partitioner::roundpipe && kind != ScheduleKind::roundRobin) {
      module.emitError() << "partitioner=roundpipe cuts round-robin stages; "
                         << stringifyScheduleKind(kind)
                         << " uses balanced static stages";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> func = layeredFunction(module);
    if (failed(func))
      return signalPassFailure();
    CostModel &model = getAnalysis<CostModel>();
    FailureOr<const CostInputs *> inputs =
        model.inputs(hw, measured, &getContext());
    if (failed(inputs))
      return signalPassFailure();
    FailureOr<const std::vector<LayerCost> *> costs =
        model.layerCosts(*func, hw, measured);
    if (failed(costs))
      return signalPassFailure();
    // Only attributes change: the passes after this one reuse the costs.
    markAnalysesPreserved<CostModel>();
    PartitionRequest request;
    request.schedule = kind;
    request.devices = devices;
    request.microbatches =
        microbatches ? unsigned(microbatches) : defaultMicrobatches(devices);
    request.partitioner = how;
    request.stages = stages;
    request.dispatch = dispatch;
    request.tailJobs = tailJobs;
    request.cap = stageByteCap(stageBytes, (*inputs)->hw, weightBudget);
    request.layerGrain = recompute == RecomputeGrain::layer;
    request.budgetBytes = int64_t(budgetGiB * double(1ull << 30));
    request.hostStagedBytes = hostStagedBudget(module, hostBudgetGiB);
    request.hostSlack = hostSlackPct / 100;
    // The searches of this compile keep their results there: a pass that
    // asks for the same search again (rp-print-partition) gets it back.
    request.memo = &model.searchMemo();
    // `auto` chooses the grain for speed where rp's partitioner cuts the
    // round-robin stages; elsewhere (the user's stages, the other
    // partitioners) the stages are given, and rp-choose-recompute keeps
    // stage grain wherever it fits.
    request.chooseGrain = recompute == RecomputeGrain::automatic &&
                          stages.empty() && kind == ScheduleKind::roundRobin &&
                          how == Partitioner::rp;
    request.deferRange = deferGrainRange;
    if (std::string error; !readGrainRanges(request, hw, **inputs, error)) {
      module.emitError() << error;
      return signalPassFailure();
    }
    GrainSpeedChoice grain;
    FailureOr<Partition> p =
        choosePartition(*func, **costs, request, (*inputs)->hw, &grain);
    if (failed(p))
      return signalPassFailure();
    SmallVector<int64_t> fwd, bwd;
    stageSizes(*p, fwd, bwd);
    // Layer grain chosen is recorded as the user's `layer` would be, so
    // that the schedule, its transfers and rp-autodiff realize it;
    // rp.recompute_choice tells the passes that weigh options later that
    // `auto` chose it. Stage grain chosen stays `auto` for
    // rp-choose-recompute's memory fallback.
    RecomputeGrain recorded = request.chooseGrain && grain.layer
                                  ? RecomputeGrain::layer
                                  : RecomputeGrain(recompute);
    (*func)->setAttr("rp.partition",
                     PartitionAttr::get(&getContext(), kind, devices,
                                        request.microbatches,
                                        HardwareAttr::get(&getContext(), hw),
                                        how, recorded, fwd, bwd, p->tailJobs));
    auto choice = getContext()
                      .getLoadedDialect<RPDialect>()
                      ->getRecomputeChoiceAttrHelper();
    if (request.chooseGrain)
      choice.setAttr(*func, StringAttr::get(&getContext(), grain.reason));
    else
      choice.removeAttr(*func);
    model.grainRange = request.chooseGrain ? grain.range : nullptr;
    // The passes after this one (the schedule, its transfers and memory,
    // the plan's predicted times) cost the layers the same way.
    auto measuredAttr =
        getContext().getLoadedDialect<RPDialect>()->getMeasuredAttrHelper();
    if (!measured.empty()) {
      SmallString<256> path(measured);
      (void)llvm::sys::fs::make_absolute(path);
      measuredAttr.setAttr(*func, StringAttr::get(&getContext(), path));
    } else
      measuredAttr.removeAttr(*func);
  }
};

} // namespace
