//===- ExpandAttention.h - rp.attention as its ops --------------*- C++ -*-===//
//
// rp.attention gives its mask no gradient (devices run it fused and a mask
// is almost always constant). A learned mask (a relative position bias)
// needs one, so rp-autodiff first rewrites such an attention into the ops
// it stands for, whose VJP rules differentiate the mask.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_EXPANDATTENTION_H
#define RP_DIALECT_RP_TRANSFORMS_EXPANDATTENTION_H

#include "rp/Dialect/RP/RPOps.h"

namespace mlir::rp {

/// Replaces `a` by matmul (Q K^T), the scale, the add of its float mask,
/// the causal where, softmax and matmul (by V). Fails with an error when
/// key/value heads are shared among query heads.
LogicalResult expandAttention(AttentionOp a);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_EXPANDATTENTION_H
