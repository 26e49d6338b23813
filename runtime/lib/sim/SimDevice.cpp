//===- SimDevice.cpp - the device interface on a virtual clock ------------===//
//
// Every command, record and wait takes the backend's one mutex: the
// controllers enqueue a few commands per job, and the single lock keeps a
// queue's commands, its pending waits and the events' latest records
// consistent with each other.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/sim/SimDevice.h"
#include "rp/runtime/Driver.h"
#include "rp/runtime/sim/PlanTiming.h"

#include <algorithm>

using namespace rp::runtime;
using namespace rp::runtime::sim;
namespace timing = rp::timing;

static constexpr unsigned kNone = ~0u;

namespace {

/// The latest record: the step and the command it follows.
class SimEvent final : public Event {
public:
  explicit SimEvent(uint32_t device) : device(device) {}
  // Virtual time: a recorded command is as good as done for the host.
  bool query() override { return true; }
  Status synchronize() override { return Status::ok(); }

  const uint32_t device;
  uint64_t step = 0; ///< guarded by the backend's mutex
  unsigned command = kNone;
};

} // namespace

namespace rp::runtime::sim {

class SimQueue final : public Queue {
public:
  SimQueue(SimBackend &backend, uint32_t device, QueueKind kind)
      : backend(backend), device(device), kind(kind) {}

  uint32_t getDevice() const override { return device; }
  QueueKind getKind() const override { return kind; }
  int getPriority() const override { return queuePriority(kind); }
  Status copy(void *dst, const void *src, size_t bytes, CopyKind kind) override;
  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &buffers) override;
  Status record(Event &event) override;
  Status wait(Event &event) override;
  Status synchronize() override { return Status::ok(); }
  void beginJob(uint32_t job) override;

  /// Forgets the step: called with the backend's mutex held.
  void reset() {
    step = backend.step;
    last = kNone;
    position = 0;
    pending.clear();
    job = -1;
    jobHasCommand = true;
  }
  /// Gives the current job a marker if it enqueued nothing; mutex held.
  void flushEmptyJob() {
    if (step == backend.step && !jobHasCommand)
      add(0, 0);
  }

private:
  std::string name() const {
    return "sim device " + std::to_string(device) + " " + queueName(kind) +
           " queue";
  }
  /// Appends a command taking the pending waits; mutex held.
  void add(double ms, uint64_t bytes, double dispatchMs = 0, double issueMs = 0,
           CopyKind copy = CopyKind::hostToDevice) {
    if (step != backend.step)
      reset();
    SimCommand c;
    c.device = device;
    c.queue = kind;
    c.position = position++;
    c.job = job;
    c.ms = ms;
    c.bytes = bytes;
    c.copy = copy;
    c.dispatchMs = dispatchMs;
    c.issueMs = issueMs;
    c.waits = std::move(pending);
    pending.clear();
    last = unsigned(backend.commands.size());
    backend.commands.push_back(std::move(c));
    jobHasCommand = true;
  }

  SimBackend &backend;
  const uint32_t device;
  const QueueKind kind;
  // Guarded by the backend's mutex.
  uint64_t step = 0;
  unsigned last = kNone;
  uint64_t position = 0;
  std::vector<unsigned> pending;
  int64_t job = -1;
  bool jobHasCommand = true;
};

class SimDevice final : public Device {
public:
  SimDevice(SimBackend &backend, uint32_t index)
      : backend(backend), index(index) {
    for (int k = 0; k < kNumQueueKinds; ++k)
      queues[k] = std::make_unique<SimQueue>(backend, index, QueueKind(k));
  }
  uint32_t getIndex() const override { return index; }
  Expected<void *> allocate(size_t bytes) override {
    return backend.fakeAddress(bytes);
  }
  void deallocate(void *) override {}
  // Its memory is not there to touch.
  bool isHostAccessible() const override { return false; }
  Queue &getQueue(QueueKind kind) override {
    return *queues[static_cast<int>(kind)];
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    return std::unique_ptr<Event>(new SimEvent(index));
  }
  SimQueue &queue(int k) { return *queues[k]; }

private:
  SimBackend &backend;
  const uint32_t index;
  std::unique_ptr<SimQueue> queues[kNumQueueKinds];
};

} // namespace rp::runtime::sim

