//===- ScheduleTiming.cpp - event-driven iteration time of a schedule -----===//

#include "rp/Analysis/ScheduleTiming.h"
#include "rp/timing/Timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <utility>

using namespace mlir::rp;

bool mlir::rp::isCompute(CommandKind kind) {
  return kind == CommandKind::forward || kind == CommandKind::tail ||
         kind == CommandKind::backward;
}

Queue mlir::rp::queueOf(CommandKind kind) {
  switch (kind) {
  case CommandKind::forward:
  case CommandKind::tail:
  case CommandKind::backward:
    return Queue::compute;
  case CommandKind::h2dWeights:
    return Queue::weightH2D;
  case CommandKind::h2dActivation:
  case CommandKind::h2dGradient:
  case CommandKind::h2dKeys:
    return Queue::activationH2D;
  case CommandKind::d2hActivation:
  case CommandKind::d2hGradient:
  case CommandKind::d2hWeightGrads:
  case CommandKind::d2hKeys:
    return Queue::d2h;
  case CommandKind::optimizer:
    return Queue::host;
  }
  return Queue::compute;
}

double Timing::bubbleFraction() const {
  if (iterationMs <= 0 || computeBusyMs.empty())
    return 0;
  double busy = 0;
  for (double b : computeBusyMs)
    busy += b;
  return 1 - busy / (computeBusyMs.size() * iterationMs);
}

::rp::timing::Graph mlir::rp::timingGraphOf(const Schedule &schedule) {
  ::rp::timing::Graph g;
  g.devices = schedule.devices;
  g.gpusPerLink = schedule.gpusPerLink;
  g.host = schedule.host;
  g.handoffMs = schedule.jobMs;
  g.tasks.reserve(schedule.commands.size());
  for (const Command &c : schedule.commands) {
    ::rp::timing::Task t;
    t.device = c.device;
    t.lane = c.queue;
    t.ms = c.ms;
    t.waits = c.waits;
    g.tasks.push_back(std::move(t));
  }
  return g;
}

namespace {

void dependencies(const std::vector<Command> &cmds,
                  std::vector<std::vector<unsigned>> &succs,
                  std::vector<unsigned> &pending) {
  Schedule s;
  s.commands = cmds;
  ::rp::timing::dependencies(timingGraphOf(s).tasks, succs, pending);
}

} // namespace

std::optional<Timing> mlir::rp::estimateTiming(const Schedule &schedule,
                                               std::string *stuck) {
  size_t stuckAt = 0;
  std::optional<::rp::timing::Times> times =
      ::rp::timing::resolve(timingGraphOf(schedule), &stuckAt);
  if (!times) {
    if (stuck && stuckAt < schedule.commands.size())
      *stuck = schedule.commands[stuckAt].label;
    return std::nullopt;
  }
  Timing t;
  t.start = std::move(times->start);
  t.end = std::move(times->end);
  t.iterationMs = times->makespan;
  t.computeBusyMs = std::move(times->computeBusyMs);
  return t;
}

std::optional<Schedule> mlir::rp::inIssueOrder(const Schedule &schedule,
                                               std::string *stuck) {
  std::optional<Timing> t = estimateTiming(schedule, stuck);
  if (!t)
    return std::nullopt;
  const std::vector<Command> &cmds = schedule.commands;
  std::vector<std::vector<unsigned>> succs;
  std::vector<unsigned> pending;
  dependencies(cmds, succs, pending);
  using Key = std::pair<double, unsigned>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (unsigned i = 0; i < cmds.size(); ++i)
    if (pending[i] == 0)
      ready.push({t->start[i], i});
  std::vector<unsigned> order, position(cmds.size());
  while (!ready.empty()) {
    unsigned i = ready.top().second;
    ready.pop();
    position[i] = order.size();
    order.push_back(i);
    for (unsigned s : succs[i])
      if (--pending[s] == 0)
        ready.push({t->start[s], s});
  }
  Schedule out;
  out.devices = schedule.devices;
  for (unsigned i : order) {
    Command c = cmds[i];
    for (unsigned &w : c.waits)
      w = position[w];
    out.add(std::move(c));
  }
  return out;
}

