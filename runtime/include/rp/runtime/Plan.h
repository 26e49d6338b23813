//===- Plan.h - a validated .rpplan in memory -------------------*- C++ -*-===//
//
// loadPlan() reads a plan file and checks everything the executor will rely
// on, so that no index, size or type read later can be out of range: the
// identifier and schema version, the FlatBuffers structure (a truncated or
// corrupted file fails here), every buffer and program index, element
// counts against shapes, the kernel signature of every call, and the weight
// files (present, large enough). A bad plan is a Status naming what and
// where, never a crash.
//
// Jobs are checked apart (validatePlanJobs), in two layers: what makes a
// job safe to execute at all (checkPlanJobs: indices, copy ranges, which
// device's memory each job touches), and what makes a staged plan finish
// (checkPlanEvents: each event recorded once, no queue waiting forever).
// The executor itself relies on the first layer only, which lets tests run
// plans that fail the second and watch the watchdog catch them.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_PLAN_H
#define RP_RUNTIME_PLAN_H

#include "rp/contract/plan_generated.h"
#include "rp/runtime/Status.h"
#include "rp/runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rp::runtime {

/// The kernels: plan.fbs's OpKind as flatc generates it (the contract's
/// rp/contract/plan_generated.h), so that no list is copied by hand.
using OpKind = ::rp::plan::OpKind;
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::MAX) + 1;
const char *opKindName(OpKind op);

/// The queues of a device: plan.fbs's Queue as flatc generates it (compute,
/// weight_h2d, activation_h2d, d2h), so that no list is copied by hand.
using QueueKind = ::rp::plan::Queue;
inline constexpr int kNumQueueKinds =
    static_cast<int>(::rp::plan::Queue::MAX) + 1;
/// The schema's name: compute, weight_h2d, activation_h2d, d2h.
const char *queueName(QueueKind queue);

using JobKind = ::rp::plan::JobKind;

struct WeightFileDesc {
  std::string path;     ///< as written in the plan (relative)
  std::string resolved; ///< joined with the plan's folder
  uint64_t minSize = 0;
  uint64_t fingerprint = 0; ///< WeightFingerprint.h; 0: not recorded
  /// Absent, and loaded anyway (LoadOptions::allowMissingWeights): its
  /// parameters start as zeros until HostForward::randomParameters.
  bool missing = false;
};

struct WeightRangeDesc {
  uint32_t file = 0;
  uint64_t offset = 0;
  std::string param;
  bool trainable = false;
  bool stored = true;
  double initBound = 0.0;
};

struct BufferDesc {
  DType dtype = DType::f32;
  Shape shape;
  std::optional<WeightRangeDesc> weight;
  std::vector<uint8_t> constant; ///< empty unless the buffer is a constant
  std::string name;
  /// -1: host memory; k: the memory of device k.
  int32_t device = -1;

  bool onHost() const { return device < 0; }
  int64_t size() const { return numElements(shape); }
  size_t bytes() const { return size() * dtypeSize(dtype); }
};

struct KernelCallDesc {
  OpKind op = OpKind::add;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::string loc;
  /// Recomputes the forward inside a backward (plan.fbs).
  bool recompute = false;
};

struct ProgramDesc {
  std::string name;
  std::vector<KernelCallDesc> calls;
};

/// `bytes` bytes from buffer `src` at byte `srcOffset` to `dst` at
/// `dstOffset`.
struct CopyDesc {
  uint32_t src = 0;
  uint64_t srcOffset = 0;
  uint32_t dst = 0;
  uint64_t dstOffset = 0;
  uint64_t bytes = 0;
};

struct JobDesc {
  JobKind kind = JobKind::run;
  uint32_t program = 0; ///< kind run only
  uint32_t device = 0;
  QueueKind queue = QueueKind::compute;
  uint32_t microbatch = 0;
  std::vector<uint32_t> waits;
  std::vector<uint32_t> records;
  std::vector<CopyDesc> copies; ///< kind copy only
  int32_t stage = -1;
  std::string label;
  /// The compiler's estimate (ms from the step's start; 0: none).
  double predictedStartMs = 0, predictedMs = 0;
};

struct LoraDesc {
  int64_t rank = 0;
  double alpha = 0;
  std::string targets, modulesToSave;
  double dropout = 0;
};

