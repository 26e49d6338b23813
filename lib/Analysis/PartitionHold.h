//===- PartitionHold.h - the host hold's walk, shared ----------*- C++ -*-===//
//
// What the host hold's walk and climb (PartitionHostBudget.cpp) and its
// repair of merges over the devices (PartitionHostRepair.cpp) share: a
// hold (its start, what it has asked and its costs), a partition tried,
// and the merges both walk. Private to lib/Analysis.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_ANALYSIS_PARTITIONHOLD_H
#define RP_LIB_ANALYSIS_PARTITIONHOLD_H

#include "PartitionMoves.h"
#include "rp/Analysis/PartitionMemory.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace mlir::rp::hold {

using moves::Sizes;

/// Every move that may stage fewer bytes. At stage grain: two
/// neighbouring forward or backward stages merged (a boundary fewer to
/// stage). At layer grain in every backward stage each layer's input
/// outside the tail is staged whatever the stages, sent down with the
/// forward that computes it in one download per forward job, which is held
/// until its shallowest reader: a merge only holds more inputs longer,
/// while a forward stage split in two lets its deeper part go when its
/// backward has read it (PartitionHostBudgetTest.LayerGrainIsHeldBySplits).
/// At both grains the tail grown by a layer (taken from the last forward
/// stage and the deepest backward one).
std::vector<Sizes> stagingMoves(const Sizes &s, bool layerGrain);

/// Stage sizes as one list (a repair's partitions seen).
inline std::vector<unsigned> key(const Sizes &s) {
  std::vector<unsigned> k = s.fwd;
  k.push_back(0);
  k.push_back(s.tail);
  k.push_back(0);
  k.insert(k.end(), s.bwd.begin(), s.bwd.end());
  return k;
}

/// Adds one hold, its memory plans, step-time estimates and seconds to
/// holdStats().
struct HoldClock {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  std::atomic<uint64_t> plans{0}, timed{0}, reused{0};
  uint64_t repairs = 0, joins = 0, joinedMerges = 0;
  ~HoldClock();
};

struct Candidate {
  Partition p;
  DevicePeak peak;
  double ms = 0;
  bool usable = false;
};

/// The fastest move, the fewer staged bytes on ties, then the first in
/// move order: the same walk on any thread count.
inline bool before(const Candidate &a, const Candidate &b) {
  return a.ms < b.ms || (a.ms == b.ms && a.peak.hostBytes < b.peak.hostBytes);
}

inline const Candidate *fastest(const std::vector<Candidate> &tried) {
  const Candidate *best = nullptr;
  for (const Candidate &c : tried)
    if (c.usable && (!best || before(c, *best)))
      best = &c;
  return best;
}

/// What one hold has asked already (Hold::peakOf, Hold::msOf), keyed by
/// the stage sizes (key()), from which Hold::make makes the partition:
/// within a hold the layers, the target, the cap and the grain are fixed,
/// so an equal key is the same partition. Its step time is answered as it
/// was; its memory plan's facts (PeakFacts: the bounds, the host pool's
/// and the devices' placed peaks) depend on none of the host limits the
/// hold asks under, which fall every round (the current partition's staged
/// bytes), so each limit is answered from them (peakUnder), exactly as
/// devicePeak answers it, and a partition is placed again only where a
/// higher limit needs a step its facts lack. A move over the devices in
/// one round is so in every later one without being lowered again. Keyed
/// with the limit, as before, the repair's walks of every round met
/// partitions earlier rounds had asked, and asked them again.
struct HoldMemo {
  std::mutex mutex;
  std::map<std::vector<unsigned>, PeakFacts> peaks;
  std::map<std::vector<unsigned>, double> ms;
};

/// One hold: the partition it starts from, how it makes a partition from
/// stage sizes (keeping the start's grain, tail jobs and cap), and its
/// costs.
struct Hold {
  const Partition &start;
  llvm::ArrayRef<LayerCost> layers;
  const SearchTarget &t;
  HoldClock &clock;
  int64_t cap;
  bool layerGrain;
  std::shared_ptr<HoldMemo> memo = std::make_shared<HoldMemo>();

  /// A hold of `p`'s stages at its own stage cap and grain (the budget's
  /// and the slack's holds start alike).
  static Hold of(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                 const SearchTarget &t, HoldClock &clock) {
    return Hold{p,
                layers,
                t,
                clock,
                p.stageBytes > 0 ? p.stageBytes : t.stageBytes,
                t.layerGrain || (p.layerGrain && p.stageLayerGrain.empty())};
  }

  /// devicePeak of make(s) under `hostLimit`, from what the hold has
  /// learnt of make(s) where that answers it (HoldMemo); clock.plans counts
  /// the placements made, clock.reused the answers read back.
  DevicePeak peakOf(const Sizes &s, int64_t hostLimit);

  /// estimatedStepMs of make(s), each timed once per hold.
  double msOf(const Sizes &s);

  Partition make(const Sizes &s) const {
    Partition q = partitionFromSizes(s.fwd, s.tail, s.bwd, layers.size());
    q.layerGrain = start.layerGrain;
    q.tailJobs = start.tailJobs;
    // The timing model's tail pair is a split of the tail it was cut for.
    q.tailPairAt = s.tail == start.tail.size() ? start.tailPairAt : 0;
    q.stageBytes = cap;
    return q;
  }

  /// The walk's moves from `cur`: those that fit the per-stage cap and the
  /// devices and stage fewer bytes than `curPeak`, each timed.
  std::vector<Candidate> stagingRound(const Partition &cur,
                                      const DevicePeak &curPeak);

  /// Where no move of stagingRound fits the devices: each move that
  /// stages fewer bytes than `curPeak` but is over the devices, moved
  /// toward them a layer at a time until it fits (PartitionHostRepair.cpp).
  std::vector<Candidate> repairRound(const Partition &cur,
                                     const DevicePeak &curPeak);

  /// Where no repaired merge of `repaired` (repairRound's, from `cur`)
  /// meets `hostCap` staged bytes, on partitions of many stages: repaired
  /// merges that change different stages joined (PartitionHostRepair.cpp).
  std::optional<Candidate> jump(const Partition &cur,
                                const std::vector<Candidate> &repaired,
                                int64_t hostCap);

  /// From `cur` (`curMs`), the climb under both budgets, the host's being
  /// `hostCap` staged bytes: merges keep every boundary they do not touch,
  /// and a boundary moved is often faster at the same staged bytes. Each
  /// round takes the fastest faster neighbour that fits; memory is planned
  /// only for the faster ones, fastest first.
  Partition climb(Partition cur, double &curMs, int64_t hostCap);
};

} // namespace mlir::rp::hold

#endif // RP_LIB_ANALYSIS_PARTITIONHOLD_H
