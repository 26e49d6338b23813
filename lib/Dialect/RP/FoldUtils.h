//===- FoldUtils.h - shared limits of the rp folders ------------*- C++ -*-===//
//
// Private to the rp dialect library.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_FOLDUTILS_H
#define RP_LIB_DIALECT_RP_FOLDUTILS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::rp {

/// Constant folding expands dense attributes; past this many elements the
/// graph keeps the op (a compile-time blow-up is worse than a kernel call).
inline constexpr int64_t kMaxFoldElements = 1 << 16;

inline bool isSmall(Type type) {
  return cast<RankedTensorType>(type).getNumElements() <= kMaxFoldElements;
}

/// The constant `value` broadcast (numpy rules) to `type`'s shape, keeping
/// its element type; null when it is not a constant that can be expanded.
ElementsAttr broadcastElements(Attribute value, RankedTensorType type);

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_FOLDUTILS_H
