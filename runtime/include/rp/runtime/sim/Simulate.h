//===- Simulate.h - training steps of a staged plan on the sim --*- C++ -*-===//
//
// What `rp-run --backend sim` does: runs a staged training plan's pass
// through the PipelineExecutor on the sim backend without loading a weight
// or running a host program, and lays the run out in virtual time the way
// the trainer runs it. Host work is timed: the prologue and epilogue stream
// their kernels' bytes at the profile's optimizer_gbps, the optimizer 28
// bytes per trainable parameter at the same rate, after the step in sync
// mode, beside the next step in async mode.
//
// By default steps and accumulation passes flow into each other, devices
// renamed pass by pass (SimContinuous.h): step_ms is the steady step (the mean
// over a whole rotation of the devices, well after the start), the idle
// split covers the whole run, so fill and drain count once, and the steady
// bubble is the idle share of the steady window. With stepBarrier each step
// is the prologue, the jobs and the epilogue behind a barrier, and the
// figures are those of the last step over its period (from its start to the
// next step's). The idle split is RoundPipe simulator's
// (reference/roundpipe.md §6): fill (before a device's first compute), drain
// (after its last), switch (between computes of different stage jobs or
// passes) and intra-stage (between computes of one stage job), each as a
// share of span x devices; exposed communication is the idle time during
// which one of the device's copies is in flight, a part of the four above,
// reported apart. docs/sim.md says it all with figures.
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
  /// Passes in flight (rp-run --passes-in-flight); 0 takes the plan's
  /// (passesInFlight).
  unsigned passesInFlight = 0;
  /// Copies of the device arenas (rp-run --arena-copies); 0 takes the
  /// plan's (arenaCopies). One for two passes: a device takes up a pass
  /// once its own part of the pass before is done.
  unsigned arenaCopies = 0;
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
  /// run's), the idle share of the steady window (rotationSteps steps: a
  /// rotation, two in async mode), the device shift per pass.
  bool continuous = false;
  double runMs = 0, steadyBubblePct = 0;
  /// Continuous layout: per uplink direction (2u + 1 up, 2u down) and for
  /// host DRAM, the share of bandwidth in use over the run, in percent.
  std::vector<double> uplinkBusyPct;
  /// Whether the profile models the host (HostModel::on): the summary
  /// prints the two above only then.
  bool hostModel = false;
  double hostDramBusyPct = 0;
  /// With the profile's host_interpreters set (the model of RoundPipe's
  /// one Python interpreter), their share busy with dispatch work over the
  /// run; printed only then.
  unsigned interpreters = 0;
  double interpreterBusyPct = 0;
  /// The busiest device's compute over the idlest's (1: even): over the
  /// steady window (continuous), or in one pass (barrier layout).
  double busyRatio = 1;
  uint32_t shift = 0;
  unsigned rotationSteps = 1, inFlight = 1, arenaCopies = 1;
  /// Why the devices are not renamed pass after pass, when they are not
  /// and the plan would move them.
  std::string notRenamed;
  /// Per plan job, its start and end within the jobs phase (ms).
  std::vector<double> jobStartMs, jobEndMs;
  /// Bytes the copies the sim timed move per step (a pass's, times the
  /// passes of a step): host to device on the weight queue (the plan's
  /// weight uploads, as stored: a quantized base's blobs) and on the
  /// activation queue, and device to host.
  uint64_t weightUploadBytes = 0, activationUploadBytes = 0, downloadBytes = 0;
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
