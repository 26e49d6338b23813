//===- SimContinuous.h - a staged plan's passes, no barriers ---*- C++ -*-===//
//
// How the sim lays a run out when steps flow into each other, as the
// trainer runs staged plans (runtime/README.md, lib/exec/StagedTrainer.cpp):
// one pass's command graph is repeated for every pass of the run (steps x
// accumulation passes), pass p with the plan's devices renamed by p * shift
// mod G, each physical queue running its share of pass p before pass p+1's,
// and the host's work added as tasks of the same graph: the prologue that
// stages a pass into its slot (pass p+slots only after pass p's epilogue),
// the epilogue after a pass's last command, the optimizer after a step's
// last epilogue (on its own thread in async mode, inline in sync mode), and
// per pass and parameter a gate that opens once the pass is staged and the
// update making its weight version (W_k in sync mode, W_max(k-1,0) in
// async: the update of step k-1, or of k-2) has written that parameter, as
// the trainer's per-parameter fences. That layout is the timing core's
// (rp/timing/Continuous.h), which the compiler's steady state lays out
// too; this file reads the sim's report off it (bubble split, trace).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SIM_SIMCONTINUOUS_H
#define RP_RUNTIME_SIM_SIMCONTINUOUS_H

#include "rp/runtime/sim/Simulate.h"

#include <algorithm>
#include <vector>

namespace rp::runtime::sim {

struct Interval {
  double from, to;
};

/// The length of `idle` covered by the union of `busy` (sorted by start).
double coveredBy(const Interval &idle, const std::vector<Interval> &busy);

/// One device's commands in a timed graph: its compute commands in the
/// order they ran (by start, ties by index) and its copies' busy intervals
/// (by start, shifted by `offset`), which the bubble split of a pass
/// (Simulate.cpp) and of a run (SimContinuous.cpp) both walk.
struct DeviceCommands {
  std::vector<size_t> compute;
  std::vector<Interval> copies;
};
template <typename OnDevice, typename IsCompute>
DeviceCommands deviceCommands(size_t count, const timing::Times &times,
                              double offset, OnDevice onDevice,
                              IsCompute isCompute) {
  DeviceCommands c;
  for (size_t i = 0; i < count; ++i) {
    if (!onDevice(i))
      continue;
    if (isCompute(i))
      c.compute.push_back(i);
    else if (times.end[i] > times.start[i])
      c.copies.push_back({offset + times.start[i], offset + times.end[i]});
  }
  std::sort(
      c.copies.begin(), c.copies.end(),
      [](const Interval &a, const Interval &b) { return a.from < b.from; });
  std::sort(c.compute.begin(), c.compute.end(), [&](size_t a, size_t b) {
    return times.start[a] < times.start[b] ||
           (times.start[a] == times.start[b] && a < b);
  });
  return c;
}

/// Fills the report's bubble split (fill, switch, drain, intra, exposed
/// communication and their bubble sum, in %) from its devices' times over
/// `total` device-milliseconds.
void splitBubble(SimReport &report, double total);

struct ContinuousLayout {
  unsigned steps = 3, accumulate = 1;
  /// The rate the host's work streams host memory at (GB/s): it shares
  /// host DRAM with the copies when the profile limits DRAM.
  double hostGBps = 0;
  bool sync = false;
  /// Passes in flight (buffer slots), 2 as the trainer runs them.
  unsigned slots = 2;
  /// Copies of the device arenas (0: one per pass in flight).
  unsigned arenaCopies = 0;
  /// Device shift per pass (passShiftJobs, 0 without renaming).
  uint32_t shift = 0;
  /// The trainer's weight gates (lib/exec/Fences.h): per plan job the
  /// parameters whose weights it reads, the order the optimizer updates
  /// them in, and each one's share of the optimizer's time (summing to 1).
  /// A pass's job starts once the update that makes its version has
  /// written those parameters. Empty: one gate per pass that opens after
  /// the whole update (the trainer's fallback when the prologue mixes
  /// parameters).
  std::vector<std::vector<uint32_t>> gatesOf;
  std::vector<size_t> order;
  std::vector<double> share;
  Trace *trace = nullptr;
};

/// Lays out the run with one pass's `commands` (takeStep's) and their
/// `pass` graph (graphOf), and fills the run's figures into `report`,
/// which holds the pass's figures already (prologue, epilogue, optimizer,
/// tokens, jobs and per device busy times). An internal error when the
/// graph cannot be ordered.
Status layOutContinuous(const Plan &plan,
                        const std::vector<SimCommand> &commands,
                        const timing::Graph &pass,
                        const ContinuousLayout &layout, SimReport &report);

} // namespace rp::runtime::sim

#endif // RP_RUNTIME_SIM_SIMCONTINUOUS_H
