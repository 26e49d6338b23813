//===- PlanExport.h - rp plans into .rpplan files ---------------*- C++ -*-===//
//
// The runtime contract: turns a module into the versioned plan file the
// runtime loads (contract/schema/plan.fbs). Today a plan is one device
// running the model's layers in order, forward only: each layer becomes a
// program of kernel calls over buffers, and one job per layer runs it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TARGET_PLANEXPORT_H
#define RP_TARGET_PLANEXPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/AnalysisManager.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mlir::rp {

class CostModel;

struct PlanExportOptions {
  /// The folder that param file paths in the IR are relative to (the
  /// folder of the .mlir file).
  std::string irDir = ".";
  /// The folder the plan is written to: weight files are referenced
  /// relative to it.
  std::string planDir = ".";
  /// What produced the plan, recorded for --describe.
  std::string producer;
  /// The compile's CostModel analysis (include/rp/Analysis/CostModel.h):
  /// the predicted job times take the hardware and measured profiles the
  /// passes parsed from it instead of parsing them again. Null: the
  /// exporter parses them itself, through a CostModel of its own.
  CostModel *costs = nullptr;
  /// rp-compile --tf32: recorded in the plan (plan.fbs's tf32).
  bool tf32 = false;
  /// rp-compile --lora-*: recorded in the plan (plan.fbs's LoraSettings;
  /// rank 0: none), so export and resume need no flags.
  struct Lora {
    int64_t rank = 0;
    double alpha = 0, dropout = 0;
    std::string targets, modulesToSave;
  } lora;
};

/// Serializes `module` (its `func.func @main`) into plan bytes. Errors are
/// emitted on the offending op.
LogicalResult exportPlan(ModuleOp module, const PlanExportOptions &options,
                         std::vector<uint8_t> &bytes);

/// Exports `module` and writes the plan to `path` atomically (a reader never
/// sees half a plan); returns the plan's size in bytes. Errors, writing
/// included, are emitted on `module`.
FailureOr<size_t> exportPlanToFile(ModuleOp module,
                                   const PlanExportOptions &options,
                                   StringRef path);
/// The same, run as a pass's work on `module` (rp-compile's last step): the
/// plan's predicted times take the profiles that the passes before it
/// parsed, from the CostModel analysis of `analyses`.
FailureOr<size_t> exportPlanToFile(ModuleOp module, PlanExportOptions options,
                                   StringRef path, AnalysisManager analyses);

/// What a staged plan's predicted job times say about its step: the jobs'
/// end and the compute queues' idle share over it (what `rp-run --backend
/// sim` reports as jobs_ms; docs/sim.md).
struct PredictedStep {
  double jobsMs = 0;
  double bubble = 0;
};
/// std::nullopt for plans without predicted times (forward plans).
std::optional<PredictedStep> predictedStep(ArrayRef<uint8_t> plan);

} // namespace mlir::rp

#endif // RP_TARGET_PLANEXPORT_H
