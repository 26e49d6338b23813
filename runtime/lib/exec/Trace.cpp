//===- Trace.cpp - recording a staged plan's timeline ---------------------===//

#include "rp/runtime/Trace.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/sim/PlanTiming.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include <unistd.h>

using namespace rp::runtime;

//===----------------------------------------------------------------------===//
// Busy time
//===----------------------------------------------------------------------===//

double BusySummary::percent(int64_t busyNs) const {
  return wall > 0 ? 100.0 * double(busyNs) / double(wall) : 0.0;
}

void rp::runtime::addStepBusy(const Plan &plan, const StepSpans &step,
                              BusySummary &summary) {
  summary.devices.resize(plan.devices);
  // Per device, the upload spans of both h2d queues: they may overlap each
  // other, so they are merged rather than summed.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> uploads(plan.devices);
  for (size_t i = 0; i < plan.jobs.size() && i < step.jobs.size(); ++i) {
    const JobSpan &span = step.jobs[i];
    const JobDesc &job = plan.jobs[i];
    uint32_t device = span.deviceOf(job);
    if (!span.ran() || device >= plan.devices)
      continue;
    DeviceBusy &d = summary.devices[device];
    int64_t length = span.end - span.start;
    switch (job.queue) {
    case QueueKind::compute:
      d.compute += length;
      break;
    case QueueKind::d2h:
      d.d2h += length;
      break;
    case QueueKind::weight_h2d:
    case QueueKind::activation_h2d:
      uploads[device].emplace_back(span.start, span.end);
      break;
    }
  }
  for (uint32_t dev = 0; dev < plan.devices; ++dev) {
    auto &spans = uploads[dev];
    std::sort(spans.begin(), spans.end());
    int64_t coveredTo = INT64_MIN;
    for (auto [start, end] : spans) {
      start = std::max(start, coveredTo);
      if (end > start)
        summary.devices[dev].h2d += end - start;
      coveredTo = std::max(coveredTo, end);
    }
  }
  int64_t from = std::max(step.start, summary.coveredTo);
  if (step.end > from)
    summary.wall += step.end - from;
  summary.coveredTo = std::max(summary.coveredTo, step.end);
  ++summary.steps;
}

