//===- PlanPredictionSteps.h - the two predictions share these --*- C++ -*-===//
//
// predictPlan (PlanPrediction.cpp) and predictSlicedPlan (TokenSlices.cpp)
// time a round-robin plan and place its memory the same way; a change to
// how the run keeps its passes or arenas changes both. Private to
// lib/Analysis.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_ANALYSIS_PLANPREDICTIONSTEPS_H
#define RP_LIB_ANALYSIS_PLANPREDICTIONSTEPS_H

#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PlanPrediction.h"

#include <optional>

namespace mlir::rp {

/// The steady state of `computeOnly` (a copy of `pl` before its transfers)
/// with the passes in flight as rp-insert-transfers keeps them: shifted by
/// `target.passShift` where given, else moved by `target.dispatch`. `pl`
/// takes the shift chosen. std::nullopt where the schedule deadlocks.
std::optional<SteadyState> predictSteadyState(Pipeline &pl,
                                              Pipeline &computeOnly,
                                              llvm::ArrayRef<LayerCost> layers,
                                              const PlanTarget &target);

/// Where `target` fixes the pass shift without timing the run (a given
/// shift, or dispatchPasses' modulo shift where it keeps it untimed),
/// sets `computeOnly.passShift` to it and returns true.
bool knownPassShift(Pipeline &computeOnly, const PlanTarget &target);

/// As rp-plan-memory decides: where two copies of the arenas of `mp` do
/// not fit the budget, the two passes in flight share one, each device
/// waiting for its own part of the pass before, and `p`'s step is timed
/// again so.
void predictArenaCopies(PlanPrediction &p, const MemoryPlan &mp,
                        const Pipeline &pl, const Pipeline &computeOnly,
                        llvm::ArrayRef<LayerCost> layers,
                        const PlanTarget &target);

/// `p`'s peak, its device and biggest buffer, and whether it fits, from
/// the fullest device of `mp`.
void predictFullestDevice(PlanPrediction &p, const MemoryPlan &mp,
                          int64_t budget);

} // namespace mlir::rp

#endif // RP_LIB_ANALYSIS_PLANPREDICTIONSTEPS_H
