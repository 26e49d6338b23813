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
};

/// The partition `request` asks for: a user partition is checked against
/// the cap; round-robin uses rp's or RoundPipe's partitioner, the static
/// schedules a balanced symmetric one. Errors are emitted at `func`.
FailureOr<Partition> choosePartition(func::FuncOp func,
                                     llvm::ArrayRef<LayerCost> costs,
                                     const PartitionRequest &request,
                                     const HardwareProfile &hw);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_PARTITIONPOLICY_H
