//===- Retype.h - a module at another sequence length -----------*- C++ -*-===//
//
// rp-report-max-seq and rp-predict-token-slices cost a graph at lengths it
// was not built at: a copy of the module with every dimension equal to the
// sequence length scaled (and the leading dimension of the values computed
// from the inputs that flatten tokens or dispatch them to experts). A
// weight or feature dimension that happens to equal the sequence length is
// scaled too: build the graph at a length no feature dimension has.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_RETYPE_H
#define RP_DIALECT_RP_TRANSFORMS_RETYPE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::rp {

/// The values of `func` computed from its arguments (not from parameters
/// and constants alone), layer bodies included.
llvm::DenseSet<Value> valuesFromInputs(func::FuncOp func);

/// A copy of `module` at sequence length `to` (built at `from`, with
/// `rows` sequences per microbatch).
OwningOpRef<ModuleOp> retypedCopy(ModuleOp module, int64_t from, int64_t to,
                                  int64_t rows);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_RETYPE_H
