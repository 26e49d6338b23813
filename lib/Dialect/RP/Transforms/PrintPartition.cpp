//===- PrintPartition.cpp - rp-print-partition ----------------------------===//
//
// Shows the stage lists a partitioner cuts, for people and for lit tests.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "rp/Analysis/Partition.h"
#include "rp/Analysis/PartitionSearch.h"
#include "rp/Analysis/Pipeline.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PRINTPARTITIONPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

void printStages(llvm::raw_ostream &os, StringRef kind,
                 llvm::ArrayRef<StageRange> stages) {
  os << kind << " sizes=";
  llvm::interleave(
      stages, os, [&](const StageRange &s) { os << s.size(); }, ",");
  os << " ranges=";
  llvm::interleave(
      stages, os,
      [&](const StageRange &s) { os << s.begin << "-" << s.end - 1; }, " ");
  os << "\n";
}

struct PrintPartitionPass
    : rp::impl::PrintPartitionPassBase<PrintPartitionPass> {
  using Base::Base;

  unsigned numMicrobatches() const {
    return microbatches ? unsigned(microbatches) : devices + 1;
  }

  /// rp's or RoundPipe's partition, or the user's checked against the cap.
  FailureOr<Partition> partition(func::FuncOp func,
                                 llvm::ArrayRef<LayerCost> costs, int64_t cap,
                                 const HardwareProfile &profile) {
    if (stages.empty() && partitioner == "rp") {
      SearchTarget target{profile, devices, numMicrobatches(), cap};
      return partitionForStepTime(costs, target);
    }
    if (stages.empty()) {
      std::string raisedFor;
      Partition p = partitionRoundPipe(costs, cap, devices, &raisedFor);
      if (!raisedFor.empty())
        mlir::emitWarning(func.getLoc())
            << "layer '" << raisedFor
            << "' needs more than the per-stage cap of " << cap
            << " bytes; the cap is raised to " << p.stageBytes
            << " bytes (RoundPipe's rule); give more memory "
               "to weights or train fewer of its parameters";
      return p;
    }
    FailureOr<Partition> p = parseStages(
        stages, costs.size(), [&] { return mlir::emitError(func.getLoc()); });
    if (failed(p))
      return failure();
    p->stageBytes = cap;
    auto check = [&](const StageRange &s, StringRef kind,
                     bool withGradients) -> LogicalResult {
      int64_t bytes = rp::stageBytes(s, costs, withGradients);
      if (bytes <= cap)
        return success();
      return mlir::emitError(func.getLoc())
             << kind << " stage of layers " << s.begin << "-" << s.end - 1
             << " ('" << costs[s.begin].name << "' to '"
             << costs[s.end - 1].name << "') needs " << bytes
             << " bytes of weights" << (withGradients ? " and gradients" : "")
             << ", over the per-stage cap of " << cap
             << " bytes; split the stage or raise weight-budget";
    };
    for (const StageRange &s : p->forward)
      if (failed(check(s, "forward", false)))
        return failure();
    if (failed(check(p->tail, "tail", true)))
      return failure();
    for (const StageRange &s : p->backward)
      if (failed(check(s, "backward", true)))
        return failure();
    scorePartition(*p, costs, devices);
    return p;
  }

  void runOnOperation() override {
    if (devices == 0 || !(weightBudget > 0 && weightBudget <= 1) ||
        stageBytes < 0 || (partitioner != "rp" && partitioner != "roundpipe")) {
      getOperation().emitError()
          << "rp-print-partition needs devices >= 1, 0 < weight-budget <= 1, "
             "stage-bytes >= 0 and partitioner rp or roundpipe";
      return signalPassFailure();
    }
    FailureOr<CostInputs> inputs = loadCostInputs(hw, measured, &getContext());
    if (failed(inputs))
      return signalPassFailure();
    int64_t cap =
        stageBytes
            ? static_cast<int64_t>(stageBytes)
            : static_cast<int64_t>(inputs->hw.memoryBytes() * weightBudget / 2);
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.getOps<LayerOp>().empty())
        continue;
      FailureOr<std::vector<LayerCost>> costs = analyzeLayerCosts(
          func, inputs->hw, inputs->measured ? &*inputs->measured : nullptr);
      if (failed(costs))
        return signalPassFailure();
      FailureOr<Partition> p = partition(func, *costs, cap, inputs->hw);
      if (failed(p))
        return signalPassFailure();
      os << "partition @" << func.getSymName() << " partitioner="
         << (stages.empty() ? std::string(partitioner) : "user")
         << " hw=" << inputs->hw.name << " layers=" << costs->size()
         << " stages=" << p->numStages() << " devices=" << devices
         << " stage_bytes=" << p->stageBytes
         << llvm::format(" bottleneck_ms=%.6g proxy_cost_ms=%.6g\n",
                         p->bottleneckMs, p->proxyCostMs);
      os << "stages=" << formatStages(*p) << "\n";
      printStages(os, "forward", p->forward);
      printStages(os, "tail", p->tail);
      printStages(os, "backward", p->backward);
      unsigned m = numMicrobatches();
      std::string stuck;
      std::optional<Timing> timing = estimateTiming(
          roundRobinSchedule(*p, *costs, inputs->hw, devices, m), &stuck);
      if (!timing) {
        mlir::emitError(func.getLoc())
            << "the round-robin schedule of this partition deadlocks at '"
            << stuck << "'; this is a bug in rp, please report it";
        return signalPassFailure();
      }
      os << "timing schedule=round-robin microbatches=" << m
         << llvm::format(" step_ms=%.6g bubble_pct=%.4g\n", timing->iterationMs,
                         100 * timing->bubbleFraction());
      if (stages.empty() && partitioner == "rp") {
        SearchTarget target{inputs->hw, devices, m, cap};
        double theirs = estimatedStepMs(
            partitionRoundPipe(*costs, cap, devices), *costs, target);
        os << llvm::format("versus roundpipe step_ms=%.6g ratio=%.4f\n", theirs,
                           timing->iterationMs / theirs);
      }
    }
    os.flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
