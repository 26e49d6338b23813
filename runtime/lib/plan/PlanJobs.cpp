//===- PlanJobs.cpp - checking a plan's jobs, and the staged grid ---------===//
//
// A staged plan is a set of ordered queues that synchronize through events.
// What can go wrong there is not an index out of range but a step that
// never finishes, so besides the range checks this file simulates the
// queues once at load time: a plan whose queues can get stuck is refused
// with the queue, its job and the event it would wait for forever, rather
// than discovered by a watchdog in the middle of training.
//
//===----------------------------------------------------------------------===//

#include "PlanInternal.h"
#include "rp/contract/plan_generated.h"

#include <algorithm>
#include <map>
#include <sstream>

using namespace rp::runtime;

// The names of the plan's enums live here, apart from the reader in
// Plan.cpp, so that a device library can name ops and queues in its
// messages without the FlatBuffers parser (lib/cuda/CMakeLists.txt).
const char *rp::runtime::opKindName(OpKind op) {
  return ::rp::plan::EnumNameOpKind(static_cast<::rp::plan::OpKind>(op));
}

const char *rp::runtime::queueName(QueueKind queue) {
  const char *name = ::rp::plan::EnumNameQueue(queue);
  return *name ? name : "unknown";
}

std::string rp::runtime::describeJob(const Plan &plan, size_t job) {
  std::string text = "job #" + std::to_string(job);
  if (job < plan.jobs.size() && !plan.jobs[job].label.empty())
    text += " '" + plan.jobs[job].label + "'";
  return text;
}

namespace {

struct Failer {
  const Plan &plan;
  Status fail(const std::string &what) const {
    return invalidFormat(plan.path.empty() ? what : plan.path + ": " + what);
  }
};

std::string describeQueue(uint32_t device, QueueKind queue) {
  return "device " + std::to_string(device) + " " + queueName(queue) + " queue";
}

std::string describeBuffer(const Plan &plan, uint32_t b) {
  std::string text = "buffer #" + std::to_string(b);
  if (!plan.buffers[b].name.empty())
    text += " '" + plan.buffers[b].name + "'";
  return text;
}

std::string describeMemory(int32_t device) {
  return device < 0 ? "host memory"
                    : "the memory of device " + std::to_string(device);
}

/// Every buffer of `program` must live in `device`'s memory (-1: host).
Status checkProgramMemory(const Failer &f, const std::string &who,
                          uint32_t program, int32_t device) {
  const Plan &plan = f.plan;
  const ProgramDesc &p = plan.programs[program];
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const KernelCallDesc &call = p.calls[c];
    for (const auto *list : {&call.inputs, &call.outputs})
      for (uint32_t b : *list) {
        if (plan.buffers[b].device == device)
          continue;
        return f.fail(who + " runs program '" + p.name + "', whose call #" +
                      std::to_string(c) + " (" + opKindName(call.op) +
                      ") touches " + describeBuffer(plan, b) + " in " +
                      describeMemory(plan.buffers[b].device) +
                      "; it may only touch " + describeMemory(device));
      }
  }
  return Status::ok();
}

Status checkCopy(const Failer &f, const std::string &who, const JobDesc &job,
                 size_t index, const CopyDesc &copy) {
  const Plan &plan = f.plan;
  std::string what = who + " copy #" + std::to_string(index);
  for (uint32_t b : {copy.src, copy.dst})
    if (b >= plan.buffers.size())
      return f.fail(what + " names buffer #" + std::to_string(b) +
                    ", but the plan has " +
                    std::to_string(plan.buffers.size()) + " buffers");
  auto range = [&](uint32_t b, uint64_t offset, const char *verb) {
    uint64_t size = plan.buffers[b].bytes();
    if (offset <= size && copy.bytes <= size - offset)
      return Status::ok();
    return f.fail(what + " " + verb + " bytes [" + std::to_string(offset) +
                  ", " + std::to_string(offset + copy.bytes) + ") of " +
                  describeBuffer(plan, b) + ", which holds " +
                  std::to_string(size) + " bytes");
  };
  if (Status s = range(copy.src, copy.srcOffset, "reads"); s.failed())
    return s;
  if (Status s = range(copy.dst, copy.dstOffset, "writes"); s.failed())
    return s;
  if (!plan.staged)
    return Status::ok();
  // A device's queues reach its own memory and the host's, nothing else.
  int32_t device = static_cast<int32_t>(job.device);
  for (uint32_t b : {copy.src, copy.dst}) {
    int32_t where = plan.buffers[b].device;
    if (where >= 0 && where != device)
      return f.fail(what + " touches " + describeBuffer(plan, b) + " in " +
                    describeMemory(where) + ", but the job runs on the " +
                    describeQueue(job.device, job.queue));
  }
  bool download = job.queue == QueueKind::d2h;
  uint32_t deviceSide = download ? copy.src : copy.dst;
  if (plan.buffers[deviceSide].onHost())
    return f.fail(what + (download ? " reads host " : " writes host ") +
                  describeBuffer(plan, deviceSide) + "; on the " +
                  queueName(job.queue) + " queue a copy " +
                  (download ? "reads" : "writes") + " " +
                  describeMemory(device));
  return Status::ok();
}

} // namespace

