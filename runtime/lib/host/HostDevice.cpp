//===- HostDevice.cpp - the device interface on CPU threads ---------------===//
//
// A host queue is synchronous: each command runs on the enqueuing thread
// before the call returns, under the queue's mutex, so that two threads
// enqueueing on one queue still see its commands run one after another in
// enqueue order, as a stream runs them. The executor gives each queue one
// controller, so the mutex is never contended there.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/host/HostDevice.h"
#include "rp/runtime/Driver.h"
#include "rp/runtime/ThreadPool.h"
#include "rp/runtime/host/Dispatch.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

using namespace rp::runtime;
using namespace rp::runtime::host;

static constexpr size_t kAlignment = 64;

Expected<void *> rp::runtime::host::allocateAligned(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes)
    return resourceExhausted("cannot allocate " + std::to_string(bytes) +
                             " bytes of host memory: the size overflows");
  void *p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p)
    return resourceExhausted("cannot allocate " + std::to_string(bytes) +
                             " bytes of host memory; lower the batch or "
                             "free memory");
  return p;
}

namespace {

/// A fence: the number of records enqueued and of records whose work has
/// run. On a synchronous queue both move together; keeping them apart is
/// what a queue that runs behind its enqueuer would need.
class HostEvent final : public Event {
public:
  explicit HostEvent(uint32_t device) : device(device) {}

  bool query() override {
    std::lock_guard<std::mutex> lock(mutex);
    return completed == recorded;
  }
  Status synchronize() override {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return completed == recorded; });
    return Status::ok();
  }
  /// A record whose preceding work has all run.
  void markRecorded() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      completed = ++recorded;
    }
    changed.notify_all();
  }

  const uint32_t device;

private:
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0;
  uint64_t completed = 0;
};

} // namespace

namespace rp::runtime::host {

class HostQueue final : public Queue {
public:
  HostQueue(HostDeviceImpl &device, QueueKind kind)
      : device(device), kind(kind) {}

  uint32_t getDevice() const override;
  QueueKind getKind() const override { return kind; }
  int getPriority() const override { return queuePriority(kind); }
  Status copy(void *dst, const void *src, size_t bytes, CopyKind kind) override;
  Status launch(const Plan &plan, uint32_t program,
                const BufferAddresses &buffers) override;
  Status record(Event &event) override;
  Status wait(Event &event) override;
  Status synchronize() override {
    // Taking the lock waits for a command another thread is running.
    std::lock_guard<std::mutex> lock(order);
    return Status::ok();
  }
  bool timeCalls() override {
    std::lock_guard<std::mutex> lock(order);
    timing = kind == QueueKind::compute;
    return timing;
  }
  void takeCallTimes(std::vector<CallTime> &out) override {
    std::lock_guard<std::mutex> lock(order);
    out.insert(out.end(), calls.begin(), calls.end());
    calls.clear();
  }

private:
  /// `event` as this backend's, or an error naming the queue.
  Expected<HostEvent *> own(Event &event, const char *what);
  std::string name() const;

  HostDeviceImpl &device;
  const QueueKind kind;
  std::mutex order;
  /// timeCalls: each call's wall time, kept until taken.
  bool timing = false;
  std::vector<CallTime> calls;
};

class HostDeviceImpl final : public Device {
public:
  HostDeviceImpl(uint32_t index, unsigned threads)
      : index(index), threads(threads) {
    for (int k = 0; k < kNumQueueKinds; ++k)
      queues[k] = std::make_unique<HostQueue>(*this, QueueKind(k));
  }

  uint32_t getIndex() const override { return index; }
  Expected<void *> allocate(size_t bytes) override {
    Expected<void *> p = allocateAligned(bytes);
    if (!p)
      return Status(p.getStatus().getCode(), "device " + std::to_string(index) +
                                                 ": " +
                                                 p.getStatus().getMessage());
    std::lock_guard<std::mutex> lock(sizesLock);
    sizes[*p] = bytes;
    inUse += bytes;
    return p;
  }
  void deallocate(void *memory) override {
    if (!memory)
      return;
    {
      std::lock_guard<std::mutex> lock(sizesLock);
      auto it = sizes.find(memory);
      if (it != sizes.end()) {
        inUse -= it->second;
        sizes.erase(it);
      }
    }
    std::free(memory);
  }
  /// Every allocation goes back to the C library at once: nothing is kept.
  MemoryUse getMemoryUse() const override {
    std::lock_guard<std::mutex> lock(sizesLock);
    return {inUse, inUse};
  }
  bool isHostAccessible() const override { return true; }
  Queue &getQueue(QueueKind kind) override {
    return *queues[static_cast<int>(kind)];
  }
  Expected<std::unique_ptr<Event>> createEvent() override {
    return std::unique_ptr<Event>(new HostEvent(index));
  }

