//===- SimContinuous.cpp - a staged plan's passes without barriers --------===//

#include "SimContinuous.h"

#include "rp/timing/Continuous.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace rp::runtime;
using namespace rp::runtime::sim;

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
  size_t C = cmds.size();
  // The run's layout is the timing core's (rp/timing/Continuous.h), the
  // one the compiler's steady state times too.
  timing::RunLayout layout;
  layout.steps = o.steps;
  layout.accumulate = o.accumulate;
  layout.sync = o.sync;
  layout.slots = o.slots;
  layout.arenaCopies = o.arenaCopies;
  layout.shift = o.shift;
  layout.prologueMs = r.prologueMs;
  layout.epilogueMs = r.epilogueMs;
  layout.optimizerMs = r.optimizerMs;
  layout.hostGBps = o.hostGBps;
  // Per command of a pass: the gates it waits for (the parameters its job
  // reads, or the staging only); without per-parameter gates, the whole
  // update.
  if (!o.gatesOf.empty() && !o.order.empty()) {
    layout.order = o.order;
    layout.share = o.share;
    layout.gatesOfTask.resize(C);
    for (size_t i = 0; i < C; ++i) {
      int64_t j = cmds[i].job;
      if (j >= 0 && size_t(j) < o.gatesOf.size())
        for (uint32_t p : o.gatesOf[j])
          layout.gatesOfTask[i].push_back(1 + p);
    }
  }
  size_t stuck = 0;
  std::optional<timing::ContinuousRun> laidOut =
      timing::layOutRun(pass, layout, &stuck);
  if (!laidOut)
    return internalError("the sim cannot order the run's passes (a cycle at "
                         "task " +
                         std::to_string(stuck) + "); report it");
  const timing::ContinuousRun &run = *laidOut;
  const timing::Graph &g = run.graph;
  const timing::Times &times = run.times;
  unsigned K = run.accumulate, P = run.passes;
  size_t commandTasks = size_t(P) * C;
  const std::vector<unsigned> &pro = run.prologue, &epi = run.epilogue,
                              &opt = run.optimizer,
                              &optFirst = run.optimizerFirst;
  double w0 = run.windowFrom, w1 = run.windowTo;
  r.continuous = true;
  r.steps = run.steps;
  r.shift = o.shift;
  r.rotationSteps = run.window;
  r.inFlight = std::max(o.slots, 1u);
  r.arenaCopies = o.arenaCopies ? o.arenaCopies : r.inFlight;
  r.stepMs = run.stepMs;
  r.tokens *= K;
  r.tokensPerSecond = r.stepMs > 0 ? r.tokens / (r.stepMs / 1e3) : 0;
  r.runMs = times.makespan;
  // How busy the host side was over the run: each uplink direction and
  // host DRAM, as a share of their bandwidth.
  r.hostModel = pass.host.on();
  r.uplinkBusyPct.clear();
  for (double busy : times.uplinkBusyMs)
    r.uplinkBusyPct.push_back(r.runMs > 0 ? busy / r.runMs * 100 : 0);
  r.hostDramBusyPct = r.runMs > 0 ? times.dramBusyMs / r.runMs * 100 : 0;
  r.interpreters = pass.host.interpreters;
  r.interpreterBusyPct =
      r.runMs > 0 && r.interpreters
          ? times.interpreterBusyMs / (r.runMs * r.interpreters) * 100
          : 0;

  // The bubble over the run (fill and drain once) and over the window.
  double steadyBusy = 0;
  std::vector<double> deviceSteady(G, 0);
  for (uint32_t d = 0; d < G; ++d) {
    auto [compute, copies] = deviceCommands(
        commandTasks, times, 0,
        [&](size_t i) { return g.tasks[i].device == d; },
        [&](size_t i) { return g.tasks[i].lane == timing::Lane::compute; });
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
                      int32_t((plan.jobs[j].device + run.shiftOf(t)) % G)};
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
