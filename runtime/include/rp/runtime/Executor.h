//===- Executor.h - running a plan's forward on the host --------*- C++ -*-===//
//
// The one-device forward executor: allocates every buffer of the plan,
// fills parameters from the weight files and constants from the plan, takes
// the model inputs, and runs the jobs in order, each program's kernel calls
// on the host kernel library. Buffers come from a Backend (Device.h): host
// buffers from its host allocator, those of device k from device k, once
// per run; the staged executor (Pipeline.h) runs on the same backend over
// the same buffers, and its kernel launches go through the same dispatch
// (host/Dispatch.h) as runProgram. A staged plan's device buffers live in
// one arena per device, packed by DeviceMemory.h so that buffers the plan
// orders one after the other share bytes; bytes shared on a host-accessible
// device start as NaNs, so reading what no job wrote shows in the results.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXECUTOR_H
#define RP_RUNTIME_EXECUTOR_H

#include "rp/runtime/Device.h"
#include "rp/runtime/DeviceMemory.h"
#include "rp/runtime/Npy.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/Safetensors.h"
#include "rp/runtime/ThreadPool.h"

#include <fstream>
#include <memory>

namespace rp::runtime {

struct ForwardOptions {
  /// Let device buffers the plan orders one after the other share bytes
  /// (planDeviceMemory); off, each buffer has its own.
  bool shareDeviceMemory = true;
  /// Load parameters and constants; off for the sim backend (createUnfilled).
  bool fill = true;
  /// Copies of every buffer (1 or 2): continuous execution runs pass p on
  /// slot p % 2, so two passes in flight never share bytes.
  unsigned slots = 1;
  /// Copies of the device arenas (0: one per slot; at most `slots`). 1
  /// with two slots: both slots' device buffers are the same bytes, and
  /// constants are filled once (host buffers keep a copy per slot); the
  /// pipeline executor then lets a device take up a pass only once all its
  /// queues are done with the pass before (Pipeline.h), which every device
  /// buffer being transient within a pass makes enough.
  unsigned arenaCopies = 0;
  /// Lets a pass run with its devices renamed (device k's buffers on device
  /// (k + shift) % G): every arena is sized for the largest device's
  /// layout. Off when a device buffer holds contents beyond one step (they
  /// would need a place on every device); rotates() says which.
  bool rotate = false;
};

/// Per buffer: a host buffer one allocation serves in every slot (frozen
/// weights and constants no pass writes).
std::vector<bool> hostBuffersSharedAcrossSlots(const Plan &plan);
/// The host bytes HostForward allocates for `plan`'s buffers in `slots`
/// slots (HostForward::allocatedHostBytes), known before allocating.
uint64_t hostBufferBytes(const Plan &plan, unsigned slots);

class HostForward {
public:
  /// Allocates the plan's buffers on `backend`, which must outlive this
  /// object and have the plan's devices, and loads parameters and constants.
  static Expected<std::unique_ptr<HostForward>>
  create(const Plan &plan, Backend &backend,
         const ForwardOptions &options = ForwardOptions());
  /// The same on a host backend of its own with the plan's device count and
  /// one compute thread per core (BackendOptions).
  static Expected<std::unique_ptr<HostForward>> create(const Plan &plan);
  /// Allocates the plan's buffers on `backend` and writes nothing to them:
  /// for the sim backend, whose memory is sizes only (no weight file is
  /// read, no input or parameter set).
  static Expected<std::unique_ptr<HostForward>>
  createUnfilled(const Plan &plan, Backend &backend);
  ~HostForward();

  HostForward(const HostForward &) = delete;
  HostForward &operator=(const HostForward &) = delete;

  /// Sets input `name` from `array`, converting between i32 and i64 ids and
  /// from f64/f32 data to the input's float type. The shape must match.
  /// `slot`: which copy of the buffers (ForwardOptions::slots).
  Status setInput(const std::string &name, const NpyArray &array,
                  unsigned slot = 0);
  /// Fills every input not set yet: ids uniform in their range, floats from
  /// N(0, 1), all from `seed`.
  Status setSyntheticInputs(uint64_t seed);
  /// Gives parameters that have no stored value their initial value:
  /// uniform in [-init_bound, init_bound] from `seed`, or zeros.
  Status initParameters(uint64_t seed);
  /// rp-run --init-weights random:SEED: every parameter made from the plan
  /// alone (RandomInit.h's rule: normal(0, 0.02) for matrices and
  /// embeddings, ones for norm scales, zeros for the rest), each from SEED
  /// and its name only, so any device count and thread count gives the same
  /// bytes. An unstored parameter that starts at zero (a LoRA B) stays so.
  Status randomParameters(ThreadPool &pool, uint64_t seed);
  /// Replaces parameters by name (rp-run --init-weights): every tensor of
  /// the file must name a parameter of the plan, with its shape.
  Status overrideParameters(const SafetensorsFile &file);
  /// Runs every job of an unstaged plan in order on host memory (a staged
  /// plan runs with PipelineExecutor).
  Status run(ThreadPool &pool);
  /// Runs program `index`'s kernel calls in order on `pool`; a failure names
  /// the program, the call and its op.
  Status runProgram(ThreadPool &pool, uint32_t index, unsigned slot = 0);
  /// The calls of program `index` listed in `calls`, in that order.
  Status runProgramCalls(ThreadPool &pool, uint32_t index,
                         const std::vector<size_t> &calls, unsigned slot = 0);
  /// Runs one job of the plan: its program, or its byte copies. Safe from
  /// several threads at once for jobs that touch disjoint buffers.
  Status runJob(ThreadPool &pool, const JobDesc &job);

