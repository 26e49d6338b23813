//===- RPDialect.h - rp dialect ---------------------------------*- C++ -*-===//

#ifndef RP_DIALECT_RP_RPDIALECT_H
#define RP_DIALECT_RP_RPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "rp/Dialect/RP/RPDialect.h.inc"

#endif // RP_DIALECT_RP_RPDIALECT_H
