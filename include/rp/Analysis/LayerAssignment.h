//===- LayerAssignment.h - which layer each op of a graph is in -*- C++ -*-===//
//
// Finds the layers of a flat imported graph, the units pipeline stages are
// made of. Two sources of truth, tried in order:
//  1. exporter scopes in op locations (`/h.3/attn/MatMul`,
//     `/encoder/layers/encoder_layer_1/...`): the repeated numbered scope is
//     the layer;
//  2. repeated structure: the points where a single activation is live (the
//     residual stream) cut the graph into segments, and the longest run of
//     identical segment groups are the layers.
// Ops before the first layer form a prefix layer, ops after the last a
// suffix layer. Constants and parameters belong to no layer.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_LAYERASSIGNMENT_H
#define RP_ANALYSIS_LAYERASSIGNMENT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mlir::rp {

struct LayerAssignment {
  /// Layer names in program order.
  std::vector<std::string> names;
  /// The layer index of every compute op.
  llvm::DenseMap<Operation *, unsigned> layerOf;
  /// How the layers were found, for messages: "scope" or "structure".
  std::string source;
};

/// True for ops that belong to no layer: constants, parameters and the
/// terminator.
bool isLayerFree(Operation *op);

/// Layers from exporter scopes; failure when the locations carry none.
FailureOr<LayerAssignment> assignLayersByScope(func::FuncOp func);

/// Layers from repeated structure; failure when nothing repeats.
FailureOr<LayerAssignment> assignLayersByStructure(func::FuncOp func);

/// Checks that no layer reads a value computed by a later one, so the layers
/// can run in order; reports the first offending op when `emit` is set.
LogicalResult verifyLayerOrder(func::FuncOp func, const LayerAssignment &a,
                               bool emit);

} // namespace mlir::rp

#endif // RP_ANALYSIS_LAYERASSIGNMENT_H