std::string rp::runtime::describeBusy(const BusySummary &summary) {
  std::string text;
  char line[160];
  for (size_t d = 0; d < summary.devices.size(); ++d) {
    const DeviceBusy &busy = summary.devices[d];
    double compute = summary.percent(busy.compute);
    std::snprintf(line, sizeof(line),
                  "rp-run: device %zu: compute %.0f%% busy (bubble %.0f%%), "
                  "h2d %.0f%%, d2h %.0f%%\n",
                  d, compute, 100.0 - compute, summary.percent(busy.h2d),
                  summary.percent(busy.d2h));
    text += line;
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Recording
//===----------------------------------------------------------------------===//

Trace::Trace(const Plan &plan, bool keepSteps)
    : plan(plan), keepSteps(keepSteps),
      origin(std::chrono::steady_clock::now()) {
  busy.devices.resize(plan.devices);
  jobTotal.assign(plan.jobs.size(), 0);
  jobFirst.assign(plan.jobs.size(), 0);
  jobRuns.assign(plan.jobs.size(), 0);
  jobFirstRuns.assign(plan.jobs.size(), 0);
}

JobSpan *Trace::beginStep(uint64_t step, int64_t start) {
  open.emplace_back();
  StepSpans &current = open.back();
  current.step = step;
  current.start = start;
  current.end = start;
  current.ok = true;
  current.jobs.assign(plan.jobs.size(), JobSpan());
  return current.jobs.data();
}

void Trace::endStep(int64_t end, bool ok) {
  if (open.empty())
    return;
  StepSpans &current = open.front();
  current.end = end;
  current.ok = ok;
  if (ok) {
    bool first = busy.steps == 0;
    addStepBusy(plan, current, busy);
    for (size_t i = 0; i < current.jobs.size(); ++i) {
      const JobSpan &span = current.jobs[i];
      if (!span.ran())
        continue;
      jobTotal[i] += span.end - span.start;
      ++jobRuns[i];
      if (first) {
        jobFirst[i] += span.end - span.start;
        ++jobFirstRuns[i];
      }
    }
  }
  // The calls handed over since the last step ended go with this one
  // (with two steps in flight, some of the next one's early calls too).
  if (ok)
    for (auto &[where, ms] : callPending) {
      std::vector<double> &to =
          busy.steps == 1 ? callFirst[where] : callRest[where];
      to.insert(to.end(), ms.begin(), ms.end());
    }
  callPending.clear();
  if (keepSteps)
    steps.push_back(std::move(current));
  open.pop_front();
}

void Trace::addCallTimes(const std::vector<CallTime> &calls) {
  for (const CallTime &c : calls)
    if (c.plan == &plan)
      callPending[{c.program, c.call}].push_back(double(c.ns) / 1e6);
}

Trace::CallSamples Trace::callTimesMs() const {
  return callRest.empty() ? callFirst : callRest;
}

void Trace::addHostSpan(std::string name, uint64_t step, int64_t start,
                        int64_t end) {
  std::lock_guard<std::mutex> lock(hostMutex);
  auto &total = hostTotals[name];
  total.first += end - start;
  ++total.second;
  if (keepSteps)
    host.push_back({std::move(name), step, start, end});
}

std::vector<HostSpan> Trace::getHostSpans() const {
  std::lock_guard<std::mutex> lock(hostMutex);
  return host;
}

std::map<std::string, std::pair<int64_t, uint64_t>>
Trace::getHostTotals() const {
  std::lock_guard<std::mutex> lock(hostMutex);
  return hostTotals;
}

uint64_t Trace::meanSteps() const {
  return busy.steps > 1 ? busy.steps - 1 : busy.steps;
}

std::vector<double> Trace::jobMeansMs() const {
  bool dropFirst = busy.steps > 1;
  std::vector<double> means(plan.jobs.size(), -1.0);
  for (size_t i = 0; i < means.size(); ++i) {
    int64_t total = jobTotal[i] - (dropFirst ? jobFirst[i] : 0);
    uint64_t runs = jobRuns[i] - (dropFirst ? jobFirstRuns[i] : 0);
    if (runs)
      means[i] = double(total) / double(runs) / 1e6;
  }
  return means;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

Status rp::runtime::writeFileAtomically(
    const std::string &path, const std::string &what,
    const std::function<void(std::ostream &)> &write) {
  // Rendered first, then written by the one atomic writer (FileIO.h), so a
  // trace or profile follows the rules of every other output.
  std::ostringstream text;
  write(text);
  return writeFileAtomic(path, text.str(), what);
}

namespace {

/// Microseconds, as Chrome traces count them, from our nanoseconds.
double micros(int64_t ns) { return double(ns) / 1e3; }

/// Track numbers: a pid per device and one for the host; a tid per queue.
int devicePid(uint32_t device) { return int(device) + 1; }
int queueTid(QueueKind q) { return int(q) + 1; }
constexpr int kStepsTid = 1, kOptimizerTid = 2;

} // namespace

Status rp::runtime::writeChromeTrace(const Trace &trace,
                                     const std::string &path) {
  if (!trace.keepsSteps())
    return internalError("writeChromeTrace needs a Trace made with "
                         "keepSteps");
  const Plan &plan = trace.getPlan();
  int hostPid = devicePid(plan.devices);
  std::vector<HostSpan> hostSpans = trace.getHostSpans();
  // Only the queues that have jobs get a track.
  std::vector<std::vector<bool>> used(plan.devices,
                                      std::vector<bool>(kNumQueueKinds, false));
  for (const JobDesc &job : plan.jobs)
    if (job.device < plan.devices)
      used[job.device][int(job.queue)] = true;
  // A renamed device (continuous execution) runs other devices' queues.
  for (const StepSpans &step : trace.getSteps())
    for (size_t i = 0; i < step.jobs.size() && i < plan.jobs.size(); ++i)
      if (step.jobs[i].ran() &&
          step.jobs[i].deviceOf(plan.jobs[i]) < plan.devices)
        used[step.jobs[i].deviceOf(plan.jobs[i])][int(plan.jobs[i].queue)] =
            true;
  // Per program, the share of its modelled time that recomputes (0 where
  // the plan's hardware profile cannot be loaded).
  std::vector<double> shares(plan.programs.size(), 0.0);
  std::string error;
  if (auto hw = timing::loadHardwareModel(
          plan.hardware.empty() ? timing::kDefaultHardware : plan.hardware,
          error))
    for (uint32_t p = 0; p < plan.programs.size(); ++p)
      shares[p] = sim::recomputeShare(*hw, plan, p);
  std::vector<uint64_t> copyBytes(plan.jobs.size(), 0);
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    for (const CopyDesc &c : plan.jobs[i].copies)
      copyBytes[i] += c.bytes;

  return writeFileAtomically(path, "trace file", [&](std::ostream &out) {
    bool first = true;
    auto emit = [&](const nlohmann::json &event) {
      out << (first ? "\n" : ",\n") << event.dump();
      first = false;
    };
    auto meta = [&](const char *name, int pid, int tid,
                    const nlohmann::json &args) {
      nlohmann::json e = {
          {"name", name}, {"ph", "M"}, {"pid", pid}, {"args", args}};
      if (tid >= 0)
        e["tid"] = tid;
      emit(e);
    };
    out << "{\"displayTimeUnit\": \"ms\", \"otherData\": "
        << nlohmann::json({{"plan", plan.path},
                           {"schedule", plan.schedule},
                           {"devices", plan.devices},
                           {"microbatches", plan.microbatches},
                           {"steps", trace.getSteps().size()}})
               .dump()
        << ", \"traceEvents\": [";
    for (uint32_t d = 0; d < plan.devices; ++d) {
      meta("process_name", devicePid(d), -1,
           {{"name", "device " + std::to_string(d)}});
      meta("process_sort_index", devicePid(d), -1, {{"sort_index", d}});
      for (int q = 0; q < kNumQueueKinds; ++q) {
        if (!used[d][q])
          continue;
        QueueKind kind = static_cast<QueueKind>(q);
        meta("thread_name", devicePid(d), queueTid(kind),
             {{"name", queueName(kind)}});
        meta("thread_sort_index", devicePid(d), queueTid(kind),
             {{"sort_index", q}});
      }
    }
    meta("process_name", hostPid, -1, {{"name", "host"}});
    meta("process_sort_index", hostPid, -1, {{"sort_index", plan.devices}});
    meta("thread_name", hostPid, kStepsTid, {{"name", "steps"}});
    meta("thread_name", hostPid, kOptimizerTid, {{"name", "optimizer"}});
    for (const HostSpan &h : hostSpans) {
      bool step = h.name == "step";
      emit({{"name", step ? "step " + std::to_string(h.step) : h.name},
            {"cat", "host"},
            {"ph", "X"},
            {"pid", hostPid},
            {"tid", h.name == "optimizer" || h.name == "gradients"
                        ? kOptimizerTid
                        : kStepsTid},
            {"ts", micros(h.start)},
            {"dur", micros(h.end - h.start)},
            {"args", {{"step", h.step}}}});
    }
    for (const StepSpans &step : trace.getSteps()) {
      for (size_t i = 0; i < step.jobs.size() && i < plan.jobs.size(); ++i) {
        const JobSpan &span = step.jobs[i];
        if (!span.ran())
          continue;
        const JobDesc &job = plan.jobs[i];
        nlohmann::json args = {{"step", step.step},
                               {"stage", job.stage},
                               {"microbatch", job.microbatch},
                               {"job", i}};
        if (job.kind == JobKind::copy)
          args["bytes"] = copyBytes[i];
        else if (job.program < plan.programs.size())
          args["program"] = plan.programs[job.program].name;
        double share = job.kind == JobKind::run && job.program < shares.size()
                           ? shares[job.program]
                           : 0.0;
        nlohmann::json recompute;
        if (share > 0)
          recompute = {{"step", step.step},
                       {"stage", job.stage},
                       {"microbatch", job.microbatch},
                       {"job", i},
                       {"modelled_share", share}};
        emit({{"name",
               job.label.empty() ? "job " + std::to_string(i) : job.label},
              {"cat", job.kind == JobKind::copy ? "copy" : "compute"},
              {"ph", "X"},
              {"pid", devicePid(span.deviceOf(job))},
              {"tid", queueTid(job.queue)},
              {"ts", micros(span.start)},
              {"dur", micros(span.end - span.start)},
              {"args", std::move(args)}});
        // The recompute at the start of a backward job, nested in its span:
        // its length is the job's times the share the hardware model gives
        // its recompute calls (exact on the sim device, an estimate on
        // devices that time whole jobs).
        if (share > 0)
          emit({{"name", "recompute"},
                {"cat", "recompute"},
                {"ph", "X"},
                {"pid", devicePid(span.deviceOf(job))},
                {"tid", queueTid(job.queue)},
                {"ts", micros(span.start)},
                {"dur", micros(span.end - span.start) * share},
                {"args", std::move(recompute)}});
      }
    }
    out << "\n]}\n";
  });
}