struct BindingDesc {
  std::string name;
  uint32_t buffer = 0;
  int64_t limit = 0;
};

struct Plan {
  std::string path;
  uint32_t schemaVersion = 0;
  std::string producer;
  uint32_t devices = 1;
  uint32_t events = 0;
  uint32_t microbatches = 1;
  std::vector<WeightFileDesc> weightFiles;
  std::vector<BufferDesc> buffers;
  std::vector<ProgramDesc> programs;
  std::vector<JobDesc> jobs;
  std::vector<BindingDesc> inputs;
  std::vector<BindingDesc> outputs;
  /// Staged plans (plan.fbs): one training step over several devices, with
  /// host programs before and after the jobs (-1: none).
  bool staged = false;
  int32_t prologue = -1;
  int32_t epilogue = -1;
  std::string schedule;
  /// The hardware profile it was compiled for; empty in older plans.
  std::string hardware;
  /// Device shift from one pass to the next (plan.fbs); -1 in older plans
  /// (passShiftJobs derives it).
  int32_t passShift = -1;
  /// Per device, the compiler's planned peak bytes for the run, all passes
  /// in flight (plan.fbs); empty in older plans. What the runtime allocates
  /// per device must fit within it (checkArenasWithinPlan).
  std::vector<uint64_t> plannedPeakBytes;
  /// Passes a continuous run keeps in flight (1 or 2, plan.fbs); 0 in
  /// older plans, which run two and whose planned peak is one pass's.
  uint32_t passesInFlight = 0;
  /// Copies of the device arenas a continuous run allocates (1 or 2,
  /// plan.fbs); 0 in older plans: one per pass in flight (arenaCopies()).
  uint32_t arenaCopies = 0;
  /// rp-compile --tf32: the cuda device's f32 GEMMs may use TF32.
  bool tf32 = false;
  /// The LoRA settings compiled in (plan.fbs's LoraSettings; rank 0: none).
  LoraDesc lora;
  /// The file's bytes, for --describe=json.
  std::vector<uint8_t> raw;
};

struct LoadOptions {
  /// Run checkPlanEvents. Only tests of the executor's watchdog turn it off
  /// (rp-run --unchecked-events): a plan that fails it can stall.
  bool checkEvents = true;
  /// Accept a plan whose weight files are absent (rp-run --init-weights
  /// random: every parameter is made on the box from the seed).
  bool allowMissingWeights = false;
};

/// Reads and validates the plan at `path`.
Expected<Plan> loadPlan(const std::string &path,
                        const LoadOptions &options = LoadOptions());

/// "job #42 'B3 mb1'" (the label left out when empty), for messages.
std::string describeJob(const Plan &plan, size_t job);

/// What every executor relies on before it runs a job: devices, queues,
/// programs and copy ranges in range, and (staged plans) every buffer a job
/// touches in the memory of its device or, for copies, on the host.
Status checkPlanJobs(const Plan &plan);
/// What makes a staged plan's step finish: every event index in range and
/// recorded by exactly one job, and no queue waiting forever (the queues
/// are simulated; a stuck one is named with its job and event).
Status checkPlanEvents(const Plan &plan);
/// Both, as loadPlan runs them by default. Messages start with the plan's
/// path.
Status validatePlanJobs(const Plan &plan);
/// What a device checks before it launches program `program` of `plan` on
/// its queue `queue` (of kind `kind`) with `buffers` buffer addresses:
/// InvalidArgument naming the queue otherwise.
Status checkLaunch(const Plan &plan, uint32_t program, size_t buffers,
                   QueueKind kind, const std::string &queue);

/// `failure` of call `call` of `program`, its message prefixed with the
/// program, the call's index and op, and its location: what every device's
/// dispatch reports.
Status callFailed(const ProgramDesc &program, size_t call,
                  const Status &failure);

/// The plan as JSON (flatbuffers' rendering of plan.fbs, defaults included).
Expected<std::string> describePlanJson(const Plan &plan);

/// A human-readable table: one row per job with its program, device, queue
/// and call count, then inputs and outputs. Staged plans get a device x
/// slot grid instead: one line per (device, queue) with its job labels in
/// order, slot k of every line in the same column.
std::string describePlanGrid(const Plan &plan);

} // namespace rp::runtime

#endif // RP_RUNTIME_PLAN_H
