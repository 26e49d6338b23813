//===- Pipeline.h - stage jobs on devices, and their transfers --*- C++ -*-===//
//
// A pipeline is a partition lowered to a schedule: stage jobs bound to
// devices, the order of their compute on each device, and (after
// insertTransfers) every copy between host and device that the compute
// needs. It is the one model behind the partitioner's objective, the
// rp-lower-schedule and rp-insert-transfers passes, memory planning and the
// plan timing, so all of them see the same commands.
//
// Schedules:
// - round-robin (RoundPipe): stage job n runs on device n mod G and loops
//   over all M microbatches; each job uploads its own weights, so a device
//   holds two weight sets (the running and the prefetched one);
// - gpipe, 1f1b, interleaved-1f1b: stages bound to devices once (stage s on
//   device s mod G; interleaved has two stages per device), forward and
//   backward of a stage on the same device, ordered as GPipe, 1F1B and
//   Megatron's interleaved 1F1B order them; looped-bfs (RoundPipe's
//   strongest static baseline): floor(L / G) stages per device (stage s
//   on device s mod G), each device runs every microbatch of its first
//   stage, then of its next, then the backwards in reverse stage order. Weights
//   stay resident when every stage of a device fits, and are uploaded once per
//   step and their gradients downloaded otherwise.
// In every schedule the last stage is the fused tail (forward, loss and
// backward of one microbatch in one job) and backward recomputes its
// forward from the saved stage input.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PIPELINE_H
#define RP_ANALYSIS_PIPELINE_H

#include "rp/Analysis/HardwareProfile.h"
#include "rp/Analysis/Partition.h"
#include "rp/Analysis/ScheduleTiming.h"
#include "rp/Dialect/RP/RPOps.h"

#include <algorithm>
#include <optional>

namespace mlir::rp {

/// ScheduleKind is the dialect's enum (RPAttrs.td), so that the IR, the
/// options and this model name a schedule the same way.
/// `round-robin`, `gpipe`, `1f1b`, `interleaved-1f1b`, `looped-bfs`.
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
llvm::StringRef scheduleKindName(ScheduleKind kind);

/// The microbatches per step when none are asked for (`microbatches=0`):
/// one on one device (nothing to overlap), else devices + 1, so that
/// round-robin's job n+G finds its device free. rp-partition and
/// rp-print-partition both take it from here.
inline unsigned defaultMicrobatches(unsigned devices) {
  return devices == 1 ? 1 : devices + 1;
}

/// Weights larger than this are uploaded in several chunks, so that
/// activation copies are never queued behind one huge transfer.
constexpr int64_t kWeightChunkBytes = int64_t(256) << 20;

/// Bytes the host streams per trainable parameter for one update (the
/// timing core's figure, rp/timing/Hardware.h: AdamW's 28 and the gradient
/// and weight conversions around it).
constexpr double kOptimizerBytesPerParam =
    ::rp::timing::kOptimizerBytesPerParam;

struct StageJob {
  CommandKind kind; ///< forward, tail or backward
  StageRange range;
  unsigned device = 0;
  /// Jobs that share a weight set (forward and backward of one stage in
  /// the static schedules) upload it once.
  unsigned weightSet = 0;
  /// A backward that recomputes one layer at a time (Partition::layerGrain).
  bool layerGrain = false;
  /// A backward that recomputes nothing: the shallow half of a tail split
  /// by layers (Partition::tailPairAt) keeps its forward's intermediates
  /// and runs on its forward's device.
  bool keepsForward = false;
};

struct Pipeline {
  ScheduleKind kind = ScheduleKind::roundRobin;
  unsigned devices = 1, microbatches = 1;
  std::vector<StageJob> jobs;
  /// No weight uploads or gradient downloads: every device keeps its
  /// stages' weights (static schedules whose weights fit).
  bool residentWeights = false;
  /// Steps laid out back to back (a continuous run, SteadyState.h): the
  /// jobs are `steps` copies of one step's, step k's after step k-1's, and
  /// every step ends in its own optimizer step.
  unsigned steps = 1;
  /// Continuous runs: step k's weight uploads wait for the optimizer of
  /// step k-1 (sync) or k-2 (async: the weights are one step stale, so the
  /// next step's jobs overlap this step's update).
  bool syncOptimizer = false;
  /// Round-robin: how many devices the next pass's jobs move on from this
  /// pass's (pass p's job n runs on (device of job n + p * passShift) mod
  /// G); -1 is the job counter carrying on (the stage job count).
  int passShift = -1;
  /// Continuous runs: passes in flight (buffer slots), 2 unless forced to
  /// 1 (rp-plan-memory), where a pass is staged after the one before has
  /// finished.
  unsigned passesInFlight = 2;
  /// Continuous runs: copies of the device arenas, one per pass in flight
  /// (0, or 2), or 1 where the memory plan finds that two do not fit
  /// (rp-plan-memory): the passes in flight share one set, and a device
  /// takes up pass p+1's work once its own part of pass p is done.
  unsigned arenaCopies = 0;
  /// Token slices, where the kept keys' copies are to be timed with the
  /// rest (predictSlicedPlan): the slices of a sequence (microbatch m is
  /// slice m mod K) and per layer its keys' and values' bytes per token.
  /// insertTransfers then adds their copies (insertKeptKeyTransfers), so
  /// the steady state and the memory plan of every copy of the pipeline
  /// carry them. Empty: none (rp-insert-transfers adds them itself).
  std::vector<int64_t> keptKeySlices, keptKeyBytes;
  /// Token slices: the tokens of a sequence in the layer costs
  /// insertTransfers is given, where those are the whole sequence's (the
  /// IR passes read @main's); each activation or activation-gradient copy
  /// of slice k is then keptKeySlices[k] / sliceCostTokens of the costs'
  /// bytes, the slice's own, as the exporter writes it. 0: the costs'
  /// bytes as they are (predictSlicedPlan's costs are the mean slice's,
  /// and it sizes each slice's copies itself).
  int64_t sliceCostTokens = 0;
  Schedule schedule;

