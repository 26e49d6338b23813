//===- PipelineExecutor.cpp - running a staged plan on a backend's devices ===//
//
// One mutex and one condition variable carry all synchronization: events
// are recorded per job, not per kernel, so a step sees a few hundred
// records at most, and a single lock makes the watchdog's snapshot of every
// queue consistent. Buffers are never touched under the lock; the lock
// orders them (a record happens after the job's writes, a wait's return
// before the next job's reads).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/PipelineExecutor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <system_error>

using namespace rp::runtime;

static constexpr size_t kNoJob = ~size_t(0);

PipelineExecutor::PipelineExecutor(const Plan &plan, HostForward &fwd,
                                   const PipelineOptions &options)
    : plan(plan), fwd(fwd), backend(fwd.getBackend()), options(options) {}

Expected<std::unique_ptr<PipelineExecutor>>
PipelineExecutor::create(const Plan &plan, HostForward &fwd,
                         const PipelineOptions &options) {
  if (!plan.staged)
    return internalError("the pipeline executor runs staged plans; '" +
                         plan.path + "' runs its jobs in order on one device");
  if (Status s = checkPlanJobs(plan); s.failed())
    return s;
  Backend &backend = fwd.getBackend();
  if (backend.getNumDevices() != plan.devices)
    return invalidArgument(
        "'" + plan.path + "' runs on " + std::to_string(plan.devices) +
        " device(s), but its buffers were allocated on a " + backend.getName() +
        " backend of " + std::to_string(backend.getNumDevices()) +
        "; open the backend with the plan's device count");
  unsigned slots = options.slots;
  if (slots < 1 || slots > 2 || fwd.getSlots() < slots)
    return internalError("the executor runs " + std::to_string(slots) +
                         " pass(es) at once on buffers of " +
                         std::to_string(fwd.getSlots()) + " slot(s)");
  if (options.rotate && !fwd.rotates())
    return internalError("the executor renames devices, but the buffers "
                         "were not laid out for it");
  std::unique_ptr<PipelineExecutor> exec(
      new PipelineExecutor(plan, fwd, options));
  exec->sharedArenas = fwd.getArenaCopies() < slots;
  uint32_t G = plan.devices;
  exec->recorder.assign(plan.events, kNoJob);
  exec->passes.resize(slots);
  exec->recordedInStep.assign(slots, std::vector<uint64_t>(plan.events, 0));
  exec->gateOpenFor.assign(slots, std::vector<uint64_t>(options.gates, 0));
  exec->jobLists.resize(size_t(G) * kNumQueueKinds);
  std::vector<bool> kindUsed(kNumQueueKinds, false);
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &job = plan.jobs[i];
    for (uint32_t e : job.records)
      if (exec->recorder[e] == kNoJob)
        exec->recorder[e] = i;
    exec->jobLists[job.device * kNumQueueKinds + int(job.queue)].push_back(i);
    kindUsed[int(job.queue)] = true;
  }
  // One controller per device queue that runs jobs: the plan's own, or
  // with renaming every device's queue of a kind some device uses.
  for (uint32_t d = 0; d < G; ++d)
    for (int k = 0; k < kNumQueueKinds; ++k) {
      QueueKind kind = static_cast<QueueKind>(k);
      if (options.rotate ? !kindUsed[k] : exec->jobsOf(d, kind).empty())
        continue;
      exec->queues.push_back(std::make_unique<Controller>());
      Controller &q = *exec->queues.back();
      q.device = d;
      q.kind = kind;
      q.queue = &backend.getDevice(d).getQueue(kind);
      q.timed = options.trace && q.queue->timeJobs();
      q.callsTimed = options.trace && options.trace->timesCalls() &&
                     kind == QueueKind::compute && q.queue->timeCalls();
    }
  exec->onDevice.resize(G);
  for (auto &q : exec->queues)
    exec->onDevice[q->device].push_back(q.get());
  // An event is recorded on its recorder's device (renamed by the shift);
  // one no job records (a broken plan the watchdog will name) still gets
  // one, on device 0.
  uint32_t shifts = options.rotate ? G : 1;
  exec->events.resize(size_t(slots) * G);
  exec->landingEvents.resize(size_t(slots) * G);
  exec->watched.assign(plan.jobs.size(), false);
  for (size_t job : options.landings) {
    if (job >= plan.jobs.size() || !options.onLanded)
      return internalError("landing job " + std::to_string(job) +
                           " is not a job of the plan, or nothing handles it");
    exec->watched[job] = true;
  }
  for (unsigned slot = 0; slot < slots; ++slot)
    for (uint32_t shift = 0; shift < shifts; ++shift) {
      auto &set = exec->events[slot * G + shift];
      for (uint32_t e = 0; e < plan.events; ++e) {
        size_t by = exec->recorder[e];
        uint32_t device = by == kNoJob ? 0 : (plan.jobs[by].device + shift) % G;
        Expected<std::unique_ptr<Event>> event =
            backend.getDevice(device).createEvent();
        if (!event)
          return Status(event.getStatus().getCode(),
                        "event " + std::to_string(e) + " on device " +
                            std::to_string(device) + ": " +
                            event.getStatus().getMessage());
        set.push_back(std::move(*event));
      }
      auto &landed = exec->landingEvents[slot * G + shift];
      landed.resize(plan.jobs.size());
      for (size_t job = 0; job < plan.jobs.size(); ++job) {
        if (!exec->watched[job])
          continue;
        auto event = backend.getDevice((plan.jobs[job].device + shift) % G)
                         .createEvent();
        if (!event)
          return event.getStatus();
        landed[job] = std::move(*event);
      }
    }
  if (!options.gatesOf.empty() && options.gatesOf.size() != plan.jobs.size())
    return internalError(
        "gates are given for " + std::to_string(options.gatesOf.size()) +
        " jobs; the plan has " + std::to_string(plan.jobs.size()));
  for (size_t i = 0; i < options.gatesOf.size(); ++i)
    for (uint32_t g : options.gatesOf[i])
      if (g >= options.gates)
        return internalError("job " + std::to_string(i) + " waits for gate " +
                             std::to_string(g) + " of " +
                             std::to_string(options.gates));
  for (auto &q : exec->queues) {
    try {
      q->thread =
          std::thread([e = exec.get(), q = q.get()] { e->controllerLoop(*q); });
    } catch (const std::system_error &err) {
      // The destructor joins the controllers already started.
      return resourceExhausted(std::string("cannot start a queue thread: ") +
                               err.what());
    }
  }
  if (!options.landings.empty()) {
    try {
      exec->landingThread = std::thread([e = exec.get()] { e->landingLoop(); });
    } catch (const std::system_error &err) {
      return resourceExhausted(
          std::string("cannot start the landing thread: ") + err.what());
    }
  }
  return exec;
}

