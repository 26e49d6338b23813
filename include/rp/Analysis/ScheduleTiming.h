//===- ScheduleTiming.h - event-driven iteration time of a schedule -*- C++
//-*-//
//
// A schedule is what a dispatch plan does, reduced to timing: commands on
// per-device ordered queues (compute, weight H2D, activation H2D, D2H),
// each with a duration and the commands it waits for (events). Every queue
// runs its commands in order, one at a time; a command starts when its
// queue is free and every command it waits for has ended. A copy's
// duration is its time alone on the link: the copies running at once in
// one direction of one host link (both upload queues of every device on
// it, or their download queues) share its bandwidth equally, so each takes
// longer. The estimate is exact for that model and deterministic; a cycle
// among waits and queue order is a deadlock and is reported. The
// partitioner's objective and rp-compile's predicted step time come from
// here. The model itself is the runtime's timing core
// (contract/include/rp/timing/Timeline.h), which the sim device runs too.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_SCHEDULETIMING_H
#define RP_ANALYSIS_SCHEDULETIMING_H

#include "rp/timing/Timeline.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::rp {

/// A device's four ordered queues, and the host's optimizer thread: the
/// timing core's lanes, one list for both.
using Queue = ::rp::timing::Lane;

/// What a command does: compute of a stage job, a copy, or the optimizer.
enum class CommandKind : uint8_t {
  forward,
  tail,
  backward,
  h2dWeights,
  h2dActivation,
  h2dGradient,
  d2hActivation,
  d2hGradient,
  d2hWeightGrads,
  optimizer,
  /// Token slices (docs/token-slices.md): the keys and values of a job's
  /// layers of a sequence's earlier slices, uploaded before a slice's
  /// compute, and the slice's own, downloaded after a forward.
  h2dKeys,
  d2hKeys
};

struct Command {
  unsigned device = 0;
  Queue queue = Queue::compute;
  double ms = 0;
  /// Indices of earlier-issued or later-issued commands this one waits for.
  std::vector<unsigned> waits;
  /// For timelines and messages: `F3 mb0`, `UP w6`, ...
  std::string label;
  CommandKind kind = CommandKind::forward;
  /// The stage job and microbatch it belongs to (-1: none).
  int job = -1, microbatch = -1;
  /// Copies: bytes moved. Compute: bytes of working memory.
  int64_t bytes = 0;
  /// Weight uploads: which chunk of the weight set.
  unsigned chunk = 0;
  /// Activation and gradient copies: the layer whose input they carry.
  int boundary = -1;
  /// Token slices' key uploads (h2dKeys): the sequence's slices
  /// [keptFirst, keptEnd) whose rows this copy brings up; -1, -1: every
  /// slice before the compute's, rows [0, o). A forward's prefix comes up
  /// in two parts, the rows its previous slice is still sending apart.
  int keptFirst = -1, keptEnd = -1;
};

/// The queue a command of `kind` runs on.
Queue queueOf(CommandKind kind);
bool isCompute(CommandKind kind);

/// Commands in issue order: per (device, queue), the order of the vector is
/// the queue's order.
struct Schedule {
  unsigned devices = 1;
  /// Devices d and e share a host link when d / gpusPerLink equals
  /// e / gpusPerLink; the copies of one direction on one link share its
  /// bandwidth.
  unsigned gpusPerLink = 1;
  /// The host side of the copies: uplinks, host DRAM (timing/Timeline.h).
  ::rp::timing::HostModel host;
  /// The host's hand-off to a command waiting on another queue's (the
  /// profile's `job_us`, timing::Graph::handoffMs), as the plan's
  /// predicted times and the sim charge it.
  double jobMs = 0;
  std::vector<Command> commands;

  unsigned add(Command c) {
    commands.push_back(std::move(c));
    return commands.size() - 1;
  }
};

struct Timing {
  std::vector<double> start, end;
  double iterationMs = 0;
  /// Per device, the time its compute queue is busy.
  std::vector<double> computeBusyMs;
  /// 1 - compute busy / (devices x iteration): the idle share of the GPUs.
  double bubbleFraction() const;
};

/// The start and end of every command; std::nullopt when the waits and
/// queue orders form a cycle (the plan would deadlock), with the label of
/// one stuck command in `stuck`.
std::optional<Timing> estimateTiming(const Schedule &schedule,
                                     std::string *stuck = nullptr);

/// The schedule as the shared timing core's graph (rp/timing/Timeline.h):
/// the queues are its lanes.
::rp::timing::Graph timingGraphOf(const Schedule &schedule);

/// `schedule` reissued so that every command comes after the commands it
/// waits for and after its queue predecessors (the order a plan writes its
/// commands in): by estimated start time, ties by position. std::nullopt
/// when the schedule deadlocks.
std::optional<Schedule> inIssueOrder(const Schedule &schedule,
                                     std::string *stuck = nullptr);

/// Textbook schedules with one stage per device (static binding) and
/// free transfers, for the baselines and for checking the estimate against
/// the known bubble (p - 1) / (m + p - 1).
Schedule gpipeSchedule(unsigned stages, unsigned microbatches, double forwardMs,
                       double backwardMs);
Schedule oneFOneBSchedule(unsigned stages, unsigned microbatches,
                          double forwardMs, double backwardMs);

} // namespace mlir::rp

#endif // RP_ANALYSIS_SCHEDULETIMING_H
