//===- ScheduleTiming.h - event-driven iteration time of a schedule -*- C++
//-*-//
//
// A schedule is what a dispatch plan does, reduced to timing: commands on
// per-device ordered queues (compute, weight H2D, activation H2D, D2H),
// each with a duration and the commands it waits for (events). Every queue
// runs its commands in order, one at a time; a command starts when its
// queue is free and every command it waits for has ended. The estimate is
// exact for that model and deterministic; a cycle among waits and queue
// order is a deadlock and is reported. The partitioner's objective and
// rp-compile's predicted step time come from here, and the sim runtime
// backend must agree with it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_SCHEDULETIMING_H
#define RP_ANALYSIS_SCHEDULETIMING_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::rp {

enum class Queue : uint8_t { compute, weightH2D, activationH2D, d2h };
constexpr unsigned kNumQueues = 4;

struct Command {
  unsigned device = 0;
  Queue queue = Queue::compute;
  double ms = 0;
  /// Indices of earlier-issued or later-issued commands this one waits for.
  std::vector<unsigned> waits;
  /// For timelines and messages: `F3 mb0`, `UP w6`, ...
  std::string label;
};

/// Commands in issue order: per (device, queue), the order of the vector is
/// the queue's order.
struct Schedule {
  unsigned devices = 1;
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

/// Textbook schedules with one stage per device (static binding) and
/// free transfers, for the baselines and for checking the estimate against
/// the known bubble (p - 1) / (m + p - 1).
Schedule gpipeSchedule(unsigned stages, unsigned microbatches, double forwardMs,
                       double backwardMs);
Schedule oneFOneBSchedule(unsigned stages, unsigned microbatches,
                          double forwardMs, double backwardMs);

} // namespace mlir::rp

#endif // RP_ANALYSIS_SCHEDULETIMING_H
