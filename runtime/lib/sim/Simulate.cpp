//===- Simulate.cpp - training steps of a staged plan on the sim ----------===//

#include "rp/runtime/sim/Simulate.h"
#include "../exec/Fences.h"
#include "SimContinuous.h"
#include "rp/runtime/Executor.h"
#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/sim/PlanTiming.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace rp::runtime;
using namespace rp::runtime::sim;
namespace timing = rp::timing;

namespace {

/// Host work of a program: its kernels' bytes through host memory.
double hostProgramMs(const Plan &plan, int32_t program,
                     const timing::HardwareModel &hw) {
  if (program < 0)
    return 0;
  double bytes = 0;
  for (const KernelCallDesc &call : plan.programs[program].calls) {
    timing::CallOperands ops = sim::callOperands(plan, call);
    timing::KernelWork w = timing::kernelWork(uint16_t(call.op), ops.inputs,
                                              ops.outputs, call.ints);
    if (w.launches)
      bytes += w.bytes;
  }
  return hw.hostMs(bytes);
}

bool sameGraph(const std::vector<SimCommand> &a,
               const std::vector<SimCommand> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].device != b[i].device || a[i].queue != b[i].queue ||
        a[i].job != b[i].job || a[i].ms != b[i].ms || a[i].waits != b[i].waits)
      return false;
  return true;
}

int64_t ns(double ms) { return int64_t(std::llround(ms * 1e6)); }

/// The bytes a pass's copies move, as the sim timed them (each copy's
/// bytes are the ones HardwareModel::copyMs prices), times `passes`: so
/// that the report says what the weight uploads cost in bytes and a test
/// can hold them to the plan's buffers (a quantized base's blobs, not its
/// compute-dtype size).
void countCopyBytes(const std::vector<SimCommand> &cmds, unsigned passes,
                    SimReport &r) {
  for (const SimCommand &c : cmds) {
    if (c.copy == CopyKind::deviceToHost)
      r.downloadBytes += c.bytes;
    else if (c.copy == CopyKind::hostToDevice &&
             c.queue == QueueKind::weight_h2d)
      r.weightUploadBytes += c.bytes;
    else if (c.copy == CopyKind::hostToDevice)
      r.activationUploadBytes += c.bytes;
  }
  r.weightUploadBytes *= passes;
  r.activationUploadBytes *= passes;
  r.downloadBytes *= passes;
}

} // namespace

