//===- Partition.cpp - rp-partition ---------------------------------------===//
//
// Records the stages a partitioner cuts as the function's rp.partition.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "ScheduleIR.h"

#include "llvm/Support/FileSystem.h"

namespace mlir::rp {
#define GEN_PASS_DEF_PARTITIONPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct PartitionPass : rp::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
    if (!kind || devices == 0 || !(weightBudget > 0 && weightBudget <= 1) ||
        stageBytes < 0 || (partitioner != "rp" && partitioner != "roundpipe" &&
         partitioner != "exhaustive")) {
      module.emitError()
          << "rp-partition needs schedule round-robin, gpipe, 1f1b, "
             "interleaved-1f1b or looped-bfs, devices >= 1, 0 < weight-budget "
             "<= 1, "
             "stage-bytes >= 0 and partitioner rp, roundpipe or exhaustive";
      return signalPassFailure();
    }
    std::optional<Dispatch> how = parseDispatch(dispatch);
    if (!how) {
      mlir::emitError(module.getLoc()) << "rp-partition: unknown dispatch '"
                                       << dispatch << "' (rounds or modulo)";
      return signalPassFailure();
    }
    if (partitioner == "roundpipe" && *kind != ScheduleKind::roundRobin) {
      module.emitError() << "partitioner=roundpipe cuts round-robin stages; "
                         << schedule << " uses balanced static stages";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> func = layeredFunction(module);
    if (failed(func))
      return signalPassFailure();
    FailureOr<CostInputs> inputs = loadCostInputs(hw, measured, &getContext());
    if (failed(inputs))
      return signalPassFailure();
    FailureOr<std::vector<LayerCost>> costs = analyzeLayerCosts(
        *func, inputs->hw, inputs->measured ? &*inputs->measured : nullptr);
    if (failed(costs))
      return signalPassFailure();
    PartitionRequest request;
    request.schedule = *kind;
    request.devices = devices;
    request.microbatches =
        microbatches ? unsigned(microbatches) : devices == 1 ? 1 : devices + 1;
    request.partitioner = partitioner;
    request.stages = stages;
    request.dispatch = *how;
    request.cap =
        stageBytes
            ? static_cast<int64_t>(stageBytes)
            : static_cast<int64_t>(inputs->hw.memoryBytes() * weightBudget / 2);
    FailureOr<Partition> p = choosePartition(*func, *costs, request, inputs->hw);
    if (failed(p))
      return signalPassFailure();
    SmallVector<int64_t> fwd, bwd = {p->tail.size()};
    for (const StageRange &s : p->forward)
      fwd.push_back(s.size());
    for (const StageRange &s : p->backward)
      bwd.push_back(s.size());
    (*func)->setAttr("rp.partition",
                     PartitionAttr::get(&getContext(), schedule, devices,
                                        request.microbatches, hw, fwd, bwd));
    // The passes after this one (the schedule, its transfers and memory,
    // the plan's predicted times) cost the layers the same way.
    auto recorded =
        getContext().getLoadedDialect<RPDialect>()->getMeasuredAttrHelper();
    if (!measured.empty()) {
      SmallString<256> path(measured);
      (void)llvm::sys::fs::make_absolute(path);
      recorded.setAttr(*func, StringAttr::get(&getContext(), path));
    } else
      recorded.removeAttr(*func);
  }
};

} // namespace
