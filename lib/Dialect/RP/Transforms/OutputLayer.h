//===- OutputLayer.h - the model's output layer -----------------*- C++ -*-===//
//
// Private to the rp transforms: rp-add-lora leaves the output layer out of
// its default targets, and rp-quantize-base keeps its weight whole.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_DIALECT_RP_TRANSFORMS_OUTPUTLAYER_H
#define RP_LIB_DIALECT_RP_TRANSFORMS_OUTPUTLAYER_H

#include "rp/Dialect/RP/RPOps.h"

namespace mlir::rp {

/// True when `mm` is the model's output layer (the LM head): its result
/// reaches a result of @main, or the logits of an rp.cross_entropy, through
/// nothing but views and casts and layer boundaries.
bool isOutputLayer(MatmulOp mm);

} // namespace mlir::rp

#endif // RP_LIB_DIALECT_RP_TRANSFORMS_OUTPUTLAYER_H