Status rp::runtime::checkPlanJobs(const Plan &plan) {
  Failer f{plan};
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    int32_t d = plan.buffers[b].device;
    if (d < -1 || (d >= 0 && uint32_t(d) >= plan.devices))
      return f.fail(describeBuffer(plan, b) + " lives on device " +
                    std::to_string(d) + ", but the plan has " +
                    std::to_string(plan.devices) +
                    " devices (-1 is host memory)");
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &job = plan.jobs[i];
    std::string who = describeJob(plan, i);
    if (job.device >= plan.devices)
      return f.fail(who + " runs on device " + std::to_string(job.device) +
                    " of " + std::to_string(plan.devices));
    for (const auto *list : {&job.waits, &job.records})
      for (uint32_t e : *list)
        if (e >= plan.events)
          return f.fail(who + (list == &job.waits ? " waits for" : " records") +
                        " event " + std::to_string(e) + ", but the plan has " +
                        std::to_string(plan.events) + " events");
    if (job.kind == JobKind::run) {
      if (job.queue != QueueKind::compute)
        return f.fail(who + " runs a program on the " +
                      describeQueue(job.device, job.queue) +
                      "; programs run on the compute queue");
      if (!job.copies.empty())
        return f.fail(who + " runs a program but also lists copies; a job "
                            "is one or the other");
      if (job.program >= plan.programs.size())
        return f.fail(who + " runs program #" + std::to_string(job.program) +
                      ", but the plan has " +
                      std::to_string(plan.programs.size()));
      if (plan.staged)
        if (Status s = checkProgramMemory(f, who, job.program,
                                          static_cast<int32_t>(job.device));
            s.failed())
          return s;
      continue;
    }
    if (job.queue == QueueKind::compute)
      return f.fail(who + " copies on the " +
                    describeQueue(job.device, job.queue) +
                    "; copies run on weight_h2d, activation_h2d or d2h");
    // A copy job without copies marks a place in its queue: the exporter
    // gives every schedule command an event, and a command whose bytes an
    // earlier copy already moved still records one.
    if (job.copies.empty() && job.records.empty())
      return f.fail(who + " is a copy job with nothing to copy and no "
                          "event to record");
    for (size_t k = 0; k < job.copies.size(); ++k)
      if (Status s = checkCopy(f, who, job, k, job.copies[k]); s.failed())
        return s;
  }
  if (!plan.staged)
    return Status::ok();
  const std::pair<int32_t, const char *> hostPrograms[] = {
      {plan.prologue, "prologue"}, {plan.epilogue, "epilogue"}};
  for (auto [program, what] : hostPrograms) {
    if (program < -1 ||
        (program >= 0 && size_t(program) >= plan.programs.size()))
      return f.fail(std::string("the ") + what + " is program #" +
                    std::to_string(program) + ", but the plan has " +
                    std::to_string(plan.programs.size()) + " (-1: none)");
    if (program >= 0)
      if (Status s = checkProgramMemory(f, std::string("the ") + what,
                                        uint32_t(program), -1);
          s.failed())
        return s;
  }
  for (const auto *list : {&plan.inputs, &plan.outputs})
    for (const BindingDesc &b : *list)
      if (!plan.buffers[b.buffer].onHost())
        return f.fail(std::string(list == &plan.inputs ? "input" : "output") +
                      " '" + b.name + "' is " + describeBuffer(plan, b.buffer) +
                      " in " + describeMemory(plan.buffers[b.buffer].device) +
                      "; a staged plan binds host buffers");
  return Status::ok();
}

