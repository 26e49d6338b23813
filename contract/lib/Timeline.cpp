//===- Timeline.cpp - the discrete-event timing core ----------------------===//

#include "rp/timing/Timeline.h"

#include "ShareTable.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <queue>
#include <utility>

using namespace rp::timing;
using rp::timing::detail::ShareTable;

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

namespace {

/// A resource of resolve's fair shares (a GPU's link direction, an uplink
/// direction, host DRAM, the interpreters) and a flow's use of one.
struct Resource {
  double cap = 0;
  int use = -1;                  ///< its linkUse index, or -2 for DRAM
  unsigned first = 0, count = 0; ///< its flows in resourceFlows
  unsigned key = 0;
  unsigned unfixed = 0; ///< its flows without a rate yet
};
struct Join {
  unsigned resource;
  double gbps;
};

/// What resolve reads and writes of a task as it runs, in one place (a
/// start reads lane, duration and link; a predecessor's end lane, readiness
/// and pending): in arrays of their own, a cache miss each on runs of up to
/// ~100,000 tasks. readyAt: its last predecessor's end (plus the hand-off);
/// lane: (device, lane) as one number; link: its uplink direction (2 *
/// uplink + up), another flow kind (kInterpreter, ~1u) or ~0u.
struct TaskState {
  double readyAt, ms;
  unsigned lane, link, pending;
};

/// resolve's working arrays, kept per thread between calls: the
/// partitioner resolves thousands of graphs of tens of thousands of tasks,
/// and allocating and freeing these was a fifth of a compile.
struct Scratch {
  std::vector<unsigned> lastOnLane, first, edges, fill, active, perLink,
      drained, watchAt, waitFirst, waitFlat;
  std::vector<TaskState> state;
  /// Per task on the interpreters: its parts not yet ended (the kernels and
  /// the issue flow), and whether its flow is the issue work.
  std::vector<unsigned> partsLeft;
  std::vector<char> issuing;
  std::vector<double> remaining, slow, linkUse;
  std::vector<std::pair<double, unsigned>> starts, ends;
  std::vector<char> watchEnded;
  std::vector<uint64_t> sharesKey;
  ShareTable shares;
  /// computeShares' arrays.
  std::vector<Resource> resources;
  std::vector<std::array<Join, 3>> joins;
  std::vector<unsigned> resourceOfKey, joinCount;
  std::vector<std::pair<unsigned, double>> resourceFlows;
  std::vector<double> rate, slowOf;
  std::vector<char> inFull;
};

/// A min-heap of (time, task) on a reused vector, in the order
/// std::priority_queue with std::greater keeps (the same heap operations).
struct MinHeap {
  using Timed = std::pair<double, unsigned>;
  std::vector<Timed> &c;
  bool empty() const { return c.empty(); }
  const Timed &top() const { return c.front(); }
  void push(Timed t) {
    c.push_back(t);
    std::push_heap(c.begin(), c.end(), std::greater<Timed>());
  }
  void pop() {
    std::pop_heap(c.begin(), c.end(), std::greater<Timed>());
    c.pop_back();
  }
};

} // namespace

