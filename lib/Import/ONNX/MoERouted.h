//===- MoERouted.h - batched_mm experts behind any routing -*- C++ -*-===//
//
// Private to the MoE stage (MoEBlocks.cpp); see MoERouted.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEROUTED_H
#define RP_LIB_IMPORT_ONNX_MOEROUTED_H

#include "MoEBatched.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::rp::onnx_import::moe {

/// transformers 5's batched_mm experts whose chosen experts and routing
/// weights are ordinary values of the graph (computed from a TopK that
/// rp-import imports op by op): what the replacement MoE node reads.
struct RoutedExperts {
  /// The tokens (any shape with H as the last dimension, row-major [T, H]),
  /// the chosen experts and their weights (T * k elements each, row-major
  /// [T, k]).
  std::string x, ids, weights;
  int64_t topK = 0;
  BatchedExpert experts;
  /// The Mul by the weights, the [T, k, H] Reshape and the ReduceSum over
  /// the k slots; the replacement goes at the last, whose output it takes.
  llvm::DenseSet<int> nodes;
  int last = -1;
  std::string output;
};

/// Matches the batched_mm experts whose weighted Mul is node `mul`: both
/// stacks gathered at one value of chosen experts, the tokens repeated k
/// times each (repeat_interleave: Unsqueeze at axis 1, Expand [1, k, 1],
/// Reshape), the weighted rows summed over each token's k slots. Returns
/// nothing when `mul` is not such a Mul.
std::optional<RoutedExperts> matchRoutedExperts(const GraphIndex &g, int mul);

/// batched_mm experts with an activation of any elementwise form between
/// their two matmuls (HunYuan's, Inkling's soft caps, MiniMax's clamped
/// SwiGLU, Nemotron-H's squared ReLU without a gate): the block is cut in
/// two around the activation, whose nodes stay in the graph. `up` replaces
/// the first matmul: the dispatched rows times W13, written to `upValue`
/// (the same [T k, n] rows in the experts' order, which an elementwise
/// activation cannot tell apart), and the dispatch's positions and counts;
/// `down` replaces the second matmul, the weighting and the sum over the
/// slots: W2 times `hidden`, combined.
struct SplitExperts {
  std::string x, ids, weights, gateUp, down, upValue, hidden, output;
  int64_t topK = 0;
  /// The stacks are [E, in, out] (`x @ W[e]`, Aria), not [E, out, in].
  bool xAtW = false;
  /// With identity experts (LongCat-Flash's "zero" experts: ids from
  /// `routedExperts` on, each token's row weighted as it is), the routed
  /// experts' count; 0 without.
  int64_t routedExperts = 0;
  int upAt = -1, last = -1;
  llvm::DenseSet<int> nodes;
};

/// Whether `node` computes each row of its outputs from the same row of
/// its run-time inputs alone (the rows being the dispatched (token, slot)
/// pairs, in any order): an elementwise op, or a split of the last axis.
bool rowwise(const GraphIndex &g, const onnx::NodeProto &node);

/// transformers 5's eager experts loop as the TorchScript exporter writes
/// it (MoERoutedLoop.cpp), behind a router imported op by op: the same cut
/// as SplitExperts, the activation's nodes of the loop's first iteration
/// kept (every iteration checked to compute the same), the others dropped.
/// `oneHot` is the node one-hot encoding the chosen experts. Sets `why`
/// when the loop is of this form but leaves out experts.
std::optional<SplitExperts> matchLoopExperts(const GraphIndex &g, int oneHot,
                                             std::string &why);

/// Matches such experts whose weighted Mul is node `mul`: every node
/// between the first matmul's output and the second's input is elementwise
/// (its other inputs one-element constants) or splits the rows along their
/// last axis, and nothing else reads what they compute.
std::optional<SplitExperts> matchSplitExperts(const GraphIndex &g, int mul);

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOEROUTED_H