PipelineExecutor::~PipelineExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    shutdown = true;
    cancelled = true;
  }
  wakeAll();
  for (auto &q : queues)
    if (q->thread.joinable())
      q->thread.join();
  if (landingThread.joinable())
    landingThread.join();
}

void PipelineExecutor::wakeAll() {
  for (auto &q : queues)
    q->wake.notify_all();
  queueDone.notify_all();
  landingWake.notify_all();
}

void PipelineExecutor::landingLoop() {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    landingWake.wait(lock, [&] { return shutdown || !landing.empty(); });
    if (shutdown)
      return;
    auto [job, pass] = landing.front();
    landing.pop_front();
    PassState &ps = passOf(pass);
    if (cancelled) {
      // A cancelled pass's landings are dropped, not handled.
      --ps.landingsPending;
      queueDone.notify_all();
      continue;
    }
    landingBusy = true;
    Event &event = *landingEvents[(pass % passes.size()) * plan.devices +
                                  (options.rotate ? ps.shift : 0)][job];
    lock.unlock();
    Status s = event.synchronize();
    if (s.isOk())
      s = options.onLanded(job, pass);
    lock.lock();
    landingBusy = false;
    --ps.landingsPending;
    if (s.failed() && !cancelled) {
      error = Status(s.getCode(), "after " + describeJob(plan, job) +
                                      " landed: " + s.getMessage());
      cancelled = true;
      wakeAll();
    }
    queueDone.notify_all();
  }
}

bool PipelineExecutor::ready(size_t index, uint64_t pass) const {
  unsigned slot = unsigned(pass % passes.size());
  for (uint32_t e : plan.jobs[index].waits)
    if (recordedInStep[slot][e] != pass)
      return false;
  if (!options.gatesOf.empty())
    for (uint32_t g : options.gatesOf[index])
      if (gateOpenFor[slot][g] < pass)
        return false;
  return true;
}

bool PipelineExecutor::deviceDoneWith(uint32_t device, uint64_t pass) const {
  for (const Controller *q : onDevice[device])
    if (q->pass < pass || (q->pass == pass && !q->done))
      return false;
  return true;
}

