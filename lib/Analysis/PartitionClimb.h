//===- PartitionClimb.h - the step-time search for one tail -----*- C++ -*-===//
//
// What PartitionSearch.cpp's entry points share with PartitionClimb.cpp's
// search: the search for one tail job count and the process's search
// costs. Private to lib/Analysis.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_ANALYSIS_PARTITIONCLIMB_H
#define RP_LIB_ANALYSIS_PARTITIONCLIMB_H

#include "rp/Analysis/PartitionSearch.h"

#include <atomic>
#include <cstdint>

namespace mlir::rp::search {

/// The process's search costs (searchStats): atomics, as the passes of
/// two modules may search at once.
extern std::atomic<uint64_t> statCandidates, statMicros;
extern std::atomic<unsigned> statSearches, statBudgetStops, statReused,
    statFloorStops, statMemoryLimits;

/// The search of partitionForStepTime for one tail job count (1, 2, or 3:
/// one tail job split by layers into a pair); `foundMs` is the returned
/// partition's estimated step.
Partition searchWithTailJobs(llvm::ArrayRef<LayerCost> layers,
                             const SearchTarget &t, unsigned tailJobs,
                             double &foundMs);

} // namespace mlir::rp::search

#endif // RP_LIB_ANALYSIS_PARTITIONCLIMB_H
