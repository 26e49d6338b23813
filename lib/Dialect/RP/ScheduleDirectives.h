//===- ScheduleDirectives.h - rp.schedule's custom directives ---*- C++ -*-===//
//
// rp.schedule writes its typed kind and hardware as the strings the options
// use (`"round-robin"`, `"rtx4090"`). Defined in RPScheduleOps.cpp, used by
// the generated op definitions in RPOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_SCHEDULEDIRECTIVES_H
#define RP_LIB_DIALECT_RP_SCHEDULEDIRECTIVES_H

#include "rp/Dialect/RP/RPOps.h"

namespace mlir::rp {

ParseResult parseScheduleKindName(OpAsmParser &parser, ScheduleKindAttr &kind);
void printScheduleKindName(OpAsmPrinter &p, ScheduleOp op,
                           ScheduleKindAttr kind);
ParseResult parseHardwareName(OpAsmParser &parser, HardwareAttr &hw);
void printHardwareName(OpAsmPrinter &p, ScheduleOp op, HardwareAttr hw);

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_SCHEDULEDIRECTIVES_H
