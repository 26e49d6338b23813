//===- PrintPartition.cpp - rp-print-partition ----------------------------===//
//
// Shows the stage lists a partitioner cuts, for people and for lit tests.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "rp/Analysis/Partition.h"

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

  void runOnOperation() override {
    if (devices == 0 || !(weightBudget > 0 && weightBudget <= 1) ||
        stageBytes < 0) {
      getOperation().emitError()
          << "rp-print-partition needs devices >= 1, 0 < weight-budget <= 1 "
             "and stage-bytes >= 0";
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
      std::string raisedFor;
      Partition p = partitionRoundPipe(*costs, cap, devices, &raisedFor);
      if (!raisedFor.empty())
        func.emitWarning() << "layer '" << raisedFor
                           << "' needs more than the per-stage cap of " << cap
                           << " bytes; the cap is raised to " << p.stageBytes
                           << " bytes (RoundPipe's rule); give more memory "
                              "to weights or train fewer of its parameters";
      os << "partition @" << func.getSymName()
         << " partitioner=roundpipe hw=" << inputs->hw.name
         << " layers=" << costs->size() << " stages=" << p.numStages()
         << " devices=" << devices << " stage_bytes=" << p.stageBytes
         << llvm::format(" bottleneck_ms=%.6g proxy_cost_ms=%.6g\n",
                         p.bottleneckMs, p.proxyCostMs);
      printStages(os, "forward", p.forward);
      printStages(os, "tail", p.tail);
      printStages(os, "backward", p.backward);
    }
    os.flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
