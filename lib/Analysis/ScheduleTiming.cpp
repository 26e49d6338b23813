//===- ScheduleTiming.cpp - event-driven iteration time of a schedule -----===//

#include "rp/Analysis/ScheduleTiming.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <map>
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
    return Queue::activationH2D;
  case CommandKind::d2hActivation:
  case CommandKind::d2hGradient:
  case CommandKind::d2hWeightGrads:
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

namespace {

/// Which shared link direction a command's transfer uses, if any.
std::optional<std::pair<unsigned, bool>> linkOf(const Command &c,
                                                unsigned gpusPerLink) {
  bool up = c.queue == Queue::weightH2D || c.queue == Queue::activationH2D;
  if (!up && c.queue != Queue::d2h)
    return std::nullopt;
  return std::make_pair(c.device / std::max(gpusPerLink, 1u), up);
}

/// What each command must wait for: its predecessor on its queue and the
/// commands it waits for; `pending` counts them, `succs` is the reverse.
void dependencies(const std::vector<Command> &cmds,
                  std::vector<std::vector<unsigned>> &succs,
                  std::vector<unsigned> &pending) {
  unsigned n = cmds.size();
  succs.assign(n, {});
  pending.assign(n, 0);
  std::map<std::pair<unsigned, unsigned>, unsigned> lastOnQueue;
  auto edge = [&](unsigned from, unsigned to) {
    succs[from].push_back(to);
    ++pending[to];
  };
  for (unsigned i = 0; i < n; ++i) {
    auto key =
        std::make_pair(cmds[i].device, static_cast<unsigned>(cmds[i].queue));
    auto it = lastOnQueue.find(key);
    if (it != lastOnQueue.end())
      edge(it->second, i);
    lastOnQueue[key] = i;
    for (unsigned w : cmds[i].waits)
      if (w < n)
        edge(w, i);
  }
}

} // namespace

std::optional<Timing> mlir::rp::estimateTiming(const Schedule &schedule,
                                               std::string *stuck) {
  const std::vector<Command> &cmds = schedule.commands;
  unsigned n = cmds.size();
  std::vector<std::vector<unsigned>> succs;
  std::vector<unsigned> pending;
  dependencies(cmds, succs, pending);
  Timing t;
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  t.computeBusyMs.assign(schedule.devices, 0);

  // Discrete events in time order. Commands start as soon as all their
  // predecessors have ended; a transfer's remaining work drains at
  // 1 / (transfers sharing its link direction) per ms; everything else
  // ends after its duration.
  using Timed = std::pair<double, unsigned>;
  std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>> starts,
      ends;
  std::vector<double> readyAt(n, 0);
  std::map<std::pair<unsigned, bool>, std::vector<unsigned>> links;
  std::vector<double> remaining(n, 0);
  for (unsigned i = 0; i < n; ++i)
    if (pending[i] == 0)
      starts.push({0.0, i});
  double now = 0;
  unsigned done = 0;
  auto finish = [&](unsigned i) {
    t.end[i] = now;
    t.iterationMs = std::max(t.iterationMs, now);
    ++done;
    for (unsigned s : succs[i]) {
      readyAt[s] = std::max(readyAt[s], now);
      if (--pending[s] == 0)
        starts.push({readyAt[s], s});
    }
  };
  while (done < n) {
    // The next moment anything happens.
    double next = std::numeric_limits<double>::infinity();
    if (!starts.empty())
      next = starts.top().first;
    if (!ends.empty())
      next = std::min(next, ends.top().first);
    for (auto &[link, active] : links)
      for (unsigned i : active)
        next = std::min(next, now + remaining[i] * active.size());
    if (next == std::numeric_limits<double>::infinity())
      break; // what is left waits in a cycle
    // Transfers whose end is `next` (compared as computed, so the earliest
    // always ends and rounding cannot stall the clock) end now; the others
    // drain for the elapsed time.
    std::vector<unsigned> drained;
    for (auto &[link, active] : links) {
      std::vector<unsigned> still;
      for (unsigned i : active) {
        if (now + remaining[i] * active.size() <= next) {
          drained.push_back(i);
        } else {
          remaining[i] -= (next - now) / active.size();
          still.push_back(i);
        }
      }
      active = std::move(still);
    }
    now = next;
    // Ends first (in index order within a kind), then starts.
    while (!ends.empty() && ends.top().first <= now) {
      unsigned i = ends.top().second;
      ends.pop();
      finish(i);
    }
    std::sort(drained.begin(), drained.end());
    for (unsigned i : drained)
      finish(i);
    while (!starts.empty() && starts.top().first <= now) {
      unsigned i = starts.top().second;
      starts.pop();
      t.start[i] = now;
      if (cmds[i].queue == Queue::compute && cmds[i].device < schedule.devices)
        t.computeBusyMs[cmds[i].device] += cmds[i].ms;
      std::optional<std::pair<unsigned, bool>> link =
          linkOf(cmds[i], schedule.gpusPerLink);
      if (cmds[i].ms <= 0) {
        finish(i);
      } else if (link) {
        remaining[i] = cmds[i].ms;
        links[*link].push_back(i);
      } else {
        ends.push({now + cmds[i].ms, i});
      }
    }
  }
  if (done != n) {
    if (stuck)
      for (unsigned i = 0; i < n; ++i)
        if (pending[i] != 0) {
          *stuck = cmds[i].label;
          break;
        }
    return std::nullopt;
  }
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
