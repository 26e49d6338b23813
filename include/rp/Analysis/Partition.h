//===- Partition.h - cutting layers into pipeline stages --------*- C++ -*-===//
//
// A partition is RoundPipe's execution plan: an ascending list of forward
// stages over layers [0, k), a fused tail [k, L) that runs forward, loss and
// backward without recompute, and a list of backward stages over [0, k)
// from deep to shallow. Forward and backward lists are cut independently
// (asymmetric): recompute plus backward costs about three forwards, so
// backward stages hold fewer layers. Every stage's weights (and, for
// backward stages, gradients) fit one per-stage cap: half the device's
// weight budget, since the running stage and the prefetched one are
// resident together.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_PARTITION_H
#define RP_ANALYSIS_PARTITION_H

#include "rp/Analysis/LayerCost.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace mlir::rp {

/// Layers [begin, end) in program order.
struct StageRange {
  unsigned begin = 0, end = 0;
  unsigned size() const { return end - begin; }
  bool operator==(const StageRange &o) const {
    return begin == o.begin && end == o.end;
  }
};

struct Partition {
  std::vector<StageRange> forward;  // ascending
  StageRange tail;                  // the fused last stage
  std::vector<StageRange> backward; // deep to shallow, the tail excluded
  /// The bottleneck W the stages were cut under, and RoundPipe's proxy for
  /// the iteration time, max(stages, minStages) * W.
  double bottleneckMs = 0;
  double proxyCostMs = 0;
  /// The per-stage byte cap used (raised when one layer exceeds it).
  int64_t stageBytes = 0;
  /// Layer-grain recompute (RoundPipe's recompute_grain="layer"): every
  /// backward stage keeps each layer's saved input and recomputes and
  /// backprops one layer at a time, instead of keeping every recomputed
  /// layer's intermediates of the stage.
  bool layerGrain = false;
  /// The grain per backward stage (indexed as `backward`) where the stages
  /// differ (#rp.partition's recompute list, rp-choose-recompute's
  /// choice); empty: `layerGrain` for every one.
  std::vector<bool> stageLayerGrain;
  /// Round-robin: the stage jobs the fused tail runs as, 1 or 2. With 2
  /// the tail's microbatches alternate over two jobs on consecutive
  /// devices (even microbatches on the first), so a tail up to twice as
  /// slow per microbatch as the backward stages does not pace them.
  unsigned tailJobs = 1;
  /// Round-robin, timing model only: > 0 splits the fused tail by layers
  /// instead, its first `tailPairAt` layers a job on one device that runs
  /// their forward, hands the activation to the rest (a fused job on the
  /// next device) and runs their backward without recompute from the
  /// gradient it gets back, one forward ahead (1F1B between the two).
  unsigned tailPairAt = 0;

  unsigned numStages() const { return forward.size() + 1 + backward.size(); }
  /// Whether backward stage `b` recomputes one layer at a time.
  bool layerGrainAt(unsigned b) const {
    return b < stageLayerGrain.size() ? bool(stageLayerGrain[b]) : layerGrain;
  }
};

/// RoundPipe's procedure (reference/roundpipe.md §3): candidate bottlenecks
/// are the sums of contiguous layer runs between the largest layer time and
/// 1.1 times it; for each, cut the tail, the forward list (from the deepest
/// layer down, so the first stage takes the remainder) and the backward
/// list greedily, and keep the candidate with the least proxy cost. Layer
/// times are the recompute time (forward) and recompute plus backward.
/// A layer larger than `stageBytes` raises the cap to its size, as
/// RoundPipe does; `raisedFor` names it then.
Partition partitionRoundPipe(llvm::ArrayRef<LayerCost> layers,
                             int64_t stageBytes, unsigned minStages,
                             std::string *raisedFor = nullptr);

/// RoundPipe's greedy cut of layers [0, k) under bottleneck `w` and byte
/// cap `cap`, in list order: forward stages (recompute times, weights) cut
/// from the deepest layer down so that the first stage takes the
/// remainder; backward stages (recompute + backward, weights + gradients)
/// cut from layer 0 up and listed deep to shallow.
std::vector<StageRange> cutUnder(llvm::ArrayRef<LayerCost> layers, unsigned k,
                                 double w, int64_t cap, bool backward);

/// The partition with these stage sizes (forward from layer 0, the tail,
/// backward from deep to shallow); the sizes must cover the layers.
Partition partitionFromSizes(llvm::ArrayRef<unsigned> fwd, unsigned tail,
                             llvm::ArrayRef<unsigned> bwd, unsigned numLayers);

/// Parses a user-given partition, DESIGN.md's `fwd:A,B,...;bwd:X,Y,...`:
/// forward stage sizes from the first layer; backward sizes in execution
/// order, the first being the fused tail, which the forward list leaves
/// out. Errors say what is wrong and what the sizes must add up to.
FailureOr<Partition> parseStages(llvm::StringRef spec, unsigned numLayers,
                                 llvm::function_ref<InFlightDiagnostic()> emit);

/// The same partition in `--stages=` form.
std::string formatStages(const Partition &p);

/// Fills the bottleneck (the slowest stage) and RoundPipe's proxy cost of a
/// partition made elsewhere, so that partitions can be compared.
void scorePartition(Partition &p, llvm::ArrayRef<LayerCost> layers,
                    unsigned minStages);

/// The bytes stage `s` keeps on the device: weights, plus gradients for the
/// tail and backward stages.
int64_t stageBytes(const StageRange &s, llvm::ArrayRef<LayerCost> layers,
                   bool withGradients);

} // namespace mlir::rp

#endif // RP_ANALYSIS_PARTITION_H
