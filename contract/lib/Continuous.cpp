//===- Continuous.cpp - one pass's graph laid out as a run ----------------===//

#include "rp/timing/Continuous.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

using namespace rp::timing;

double ContinuousRun::stepEnd(unsigned k) const {
  return times.end[epilogue[size_t(k) * accumulate + accumulate - 1]];
}

unsigned ContinuousRun::shiftOf(unsigned pass) const {
  return unsigned((uint64_t(pass) * shift) % std::max(graph.devices, 1u));
}

unsigned rp::timing::cycleAt(const std::vector<double> &ends, unsigned warmup,
                             unsigned confirm) {
  if (ends.size() < 2)
    return 0;
  size_t k = ends.size() - 1;
  auto d = [&](size_t j) { return ends[j] - ends[j - 1]; };
  // Differences equal to rounding: the run is deterministic, so a state
  // that recurs recurs exactly, but the clock's sums round differently.
  auto same = [&](size_t j, size_t p) {
    double x = d(j), y = d(j - p);
    return std::abs(x - y) <= 1e-9 * std::max(ends[k], 1.0);
  };
  // The first difference after the warm-up is d(warmup + 1).
  if (k <= warmup)
    return 0;
  auto span = [&](size_t p) { return std::max<size_t>({p, confirm, 2}); };
  for (size_t p = 1; p + span(p) <= k - warmup; ++p) {
    size_t m = span(p);
    bool repeats = true;
    for (size_t j = k - m + 1; j <= k && repeats; ++j)
      repeats = same(j, p);
    if (repeats)
      return unsigned(p);
  }
  return 0;
}

