//===- Continuous.cpp - a staged plan's passes without barriers -----------===//

#include "Continuous.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace rp::runtime;
using namespace rp::runtime::sim;
namespace timing = rp::timing;

double rp::runtime::sim::coveredBy(const Interval &idle,
                                   const std::vector<Interval> &busy) {
  double covered = 0, reach = idle.from;
  for (const Interval &b : busy) {
    double from = std::max(b.from, reach), to = std::min(b.to, idle.to);
    if (to > from) {
      covered += to - from;
      reach = to;
    }
  }
  return covered;
}

void rp::runtime::sim::splitBubble(SimReport &r, double total) {
  r.fillPct = r.switchPct = r.drainPct = r.intraPct = r.exposedCommPct = 0;
  if (total > 0) {
    for (const DeviceTime &dt : r.devices) {
      r.fillPct += dt.fillMs;
      r.switchPct += dt.switchMs;
      r.drainPct += dt.drainMs;
      r.intraPct += dt.intraMs;
      r.exposedCommPct += dt.exposedCommMs;
    }
    for (double *p : {&r.fillPct, &r.switchPct, &r.drainPct, &r.intraPct,
                      &r.exposedCommPct})
      *p = *p / total * 100;
    r.bubblePct = r.fillPct + r.switchPct + r.drainPct + r.intraPct;
  }
}

namespace {

int64_t ns(double ms) { return int64_t(std::llround(ms * 1e6)); }

} // namespace