Expected<SimReport> rp::runtime::sim::simulate(const Plan &plan,
                                               SimBackend &backend,
                                               const SimulateOptions &options) {
  if (!plan.staged)
    return invalidArgument(
        "the sim backend times staged plans (training plans from "
        "rp-compile); '" +
        plan.path +
        "' runs its jobs in order on one "
        "device");
  const timing::HardwareModel &hw = backend.getHardware();
  if (options.stepBarrier && options.accumulate > 1)
    return invalidArgument(
        "--accumulate with --step-barrier: the sim lays out one pass per "
        "step behind barriers; leave --step-barrier out to time " +
        std::to_string(options.accumulate) + " passes per step");
  bool continuous = !options.stepBarrier;
  // Sizes only, as createUnfilled. Asking for renaming tells whether the
  // trainer would rename the devices pass after pass (rotates()), which
  // needs the shared layout's transient buffers.
  unsigned slots =
      options.passesInFlight ? options.passesInFlight : passesInFlight(plan);
  if (slots > 2)
    return invalidArgument("--passes-in-flight " + std::to_string(slots) +
                           ": give 1 or 2");
  unsigned copies =
      options.arenaCopies ? options.arenaCopies : arenaCopies(plan, slots);
  if (copies > slots)
    return invalidArgument("--arena-copies " + std::to_string(copies) +
                           " for " + std::to_string(slots) +
                           " pass(es) in flight: give at most one copy of "
                           "the arenas per pass");
  ForwardOptions fo;
  fo.fill = false;
  fo.shareDeviceMemory = continuous;
  fo.rotate = continuous && renamesDevices(plan, slots);
  Expected<std::unique_ptr<HostForward>> fwd =
      HostForward::create(plan, backend, fo);
  if (!fwd)
    return fwd.getStatus();
  PipelineOptions po;
  Expected<std::unique_ptr<PipelineExecutor>> exec =
      PipelineExecutor::create(plan, **fwd, po);
  if (!exec)
    return exec.getStatus();

  SimReport r;
  r.steps = std::max(options.steps, 3u);
  r.prologueMs = hostProgramMs(plan, plan.prologue, hw);
  r.epilogueMs = hostProgramMs(plan, plan.epilogue, hw);
  double trainable = 0;
  for (const BufferDesc &b : plan.buffers)
    if (b.weight && b.weight->trainable)
      trainable += double(b.size());
  r.optimizerMs = hw.optimizerMs(trainable);
  for (const BindingDesc &in : plan.inputs)
    if (in.name == "labels")
      r.tokens = double(numElements(plan.buffers[in.buffer].shape));

  if (continuous) {
    backend.beginStep();
    if (Status s = (*exec)->runJobs(); s.failed())
      return s;
    std::vector<SimCommand> cmds = backend.takeStep();
    countCopyBytes(cmds, options.accumulate, r);
    timing::Graph graph = backend.graphOf(cmds);
    size_t stuck = 0;
    std::optional<timing::Times> times = timing::resolve(graph, &stuck);
    if (!times)
      return internalError(
          "the sim cannot order the step's commands (a cycle at device " +
          std::to_string(cmds[stuck].device) + " " +
          queueName(cmds[stuck].queue) +
          "); the executor ran it, so report it");
    r.jobsMs = times->makespan;
    r.jobStartMs.assign(plan.jobs.size(), 0);
    r.jobEndMs.assign(plan.jobs.size(), 0);
    std::vector<bool> seen(plan.jobs.size(), false);
    for (size_t i = 0; i < cmds.size(); ++i) {
      int64_t j = cmds[i].job;
      if (j < 0 || size_t(j) >= plan.jobs.size())
        continue;
      r.jobStartMs[j] = seen[j] ? std::min(r.jobStartMs[j], times->start[i])
                                : times->start[i];
      r.jobEndMs[j] = std::max(r.jobEndMs[j], times->end[i]);
      seen[j] = true;
    }
    r.devices.assign(plan.devices, {});
    for (uint32_t d = 0; d < plan.devices; ++d)
      r.devices[d].busyMs = times->computeBusyMs[d];
    // As the trainer: the plan's passes in flight (loss scaling too: its
    // scale is one step stale, LossScale.h), renamed when two are, the
    // plan is round-robin and its device buffers are all transient. With
    // one, a pass is staged once the pass before has finished (its
    // epilogue run).
    ContinuousLayout layout;
    layout.steps = options.steps;
    layout.accumulate = options.accumulate;
    layout.sync = options.sync;
    layout.slots = slots;
    layout.arenaCopies = copies < slots ? 1 : 0;
    uint32_t shift = passShiftJobs(plan);
    layout.shift = (*fwd)->rotates() ? shift % plan.devices : 0;
    if (shift % plan.devices != 0 && slots < 2)
      r.notRenamed = "one pass in flight";
    else if (shift % plan.devices != 0 && !layout.shift)
      r.notRenamed = "device buffer '" + (*fwd)->getRotationBlocker() +
                     "' outlives a pass";
    else if (!shift)
      r.notRenamed = "not a round-robin plan";
    // The trainer's parameters (its "grad:" outputs) and their gates.
    std::vector<uint32_t> params;
    for (const BindingDesc &out : plan.outputs) {
      if (out.name.rfind("grad:", 0) != 0)
        continue;
      for (uint32_t b = 0; b < plan.buffers.size(); ++b)
        if (plan.buffers[b].weight &&
            plan.buffers[b].weight->param == out.name.substr(5)) {
          params.push_back(b);
          break;
        }
    }
    if (std::optional<ParamFences> fences = planParamFences(plan, params)) {
      double total = 0;
      for (uint32_t b : params)
        total += double(plan.buffers[b].size());
      layout.gatesOf = std::move(fences->gatesOf);
      layout.order = std::move(fences->order);
      for (uint32_t b : params)
        layout.share.push_back(total > 0 ? plan.buffers[b].size() / total
                                         : 0.0);
    }
    layout.trace = options.trace;
    layout.hostGBps = backend.getHardware().optimizerGBps;
    if (Status s = layOutContinuous(plan, cmds, graph, layout, r); s.failed())
      return s;
    return r;
  }

  std::vector<SimCommand> first, cmds;
  timing::Times times;
  Trace *trace = options.trace;
  double t = 0, previousOptimizerEnd = 0, lastStart = 0;
  for (unsigned k = 0; k < r.steps; ++k) {
    backend.beginStep();
    if (Status s = (*exec)->runJobs(); s.failed())
      return s;
    cmds = backend.takeStep();
    if (k == 0) {
      size_t stuck = 0;
      std::optional<timing::Times> resolved =
          timing::resolve(backend.graphOf(cmds), &stuck);
      if (!resolved)
        return internalError(
            "the sim cannot order the step's commands (a cycle at device " +
            std::to_string(cmds[stuck].device) + " " +
            queueName(cmds[stuck].queue) +
            "); the executor ran it, so "
            "report it");
      times = std::move(*resolved);
      first = cmds;
      countCopyBytes(first, 1, r);
    } else if (!sameGraph(first, cmds)) {
      return internalError("step " + std::to_string(k) +
                           " enqueued other commands than step 0 on the sim; "
                           "report it");
    }
    double start = t, jobsStart = start + r.prologueMs;
    double jobsEnd = jobsStart + times.makespan;
    double epilogueEnd = jobsEnd + r.epilogueMs;
    double optimizerStart, next;
    if (options.sync) {
      optimizerStart = epilogueEnd;
      next = optimizerStart + r.optimizerMs;
    } else {
      // The trainer waits for step k-1's update before it starts step k's
      // and the next step.
      optimizerStart = std::max(epilogueEnd, previousOptimizerEnd);
      next = optimizerStart;
      previousOptimizerEnd = optimizerStart + r.optimizerMs;
    }
    lastStart = start;
    t = next;
    if (trace) {
      uint64_t label = trace->takeStep();
      JobSpan *slots = trace->beginStep(label, ns(jobsStart));
      std::vector<double> from(plan.jobs.size(), -1), to(plan.jobs.size(), -1);
      for (size_t i = 0; i < cmds.size(); ++i) {
        int64_t j = cmds[i].job;
        if (j < 0 || size_t(j) >= plan.jobs.size())
          continue;
        from[j] =
            from[j] < 0 ? times.start[i] : std::min(from[j], times.start[i]);
        to[j] = std::max(to[j], times.end[i]);
      }
      for (size_t j = 0; j < plan.jobs.size(); ++j)
        if (from[j] >= 0)
          slots[j] = {ns(jobsStart + from[j]), ns(jobsStart + to[j])};
      trace->endStep(ns(jobsEnd), true);
      if (r.prologueMs > 0)
        trace->addHostSpan("prologue", label, ns(start), ns(jobsStart));
      if (r.epilogueMs > 0)
        trace->addHostSpan("epilogue", label, ns(jobsEnd), ns(epilogueEnd));
      trace->addHostSpan("step", label, ns(start), ns(epilogueEnd));
      if (r.optimizerMs > 0)
        trace->addHostSpan("optimizer", label, ns(optimizerStart),
                           ns(optimizerStart + r.optimizerMs));
    }
  }
  r.stepMs = t - lastStart;
  r.runMs = t;
  r.jobsMs = times.makespan;
  if (r.stepMs > 0)
    r.tokensPerSecond = r.tokens / (r.stepMs / 1e3);

  r.jobStartMs.assign(plan.jobs.size(), 0);
  r.jobEndMs.assign(plan.jobs.size(), 0);
  std::vector<bool> seen(plan.jobs.size(), false);
  for (size_t i = 0; i < first.size(); ++i) {
    int64_t j = first[i].job;
    if (j < 0 || size_t(j) >= plan.jobs.size())
      continue;
    r.jobStartMs[j] =
        seen[j] ? std::min(r.jobStartMs[j], times.start[i]) : times.start[i];
    r.jobEndMs[j] = std::max(r.jobEndMs[j], times.end[i]);
    seen[j] = true;
  }

  // The split of each device's idle time over the steady step's period,
  // from the step's start (so the prologue is fill, the epilogue and a
  // wait for the optimizer drain).
  uint32_t devices = plan.devices;
  r.devices.assign(devices, {});
  double period = r.stepMs, offset = r.prologueMs;
  for (uint32_t d = 0; d < devices; ++d) {
    auto [compute, copies] = deviceCommands(
        first.size(), times, offset,
        [&](size_t i) { return first[i].device == d; },
        [&](size_t i) { return first[i].queue == QueueKind::compute; });
    DeviceTime &dt = r.devices[d];
    std::vector<Interval> idle;
    if (compute.empty()) {
      dt.fillMs = period;
      idle.push_back({0, period});
    } else {
      double firstStart = offset + times.start[compute.front()];
      dt.fillMs = firstStart;
      idle.push_back({0, firstStart});
      double end = offset + times.end[compute.front()];
      dt.busyMs = first[compute.front()].ms;
      for (size_t n = 1; n < compute.size(); ++n) {
        size_t prev = compute[n - 1], cur = compute[n];
        double from = offset + times.start[cur];
        double gap = std::max(0.0, from - end);
        int32_t a = plan.jobs[first[prev].job].stage,
                b = plan.jobs[first[cur].job].stage;
        (a >= 0 && a == b ? dt.intraMs : dt.switchMs) += gap;
        if (gap > 0)
          idle.push_back({end, from});
        dt.busyMs += first[cur].ms;
        end = std::max(end, offset + times.end[cur]);
      }
      dt.drainMs = std::max(0.0, period - end);
      idle.push_back({end, period});
    }
    for (const Interval &i : idle)
      dt.exposedCommMs += coveredBy(i, copies);
  }
  splitBubble(r, period * devices);
  r.steadyBubblePct = r.bubblePct;
  double lo = 1e300, hi = 0;
  for (const DeviceTime &dt : r.devices) {
    lo = std::min(lo, dt.busyMs);
    hi = std::max(hi, dt.busyMs);
  }
  r.busyRatio = lo > 0 && lo < 1e300 ? hi / lo : 0;
  for (DeviceTime &dt : r.devices)
    dt.runBusyMs = dt.busyMs;
  return r;
}

