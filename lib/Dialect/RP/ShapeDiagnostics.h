//===- ShapeDiagnostics.h - shapes in rp verifier messages ------*- C++ -*-===//
//
// Private to the rp dialect library.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_SHAPEDIAGNOSTICS_H
#define RP_LIB_DIALECT_RP_SHAPEDIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::rp {

/// Prints a shape as `[2, 3]` in diagnostics, the way users write shapes.
struct ShapeStr {
  ArrayRef<int64_t> dims;
};

inline InFlightDiagnostic &operator<<(InFlightDiagnostic &diag, ShapeStr s) {
  diag << "[";
  llvm::interleaveComma(s.dims, diag, [&](int64_t d) { diag << d; });
  return diag << "]";
}

inline InFlightDiagnostic &&operator<<(InFlightDiagnostic &&diag, ShapeStr s) {
  diag << s;
  return std::move(diag);
}

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_SHAPEDIAGNOSTICS_H
