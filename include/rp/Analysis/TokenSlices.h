//===- TokenSlices.h - one sequence cut into token slices -------*- C++ -*-===//
//
// Token-level pipelining (TeraPipe, arXiv 2102.07988) inside the
// round-robin: a causal model's sequence cut into slices that the stage
// jobs run as microbatches, in order, so that one long sequence fills the
// pipeline. Slice j = [o, o + s) attends to the o + s keys before its end,
// so a later slice costs more than an earlier one of the same size, and a
// stage job keeps the keys and values of the slices before it.
//
// This analysis models a sliced step, the one rp-compile then writes and
// rp-run runs (docs/token-slices.md):
// - chooseSlices: TeraPipe's dynamic program. Given the time of a slice
//   (offset, size) and whether its working set fits, it picks the slice
//   sizes, in multiples of a grain, that minimise TeraPipe's latency of a
//   chain of J jobs, sum(t) + (J - 1) * max(t): for each candidate maximum
//   t*, the least sum of slices no slower than t*, the candidates in
//   increasing order until (J - 1) * t* plus the least sum of all exceeds
//   the best found. Exact on the grain's units.
// - sliceLayerCosts: a slice's per-layer costs: the layers' own costs at a
//   self-contained sequence of s tokens plus the o x s query-key pairs it
//   adds against the earlier slices (causal attention counts the lower
//   triangle, KernelCost.cpp, so the pairs of a whole sequence are the sum
//   of its slices').
// - sliceKernelsMs: the kernels the sliced plan adds to a slice's compute
//   (the prefix's concat, the key-gradient accumulator's slices and adds).
// - predictSlicedPlan: the plan of a partition with K slices per sequence
//   as microbatches: slices in order through the forward jobs, the tail
//   and the backward jobs in reverse slice order (a slice's key and value
//   gradients come from the later slices), each compute command timed and
//   sized by its slice, timed and memory-planned as predictPlan does.
// - insertKeptKeyTransfers (SliceTransfers.cpp): the copies of the kept
//   keys and values that rp-insert-transfers adds to a sliced schedule.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_TOKENSLICES_H
#define RP_ANALYSIS_TOKENSLICES_H

#include "rp/Analysis/PlanPrediction.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::rp {

/// `--token-slices K|auto|s1,s2,...`.
struct TokenSlicesSpec {
  enum class Kind { automatic, count, sizes };
  Kind kind = Kind::automatic;
  unsigned count = 0;
  std::vector<int64_t> sizes;
};

/// Parses the flag's value; fails with `error` on anything else (0, a
/// negative or empty size, trailing text).
FailureOr<TokenSlicesSpec> parseTokenSlices(llvm::StringRef text,
                                            std::string &error);

/// `count` slices of `tokens`, as even as whole tokens make them (the
/// first ones one token longer).
std::vector<int64_t> equalSlices(int64_t tokens, unsigned count);

/// TeraPipe's latency of slices whose times are `ms` through a chain of
/// `jobs` jobs: sum + (jobs - 1) * max.
double chainLatency(llvm::ArrayRef<double> ms, unsigned jobs);

/// What the dynamic program chooses over.
struct SliceSearch {
  int64_t tokens = 0;
  /// Slice boundaries fall on multiples of `grain` (or at the end).
  int64_t grain = 1;
  /// Jobs a slice runs through (TeraPipe's pipeline stages).
  unsigned jobs = 1;
  /// A slice's time per job at (offset, size).
  llvm::function_ref<double(int64_t, int64_t)> ms;
  /// Whether a slice at (offset, size) fits; null: all do.
  llvm::function_ref<bool(int64_t, int64_t)> fits;
};

struct SliceChoice {
  std::vector<int64_t> sizes;
  /// chainLatency of the slices' times.
  double latencyMs = 0;
};

/// TeraPipe's dynamic program; std::nullopt when no slicing fits.
std::optional<SliceChoice> chooseSlices(const SliceSearch &search);

/// Every slicing on the grain's units, for tests: 2^(units - 1) of them.
std::optional<SliceChoice> bruteForceSlices(const SliceSearch &search);

