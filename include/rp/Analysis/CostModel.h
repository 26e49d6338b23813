//===- CostModel.h - profiles and layer costs, once per compile -*- C++ -*-===//
//
// The analysis the cost passes share (getAnalysis<CostModel>() on the
// module): the hardware and measured profiles a pass names are parsed on
// first use and kept for the rest of the pass manager's run, since no IR
// change alters a file; the layer costs of a function are derived once and
// kept until a pass that does not preserve CostModel runs (rp-partition,
// rp-lower-schedule, rp-insert-transfers, rp-plan-memory and the verifiers
// leave the forward graph alone, so one derivation serves them all).
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_COSTMODEL_H
#define RP_ANALYSIS_COSTMODEL_H

#include "rp/Analysis/HardwareProfile.h"
#include "rp/Analysis/LayerCost.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/AnalysisManager.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace mlir::rp {

struct SearchMemo;

class CostModel {
public:
  explicit CostModel(Operation *) {}

  /// The profile `hw` names and, when `measured` is not empty, the times
  /// in that file; parsed on the first call, errors emitted then and on
  /// every later call.
  FailureOr<const CostInputs *> inputs(StringRef hw, StringRef measured,
                                       MLIRContext *context);

  /// analyzeLayerCosts of `func` with those inputs, derived once.
  FailureOr<const std::vector<LayerCost> *> layerCosts(func::FuncOp func,
                                                       StringRef hw,
                                                       StringRef measured,
                                                       bool strict = true);

  /// A model with the same parsed profiles and no layer costs, for a copy
  /// of the IR that is thrown away (rp-report-max-seq's trials): costs are
  /// keyed by the function, and a freed copy's address may be reused.
  CostModel forScratch() const;

  /// The partition searches' shared work (PartitionSearch.h), for the
  /// whole pass manager's run; a scratch model shares it, so that a copy's
  /// searches (rp-choose-loss-fusion's unfused graph) start from the
  /// original's.
  SearchMemo &searchMemo() const;

  /// rp-partition's defer-grain-range: the end of `recompute = auto`'s
  /// note, left for rp-choose-loss-fusion to print where it keeps the
  /// fused graph's note (GrainSpeedChoice::range); empty where none waits.
  std::function<FailureOr<std::string>()> grainRange;

  /// The profiles survive every pass; the layer costs only passes that
  /// preserve this analysis.
  bool isInvalidated(const AnalysisManager::PreservedAnalyses &pa) {
    if (!pa.isPreserved<CostModel>())
      costs.clear();
    return false;
  }

private:
  /// Keyed by the hardware name or path as given and the measured file's
  /// absolute path (rp-partition gets it as given, the passes after it as
  /// the absolute path it records).
  std::map<std::pair<std::string, std::string>,
           std::shared_ptr<const CostInputs>>
      parsed;
  std::map<std::tuple<Operation *, std::string, std::string, bool>,
           std::vector<LayerCost>>
      costs;
  mutable std::shared_ptr<SearchMemo> memo;
};

} // namespace mlir::rp

#endif // RP_ANALYSIS_COSTMODEL_H