Status rp::runtime::sim::layOutContinuous(const Plan &plan,
                                          const std::vector<SimCommand> &cmds,
                                          const timing::Graph &pass,
                                          const ContinuousLayout &o,
                                          SimReport &r) {
  uint32_t G = plan.devices;
  unsigned K = std::max(o.accumulate, 1u), L = std::max(o.slots, 1u);
  // A step moves the devices by K * shift; after `rotation` steps every
  // pass is back on the devices it started on, so the steady step is the
  // mean over that many: a window of `rotation` steps after a warm-up of at
  // least rotation + 3 (async steps 0 and 1 wait for no update), followed
  // by `rotation` more (the next step's first jobs fill the window's end,
  // as they would in a longer run).
  uint32_t perStep = uint32_t((uint64_t(o.shift) * K) % G);
  unsigned rotation = perStep ? G / std::gcd(perStep, G) : 1;
  unsigned N = std::max(o.steps, 3 * rotation + 4);
  unsigned P = N * K;
  size_t C = cmds.size();
  size_t commandTasks = size_t(P) * C;
  auto shiftOf = [&](unsigned t) {
    return uint32_t((uint64_t(t) * o.shift) % G);
  };

  // The last command of every (device, queue) in a pass: once they are
  // done, so is the pass (commands come ordered by device and queue).
  std::vector<unsigned> lasts;
  for (size_t i = 0; i < C; ++i)
    if (i + 1 == C || cmds[i + 1].device != cmds[i].device ||
        cmds[i + 1].queue != cmds[i].queue)
      lasts.push_back(unsigned(i));

  // Host work, in the trainer's order: lane G is the thread running the
  // steps, G + 1 the optimizer's thread, G + 2 the gates.
  std::vector<timing::Task> host;
  auto add = [&](unsigned lane, double ms, std::vector<unsigned> waits) {
    host.push_back({lane, timing::Lane::host, ms, std::move(waits)});
    return unsigned(commandTasks + host.size() - 1);
  };
  std::vector<unsigned> pro(P), epi(P), opt(N), optFirst(N);
  // Step k's update runs parameter by parameter in the trainer's order,
  // each its share of the optimizer's time; written[k][g] is the task
  // after which gate g's parameter is new (one gate, the whole update,
  // without per-parameter gates).
  bool perParam = !o.gatesOf.empty() && !o.order.empty();
  size_t gateCount = perParam ? o.order.size() : 1;
  std::vector<std::vector<unsigned>> written(N);
  auto update = [&](unsigned k, unsigned lane, unsigned after) {
    written[k].assign(gateCount, 0);
    if (!perParam) {
      opt[k] = optFirst[k] = written[k][0] = add(lane, r.optimizerMs, {after});
      return;
    }
    for (size_t n = 0; n < o.order.size(); ++n) {
      size_t i = o.order[n];
      after = add(lane, r.optimizerMs * o.share[i], {after});
      if (n == 0)
        optFirst[k] = after;
      written[k][i] = after;
    }
    opt[k] = after;
  };
  auto stage = [&](unsigned t) {
    if (t < P)
      pro[t] = add(G, r.prologueMs, {});
  };
  for (unsigned t = 0; t < std::min(L, P); ++t)
    stage(t);
  for (unsigned t = 0; t < P; ++t) {
    std::vector<unsigned> ends;
    for (unsigned i : lasts)
      ends.push_back(unsigned(size_t(t) * C + i));
    epi[t] = add(G, r.epilogueMs, std::move(ends));
    unsigned k = t / K;
    if (t % K != K - 1) {
      stage(t + L);
      continue;
    }
    bool last = k + 1 == N;
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
  // A pass of step k computes with W_k (sync) or W_max(k-1,0) (async):
  // a job that reads parameters waits for their gates, which open once the
  // pass is staged and the update making that version has written them;
  // other jobs wait for the staging only (gate 0). Each gate has a lane
  // of its own (host "device" G + 2 + gate), so gates of one pass never
  // wait for each other, and a parameter's gates open pass after pass.
  size_t perPass = gateCount + 1;
  unsigned gates = unsigned(commandTasks + host.size());
  for (unsigned t = 0; t < P; ++t) {
    unsigned k = t / K;
    unsigned version = o.sync ? k : (k ? k - 1 : 0);
    for (size_t g = 0; g < perPass; ++g) {
      std::vector<unsigned> waits{pro[t]};
      if (g > 0 && version >= 1)
        waits.push_back(written[version - 1][g - 1]);
      host.push_back(
          {unsigned(G + 2 + g), timing::Lane::host, 0, std::move(waits)});
    }
  }
  // Per command of a pass: the gates it waits for, relative to its pass's.
  std::vector<std::vector<unsigned>> gatesOfCommand(C);
  for (size_t i = 0; i < C; ++i) {
    int64_t j = cmds[i].job;
    if (!perParam) {
      gatesOfCommand[i] = {1};
    } else if (j >= 0 && size_t(j) < o.gatesOf.size() &&
               !o.gatesOf[j].empty()) {
      for (uint32_t p : o.gatesOf[j])
        gatesOfCommand[i].push_back(1 + p);
    } else {
      gatesOfCommand[i] = {0};
    }
  }

  timing::Graph g;
  g.devices = G;
  g.gpusPerLink = pass.gpusPerLink;
  g.tasks.reserve(commandTasks + host.size());
  for (unsigned t = 0; t < P; ++t) {
    uint32_t shift = shiftOf(t);
    for (size_t i = 0; i < C; ++i) {
      timing::Task task = pass.tasks[i];
      task.device = (task.device + shift) % G;
      for (unsigned &w : task.waits)
        w += unsigned(size_t(t) * C);
      for (unsigned gate : gatesOfCommand[i])
        task.waits.push_back(unsigned(gates + t * perPass + gate));
      g.tasks.push_back(std::move(task));
    }
  }
  for (timing::Task &task : host)
    g.tasks.push_back(std::move(task));
  size_t stuck = 0;
  std::optional<timing::Times> resolved = timing::resolve(g, &stuck);
  if (!resolved)
    return internalError("the sim cannot order the run's passes (a cycle at "
                         "task " +
                         std::to_string(stuck) + " of " +
                         std::to_string(g.tasks.size()) + "); report it");
  const timing::Times &times = *resolved;

  // Steady state: the mean period between step ends (a step ends with its
  // last pass's epilogue) over the window of `rotation` steps that ends
  // `rotation` steps before the run's last.
  auto stepEnd = [&](unsigned k) { return times.end[epi[k * K + K - 1]]; };
  unsigned windowEnd = N - 1 - rotation;
  double w1 = stepEnd(windowEnd), w0 = stepEnd(windowEnd - rotation);
  r.continuous = true;
  r.steps = N;
  r.shift = o.shift;
  r.rotationSteps = rotation;
  r.inFlight = L;
  r.stepMs = (w1 - w0) / rotation;
  r.tokens *= K;
  r.tokensPerSecond = r.stepMs > 0 ? r.tokens / (r.stepMs / 1e3) : 0;
  r.runMs = times.makespan;

  // The bubble over the run (fill and drain once) and over the window.
  double steadyBusy = 0;
  std::vector<double> deviceSteady(G, 0);
  for (uint32_t d = 0; d < G; ++d) {
    std::vector<size_t> compute;
    std::vector<Interval> copies;
    for (size_t i = 0; i < commandTasks; ++i) {
      if (g.tasks[i].device != d)
        continue;
      if (g.tasks[i].lane == timing::Lane::compute)
        compute.push_back(i);
      else if (times.end[i] > times.start[i])
        copies.push_back({times.start[i], times.end[i]});
    }
    std::sort(
        copies.begin(), copies.end(),
        [](const Interval &a, const Interval &b) { return a.from < b.from; });
    std::sort(compute.begin(), compute.end(), [&](size_t a, size_t b) {
      return times.start[a] < times.start[b] ||
             (times.start[a] == times.start[b] && a < b);
    });
    DeviceTime &dt = r.devices[d];
    dt.fillMs = dt.switchMs = dt.drainMs = dt.intraMs = dt.exposedCommMs = 0;
    std::vector<Interval> idle;
    double end = 0;
    for (size_t n = 0; n < compute.size(); ++n) {
      size_t cur = compute[n];
      double from = times.start[cur], to = times.end[cur];
      double inWindow = std::max(0.0, std::min(to, w1) - std::max(from, w0));
      steadyBusy += inWindow;
      deviceSteady[d] += inWindow;
      dt.runBusyMs += g.tasks[cur].ms;
      if (n == 0) {
        dt.fillMs = from;
        idle.push_back({0, from});
      } else {
        size_t prev = compute[n - 1];
        double gap = std::max(0.0, from - end);
        auto stageOf = [&](size_t task) {
          int64_t j = cmds[task % C].job;
          return j >= 0 && size_t(j) < plan.jobs.size() ? plan.jobs[j].stage
                                                        : -1;
        };
        int32_t a = stageOf(prev), b = stageOf(cur);
        bool samePass = prev / C == cur / C;
        (samePass && a >= 0 && a == b ? dt.intraMs : dt.switchMs) += gap;
        if (gap > 0)
          idle.push_back({end, from});
      }
      end = std::max(end, to);
    }
    dt.drainMs = r.runMs - end;
    idle.push_back({end, r.runMs});
    for (const Interval &i : idle)
      dt.exposedCommMs += coveredBy(i, copies);
  }
  splitBubble(r, r.runMs * G);
  if (w1 > w0)
    r.steadyBubblePct = 100 * (1 - steadyBusy / ((w1 - w0) * G));
  auto [lo, hi] = std::minmax_element(deviceSteady.begin(), deviceSteady.end());
  r.busyRatio = *lo > 0 ? *hi / *lo : 0;

  if (Trace *trace = o.trace) {
    for (unsigned t = 0; t < P; ++t) {
      unsigned k = t / K;
      std::vector<double> from(plan.jobs.size(), -1), to(plan.jobs.size(), -1);
      double first = -1, lastEnd = 0;
      for (size_t i = 0; i < C; ++i) {
        size_t x = size_t(t) * C + i;
        first = first < 0 ? times.start[x] : std::min(first, times.start[x]);
        lastEnd = std::max(lastEnd, times.end[x]);
        int64_t j = cmds[i].job;
        if (j < 0 || size_t(j) >= plan.jobs.size())
          continue;
        from[j] =
            from[j] < 0 ? times.start[x] : std::min(from[j], times.start[x]);
        to[j] = std::max(to[j], times.end[x]);
      }
      JobSpan *slots = trace->beginStep(k, ns(std::max(first, 0.0)));
      for (size_t j = 0; j < plan.jobs.size(); ++j)
        if (from[j] >= 0)
          slots[j] = {ns(from[j]), ns(to[j]),
                      int32_t((plan.jobs[j].device + shiftOf(t)) % G)};
      trace->endStep(ns(lastEnd), true);
      if (r.prologueMs > 0)
        trace->addHostSpan("prologue", k, ns(times.start[pro[t]]),
                           ns(times.end[pro[t]]));
      if (r.epilogueMs > 0)
        trace->addHostSpan("epilogue", k, ns(times.start[epi[t]]),
                           ns(times.end[epi[t]]));
      if (t % K == K - 1) {
        trace->addHostSpan("step", k, ns(times.start[pro[k * K]]),
                           ns(times.end[epi[t]]));
        if (r.optimizerMs > 0)
          trace->addHostSpan("optimizer", k, ns(times.start[optFirst[k]]),
                             ns(times.end[opt[k]]));
      }
    }
  }
  return Status::ok();
}
