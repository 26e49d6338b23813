//===- MoEBlocks.h - mixture-of-experts blocks of an ONNX graph -*- C++ -*-===//
//
// Private to the ONNX importer: the stage that finds exported
// mixture-of-experts blocks and the handler of the node it replaces them
// by (MoEBlocks.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEBLOCKS_H
#define RP_LIB_IMPORT_ONNX_MOEBLOCKS_H

#include "NodeImporter.h"

namespace mlir::rp::onnx_import {

/// The domain of the nodes recognizeMoEBlocks writes; a model that uses it
/// itself is refused.
constexpr llvm::StringLiteral kMoEDomain = "rp.import.moe";

/// Replaces every mixture-of-experts block of `graph` (each TopK node
/// starts one) by one node `MoE` of kMoEDomain: inputs the tokens `x` ([T,
/// H]), the router logits ([T, E]), then the experts' W1 (E of them), W3
/// and W2 initializers (or, `stacked`, the two stacks; with `split`, DBRX's
/// three, the down one in the `x @ W` layout with `down_x_at_w`; with
/// `oss`, GPT-OSS's two stacks and two biases); attributes `top_k`,
/// `normalize` and
/// `softmax_after` (the softmax is over the k chosen logits), GPT-OSS's
/// `interleaved`, `alpha` and `limit`; output the block's combined [T, H].
/// Errors name the node that does not match.
///
/// Batched_mm experts behind a router of another form (MoERouted.h) get a
/// `MoE` node with `routed` (inputs x, the routing weights, the two stacks,
/// the chosen experts, all computed by the graph), or, with an activation
/// other than SiLU-gated, two: `part` 1 (x, the chosen experts, W13 ->
/// W13 times the dispatched rows, the positions, the counts) and `part` 2
/// (the activation's rows, W2, the positions, the counts, the weights ->
/// the combined output); the activation's own nodes stay in the graph.
/// (MoERecognize.cpp.)
LogicalResult recognizeMoEBlocks(onnx::GraphProto &graph, Location fileLoc);

/// Maps a kMoEDomain `MoE` node to rp.moe.route, rp.moe.dispatch, three
/// rp.moe.grouped_matmul over the stacked expert weights, rp.silu, rp.mul
/// and rp.moe.combine (a `routed` node without the route, a `part` node to
/// its half of them).
LogicalResult importMoENode(NodeImporter &n);

} // namespace mlir::rp::onnx_import

#endif // RP_LIB_IMPORT_ONNX_MOEBLOCKS_H
