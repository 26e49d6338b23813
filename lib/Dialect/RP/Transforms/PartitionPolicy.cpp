//===- PartitionPolicy.cpp - how a partition is chosen --------------------===//

#include "PartitionPolicy.h"

#include "rp/Analysis/PartitionSearch.h"

using namespace mlir;
using namespace mlir::rp;

/// Two tail jobs asked for run as two on any device count, so a one-device
/// reference sums the tail's gradients as the plans it is compared with
/// (rp's partitioner, which times one device with one tail job, and the
/// other partitioners cut the stages); one microbatch has no odd fold.
static Partition withTailJobs(Partition p, const PartitionRequest &request) {
  if (request.schedule == ScheduleKind::roundRobin && request.tailJobs == 2)
    p.tailJobs = request.microbatches >= 2 ? 2 : 1;
  return p;
}

FailureOr<Partition> mlir::rp::choosePartition(func::FuncOp func,
                                               llvm::ArrayRef<LayerCost> costs,
                                               const PartitionRequest &request,
                                               const HardwareProfile &hw) {
  int64_t cap = request.cap;
  if (request.stages.empty()) {
    if (request.schedule != ScheduleKind::roundRobin)
      return staticPartition(
          costs,
          staticStageCount(request.schedule, request.devices, costs.size()));
    if (request.partitioner != Partitioner::roundpipe) {
      SearchTarget target{hw,  request.devices,  request.microbatches,
                          cap, request.dispatch, request.tailJobs};
      target.layerGrain = request.layerGrain;
      target.budgetBytes = request.budgetBytes;
      if (request.partitioner == Partitioner::rp)
        return withTailJobs(partitionForStepTime(costs, target), request);
      if (costs.size() > 10)
        return mlir::emitError(func.getLoc())
               << "partitioner=exhaustive tries every partition of at most "
                  "10 layers; this model has "
               << costs.size() << " (use partitioner=rp)";
      return withTailJobs(partitionExhaustive(costs, target), request);
    }
    std::string raisedFor;
    Partition p = partitionRoundPipe(costs, cap, request.devices, &raisedFor);
    if (!raisedFor.empty())
      mlir::emitWarning(func.getLoc())
          << "layer '" << raisedFor << "' needs more than the per-stage cap of "
          << cap << " bytes; the cap is raised to " << p.stageBytes
          << " bytes (RoundPipe's rule); give more memory "
             "to weights or train fewer of its parameters";
    return withTailJobs(p, request);
  }
  FailureOr<Partition> p = parseStages(request.stages, costs.size(), [&] {
    return mlir::emitError(func.getLoc());
  });
  if (failed(p))
    return failure();
  p->stageBytes = cap;
  auto check = [&](const StageRange &s, StringRef kind,
                   bool withGradients) -> LogicalResult {
    int64_t bytes = mlir::rp::stageBytes(s, costs, withGradients);
    if (bytes <= cap)
      return success();
    return mlir::emitError(func.getLoc())
           << kind << " stage of layers " << s.begin << "-" << s.end - 1
           << " ('" << costs[s.begin].name << "' to '" << costs[s.end - 1].name
           << "') needs " << bytes << " bytes of weights"
           << (withGradients ? " and gradients" : "")
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
  scorePartition(*p, costs, request.devices);
  return withTailJobs(*p, request);
}

int64_t mlir::rp::stageByteCap(int64_t stageBytes, const HardwareProfile &hw,
                               double weightBudget) {
  return stageBytes ? stageBytes
                    : static_cast<int64_t>(hw.memoryBytes() * weightBudget / 2);
}

void mlir::rp::stageSizes(const Partition &p, SmallVectorImpl<int64_t> &fwd,
                          SmallVectorImpl<int64_t> &bwd) {
  fwd.clear();
  bwd.assign(1, static_cast<int64_t>(p.tail.size()));
  for (const StageRange &s : p.forward)
    fwd.push_back(s.size());
  for (const StageRange &s : p.backward)
    bwd.push_back(s.size());
}
