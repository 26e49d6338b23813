//===- Device.h - the device interface the executor talks to ----*- C++ -*-===//
//
// The staged executor (Pipeline.h) runs one plan on several devices through
// this interface only, so that the host, cuda and sim devices share every
// piece of logic above it. It is CUDA-shaped on purpose: a Queue is a
// stream, an Event a cudaEvent, Device::allocate a device allocation,
// Backend::allocateHost pinned host memory; the host device implements the
// same with CPU threads (host/HostDevice.h), the sim device with a virtual
// clock.
//
// The semantics are CUDA's, and every backend keeps them:
//  - work enqueued on one queue runs in enqueue order; a method returning
//    does not mean the work is done (the host device runs it before
//    returning; cuda returns at once), only Queue::synchronize and
//    Event::synchronize say that;
//  - Queue::wait(e) orders later work of the queue after the work before
//    e's latest Queue::record, which may be on another queue or another
//    device; waiting for an event never recorded orders nothing. That is
//    why the executor pairs every device-side wait with a host-side
//    "recorded" signal (RoundPipe's two-level protocol,
//    reference/roundpipe.md §2.6): a queue waits for an event only after its
//    record has been enqueued;
//  - an event is created on, and recorded on queues of, one device; any
//    queue of any device may wait for it.
//
// Errors are Status values; an enqueue may fail at once (bad arguments, or
// on the host device the work itself) or report later at a synchronize.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_DEVICE_H
#define RP_RUNTIME_DEVICE_H

#include "rp/runtime/Plan.h"
#include "rp/runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rp::runtime {

/// Where each plan buffer lives, by buffer index: in host memory for host
/// buffers, in its device's memory for device buffers. What a kernel launch
/// resolves its calls' buffer indices with.
using BufferAddresses = std::vector<uint8_t *>;

/// The direction of a byte copy, as cudaMemcpyKind names it.
enum class CopyKind : uint8_t { hostToDevice, deviceToHost, deviceToDevice };

/// The priority the plan's queues run at, higher first: stage-boundary
/// activations are on the critical path of the next device, a weight upload
/// is prefetched a whole stage ahead (reference/roundpipe.md §2.5; issue 8).
inline int queuePriority(QueueKind kind) {
  return kind == QueueKind::activation_h2d ? 1 : 0;
}

/// A marker in a queue's work (cudaEvent_t). Made by Device::createEvent.
class Event {
public:
  virtual ~Event() = default;
  /// True once the work before the latest record has finished (and for an
  /// event never recorded).
  virtual bool query() = 0;
  /// Blocks the calling thread until query() would be true.
  virtual Status synchronize() = 0;
};

/// One kernel call's time on its device (Queue::timeCalls): call `call` of
/// program `program` of `plan`.
struct CallTime {
  const Plan *plan = nullptr;
  uint32_t program = 0, call = 0;
  int64_t ns = 0;
};

/// One ordered queue of a device (a stream).
class Queue {
public:
  virtual ~Queue() = default;
  virtual uint32_t getDevice() const = 0;
  virtual QueueKind getKind() const = 0;
  /// queuePriority(getKind()) unless the backend has fewer levels.
  virtual int getPriority() const = 0;

  /// Copies `bytes` bytes from `src` to `dst`; the pointers are host memory
  /// (Backend::allocateHost) or memory of this queue's device, as `kind`
  /// says. The two ranges may overlap only within one device buffer.
  virtual Status copy(void *dst, const void *src, size_t bytes,
                      CopyKind kind) = 0;
  /// Runs program `program` of `plan`, its kernel calls in order, with every
  /// buffer the calls name at `buffers[index]`. Compute queues only.
  virtual Status launch(const Plan &plan, uint32_t program,
                        const BufferAddresses &buffers) = 0;
  /// Marks this point of the queue in `event`, which must be of this
  /// queue's device.
  virtual Status record(Event &event) = 0;
  /// Later work of this queue waits for `event`'s latest record.
  virtual Status wait(Event &event) = 0;
  /// Blocks the calling thread until all work enqueued so far has run;
  /// returns the first error that work reported.
  virtual Status synchronize() = 0;
  /// Says that the commands enqueued next, up to the next call, are plan
  /// job `job`'s. Only a backend that reports per job needs it (sim: the
  /// virtual time of each job, for traces); the others ignore it.
  virtual void beginJob(uint32_t job) { (void)job; }
  /// Asks the queue to time each job (beginJob to the next) on the device
  /// itself, for traces; false: it cannot (the default), and the executor
  /// keeps the host's enqueue spans. cuda: cudaEvents around each job.
  virtual bool timeJobs() { return false; }
  /// The device's span of the oldest timed job not yet taken, which must
  /// be `job`, in std::chrono::steady_clock nanoseconds (since its epoch);
  /// waits for the job to finish if `wait`, else takes it only if it has
  /// (a failed pass's jobs may never run). False: not measured.
  virtual bool takeJobTime(uint32_t job, bool wait, int64_t &startNs,
                           int64_t &endNs) {
    (void)job;
    (void)wait;
    (void)startNs;
    (void)endNs;
    return false;
  }
  /// Asks the queue to time each kernel call of the programs it runs from
  /// now on (rp-run --profile: a measured profile's "ops"), on the device
  /// itself; false: it cannot (the default). Compute queues only. Timing
  /// costs the host a clock read around each call, cuda two events and no
  /// CUDA graph replay; runs without --profile pay nothing.
  virtual bool timeCalls() { return false; }
  /// Appends the calls timed since the last take to `out`, waiting for the
  /// device to finish them.
  virtual void takeCallTimes(std::vector<CallTime> &out) { (void)out; }
};

