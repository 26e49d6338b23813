//===- RPDialect.h - rp dialect ---------------------------------*- C++ -*-===//

#ifndef RP_DIALECT_RP_RPDIALECT_H
#define RP_DIALECT_RP_RPDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "rp/Dialect/RP/RPDialect.h.inc"

namespace mlir::rp {
/// A unit attribute rp-autodiff puts on the ops of a backward layer that
/// recompute the forward; the plan exporter marks their kernel calls.
inline constexpr llvm::StringLiteral kRecomputeAttr = "rp.recompute";
} // namespace mlir::rp

#endif // RP_DIALECT_RP_RPDIALECT_H