Status SimQueue::copy(void *dst, const void *src, size_t bytes,
                      CopyKind copyKind) {
  if (bytes != 0 && (!dst || !src))
    return invalidArgument("a copy of " + std::to_string(bytes) +
                           " bytes on the " + name() + " has a null pointer");
  const timing::HardwareModel &hw = backend.getHardware();
  double ms =
      copyKind == CopyKind::deviceToDevice
          ? hw.deviceCopyMs(double(bytes))
          : hw.copyMs(double(bytes), copyKind == CopyKind::hostToDevice);
  std::lock_guard<std::mutex> lock(backend.mutex);
  add(ms, bytes, 0, 0, copyKind);
  return Status::ok();
}

Status SimQueue::launch(const Plan &plan, uint32_t program,
                        const BufferAddresses &buffers) {
  if (Status s = checkLaunch(plan, program, buffers.size(), kind, name());
      s.failed())
    return s;
  // The host's hand-off to a job that waits on another queue is the
  // timing core's (Graph::handoffMs), not a cost of every launch.
  double ms = backend.programMs(plan, program);
  double dispatchMs = backend.programDispatchMs(plan, program);
  double issueMs = backend.programIssueMs(plan, program);
  std::lock_guard<std::mutex> lock(backend.mutex);
  add(ms, 0, dispatchMs, issueMs);
  return Status::ok();
}

Status SimQueue::record(Event &event) {
  auto *e = dynamic_cast<SimEvent *>(&event);
  if (!e)
    return invalidArgument("cannot record an event of another backend on the " +
                           name());
  if (e->device != device)
    return invalidArgument("cannot record an event of device " +
                           std::to_string(e->device) + " on the " + name() +
                           "; record it on its own device's queues");
  std::lock_guard<std::mutex> lock(backend.mutex);
  if (step != backend.step)
    reset();
  // A record after waits orders after them too (as a stream's does).
  if (!pending.empty())
    add(0, 0);
  e->step = backend.step;
  e->command = last;
  return Status::ok();
}

Status SimQueue::wait(Event &event) {
  auto *e = dynamic_cast<SimEvent *>(&event);
  if (!e)
    return invalidArgument("cannot wait for an event of another backend on "
                           "the " +
                           name());
  std::lock_guard<std::mutex> lock(backend.mutex);
  if (step != backend.step)
    reset();
  // A record of an earlier step is behind the step barrier already; one
  // never recorded orders nothing.
  if (e->step == backend.step && e->command != kNone)
    pending.push_back(e->command);
  return Status::ok();
}

void SimQueue::beginJob(uint32_t j) {
  std::lock_guard<std::mutex> lock(backend.mutex);
  if (step != backend.step)
    reset();
  flushEmptyJob();
  job = j;
  jobHasCommand = false;
}

SimBackend::~SimBackend() = default;

Expected<std::unique_ptr<SimBackend>>
SimBackend::create(const BackendOptions &options) {
  if (options.devices == 0)
    return invalidArgument("the sim backend needs at least one device");
  std::string name =
      options.hardware.empty() ? timing::kDefaultHardware : options.hardware;
  std::string error;
  std::optional<timing::HardwareModel> hw =
      timing::loadHardwareModel(name, error);
  if (!hw)
    return invalidArgument(error);
  std::unique_ptr<SimBackend> backend(new SimBackend());
  backend->hw = std::move(*hw);
  for (uint32_t d = 0; d < options.devices; ++d)
    backend->devices.push_back(std::make_unique<SimDevice>(*backend, d));
  return backend;
}

std::string SimBackend::describe() const {
  return "sim, " + std::to_string(devices.size()) + " virtual device(s) of '" +
         hw.name + "' (" + std::to_string(hw.gpusPerLink) + " per host link)";
}

uint32_t SimBackend::getNumDevices() const { return uint32_t(devices.size()); }

Device &SimBackend::getDevice(uint32_t index) { return *devices[index]; }

void *SimBackend::fakeAddress(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex);
  uintptr_t at = nextAddress;
  // Distinct and 64-byte aligned, like real allocations.
  nextAddress += (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  return reinterpret_cast<void *>(at);
}

