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
// With the host model on (HostModel::on: a host-DRAM limit, or an uplink
// slower than the GPUs' own links) the copies and the host tasks that stream
// host memory (the optimizer, a task's `hostGBps`) are flows of one fluid
// model sharing three kinds of resource: each GPU's own link per direction,
// the uplink (PCIe switch or root port) of its `gpusPerLink` GPUs per
// direction, and host DRAM, read by uploads and written by downloads (x3
// for pageable copies, which the driver bounces through a pinned buffer) and
// streamed by the optimizer. Rates are max-min fair (progressive filling):
// every flow runs at the same share of its speed alone until a resource it
// uses is full. Off, the old equal-share model runs unchanged.
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
#include <functional>
#include <optional>
#include <vector>

namespace rp::timing {

/// A device's four ordered queues (as plan.fbs numbers them), and the
/// host's optimizer thread.
enum class Lane : uint8_t { compute, weightH2D, activationH2D, d2h, host };

struct Task {
  unsigned device = 0;
  Lane lane = Lane::compute;
  /// Its duration alone (a copy: alone on its link, at full DRAM speed).
  double ms = 0;
  /// Indices of the tasks this one waits for, anywhere in the graph.
  std::vector<unsigned> waits;
  /// A host task streaming host memory at this rate when alone (GB/s): a
  /// flow on host DRAM when the host model is on; 0 for none.
  double hostGBps = 0;
  /// Of `ms`, the host's dispatch work that runs before the rest with the
  /// device waiting (a framework's MoE expert loop: moe_host_us). With
  /// HostModel::interpreters set it is a flow on the host's interpreters,
  /// shared fairly with every other device's (RoundPipe's one Python
  /// interpreter: its device threads hold the GIL in turn); else it is
  /// part of the fixed duration, each device's own thread doing its own.
  double dispatchMs = 0;
  /// Of the rest of `ms` (after dispatchMs), the host's work issuing the
  /// kernels (kernel_host_us per call), run beside them: the device cannot
  /// run ahead of the host that issues to it, so the caller makes `ms`
  /// dispatchMs plus the larger of the kernels' time and this. With
  /// HostModel::interpreters set it is a flow on the interpreters after the
  /// dispatch work, shared like it, and the task ends when both its
  /// kernels and this flow have (a framework's eager launches holding one
  /// interpreter); else the fixed `ms` already says it.
  double issueMs = 0;
};

/// The host side of the copies (docs/sim.md "What it models"): rates in
/// GB/s, from the hardware profile (HardwareModel::hostModel).
struct HostModel {
  /// Each GPU's own link, per direction: a copy's rate alone.
  double h2dGBps = 0, d2hGBps = 0;
  /// The uplink the gpusPerLink GPUs behind one switch share, per
  /// direction; 0: as fast as one GPU's link (the GPUs share one link).
  double uplinkGBps = 0;
  /// Host DRAM, shared by every copy and the host's streaming work; 0:
  /// unlimited.
  double dramGBps = 0;
  /// Bytes of DRAM traffic per byte copied: 1 pinned, 3 pageable.
  double copyDramFactor = 1;
  /// Host threads that can run dispatch and issue work (Task::dispatchMs,
  /// Task::issueMs) at once,
  /// every device's together; 0: one per device, none shared (rp's
  /// executor: a thread per queue, no interpreter lock).
  unsigned interpreters = 0;
  /// CPU cores that every device's compute (Lane::compute) and the host's
  /// own work (Lane::host: the prologue, epilogue and optimizer) share,
  /// each task a flow of at most one core; 0: each its own processor. Set
  /// only where the devices are the host's threads (the host backend):
  /// a GPU's kernels do not run on the host's cores. A fraction is the
  /// share of a machine that other work shares.
  double cores = 0;
  bool on() const {
    // An uplink as fast as a GPU's link is the model without the host:
    // the GPUs behind it share one link.
    return dramGBps > 0 || cores > 0 ||
           (uplinkGBps > 0 && (uplinkGBps != h2dGBps || uplinkGBps != d2hGBps));
  }
};

struct Graph {
  unsigned devices = 1;
  /// Devices d and e share a host link (an uplink) when d / gpusPerLink
  /// equals e / gpusPerLink.
  unsigned gpusPerLink = 1;
  HostModel host;
  /// The host's hand-off to a task that waits on a task of another lane
  /// (the profile's `job_us`): the waiting queue's thread learns of the
  /// event and dispatches, so the task starts this long after that wait's
  /// end. A lane's own order costs nothing more (jobs queued back to back
  /// run 0.06 us apart on the host backend, bench/launch_cost.py).
  double handoffMs = 0;
  /// Per (device, lane), the order of this vector is the lane's order.
  std::vector<Task> tasks;
  /// The tasks' waits in one array, where the graph keeps them so: task
  /// i's are flatWaits[flatFirst[i], flatFirst[i + 1]), its Task::waits
  /// unread. A continuous run (Continuous.h) writes its tasks' waits here:
  /// the partitioner lays out thousands of runs of up to ~100,000 tasks,
  /// and a vector per task to write and then to read back was a fifth of
  /// its time. Used only when flatFirst has a value per task and one more.
  std::vector<unsigned> flatFirst, flatWaits;