  /// Buffer `index` as the host sees it; the data of a device buffer is
  /// readable only where the device isHostAccessible().
  TensorRef buffer(uint32_t index, unsigned slot = 0) const;
  TensorRef output(size_t i) const;
  /// Every buffer's address, by plan buffer index (kernel launches).
  const BufferAddresses &getAddresses() const { return storage; }
  /// The addresses of slot `slot` with the devices renamed by `shift`
  /// (0 unless rotates()).
  const BufferAddresses &getAddresses(unsigned slot, uint32_t shift) const {
    return tables[slot * numDevices() + (rotating ? shift : 0)];
  }
  unsigned getSlots() const { return slots; }
  /// Copies of the device arenas (ForwardOptions::arenaCopies): slot s's
  /// device buffers are those of copy s % getArenaCopies().
  unsigned getArenaCopies() const { return copies; }
  bool rotates() const { return rotating; }
  /// Why not, when renaming was asked for: the device buffer that holds
  /// contents beyond a step.
  const std::string &getRotationBlocker() const { return fixedBy; }
  /// Device bytes allocated for buffers, over all devices and copies of
  /// the arenas.
  uint64_t allocatedDeviceBytes() const;
  /// Per device, its bytes allocated for buffers, all copies together.
  std::vector<uint64_t> allocatedPerDevice() const;
  /// Host bytes allocated for slot `slot`'s buffers: slot 0 holds every
  /// host buffer, a later slot those no pass shares (what a pass writes,
  /// the trained weights and its inputs; not the frozen base or
  /// constants). rp-compile's host memory counts the same parts.
  uint64_t allocatedHostBytes(unsigned slot) const {
    return slot < hostBytes.size() ? hostBytes[slot] : 0;
  }
  /// Over every slot.
  uint64_t allocatedHostBytes() const {
    uint64_t total = 0;
    for (uint64_t bytes : hostBytes)
      total += bytes;
    return total;
  }
  Backend &getBackend() const { return *backend; }
  /// Where the device buffers live: arena sizes and offsets per device.
  const DeviceLayout &getLayout() const { return layout; }

private:
  HostForward(const Plan &plan, Backend &backend)
      : plan(plan), backend(&backend) {}
  /// Places buffer `index` where it lives (host buffers get an allocation
  /// of their own, device buffers their range of the device's arena) and
  /// fills it.
  Status allocateBuffer(uint32_t index, std::vector<std::ifstream> &files);
  /// Writes buffer `index`'s initial contents at `p` (on `device`, or the
  /// host when null).
  Status fillBuffer(uint32_t index, uint8_t *p, Device *device,
                    std::vector<std::ifstream> &files);
  uint32_t numDevices() const { return plan.devices; }

  const Plan &plan;
  /// Set when create(plan) opened the backend; freed after the buffers.
  std::unique_ptr<Backend> ownedBackend;
  Backend *backend;
  /// Slot 0's addresses, devices not renamed (tables[0]).
  BufferAddresses storage;
  /// Per slot and shift: every buffer's address (slot * devices + shift).
  std::vector<BufferAddresses> tables;
  DeviceLayout layout;
  /// Per copy and device (copy * devices + device): its arena (null when
  /// it has no buffers), and its size.
  std::vector<uint8_t *> arenas;
  std::vector<uint64_t> arenaSizes;
  unsigned slots = 1;
  unsigned copies = 1;
  bool rotating = false;
  std::string fixedBy;
  /// With renaming: each device buffer's offset in every arena.
  std::vector<uint64_t> placed;
  std::vector<bool> inputSet;
  /// Host buffers no pass writes (frozen weights, constants): one
  /// allocation serves every slot.
  std::vector<bool> sharedAcrossSlots;
  /// Per slot: the host bytes allocateBuffer allocated for it.
  std::vector<uint64_t> hostBytes;
  bool fill = true;
};

} // namespace rp::runtime

#endif // RP_RUNTIME_EXECUTOR_H
