//===- SlicedStages.h - stages chosen with the token slices -----*- C++ -*-===//
//
// rp-partition cuts the stages for the unsliced plan: one microbatch a
// pass, so its search weighs few, long jobs. With a sequence cut into K
// token slices each job runs K short computes, and the best stages differ:
// on Qwen3-1.7B at 64k in 16 slices, 15 forward stages of two layers run
// 20 % faster on the sim than rp-partition's four (docs/token-slices.md).
// searchSlicedStages climbs from the unsliced plan's stages (and from
// even forward cuts of one to four layers a stage) over the stage moves,
// each candidate timed by the caller: the sliced plan's own prediction
// (predictSlicedPlan), which also says whether it fits.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_SLICEDSTAGES_H
#define RP_ANALYSIS_SLICEDSTAGES_H

#include "rp/Analysis/Partition.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::rp {

struct SlicedStagesSearch {
  /// The sliced step of a partition in ms, or nullopt where its plan does
  /// not fit (or cannot be timed). Called from several threads at once.
  llvm::function_ref<std::optional<double>(const Partition &)> stepMs;
  /// No stage may hold more weight bytes than this (0: no cap).
  int64_t stageBytesCap = 0;
  /// At most this many partitions timed; the climb stops where it is then.
  unsigned maxTimings = 400;
};

struct SlicedStages {
  /// The fastest partition found that fits; `start` where none beat it.
  Partition partition;
  /// Its step, and the start's (infinity where the start did not fit).
  double stepMs = 0, startMs = 0;
  /// The partitions timed.
  unsigned timed = 0;
};

/// The stages for a sliced plan: starts from `start` and from even
/// forward cuts (1 to 4 layers a stage) with `start`'s tail and backward
/// stages, then climbs from the fastest over the moves of one boundary by
/// one layer, the merge of two neighbours, the split of a stage in two
/// halves (forward and backward lists) and the tail's grow and shrink:
/// the neighbours timed 16 at a time from where the last move was found,
/// the first 16 that hold one faster by more than 1e-5 of the step
/// giving the move (their fastest), until a whole sweep finds none or the
/// budget is spent. `start`'s grain and tail jobs are kept; per-stage grains
/// and a split tail pair are not searched (the start is returned).
SlicedStages searchSlicedStages(const Partition &start,
                                llvm::ArrayRef<LayerCost> layers,
                                const SlicedStagesSearch &search);

} // namespace mlir::rp

#endif // RP_ANALYSIS_SLICEDSTAGES_H
