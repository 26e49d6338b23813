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
/// and constants alone), layer bodies included; with `seeds`, from those
/// values too.
llvm::DenseSet<Value> valuesFromInputs(func::FuncOp func,
                                       llvm::ArrayRef<Value> seeds = {});

/// `type` with every dimension equal to `from` replaced by `to`; for a
/// value computed from the inputs (`fromInputs`), also a leading dimension
/// equal to `from` times one of `multiples` (flattened tokens, dispatched
/// rows), replaced by `to` times it. Only the leading one: those rows are
/// dimension 0 of every op that holds them, and a weight or a feature
/// dimension that happens to equal a multiple stays as it is.
Type rescaled(Type type, int64_t from, int64_t to,
              llvm::ArrayRef<int64_t> multiples, bool fromInputs);

/// The multiples of the sequence length that a graph's dimensions hold: the
/// sequence itself, the microbatch's tokens flattened (`rows` sequences),
/// and a mixture-of-experts layer's dispatched rows (tokens x top_k, one row
/// per token and chosen expert), which grow with the sequence too.
llvm::SmallVector<int64_t> sequenceMultiples(ModuleOp module, int64_t rows);

/// A copy of `module` at sequence length `to` (built at `from`, with
/// `rows` sequences per microbatch).
OwningOpRef<ModuleOp> retypedCopy(ModuleOp module, int64_t from, int64_t to,
                                  int64_t rows);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_RETYPE_H
