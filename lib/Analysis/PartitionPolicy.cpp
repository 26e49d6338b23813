//===- PartitionPolicy.cpp - how a partition is chosen --------------------===//

#include "rp/Analysis/PartitionPolicy.h"

#include "rp/Analysis/PartitionSearch.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/RecomputeChoice.h"
#include "rp/Analysis/UnitText.h"
#include "rp/timing/Assumptions.h"

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

/// `hw` with the request's unknown inputs at their fast end, for the
/// search's floor ties (SearchTarget::fastEnd); none without unknowns.
static std::optional<HardwareProfile>
fastEndOf(const HardwareProfile &hw, const PartitionRequest &request) {
  if (request.unknown.empty())
    return std::nullopt;
  HardwareProfile fast;
  static_cast<::rp::timing::HardwareModel &>(fast) =
      ::rp::timing::atEnd(hw, request.unknown, /*slow=*/false);
  return fast;
}

FailureOr<Partition> mlir::rp::choosePartition(func::FuncOp func,
                                               llvm::ArrayRef<LayerCost> costs,
                                               const PartitionRequest &request,
                                               const HardwareProfile &hw,
                                               GrainSpeedChoice *grain) {
  int64_t cap = request.cap;
  if (request.stages.empty()) {
    if (request.schedule != ScheduleKind::roundRobin)
      return staticPartitionForStep(costs, request.schedule, request.devices,
                                    request.microbatches, hw);
    if (request.partitioner != Partitioner::roundpipe) {
      SearchTarget target{hw,  request.devices,  request.microbatches,
                          cap, request.dispatch, request.tailJobs};
      target.layerGrain = request.layerGrain;
      target.budgetBytes = request.budgetBytes;
      target.hostStagedBytes = request.hostStagedBytes;
      target.hostSlack = request.hostSlack;
      target.memo = request.memo;
      std::optional<HardwareProfile> fast = fastEndOf(hw, request);
      target.fastEnd = fast ? &*fast : nullptr;
      if (request.partitioner == Partitioner::rp) {
        if (request.chooseGrain) {
          GrainSpeedChoice unused;
          return chooseGrainForSpeed(func, costs, request, hw,
                                     grain ? *grain : unused);
        }
        return withTailJobs(partitionForStepTime(costs, target), request);
      }
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

FailureOr<Partition> mlir::rp::chooseGrainForSpeed(
    func::FuncOp func, llvm::ArrayRef<LayerCost> costs,
    const PartitionRequest &request, const HardwareProfile &hw,
    GrainSpeedChoice &choice) {
  SearchTarget target{hw,          request.devices,  request.microbatches,
                      request.cap, request.dispatch, request.tailJobs};
  target.budgetBytes = request.budgetBytes;
  target.hostStagedBytes = request.hostStagedBytes;
  target.hostSlack = request.hostSlack;
  target.memo = request.memo;
  std::optional<HardwareProfile> fast = fastEndOf(hw, request);
  target.fastEnd = fast ? &*fast : nullptr;
  // Each grain gets its own partition: layer grain holds one layer's
  // intermediates at a time, so its backward stages can be larger.
  target.layerGrain = false;
  Partition atStage =
      withTailJobs(partitionForStepTime(costs, target), request);
  int64_t budget = target.budget();
  std::string error;
  // The stage-grain plan as it will run: rp-choose-recompute puts the
  // stages that do not fit at layer grain.
  GrainTarget grains{ScheduleKind::roundRobin, request.devices,
                     request.microbatches, hw, budget};
  FailureOr<GrainChoice> fallback =
      chooseRecomputeGrains(atStage, costs, grains, error);
  if (failed(fallback))
    return mlir::emitError(func.getLoc()) << error;
  Partition stagePlan = atStage;
  stagePlan.stageLayerGrain = fallback->layerGrain;
  PlanTarget plan{hw,
                  ScheduleKind::roundRobin,
                  request.devices,
                  request.microbatches,
                  request.dispatch,
                  /*passShift=*/-1,
                  budget};
  FailureOr<PlanPrediction> stage = predictPlan(stagePlan, costs, plan, error);
  if (failed(stage))
    return mlir::emitError(func.getLoc()) << error;
  bool mixed = llvm::is_contained(fallback->layerGrain, true);
  std::string stageName =
      mixed ? "stage grain (layer grain where it does not fit)" : "stage grain";
  choice.stageMs = stage->stepMs;
  choice.stageFits = stage->fits;
  // A stage-grain plan that fits at the host optimizer's floor keeps stage
  // grain whatever layer grain would predict (it could only tie): the
  // layer-grain search, half of this choice, is skipped.
  double floorMs = optimizerFloorMs(costs, hw);
  if (stage->fits && atOptimizerFloor(stage->stepMs, floorMs, kGrainTie)) {
    choice.layer = false;
    choice.layerMs = 0;
    choice.reason = "stage: predicted " + msText(stage->stepMs) +
                    " a step at " + stageName +
                    ", the host optimizer's floor (" + msText(floorMs) +
                    " a step): layer grain cannot be faster";
    return atStage;
  }
  target.layerGrain = true;
  Partition atLayer =
      withTailJobs(partitionForStepTime(costs, target), request);
  atLayer.layerGrain = true;
  atLayer.stageLayerGrain.clear();
  FailureOr<PlanPrediction> layer = predictPlan(atLayer, costs, plan, error);
  if (failed(layer))
    return mlir::emitError(func.getLoc()) << error;
  choice.layerMs = layer->stepMs;
  choice.layerFits = layer->fits;
  std::string times = msText(layer->stepMs) + " a step at layer grain, " +
                      msText(stage->stepMs) + " at " + stageName;
  // Under a host budget, layer grain's backward stages stage each layer's
  // input in the pinned buffers, which no merge of stages lowers (the
  // hold splits forward stages and grows the tail there): a layer-grain
  // plan still over what the budget leaves is not taken for speed where
  // the stage-grain plan is within it.
  int64_t left = request.hostStagedBytes;
  if (left > 0 && layer->fits && layer->stagedHostBytes > left &&
      stage->stagedHostBytes <= left) {
    choice.layer = false;
    choice.reason = "stage: the layer-grain plan stages " +
                    gibText(layer->stagedHostBytes) +
                    " in pinned host memory, over the " + gibText(left) +
                    " the host budget leaves (" +
                    gibText(stage->stagedHostBytes) + " at " + stageName +
                    "; " + times + ")";
    return atStage;
  }
  // Without a host budget, the slack the stages were held by: layer grain
  // is not taken for a step faster by no more than it where it stages a
  // GiB or more beyond stage grain (Llama-3.1-8B NF4 LoRA: 52 GiB more for
  // a step 0.2 % faster).
  if (left <= 0 && request.hostSlack > 0 && stage->fits && layer->fits &&
      layer->stagedHostBytes - stage->stagedHostBytes >=
          target.hostSlackBytes &&
      layer->stepMs >= stage->stepMs * (1 - request.hostSlack)) {
    choice.layer = false;
    std::string pct;
    llvm::raw_string_ostream(pct)
        << llvm::format("%g %%", request.hostSlack * 100);
    choice.reason = "stage: the layer-grain plan stages " +
                    gibText(layer->stagedHostBytes) +
                    " in pinned host memory against " +
                    gibText(stage->stagedHostBytes) + " at " + stageName +
                    ", for a step faster by less than --host-slack-pct's " +
                    pct + " (" + times + ")";
    return atStage;
  }
  // Where speed decides, both plans again at the ends of what the profile
  // cannot know (their layer costs shared), and whether the choice holds
  // at both. Held by value: a deferred range runs after this returns
  // (`hw` and `measured` live in the compile's CostModel).
  auto ranges =
      [func, stagePlan, atLayer, hwp = &hw, devices = request.devices,
       microbatches = request.microbatches, dispatch = request.dispatch, budget,
       unknown = request.unknown, measured = request.measured,
       layerMid = layer->stepMs < stage->stepMs * (1 - kGrainTie)](
          GrainSpeedChoice *choice) mutable -> FailureOr<std::string> {
    PlanTarget plan{*hwp,     ScheduleKind::roundRobin, devices, microbatches,
                    dispatch, /*passShift=*/-1,         budget};
    std::string error;
    std::optional<std::vector<LayerCost>> endCosts[2];
    FailureOr<std::optional<StepEnds>> s = predictPlanEnds(
        func, stagePlan, plan, unknown, measured, endCosts, error);
    FailureOr<std::optional<StepEnds>> l =
        succeeded(s) ? predictPlanEnds(func, atLayer, plan, unknown, measured,
                                       endCosts, error)
                     : FailureOr<std::optional<StepEnds>>(failure());
    if (failed(l)) {
      mlir::emitError(func.getLoc()) << error;
      return failure();
    }
    if (choice) {
      choice->stageEnds = *s;
      choice->layerEnds = *l;
    }
    if (!*s || !*l)
      return std::string();
    bool layerAt[2] = {(*l)->fastMs < (*s)->fastMs * (1 - kGrainTie),
                       (*l)->slowMs < (*s)->slowMs * (1 - kGrainTie)};
    return " (over the profile's unknown inputs, fast - slow end: "
           "layer grain " +
           endsText(**l) + ", stage grain " + endsText(**s) + "; " +
           (layerAt[0] == layerMid && layerAt[1] == layerMid
                ? std::string("the same choice at both ends")
                : std::string(layerAt[0] != layerMid ? "the other grain "
                                                       "at the fast end"
                                                     : "") +
                      (layerAt[0] != layerMid && layerAt[1] != layerMid
                           ? " and "
                           : "") +
                      (layerAt[1] != layerMid ? "the other grain at the "
                                                "slow end"
                                              : "") +
                      ": the choice rests on the profile's own values") +
           ")";
  };
  std::string range;
  if (stage->fits && layer->fits && !request.unknown.empty()) {
    if (request.deferRange) {
      // The note's last words, where they are printed (the range is its
      // suffix on both grains' reasons below).
      choice.range = [ranges]() mutable { return ranges(nullptr); };
    } else {
      FailureOr<std::string> r = ranges(&choice);
      if (failed(r))
        return failure();
      range = *r;
    }
  }
  // Where speed decides, what each grain stages in the pinned buffers:
  // the faster grain may stage far more (Llama-3.1-8B NF4 LoRA: layer
  // grain 8.3 % faster for 58 GiB against 18), which the reason names.
  std::string pinned = "; staging " + gibText(layer->stagedHostBytes) +
                       " in pinned host memory at layer grain, " +
                       gibText(stage->stagedHostBytes) + " at " + stageName;
  if (layer->fits &&
      (!stage->fits || layer->stepMs < stage->stepMs * (1 - kGrainTie))) {
    choice.layer = true;
    choice.reason =
        "layer: " +
        (stage->fits
             ? "predicted " + times + pinned + range
             : "the stage-grain plan does not fit (device " +
                   std::to_string(stage->device) + " would need " +
                   gibText(stage->peak) + " of " + gibText(budget) + ")");
    return atLayer;
  }
  choice.layer = false;
  if (!layer->fits)
    choice.reason = "stage: the layer-grain plan does not fit (device " +
                    std::to_string(layer->device) + " would need " +
                    gibText(layer->peak) + " of " + gibText(budget) + ")";
  else
    choice.reason =
        "stage: predicted " + msText(stage->stepMs) + " a step at " +
        stageName + ", " +
        (stage->stepMs < layer->stepMs ? "faster than " : "within 0.1 % of ") +
        msText(layer->stepMs) + " at layer grain" + pinned + range;
  return atStage;
}

bool mlir::rp::readGrainRanges(PartitionRequest &request, StringRef hw,
                               const CostInputs &inputs, std::string &error) {
  // The step-time search reads the unknowns too (its floor ties'
  // fast end, SearchTarget::fastEnd).
  if (!request.chooseGrain && (!request.stages.empty() ||
                               request.schedule != ScheduleKind::roundRobin ||
                               request.partitioner != Partitioner::rp))
    return true;
  std::optional<std::vector<::rp::timing::UnknownInput>> unknown =
      ::rp::timing::loadUnknownInputs(hw.str(), error);
  if (!unknown)
    return false;
  request.unknown = std::move(*unknown);
  request.measured = inputs.measured ? &*inputs.measured : nullptr;
  return true;
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