std::optional<Times> rp::timing::resolve(const Graph &graph, size_t *stuck,
                                         const Watch *watch, Times *storage) {
  thread_local Scratch scratch;
  Scratch &sc = scratch;
  const std::vector<Task> &tasks = graph.tasks;
  unsigned n = tasks.size();
  // The successors in one flat array (the partitioner resolves thousands
  // of graphs, and a vector per task is most of the time): the lane
  // predecessor, then the waits, as dependencies() lists them.
  unsigned lanes = 0;
  constexpr unsigned kLanes = unsigned(Lane::host) + 1;
  std::vector<unsigned> &lastOnLane = sc.lastOnLane, &first = sc.first,
                        &edges = sc.edges;
  // Per task its lane, duration, link, readiness and pending count
  // (TaskState): the tasks themselves are too large to walk in cache (a
  // 256-layer candidate's run: ~100,000 of them). A task's waits are read
  // once, into one flat array that the second pass below walks (a flat
  // graph's in place).
  std::vector<unsigned> &waitFirst = sc.waitFirst, &waitFlat = sc.waitFlat;
  std::vector<TaskState> &st = sc.state;
  bool flat = graph.flat();
  st.resize(n);
  waitFirst.resize(n + 1);
  waitFlat.clear();
  lastOnLane.clear();
  first.assign(n + 1, 0);
  // Per task its uplink direction (2 * uplink + up), or ~0u; with the host
  // model on, host tasks that stream host memory are flows too (~1u); with
  // shared interpreters, a task's dispatch work is one (kInterpreter)
  // before its fixed remainder, and its issue work one beside that.
  constexpr unsigned kInterpreter = ~2u, kCores = ~3u;
  const HostModel &host = graph.host;
  bool hostOn = host.on();
  unsigned linkCount = 0;
  // One pass over the tasks (the lanes, durations, links and waits) that
  // also counts the edges; a second pass over the same edges in the same
  // order (the lane predecessor, then the waits) places them.
  for (unsigned i = 0; i < n; ++i) {
    const Task &task = tasks[i];
    lanes = std::max(lanes, task.device + 1);
    st[i].lane = task.device * kLanes + unsigned(task.lane);
    st[i].ms = task.ms;
    st[i].readyAt = 0;
    st[i].pending = 0;
    st[i].link = ~0u;
    if (std::optional<std::pair<unsigned, bool>> l =
            linkOf(task, graph.gpusPerLink)) {
      st[i].link = 2 * l->first + (l->second ? 1 : 0);
      linkCount = std::max(linkCount, st[i].link + 1);
    } else if (hostOn && host.dramGBps > 0 && task.lane == Lane::host &&
               task.hostGBps > 0) {
      st[i].link = ~1u;
    } else if (host.interpreters > 0 &&
               (task.dispatchMs > 0 || task.issueMs > 0)) {
      st[i].link = kInterpreter;
    } else if (host.cores > 0 &&
               (task.lane == Lane::compute || task.lane == Lane::host)) {
      // A host device's thread, the trainer's or the optimizer's: their
      // work shares the host's cores.
      st[i].link = kCores;
    }
    waitFirst[i] = unsigned(waitFlat.size());
    if (st[i].lane >= lastOnLane.size())
      lastOnLane.resize(size_t(lanes) * kLanes, ~0u);
    unsigned &last = lastOnLane[st[i].lane];
    if (last != ~0u) {
      ++first[last + 1];
      ++st[i].pending;
    }
    last = i;
    // A flat graph's waits are read in place; a task's own vector is
    // read once, into the flat array the second pass walks.
    for (unsigned w : graph.waitsOf(i))
      if (w < n) {
        if (!flat)
          waitFlat.push_back(w);
        ++first[w + 1];
        ++st[i].pending;
      }
  }
  waitFirst[n] = unsigned(waitFlat.size());
  const std::vector<unsigned> &wFirst = flat ? graph.flatFirst : waitFirst,
                              &wFlat = flat ? graph.flatWaits : waitFlat;
  for (unsigned i = 0; i < n; ++i)
    first[i + 1] += first[i];
  edges.resize(first[n]);
  {
    std::vector<unsigned> &fill = sc.fill;
    fill.assign(first.begin(), first.end() - 1);
    lastOnLane.assign(size_t(lanes) * kLanes, ~0u);
    for (unsigned i = 0; i < n; ++i) {
      unsigned &last = lastOnLane[st[i].lane];
      if (last != ~0u)
        edges[fill[last]++] = i;
      last = i;
      for (unsigned k = wFirst[i]; k < wFirst[i + 1]; ++k)
        if (unsigned w = wFlat[k]; w < n)
          edges[fill[w]++] = i;
    }
  }

  Times t;
  if (storage) {
    std::swap(t.start, storage->start);
    std::swap(t.end, storage->end);
    std::swap(t.computeBusyMs, storage->computeBusyMs);
    std::swap(t.uplinkBusyMs, storage->uplinkBusyMs);
  }
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  t.computeBusyMs.assign(graph.devices, 0);
  t.uplinkBusyMs.assign(linkCount, 0);

  // Discrete events in time order. Tasks start as soon as all their
  // predecessors have ended; a flow's remaining work (ms alone) drains at
  // 1 / slow[i] per ms; everything else ends after its duration.
  sc.starts.clear();
  sc.ends.clear();
  MinHeap starts{sc.starts}, ends{sc.ends};
  // The flows running, in no particular order, and how much slower than
  // alone each runs.
  std::vector<unsigned> &active = sc.active;
  active.clear();
  std::vector<double> &remaining = sc.remaining, &slow = sc.slow;
  remaining.assign(n, 0);
  slow.assign(n, 1);
  std::vector<unsigned> &perLink = sc.perLink;
  perLink.assign(linkCount, 0);
  // With the host model on: per uplink direction and for DRAM, the share of
  // capacity in use since the last change.
  std::vector<double> &linkUse = sc.linkUse;
  linkUse.assign(linkCount, 0);
  double dramUse = 0;
  bool changed = false;
  // Equal shares per uplink direction (the model without the host).
  auto shareLinks = [&] {
    std::fill(perLink.begin(), perLink.end(), 0);
    unsigned dispatching = 0;
    for (unsigned i : active)
      if (st[i].link == kInterpreter)
        ++dispatching;
      else
        ++perLink[st[i].link];
    for (unsigned i : active)
      slow[i] = st[i].link == kInterpreter
                    ? std::max(1.0, double(dispatching) / host.interpreters)
                    : perLink[st[i].link];
  };
  // Max-min fair rates over the GPUs' links, the uplinks and host DRAM
  // (progressive filling): each round, the resource that fills first at a
  // common share of every unfixed flow's speed alone fixes its flows there.
  // Resources are numbered in the order their first flow joins (which
  // decides ties between resources that fill at the same share), their
  // flows in the active order; every array is kept between calls, since
  // this runs at every start and end of a flow (the partitioner resolves
  // thousands of graphs: allocating here was half of a compile).
  std::vector<Resource> &resources = sc.resources;
  // Per resource key (a GPU's link direction, an uplink direction, DRAM)
  // its index in `resources` while fairShares runs, else ~0u.
  unsigned linkKeys = 2 * lanes, dramKey = linkKeys + linkCount,
           interpreterKey = dramKey + 1, coresKey = interpreterKey + 1;
  std::vector<unsigned> &resourceOfKey = sc.resourceOfKey;
  resourceOfKey.assign(coresKey + 1, ~0u);
  resources.resize(coresKey + 1);
  std::vector<std::array<Join, 3>> &joins = sc.joins;
  std::vector<unsigned> &joinCount = sc.joinCount;
  std::vector<std::pair<unsigned, double>> &resourceFlows = sc.resourceFlows;
  std::vector<double> &rate = sc.rate;
  std::vector<char> &inFull = sc.inFull;
  auto computeShares = [&] {
    size_t flows = active.size();
    // At most one resource per key: written in place, none allocated.
    unsigned resourceCount = 0;
    joins.resize(flows);
    joinCount.assign(flows, 0);
    auto join = [&](unsigned key, double cap, int use, unsigned f,
                    double gbps) {
      unsigned &r = resourceOfKey[key];
      if (r == ~0u) {
        r = resourceCount++;
        resources[r] = {cap, use, 0, 0, key, 0};
      }
      ++resources[r].count;
      joins[f][joinCount[f]++] = {r, gbps};
    };
    for (unsigned f = 0; f < flows; ++f) {
      const Task &task = tasks[active[f]];
      unsigned l = st[active[f]].link;
      if (l == ~1u) {
        join(dramKey, host.dramGBps, -2, f, task.hostGBps);
        // The optimizer streams DRAM from a thread on the host's cores.
        if (host.cores > 0)
          join(coresKey, host.cores, -4, f, 1);
        continue;
      }
      if (l == kCores) {
        join(coresKey, host.cores, -4, f, 1);
        continue;
      }
      if (l == kInterpreter) {
        join(interpreterKey, double(host.interpreters), -3, f, 1);
        continue;
      }
      bool up = l % 2;
      double gbps = up ? host.h2dGBps : host.d2hGBps;
      if (!(gbps > 0))
        gbps = 1;
      join(2 * task.device + (up ? 1 : 0), gbps, -1, f, gbps);
      join(linkKeys + l, host.uplinkGBps > 0 ? host.uplinkGBps : gbps, int(l),
           f, gbps);
      if (host.dramGBps > 0)
        join(dramKey, host.dramGBps, -2, f, gbps * host.copyDramFactor);
    }
    // Each resource's flows, in flow order, in one array.
    unsigned at = 0;
    for (unsigned r = 0; r < resourceCount; ++r) {
      resources[r].first = at;
      at += resources[r].count;
      resources[r].unfixed = resources[r].count;
      resources[r].count = 0;
    }
    resourceFlows.resize(at);
    for (unsigned f = 0; f < flows; ++f)
      for (unsigned j = 0; j < joinCount[f]; ++j) {
        Resource &r = resources[joins[f][j].resource];
        resourceFlows[r.first + r.count++] = {f, joins[f][j].gbps};
      }
    rate.assign(flows, -1);
    inFull.assign(flows, 0);
    size_t left = flows;
    while (left) {
      double level = 1;
      int full = -1;
      for (unsigned r = 0; r < resourceCount; ++r) {
        // With every flow fixed it wants nothing and cannot fill first.
        if (resources[r].unfixed == 0)
          continue;
        double avail = resources[r].cap, want = 0;
        for (unsigned k = 0; k < resources[r].count; ++k) {
          auto [f, gbps] = resourceFlows[resources[r].first + k];
          if (rate[f] >= 0)
            avail -= gbps * rate[f];
          else
            want += gbps;
        }
        if (want > 0 && avail / want < level) {
          level = std::max(avail / want, 1e-9);
          full = int(r);
        }
      }
      if (full >= 0)
        for (unsigned k = 0; k < resources[full].count; ++k)
          inFull[resourceFlows[resources[full].first + k].first] = 1;
      for (unsigned f = 0; f < flows; ++f)
        if (rate[f] < 0 && (full < 0 || inFull[f])) {
          rate[f] = level;
          --left;
          for (unsigned j = 0; j < joinCount[f]; ++j)
            --resources[joins[f][j].resource].unfixed;
        }
      if (full >= 0)
        for (unsigned k = 0; k < resources[full].count; ++k)
          inFull[resourceFlows[resources[full].first + k].first] = 0;
    }
    for (unsigned f = 0; f < flows; ++f)
      slow[active[f]] = 1 / rate[f];
    std::fill(linkUse.begin(), linkUse.end(), 0);
    dramUse = 0;
    for (unsigned ri = 0; ri < resourceCount; ++ri) {
      const Resource &r = resources[ri];
      double used = 0;
      for (unsigned k = 0; k < r.count; ++k) {
        auto [f, gbps] = resourceFlows[r.first + k];
        used += gbps * rate[f];
      }
      if (r.use >= 0)
        linkUse[r.use] = used / r.cap;
      else if (r.use == -2)
        dramUse = used / r.cap;
    }
    for (unsigned r = 0; r < resourceCount; ++r)
      resourceOfKey[resources[r].key] = ~0u;
  };
  // The shares are a function of the flows running, in the active order
  // (each flow's link, device and DRAM rate), and of the host model: each
  // set's answer is kept in the thread's ShareTable, for this graph and
  // the graphs after it on the same host model, bit for bit the one
  // computed.
  ShareTable &known = sc.shares;
  if (hostOn)
    known.use(ShareTable::Context::of(host, linkCount));
  std::vector<uint64_t> &key = sc.sharesKey;
  std::vector<double> &slowOf = sc.slowOf;
  auto fairShares = [&] {
    key.clear();
    uint64_t hash = ShareTable::kHashStart;
    for (unsigned i : active) {
      uint64_t word = uint64_t(st[i].link) << 32 | st[i].lane / kLanes;
      key.push_back(word);
      hash = ShareTable::hashWord(hash, word);
      if (st[i].link == ~1u) {
        double gbps = tasks[i].hostGBps;
        std::memcpy(&word, &gbps, sizeof(word));
        key.push_back(word);
        hash = ShareTable::hashWord(hash, word);
      }
    }
    ShareTable::Answer kept;
    if (known.find(key, hash, kept)) {
      for (size_t f = 0; f < active.size(); ++f)
        slow[active[f]] = kept.slow(f);
      for (unsigned l = 0; l < linkCount; ++l)
        linkUse[l] = kept.linkUse(l);
      dramUse = kept.dramUse(linkCount);
      return;
    }
    computeShares();
    slowOf.resize(active.size());
    for (size_t f = 0; f < active.size(); ++f)
      slowOf[f] = slow[active[f]];
    known.insert(key, hash, slowOf.data(), active.size(), linkUse.data(),
                 dramUse);
  };
  for (unsigned i = 0; i < n; ++i)
    if (st[i].pending == 0)
      starts.push({0.0, i});
  double now = 0;
  unsigned done = 0;
  // The watched tasks: per task its position, and how many have ended in
  // the listed order.
  std::vector<unsigned> &watchAt = sc.watchAt;
  std::vector<char> &watchEnded = sc.watchEnded;
  size_t watched = 0;
  bool enough = false;
  if (watch) {
    watchAt.assign(n, ~0u);
    for (size_t k = 0; k < watch->tasks.size(); ++k)
      if (watch->tasks[k] < n)
        watchAt[watch->tasks[k]] = unsigned(k);
    watchEnded.assign(watch->tasks.size(), 0);
  }
  auto finish = [&](unsigned i) {
    t.end[i] = now;
    if (watch && watchAt[i] != ~0u) {
      watchEnded[watchAt[i]] = 1;
      for (; !enough && watched < watchEnded.size() && watchEnded[watched];
           ++watched)
        enough = watch->enough(watched, t.end[watch->tasks[watched]]);
    }
    t.makespan = std::max(t.makespan, now);
    ++done;
    for (unsigned e = first[i]; e < first[i + 1]; ++e) {
      unsigned s = edges[e];
      bool otherLane = st[s].lane != st[i].lane;
      st[s].readyAt =
          std::max(st[s].readyAt, now + (otherLane ? graph.handoffMs : 0));
      if (--st[s].pending == 0)
        starts.push({st[s].readyAt, s});
    }
  };
  std::vector<unsigned> &drained = sc.drained;
  std::vector<unsigned> &partsLeft = sc.partsLeft;
  std::vector<char> &issuing = sc.issuing;
  partsLeft.assign(n, 1);
  issuing.assign(n, 0);
  // A task on the interpreters whose kernels run from `now` (its dispatch
  // work done): they end after the rest of its duration, and its issue
  // work, if any, becomes its flow until both have.
  auto kernelsFrom = [&](unsigned i) {
    const Task &task = tasks[i];
    ends.push({now + std::max(0.0, task.ms - task.dispatchMs), i});
    if (task.issueMs > 0) {
      issuing[i] = 1;
      partsLeft[i] = 2;
      remaining[i] = task.issueMs;
      active.push_back(i);
      changed = true;
    }
  };
  // One part of task i has ended: it ends with its last.
  auto partEnded = [&](unsigned i) {
    if (--partsLeft[i] == 0)
      finish(i);
  };
  while (done < n) {
    if (changed) {
      if (hostOn)
        fairShares();
      else
        shareLinks();
      changed = false;
    }
    // The next moment anything happens.
    double next = std::numeric_limits<double>::infinity();
    if (!starts.empty())
      next = starts.top().first;
    if (!ends.empty())
      next = std::min(next, ends.top().first);
    for (unsigned i : active)
      next = std::min(next, now + remaining[i] * slow[i]);
    if (next == std::numeric_limits<double>::infinity())
      break; // what is left waits in a cycle
    if (!active.empty()) {
      if (hostOn) {
        for (unsigned l = 0; l < linkCount; ++l)
          t.uplinkBusyMs[l] += (next - now) * linkUse[l];
        t.dramBusyMs += (next - now) * dramUse;
      } else {
        for (unsigned l = 0; l < linkCount; ++l)
          if (perLink[l])
            t.uplinkBusyMs[l] += next - now;
      }
    }
    // Flows whose end is `next` (compared as computed, so the earliest
    // always ends and rounding cannot stall the clock) end now; the others
    // drain for the elapsed time.
    drained.clear();
    size_t kept = 0;
    for (unsigned i : active) {
      if (now + remaining[i] * slow[i] <= next) {
        drained.push_back(i);
      } else {
        remaining[i] -= (next - now) / slow[i];
        active[kept++] = i;
      }
    }
    active.resize(kept);
    changed |= !drained.empty();
    now = next;
    // Ends first (in index order within a kind), then starts.
    while (!ends.empty() && ends.top().first <= now) {
      unsigned i = ends.top().second;
      ends.pop();
      partEnded(i);
    }
    std::sort(drained.begin(), drained.end());
    for (unsigned i : drained)
      if (st[i].link != kInterpreter) {
        finish(i);
      } else if (issuing[i]) {
        t.interpreterBusyMs += tasks[i].issueMs;
        partEnded(i);
      } else {
        // Its dispatch work is done; the device runs the rest, issued
        // beside it.
        t.interpreterBusyMs += tasks[i].dispatchMs;
        kernelsFrom(i);
      }
    while (!starts.empty() && starts.top().first <= now) {
      unsigned i = starts.top().second;
      starts.pop();
      t.start[i] = now;
      double ms = st[i].ms;
      unsigned device = st[i].lane / kLanes;
      if (st[i].lane % kLanes == unsigned(Lane::compute) &&
          device < graph.devices)
        t.computeBusyMs[device] += ms;
      if (ms <= 0) {
        finish(i);
      } else if (st[i].link == kInterpreter && tasks[i].dispatchMs <= 0) {
        kernelsFrom(i);
      } else if (st[i].link != ~0u) {
        remaining[i] =
            st[i].link == kInterpreter ? std::min(tasks[i].dispatchMs, ms) : ms;
        active.push_back(i);
        changed = true;
      } else {
        ends.push({now + ms, i});
      }
    }
    // Every event at `now` is in: the times up to now are final.
    if (enough)
      break;
  }
  t.complete = done == n;
  if (done != n && !enough) {
    if (stuck)
      for (unsigned i = 0; i < n; ++i)
        if (st[i].pending != 0) {
          *stuck = i;
          break;
        }
    return std::nullopt;
  }
  return t;
}
