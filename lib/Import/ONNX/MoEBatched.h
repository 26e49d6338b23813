//===- MoEBatched.h - batched_mm experts of an ONNX MoE block -*- C++ -*-===//
//
// Private to the MoE matcher (MoEBlocks.cpp); see MoEBatched.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_MOEBATCHED_H
#define RP_LIB_IMPORT_ONNX_MOEBATCHED_H

#include "MoEGraphIndex.h"

namespace mlir::rp::onnx_import::moe {

/// The two stacks ([E, 2F, H] and [E, H, F]) of a batched_mm expert block
/// and which half of W13's rows is the gate.
struct BatchedExpert {
  std::string gateUp, down;
  bool gateFirst = true;
  /// The tokens repeated per slot that W13[ids] multiplies.
  std::string repeated;
};

/// `value` with the reshapes an exporter writes around it looked through.
std::string reshapeRoot(const GraphIndex &g, std::string value);

/// The [E, out, in] stack initializer (of rank `rank`: 2 for GPT-OSS's
/// [E, n] expert biases) `value` gathers rows of at the chosen experts `ids`
/// (Gather, or dynamo's GatherND of the expanded ids); "" if not.
std::string gatheredStack(const GraphIndex &g, StringRef value, StringRef ids,
                          int rank = 3);

/// The batched_mm experts whose output `weighted` (a Mul) weighs by the
/// routing: `ids` the TopK's chosen experts, `x` the block's tokens (empty:
/// any tokens, `repeated` says which).
std::optional<BatchedExpert> matchBatchedExpert(const GraphIndex &g,
                                                const onnx::NodeProto &weighted,
                                                StringRef ids, StringRef x);

} // namespace mlir::rp::onnx_import::moe

#endif // RP_LIB_IMPORT_ONNX_MOEBATCHED_H
