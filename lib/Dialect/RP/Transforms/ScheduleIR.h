//===- ScheduleIR.h - what the pipeline passes share ------------*- C++ -*-===//
//
// The pipeline passes (rp-partition, rp-lower-schedule, rp-insert-
// transfers, rp-plan-memory, rp-verify-schedule) and rp-print-partition
// work on one model: include/rp/Analysis/Pipeline.h. This reads it from
// the function's `#rp.partition` and reads and writes it as `rp.schedule`
// IR; how a partition is chosen is PartitionPolicy.h.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_SCHEDULEIR_H
#define RP_DIALECT_RP_TRANSFORMS_SCHEDULEIR_H

#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/Pipeline.h"
#include "rp/Analysis/SteadyState.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::rp {

/// Marks the functions rp-slice-tokens adds, one per token slice: the
/// programs of a slice's microbatch, not a model of their own.
constexpr llvm::StringLiteral kTokenSliceAttr = "rp.token_slice";

/// On the module between rp-predict-token-slices=cut=1 and
/// rp-slice-tokens=slices=auto: the slice sizes the prediction chose.
constexpr llvm::StringLiteral kTokenSliceSizesAttr = "rp.token_slice_sizes";

/// On an rp.schedule whose microbatches are token slices: how many slices
/// a sequence is cut into (slice k of sequence m is microbatch
/// m * slices + k).
constexpr llvm::StringLiteral kTokenSlicesAttr = "rp.token_slices";

/// On an rp.copy of kind activation: it carries kept keys and values of a
/// token-sliced schedule (CommandKind::h2dKeys, d2hKeys; `boundary` is the
/// first layer whose keys it carries), not the value entering a layer.
constexpr llvm::StringLiteral kKeptKeysAttr = "rp.kept_keys";
/// On a kept-keys upload that brings only some of the earlier slices'
/// rows: [first, end), the slices of the sequence it carries (a forward's
/// prefix comes up in two parts; Command::keptFirst).
constexpr llvm::StringLiteral kKeptSlicesAttr = "rp.kept_slices";

/// The one function of `module` with layers (token slices' aside), or an
/// error.
FailureOr<func::FuncOp> layeredFunction(ModuleOp module);

/// The function's partition attribute, its layer costs and the hardware
/// profile it names, for the passes after rp-partition; `model` (the
/// module's CostModel analysis) parses and derives them once.
struct PipelineInputs {
  func::FuncOp func;
  PartitionAttr attr;
  Partition partition;
  std::vector<LayerCost> costs;
  HardwareProfile hw;
};
FailureOr<PipelineInputs> loadPipelineInputs(ModuleOp module, CostModel &model,
                                             StringRef measured = "");

/// The compute commands of the module's partition, as rp-lower-schedule
/// writes them. With token slices (the functions rp-slice-tokens adds,
/// `slices` of them) the sliced schedule: K microbatches per sequence,
/// each compute timed and sized by its slice's own function, the tail's
/// forward sweep in. Fails with `error`, or with an empty `error` where a
/// diagnostic is out.
FailureOr<Pipeline> lowerModuleSchedule(ModuleOp module,
                                        const PipelineInputs &in,
                                        CostModel &model, unsigned &slices,
                                        std::string &error);

/// A token-sliced module's slice sizes (by index; `slices` of them) and,
/// per forward layer of `func`, the bytes of its kept keys and values per
/// token: slice 1's prefix arguments (`keys:L`, `values:L`, slice 0's size
/// rows). Errors at the module or function that lacks or misnames one.
LogicalResult readTokenSlices(ModuleOp module, func::FuncOp func,
                              unsigned slices, std::vector<int64_t> &sizes,
                              std::vector<int64_t> &keyValueBytes);

/// The schedule of `module` (there must be exactly one).
FailureOr<ScheduleOp> theSchedule(ModuleOp module);

/// Reads a schedule's commands and jobs; malformed schedules (a job with
/// two ranges, a wait on a later command) are errors at the op.
FailureOr<Pipeline> readSchedule(ScheduleOp op);

/// What the passes after rp-lower-schedule read: the inputs, the schedule
/// op and its pipeline.
struct LoadedSchedule {
  PipelineInputs in;
  ScheduleOp op;
  Pipeline pipeline;
};
FailureOr<LoadedSchedule> loadSchedule(ModuleOp module, CostModel &model);

/// The opening the passes over a lowered schedule share (rp-insert-
/// transfers, rp-plan-memory, rp-verify-schedule): `PassBase` is the pass's
/// generated base, and loadOrFail loads the module's schedule with the
/// cached layer costs.
template <typename PassBase> struct SchedulePass : PassBase {
  using PassBase::PassBase;
  using Base = SchedulePass;

protected:
  /// The schedule, or failure with the pass failed. A pass that changes
  /// only the schedule keeps the layer costs (`keepCosts`).
  FailureOr<LoadedSchedule> loadOrFail(bool keepCosts) {
    FailureOr<LoadedSchedule> loaded = loadSchedule(
        this->getOperation(), this->template getAnalysis<CostModel>());
    if (failed(loaded)) {
      this->signalPassFailure();
      return failure();
    }
    if (keepCosts)
      this->template markAnalysesPreserved<CostModel>();
    return loaded;
  }
};

/// Replaces the schedule's body by the pipeline's commands, in order.
void writeSchedule(ScheduleOp op, const Pipeline &pipeline);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_SCHEDULEIR_H
