//===- Simulate.h - training steps of a staged plan on the sim --*- C++ -*-===//
//
// What `rp-run --backend sim` does: runs a staged training plan's steps
// through the PipelineExecutor on the sim backend without loading a weight
// or running a host program, and lays the steps out in virtual time the
// way the trainer runs them (Trainer.h): each step is the host prologue,
// the jobs (the step's command graph, resolved by the timing core), the
// host epilogue; the optimizer streams 28 bytes per trainable parameter at
// the profile's optimizer_gbps, after the step in sync mode, beside the
// next step in async mode (the trainer waits for step k's update after
// step k+1, before step k+2). Prologue and epilogue stream their kernels'
// bytes at the same host rate.
//
// Continuously (the default, as the trainer runs staged plans: runtime/
// README.md) or behind a barrier per step (stepBarrier), see Continuous.h
// and docs/sim.md. Behind barriers the figures are those of the last step, the
// steady state, over its period (the time from its start to the next step's):
// tokens/s, per device busy time, and the idle time split as RoundPipe's
// simulator splits it (reference/roundpipe.md §6): fill (before a device's
// first compute of the step), drain (after its last), switch (between computes
// of different stage jobs) and intra-stage (between computes of one stage
// job), each as a share of period x devices; exposed communication is the
// idle time during which one of the device's copies is in flight, a part
// of the four above, reported apart.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SIM_SIMULATE_H
#define RP_RUNTIME_SIM_SIMULATE_H

#include "rp/runtime/Plan.h"
#include "rp/runtime/Trace.h"
#include "rp/runtime/sim/SimDevice.h"

#include <string>
#include <vector>

namespace rp::runtime::sim {

struct SimulateOptions {
  /// Steps to lay out; at least 3 are simulated so that the last is in
  /// the steady state of the async optimizer.
  unsigned steps = 3;
  bool sync = false;
  /// Lay each pass out behind a barrier (the executor's order before
  /// continuous execution, rp-run --step-barrier), to compare; needs
  /// accumulate == 1.
  bool stepBarrier = false;
  /// Passes of the plan's microbatches per optimizer step (--accumulate).
  unsigned accumulate = 1;
  /// Where to record every step's jobs and host spans in virtual time
  /// (ns), if anywhere.
  Trace *trace = nullptr;
};

struct DeviceTime {
  /// busyMs: the plan device's compute in one pass (what the compiler
  /// predicts). The split: over the steady step (barrier layout) or over the
  /// whole run (continuous), whose compute time is runBusyMs.
  double runBusyMs = 0;
  double busyMs = 0, fillMs = 0, switchMs = 0, drainMs = 0, intraMs = 0;
  double exposedCommMs = 0;
};

struct SimReport {
  unsigned steps = 0;
  /// The steady-state step period, and the jobs phase within it.
  double stepMs = 0, jobsMs = 0;
  double prologueMs = 0, epilogueMs = 0, optimizerMs = 0;
  /// Label tokens per step (the global batch) and per second.
  double tokens = 0, tokensPerSecond = 0;
  std::vector<DeviceTime> devices;
  /// Shares of stepMs x devices, in percent.
  double bubblePct = 0, fillPct = 0, switchPct = 0, drainPct = 0, intraPct = 0,
         exposedCommPct = 0;
  /// Continuous layout: the whole run's span (its fill and drain are the
  /// run's), the idle share of the steady window (the last rotationSteps
  /// steps), the device shift per pass and the steps of one rotation.
  bool continuous = false;
  double runMs = 0, steadyBubblePct = 0;
  uint32_t shift = 0;
  unsigned rotationSteps = 1;
  /// Why the devices are not renamed pass after pass, when they are not
  /// and the plan would move them.
  std::string notRenamed;
  /// Per plan job, its start and end within the jobs phase (ms).
  std::vector<double> jobStartMs, jobEndMs;
};

/// Simulates `options.steps` steps of `plan` (staged) on `backend`, which
/// must have the plan's device count.
Expected<SimReport> simulate(const Plan &plan, SimBackend &backend,
                             const SimulateOptions &options);

/// The report as rp-run prints it on stdout: one `key value` line per
/// figure (DESIGN.md), per-device busy times included.
std::string formatReport(const SimReport &report);

} // namespace rp::runtime::sim

#endif // RP_RUNTIME_SIM_SIMULATE_H
