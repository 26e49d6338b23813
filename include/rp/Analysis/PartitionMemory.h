//===- PartitionMemory.h - partitions that fit long sequences --*- C++ -*-===//
//
// The partitioner's memory objective. rp's step-time search cuts large
// stages (forward stages of several layers, multi-layer backward stages),
// whose memory plans stop fitting the device long before lean stages do: a
// backward stage at stage grain keeps every recomputed layer's
// intermediates, the fused tail every tail layer's. When the step-time
// search's partition does not fit, this search looks among lean
// partitions, a short tail t, backward stages of b layers and forward
// stages of f layers, for the fastest whose memory plan fits: for each
// (t, b) from the leanest up, the longest forward stages that fit (their
// peak grows with f, so a galloping then binary search over f), each timed
// as the step-time search times partitions. Every fit is the exact memory
// plan of the round-robin schedule (fitsDeviceMemory), so a graph that
// fits with the leanest partition is never refused.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PARTITIONMEMORY_H
#define RP_ANALYSIS_PARTITIONMEMORY_H

#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PartitionSearch.h"

#include <optional>

namespace mlir::rp {

/// The memory plan's highest device peak of `p`'s round-robin schedule,
/// and its staged host bytes (the pinned staging buffers).
struct DevicePeak {
  int64_t bytes = 0;
  unsigned device = 0;
  bool fits = false;
  int64_t hostBytes = 0;
  /// Whether the buffers were placed (a memory plan made): false where a
  /// bound alone answered, `bytes` and `hostBytes` then lower bounds.
  bool planned = false;
};
/// With `hostLimit` > 0 a plan whose staged host bytes are sure to be
/// over it, or a device's peak over the budget (liveBytesBounds), is not
/// placed: it does not fit, and its peaks are the bounds. The hold asks
/// so: most of its moves fail one of the two, and placing is most of a
/// plan's cost.
///
/// With `skipOver` >= 0 a plan whose device bound is over the budget and
/// at least `skipOver` is not placed either (fit checks pass 0; a search
/// that keeps the least peak passes the least so far, which such a plan
/// cannot lower): what a fit needs is decided by the bound where it can
/// be, the same answer as a placed plan's.
///
/// `planned`, where given, gets the plan's pipeline (lowered, transfers in
/// issue order) and its placed memory plan when every pool was placed
/// (DevicePeak::planned): what planMemory would give for it.
DevicePeak devicePeak(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                      const SearchTarget &target, int64_t hostLimit = 0,
                      int64_t skipOver = -1,
                      std::pair<Pipeline, MemoryPlan> *planned = nullptr);

/// What devicePeak finds of one partition, none of which depends on the
/// host limit it is asked under: the limit decides only how far it goes
/// (the bounds, the host pool placed, every pool placed). A caller that
/// asks one partition under many limits (the host budget's hold, whose
/// limit falls every round) keeps these and answers each limit from them
/// (peakUnder), placing again only where a higher limit needs more.
struct PeakFacts {
  /// Whether anything was learnt yet, and whether the partition lowered.
  bool known = false, lowered = false;
  /// liveBytesBounds: the fullest device's bound, the host pool's, where
  /// a limit asked for them (`bounded`).
  bool bounded = false;
  int64_t deviceBound = 0, hostBound = 0;
  /// The host pool placed, where it was.
  std::optional<int64_t> stagedHostBytes;
  /// Every pool placed, where they were.
  std::optional<DevicePeak> placed;
};

/// devicePeak(p, layers, target, hostLimit) from `facts` where they hold
/// enough to answer it; std::nullopt where not (learnPeak then).
std::optional<DevicePeak> peakUnder(const PeakFacts &facts, int64_t hostLimit,
                                    int64_t budget, int64_t skipOver = -1);

/// Adds to `facts` what devicePeak(p, layers, target, hostLimit) needs
/// (the same steps in the same order), and returns its answer. `p` must be
/// the partition `facts` were learnt of. devicePeak is this with no
/// facts (one body), which can hand back its placed plan
/// (PeakFactsAnswerEveryLimitAsDevicePeak holds both to planMemory's).
DevicePeak learnPeak(PeakFacts &facts, const Partition &p,
                     llvm::ArrayRef<LayerCost> layers,
                     const SearchTarget &target, int64_t hostLimit,
                     int64_t skipOver = -1);

struct MemorySearchResult {
  /// The fastest lean partition that fits, when one does.
  std::optional<Partition> fastest;
  /// Otherwise the partition with the least peak tried, and that peak.
  Partition leastPeak;
  DevicePeak least;
  /// Memory plans and step-time estimates computed.
  unsigned planned = 0, timed = 0;
  /// With feasibilityOnly, the placed plan (devicePeak's `planned`) of
  /// the partition returned: `fastest`'s, else `leastPeak`'s.
  std::optional<std::pair<Pipeline, MemoryPlan>> plan;
};

/// Searches lean partitions for the fastest that fits `target`'s device
/// budget. With `feasibilityOnly` it stops at the first that fits (what a
/// max-sequence bisection asks: does any partition fit this length).
MemorySearchResult partitionForMemory(llvm::ArrayRef<LayerCost> layers,
                                      const SearchTarget &target,
                                      bool feasibilityOnly = false);

/// The share of the device budget within which the leanest partition's
/// peak is at the memory limit (partitionAtMemoryLimit).
constexpr double kFitTie = 1e-3;

/// The partition at the memory limit, without the step-time search. Where
/// RoundPipe's partition does not fit (with each tail job count the search
/// tries) and the leanest partition that fits (partitionForMemory's
/// feasibility: one-layer tail and backward stages) peaks within kFitTie
/// of the budget, the memory objective's fastest lean partition that
/// fits; nullopt elsewhere, and under a host budget or slack. At such a
/// length every partition with larger stages than the leanest holds more
/// (a stage's weights and, at stage grain, every recomputed layer's
/// intermediates), so the step-time search's partition, cut for speed,
/// did not fit, its fallback (RoundPipe's) cannot, and the memory
/// objective's partition was what the search returned after timing
/// hundreds of candidates (docs/pipeline.md, "What choosing costs"):
/// the longest sequence --report-max-seq finds is such a length.
std::optional<Partition>
partitionAtMemoryLimit(llvm::ArrayRef<LayerCost> layers,
                       const SearchTarget &target);

/// The leanest of the host optimizer's ties. At a step paced by the
/// optimizer's floor (optimizerFloorMs) many partitions tie to rounding, and
/// the step-time search keeps the first it finds there that fits, so which
/// stages a plan gets, and how much device memory they leave free (how
/// long a sequence the same stages reach), was an accident of the search's
/// order. Where `p` (the search's partition, `stepMs` its step, `peak` its
/// placed device peak) fits and runs within the floor's tie (kGrainTie),
/// one-layer stages (the leanest in weights a device holds) are timed, and
/// taken where they too run within that tie and their memory plan peaks
/// lower. Only past 16 layers, where the search stops at the floor's first
/// tie, and not under a host budget or slack, which ask for fewer staged
/// bytes than one-layer stages stage. `p` otherwise.
Partition leanestFloorTie(const Partition &p, double stepMs,
                          const DevicePeak &peak,
                          llvm::ArrayRef<LayerCost> layers,
                          const SearchTarget &target);

/// The fastest of the host optimizer's ties at the fast end of the
/// profile's unknown inputs (SearchTarget::fastEnd). At the floor the
/// step is the optimizer's, so the search keeps the first tie it finds
/// (or the leanest, above) whatever its pipeline takes: GPT-OSS-20B's
/// one-layer stages tie the floor on rtx4090's values, and on its fast
/// host their tail paces a step of 14,397 ms where stages found for that
/// host run 11,848. Where `p` (chosen, `stepMs` its step) fits and ties
/// the floor, and at the fast end runs above that end's floor, the
/// search is run again on the fast-end profile (the same layer costs);
/// its partition is taken where it too ties the floor on the profile's
/// values, fits, and is faster than `p` at the fast end by more than the
/// floor's tie (kGrainTie). `p` otherwise: where nothing ties, where `p`
/// is at the floor at both ends (nothing is faster at either), without a
/// fast end, up to 16 layers (searched in full) and under a host budget
/// or slack, as leanestFloorTie.
Partition fastestFloorTie(const Partition &p, double stepMs,
                          llvm::ArrayRef<LayerCost> layers,
                          const SearchTarget &target);

/// The host side of the memory objective (SearchTarget::hostStagedBytes):
/// a backward stage's input waits in pinned host memory for every
/// microbatch from its forward to its backward, so a partition's staged
/// bytes grow with its backward stages (at layer grain, with every layer
/// outside the tail). When `p`'s are over the target's, stages are merged
/// (two forward or two backward neighbours, or a layer moved into the
/// tail) one move at a time, each the fastest move that stages fewer
/// bytes and still fits the per-stage cap and the device budget (at layer
/// grain in every backward stage, where every layer's input outside the
/// tail is staged, a forward stage split instead of merges: its deeper
/// inputs are then freed when their backward has read them), until
/// the staged bytes fit and a device count of moves beyond (the step time
/// is not monotone in the stage count); from the fastest partition tried
/// that fits, a climb under both budgets (boundaries moved, stages split
/// or merged, the tail grown or shrunk) while a neighbour is faster.
/// Where none fits, the partition that stages the least the walk reached,
/// for the host budget's refusal to name. `p` unchanged when
/// it fits, or when `p` does not fit the devices (the device budget's
/// refusal comes first). Without a host budget, with a slack
/// (SearchTarget::hostSlack): the same walk while the step stays within
/// the slack of `p`'s, and the partition staging the least that it
/// reached within it, where that saves at least hostSlackBytes (then a
/// climb to faster neighbours staging no more); recorded in slackHolds().
/// `p` unchanged without either.
Partition holdToHostBudget(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                           const SearchTarget &target);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PARTITIONMEMORY_H
