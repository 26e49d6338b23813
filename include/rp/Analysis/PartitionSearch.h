//===- PartitionSearch.h - partitions that minimize the step time -*- C++ -*-=//
//
// rp's partitioner: where RoundPipe minimizes the proxy max(S, G) * W, this
// minimizes the estimated steady-state step time of the round-robin
// schedule of the partition, its steps run back to back (transfers
// included; SteadyState.h).
// It starts from RoundPipe's partition, greedy cuts under a range of
// bottlenecks and balanced cuts into many stage counts, keeps the best,
// then moves stage boundaries (shift, merge, split, grow or shrink the
// tail) while that lowers the estimate. Every partition it considers
// respects the per-stage byte cap. Deterministic, and never worse than
// RoundPipe's partition, which is one of its starts. It is a local
// search: a better partition two or three moves away (adding one stage
// moves every later job to another device) is invisible from a local
// optimum, so on small models (at most 16 layers) it climbs again from
// the next 8 best starts, which finds the exhaustive search's optimum on
// PartitionSearchTest's models (one climb stopped up to 9.2 % short).
// Large models climb once: each climb there times hundreds of neighbours.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PARTITIONSEARCH_H
#define RP_ANALYSIS_PARTITIONSEARCH_H

#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/SearchStats.h"
#include "rp/Analysis/SteadyState.h"

namespace mlir::rp {

/// The partition searches of one compile share their work through this
/// (CostModel::searchMemo(), so rp-partition's two grains and
/// rp-choose-loss-fusion's unfused graph reuse rp-partition's search):
/// each search records the best partition it found for its problem (the
/// layer count, devices, microbatches, cap, tail jobs, dispatch and
/// budget: not the grain or the layers' costs, which the later searches
/// change), and a later search of the same problem starts from those
/// bests and RoundPipe's partition and climbs from there, instead of
/// sweeping bottlenecks and balanced stage counts again (most of a search's
/// timings). Deterministic: a compile runs its searches in one order.
///
/// It also keeps every search's result, keyed by all that the search reads
/// (the layers' costs and the target): a search asked again (rp-print-
/// partition after rp-partition, a trial of rp-report-max-seq at the
/// compiled length) returns it without timing a candidate. That part is
/// exact; starting from earlier bests changes the search's path, so it
/// is only taken where `startFromEarlier` asks for it.
struct SearchMemo {
  struct Found {
    std::string problem;
    std::vector<unsigned> fwd, bwd;
    unsigned tail = 0;
  };
  std::vector<Found> found;
  bool startFromEarlier = false;
  /// partitionForStepTime's results, by searchKey.
  std::vector<std::pair<std::string, Partition>> results;
};

struct SearchTarget {
  const HardwareProfile &hw;
  unsigned devices;
  unsigned microbatches;
  int64_t stageBytes;
  /// How the plan moves its jobs from pass to pass (SteadyState.h): the
  /// partitioner times each candidate as the plan will run it.
  Dispatch dispatch = Dispatch::modulo;
  /// The stage jobs the fused tail may run as (Partition::tailJobs): 1 or
  /// 2, or 0 to search both and keep the faster (1 on ties).
  unsigned tailJobs = 1;
  /// Layer-grain recompute in every backward stage (the user's
  /// --recompute): memory plans are checked at that grain.
  bool layerGrain = false;
  /// The device budget memory plans must fit; 0: the profile's memory.
  int64_t budgetBytes = 0;
  int64_t budget() const {
    return budgetBytes > 0 ? budgetBytes : int64_t(hw.memoryBytes());
  }
  /// The host's staged activations (the memory plan's pinned staging
  /// buffers) a plan may hold: what the host budget leaves after the
  /// weights and optimizer state; 0: unchecked. A partition over it is
  /// held to it after the search (holdToHostBudget, PartitionMemory.h).
  int64_t hostStagedBytes = 0;
  /// Where no host budget is given (hostStagedBytes == 0): a partition
  /// whose step is within this share of the fastest's (0.05: 5 %) and that
  /// stages at least `hostSlackBytes` fewer bytes in the pinned buffers is
  /// taken instead, the one staging the least of those the walk reaches
  /// (holdToHostBudget). The fastest partition's backward boundaries each
  /// stage every microbatch's activation: on Llama-3.1-8B NF4 LoRA, 16
  /// two-layer backward stages stage 32 GiB, the held stages 18 GiB for a
  /// step 2.7 % slower. 0: the fastest, whatever it stages.
  double hostSlack = 0;
  /// The least pinned memory a slower partition must save: below it the
  /// box's memory is not what a slower step buys (a small model's staged
  /// activations are KiB).
  int64_t hostSlackBytes = int64_t(1) << 30;
  /// Earlier searches of this compile to start from (nullptr: none).
  SearchMemo *memo = nullptr;
  /// Candidates one search may time (kSearchBudget).
  unsigned candidateBudget = kSearchBudget;
  /// The profile with its unknown inputs (Assumptions.h) at their fast
  /// end, where it names any: of the host optimizer's floor ties, the one
  /// fastest there is kept (fastestFloorTie, PartitionMemory.h), so the
  /// range's fast end is not a tie's accident. nullptr: none.
  const HardwareProfile *fastEnd = nullptr;
};

/// `p`'s round-robin schedule (compute only) at the target's recompute
/// grain (layer grain where `p` or the target asks for it): what the
/// search times and plans the memory of.
FailureOr<Pipeline> lowerForTarget(const Partition &p,
                                   llvm::ArrayRef<LayerCost> layers,
                                   const SearchTarget &target,
                                   std::string &error);

/// The estimated step time of `p`'s round-robin schedule.
double estimatedStepMs(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                       const SearchTarget &target);

/// Whether every stage of `p` fits the per-stage byte cap.
bool fitsStageBytes(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                    int64_t cap);

/// Whether the memory plan of `p`'s round-robin schedule fits every
/// device's budget (target.budget()).
bool fitsDeviceMemory(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                      const SearchTarget &target);

/// rp's partitioner. `bottleneckMs` and `proxyCostMs` are filled as for
/// RoundPipe's, for comparison. When the fastest partition's memory plan
/// does not fit, it takes the fastest lean one that does
/// (PartitionMemory.h), or, when none does, the least peak found.
Partition partitionForStepTime(llvm::ArrayRef<LayerCost> layers,
                               const SearchTarget &target);

/// Every partition of up to 10 layers; the one with the least estimated
/// step time (ties: the first in enumeration order).
Partition partitionExhaustive(llvm::ArrayRef<LayerCost> layers,
                              const SearchTarget &target);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PARTITIONSEARCH_H
