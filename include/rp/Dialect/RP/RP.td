//===- RP.td - rp dialect umbrella -------------------------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RP_TD
#define RP_DIALECT_RP_RP_TD

include "rp/Dialect/RP/RPDialect.td"
include "rp/Dialect/RP/RPAttrs.td"
include "rp/Dialect/RP/RPTypes.td"
include "rp/Dialect/RP/RPOps.td"

#endif // RP_DIALECT_RP_RP_TD
