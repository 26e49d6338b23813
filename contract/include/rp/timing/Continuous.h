//===- Continuous.h - one pass's graph laid out as a run ---------*- C++
//-*-===//
//
// The one layout of a continuous run (issue 16) that the compiler's steady
// state (include/rp/Analysis/SteadyState.h) and the sim device
// (runtime/lib/sim/SimContinuous.h) both time, so the two cannot model the
// schedule twice: one pass's task graph (its commands, transfers included)
// is repeated for every pass of the run (steps x accumulation passes), pass
// p with the devices renamed by p * shift mod G, each physical lane running
// its share of pass p before pass p+1's, and the host's work added as
// tasks of the same graph, as the trainer runs a staged plan
// (runtime/lib/exec/StagedTrainer.cpp):
// - the prologue that stages a pass into its slot (pass p + slots only
//   after pass p's epilogue), on the host lane of "device" G;
// - the epilogue after a pass's last command (its losses read);
// - the optimizer after a step's last epilogue, parameter by parameter in
//   the trainer's order (its own thread G + 1 in async mode, inline in sync
//   mode), the update in flight finishing before the next one starts;
// - per pass and parameter a gate (lane G + 2 + gate) that opens once the
//   pass is staged and the update making its weight version (W_k in sync
//   mode, W_max(k-1,0) in async mode) has written that parameter, as the
//   trainer's per-parameter fences.
//
// The period is read from the step ends (a step ends with its last pass's
// epilogue) as they come: after a warm-up of rotation + 3 steps (sync) or
// rotation + 2 (async: the first steps wait for no update and run ahead
// while the devices' backlog builds up; a rotation is G / gcd(K * shift,
// G) steps), the first cycle of step-end differences that repeats
// (cycleAt) gives the mean over that cycle: one step, a rotation, two
// steps that pair up in async mode where a pass is a chain longer than a
// step (one microbatch), or three steps on four devices. Only the steps
// that can start before the cycle's end are laid out after it, and with
// RunLayout::untilSteady the timing stops there (Timeline.h's Watch).
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_CONTINUOUS_H
#define RP_TIMING_CONTINUOUS_H

#include "rp/timing/Timeline.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace rp::timing {

struct RunLayout {
  /// Steps to lay out at least (more when the rotation needs them).
  unsigned steps = 3;
  /// Passes per optimizer step (gradient accumulation).
  unsigned accumulate = 1;
  /// W_k (sync) or W_max(k-1,0) (async) for step k's passes.
  bool sync = false;
  /// Passes in flight (buffer slots), 2 as the trainer runs them.
  unsigned slots = 2;
  /// Copies of the device arenas: one per pass in flight (0), or 1, one
  /// set that every pass on a device shares, so a device takes up pass
  /// p+1's work once its own part of pass p is done (on every lane).
  unsigned arenaCopies = 0;
  /// Device shift per pass (0: every pass on the same devices).
  unsigned shift = 0;
  /// Host work per pass (prologue, epilogue) and per step (optimizer).
  double prologueMs = 0, epilogueMs = 0, optimizerMs = 0;
  /// The rate the host's work streams host memory at (GB/s), so that with a
  /// host-DRAM limit it shares DRAM with the copies (Timeline.h).
  double hostGBps = 0;
  /// The parameters' gates: `order` lists the parameters in the order the
  /// optimizer updates them and `share` gives each its part of the
  /// optimizer's time (summing to 1). Empty order: one gate that opens
  /// after the whole update.
  std::vector<size_t> order;
  std::vector<double> share;
  /// Per task of the pass, the gates it waits for: 0 the pass's staging
  /// only, g >= 1 parameter g - 1's. Empty (the whole vector): every task
  /// waits for gate 1 (one gate, or the first parameter's).
  std::vector<std::vector<unsigned>> gatesOfTask;
  /// Stop timing once the period is read (the partitioner needs only the
  /// period): the tasks after it keep start and end 0.
  bool untilSteady = false;
};

struct ContinuousRun {
  /// The whole run: pass p's copy of the pass's task i is task
  /// p * passTasks + i; the host's tasks follow. Its waits are in the
  /// graph's flat arrays (Graph::waitsOf), not the tasks' own vectors.
  Graph graph;
  Times times;
  unsigned steps = 0, passes = 0, accumulate = 1;
  /// Steps after which every pass is back on its first devices.
  unsigned rotation = 1;
  /// Steps the period is measured over: the step ends' cycle (two
  /// rotations where they never repeat to rounding).
  unsigned window = 1;
  unsigned shift = 0;
  size_t passTasks = 0;
  /// Per pass its prologue and epilogue task; per step its optimizer's
  /// first and last task.
  std::vector<unsigned> prologue, epilogue, optimizer, optimizerFirst;
  /// The measuring window [windowFrom, windowTo] and the mean period.
  double windowFrom = 0, windowTo = 0, stepMs = 0;

  /// The end of step k: its last pass's epilogue.
  double stepEnd(unsigned k) const;
  /// The device shift of pass p.
  unsigned shiftOf(unsigned pass) const;
};

/// The period, in steps, of `ends` (a run's step ends so far) at its
/// newest end k: the smallest p whose last max(p, confirm, 2) differences
/// between consecutive ends equal, to rounding, the differences p before
/// them, using no difference before ends[warmup + 1] - ends[warmup]; 0
/// when none repeats yet. A run confirms over a rotation at least: within
/// one, a few steps can take equal times and the next one longer (Llama-
/// 3.1-8B's rotating fwd:11,10,10;bwd:3,...,4 on 8 devices, three equal
/// differences in a rotation of 8).
unsigned cycleAt(const std::vector<double> &ends, unsigned warmup,
                 unsigned confirm = 2);

/// Lays out and times the run of `pass` (one pass's tasks, as
/// Timeline.h). std::nullopt when the run's waits form a cycle, with one
/// stuck task in `stuck`.
std::optional<ContinuousRun>
layOutRun(const Graph &pass, const RunLayout &layout, size_t *stuck = nullptr);

/// Gives a run's graph and times back to this thread's layOutRun, which
/// reuses their vectors (the waits' flat arrays included) for the next run: the
/// partitioner lays out thousands of runs of up to ~100,000 tasks, and
/// allocating and freeing them was a fifth of its time.
void recycle(ContinuousRun &&run);

} // namespace rp::timing

#endif // RP_TIMING_CONTINUOUS_H
