//===- PrintPartition.cpp - rp-print-partition ----------------------------===//
//
// Shows the stage lists a partitioner cuts, for people and for lit tests.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "rp/Analysis/PartitionPolicy.h"

#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/Partition.h"
#include "rp/Analysis/PartitionSearch.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/SteadyState.h"

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
    : mlir::rp::impl::PrintPartitionPassBase<PrintPartitionPass> {
  using Base::Base;

  unsigned numMicrobatches() const {
    return microbatches ? unsigned(microbatches) : defaultMicrobatches(devices);
  }

  void runOnOperation() override {
    if (devices == 0 || !(weightBudget > 0 && weightBudget <= 1) ||
        stageBytes < 0) {
      getOperation().emitError()
          << "rp-print-partition needs devices >= 1, 0 < weight-budget <= 1 "
             "and stage-bytes >= 0";
      return signalPassFailure();
    }
    if (tailJobs > 3) {
      getOperation().emitError()
          << "rp-print-partition: tail-jobs=" << unsigned(tailJobs)
          << " is not supported; the fused tail is timed as 1 or 2 stage "
             "jobs, 3 a pair split by layers (0 lets rp's partitioner choose "
             "between 1 and 2)";
      return signalPassFailure();
    }
    const Dispatch dispatchKind = dispatch;
    CostModel &model = getAnalysis<CostModel>();
    FailureOr<const CostInputs *> loaded =
        model.inputs(hw, measured, &getContext());
    if (failed(loaded))
      return signalPassFailure();
    const CostInputs *inputs = *loaded;
    int64_t cap = stageByteCap(stageBytes, inputs->hw, weightBudget);
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || func.getOps<LayerOp>().empty())
        continue;
      FailureOr<const std::vector<LayerCost> *> derived =
          model.layerCosts(func, hw, measured);
      if (failed(derived))
        return signalPassFailure();
      const std::vector<LayerCost> *costs = *derived;
      PartitionRequest request;
      request.devices = devices;
      request.microbatches = numMicrobatches();
      request.partitioner = partitioner;
      request.stages = stages;
      request.cap = cap;
      request.dispatch = dispatchKind;
      request.tailJobs = tailJobs;
      // rp-partition's search of the same request, if it ran, is not
      // run again.
      request.memo = &model.searchMemo();
      // The floor ties broken as rp-partition breaks them.
      if (std::string error; !readGrainRanges(request, hw, *inputs, error)) {
        func.emitError(error);
        return signalPassFailure();
      }
      FailureOr<Partition> p =
          choosePartition(func, *costs, request, inputs->hw);
      if (failed(p))
        return signalPassFailure();
      if (tailPair > 0) {
        if (tailPair >= p->tail.size() || p->tailJobs != 1) {
          mlir::emitError(func.getLoc())
              << "tail-pair=" << unsigned(tailPair)
              << " must leave the fused tail of " << p->tail.size()
              << " layers at least one layer, with tail-jobs=1";
          return signalPassFailure();
        }
        p->tailPairAt = tailPair;
      }
      os << "partition @" << func.getSymName() << " partitioner="
         << (stages.empty() ? stringifyPartitioner(partitioner) : "user")
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
      std::string stuck, error;
      FailureOr<Pipeline> pl = lowerSchedule(
          *p, *costs, ScheduleKind::roundRobin, devices, m, error);
      // As the plan runs it: recompute split from backward.
      std::optional<Timing> timing;
      if (succeeded(pl))
        timing = estimateTiming(
            recomputeSplit(
                roundRobinSchedule(*p, *costs, inputs->hw, devices, m), *pl,
                *costs),
            &stuck);
      std::optional<SteadyState> steady;
      if (timing && succeeded(pl))
        steady = dispatchPasses(*pl, *costs, inputs->hw, dispatchKind,
                                /*syncOptimizer=*/false, &stuck);
      if (!steady) {
        mlir::emitError(func.getLoc())
            << "the round-robin schedule of this partition deadlocks at '"
            << stuck << "'; this is a bug in rp, please report it";
        return signalPassFailure();
      }
      // step_ms is the steady state of a continuous run; one_step_ms a
      // step run alone (fill and drain included), as a single-iteration
      // simulator times it.
      os << "timing schedule=round-robin microbatches=" << m
         << llvm::format(" step_ms=%.6g bubble_pct=%.4g", steady->stepMs,
                         100 * steady->bubble())
         << llvm::format(" one_step_ms=%.6g one_step_bubble_pct=%.4g",
                         timing->iterationMs, 100 * timing->bubbleFraction())
         << llvm::format(" busy_ratio=%.4g", steady->busyRatio())
         << " pass_shift=" << steady->shift << " tail_jobs="
         << (p->tailPairAt ? 1 : pl->jobs.size() - p->numStages() + 1);
      if (p->tailPairAt)
        os << " tail_pair_at=" << p->tailPairAt;
      os << "\n";
      if (stages.empty() && partitioner == Partitioner::rp) {
        SearchTarget target{inputs->hw, devices, m, cap, dispatchKind};
        double theirs = estimatedStepMs(
            partitionRoundPipe(*costs, cap, devices), *costs, target);
        os << llvm::format("versus roundpipe step_ms=%.6g ratio=%.4f\n", theirs,
                           steady->stepMs / theirs);
      }
    }
    os.flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