uint64_t PipelineExecutor::nextStepNumber() const {
  std::lock_guard<std::mutex> lock(mutex);
  return stepNumber + 1;
}

void PipelineExecutor::openGate(uint32_t gate, uint64_t step) {
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t &open = gateOpenFor[step % passes.size()][gate];
  open = std::max(open, step);
  // Host work the step waits for: progress for the watchdog.
  ++progress;
  for (auto &q : queues)
    q->wake.notify_one();
}

Status PipelineExecutor::enqueueJob(Controller &c, size_t index,
                                    const PassState &pass) {
  const JobDesc &job = plan.jobs[index];
  Queue &queue = *c.queue;
  std::vector<std::unique_ptr<Event>> &set = eventSet(pass.number, pass.shift);
  queue.beginJob(uint32_t(index));
  for (uint32_t e : job.waits)
    if (Status s = queue.wait(*set[e]); s.failed())
      return s;
  unsigned slot = unsigned(pass.number % passes.size());
  const BufferAddresses &at = fwd.getAddresses(slot, pass.shift);
  if (job.kind == JobKind::run) {
    if (Status s = queue.launch(plan, job.program, at); s.failed())
      return s;
  } else {
    for (const CopyDesc &copy : job.copies) {
      bool fromHost = plan.buffers[copy.src].onHost();
      bool toHost = plan.buffers[copy.dst].onHost();
      CopyKind kind = fromHost ? CopyKind::hostToDevice
                      : toHost ? CopyKind::deviceToHost
                               : CopyKind::deviceToDevice;
      if (Status s =
              queue.copy(at[copy.dst] + copy.dstOffset,
                         at[copy.src] + copy.srcOffset, copy.bytes, kind);
          s.failed())
        return s;
    }
  }
  for (uint32_t e : job.records)
    if (Status s = queue.record(*set[e]); s.failed())
      return s;
  if (watched[index])
    return queue.record(
        *landingEvents[slot * plan.devices + (options.rotate ? pass.shift : 0)]
                      [index]);
  return Status::ok();
}

void PipelineExecutor::controllerLoop(Controller &q) {
  uint32_t G = plan.devices;
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    q.wake.wait(lock, [&] {
      return shutdown || passOf(q.pass + 1).number == q.pass + 1;
    });
    if (shutdown)
      return;
    // One copy of the arenas for two passes: the device's other queues
    // must be done with the pass before (a cancelled run runs no job).
    if (sharedArenas && !deviceDoneWith(q.device, q.pass)) {
      q.waitsForDevice = true;
      q.wake.wait(lock, [&] {
        return shutdown || cancelled || deviceDoneWith(q.device, q.pass);
      });
      q.waitsForDevice = false;
      if (shutdown)
        return;
    }
    uint64_t number = ++q.pass;
    PassState &pass = passOf(number);
    uint32_t planDevice =
        options.rotate ? (q.device + G - pass.shift % G) % G : q.device;
    q.jobs = &jobsOf(planDevice, q.kind);
    q.done = false;
    JobSpan *slots = pass.traceSlots;
    for (q.next = 0; q.next < q.jobs->size(); ++q.next) {
      size_t index = (*q.jobs)[q.next];
      const JobDesc &job = plan.jobs[index];
      q.wake.wait(lock, [&] { return cancelled || ready(index, number); });
      if (cancelled)
        break;
      q.running = true;
      ++running;
      ++progress;
      lock.unlock();
      // The slot is this job's alone; its pass's end reads it once every
      // queue is done, which the lock below orders after this write.
      int64_t start = slots ? options.trace->now() : 0;
      Status s = enqueueJob(q, index, pass);
      if (slots)
        slots[index] = {start, options.trace->now(),
                        options.rotate ? int32_t(q.device) : -1};
      lock.lock();
      q.running = false;
      --running;
      ++progress;
      if (s.failed()) {
        if (!cancelled) {
          error = Status(s.getCode(),
                         describeJob(plan, index) + " on the device " +
                             std::to_string(q.device) + " " +
                             queueName(q.kind) + " queue: " + s.getMessage());
          cancelled = true;
        }
        wakeAll();
        break;
      }
      if (watched[index]) {
        ++pass.landingsPending;
        landing.emplace_back(index, number);
        landingWake.notify_one();
      }
      // The host-side signal: the device records are enqueued.
      unsigned slot = unsigned(number % passes.size());
      for (uint32_t e : job.records)
        recordedInStep[slot][e] = number;
      if (!job.records.empty())
        for (auto &other : queues)
          if (other.get() != &q)
            other->wake.notify_one();
    }
    // The pass is done only when the queue's work is; a failure here is
    // the run's unless an earlier one was. Counted as running, so that
    // the watchdog sees work in flight, not a queue with no next job.
    q.running = true;
    ++running;
    lock.unlock();
    Status synced = q.queue->synchronize();
    lock.lock();
    q.running = false;
    --running;
    if (synced.failed() && !cancelled) {
      error = Status(synced.getCode(),
                     "the device " + std::to_string(q.device) + " " +
                         queueName(q.kind) + " queue: " + synced.getMessage());
      cancelled = true;
      wakeAll();
    }
    q.done = true;
    --pass.activeQueues;
    if (sharedArenas)
      for (Controller *other : onDevice[q.device])
        if (other != &q)
          other->wake.notify_one();
    queueDone.notify_all();
  }
}

