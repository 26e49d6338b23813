//===- Continuous.cpp - the steady state of steps run back to back --------===//

#include "rp/Analysis/Continuous.h"

#include <algorithm>
#include <numeric>

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::rp;

double SteadyState::bubble() const {
  if (stepMs <= 0 || deviceBusyMs.empty())
    return 0;
  return std::max(0.0, 1 - busyMs / (deviceBusyMs.size() * stepMs));
}

double SteadyState::busyRatio() const {
  if (deviceBusyMs.empty())
    return 1;
  auto [lo, hi] = std::minmax_element(deviceBusyMs.begin(), deviceBusyMs.end());
  return *lo > 0 ? *hi / *lo : 0;
}

Pipeline mlir::rp::continuousPipeline(const Pipeline &one, unsigned steps) {
  Pipeline run = one;
  run.steps = std::max(1u, steps);
  run.jobs.clear();
  run.schedule.commands.clear();
  unsigned perStep = one.jobs.size(), numSets = 0;
  for (const StageJob &j : one.jobs)
    numSets = std::max(numSets, j.weightSet + 1);
  // Round-robin: step k's jobs move on by the pass shift (by default the
  // job counter carries on, so step k starts where step k-1's chain left
  // off). Static schedules keep their stages' devices.
  unsigned shift = one.shiftPerPass();
  for (unsigned k = 0; k < run.steps; ++k)
    for (const StageJob &j : one.jobs) {
      StageJob c = j;
      c.device = (j.device + k * shift) % one.devices;
      // Every step uploads its own weights (a new version).
      c.weightSet = j.weightSet + k * numSets;
      run.jobs.push_back(c);
    }
  // Queue order is list order, so concatenating the steps runs each queue's
  // step k work before its step k+1 work, as the executor issues it.
  unsigned perStepCommands = one.schedule.commands.size();
  for (unsigned k = 0; k < run.steps; ++k)
    for (const Command &c : one.schedule.commands) {
      Command d = c;
      d.job = c.job + k * perStep;
      d.device = run.jobs[d.job].device;
      for (unsigned &w : d.waits)
        w += k * perStepCommands;
      run.schedule.commands.push_back(std::move(d));
    }
  return run;
}

std::optional<SteadyState>
mlir::rp::steadyState(const Pipeline &pipeline,
                      llvm::ArrayRef<LayerCost> layers,
                      const HardwareProfile &hw, bool syncOptimizer,
                      unsigned steps, std::string *stuck) {
  // The period is the mean over one rotation (G / gcd(S, G) steps, after
  // which every job is back on its step-0 device) read off after a warm-up
  // of rotation + 3 steps, as the sim device reads it (runtime/lib/sim/
  // Continuous.cpp): the first steps wait for no optimizer and run ahead
  // of the steady state while the devices' backlog builds up, so a period
  // read off early is optimistic, and one read over part of a rotation
  // depends on which devices the measured steps landed on.
  unsigned perStep = pipeline.jobsPerStep(), g = pipeline.devices;
  unsigned shift = pipeline.shiftPerPass();
  unsigned rotation = shift ? g / std::gcd(shift, g) : 1;
  unsigned from = rotation + 3;
  steps = std::max(steps, from + rotation + 1);
  Pipeline run = continuousPipeline(pipeline, steps);
  run.syncOptimizer = syncOptimizer;
  insertTransfers(run, layers, hw);
  // No wait between steps beyond data, queues and weight versions: the
  // trainer keeps two passes in flight and reads a step's losses while the
  // next one runs, as the sim device lays them out.
  std::optional<Timing> t = estimateTiming(run.schedule, stuck);
  if (!t)
    return std::nullopt;
  // The end of each step's last compute.
  std::vector<double> lastEnd(steps, 0);
  SteadyState s;
  s.steps = steps;
  s.deviceBusyMs.assign(run.devices, 0);
  for (auto [i, c] : llvm::enumerate(run.schedule.commands)) {
    if (!isCompute(c.kind) || c.job < 0)
      continue;
    unsigned k = unsigned(c.job) / perStep;
    lastEnd[k] = std::max(lastEnd[k], t->end[i]);
    if (k == 0)
      s.busyMs += c.ms;
  }
  // Per device, its compute per step over a whole rotation.
  std::vector<double> jobMs(perStep, 0);
  for (const Command &c : pipeline.schedule.commands)
    if (isCompute(c.kind) && c.job >= 0)
      jobMs[c.job] += c.ms;
  for (unsigned k = 0; k < rotation; ++k)
    for (unsigned n = 0; n < perStep; ++n)
      s.deviceBusyMs[(pipeline.jobs[n].device + k * shift) % g] +=
          jobMs[n] / rotation;
  s.shift = shift;
  s.firstStepMs = lastEnd[0];
  s.runMs = t->iterationMs;
  s.stepMs = (lastEnd[from + rotation] - lastEnd[from]) / rotation;
  return s;
}

std::optional<Dispatch> mlir::rp::parseDispatch(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Dispatch>>(name)
      .Case("modulo", Dispatch::modulo)
      .Case("rounds", Dispatch::rounds)
      .Default(std::nullopt);
}

llvm::StringRef mlir::rp::dispatchName(Dispatch dispatch) {
  return dispatch == Dispatch::modulo ? "modulo" : "rounds";
}

std::optional<SteadyState>
mlir::rp::dispatchPasses(Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
                         const HardwareProfile &hw, Dispatch dispatch,
                         bool syncOptimizer, std::string *stuck) {
  unsigned g = pipeline.devices;
  if (pipeline.kind != ScheduleKind::roundRobin)
    return steadyState(pipeline, layers, hw, syncOptimizer, kSteadySteps,
                       stuck);
  unsigned modulo = pipeline.jobsPerStep() % g;
  pipeline.passShift = int(modulo);
  std::optional<SteadyState> best =
      steadyState(pipeline, layers, hw, syncOptimizer, kSteadySteps, stuck);
  // A shift coprime to G walks every job over every device; the modulo one
  // that is not leaves the same jobs on the same devices pass after pass.
  if (!best || dispatch == Dispatch::modulo || std::gcd(modulo, g) == 1)
    return best;
  for (unsigned shift : {1u, g - 1}) {
    Pipeline candidate = pipeline;
    candidate.passShift = int(shift);
    std::optional<SteadyState> s =
        steadyState(candidate, layers, hw, syncOptimizer, kSteadySteps, stuck);
    if (s && s->stepMs < best->stepMs) {
      best = s;
      pipeline.passShift = int(shift);
    }
  }
  return best;
}