/// The grain that keeps the dynamic program to at most `units` units: the
/// smallest power of two of at least tokens / units.
int64_t sliceGrain(int64_t tokens, int64_t units = 128);

/// Per layer, what a token slice adds to the layer's costs at its own
/// size: the milliseconds per query-key pair of its causal attention
/// (forward, recompute, backward) and the bytes of keys and values per
/// token that a job keeps for the later slices.
struct SlicePairCosts {
  std::vector<double> forwardMs, recomputeMs, backwardMs;
  std::vector<int64_t> keyValueBytes;
  /// Per layer, its attention's keys and values as [batch, heads, dim]
  /// (the token dimension left out) and their element type: the shapes of
  /// the kernels a slice adds (sliceKernelsMs). Empty: none priced.
  struct Kept {
    int64_t batch = 1, heads = 1, dim = 1;
    unsigned elementBytes = 4;
    std::string dtype = "f32";
  };
  std::vector<std::vector<Kept>> kept;
};

/// The pair costs from the layers' attention kernels' times at `2h` and at
/// `h` tokens (LayerCost::attentionForwardMs, attentionBackwardMs): with
/// their time c0 + c2 n (n + 1) / 2 at n tokens, T(2h) - 2 T(h) is
/// c2 h^2 - c0 (c0, launch overhead, is small at the lengths slicing is for
/// and left out), clamped at 0.
SlicePairCosts fitPairCosts(llvm::ArrayRef<LayerCost> at2h,
                            llvm::ArrayRef<LayerCost> atH, int64_t h,
                            std::vector<int64_t> keyValueBytes);

/// The costs of slice [offset, offset + size) from the layers' costs at
/// `size` tokens (`self`): their times plus offset x size pairs.
std::vector<LayerCost> sliceLayerCosts(llvm::ArrayRef<LayerCost> self,
                                       const SlicePairCosts &pairs,
                                       int64_t offset, int64_t size);

/// The keys and values a job keeps at a slice's offset: a forward job its
/// layers' of the earlier slices; the tail and a backward job those and
/// their gradients, accumulated while the slices run in reverse.
int64_t keptKeyValueBytes(CommandKind kind, StageRange range,
                          const SlicePairCosts &pairs, int64_t offset);

/// One compute command of a job at `layers` (rp-lower-schedule's times).
double sliceComputeMs(const StageJob &job, llvm::ArrayRef<LayerCost> layers);

/// The kernels the sliced plan runs for slice `k` of `sizes` in a compute
/// of `job` (a forward-only one where `forwardOnly`: a forward job's or
/// the tail's sweep) beyond the layers at the slice's own size and its
/// pairs, per kept key or value of each layer in the job (pairs.kept), as
/// the exported plan has them (rp-slice-tokens, rp-autodiff,
/// StagedSlices.cpp): the forward's (and a backward's recompute's) concat
/// of the kept prefix and the slice's own; the backward's slices of the
/// concat's gradient, the read of the slice's own rows from the job's
/// key-gradient accumulator and the add of them, the prefix's gradient
/// padded into the accumulator (slice_grad) and added to it. Each at
/// timing::callMs (its launch included), as the sim times them. 0 for one
/// slice. `layersHoldPrefix`: the layer costs are the slice function's,
/// whose layers hold the concat (and the cost model its gradient): only
/// the accumulator's kernels, which the exporter adds.
double sliceKernelsMs(const StageJob &job, bool forwardOnly,
                      const SlicePairCosts &pairs,
                      llvm::ArrayRef<int64_t> sizes, unsigned k,
                      const HardwareProfile &hw, bool layersHoldPrefix = false);

struct SlicedPrediction {
  PlanPrediction plan;
  std::vector<int64_t> sizes;
  /// The most keys and values (and their gradients) one job keeps.
  int64_t keptBytes = 0;
  /// The bytes of one pass's activation and activation-gradient
  /// downloads: the host rows the exported plan holds for them (one per
  /// value handed between jobs and sequence), kept keys apart.
  int64_t hostRowBytes = 0;
};