Status PipelineExecutor::runJobs() {
  return runJobsOf(options.trace ? options.trace->takeStep() : 0);
}

uint64_t PipelineExecutor::submitPass(uint32_t shift, uint64_t label) {
  std::unique_lock<std::mutex> lock(mutex);
  // A fresh start after a failure: no pass of the failed run is left.
  bool idle = true;
  for (const PassState &p : passes)
    idle &= p.waited;
  if (idle) {
    cancelled = false;
    error = Status::ok();
  }
  uint64_t number = ++stepNumber;
  PassState &pass = passOf(number);
  pass.number = number;
  pass.shift = options.rotate ? shift % plan.devices : 0;
  pass.label = label;
  Trace *trace = options.trace;
  pass.traceSlots = trace ? trace->beginStep(label, trace->now()) : nullptr;
  pass.activeQueues = queues.size();
  pass.landingsPending = 0;
  pass.waited = false;
  wakeAll();
  return number;
}

Status PipelineExecutor::waitPass(uint64_t number) {
  std::unique_lock<std::mutex> lock(mutex);
  PassState &pass = passOf(number);
  if (pass.number != number)
    return internalError("pass " + std::to_string(number) +
                         " is not in flight");
  using Clock = std::chrono::steady_clock;
  uint64_t seen = progress;
  Clock::time_point deadline = Clock::now() + options.progressWindow;
  while (!pass.finished()) {
    queueDone.wait_until(lock, deadline, [&] { return pass.finished(); });
    if (pass.finished())
      break;
    if (progress != seen || running > 0 || cancelled || landingBusy) {
      // Progress, a job still running, or queues already stopping (they
      // end their current job and leave): not a stall.
      seen = progress;
      deadline = Clock::now() + options.progressWindow;
      continue;
    }
    if (Clock::now() < deadline)
      continue;
    // A queue whose next job is ready only has not been scheduled yet.
    bool anyReady = false;
    for (const auto &q : queues)
      anyReady |= !q->done && !q->running && q->jobs &&
                  q->next < q->jobs->size() &&
                  ready((*q->jobs)[q->next], q->pass);
    if (anyReady) {
      deadline = Clock::now() + options.progressWindow;
      continue;
    }
    error = deadlineExceeded(stallMessage());
    cancelled = true;
    wakeAll();
  }
  pass.waited = true;
  Trace *trace = options.trace;
  if (trace && pass.traceSlots) {
    takeDeviceSpans(pass.traceSlots);
    std::vector<CallTime> calls;
    for (const auto &q : queues)
      if (q->callsTimed)
        q->queue->takeCallTimes(calls);
    trace->addCallTimes(calls);
    trace->endStep(trace->now(), !cancelled);
  }
  pass.traceSlots = nullptr;
  return cancelled ? (error.failed() ? error
                                     : internalError("the pass was cancelled"))
                   : Status::ok();
}

void PipelineExecutor::takeDeviceSpans(JobSpan *slots) {
  // Each timed queue hands its jobs' spans back in the order it was given
  // them: plan order within a pass. Every job that ran was begun on its
  // queue, so a failed pass is read too (without waiting: its jobs may
  // never run), and the next starts in step.
  const int64_t toTrace =
      options.trace->now() -
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count();
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    JobSpan &span = slots[i];
    if (!span.ran())
      continue;
    const JobDesc &job = plan.jobs[i];
    for (const auto &q : queues) {
      if (!q->timed || q->device != span.deviceOf(job) || q->kind != job.queue)
        continue;
      int64_t start = 0, end = 0;
      if (q->queue->takeJobTime(uint32_t(i), !cancelled, start, end)) {
        span.start = start + toTrace;
        span.end = end + toTrace;
      }
      break;
    }
  }
}

