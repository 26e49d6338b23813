//===- PlanPrediction.cpp - what a partition's plan will do ---------------===//

#include "rp/Analysis/PlanPrediction.h"

#include "PlanPredictionSteps.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PassesInFlight.h"
#include "rp/Analysis/ScheduleTiming.h"

#include "llvm/Support/Format.h"

#include <numeric>

using namespace mlir;
using namespace mlir::rp;

FailureOr<PlanPrediction>
mlir::rp::predictPlan(const Partition &partition,
                      llvm::ArrayRef<LayerCost> layers,
                      const PlanTarget &target, std::string &error) {
  FailureOr<Pipeline> pl =
      lowerSchedule(partition, layers, target.kind, target.devices,
                    target.microbatches, error);
  if (failed(pl))
    return failure();
  PlanPrediction p;
  // Weights are uploaded every step (the optimizer runs on the host),
  // never resident.
  pl->residentWeights = false;
  bool roundRobin = pl->kind == ScheduleKind::roundRobin;
  Pipeline computeOnly = *pl;
  // Where the pass shift is known without timing (given, or dispatch's
  // modulo shift), the run with two copies of the arenas is timed only
  // once the memory plan says the run keeps two: where they do not fit,
  // its step is the one-copy run's (predictArenaCopies), and timing both
  // was a third of a Qwen3-235B-A22B LoRA compile.
  bool shiftKnown = roundRobin && knownPassShift(computeOnly, target);
  if (roundRobin && !shiftKnown) {
    std::optional<SteadyState> steady =
        predictSteadyState(*pl, computeOnly, layers, target);
    if (steady) {
      p.stepMs = steady->stepMs;
      p.bubble = steady->bubble();
    }
  }
  if (shiftKnown)
    pl->passShift = computeOnly.passShift;
  insertTransfers(*pl, layers, target.hw);
  std::optional<Schedule> issued = inIssueOrder(pl->schedule);
  if (!issued) {
    error = "the schedule deadlocks once transfers are inserted; this is a "
            "bug in rp, please report it";
    return failure();
  }
  pl->schedule = std::move(*issued);
  if (!roundRobin)
    if (std::optional<Timing> t =
            estimateTiming(recomputeSplit(pl->schedule, *pl, layers))) {
      p.stepMs = t->iterationMs;
      p.bubble = t->bubbleFraction();
    }
  MemoryPlan mp = planMemory(*pl, layers);
  if (shiftKnown) {
    // The two-copy run where it is the run, or where the one-copy run
    // deadlocks (whose step predictArenaCopies then leaves as it is).
    bool one = chooseArenaCopies(mp.peakBytes, target.budget,
                                 renamesDevices(pl->shiftPerPass(), 2)) == 1;
    if (!one || !steadyStateInMemory(computeOnly, 2, 1, layers, target.hw))
      if (std::optional<SteadyState> steady =
              steadyState(computeOnly, layers, target.hw)) {
        p.stepMs = steady->stepMs;
        p.bubble = steady->bubble();
      }
  }
  if (roundRobin)
    predictArenaCopies(p, mp, *pl, computeOnly, layers, target);
  predictFullestDevice(p, mp, target.budget);
  p.stagedHostBytes = mp.stagedHostBytes;
  return p;
}

bool mlir::rp::knownPassShift(Pipeline &computeOnly, const PlanTarget &target) {
  unsigned g = std::max(1u, computeOnly.devices);
  if (target.passShift >= 0) {
    computeOnly.passShift = target.passShift % int(g);
    return true;
  }
  // As dispatchPasses moves a round-robin pass: the modulo shift, kept
  // without timing the others where it walks every device.
  unsigned modulo = computeOnly.devicesPerStep() % g;
  if (target.dispatch != Dispatch::modulo && std::gcd(modulo, g) != 1)
    return false;
  computeOnly.passShift = int(modulo);
  return true;
}

