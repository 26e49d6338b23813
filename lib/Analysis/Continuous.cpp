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
  steps = std::max(3u, steps);
  Pipeline run = continuousPipeline(pipeline, steps);
  run.syncOptimizer = syncOptimizer;
  insertTransfers(run, layers, hw);
  // The trainer reads a step's losses before it starts the next step: step
  // k's first compute waits for step k-1's last tail compute (RoundPipe's
  // forward_backward returns there too). So two steps never run side by
  // side, only the next step's fill under this step's drain.
  unsigned perStep = run.jobsPerStep();
  std::vector<int> firstOf(steps, -1), lastTailOf(steps, -1);
  for (auto [i, c] : llvm::enumerate(run.schedule.commands)) {
    if (!isCompute(c.kind) || c.job < 0)
      continue;
    unsigned k = unsigned(c.job) / perStep;
    if (unsigned(c.job) % perStep == 0 && c.microbatch == 0)
      firstOf[k] = int(i);
    if (c.kind == CommandKind::tail &&
        c.microbatch == int(pipeline.microbatches) - 1)
      lastTailOf[k] = int(i);
  }
  for (unsigned k = 1; k < steps; ++k)
    if (firstOf[k] >= 0 && lastTailOf[k - 1] >= 0)
      run.schedule.commands[firstOf[k]].waits.push_back(lastTailOf[k - 1]);
  std::optional<Timing> t = estimateTiming(run.schedule, stuck);
  if (!t)
    return std::nullopt;
  // The end of each step's last compute.
  // The period is read off the steps after step 2: in async mode, the
  // first two steps wait for no optimizer, so they run faster than the
  // steady state when the optimizer is the bottleneck.
  std::vector<double> lastEnd(steps, 0);
  unsigned from = std::min(2u, steps - 2);
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
  // Per device, its compute per step over a whole rotation (G / gcd(S, G)
  // steps, after which every job is back on its step-0 device).
  std::vector<double> jobMs(perStep, 0);
  for (const Command &c : pipeline.schedule.commands)
    if (isCompute(c.kind) && c.job >= 0)
      jobMs[c.job] += c.ms;
  unsigned g = run.devices, cycle = 1;
  if (pipeline.kind == ScheduleKind::roundRobin)
    cycle = g / std::gcd(perStep % g, g);
  for (unsigned k = 0; k < cycle; ++k)
    for (unsigned n = 0; n < perStep; ++n)
      s.deviceBusyMs[(pipeline.jobs[n].device + k * perStep) % g] +=
          jobMs[n] / cycle;
  s.firstStepMs = lastEnd[0];
  s.runMs = t->iterationMs;
  s.stepMs = (lastEnd[steps - 1] - lastEnd[from]) / (steps - 1 - from);
  return s;
}
