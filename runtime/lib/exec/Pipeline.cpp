//===- Pipeline.cpp - running a staged plan on a backend's devices --------===//
//
// One mutex and one condition variable carry all synchronization: events
// are recorded per job, not per kernel, so a step sees a few hundred
// records at most, and a single lock makes the watchdog's snapshot of every
// queue consistent. Buffers are never touched under the lock; the lock
// orders them (a record happens after the job's writes, a wait's return
// before the next job's reads).
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Pipeline.h"

#include <algorithm>
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
  std::unique_ptr<PipelineExecutor> exec(
      new PipelineExecutor(plan, fwd, options));
  exec->recorder.assign(plan.events, kNoJob);
  exec->recordedInStep.assign(plan.events, 0);
  std::map<std::pair<uint32_t, int>, Controller *> byKey;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobDesc &job = plan.jobs[i];
    for (uint32_t e : job.records)
      if (exec->recorder[e] == kNoJob)
        exec->recorder[e] = i;
    Controller *&q = byKey[{job.device, static_cast<int>(job.queue)}];
    if (!q) {
      exec->queues.push_back(std::make_unique<Controller>());
      q = exec->queues.back().get();
      q->device = job.device;
      q->kind = job.queue;
      q->queue = &backend.getDevice(job.device).getQueue(job.queue);
    }
    q->jobs.push_back(i);
  }
  // An event is recorded on its recorder's device; one no job records (a
  // broken plan the watchdog will name) still gets one, on device 0.
  for (uint32_t e = 0; e < plan.events; ++e) {
    size_t by = exec->recorder[e];
    uint32_t device = by == kNoJob ? 0 : plan.jobs[by].device;
    Expected<std::unique_ptr<Event>> event =
        backend.getDevice(device).createEvent();
    if (!event)
      return Status(event.getStatus().getCode(),
                    "event " + std::to_string(e) + " on device " +
                        std::to_string(device) + ": " +
                        event.getStatus().getMessage());
    exec->events.push_back(std::move(*event));
  }
  exec->waitersOf.resize(plan.events);
  for (auto &q : exec->queues)
    for (size_t i : q->jobs)
      for (uint32_t e : plan.jobs[i].waits) {
        auto &list = exec->waitersOf[e];
        if (list.empty() || list.back() != q.get())
          list.push_back(q.get());
      }
  if (!options.gatesOf.empty() && options.gatesOf.size() != plan.jobs.size())
    return internalError("gates are given for " +
                         std::to_string(options.gatesOf.size()) +
                         " jobs; the plan has " +
                         std::to_string(plan.jobs.size()));
  exec->gateOpenFor.assign(options.gates, 0);
  exec->gateWaiters.resize(options.gates);
  for (auto &q : exec->queues)
    for (size_t i : q->jobs)
      for (uint32_t g : options.gatesOf.empty() ? std::vector<uint32_t>()
                                                : options.gatesOf[i]) {
        if (g >= options.gates)
          return internalError("job " + std::to_string(i) + " waits for gate " +
                               std::to_string(g) + " of " +
                               std::to_string(options.gates));
        auto &list = exec->gateWaiters[g];
        if (list.empty() || list.back() != q.get())
          list.push_back(q.get());
      }
  exec->landingEvents.resize(plan.jobs.size());
  for (size_t job : options.landings) {
    if (job >= plan.jobs.size() || !options.onLanded)
      return internalError("landing job " + std::to_string(job) +
                           " is not a job of the plan, or nothing handles it");
    auto event = backend.getDevice(plan.jobs[job].device).createEvent();
    if (!event)
      return event.getStatus();
    exec->landingEvents[job] = std::move(*event);
  }
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
    size_t job = landing.front();
    landing.pop_front();
    if (cancelled) {
      // A cancelled step's landings are dropped, not handled.
      landing.clear();
      queueDone.notify_all();
      continue;
    }
    landingBusy = true;
    lock.unlock();
    Status s = landingEvents[job]->synchronize();
    if (s.isOk())
      s = options.onLanded(job);
    lock.lock();
    landingBusy = false;
    if (s.failed() && !cancelled) {
      error = Status(s.getCode(), "after " + describeJob(plan, job) +
                                      " landed: " + s.getMessage());
      cancelled = true;
      wakeAll();
    }
    queueDone.notify_all();
  }
}

bool PipelineExecutor::ready(const JobDesc &job) const {
  for (uint32_t e : job.waits)
    if (recordedInStep[e] != stepNumber)
      return false;
  if (!options.gatesOf.empty())
    for (uint32_t g : options.gatesOf[&job - plan.jobs.data()])
      if (gateOpenFor[g] < stepNumber)
        return false;
  return true;
}

uint64_t PipelineExecutor::nextStepNumber() const {
  std::lock_guard<std::mutex> lock(mutex);
  return stepNumber + 1;
}