  /// Task i's waits, wherever the graph keeps them.
  struct Waits {
    const unsigned *from = nullptr, *to = nullptr;
    const unsigned *begin() const { return from; }
    const unsigned *end() const { return to; }
    size_t size() const { return size_t(to - from); }
    bool empty() const { return from == to; }
    unsigned front() const { return *from; }
  };
  bool flat() const { return flatFirst.size() == tasks.size() + 1; }
  Waits waitsOf(size_t i) const {
    if (flat())
      return {flatWaits.data() + flatFirst[i],
              flatWaits.data() + flatFirst[i + 1]};
    const std::vector<unsigned> &w = tasks[i].waits;
    return {w.data(), w.data() + w.size()};
  }
};

struct Times {
  std::vector<double> start, end;
  /// The end of the last task.
  double makespan = 0;
  /// Per device, the sum of its compute tasks' durations.
  std::vector<double> computeBusyMs;
  /// Per uplink and direction (2 * uplink + 1 up, 2 * uplink down), the
  /// integral of its used share of bandwidth over time (ms at 100 %).
  std::vector<double> uplinkBusyMs;
  /// The same for host DRAM (0 without a DRAM limit).
  double dramBusyMs = 0;
  /// With HostModel::interpreters set, the dispatch and issue work run on
  /// them (ms of one interpreter busy).
  double interpreterBusyMs = 0;
  /// False when a Watch ended the timing early: tasks not ended by then
  /// have start and end 0, and the busy figures cover the time run only.
  bool complete = true;
};

/// Tasks whose ends a caller reads as they come (a run's step ends), to end
/// the timing as soon as they say enough: after each ends, in the listed
/// order, `enough(k, end)` for its position k. Ending early is exact: no
/// task that starts later changes an earlier end, so every time up to the
/// stop is what the whole graph would give.
struct Watch {
  std::vector<unsigned> tasks;
  std::function<bool(size_t, double)> enough;
};

/// What each task must wait for: its predecessor on its lane and the tasks
/// it waits for. `pending[i]` counts them, `succs` is the reverse.
void dependencies(const std::vector<Task> &tasks,
                  std::vector<std::vector<unsigned>> &succs,
                  std::vector<unsigned> &pending);

/// The start and end of every task; std::nullopt when the waits and lane
/// orders form a cycle (a deadlock), with one stuck task in `stuck`.
/// `storage`, if given, lends its vectors (moved from) so that a caller
/// timing graph after graph allocates no new ones.
std::optional<Times> resolve(const Graph &graph, size_t *stuck = nullptr,
                             const Watch *watch = nullptr,
                             Times *storage = nullptr);

} // namespace rp::timing

#endif // RP_TIMING_TIMELINE_H
