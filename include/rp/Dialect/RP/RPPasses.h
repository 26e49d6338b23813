//===- RPPasses.h - rp dialect passes ---------------------------*- C++ -*-===//

#ifndef RP_DIALECT_RP_RPPASSES_H
#define RP_DIALECT_RP_RPPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "rp/Dialect/RP/RPOps.h"

namespace mlir::rp {

/// The storage and compute type of rp-convert-float-type (--dtype).
enum class ComputeType { f32, f16, bf16 };

/// Where rp-group-layers takes layers from.
enum class LayerSource { automatic, scope, structure };

#define GEN_PASS_DECL
#include "rp/Dialect/RP/RPPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "rp/Dialect/RP/RPPasses.h.inc"

} // namespace mlir::rp

#endif // RP_DIALECT_RP_RPPASSES_H
