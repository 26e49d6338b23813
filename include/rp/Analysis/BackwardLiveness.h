//===- BackwardLiveness.h - what a layer's backward keeps --------*- C++
//-*-===//
//
// A backward recomputes its layers' forward and then sweeps them in reverse
// (rp-autodiff); the runtime gives every value of that body a buffer from
// the call that writes it to the call that last reads it. What a backward
// holds is therefore set by which forward values the vector-Jacobian rules
// read, not by the forward's own peak. This analysis builds one layer's
// reverse sweep the way rp-autodiff does, on a scratch copy of its body,
// and measures the liveness of the forward + backward body, so the memory
// model can count what the runtime keeps before autodiff has run.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_BACKWARDLIVENESS_H
#define RP_ANALYSIS_BACKWARDLIVENESS_H

#include "rp/Dialect/RP/RPOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mlir::rp {

/// Bytes of one layer's recompute + backward body (the layer inlined, then
/// its reverse sweep), each value live from the op that computes it to its
/// last use. Constants are the weight buffer's (LayerCost::constBytes) and
/// the weight gradients the job's (LayerCost::gradBytes), so neither is
/// counted here; activation inputs and incoming result gradients are
/// counted apart, since a stage's first layer reads its job's input buffer.
struct BackwardLiveness {
  /// Peak of the forward's values while it runs.
  int64_t forwardPeak = 0;
  /// The forward's values the reverse sweep reads: what a stage-grain
  /// backward holds for this layer while deeper layers run.
  int64_t keptBytes = 0;
  /// The activation inputs the reverse sweep reads.
  int64_t keptInputBytes = 0;
  /// Peak of the body's values during the reverse sweep (keptBytes while
  /// still read, the sweep's own values, the input gradients it yields).
  int64_t backwardPeak = 0;
  /// Bytes of the gradients of the layer's results, the sweep's seeds.
  int64_t resultGradBytes = 0;
  /// Per op of the body (terminator aside), whether the reverse sweep
  /// reads its results, itself or through other such ops: what a
  /// backward's recompute re-runs. rp-autodiff's canonicalizer drops the
  /// rest from the recompute program (a decoder layer's last projection
  /// and residual add), so the plan's recompute costs only these.
  std::vector<bool> recomputed;
  /// The reverse sweep's ops timed one by one (the `opMs` given), as the
  /// plan's backward program runs them; -1 without a timer.
  double backwardMs = -1;
};

/// Measures `layer` (a forward rp.layer). `needs` holds the values outside
/// and inside the layer that need a gradient (the activity analysis of
/// LayerCost); `isWeight(i)` tells whether input `i` is a parameter;
/// `scratch(op)` is the bytes an op holds while it runs beyond its results.
/// None when an op on the gradient's path has no vector-Jacobian rule or
/// its rule fails (the caller keeps its coarser estimate).
std::optional<BackwardLiveness>
measureBackward(LayerOp layer, const llvm::DenseSet<Value> &needs,
                llvm::function_ref<bool(unsigned)> isWeight,
                llvm::function_ref<int64_t(Operation &)> scratch,
                llvm::function_ref<double(Operation &)> opMs = nullptr);

} // namespace mlir::rp

#endif // RP_ANALYSIS_BACKWARDLIVENESS_H