std::string rp::runtime::sim::formatReport(const SimReport &r) {
  std::string out;
  auto line = [&](const std::string &key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " %.9g\n", value);
    out += key + buf;
  };
  line("tokens_per_s", r.tokensPerSecond);
  line("step_ms", r.stepMs);
  line("bubble_pct", r.bubblePct);
  line("fill_pct", r.fillPct);
  line("switch_pct", r.switchPct);
  line("drain_pct", r.drainPct);
  line("intra_pct", r.intraPct);
  line("exposed_comm_pct", r.exposedCommPct);
  line("jobs_ms", r.jobsMs);
  line("prologue_ms", r.prologueMs);
  line("epilogue_ms", r.epilogueMs);
  line("optimizer_ms", r.optimizerMs);
  for (size_t d = 0; d < r.devices.size(); ++d)
    line("device" + std::to_string(d) + "_busy_ms", r.devices[d].busyMs);
  line("steady_bubble_pct", r.steadyBubblePct);
  line("run_ms", r.runMs);
  line("busy_ratio", r.busyRatio);
  if (r.continuous && r.hostModel) {
    line("host_dram_busy_pct", r.hostDramBusyPct);
    for (size_t l = 0; l < r.uplinkBusyPct.size(); l += 2) {
      std::string u = "uplink" + std::to_string(l / 2);
      line(u + "_d2h_busy_pct", r.uplinkBusyPct[l]);
      if (l + 1 < r.uplinkBusyPct.size())
        line(u + "_h2d_busy_pct", r.uplinkBusyPct[l + 1]);
    }
  }
  if (r.continuous && r.interpreters)
    line("interpreter_busy_pct", r.interpreterBusyPct);
  // Whole numbers: %.9g would round a 235B model's bytes.
  auto bytes = [&](const std::string &key, uint64_t value) {
    out += key + " " + std::to_string(value) + "\n";
  };
  bytes("weight_upload_bytes", r.weightUploadBytes);
  bytes("activation_upload_bytes", r.activationUploadBytes);
  bytes("download_bytes", r.downloadBytes);
  return out;
}
