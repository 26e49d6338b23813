//===- PartitionPolicy.h - how a partition is chosen ------------*- C++ -*-===//
//
// rp-partition and rp-print-partition choose stages the same way: a
// user's `stages`, the static schedules' balanced cut, or a round-robin
// partitioner. The IR side (reading and writing `#rp.partition` and
// `rp.schedule`) is ScheduleIR.h.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H
#define RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H

#include "rp/Analysis/Continuous.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::rp {

/// How a partition is chosen: a user's `stages`, or a partitioner.
struct PartitionRequest {
  ScheduleKind schedule = ScheduleKind::roundRobin;
  unsigned devices = 1, microbatches = 1;
  Partitioner partitioner = Partitioner::rp; ///< roundpipe: round-robin only
  std::string stages;                        ///< fwd:...;bwd:... when given
  int64_t cap = 0;                           ///< per-stage byte cap
  Dispatch dispatch = Dispatch::modulo;      ///< how passes move (round-robin)
  /// Round-robin: the fused tail's stage jobs (Partition::tailJobs), 1 or
  /// 2; 0 lets rp's partitioner choose (a user's stages then run 1).
  unsigned tailJobs = 1;
  /// rp's partitioner: memory plans are checked at this grain against this
  /// budget (0: the profile's memory), PartitionMemory.h.
  bool layerGrain = false;
  int64_t budgetBytes = 0;
};

/// The partition `request` asks for: a user partition is checked against
/// the cap; round-robin uses rp's or RoundPipe's partitioner, the static
/// schedules a balanced symmetric one. Errors are emitted at `func`.
FailureOr<Partition> choosePartition(func::FuncOp func,
                                     llvm::ArrayRef<LayerCost> costs,
                                     const PartitionRequest &request,
                                     const HardwareProfile &hw);

/// The per-stage byte cap the partitioning passes ask for: `stageBytes`
/// when the user gives it, else half the weight budget's share of the
/// device's memory (two weight sets in flight per device).
int64_t stageByteCap(int64_t stageBytes, const HardwareProfile &hw,
                     double weightBudget);

/// The stage sizes of `p` as #rp.partition spells them: the forward
/// stages' layer counts in `fwd`, the tail's then the backward stages' in
/// `bwd`.
void stageSizes(const Partition &p, SmallVectorImpl<int64_t> &fwd,
                SmallVectorImpl<int64_t> &bwd);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H
