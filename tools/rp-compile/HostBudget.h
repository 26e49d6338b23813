//===- HostBudget.h - rp-compile --host-budget-gib --------------*- C++ -*-===//
//
// The host memory a plan may hold (--host-budget-gib N) is a constraint on
// the choices rp-compile makes for itself, and advice on the ones it
// leaves to the user:
//  - chosen: the recompute grain. `--recompute auto` takes layer grain for
//    speed alone; its backward stages keep each layer's input in pinned
//    host memory, so a layer-grain plan over the budget is compiled again
//    at stage grain (the same training, a little slower).
//  - chosen: the passes in flight. A second pass in flight holds its own
//    pinned buffers and trained weights; a plan of two over the budget
//    whose one pass fits is compiled again with one (the same training;
//    its fill and drain no longer overlap the pass before, which the
//    summary prices), unless --passes-in-flight was given.
//  - advised: what changes the training or the run's flags, with the host
//    memory each would need: a quantized base (--quantize-base), a graph
//    of fewer sequences a microbatch run with rp-run --accumulate (the
//    same global batch; the pinned buffers hold each microbatch's staged
//    activations), and adapters on attention only (--lora-targets: fewer
//    weights trained).
//  - held in the pipeline: the partition. rp's partitioner merges stages
//    until the pinned staging buffers fit what the budget leaves after the
//    base, adapters and optimizer state (rp-partition host-budget-gib,
//    PartitionMemory.h holdToHostBudget); what is checked here is the
//    plan those stages make.
//
//===----------------------------------------------------------------------===//

#ifndef RP_TOOLS_RPCOMPILE_HOSTBUDGET_H
#define RP_TOOLS_RPCOMPILE_HOSTBUDGET_H

#include "rp/Analysis/HostMemory.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mlir::rp {

struct HostBudgetRequest {
  double gib = 0;
  /// The base is stored quantized already (--quantize-base nf4|int8).
  bool quantized = false;
  /// The plan trains LoRA adapters (--lora-rank > 0).
  bool lora = false;
  /// The first compile of `--recompute auto`: a layer-grain plan over the
  /// budget fails quietly, for rp-compile to compile it at stage grain.
  bool mayRetryAtStageGrain = false;
  /// The compile at stage grain after that: the layer-grain plan's host
  /// memory, for the summary and the refusal.
  int64_t layerGrainBytes = 0;
  /// The passes in flight are rp-compile's (no --passes-in-flight): a plan
  /// of two over the budget whose one pass would fit fails quietly, for
  /// rp-compile to compile it with one.
  bool mayRetryWithOnePass = false;
  /// The compile with one pass after that: the two-pass plan's host memory
  /// and predicted step (0: none), for the summary.
  int64_t twoPassBytes = 0;
  double twoPassStepMs = 0;
};

struct HostBudgetOutcome {
  /// Over the budget at layer grain chosen by `--recompute auto`: compile
  /// again with `--recompute stage`.
  bool retryAtStageGrain = false;
  int64_t layerGrainBytes = 0;
  /// Over the budget with two passes in flight, within it with one:
  /// compile again with --passes-in-flight 1.
  bool retryWithOnePass = false;
  int64_t twoPassBytes = 0;
  double twoPassStepMs = 0;
  /// The check ran (the pipeline before it succeeded).
  bool checked = false;
};

/// The pass that checks a compiled module against the budget before its
/// plan is written: passes, asks for the stage-grain compile, or refuses
/// with the module's parts and the flags that would make it fit.
std::unique_ptr<Pass> createHostBudgetStep(const HostBudgetRequest &request,
                                           HostBudgetOutcome &outcome);

/// The summary's advice where nothing held the stages to the box (no
/// budget, no slack) and their pinned buffers are 1 GiB or more: the
/// flags that would, with the part the stages decide and the part they
/// cannot ("; the pinned buffers ..."); empty otherwise.
std::string hostAdvice(ModuleOp module, double budgetGiB, double slackPct);

/// "X GiB", "X MiB" or "X KiB", as rp-compile's summary writes bytes.
/// The host memory of a plan, part by part (HostMemory.h): "X: base Y,
/// trained weights and gradients Z, optimizer state O, pinned buffers P,
/// the second pass in flight S".
std::string describeHostMemory(const HostMemory &m);
std::string formatHostBytes(int64_t bytes);

} // namespace mlir::rp

#endif // RP_TOOLS_RPCOMPILE_HOSTBUDGET_H