  /// The compute workers, started on the first launch: a backend opened
  /// for an unstaged plan, which runs on the caller's pool, starts none.
  ThreadPool &getPool() {
    std::call_once(poolStarted,
                   [&] { pool = std::make_unique<ThreadPool>(threads); });
    return *pool;
  }

private:
  const uint32_t index;
  const unsigned threads;
  std::unique_ptr<HostQueue> queues[kNumQueueKinds];
  std::once_flag poolStarted;
  std::unique_ptr<ThreadPool> pool;
  /// The size of every live allocation, for getMemoryUse.
  mutable std::mutex sizesLock;
  std::unordered_map<void *, size_t> sizes;
  size_t inUse = 0;
};

} // namespace rp::runtime::host

uint32_t HostQueue::getDevice() const { return device.getIndex(); }

std::string HostQueue::name() const {
  return "device " + std::to_string(device.getIndex()) + " " + queueName(kind) +
         " queue";
}

Expected<HostEvent *> HostQueue::own(Event &event, const char *what) {
  auto *e = dynamic_cast<HostEvent *>(&event);
  if (!e)
    return invalidArgument(std::string("cannot ") + what + " on the host " +
                           name() + " an event of another backend");
  return e;
}

Status HostQueue::copy(void *dst, const void *src, size_t bytes, CopyKind) {
  if (bytes == 0)
    return Status::ok();
  if (!dst || !src)
    return invalidArgument("a copy of " + std::to_string(bytes) +
                           " bytes on the " + name() + " has a null pointer");
  std::lock_guard<std::mutex> lock(order);
  // memmove: a copy within one device may move bytes inside one buffer.
  std::memmove(dst, src, bytes);
  return Status::ok();
}

Status HostQueue::launch(const Plan &plan, uint32_t program,
                         const BufferAddresses &buffers) {
  if (Status s = checkLaunch(plan, program, buffers.size(), kind, name());
      s.failed())
    return s;
  std::lock_guard<std::mutex> lock(order);
  if (!timing)
    return host::runProgram(device.getPool(), plan, program, buffers);
  // One call at a time, each between two clock reads: the call runs on
  // this thread and the pool, so its wall time is the device's time.
  std::vector<size_t> one(1);
  for (size_t i = 0; i < plan.programs[program].calls.size(); ++i) {
    one[0] = i;
    auto start = std::chrono::steady_clock::now();
    if (Status s = host::runProgramCalls(device.getPool(), plan, program, one,
                                         buffers);
        s.failed())
      return s;
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    calls.push_back({&plan, program, uint32_t(i), ns});
  }
  return Status::ok();
}

Status HostQueue::record(Event &event) {
  Expected<HostEvent *> e = own(event, "record");
  if (!e)
    return e.getStatus();
  if ((*e)->device != device.getIndex())
    return invalidArgument("cannot record an event of device " +
                           std::to_string((*e)->device) + " on the " + name() +
                           "; record it on its own device's queues");
  std::lock_guard<std::mutex> lock(order);
  (*e)->markRecorded();
  return Status::ok();
}

Status HostQueue::wait(Event &event) {
  Expected<HostEvent *> e = own(event, "wait for");
  if (!e)
    return e.getStatus();
  // The queue is the enqueuing thread: blocking it holds back every later
  // command of the queue, as a stream wait does.
  std::lock_guard<std::mutex> lock(order);
  return (*e)->synchronize();
}

HostBackend::~HostBackend() = default;

Expected<std::unique_ptr<HostBackend>>
HostBackend::create(const BackendOptions &options) {
  if (options.devices == 0)
    return invalidArgument("the host backend needs at least one device");
  unsigned threads = options.threads
                         ? options.threads
                         : std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<HostBackend> backend(new HostBackend());
  backend->threadsPerDevice = std::max(1u, threads / options.devices);
  for (uint32_t d = 0; d < options.devices; ++d)
    backend->devices.push_back(
        std::make_unique<HostDeviceImpl>(d, backend->threadsPerDevice));
  return backend;
}

std::string HostBackend::describe() const {
  return "host, " + std::to_string(devices.size()) + " device(s) of " +
         std::to_string(threadsPerDevice) + " compute thread(s)";
}

uint32_t HostBackend::getNumDevices() const {
  return static_cast<uint32_t>(devices.size());
}

Device &HostBackend::getDevice(uint32_t index) { return *devices[index]; }

Expected<void *> HostBackend::allocateHost(size_t bytes) {
  return allocateAligned(bytes);
}

void HostBackend::deallocateHost(void *memory) { std::free(memory); }

void rp::runtime::host::registerDriver() {
  rp::runtime::registerDriver(driverOf<HostBackend>("host"));
}
