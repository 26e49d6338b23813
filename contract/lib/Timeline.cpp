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
  // The successors in one flat array (the partitioner resolves thousands
  // of graphs, and a vector per task is most of the time): the lane
  // predecessor, then the waits, as dependencies() lists them.
  unsigned lanes = 0;
  for (const Task &t : tasks)
    lanes = std::max(lanes, t.device + 1);
  constexpr unsigned kLanes = unsigned(Lane::host) + 1;
  std::vector<unsigned> lastOnLane(size_t(lanes) * kLanes, ~0u);
  std::vector<unsigned> pending(n, 0), first(n + 1, 0), edges;
  std::vector<std::pair<unsigned, unsigned>> pairs;
  size_t waits = 0;
  for (const Task &t : tasks)
    waits += t.waits.size();
  pairs.reserve(n + waits);
  for (unsigned i = 0; i < n; ++i) {
    unsigned &last =
        lastOnLane[size_t(tasks[i].device) * kLanes + unsigned(tasks[i].lane)];
    if (last != ~0u)
      pairs.push_back({last, i});
    last = i;
    for (unsigned w : tasks[i].waits)
      if (w < n)
        pairs.push_back({w, i});
  }
  for (auto [from, to] : pairs) {
    ++first[from + 1];
    ++pending[to];
  }
  for (unsigned i = 0; i < n; ++i)
    first[i + 1] += first[i];
  edges.resize(pairs.size());
  {
    std::vector<unsigned> fill(first.begin(), first.end() - 1);
    for (auto [from, to] : pairs)
      edges[fill[from]++] = to;
  }
  pairs = {};
  // Per task its link direction (2 * link + up), or ~0u.
  std::vector<unsigned> linkOfTask(n, ~0u);
  unsigned linkCount = 0;
  for (unsigned i = 0; i < n; ++i)
    if (std::optional<std::pair<unsigned, bool>> l =
            linkOf(tasks[i], graph.gpusPerLink)) {
      linkOfTask[i] = 2 * l->first + (l->second ? 1 : 0);
      linkCount = std::max(linkCount, linkOfTask[i] + 1);
    }

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
  std::vector<std::vector<unsigned>> links(linkCount);
  // The links with transfers running, in no particular order.
  std::vector<unsigned> busyLinks;
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
    for (unsigned e = first[i]; e < first[i + 1]; ++e) {
      unsigned s = edges[e];
      readyAt[s] = std::max(readyAt[s], now);
      if (--pending[s] == 0)
        starts.push({readyAt[s], s});
    }
  };
  std::vector<unsigned> drained;
  while (done < n) {
    // The next moment anything happens.
    double next = std::numeric_limits<double>::infinity();
    if (!starts.empty())
      next = starts.top().first;
    if (!ends.empty())
      next = std::min(next, ends.top().first);
    for (unsigned l : busyLinks)
      for (unsigned i : links[l])
        next = std::min(next, now + remaining[i] * links[l].size());
    if (next == std::numeric_limits<double>::infinity())
      break; // what is left waits in a cycle
    // Transfers whose end is `next` (compared as computed, so the earliest
    // always ends and rounding cannot stall the clock) end now; the others
    // drain for the elapsed time.
    drained.clear();
    for (size_t b = 0; b < busyLinks.size();) {
      std::vector<unsigned> &active = links[busyLinks[b]];
      size_t size = active.size(), kept = 0;
      for (size_t x = 0; x < size; ++x) {
        unsigned i = active[x];
        if (now + remaining[i] * size <= next) {
          drained.push_back(i);
        } else {
          remaining[i] -= (next - now) / size;
          active[kept++] = i;
        }
      }
      active.resize(kept);
      if (active.empty()) {
        busyLinks[b] = busyLinks.back();
        busyLinks.pop_back();
      } else {
        ++b;
      }
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
      if (tasks[i].ms <= 0) {
        finish(i);
      } else if (unsigned l = linkOfTask[i]; l != ~0u) {
        remaining[i] = tasks[i].ms;
        if (links[l].empty())
          busyLinks.push_back(l);
        links[l].push_back(i);
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
