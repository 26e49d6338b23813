//===- SimDevice.h - the device interface on a virtual clock ----*- C++ -*-===//
//
// The sim backend runs the same executor as host and cuda, but nothing
// executes and nothing is allocated: device and host buffers are sizes
// (distinct fake addresses, never dereferenced), and every copy and launch
// is recorded as a command whose duration the hardware profile gives
// (rp/timing/Hardware.h: kernel calls from their FLOPs and bytes with the
// op kind's efficiency, copies from the link bandwidth per direction). A
// queue wait ties the queue's next command to the command before the
// event's latest record; events carry no time of their own.
//
// Times are resolved per step, once all of its commands are in
// (takeStep), by the discrete-event core the compiler also runs
// (rp/timing/Timeline.h), with the shared host links of the profile's
// gpus_per_link. Because the executor enqueues a device wait only after
// the matching record (two-level protocol), a step's command graph is the
// same whatever the order the controller threads ran in, and takeStep
// numbers commands by (device, queue, position): two runs give the same
// times to the bit.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_SIM_SIMDEVICE_H
#define RP_RUNTIME_SIM_SIMDEVICE_H

#include "rp/runtime/Device.h"
#include "rp/timing/Hardware.h"
#include "rp/timing/Timeline.h"

#include "rp/timing/Measured.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace rp::runtime::sim {

/// One recorded command.
struct SimCommand {
  uint32_t device = 0;
  QueueKind queue = QueueKind::compute;
  /// Its position on its queue within the step.
  uint64_t position = 0;
  /// The plan job it belongs to (Queue::beginJob); -1: none said.
  int64_t job = -1;
  double ms = 0;
  /// Bytes a copy moves (0 for launches and markers), and which way.
  uint64_t bytes = 0;
  CopyKind copy = CopyKind::hostToDevice;
  /// Of `ms`, the host's dispatch work (timing::Task::dispatchMs).
  double dispatchMs = 0;
  /// The host's work issuing its kernels, beside them
  /// (timing::Task::issueMs).
  double issueMs = 0;
  /// Indices, in the step's command list, of the commands it waits for.
  std::vector<unsigned> waits;
};

class SimQueue;
class SimDevice;

class SimBackend final : public Backend {
public:
  /// Opens options.devices devices timed on options.hardware (a shipped
  /// profile's name or a file); an unknown or broken profile is
  /// InvalidArgument saying why.
  static Expected<std::unique_ptr<SimBackend>>
  create(const BackendOptions &options);
  ~SimBackend() override;

  const char *getName() const override { return "sim"; }
  std::string describe() const override;
  uint32_t getNumDevices() const override;
  Device &getDevice(uint32_t index) override;
  Expected<void *> allocateHost(size_t bytes) override;
  void deallocateHost(void *) override {}

  const timing::HardwareModel &getHardware() const { return hw; }

  /// Forgets the commands so far: a new step starts, its queues empty.
  void beginStep();
  /// The commands enqueued since beginStep, ordered by (device, queue,
  /// position), with their waits renumbered to match.
  std::vector<SimCommand> takeStep();
  /// The timing core's graph of `commands` (takeStep's).
  timing::Graph graphOf(const std::vector<SimCommand> &commands) const;

  /// The time of program `program` of `plan`: the sum of its calls', or,
  /// with measured times set, the measured time of the layers it computes
  /// (rp/timing/Measured.h; programs the file does not time keep the
  /// model's); then the host's work (HardwareModel::programMs).
  double programMs(const Plan &plan, uint32_t program);
  /// Of programMs, the host's dispatch work (the profile's moe_host_us per
  /// routing call), which shares the host's interpreters when the profile
  /// says how many (host_interpreters).
  double programDispatchMs(const Plan &plan, uint32_t program) const;
  /// The host's work issuing the program's kernels (the profile's
  /// kernel_host_us per call), beside them: programMs is the dispatch plus
  /// the larger of the kernels' time and this.
  double programIssueMs(const Plan &plan, uint32_t program) const;
  /// Per-layer measured times that replace the model's (rp-run --measured).
  void setMeasured(timing::MeasuredTimes times) { measured = std::move(times); }
  /// Times on `model` instead of the profile it was opened with (the ends
  /// of the profile's unknown inputs, rp/timing/Assumptions.h).
  void setHardware(timing::HardwareModel model) {
    hw = std::move(model);
    programCache.clear();
  }

private:
  friend class SimQueue;
  friend class SimDevice;
  SimBackend() = default;
  /// A fresh fake address for `bytes` bytes (never dereferenced).
  void *fakeAddress(size_t bytes);

  timing::HardwareModel hw;
  std::vector<std::unique_ptr<SimDevice>> devices;
  std::mutex mutex;
  uint64_t step = 1;
  uintptr_t nextAddress = 0x10000;
  std::vector<SimCommand> commands;
  std::map<std::pair<const Plan *, uint32_t>, double> programCache;
  std::optional<timing::MeasuredTimes> measured;
};

/// Registers the sim driver ("sim", Driver.h) with the runtime's registry; the
/// registry calls it the first time it is used.
void registerDriver();

} // namespace rp::runtime::sim

#endif // RP_RUNTIME_SIM_SIMDEVICE_H
