//===- PredictTokenSlicesSearch.h - slices, stages, tail jobs ---*- C++ -*-===//
//
// What rp-predict-token-slices chooses on the compiler's timing: the slice
// sizes (TeraPipe's program, even counts), the stages searched again with
// them (SlicedStages.h) and the tail's jobs (one, or two on alternate
// slices). The pass (PredictTokenSlices.cpp) derives its inputs (the
// layer costs, the per-pair times, the memory model) and reports; this
// planner holds the costs it memoizes per length. Private to the
// transforms.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICESSEARCH_H
#define RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICESSEARCH_H

#include "ScheduleIR.h"
#include "rp/Analysis/CostModel.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/TokenSlices.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::rp::token_slices {

/// The memory model TeraPipe's program keeps to: whether a slice of `s`
/// tokens at offset `o` fits.
using SliceFits = llvm::function_ref<bool(int64_t, int64_t)>;

class SlicePlanner {
public:
  /// The layers' costs at `seq` tokens, once per length (at `end`'s end
  /// of the profile's unknown inputs where `end` >= 0).
  FailureOr<const std::vector<LayerCost> *> costsAt(int64_t seq);

  /// The layer costs of each slice of `sizes` and of the mean slice: what
  /// the sliced plan of any partition is timed with.
  struct SliceCosts {
    std::vector<std::vector<LayerCost>> slices;
    const std::vector<LayerCost> *mean = nullptr;
  };
  FailureOr<SliceCosts> costsOf(llvm::ArrayRef<int64_t> sizes);

  /// The sliced plan of the function's stages (in->partition).
  FailureOr<SlicedPrediction> predict(llvm::ArrayRef<int64_t> sizes,
                                      const PlanTarget &target);

  /// The sizes `spec` asks for (auto: TeraPipe's program, or even slices
  /// where the plan's timing prefers them) on the function's stages, their
  /// plan, and how they were chosen.
  struct Chosen {
    std::vector<int64_t> sizes;
    SlicedPrediction sliced;
    std::string how;
  };
  /// `maxEven` bounds auto's even counts (0: doubling past 16 while
  /// faster).
  FailureOr<Chosen> choose(const TokenSlicesSpec &spec,
                           const PlanTarget &target, SliceFits fits,
                           unsigned maxEven = 0);

  /// With search-stages: the stages searched again with `chosen`'s slices
  /// (and, for auto, the slices chosen again on the stages found); the
  /// function's #rp.partition and in->partition rewritten where they are
  /// faster. The remark's text in `said`. With auto and more than 16
  /// slices the best of at most 16 is searched too where `fewer`.
  LogicalResult chooseStages(const TokenSlicesSpec &spec,
                             const PlanTarget &target, SliceFits fits,
                             Chosen &chosen, std::string &said,
                             bool fewer = true);

  /// Auto slices of one sequence a step with a head-only tail, one tail
  /// job chosen (`chosen`, on in->partition; `unslicedStages` the graph's):
  /// the tail as two jobs on alternate slices tried, the faster kept (one
  /// job on a tie), the step remark's `how` and `stagesSaid` updated.
  LogicalResult tryTwoTailJobs(const TokenSlicesSpec &spec,
                               const PlanTarget &target, SliceFits fits,
                               const Partition &unslicedStages,
                               bool searchStages, Chosen &chosen,
                               std::string &stagesSaid);

  /// One pass's compute for a slice of `size` tokens at no offset, summed
  /// over the jobs; the same sum of the per-pair times.
  FailureOr<double> passMs(int64_t size);
  double sumOverJobs(llvm::ArrayRef<LayerCost> layers);

  /// TeraPipe's search at `tokens`, its times per job from a grid of
  /// lengths (the linear part interpolated, the pairs exact) and its
  /// memory from the model `fits`.
  FailureOr<std::optional<SliceChoice>> search(int64_t tokens, SliceFits fits);

  /// #rp.partition rewritten from in->partition: its stages and tail jobs
  /// (per-stage grains kept where the stages are).
  void writePartition();

  /// The module, its cost analysis, and the --token-slices text (for
  /// errors).
  ModuleOp module;
  CostModel *costModel = nullptr;
  std::string slicesText;

  FailureOr<PipelineInputs> in;
  std::map<int64_t, std::vector<LayerCost>> memo;
  SlicePairCosts pairs;
  /// Timing at an end of the profile's unknown inputs: -1 none (the
  /// profile's own values), 0 the fast end, 1 the slow one; its profile,
  /// its costs per (end, length), and the measured times they use.
  int end = -1;
  HardwareProfile endHw;
  std::map<std::pair<int, int64_t>, std::vector<LayerCost>> endMemo;
  const MeasuredProfile *measuredAtEnds = nullptr;
  int64_t seq0 = 0, rows = 1;
  /// The stages whose heaviest bounds the search's (rp-partition's), and
  /// what the search's start is called in its remark.
  std::optional<Partition> capStages;
  std::string startWhat = "the unsliced plan's stages";
};

} // namespace mlir::rp::token_slices

#endif // RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICESSEARCH_H
