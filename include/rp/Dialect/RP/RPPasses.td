//===- RPPasses.td - rp dialect passes ---------------------*- tablegen -*-===//
//
// The one list of rp's passes, kept in one file per pass family so that no
// file grows past 600 lines. RPPasses.h.inc (declarations and the one
// registration) and the pass documentation are generated from this file, so
// a new pass goes into its family's file and is registered with the rest:
//   RPGraphPasses.td     verify, externalize, group layers, fusions, dtype
//   RPTrainPasses.td     loss, shared recompute, autodiff, LoRA
//   RPSchedulePasses.td  layer costs, partition, lowering, transfers, memory
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPPASSES_TD
#define RP_DIALECT_RP_RPPASSES_TD

include "rp/Dialect/RP/RPGraphPasses.td"
include "rp/Dialect/RP/RPTrainPasses.td"
include "rp/Dialect/RP/RPSchedulePasses.td"

#endif // RP_DIALECT_RP_RPPASSES_TD
