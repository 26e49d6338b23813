//===- FuseAttentionSinks.h - attention sinks for rp-fuse-attention -*- C++
//-*-===//
//
// Private to rp-fuse-attention. GPT-OSS's eager attention writes its sinks
// (a learned logit per query head) as one more column of the scores,
//   p = softmax(concat([s, sink], -1) - max(...))[..., :T],
// which FuseAttention.cpp turns into rp.attention's `sinks` operand.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_TRANSFORMS_FUSEATTENTIONSINKS_H
#define RP_LIB_DIALECT_RP_TRANSFORMS_FUSEATTENTIONSINKS_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::rp {

/// A softmax over the scores and a sink column whose sink probability is
/// dropped after it.
struct SinkSoftmax {
  Value scores;  // [.., S, T]: the softmax's input without the sink column
  Value column;  // the sink column's source, broadcast to [B, H, S, 1]
  Value dropped; // [.., S, T]: the probabilities of the keys
};

/// Matches `slice(softmax(concat(s, c) [- max(concat(s, c))]))` that keeps
/// exactly s's columns, the sink column c (either end of the concat) one
/// value per head: constant along the batch, the rows and its column. The
/// softmax's result must feed only that slice.
std::optional<SinkSoftmax> matchSinkSoftmax(SoftmaxOp softmax);

/// The `[heads]` sinks operand of rp.attention from a matched sink column:
/// its source reshaped (and broadcast when it is one value for every head)
/// and cast to `elementType`.
Value buildSinks(PatternRewriter &rewriter, Location loc,
                 const SinkSoftmax &match, int64_t heads, Type elementType);

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_TRANSFORMS_FUSEATTENTIONSINKS_H