namespace {

/// A host task of build() before it is written into the run's graph: its
/// waits are [first, first + count) of Spare::hostWaits, so that laying out
/// a run allocates no vector per host task (a 256-layer model's run has
/// thousands of gates).
struct HostTask {
  unsigned device;
  double ms, hostGBps;
  size_t first, count;
};

/// Per thread, the vectors of the last recycled run (recycle()) and
/// build()'s working arrays.
struct Spare {
  std::vector<Task> tasks;
  std::vector<unsigned> flatFirst, flatWaits;
  Times times;
  std::vector<HostTask> host;
  std::vector<unsigned> hostWaits;
};
thread_local Spare spare;

/// The last run this thread timed until steady that read no period from
/// its first, short layout: its devices and rotation. A search times run
/// after run of one shape (Qwen3-235B-A22B LoRA's unfused graph: every
/// candidate needs the longest layout), so the next run of the same
/// devices and rotation is laid out longest at once, not short first; the
/// period is the same either way (layOutRun), only the cost differs.
struct LongHint {
  unsigned devices = 0, rotation = 0;
};
thread_local LongHint longHint;

/// The run of `pass` laid out over `steps` steps, not timed yet.
ContinuousRun build(const Graph &pass, const RunLayout &o, unsigned steps,
                    unsigned rotation) {
  unsigned G = std::max(pass.devices, 1u);
  unsigned K = std::max(o.accumulate, 1u), L = std::max(o.slots, 1u);
  unsigned P = steps * K;
  size_t C = pass.tasks.size();
  size_t commandTasks = size_t(P) * C;

  ContinuousRun run;
  run.steps = steps;
  run.passes = P;
  run.accumulate = K;
  run.rotation = rotation;
  run.shift = o.shift % G;
  run.passTasks = C;

  // The last task of every (device, lane) in a pass: once they are done,
  // so is the pass. Lanes as device * kLanes + lane, in that order.
  constexpr unsigned kLanes = unsigned(Lane::host) + 1;
  unsigned laneCount = 0;
  for (const Task &t : pass.tasks)
    laneCount = std::max(laneCount, (t.device + 1) * kLanes);
  std::vector<unsigned> lastOf(laneCount, ~0u), firstOf(laneCount, ~0u);
  for (size_t i = 0; i < C; ++i) {
    unsigned lane =
        pass.tasks[i].device * kLanes + unsigned(pass.tasks[i].lane);
    lastOf[lane] = unsigned(i);
    if (firstOf[lane] == ~0u)
      firstOf[lane] = unsigned(i);
  }
  std::vector<unsigned> lasts;
  // One copy of the arenas shared by the passes: the first task of each
  // (device, lane) of pass p+1 waits for every last task of pass p that
  // ran on the same physical device.
  bool shared = o.arenaCopies == 1 && L >= 2;
  std::vector<std::vector<unsigned>> lastsOfDevice(G);
  std::vector<bool> isFirst(C, false);
  for (unsigned lane = 0; lane < laneCount; ++lane) {
    if (lastOf[lane] == ~0u)
      continue;
    lasts.push_back(lastOf[lane]);
    lastsOfDevice[(lane / kLanes) % G].push_back(lastOf[lane]);
    isFirst[firstOf[lane]] = true;
  }

  // Host work, in the trainer's order: lane G is the thread running the
  // steps, G + 1 the optimizer's thread, G + 2 the gates.
  std::vector<HostTask> &host = spare.host;
  std::vector<unsigned> &hostWaits = spare.hostWaits;
  host.clear();
  hostWaits.clear();
  auto addWith = [&](unsigned lane, double ms, double gbps,
                     std::initializer_list<unsigned> waits) {
    host.push_back({lane, ms, gbps, hostWaits.size(), waits.size()});
    hostWaits.insert(hostWaits.end(), waits);
    return unsigned(commandTasks + host.size() - 1);
  };
  auto add = [&](unsigned lane, double ms,
                 std::initializer_list<unsigned> waits) {
    return addWith(lane, ms, o.hostGBps, waits);
  };
  std::vector<unsigned> &pro = run.prologue, &epi = run.epilogue,
                        &opt = run.optimizer, &optFirst = run.optimizerFirst;
  pro.assign(P, 0);
  epi.assign(P, 0);
  opt.assign(steps, 0);
  optFirst.assign(steps, 0);
  // Step k's update runs parameter by parameter in the trainer's order,
  // each its share of the optimizer's time; written[k][g] is the task
  // after which gate g's parameter is new (one gate, the whole update,
  // without per-parameter gates).
  bool perParam = !o.order.empty();
  size_t gateCount = perParam ? o.order.size() : 1;
  std::vector<std::vector<unsigned>> written(steps);
  auto update = [&](unsigned k, unsigned lane, unsigned after) {
    written[k].assign(gateCount, 0);
    if (!perParam) {
      opt[k] = optFirst[k] = written[k][0] = add(lane, o.optimizerMs, {after});
      return;
    }
    for (size_t n = 0; n < o.order.size(); ++n) {
      size_t i = o.order[n];
      double share = i < o.share.size() ? o.share[i] : 0;
      after = add(lane, o.optimizerMs * share, {after});
      if (n == 0)
        optFirst[k] = after;
      if (i < gateCount)
        written[k][i] = after;
    }
    opt[k] = after;
  };
  auto stage = [&](unsigned t) {
    if (t < P)
      pro[t] = add(G, o.prologueMs, {});
  };
  for (unsigned t = 0; t < std::min(L, P); ++t)
    stage(t);
  for (unsigned t = 0; t < P; ++t) {
    epi[t] = add(G, o.epilogueMs, {});
    for (unsigned i : lasts)
      hostWaits.push_back(unsigned(size_t(t) * C + i));
    host.back().count = lasts.size();
    unsigned k = t / K;
    if (t % K != K - 1) {
      stage(t + L);
      continue;
    }
    bool last = k + 1 == steps;
    // The update in flight finishes before the next one starts.
    unsigned finished = epi[t];
    if (!o.sync && k >= 1)
      finished = add(G, 0, {opt[k - 1]});
    if (last) {
      // The run's end settles the weights: the update runs inline.
      update(k, G, finished);
    } else if (o.sync) {
      stage(t + L);
      update(k, G, finished);
    } else {
      // Passes of the next steps are staged before the update starts.
      stage(t + L);
      update(k, G + 1, finished);
    }
  }
  // A pass of step k computes with W_k (sync) or W_max(k-1,0) (async): a
  // task that reads parameters waits for their gates, which open once the
  // pass is staged and the update making that version has written them;
  // other tasks wait for the staging only (gate 0). Each gate has a lane
  // of its own, so gates of one pass never wait for each other, and a
  // parameter's gates open pass after pass.
  size_t perPass = gateCount + 1;
  unsigned gates = unsigned(commandTasks + host.size());
  for (unsigned t = 0; t < P; ++t) {
    unsigned k = t / K;
    unsigned version = o.sync ? k : (k ? k - 1 : 0);
    for (size_t g = 0; g < perPass; ++g) {
      if (g > 0 && version >= 1)
        addWith(unsigned(G + 2 + g), 0, 0,
                {pro[t], written[version - 1][g - 1]});
      else
        addWith(unsigned(G + 2 + g), 0, 0, {pro[t]});
    }
  }

  Graph &g = run.graph;
  g.devices = G;
  g.gpusPerLink = pass.gpusPerLink;
  g.host = pass.host;
  g.handoffMs = pass.handoffMs;
  // Written in place over a recycled run's tasks and waits; the waits in
  // the graph's flat arrays (Graph::flatFirst), not a vector per task.
  std::swap(g.tasks, spare.tasks);
  std::swap(g.flatFirst, spare.flatFirst);
  std::swap(g.flatWaits, spare.flatWaits);
  g.tasks.resize(commandTasks + host.size());
  std::vector<unsigned> &waitsFirst = g.flatFirst, &waits = g.flatWaits;
  waitsFirst.resize(g.tasks.size() + 1);
  waits.clear();
  static const std::vector<unsigned> wholeUpdate{1}, stagingOnly{0};
  for (unsigned t = 0; t < P; ++t) {
    unsigned shift = run.shiftOf(t);
    for (size_t i = 0; i < C; ++i) {
      const Task &of = pass.tasks[i];
      Task &task = g.tasks[size_t(t) * C + i];
      task.device = (of.device + shift) % G;
      task.lane = of.lane;
      task.ms = of.ms;
      task.hostGBps = of.hostGBps;
      task.dispatchMs = of.dispatchMs;
      task.issueMs = of.issueMs;
      task.waits.clear();
      waitsFirst[size_t(t) * C + i] = unsigned(waits.size());
      const std::vector<unsigned> &gatesOf =
          o.gatesOfTask.empty() ? wholeUpdate
          : i < o.gatesOfTask.size() && !o.gatesOfTask[i].empty()
              ? o.gatesOfTask[i]
              : stagingOnly;
      for (unsigned w : pass.waitsOf(i))
        waits.push_back(w + unsigned(size_t(t) * C));
      if (shared && t > 0 && isFirst[i]) {
        // The plan device pass t-1 ran on this physical device.
        unsigned before = (task.device + G - run.shiftOf(t - 1)) % G;
        for (unsigned w : lastsOfDevice[before])
          waits.push_back(w + unsigned(size_t(t - 1) * C));
      }
      for (unsigned gate : gatesOf)
        if (gate < perPass)
          waits.push_back(unsigned(gates + t * perPass + gate));
    }
  }
  for (size_t j = 0; j < host.size(); ++j) {
    Task &task = g.tasks[commandTasks + j];
    const HostTask &h = host[j];
    task.device = h.device;
    task.lane = Lane::host;
    task.ms = h.ms;
    task.hostGBps = h.hostGBps;
    task.dispatchMs = 0; // the trainer's and optimizer's own work
    task.issueMs = 0;
    task.waits.clear();
    waitsFirst[commandTasks + j] = unsigned(waits.size());
    waits.insert(waits.end(), hostWaits.begin() + h.first,
                 hostWaits.begin() + h.first + h.count);
  }
  waitsFirst[g.tasks.size()] = unsigned(waits.size());
  return run;
}

} // namespace

