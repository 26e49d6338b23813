//===- PredictTokenSlices.h - rp-predict-token-slices' parts ----*- C++ -*-===//
//
// What rp-predict-token-slices (PredictTokenSlices.cpp: the slices, the
// stages and the step's remark) shares with its longest-sequence report
// (PredictTokenSlicesRemarks.cpp). Private to the transforms.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICES_H
#define RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICES_H

#include "rp/Analysis/HostMemory.h"
#include "rp/Analysis/TokenSlices.h"
#include "rp/timing/Assumptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdio>
#include <string>

namespace mlir::rp::token_slices {

/// Bytes in GiB, two decimals.
std::string gib(int64_t bytes);

/// Bytes in GiB, or in MiB or KiB below one GiB or MiB (a small model's
/// host memory).
std::string size(int64_t bytes);

template <typename... Ts> std::string fmt(const char *f, Ts... values) {
  char text[256];
  snprintf(text, sizeof(text), f, values...);
  return text;
}

/// What the step's remark says: the slices and how they were chosen, the
/// sliced and unsliced plans' predictions, and their steps at the ends of
/// what the profile cannot know (none where `unknown` is empty).
struct StepRemark {
  std::vector<int64_t> sizes;
  std::string how;
  unsigned devices = 1;
  const HardwareProfile &hw;
  const SlicedPrediction &sliced;
  const PlanPrediction &plain;
  const std::vector<::rp::timing::UnknownInput> &unknown;
  double slicedEnds[2], plainEnds[2];
  /// The tokens of one step, and the device budget.
  int64_t tokens = 0, budget = 0;
};

/// The remark of the sliced step beside the unsliced one.
void reportSlicedStep(func::FuncOp func, const StepRemark &r);

/// What the longest-sequence report reads: the linear device memory model
/// the slices must fit (`fits` inside `searchAt`), its two points, and the
/// host's side.
struct MaxSeqInputs {
  /// The graph's sequence and batch rows; the short length the linear
  /// model's second point was planned at, and both points' peaks.
  int64_t seq0 = 0, rows = 1, small = 0, smallPeak = 0, seqPeak = 0;
  /// The slope of the peak per token, and the most keys, values and
  /// gradients one job keeps per token of offset.
  double perToken = 0;
  int64_t kvPerToken = 0;
  /// The device budget, and the host's (0: not bounded).
  int64_t budget = 0, hostBudget = 0;
  SlicedHostModel host;
  /// TeraPipe's program at a length under the device model: failure,
  /// nullopt where no slicing fits, or the slices.
  llvm::function_ref<FailureOr<std::optional<SliceChoice>>(int64_t)> searchAt;
};

/// The remark of the longest sequence whose slices fit (`--report-max-seq`
/// with `--token-slices`): a bisection on the device model, bounded by
/// the host where `hostBudget` is given. Fails where the program fails.
LogicalResult reportSlicedMaxSeq(func::FuncOp func, const MaxSeqInputs &in);

} // namespace mlir::rp::token_slices

#endif // RP_LIB_DIALECT_RP_TRANSFORMS_PREDICTTOKENSLICES_H
