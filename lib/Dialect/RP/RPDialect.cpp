//===- RPDialect.cpp - rp dialect registration ----------------------------===//

#include "rp/Dialect/RP/RPDialect.h"
#include "rp/Dialect/RP/RPOps.h"

using namespace mlir;
using namespace mlir::rp;

#include "rp/Dialect/RP/RPDialect.cpp.inc"

void RPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "rp/Dialect/RP/RPOps.cpp.inc"
      >();
  registerScheduleTypes();
}

Operation *RPDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
