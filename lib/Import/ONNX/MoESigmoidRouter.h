//===- MoESigmoidRouter.h - DeepSeek-V3's router in an ONNX graph -*- C++ -*-//
//
// Private to MoEBlocks.cpp: the matcher of DeepSeek-V3's routing (sigmoid
// scores, a correction bias, group-limited top-k) as the TorchScript
// exporter writes it (MoESigmoidRouter.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOESIGMOIDROUTER_H
#define RP_LIB_IMPORT_ONNX_MOESIGMOIDROUTER_H

#include "MoEGraphIndex.h"

#include <limits>

namespace mlir::rp::onnx_import::moe {

/// What the replacement MoE node needs of a sigmoid router, and the nodes
/// that pick the experts (they are replaced with the block).
struct SigmoidRouter {
  /// The TopK that picks the experts (the last of the router's TopKs).
  int expertTopK = -1;
  /// sigmoid(logits) ([T, E], the weights are read from it) and the
  /// scores the experts are chosen by (`scores + bias`).
  std::string scores, choice;
  /// `choice` viewed as [T, groups, E / groups]; a group's score is the sum
  /// of its `groupTop` best; the `topkGroup` best groups are kept and the
  /// other experts' scores replaced by `fill`.
  int64_t groups = 1, groupTop = 2, topkGroup = 1;
  float fill = -std::numeric_limits<float>::infinity();
  /// weights = gather(scores, experts), divided by their sum plus `eps`
  /// when `normalize`, times `scale`.
  bool normalize = false;
  float eps = 0.0f, scale = 1.0f;
  /// The value holding those weights, which the experts' outputs are
  /// weighted by (through views and indexing only).
  std::string weights;
  /// The group-selection nodes before `expertTopK`, the first TopK among
  /// them.
  SmallVector<int> nodes;
};

/// The values of an int64 constant (a Reshape's shape, an Expand's, a
/// reduction's axes): a Constant, an initializer, or dynamo's Concat of
/// one-element constants.
std::optional<SmallVector<int64_t>> constantInts(const GraphIndex &g,
                                                 StringRef value);

/// The constant tensor behind `value` (a Constant node or an initializer,
/// through Cast, dynamo's CastLike and Identity), null if none.
const onnx::TensorProto *constantTensor(const GraphIndex &g, StringRef value);

/// A one-element float constant (through Cast, CastLike and Identity).
std::optional<double> scalarFloat(const GraphIndex &g, StringRef value);

/// Matches the router whose first TopK is node `topKIndex`. Returns false
/// when the TopK's scores are not `Sigmoid(logits) + bias` (not this form:
/// `why` stays empty) or when a part of the form differs (`why` says which,
/// `at` is the node).
bool matchSigmoidRouter(const GraphIndex &g, int topKIndex, SigmoidRouter &r,
                        std::string &why, int &at);

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOESIGMOIDROUTER_H