/// Why `partition`'s tail cannot run as its tail jobs with `sequences`
/// sequences a step cut into `slices` slices each, or nothing. One job
/// always can. Two take alternate slices (each sequence's slices split
/// between them, as microbatches are for `--tail-jobs 2`), which needs a
/// tail that keeps no keys (`keepsKeys`, per layer: the head alone; a tail
/// layer's attention would read the earlier slices' keys, half of which
/// the other job made) and, with several sequences a step, an even slice
/// count (each job's slices alternate its double buffers across the
/// sequences).
std::optional<std::string> tailJobsRefusal(const Partition &partition,
                                           unsigned sequences, unsigned slices,
                                           llvm::ArrayRef<bool> keepsKeys);

/// The round-robin schedule of `partition` with every sequence cut into
/// `slices` slices run as microbatches (slice k of sequence m is microbatch
/// m * slices + k): forward jobs in slice order, the tail and backward
/// jobs last slice first (a slice's key and value gradients are summed
/// from the slices after it), and with `tailSweep` the tail's forward
/// command of each earlier slice before the last slice's fused one (the
/// keys and values of the tail's own layers; none where `keepsKeys`, per
/// layer, says the tail's layers keep none). A tail of two jobs takes
/// alternate slices, each job's last first (tailJobsRefusal says where it
/// cannot). `timeCommands` may set the
/// commands' times and sizes before they are reordered. Fails with `error`
/// for schedules and partitions that have no slice order.
FailureOr<Pipeline>
lowerSlicedSchedule(const Partition &partition,
                    llvm::ArrayRef<LayerCost> layers, ScheduleKind kind,
                    unsigned devices, unsigned microbatches, unsigned slices,
                    bool tailSweep, std::string &error,
                    llvm::function_ref<void(Pipeline &)> timeCommands = {},
                    llvm::ArrayRef<bool> keepsKeys = {});

/// The round-robin plan of `partition` with every sequence cut into the
/// slices whose costs are `slices` (in order; `mean`: the layers at the
/// mean slice, which the transfers are sized by). Fails with `error` for
/// schedules and partitions the model has no slice order for.
FailureOr<SlicedPrediction> predictSlicedPlan(
    const Partition &partition, llvm::ArrayRef<std::vector<LayerCost>> slices,
    llvm::ArrayRef<int64_t> sizes, llvm::ArrayRef<LayerCost> mean,
    const SlicePairCosts &pairs, const PlanTarget &target, std::string &error);

/// Adds to a sliced pipeline whose other transfers are in (insertTransfers)
/// the copies of the keys and values its jobs keep through host rows
/// (docs/token-slices.md, "The executing path"), `sizes` the slices of a
/// sequence (microbatch m is slice m mod K) and `keyValueBytes` per layer
/// the bytes of its post-RoPE keys and values per token (0: no attention):
/// - after each forward compute of a slice but the last (a forward job's,
///   or the tail's forward sweep's), a download of its layers' keys and
///   values of the slice (`d2hKeys`, size x bytes per token), behind the
///   compute's other downloads;
/// - before each compute of slice k > 0 of a job with such layers (every
///   kind: forward, the sweep, the fused tail, backward), an upload of its
///   layers' keys and values of slices 0 .. k - 1 (`h2dKeys`, offset x
///   bytes per token), ahead of its other uploads, after the downloads of
///   every one of those slices of its layers. Two in flight per device, as
///   the activations: an upload waits for the compute two places back, a
///   compute for the key download of the compute two places back.
/// False, with `error`, where a layer's keys of an earlier slice are made
/// by no forward command (a tail holding an attention without its sweep).
bool insertKeptKeyTransfers(Pipeline &pipeline, llvm::ArrayRef<int64_t> sizes,
                            llvm::ArrayRef<int64_t> keyValueBytes,
                            const HardwareProfile &hw, std::string &error);

} // namespace mlir::rp

#endif // RP_ANALYSIS_TOKENSLICES_H
