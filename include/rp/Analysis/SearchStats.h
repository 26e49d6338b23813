//===- SearchStats.h - what the partition searches cost ---------*- C++ -*-===//
//
// Apart from PartitionSearch.h so that a tool can report it without the
// timing core's headers (whose ::rp namespace clashes with a tool's
// `using namespace mlir` and rp::).
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_SEARCHSTATS_H
#define RP_ANALYSIS_SEARCHSTATS_H

#include <cstdint>
#include <vector>

namespace mlir::rp {

/// What the searches of this process cost: candidates timed (each one
/// schedule lowered and laid out as a run) and seconds, summed over every
/// search; rp-compile's summary says them.
struct SearchStats {
  uint64_t candidates = 0;
  double seconds = 0;
  unsigned searches = 0;
  /// Searches that stopped at their candidate budget.
  unsigned budgetStops = 0;
  /// Searches that stopped at the host optimizer's floor
  /// (optimizerFloorMs): a fitting partition no other can beat.
  unsigned floorStops = 0;
  /// Searches answered from an earlier identical one (SearchMemo), not
  /// counted in `searches`.
  unsigned reused = 0;
  /// Searches answered by the memory objective at the memory limit
  /// (partitionAtMemoryLimit), their candidates never timed; not counted
  /// in `searches`.
  unsigned memoryLimits = 0;
};
SearchStats searchStats();

/// What holding partitions to the host budget cost (holdToHostBudget,
/// PartitionMemory.h), apart from the searches': the holds that ran (on a
/// partition over the budget), the memory plans they made, the step times
/// they estimated (each a schedule laid out as a run) and seconds.
struct HoldStats {
  unsigned holds = 0;
  uint64_t plans = 0;
  uint64_t timed = 0;
  double seconds = 0;
  /// Memory plans and step-time estimates a hold asked again and read
  /// back from what it answered before (PartitionHostBudget.cpp's
  /// HoldMemo), not counted in `plans` or `timed`.
  uint64_t reused = 0;
  /// Repair rounds (no move fitted the devices, each moved toward them a
  /// layer at a time), the rounds among them whose move joined repaired
  /// merges (PartitionHostBudget.cpp's Hold::jump), and the merges those
  /// joined.
  uint64_t repairs = 0, joins = 0, joinedMerges = 0;
};
HoldStats holdStats();

/// A partition held near the fastest (SearchTarget::hostSlack): the
/// stages taken, their step and staged bytes, and the fastest
/// partition's, which the summary names beside them.
struct SlackHold {
  std::vector<unsigned> fwd, bwd;
  unsigned tail = 0;
  double ms = 0, fastestMs = 0;
  int64_t stagedBytes = 0, fastestStagedBytes = 0;
};
/// Every hold of this process that took a slower partition, in order.
std::vector<SlackHold> slackHolds();

/// Candidates one search times at most: past it, the search keeps the best
/// found so far (a count, not seconds, so that plans stay reproducible).
/// Qwen3-32B's search times about 600, a 256-layer model's about 2,500.
constexpr unsigned kSearchBudget = 6000;

/// The whole-run timings of this process (steadyState, steadyStateInMemory
/// and dispatchPasses without untilSteady), asked and read back.
struct WholeRunStats {
  unsigned reused = 0;
  /// Asked for (timed or read back): one pass in flight; two passes
  /// sharing one copy of the arenas; two passes on a copy each.
  unsigned askedOnePass = 0, askedSharing = 0, askedTwoCopies = 0;
  /// The memo's self-check (setSteadyMemoCheck): whether it is on, the
  /// read-backs it timed again and how many of those differed.
  bool checking = false;
  unsigned checked = 0, differ = 0;
};
WholeRunStats wholeRunStats();

/// The memo's self-check, a debug mode (also on with the environment's
/// RP_STEADY_MEMO_CHECK=1): every whole run read back is timed again and
/// compared bit for bit; the fresh result is returned, and a difference,
/// which means the memo's key leaves out a field the timing reads, is
/// said on stderr and counted (WholeRunStats::differ).
void setSteadyMemoCheck(bool on);

/// For the self-check's test only: every kept result's step made 1 ms
/// longer, as a key missing a field would return another run's.
void staleSteadyMemoForTest();

} // namespace mlir::rp

#endif // RP_ANALYSIS_SEARCHSTATS_H
