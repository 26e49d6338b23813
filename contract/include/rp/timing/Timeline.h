//===- Timeline.h - the discrete-event timing core ---------------*- C++
//-*-===//
//
// The one model of time that the compiler's schedule analysis
// (include/rp/Analysis/ScheduleTiming.h) and the runtime's sim device
// (runtime/lib/sim) both run, so that the two cannot drift: tasks on
// per-device ordered lanes (the four queues of a device, and the host),
// each with a duration and the tasks it waits for. A lane runs its tasks in
// order, one at a time; a task starts when its lane is free and every task
// it waits for has ended. A copy's duration is its time alone on the link:
// the copies running at once in one direction of one host link (both
// upload lanes of every device behind it, or their download lanes) share
// its bandwidth equally, so each takes longer (a fluid model).
//
// The result depends on the graph only: not on the order tasks were added
// in beyond each lane's own order, which is why the sim device can resolve
// a step once all of its commands are in, whatever the interleaving of the
// threads that enqueued them. Pure C++ with no dependency, so the runtime
// and the compiler both link it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TIMING_TIMELINE_H
#define RP_TIMING_TIMELINE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace rp::timing {

/// A device's four ordered queues (as plan.fbs numbers them), and the
/// host's optimizer thread.
enum class Lane : uint8_t { compute, weightH2D, activationH2D, d2h, host };

struct Task {
  unsigned device = 0;
  Lane lane = Lane::compute;
  double ms = 0;
  /// Indices of the tasks this one waits for, anywhere in the graph.
  std::vector<unsigned> waits;
};

struct Graph {
  unsigned devices = 1;
  /// Devices d and e share a host link when d / gpusPerLink equals
  /// e / gpusPerLink.
  unsigned gpusPerLink = 1;
  /// Per (device, lane), the order of this vector is the lane's order.
  std::vector<Task> tasks;
};

struct Times {
  std::vector<double> start, end;
  /// The end of the last task.
  double makespan = 0;
  /// Per device, the sum of its compute tasks' durations.
  std::vector<double> computeBusyMs;
};

/// What each task must wait for: its predecessor on its lane and the tasks
/// it waits for. `pending[i]` counts them, `succs` is the reverse.
void dependencies(const std::vector<Task> &tasks,
                  std::vector<std::vector<unsigned>> &succs,
                  std::vector<unsigned> &pending);

/// The start and end of every task; std::nullopt when the waits and lane
/// orders form a cycle (a deadlock), with one stuck task in `stuck`.
std::optional<Times> resolve(const Graph &graph, size_t *stuck = nullptr);

} // namespace rp::timing

#endif // RP_TIMING_TIMELINE_H
