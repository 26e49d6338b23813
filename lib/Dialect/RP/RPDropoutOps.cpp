//===- RPDropoutOps.cpp - rp.dropout --------------------------------------===//
//
// The key is one dropout_key row (seed, step, microbatch, on), the
// probability one the kernels take (a drop threshold below 2^32), and the
// tensor number a 32-bit counter word (kernels/Philox.h).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"

#include <cstdint>

using namespace mlir;
using namespace mlir::rp;

LogicalResult DropoutOp::verify() {
  auto key = getKey().getType();
  if (key.getShape() != ArrayRef<int64_t>{1, 4})
    return emitOpError("expected the key to be one dropout_key row "
                       "tensor<1x4xi64> (seed, step, microbatch, on), got ")
           << key;
  double p = getProbability().convertToDouble();
  if (!(p >= 0 && p < 1))
    return emitOpError("expected a probability in [0, 1), got ") << p;
  int64_t tensor = getTensor();
  if (tensor < 0 || tensor > int64_t(UINT32_MAX))
    return emitOpError("expected a tensor number in [0, 2^32), got ") << tensor;
  if (getType().getRank() == 0)
    return emitOpError("expected a tensor with a batch dimension, got ")
           << getType();
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &dxs) {
  dxs.assign({DropoutOp::create(b, getLoc(), dys[0], getKey(),
                                getProbabilityAttr(), getTensorAttr()),
              Value()});
  return success();
}
