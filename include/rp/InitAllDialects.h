//===- InitAllDialects.h - dialects the rp tools parse ----------*- C++ -*-===//

#ifndef RP_INITALLDIALECTS_H
#define RP_INITALLDIALECTS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "rp/Dialect/RP/RPDialect.h"

namespace mlir::rp {

/// rp and exactly the upstream dialects an rp module uses: `func` holds the
/// model's entry point.
inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<RPDialect, func::FuncDialect>();
}

} // namespace mlir::rp

#endif // RP_INITALLDIALECTS_H