namespace {

/// Forward and backward compute commands of stage s, microbatch m, with the
/// pipeline dependencies: forward after the previous stage's forward,
/// backward after the next stage's backward (or this stage's forward on
/// the last stage).
struct StaticPipeline {
  Schedule schedule;
  std::vector<std::vector<unsigned>> fwd, bwd; // [stage][mb]
  unsigned stages, microbatches;
  double forwardMs, backwardMs;

  StaticPipeline(unsigned p, unsigned m, double f, double b)
      : fwd(p, std::vector<unsigned>(m, ~0u)),
        bwd(p, std::vector<unsigned>(m, ~0u)), stages(p), microbatches(m),
        forwardMs(f), backwardMs(b) {
    schedule.devices = p;
  }

  void forward(unsigned s, unsigned m) {
    Command c{s, Queue::compute, forwardMs, {}, ""};
    c.label = "F" + std::to_string(s) + " mb" + std::to_string(m);
    if (s > 0)
      c.waits.push_back(fwd[s - 1][m]);
    fwd[s][m] = schedule.add(std::move(c));
  }
  void backward(unsigned s, unsigned m) {
    Command c{s, Queue::compute, backwardMs, {}, ""};
    c.label = "B" + std::to_string(s) + " mb" + std::to_string(m);
    c.waits.push_back(s + 1 < stages ? bwd[s + 1][m] : fwd[s][m]);
    bwd[s][m] = schedule.add(std::move(c));
  }
};

} // namespace

Schedule mlir::rp::gpipeSchedule(unsigned stages, unsigned microbatches,
                                 double forwardMs, double backwardMs) {
  StaticPipeline p(stages, microbatches, forwardMs, backwardMs);
  // Issue order is per queue: all forwards, then all backwards. Backwards
  // run from the last stage down, so the waits are issued before use.
  for (unsigned s = 0; s < stages; ++s)
    for (unsigned m = 0; m < microbatches; ++m)
      p.forward(s, m);
  for (unsigned s = stages; s-- > 0;)
    for (unsigned m = 0; m < microbatches; ++m)
      p.backward(s, m);
  return std::move(p.schedule);
}

Schedule mlir::rp::oneFOneBSchedule(unsigned stages, unsigned microbatches,
                                    double forwardMs, double backwardMs) {
  StaticPipeline p(stages, microbatches, forwardMs, backwardMs);
  // Per stage: p - s - 1 warm-up forwards, then one forward and one
  // backward alternately, then the remaining backwards.
  std::vector<std::vector<std::pair<bool, unsigned>>> order(stages);
  for (unsigned s = 0; s < stages; ++s) {
    unsigned warmup = std::min(stages - s - 1, microbatches);
    unsigned f = 0, b = 0;
    for (; f < warmup; ++f)
      order[s].push_back({true, f});
    while (f < microbatches) {
      order[s].push_back({true, f++});
      order[s].push_back({false, b++});
    }
    while (b < microbatches)
      order[s].push_back({false, b++});
  }
  // Waits cross stages both ways, so every command is issued before any
  // wait is attached.
  Schedule &sched = p.schedule;
  for (unsigned s = 0; s < stages; ++s)
    for (auto [isForward, m] : order[s]) {
      Command c{s, Queue::compute, isForward ? forwardMs : backwardMs, {}, ""};
      c.label = (isForward ? "F" : "B") + std::to_string(s) + " mb" +
                std::to_string(m);
      (isForward ? p.fwd : p.bwd)[s][m] = sched.add(std::move(c));
    }
  for (unsigned s = 0; s < stages; ++s)
    for (unsigned m = 0; m < microbatches; ++m) {
      if (s > 0)
        sched.commands[p.fwd[s][m]].waits.push_back(p.fwd[s - 1][m]);
      sched.commands[p.bwd[s][m]].waits.push_back(
          s + 1 < stages ? p.bwd[s + 1][m] : p.fwd[s][m]);
    }
  return std::move(sched);
}
