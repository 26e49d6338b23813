//===- Timeline.cpp - the discrete-event timing core ----------------------===//

#include "rp/timing/Timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <utility>

using namespace rp::timing;

namespace {

/// Which shared link direction a task's transfer uses, if any.
std::optional<std::pair<unsigned, bool>> linkOf(const Task &t,
                                                unsigned gpusPerLink) {
  bool up = t.lane == Lane::weightH2D || t.lane == Lane::activationH2D;
  if (!up && t.lane != Lane::d2h)
    return std::nullopt;
  return std::make_pair(t.device / std::max(gpusPerLink, 1u), up);
}

} // namespace

void rp::timing::dependencies(const std::vector<Task> &tasks,
                              std::vector<std::vector<unsigned>> &succs,
                              std::vector<unsigned> &pending) {
  unsigned n = tasks.size();
  succs.assign(n, {});
  pending.assign(n, 0);
  std::map<std::pair<unsigned, unsigned>, unsigned> lastOnLane;
  auto edge = [&](unsigned from, unsigned to) {
    succs[from].push_back(to);
    ++pending[to];
  };
  for (unsigned i = 0; i < n; ++i) {
    auto key =
        std::make_pair(tasks[i].device, static_cast<unsigned>(tasks[i].lane));
    auto it = lastOnLane.find(key);
    if (it != lastOnLane.end())
      edge(it->second, i);
    lastOnLane[key] = i;
    for (unsigned w : tasks[i].waits)
      if (w < n)
        edge(w, i);
  }
}

std::optional<Times> rp::timing::resolve(const Graph &graph, size_t *stuck) {
  const std::vector<Task> &tasks = graph.tasks;
  unsigned n = tasks.size();
  std::vector<std::vector<unsigned>> succs;
  std::vector<unsigned> pending;
  dependencies(tasks, succs, pending);
  Times t;
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  t.computeBusyMs.assign(graph.devices, 0);

  // Discrete events in time order. Tasks start as soon as all their
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
    t.makespan = std::max(t.makespan, now);
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
      if (tasks[i].lane == Lane::compute && tasks[i].device < graph.devices)
        t.computeBusyMs[tasks[i].device] += tasks[i].ms;
      std::optional<std::pair<unsigned, bool>> link =
          linkOf(tasks[i], graph.gpusPerLink);
      if (tasks[i].ms <= 0) {
        finish(i);
      } else if (link) {
        remaining[i] = tasks[i].ms;
        links[*link].push_back(i);
      } else {
        ends.push({now + tasks[i].ms, i});
      }
    }
  }
  if (done != n) {
    if (stuck)
      for (unsigned i = 0; i < n; ++i)
        if (pending[i] != 0) {
          *stuck = i;
          break;
        }
    return std::nullopt;
  }
  return t;
}