Status rp::runtime::checkPlanEvents(const Plan &plan) {
  if (!plan.staged)
    return Status::ok();
  Failer f{plan};
  // The event count is read from the file: a plan's jobs name every event
  // it needs, so more events than the jobs' waits and records is a
  // corrupted count, refused before it sizes anything (a fuzzed plan asked
  // for 32 GB here).
  size_t named = 0;
  for (const JobDesc &job : plan.jobs)
    named += job.waits.size() + job.records.size();
  if (plan.events > named)
    return f.fail("the plan declares " + std::to_string(plan.events) +
                  " events but its jobs name " + std::to_string(named) +
                  "; the file is corrupted or from an incompatible writer");
  constexpr size_t kNone = ~size_t(0);
  std::vector<size_t> recorder(plan.events, kNone);
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    for (uint32_t e : plan.jobs[i].waits)
      if (e >= plan.events)
        return f.fail(describeJob(plan, i) + " waits for event " +
                      std::to_string(e) + ", but the plan has " +
                      std::to_string(plan.events) + " events");
    for (uint32_t e : plan.jobs[i].records) {
      if (e >= plan.events)
        return f.fail(describeJob(plan, i) + " records event " +
                      std::to_string(e) + ", but the plan has " +
                      std::to_string(plan.events) + " events");
      if (recorder[e] != kNone)
        return f.fail("event " + std::to_string(e) + " is recorded by " +
                      describeJob(plan, recorder[e]) + " and by " +
                      describeJob(plan, i) +
                      "; an event is recorded once per step");
      recorder[e] = i;
    }
  }

  // The queues in (device, queue) order, each with its jobs in plan order.
  std::map<std::pair<uint32_t, int>, std::vector<size_t>> queues;
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    queues[{plan.jobs[i].device, static_cast<int>(plan.jobs[i].queue)}]
        .push_back(i);
  std::map<std::pair<uint32_t, int>, size_t> head;
  std::vector<bool> recorded(plan.events, false);
  auto firstMissing = [&](size_t job) -> int64_t {
    for (uint32_t e : plan.jobs[job].waits)
      if (!recorded[e])
        return e;
    return -1;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (auto &[key, jobs] : queues) {
      size_t &h = head[key];
      while (h < jobs.size() && firstMissing(jobs[h]) < 0) {
        for (uint32_t e : plan.jobs[jobs[h]].records)
          recorded[e] = true;
        ++h;
        progress = true;
      }
    }
  }
  std::vector<std::pair<uint32_t, int>> stuck;
  for (auto &[key, jobs] : queues)
    if (head[key] < jobs.size())
      stuck.push_back(key);
  if (stuck.empty())
    return Status::ok();

  // Start from a queue that waits for an event nobody records: that is the
  // cause; other stuck queues only wait behind it. Otherwise the queues
  // wait in a cycle: follow it.
  auto start = stuck.front();
  for (auto key : stuck)
    if (recorder[firstMissing(queues[key][head[key]])] == kNone) {
      start = key;
      break;
    }
  std::string text = "the jobs can never finish (deadlock): ";
  std::vector<std::pair<uint32_t, int>> seen;
  for (auto key = start;;) {
    size_t job = queues[key][head[key]];
    int64_t e = firstMissing(job);
    text += "the " + describeQueue(key.first, QueueKind(key.second)) +
            " stops before " + describeJob(plan, job) +
            ", which waits for event " + std::to_string(e);
    seen.push_back(key);
    size_t by = recorder[e];
    if (by == kNone) {
      text += ", and no job records event " + std::to_string(e);
      break;
    }
    const JobDesc &r = plan.jobs[by];
    std::pair<uint32_t, int> next{r.device, static_cast<int>(r.queue)};
    text += ", recorded by " + describeJob(plan, by) + " on the " +
            describeQueue(r.device, r.queue);
    if (std::find(seen.begin(), seen.end(), next) != seen.end()) {
      text += ", which waits in turn (a cycle)";
      break;
    }
    text += "; ";
    key = next;
  }
  // The other stuck queues, briefly: a plan that lost one record may stop
  // several queues, and the fix is wherever the first of them reads.
  std::string others;
  size_t listed = 0;
  for (auto key : stuck) {
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      continue;
    if (listed++ == 8) {
      others += ", ...";
      break;
    }
    size_t job = queues[key][head[key]];
    others += std::string(others.empty() ? "" : ", ") + "the " +
              describeQueue(key.first, QueueKind(key.second)) + " before " +
              describeJob(plan, job) + " (event " +
              std::to_string(firstMissing(job)) + ")";
  }
  if (!others.empty())
    text += "; also stuck: " + others;
  return f.fail(text + "; every waited event must be recorded by a job that "
                       "can run first");
}

