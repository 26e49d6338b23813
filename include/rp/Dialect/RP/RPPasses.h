//===- RPPasses.h - rp dialect passes ---------------------------*- C++ -*-===//

#ifndef RP_DIALECT_RP_RPPASSES_H
#define RP_DIALECT_RP_RPPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "rp/Dialect/RP/RPOps.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::rp {

/// The storage and compute type of rp-convert-float-type (--dtype).
enum class ComputeType { f32, f16, bf16 };

/// Where rp-group-layers takes layers from.
enum class LayerSource { automatic, scope, structure };

/// The values of a schedule-kind option (rp-partition's and the training
/// pipeline's `schedule`), named as ScheduleKind's ODS strings.
inline llvm::cl::ValuesClass scheduleKindValues() {
  return llvm::cl::values(
      clEnumValN(ScheduleKind::roundRobin, "round-robin",
                 "RoundPipe's stateless round-robin"),
      clEnumValN(ScheduleKind::gpipe, "gpipe", "all forwards, then backwards"),
      clEnumValN(ScheduleKind::oneFOneB, "1f1b", "one forward, one backward"),
      clEnumValN(ScheduleKind::interleaved, "interleaved-1f1b",
                 "1F1B over virtual stages"),
      clEnumValN(ScheduleKind::loopedBfs, "looped-bfs",
                 "breadth-first over looped stages"));
}

/// The values of a partitioner option, named as Partitioner's ODS strings.
inline llvm::cl::ValuesClass partitionerValues() {
  return llvm::cl::values(
      clEnumValN(Partitioner::rp, "rp", "least estimated step time"),
      clEnumValN(Partitioner::roundpipe, "roundpipe", "RoundPipe's procedure"),
      clEnumValN(Partitioner::exhaustive, "exhaustive",
                 "every partition (at most 10 layers)"));
}

/// The values of a dispatch option (rp-partition's, rp-print-partition's,
/// rp-insert-transfers' and the training pipeline's), named as Dispatch's
/// ODS strings.
inline llvm::cl::ValuesClass dispatchValues() {
  return llvm::cl::values(
      clEnumValN(Dispatch::modulo, "modulo", "the job counter carries on"),
      clEnumValN(Dispatch::rounds, "rounds",
                 "each pass starts where the timing model finds best"));
}

#define GEN_PASS_DECL
#include "rp/Dialect/RP/RPPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "rp/Dialect/RP/RPPasses.h.inc"

} // namespace mlir::rp

#endif // RP_DIALECT_RP_RPPASSES_H