std::optional<ContinuousRun>
rp::timing::layOutRun(const Graph &pass, const RunLayout &o, size_t *stuck) {
  unsigned G = std::max(pass.devices, 1u);
  unsigned K = std::max(o.accumulate, 1u), L = std::max(o.slots, 1u);
  // A step moves the devices by K * shift; after `rotation` steps every
  // pass is back on the devices it started on. The steady step is read
  // from the step ends as they come: after a warm-up (rotation + 3 steps
  // in sync mode, rotation + 2 in async mode, where steps 0 and 1 wait
  // for no update and run ahead while the devices' backlog builds up), the
  // first step k at which the differences between step ends repeat with
  // some period p (cycleAt: the last max(p, rotation, 2) differences equal
  // those p before them) gives the mean period over that cycle, (end k - end
  // k-p) / p. The cycle is the run's own: one step, a rotation, or, in
  // async mode where a pass is a chain longer than a step (one
  // microbatch), two steps that pair up, a short period and a long one
  // (1,258 and 8,105 ms for Qwen3-1.7B at 32k on 8 GPUs); or three steps
  // on four devices, which no window of whole rotations measures.
  // Ending k must be followed by the passes that can start before it (a
  // pass is staged only after the one `slots` before it ends), so
  // ceil(slots / K) + 1 more steps are laid out. Later steps cannot
  // change an earlier end, so the period does not depend on how many
  // steps are laid out beyond: the compiler and the sim read the same.
  unsigned perStep = unsigned((uint64_t(o.shift) * K) % G);
  unsigned rotation = perStep ? G / std::gcd(perStep, G) : 1;
  unsigned warmup = o.sync ? rotation + 3 : rotation + 2;
  unsigned fill = (L + K - 1) / K + 1;
  // Periods up to a rotation first, then up to two rotations and two
  // steps more, and the mean over two rotations past that (a run that
  // never repeats to rounding).
  auto stepsFor = [&](unsigned maxPeriod) {
    return warmup + 1 + maxPeriod + std::max({maxPeriod, rotation, 2u}) + fill;
  };
  unsigned longest = stepsFor(2 * rotation + 2);
  unsigned N = std::max(o.steps, stepsFor(std::max(rotation, 2u)));
  // Timed only until the period is read: first the fewest steps that show
  // a period of one or two steps (most runs), then the longest layout.
  // The same period either way: a cycle is read at the first step end
  // where it repeats, and later steps change no earlier end.
  unsigned shortN = std::min(
      N, std::max(o.steps, warmup + 3 + std::max(rotation, 2u) + fill));
  bool hinted =
      o.untilSteady && longHint.devices == G && longHint.rotation == rotation;
  if (o.untilSteady && !hinted)
    N = shortN;
  else if (hinted)
    N = std::max(N, longest);
  for (;; N = longest) {
    ContinuousRun run = build(pass, o, N, rotation);
    std::vector<double> ends;
    size_t cycleEnd = 0;
    unsigned cycle = 0;
    Watch watch;
    for (unsigned k = 0; k < N; ++k)
      watch.tasks.push_back(run.epilogue[size_t(k) * K + K - 1]);
    watch.enough = [&](size_t k, double end) {
      ends.push_back(end);
      if (cycle || k + fill >= N)
        return cycle != 0 && o.untilSteady;
      if ((cycle = cycleAt(ends, warmup, rotation)))
        cycleEnd = k;
      // The longest layout without a repeat reads the mean over two
      // rotations ending here (below): the steps after it change no end
      // before it, so an untilSteady run stops here rather than resolving
      // its last `fill` steps (Qwen3-235B-A22B LoRA's unfused graph never
      // repeats to rounding: each of its runs is such a layout).
      if (!cycle && N >= longest && k + 1 + fill == N)
        return o.untilSteady;
      return cycle != 0 && o.untilSteady;
    };
    std::optional<Times> times =
        resolve(run.graph, stuck, &watch, &spare.times);
    if (!times)
      return std::nullopt;
    run.times = std::move(*times);
    // The hint kept while the short layout would not have read the
    // period either, dropped once it would have.
    if (o.untilSteady && N < longest && !cycle)
      longHint = LongHint{G, rotation};
    else if (hinted && cycle && cycleEnd + fill < shortN)
      longHint = LongHint{};
    if (cycle) {
      run.window = cycle;
      run.windowTo = run.stepEnd(unsigned(cycleEnd));
      run.windowFrom = run.stepEnd(unsigned(cycleEnd - cycle));
      run.stepMs = (run.windowTo - run.windowFrom) / cycle;
      return run;
    }
    if (N >= longest) {
      // No repeat: the mean over two rotations ending `fill` steps
      // before the run's last.
      unsigned window = 2 * rotation;
      unsigned windowEnd = N - 1 - fill;
      run.window = window;
      run.windowTo = run.stepEnd(windowEnd);
      run.windowFrom = run.stepEnd(windowEnd - window);
      run.stepMs = (run.windowTo - run.windowFrom) / window;
      return run;
    }
    recycle(std::move(run));
  }
}

void rp::timing::recycle(ContinuousRun &&run) {
  spare.tasks = std::move(run.graph.tasks);
  spare.flatFirst = std::move(run.graph.flatFirst);
  spare.flatWaits = std::move(run.graph.flatWaits);
  spare.times = std::move(run.times);
}
