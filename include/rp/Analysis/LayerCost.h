//===- LayerCost.h - per-layer compute, memory and transfer costs -*- C++ -*-=//
//
// What each layer of a forward graph costs: FLOPs and device memory traffic
// of its forward, of its recompute (a full re-run of the forward, as
// RoundPipe) and of its backward; parameter, gradient and activation bytes;
// and the times a hardware profile gives them. Backward costs follow from
// which values need a gradient: a matmul whose weight is frozen computes
// only the input gradient, a layer with nothing trainable upstream none.
// The partitioner, the timing analysis and memory planning read this; a
// measured profile replaces the modelled times of the layers it names.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_LAYERCOST_H
#define RP_ANALYSIS_LAYERCOST_H

#include "rp/Analysis/HardwareProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::rp {

struct LayerCost {
  std::string name;
  int64_t forwardFlops = 0;
  /// The backward's kernels: the reverse sweep's own, as rp-autodiff builds
  /// it and the plan runs it (BackwardLiveness), where the sweep could be
  /// built; else a rule per forward op (twice its work per operand
  /// gradient). The estimate times these, so they are what it charges.
  int64_t backwardFlops = 0;
  /// Device memory bytes read and written by the kernels.
  int64_t forwardTraffic = 0;
  int64_t backwardTraffic = 0;
  /// A backward's recompute: the forward ops the reverse sweep reads
  /// (LayerCost::backwardRecomputeMs), all of them without a sweep.
  int64_t recomputeFlops = 0;
  int64_t recomputeTraffic = 0;
  /// One microbatch's gradient adds (accumulateMs).
  int64_t accumulateFlops = 0;
  int64_t accumulateTraffic = 0;
  /// Parameter bytes uploaded to run the layer; gradient bytes downloaded.
  int64_t paramBytes = 0;
  int64_t gradBytes = 0;
  /// Elements of the trainable parameters (what the host optimizer steps).
  int64_t trainableElements = 0;
  /// Activation operands (saved for recompute) and results.
  int64_t actInBytes = 0;
  int64_t actOutBytes = 0;
  /// Peak bytes of intermediate values live during the forward.
  int64_t workBytes = 0;
  /// What the layer's recompute + backward body holds
  /// (BackwardLiveness.h): the forward's peak, the forward values and the
  /// activation inputs the reverse sweep reads, the sweep's peak, and the
  /// gradients of the layer's results. `backwardMeasured` is false when no
  /// sweep could be built (an op without a gradient rule); workBytes then
  /// stands in for all of them.
  int64_t recomputePeakBytes = 0;
  int64_t keptBytes = 0;
  int64_t keptInputBytes = 0;
  int64_t backwardPeakBytes = 0;
  int64_t resultGradBytes = 0;
  bool backwardMeasured = false;
  /// Bytes of the layer's constants (rotary tables, masks), which the
  /// runtime keeps on every device that runs the layer.
  int64_t constBytes = 0;
  /// Kernels launched by the forward.
  int64_t kernels = 0;
  double forwardMs = 0;
  double recomputeMs = 0;
  double backwardMs = 0;
  /// Of recomputeMs, the forward ops a backward's recompute leaves out:
  /// nothing the reverse sweep reads comes from them (BackwardLiveness),
  /// so the plan's recompute program does not run them. 0 where measured.
  double recomputeSkippedMs = 0;
  /// One microbatch's gradients added to the job's accumulators, the
  /// plan's add-grads program after each backward (the first
  /// microbatch's start-grads is a view: no kernel). The model's time
  /// even where the layers are measured, as the sim times that program,
  /// but 0 where the measured file's backward includes it
  /// (backward_includes_accumulation).
  double accumulateMs = 0;
  double uploadMs = 0;
  double downloadMs = 0;
  /// Of forwardMs and backwardMs, the attention kernels' (the model's, even
  /// where the layers are measured): the only work that grows with the
  /// query-key pairs, which token slices' pair costs are fitted on
  /// (fitPairCosts) so that the matmuls' efficiency, which rises with their
  /// size, is not read as pairs.
  double attentionForwardMs = 0;
  double attentionBackwardMs = 0;
  /// True when a measured profile gave any of the times.
  bool measured = false;
  /// Kernels timed by a measured profile's "ops" (forward, the backward
  /// sweep, the gradient adds); 0 where its per-layer times replace them.
  unsigned measuredOps = 0;

  /// What a backward's recompute costs (the plan's recompute program).
  double backwardRecomputeMs() const {
    return recomputeMs - recomputeSkippedMs;
  }
  /// A backward stage job's time for one microbatch of this layer, as the
  /// plan's programs take it: the recompute, the backward, the gradients
  /// added to their accumulators.
  double backwardJobMs() const {
    return backwardRecomputeMs() + backwardMs + accumulateMs;
  }
};

/// Costs of the `rp.layer` ops of `func` in program order. Fails, with a
/// diagnostic, on a training graph (run it before rp-autodiff), when the
/// profile has no rate for an element type the graph computes in, or, when
/// `strict`, when `measured` names a layer the function does not have.
FailureOr<std::vector<LayerCost>>
analyzeLayerCosts(func::FuncOp func, const HardwareProfile &hw,
                  const MeasuredProfile *measured = nullptr,
                  bool strict = true);

/// Bytes of a statically shaped tensor type (sub-byte elements rounded up
/// to a byte); 0 for anything else.
int64_t tensorBytes(Type type);

} // namespace mlir::rp

#endif // RP_ANALYSIS_LAYERCOST_H
