//===- PlanPrediction.h - what a partition's plan will do -------*- C++ -*-===//
//
// The predicted step and device memory of a partition's plan, computed as
// the pipeline passes compute them: rp-lower-schedule's jobs,
// rp-insert-transfers' steady state (round-robin: steps back to back,
// under the dispatch or the pass shift given; a static schedule: one step)
// and rp-plan-memory's peaks, with the step timed again where two copies
// of the arenas do not fit and the two passes in flight share one. The
// passes that weigh two plans before the schedule exists use it
// (rp-choose-loss-fusion its fused and unfused graphs, rp-partition the
// two recompute grains of `recompute = auto`), so each option is timed as
// the plan it becomes.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PLANPREDICTION_H
#define RP_ANALYSIS_PLANPREDICTION_H

#include "rp/Analysis/LayerCost.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/SteadyState.h"
#include "rp/timing/Assumptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <string>

namespace mlir::rp {

/// The pipeline a prediction plans.
struct PlanTarget {
  const HardwareProfile &hw;
  ScheduleKind kind = ScheduleKind::roundRobin;
  unsigned devices = 1, microbatches = 1;
  /// Round-robin: how the passes move (the partitioner's and
  /// rp-insert-transfers' `dispatch`), or the shift given (>= 0).
  Dispatch dispatch = Dispatch::modulo;
  int passShift = -1;
  /// The device memory the plan must fit.
  int64_t budget = 0;
};

struct PlanPrediction {
  /// The plan's predicted step (round-robin: the steady state) and bubble.
  double stepMs = 0;
  double bubble = 0;
  /// Whether every device's peak fits the budget.
  bool fits = true;
  /// Round-robin: the copies of the arenas the run keeps (2, or 1 where
  /// two do not fit).
  unsigned arenaCopies = 2;
  /// The device with the highest peak, the peak and its biggest buffer.
  unsigned device = 0;
  int64_t peak = 0;
  std::string biggest;
  int64_t biggestBytes = 0;
  /// The host's pinned staging buffers one pass holds (the memory plan's
  /// staged bytes): what a host budget holds (holdToHostBudget).
  int64_t stagedHostBytes = 0;
};

/// Plans `partition` (its grains included) for `target`. Fails with
/// `error` when the schedule cannot run the partition or deadlocks.
FailureOr<PlanPrediction> predictPlan(const Partition &partition,
                                      llvm::ArrayRef<LayerCost> layers,
                                      const PlanTarget &target,
                                      std::string &error);

/// A plan's predicted step at the fast and the slow end of what its
/// profile cannot know (its "unknown" ranges, rp/timing/Assumptions.h).
struct StepEnds {
  double fastMs = 0, slowMs = 0;
};

/// `partition`'s plan for `target` predicted again at both ends of
/// `unknown`, each end with its own layer costs of `func` (measured times
/// `measured` where given), as rp-plan-memory times the chosen plan's
/// range: the choices that weigh two plans (rp-choose-loss-fusion,
/// `recompute = auto`, rp-predict-token-slices) print each with its range,
/// so that a reader sees whether the choice holds over the whole of it.
/// std::nullopt where `unknown` is empty; `costs` memoizes the end costs
/// per end (fast, slow) across calls on one function.
FailureOr<std::optional<StepEnds>> predictPlanEnds(
    func::FuncOp func, const Partition &partition, const PlanTarget &target,
    llvm::ArrayRef<::rp::timing::UnknownInput> unknown,
    const MeasuredProfile *measured,
    std::optional<std::vector<LayerCost>> (&costs)[2], std::string &error);

/// "A - B ms" for `ends`, fast end first.
std::string endsText(const StepEnds &ends);

/// The least step any round-robin plan of `layers` can run in, in the
/// steady state: the host optimizer's update (insertTransfers' optimizer
/// command), which each step's weights wait for and which runs one update
/// at a time, never faster than alone, plus the two hand-offs (job_us)
/// that chain one update to the next in the run's layout. 0 where the
/// profile has no optimizer rate.
/// A choice between two plans (a recompute grain, the loss fusion) whose
/// first plan is within the choice's tie of this floor cannot go to the
/// other, which is then neither searched nor timed: the plan is the same,
/// for a fraction of the compile (Qwen3-32B on 8 x rtx4090 is bound there).
double optimizerFloorMs(llvm::ArrayRef<LayerCost> layers,
                        const HardwareProfile &hw);

/// Whether no plan can be faster than `stepMs` by more than the share
/// `tie`: it is within that of `floorMs` (with room for the clock's
/// rounding).
bool atOptimizerFloor(double stepMs, double floorMs, double tie);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PLANPREDICTION_H