void PipelineExecutor::openGate(uint32_t gate, uint64_t step) {
  std::lock_guard<std::mutex> lock(mutex);
  gateOpenFor[gate] = std::max(gateOpenFor[gate], step);
  // Host work the step waits for: progress for the watchdog.
  ++progress;
  for (Controller *waiter : gateWaiters[gate])
    waiter->wake.notify_one();
}

Status PipelineExecutor::enqueueJob(Controller &c, size_t index) {
  const JobDesc &job = plan.jobs[index];
  Queue &queue = *c.queue;
  queue.beginJob(uint32_t(&job - plan.jobs.data()));
  for (uint32_t e : job.waits)
    if (Status s = queue.wait(*events[e]); s.failed())
      return s;
  const BufferAddresses &at = fwd.getAddresses();
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
    if (Status s = queue.record(*events[e]); s.failed())
      return s;
  if (Event *landed = landingEvents[index].get())
    return queue.record(*landed);
  return Status::ok();
}

void PipelineExecutor::controllerLoop(Controller &q) {
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    q.wake.wait(lock, [&] { return shutdown || q.step != stepNumber; });
    if (shutdown)
      return;
    q.step = stepNumber;
    JobSpan *slots = traceSlots;
    for (q.next = 0; q.next < q.jobs.size(); ++q.next) {
      size_t index = q.jobs[q.next];
      const JobDesc &job = plan.jobs[index];
      q.wake.wait(lock, [&] { return cancelled || ready(job); });
      if (cancelled)
        break;
      q.running = true;
      ++running;
      ++progress;
      lock.unlock();
      // The slot is this job's alone; runJobs reads it once every queue is
      // done, which the lock below orders after this write.
      int64_t start = slots ? options.trace->now() : 0;
      Status s = enqueueJob(q, index);
      if (slots)
        slots[index] = {start, options.trace->now()};
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
      if (landingEvents[index]) {
        landing.push_back(index);
        landingWake.notify_one();
      }
      // The host-side signal: the device records are enqueued.
      for (uint32_t e : job.records) {
        recordedInStep[e] = stepNumber;
        for (Controller *waiter : waitersOf[e])
          waiter->wake.notify_one();
      }
    }
    // The step is done only when the queue's work is; a failure here is
    // the step's unless an earlier one was. Counted as running, so that
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
    }
    q.done = true;
    --activeQueues;
    queueDone.notify_all();
  }
}

Status PipelineExecutor::runJobs() {
  return runJobsOf(options.trace ? options.trace->takeStep() : 0);
}

Status PipelineExecutor::runJobsOf(uint64_t label) {
  std::unique_lock<std::mutex> lock(mutex);
  ++stepNumber;
  Trace *trace = options.trace;
  traceSlots = trace ? trace->beginStep(label, trace->now()) : nullptr;
  cancelled = false;
  error = Status::ok();
  activeQueues = queues.size();
  for (auto &q : queues) {
    q->done = false;
    q->next = 0;
  }
  wakeAll();
  using Clock = std::chrono::steady_clock;
  uint64_t seen = progress;
  Clock::time_point deadline = Clock::now() + options.progressWindow;
  while (activeQueues > 0) {
    queueDone.wait_until(lock, deadline, [&] { return activeQueues == 0; });
    if (activeQueues == 0)
      break;
    if (progress != seen || running > 0 || cancelled) {
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
      anyReady |= !q->done && !q->running && ready(plan.jobs[q->jobs[q->next]]);
    if (anyReady) {
      deadline = Clock::now() + options.progressWindow;
      continue;
    }
    error = deadlineExceeded(stallMessage());
    cancelled = true;
    wakeAll();
  }
  // The step's results include what the landing thread does with them.
  queueDone.wait(lock, [&] { return landing.empty() && !landingBusy; });
  if (trace)
    trace->endStep(trace->now(), error.isOk());
  traceSlots = nullptr;
  return error;
}

std::string PipelineExecutor::stallMessage() const {
  std::string text = "the step made no progress for " +
                     std::to_string(options.progressWindow.count()) + " ms: ";
  bool first = true;
  for (const auto &q : queues) {
    if (q->done || q->running)
      continue;
    size_t index = q->jobs[q->next];
    const JobDesc &job = plan.jobs[index];
    uint32_t missing = 0;
    bool event = false;
    for (uint32_t e : job.waits)
      if (recordedInStep[e] != stepNumber) {
        missing = e;
        event = true;
        break;
      }
    text += first ? "" : "; ";
    first = false;
    if (!event) {
      for (uint32_t g : options.gatesOf[index])
        if (gateOpenFor[g] < stepNumber)
          missing = g;
      text += "device " + std::to_string(q->device) + " " +
              queueName(q->kind) + " queue waits for the host to open gate " +
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