std::optional<SteadyState>
mlir::rp::predictSteadyState(Pipeline &pl, Pipeline &computeOnly,
                             llvm::ArrayRef<LayerCost> layers,
                             const PlanTarget &target) {
  std::optional<SteadyState> steady;
  if (target.passShift >= 0) {
    computeOnly.passShift = target.passShift % int(pl.devices);
    steady = steadyState(computeOnly, layers, target.hw);
  } else {
    steady = dispatchPasses(computeOnly, layers, target.hw, target.dispatch);
  }
  pl.passShift = computeOnly.passShift;
  return steady;
}

void mlir::rp::predictArenaCopies(PlanPrediction &p, const MemoryPlan &mp,
                                  const Pipeline &pl,
                                  const Pipeline &computeOnly,
                                  llvm::ArrayRef<LayerCost> layers,
                                  const PlanTarget &target) {
  p.arenaCopies = chooseArenaCopies(mp.peakBytes, target.budget,
                                    renamesDevices(pl.shiftPerPass(), 2));
  if (p.arenaCopies == 1)
    if (std::optional<SteadyState> one =
            steadyStateInMemory(computeOnly, 2, 1, layers, target.hw)) {
      p.stepMs = one->stepMs;
      p.bubble = one->bubble();
    }
}

void mlir::rp::predictFullestDevice(PlanPrediction &p, const MemoryPlan &mp,
                                    int64_t budget) {
  FullestDevice full = fullestDevice(mp);
  p.peak = full.peak;
  p.device = full.device;
  p.fits = full.peak <= budget;
  p.biggest = full.biggest;
  p.biggestBytes = full.biggestBytes;
}

double mlir::rp::optimizerFloorMs(llvm::ArrayRef<LayerCost> layers,
                                  const HardwareProfile &hw) {
  if (!(hw.optimizerGBps > 0))
    return 0;
  // As insertTransfers sums the trainable elements.
  int64_t trainable = 0;
  for (const LayerCost &l : layers)
    trainable += l.trainableElements;
  // The run's layout (rp/timing/Continuous.h) starts update k on the
  // optimizer's thread after the stepping thread saw update k-1 end: two
  // hand-offs between lanes (Graph::handoffMs, the profile's job_us) on
  // the chain of updates, which every step pays.
  return hw.optimizerMs(double(trainable)) + 2 * hw.jobUs * 1e-3;
}

bool mlir::rp::atOptimizerFloor(double stepMs, double floorMs, double tie) {
  // The run's clock sums the update's per-parameter shares and reads the
  // period as a difference of step ends: both round, by far less than 1e-9.
  return floorMs > 0 && stepMs <= floorMs * (1 - 1e-9) * (1 + tie);
}

FailureOr<std::optional<StepEnds>> mlir::rp::predictPlanEnds(
    func::FuncOp func, const Partition &partition, const PlanTarget &target,
    llvm::ArrayRef<::rp::timing::UnknownInput> unknown,
    const MeasuredProfile *measured,
    std::optional<std::vector<LayerCost>> (&costs)[2], std::string &error) {
  if (unknown.empty())
    return std::optional<StepEnds>();
  StepEnds ends;
  for (bool slow : {false, true}) {
    HardwareProfile hw;
    static_cast<::rp::timing::HardwareModel &>(hw) =
        ::rp::timing::atEnd(target.hw, unknown, slow);
    if (!costs[slow]) {
      FailureOr<std::vector<LayerCost>> c =
          analyzeLayerCosts(func, hw, measured);
      if (failed(c))
        return failure();
      costs[slow] = std::move(*c);
    }
    PlanTarget at{hw,
                  target.kind,
                  target.devices,
                  target.microbatches,
                  target.dispatch,
                  target.passShift,
                  target.budget};
    FailureOr<PlanPrediction> p =
        predictPlan(partition, *costs[slow], at, error);
    if (failed(p))
      return failure();
    (slow ? ends.slowMs : ends.fastMs) = p->stepMs;
  }
  return std::optional<StepEnds>(ends);
}

std::string mlir::rp::endsText(const StepEnds &ends) {
  std::string s;
  llvm::raw_string_ostream(s)
      << llvm::format("%.3f - %.3f ms", ends.fastMs, ends.slowMs);
  return s;
}
