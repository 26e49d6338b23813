//===- Continuous.cpp - the steady state of steps run back to back --------===//

#include "rp/Analysis/Continuous.h"

#include <algorithm>
#include <numeric>

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
  // Round-robin: the job counter carries on, so step k starts where step
  // k-1's chain left off. Static schedules keep their stages' devices.
  bool rotate = one.kind == ScheduleKind::roundRobin;
  for (unsigned k = 0; k < run.steps; ++k)
    for (const StageJob &j : one.jobs) {
      StageJob c = j;
      if (rotate)
        c.device = (j.device + k * perStep) % one.devices;
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
  unsigned rotation = 1;
  if (pipeline.kind == ScheduleKind::roundRobin && perStep % g)
    rotation = g / std::gcd(perStep % g, g);
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
      s.deviceBusyMs[(pipeline.jobs[n].device + k * perStep) % g] +=
          jobMs[n] / rotation;
  s.firstStepMs = lastEnd[0];
  s.runMs = t->iterationMs;
  s.stepMs = (lastEnd[from + rotation] - lastEnd[from]) / rotation;
  return s;
}