/// What a device's allocator holds, in bytes.
struct MemoryUse {
  /// Handed out by Device::allocate and not yet deallocated.
  size_t inUse = 0;
  /// Held from the system (the driver, on cuda): in use, or kept by the
  /// allocator for reuse. What the device's memory really carries.
  size_t reserved = 0;
};

/// One device: its memory, its four queues, its events.
class Device {
public:
  virtual ~Device() = default;
  virtual uint32_t getIndex() const = 0;
  /// `bytes` bytes (at least one alignment unit for 0) of this device's
  /// memory, aligned to at least 64 bytes, uninitialized.
  virtual Expected<void *> allocate(size_t bytes) = 0;
  /// Returns memory from allocate(); null is ignored. The caller makes sure
  /// no queued work still uses it.
  virtual void deallocate(void *memory) = 0;
  /// The allocator's bookkeeping, so that tests and tools can see that
  /// freed memory is reused rather than requested again. Zeros where a
  /// backend does not track it.
  virtual MemoryUse getMemoryUse() const { return {}; }
  /// Whether the host may read and write this device's memory directly
  /// (the host device: yes; cuda: no, go through a copy).
  virtual bool isHostAccessible() const = 0;
  /// The device's queue of `kind`; lives as long as the device.
  virtual Queue &getQueue(QueueKind kind) = 0;
  virtual Expected<std::unique_ptr<Event>> createEvent() = 0;
};

struct BackendOptions {
  /// How many devices to open.
  uint32_t devices = 1;
  /// The host's thread budget (rp-run --threads): the host device gives
  /// each device max(1, threads / devices) compute threads. 0: one per
  /// hardware thread.
  unsigned threads = 0;
  /// sim: the hardware profile commands are timed on, a shipped name
  /// (profiles/) or a JSON file's path; empty: the tools' one default
  /// (rp::timing::kDefaultHardware, host).
  std::string hardware;
  /// cuda: f32 GEMMs round their inputs to TF32 on the tensor cores
  /// (rp-run --tf32; off: f32 products as the host computes them).
  bool tf32 = false;
};

/// A set of devices of one kind and the host memory they copy to and from.
class Backend {
public:
  virtual ~Backend() = default;
  /// "host", "cuda", "sim".
  virtual const char *getName() const = 0;
  /// One line for progress output: the devices and their resources.
  virtual std::string describe() const = 0;
  virtual uint32_t getNumDevices() const = 0;
  virtual Device &getDevice(uint32_t index) = 0;
  /// Host memory the devices copy to and from (pinned on cuda), aligned to
  /// at least 64 bytes; plan buffers with device -1 live there.
  virtual Expected<void *> allocateHost(size_t bytes) = 0;
  virtual void deallocateHost(void *memory) = 0;
};

// The registry of the backends (lib/drivers/, Driver.h):

/// The backends built with this runtime, in the order rp-run lists them,
/// the loadable ones (cuda) included whether or not their library loads.
std::vector<std::string> availableBackends();

/// Opens backend `name` with `options`. An unknown name is InvalidArgument
/// listing the available ones; a known one not built, whose library cannot
/// be loaded, or without a device to run on, is Unavailable saying why and
/// what to do.
Expected<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                                 const BackendOptions &options);

} // namespace rp::runtime

#endif // RP_RUNTIME_DEVICE_H
