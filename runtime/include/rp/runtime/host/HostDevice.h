//===- HostDevice.h - the device interface on CPU threads -------*- C++ -*-===//
//
// The host backend: every device is a set of CPU threads over host memory.
// A device's compute queue runs its kernels on the device's own ThreadPool
// (its share of the thread budget); a queue is the thread that enqueues on
// it, which runs each command before the enqueue returns. In the executor
// that thread is the queue's controller, so each device's copy queues are
// copy workers of their own and transfers overlap compute as a GPU's copy
// engines do. An event is a fence: since a host queue's work has run when
// its record is enqueued, a recorded event is complete, and a wait returns
// at once; the executor's host-side "recorded" signal is what orders it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HOST_HOSTDEVICE_H
#define RP_RUNTIME_HOST_HOSTDEVICE_H

#include "rp/runtime/Device.h"

namespace rp::runtime::host {

class HostDeviceImpl;

class HostBackend final : public Backend {
public:
  /// Opens `options.devices` host devices (at least one).
  static Expected<std::unique_ptr<HostBackend>>
  create(const BackendOptions &options);
  ~HostBackend() override;

  const char *getName() const override { return "host"; }
  std::string describe() const override;
  uint32_t getNumDevices() const override;
  Device &getDevice(uint32_t index) override;
  Expected<void *> allocateHost(size_t bytes) override;
  void deallocateHost(void *memory) override;

  /// The compute threads of each device: max(1, threads / devices).
  unsigned getThreadsPerDevice() const { return threadsPerDevice; }

private:
  HostBackend() = default;
  unsigned threadsPerDevice = 1;
  std::vector<std::unique_ptr<HostDeviceImpl>> devices;
};

/// Host memory as every host allocation of the runtime gets it: 64-byte
/// aligned (vector loads; no false sharing between buffers that different
/// workers write), rounded up to whole 64-byte units, at least one.
Expected<void *> allocateAligned(size_t bytes);

/// Registers the host driver ("host", Driver.h) with the runtime's registry;
/// the registry calls it the first time it is used.
void registerDriver();

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_HOSTDEVICE_H