Expected<void *> SimBackend::allocateHost(size_t bytes) {
  return fakeAddress(bytes);
}

void SimBackend::beginStep() {
  std::lock_guard<std::mutex> lock(mutex);
  ++step;
  commands.clear();
}

std::vector<SimCommand> SimBackend::takeStep() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &d : devices)
    for (int k = 0; k < kNumQueueKinds; ++k) {
      SimQueue &q = d->queue(k);
      q.flushEmptyJob();
    }
  std::vector<unsigned> order(commands.size());
  for (unsigned i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    const SimCommand &x = commands[a], &y = commands[b];
    return std::tie(x.device, x.queue, x.position) <
           std::tie(y.device, y.queue, y.position);
  });
  std::vector<unsigned> newIndex(commands.size());
  for (unsigned i = 0; i < order.size(); ++i)
    newIndex[order[i]] = i;
  std::vector<SimCommand> out;
  out.reserve(commands.size());
  for (unsigned i : order) {
    SimCommand c = std::move(commands[i]);
    for (unsigned &w : c.waits)
      w = newIndex[w];
    std::sort(c.waits.begin(), c.waits.end());
    out.push_back(std::move(c));
  }
  commands.clear();
  ++step;
  return out;
}

timing::Graph SimBackend::graphOf(const std::vector<SimCommand> &cmds) const {
  timing::Graph g;
  g.devices = uint32_t(devices.size());
  g.gpusPerLink = hw.gpusPerLink;
  g.host = hw.hostModel();
  g.handoffMs = hw.jobUs * 1e-3;
  for (const SimCommand &c : cmds) {
    timing::Task t;
    t.device = c.device;
    t.lane = static_cast<timing::Lane>(c.queue);
    t.ms = c.ms;
    t.dispatchMs = c.dispatchMs;
    t.issueMs = c.issueMs;
    t.waits = c.waits;
    g.tasks.push_back(std::move(t));
  }
  return g;
}

namespace {
/// The kernels a program launches as the cuda device does (a reshape
/// none, several for the calls timing::kernelLaunches names).
size_t launchesOf(const Plan &plan, const ProgramDesc &program) {
  size_t n = 0;
  for (const KernelCallDesc &call : program.calls) {
    timing::CallOperands ops = callOperands(plan, call);
    n += timing::kernelLaunches(uint16_t(call.op), call.ints, ops.inputs,
                                ops.outputs);
  }
  return n;
}
} // namespace

double SimBackend::programMs(const Plan &plan, uint32_t program) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = programCache.find({&plan, program});
    if (it != programCache.end())
      return it->second;
  }
  // Each call at its measured time where the file's "ops" name it; a
  // program its layers time takes the layers' time (docs/sim.md).
  double ms = 0;
  for (const KernelCallDesc &call : plan.programs[program].calls)
    ms += sim::callTimeMs(hw, plan, call, measured ? &*measured : nullptr);
  if (measured) {
    // A fused tail runs forward and backward without recompute; its job's
    // label says so (T2 mb0), its program's name does not always.
    bool tail = false;
    for (const JobDesc &j : plan.jobs)
      tail |= j.kind == JobKind::run && j.program == program &&
              !j.label.empty() && j.label[0] == 'T';
    if (std::optional<double> m = timing::measuredProgramMs(
            *measured, plan.programs[program].name, tail))
      ms = *m;
  }
  // The host's per-call dispatch work (a MoE expert loop's) on top of the
  // kernels, measured or not; its issue work beside them.
  ms = hw.programMs(ms, programDispatchMs(plan, program),
                    launchesOf(plan, plan.programs[program]));
  std::lock_guard<std::mutex> lock(mutex);
  programCache[{&plan, program}] = ms;
  return ms;
}

double SimBackend::programDispatchMs(const Plan &plan, uint32_t program) const {
  double ms = 0;
  for (const KernelCallDesc &call : plan.programs[program].calls)
    ms += hw.hostDispatchMs(uint16_t(call.op));
  return ms;
}

double SimBackend::programIssueMs(const Plan &plan, uint32_t program) const {
  return hw.issueMs(launchesOf(plan, plan.programs[program]));
}

void rp::runtime::sim::registerDriver() {
  rp::runtime::registerDriver(driverOf<SimBackend>("sim"));
}
