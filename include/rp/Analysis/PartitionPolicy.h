//===- PartitionPolicy.h - how a partition is chosen ------------*- C++ -*-===//
//
// rp-partition and rp-print-partition choose stages the same way: a
// user's `stages`, the static schedules' balanced cut, or a round-robin
// partitioner. The IR side (reading and writing `#rp.partition` and
// `rp.schedule`) is ScheduleIR.h.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H
#define RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H

#include "rp/Analysis/PartitionSearch.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/SteadyState.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <functional>

namespace mlir::rp {

/// How a partition is chosen: a user's `stages`, or a partitioner.
struct PartitionRequest {
  ScheduleKind schedule = ScheduleKind::roundRobin;
  unsigned devices = 1, microbatches = 1;
  Partitioner partitioner = Partitioner::rp; ///< roundpipe: round-robin only
  std::string stages;                        ///< fwd:...;bwd:... when given
  int64_t cap = 0;                           ///< per-stage byte cap
  Dispatch dispatch = Dispatch::modulo;      ///< how passes move (round-robin)
  /// Round-robin: the fused tail's stage jobs (Partition::tailJobs), 1 or
  /// 2; 0 lets rp's partitioner choose (a user's stages then run 1).
  unsigned tailJobs = 1;
  /// rp's partitioner: memory plans are checked at this grain against this
  /// budget (0: the profile's memory), PartitionMemory.h.
  bool layerGrain = false;
  int64_t budgetBytes = 0;
  /// rp's partitioner: the host's staged bytes a plan may hold
  /// (SearchTarget::hostStagedBytes; 0: unchecked).
  int64_t hostStagedBytes = 0;
  /// Without a host budget: the step-time share a partition may give up
  /// to stage a GiB or more less (SearchTarget::hostSlack); `auto` takes
  /// layer grain for speed only where it is faster by more than this, or
  /// stages less than a GiB more (chooseGrainForSpeed).
  double hostSlack = 0;
  /// `recompute = auto` (round-robin, rp's partitioner, no `stages`):
  /// search at stage grain and at layer grain and keep the faster plan
  /// (chooseGrainForSpeed); `layerGrain` is then ignored.
  bool chooseGrain = false;
  /// The compile's earlier searches to start from (CostModel::searchMemo).
  SearchMemo *memo = nullptr;
  /// `recompute = auto`: the profile's unknown inputs, over which both
  /// plans' steps are given as ranges in the choice's reason (their layer
  /// costs at each end from `measured` times where given).
  std::vector<::rp::timing::UnknownInput> unknown;
  const MeasuredProfile *measured = nullptr;
  /// `recompute = auto` where rp-choose-loss-fusion follows: the ranges
  /// are left to GrainSpeedChoice::range, which that pass runs only where
  /// it keeps this graph's note (the unfused graph's replaces it).
  bool deferRange = false;
};

/// What `recompute = auto` chose for speed, and why.
struct GrainSpeedChoice {
  /// Layer grain in every backward stage; else stage grain, with
  /// rp-choose-recompute's layer grain only where stage grain does not fit.
  bool layer = false;
  /// The two plans' predicted steps, and whether they fit the budget.
  double stageMs = 0, layerMs = 0;
  bool stageFits = true, layerFits = true;
  /// "layer: ..." or "stage: ...", the function's rp.recompute_choice.
  std::string reason;
  /// Both plans' steps at the ends of the profile's unknown inputs, where
  /// it names any and both were timed.
  std::optional<StepEnds> stageEnds, layerEnds;
  /// PartitionRequest::deferRange: the ranges' text, " (over the
  /// profile's unknown inputs ...)", that `reason` then ends without
  /// (empty where there is none to give).
  std::function<FailureOr<std::string>()> range;
};

/// A layer-grain plan must be predicted faster than the stage-grain one by
/// more than this share to be chosen: both come from one deterministic
/// timing model, so the margin only absorbs its last digits (a step bound
/// by weight uploads or the optimizer hides the grain, and the two plans
/// then differ in rounding), and such a tie keeps stage grain, which
/// moves fewer bytes and holds less pinned host memory. A wider margin
/// would give up real gains: Qwen3-32B's layer-grain plan is predicted
/// 0.35 % faster and runs 3.4 % faster on the sim (docs/pipeline.md).
constexpr double kGrainTie = 1e-3;

/// The partition `request` asks for: a user partition is checked against
/// the cap; round-robin uses rp's or RoundPipe's partitioner, the static
/// schedules a balanced symmetric one
/// (staticPartitionForStep). Errors are emitted at `func`.
FailureOr<Partition> choosePartition(func::FuncOp func,
                                     llvm::ArrayRef<LayerCost> costs,
                                     const PartitionRequest &request,
                                     const HardwareProfile &hw,
                                     GrainSpeedChoice *grain = nullptr);

/// `recompute = auto`'s grain for speed: rp's partitioner searches at
/// stage grain and at layer grain; each partition is planned as it will
/// run (PlanPrediction.h: the steady state under `request.dispatch`,
/// layer grain's saved-input uploads included, the arena copies its
/// memory allows), the stage-grain one with rp-choose-recompute's layer
/// grain where stage grain does not fit; the faster plan that fits is
/// kept, stage grain on ties (kGrainTie) and where neither fits. The
/// partition returned holds the grain (Partition::layerGrain); `choice`
/// says which and why.
FailureOr<Partition> chooseGrainForSpeed(func::FuncOp func,
                                         llvm::ArrayRef<LayerCost> costs,
                                         const PartitionRequest &request,
                                         const HardwareProfile &hw,
                                         GrainSpeedChoice &choice);

/// Where `request.chooseGrain` or rp's partitioner searches round-robin
/// stages, fills what the choice's ranges and the search's floor ties
/// (SearchTarget::fastEnd) need: the unknown inputs of profile `hw` and
/// the measured times of `inputs` (rp-partition and rp-choose-loss-fusion
/// ask alike). False with `error` where the profile's unknowns cannot be
/// read.
bool readGrainRanges(PartitionRequest &request, llvm::StringRef hw,
                     const CostInputs &inputs, std::string &error);

/// The per-stage byte cap the partitioning passes ask for: `stageBytes`
/// when the user gives it, else half the weight budget's share of the
/// device's memory (two weight sets in flight per device).
int64_t stageByteCap(int64_t stageBytes, const HardwareProfile &hw,
                     double weightBudget);

/// The stage sizes of `p` as #rp.partition spells them: the forward
/// stages' layer counts in `fwd`, the tail's then the backward stages' in
/// `bwd`.
void stageSizes(const Partition &p, SmallVectorImpl<int64_t> &fwd,
                SmallVectorImpl<int64_t> &bwd);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H