Status rp::runtime::validatePlanJobs(const Plan &plan) {
  if (Status s = checkPlanJobs(plan); s.failed())
    return s;
  return checkPlanEvents(plan);
}

std::string rp::runtime::describeBindings(const Plan &plan) {
  std::string text;
  auto io = [&](const char *what, const std::vector<BindingDesc> &list) {
    for (const BindingDesc &b : list)
      text += std::string(what) + " " + b.name + ": " +
              dtypeName(plan.buffers[b.buffer].dtype) +
              describeShape(plan.buffers[b.buffer].shape) + "\n";
  };
  io("input", plan.inputs);
  io("output", plan.outputs);
  return text;
}

std::string rp::runtime::describeStagedGrid(const Plan &plan) {
  std::ostringstream os;
  os << "plan " << plan.path << " (schema " << plan.schemaVersion << ", "
     << plan.producer << ")\n";
  os << "staged: " << plan.devices << " device(s), " << plan.microbatches
     << " microbatches, schedule "
     << (plan.schedule.empty() ? "-" : plan.schedule);
  if (plan.passShift >= 0)
    os << " (pass shift " << plan.passShift << ")";
  os << ", " << plan.jobs.size() << " jobs, " << plan.events << " events, "
     << plan.buffers.size() << " buffers, " << plan.programs.size()
     << " programs\n";
  auto program = [&](int32_t p) -> std::string {
    return p < 0 ? "none" : "'" + plan.programs[p].name + "'";
  };
  os << "prologue " << program(plan.prologue) << ", epilogue "
     << program(plan.epilogue) << "\n";

  // Rows are (device, queue); a column is a slot, as wide as its widest
  // label, so that slot k of every queue lines up. Consecutive jobs of one
  // queue with one label (the programs of one command: a stage's layers,
  // then its gradient accumulation) are one slot.
  static const char *shortNames[] = {"compute", "weight", "act", "d2h"};
  std::map<std::pair<uint32_t, int>, std::vector<std::string>> rows;
  size_t slots = 0;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &j = plan.jobs[i];
    auto &row = rows[{j.device, static_cast<int>(j.queue)}];
    std::string label = j.label.empty() ? "#" + std::to_string(i) : j.label;
    if (!j.label.empty() && !row.empty() && row.back() == label)
      continue;
    row.push_back(label);
    slots = std::max(slots, row.size());
  }
  std::vector<size_t> width(slots, 0);
  for (auto &[key, labels] : rows)
    for (size_t k = 0; k < labels.size(); ++k)
      width[k] = std::max(width[k], labels[k].size());
  size_t headWidth = ("device " + std::to_string(plan.devices - 1)).size() + 2;
  uint32_t lastDevice = ~0u;
  for (auto &[key, labels] : rows) {
    if (lastDevice != ~0u && key.first != lastDevice)
      os << "\n";
    lastDevice = key.first;
    std::string head = "device " + std::to_string(key.first);
    head.resize(headWidth, ' ');
    std::string queue = shortNames[key.second & 3];
    queue.resize(10, ' ');
    std::string line = head + queue;
    for (size_t k = 0; k < labels.size(); ++k) {
      if (k)
        line += " | ";
      std::string cell = labels[k];
      if (k + 1 < labels.size())
        cell.resize(width[k], ' ');
      line += cell;
    }
    os << line << "\n";
  }
  os << describeBindings(plan);
  return os.str();
}

Status rp::runtime::checkLaunch(const Plan &plan, uint32_t program,
                                size_t buffers, QueueKind kind,
                                const std::string &queue) {
  if (kind != QueueKind::compute)
    return invalidArgument("cannot launch a program on the " + queue +
                           "; kernels run on the compute queue");
  if (program >= plan.programs.size())
    return invalidArgument("program " + std::to_string(program) +
                           " launched on the " + queue + ", but '" + plan.path +
                           "' has " + std::to_string(plan.programs.size()));
  if (buffers != plan.buffers.size())
    return invalidArgument("a launch on the " + queue + " gives " +
                           std::to_string(buffers) +
                           " buffer addresses for a plan of " +
                           std::to_string(plan.buffers.size()) + " buffers");
  return Status::ok();
}

Status rp::runtime::callFailed(const ProgramDesc &program, size_t call,
                               const Status &failure) {
  const KernelCallDesc &c = program.calls[call];
  return Status(failure.getCode(), "program '" + program.name + "', call #" +
                                       std::to_string(call) + " (" +
                                       opKindName(c.op) +
                                       (c.loc.empty() ? "" : " at " + c.loc) +
                                       "): " + failure.getMessage());
}
