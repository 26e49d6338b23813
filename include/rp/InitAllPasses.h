//===- InitAllPasses.h - passes the rp tools offer --------------*- C++ -*-===//

#ifndef RP_INITALLPASSES_H
#define RP_INITALLPASSES_H

#include "mlir/Transforms/Passes.h"
#include "rp/Dialect/RP/PreparePipeline.h"
#include "rp/Dialect/RP/RPPasses.h"
#include "rp/Dialect/RP/TrainPipeline.h"

namespace mlir::rp {

/// rp's passes and the upstream cleanups (canonicalize, cse, ...) used with
/// them.
inline void registerAllPasses() {
  registerRPPasses();
  registerPreparePipeline();
  registerTrainPipeline();
  registerTransformsPasses();
}

} // namespace mlir::rp

#endif // RP_INITALLPASSES_H
