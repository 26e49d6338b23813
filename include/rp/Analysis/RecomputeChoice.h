//===- RecomputeChoice.h - each backward stage's grain ----------*- C++ -*-===//
//
// Stage grain recomputes a backward stage's layers at once and holds every
// layer's intermediates its sweep reads; layer grain keeps the inputs of
// the stage's inner layers (downloaded to pinned host memory with the
// forward that computes them, uploaded again for the backward: offloaded
// activations) and holds one layer's body at a time. Layer grain moves
// more bytes over the host link and runs the recompute of every layer but
// the deepest after the gradient arrives, so here (rp-choose-recompute,
// on a partition cut at stage grain) it is chosen only where the plan
// needs its memory; rp-partition's `auto` takes it everywhere first where
// its own partition is predicted faster (PartitionPolicy.h,
// docs/pipeline.md "The recompute grain").
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_RECOMPUTECHOICE_H
#define RP_ANALYSIS_RECOMPUTECHOICE_H

#include "rp/Analysis/MemoryPlan.h"

namespace mlir::rp {

/// The pipeline a grain choice plans: the schedule, its devices and
/// microbatches, the hardware and the per-device memory budget.
struct GrainTarget {
  ScheduleKind kind = ScheduleKind::roundRobin;
  unsigned devices = 1, microbatches = 1;
  HardwareProfile hw;
  int64_t budget = 0;
};

struct GrainChoice {
  /// Per backward stage (as Partition::backward), whether it is layer grain.
  std::vector<bool> layerGrain;
  /// Whether every device fits the budget with that choice, and the peaks.
  bool fits = false;
  std::vector<int64_t> peakBytes;
};

/// Plans `partition`'s pipeline one pass (lowered, transfers inserted, in
/// issue order, as rp-lower-schedule, rp-insert-transfers and
/// rp-plan-memory do) with the grains `partition` holds. Fails with
/// `error` when the schedule cannot run the partition.
FailureOr<MemoryPlan> planGrains(const Partition &partition,
                                 llvm::ArrayRef<LayerCost> layers,
                                 const GrainTarget &target, Pipeline *pipeline,
                                 std::string &error);

/// Chooses each backward stage's grain: stage grain everywhere (the
/// faster); while a device is over the budget, the stage-grain backward
/// stage of more than one layer on such a device whose layer grain saves
/// the most working memory goes to layer grain, kept when it lowers the
/// bytes over budget summed over the devices (it may not: weights or the
/// saved inputs on the forward devices may bind), until every device fits
/// or no such stage is left. Where that stalls short of fitting (the
/// stages are coupled: layer grain's saved inputs also go down from the
/// forward devices) and layer grain in every stage of several layers
/// does better, the choice starts from there and gives stage grain back,
/// least saving first, wherever the plan still fits. Layer grain is thus
/// only where stage grain does not fit, and the partition's stages are
/// not changed. `planned`, where given, gets the pipeline and memory plan
/// of the grains chosen (planGrains' for them, lowered with its
/// transfers in issue order), which a caller that plans them next need
/// not plan again. `start`, where given, is planGrains' plan of the
/// partition at stage grain in every stage (the caller planned it
/// already: devicePeak's `planned`), taken instead of planning it.
FailureOr<GrainChoice>
chooseRecomputeGrains(const Partition &partition,
                      llvm::ArrayRef<LayerCost> layers,
                      const GrainTarget &target, std::string &error,
                      std::pair<Pipeline, MemoryPlan> *planned = nullptr,
                      std::pair<Pipeline, MemoryPlan> *start = nullptr);

} // namespace mlir::rp

#endif // RP_ANALYSIS_RECOMPUTECHOICE_H