  /// The device shift from one pass to the next, in [0, devices): 0 for
  /// static schedules, which keep their devices.
  unsigned shiftPerPass() const {
    if (kind != ScheduleKind::roundRobin)
      return 0;
    unsigned s = passShift >= 0 ? unsigned(passShift) : devicesPerStep();
    return s % std::max(1u, devices);
  }

  unsigned jobsPerStep() const { return jobs.size() / std::max(1u, steps); }
  /// The devices the job counter moves on per step: one per stage job but
  /// a tail pair's backward half, which runs on its forward half's.
  unsigned devicesPerStep() const {
    unsigned n = 0;
    for (unsigned j = 0; j < jobsPerStep(); ++j)
      n += !jobs[j].keepsForward;
    return n;
  }
};

/// Working memory of one microbatch of a stage job: a forward keeps one
/// layer's intermediates with its input and output; a stage-grain backward
/// (and the tail) keeps, for every layer not yet swept, what its reverse
/// sweep reads of its forward, beside the running layer's own forward or
/// sweep values; a layer-grain backward keeps the saved inputs of the
/// stage's inner layers and one layer's recompute + backward body (each
/// layer's figures from BackwardLiveness.h; each layer's forward peak where
/// no sweep could be measured). A backward or the tail also holds its
/// microbatch's weight gradients until it adds them to the weight set's
/// accumulators. `savedAsInputs`: a layer-grain backward's saved inputs
/// are its input buffers' (round-robin uploads them), not its work.
int64_t jobWorkBytes(CommandKind kind, StageRange range,
                     llvm::ArrayRef<LayerCost> layers, bool layerGrain = false,
                     bool savedAsInputs = false);

/// Stage sizes for the static schedules: `stages` contiguous stages whose
/// slowest backward job is the least a linear partition makes it (the
/// earliest cut among exact ties); the last one is the fused tail.
Partition staticPartition(llvm::ArrayRef<LayerCost> layers, unsigned stages);

/// Cuts whose slowest stage is within this share of the least one tie
/// for the static schedules: the least bottleneck is a bound, not the
/// step, and layer times that differ in their last digits (the model's
/// gradient adds beside measured layers) only order ties by rounding.
constexpr double kStaticTie = 0.01;
/// A static cut replaces another only where its step is shorter by more
/// than this share: both come from one deterministic timing, so the
/// margin only absorbs its last digits.
constexpr double kStaticStepTie = 1e-6;

/// The static schedules' stages as rp-partition cuts them: among the cuts
/// of staticStageCount stages whose slowest stage ties with
/// staticPartition's (kStaticTie), the one with the shortest predicted
/// step of `kind` on `devices` x `microbatches` (staticStepMs); the
/// starts are staticPartition's cut, the same bound cut latest-first and
/// the evenest cuts under the tie, then a layer moves from one stage to
/// another while that shortens the step. Deterministic. staticPartition's cut
/// where the schedule cannot run it (its error is lowerSchedule's).
Partition staticPartitionForStep(llvm::ArrayRef<LayerCost> layers,
                                 ScheduleKind kind, unsigned devices,
                                 unsigned microbatches,
                                 const HardwareProfile &hw);

/// The step of `partition` under static schedule `kind`, as rp-compile
/// plans it (weights uploaded every step, transfers inserted, one step
/// timed with the backward's recompute split as the plan exports it);
/// std::nullopt where the schedule cannot run the partition.
std::optional<double> staticStepMs(const Partition &partition,
                                   llvm::ArrayRef<LayerCost> layers,
                                   ScheduleKind kind, unsigned devices,
                                   unsigned microbatches,
                                   const HardwareProfile &hw);

/// How many stages a schedule cuts for `devices` devices (static
/// schedules: one per device, two for interleaved, at most one per layer).
unsigned staticStageCount(ScheduleKind kind, unsigned devices, unsigned layers);

/// Binds the jobs of `partition` to devices and orders their compute
/// commands (one per job and microbatch) with the data dependencies
/// between them. Fails with a message when the schedule cannot run this
/// partition (interleaved-1f1b needs a multiple of the device count of
/// microbatches and two stages per device).
FailureOr<Pipeline> lowerSchedule(const Partition &partition,
                                  llvm::ArrayRef<LayerCost> layers,
                                  ScheduleKind kind, unsigned devices,
                                  unsigned microbatches, std::string &error);

/// Adds the copies the compute needs, in the queues' order: weight uploads
/// in chunks of at most kWeightChunkBytes (round-robin: after the job two
/// turns back on the device has finished and its gradients are
/// downloaded, so two weight sets are resident); activations, saved inputs and
/// activation gradients through host memory (D2H on the producing device, H2D
/// on the consuming one, at most two inputs in flight per device); weight
/// gradients D2H once per weight set after its last microbatch; then the host
/// optimizer step, after every gradient download.
void insertTransfers(Pipeline &pipeline, llvm::ArrayRef<LayerCost> layers,
                     const HardwareProfile &hw);

/// `schedule` (with transfers) as the plan runs it, for timing: a backward
/// whose activation gradient comes by upload is exported as two jobs
/// (docs/pipeline.md), its recompute gated on the other uploads and the
/// rest on the gradient's, so each such command becomes two: the
/// recompute (its layers' recomputeMs) and, after it in its queue, the
/// rest, which every command that waited for the backward waits for.
Schedule recomputeSplit(const Schedule &schedule, const Pipeline &pipeline,
                        llvm::ArrayRef<LayerCost> layers);

/// lowerSchedule + insertTransfers for the round-robin schedule, which
/// cannot fail.
Schedule roundRobinSchedule(const Partition &partition,
                            llvm::ArrayRef<LayerCost> layers,
                            const HardwareProfile &hw, unsigned devices,
                            unsigned microbatches);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PIPELINE_H