Status PipelineExecutor::runJobsOf(uint64_t label) {
  return waitPass(submitPass(0, label));
}

std::string PipelineExecutor::stallMessage() const {
  std::string text = "the step made no progress for " +
                     std::to_string(options.progressWindow.count()) + " ms: ";
  bool first = true;
  for (const auto &q : queues) {
    if (q->waitsForDevice) {
      text += std::string(first ? "" : "; ") + "device " +
              std::to_string(q->device) + " " + queueName(q->kind) +
              " queue waits for the device's other queues to finish pass " +
              std::to_string(q->pass) + " before taking up pass " +
              std::to_string(q->pass + 1) +
              " (its passes share one copy of the arenas)";
      first = false;
      continue;
    }
    if (q->done || q->running || !q->jobs || q->next >= q->jobs->size())
      continue;
    size_t index = (*q->jobs)[q->next];
    const JobDesc &job = plan.jobs[index];
    unsigned slot = unsigned(q->pass % passes.size());
    uint32_t missing = 0;
    bool event = false;
    for (uint32_t e : job.waits)
      if (recordedInStep[slot][e] != q->pass) {
        missing = e;
        event = true;
        break;
      }
    text += first ? "" : "; ";
    first = false;
    if (!event) {
      for (uint32_t g : options.gatesOf[index])
        if (gateOpenFor[slot][g] < q->pass)
          missing = g;
      text += "device " + std::to_string(q->device) + " " + queueName(q->kind) +
              " queue waits for the host to open gate " +
              std::to_string(missing) + " before " + describeJob(plan, index);
      continue;
    }
    text += "device " + std::to_string(q->device) + " " + queueName(q->kind) +
            " queue waits for event " + std::to_string(missing) + " before " +
            describeJob(plan, index) + " (";
    size_t by = recorder[missing];
    if (by == kNoJob)
      text += "no job records event " + std::to_string(missing) + ")";
    else
      text += "event recorded by " + describeJob(plan, by) + ", not run yet)";
  }
  return text + ". The plan's events cannot all be recorded; a plan that "
                "passed loadPlan's checks should never stall, report it";
}

Status PipelineExecutor::step(ThreadPool &hostPool, bool prologue) {
  Trace *trace = options.trace;
  uint64_t label = trace ? trace->takeStep() : 0;
  int64_t stepStart = trace ? trace->now() : 0;
  auto host = [&](int32_t program, const char *what) -> Status {
    if (program < 0)
      return Status::ok();
    int64_t start = trace ? trace->now() : 0;
    Status s = fwd.runProgram(hostPool, uint32_t(program));
    if (trace)
      trace->addHostSpan(what, label, start, trace->now());
    if (s.failed())
      return Status(s.getCode(),
                    std::string("the ") + what + ": " + s.getMessage());
    return Status::ok();
  };
  Status s = host(prologue ? plan.prologue : -1, "prologue");
  if (s.isOk())
    s = runJobsOf(label);
  if (s.isOk())
    s = host(plan.epilogue, "epilogue");
  if (trace)
    trace->addHostSpan("step", label, stepStart, trace->now());
  return s;
}

uint32_t rp::runtime::passShiftJobs(const Plan &plan) {
  // Decided at compile time (plan.fbs's pass_shift).
  if (plan.passShift >= 0)
    return uint32_t(plan.passShift);
  uint32_t stageJobs = 0;
  for (const JobDesc &job : plan.jobs)
    if (job.stage >= 0)
      stageJobs = std::max(stageJobs, uint32_t(job.stage) + 1);
  for (const JobDesc &job : plan.jobs)
    if (job.kind == JobKind::run && job.stage >= 0 &&
        job.device != uint32_t(job.stage) % plan.devices)
      return 0;
  return stageJobs;
}

unsigned rp::runtime::passesInFlight(const Plan &plan) {
  return plan.passesInFlight ? plan.passesInFlight : 2;
}

unsigned rp::runtime::arenaCopies(const Plan &plan, unsigned slots) {
  unsigned copies = plan.arenaCopies ? plan.arenaCopies : slots;
  return std::max(1u, std::min(copies, slots));
}

bool rp::runtime::renamesDevices(const Plan &plan, unsigned slots) {
  return slots >= 2 && plan.devices > 1 &&
         passShiftJobs(plan) % plan.devices != 0;
}
