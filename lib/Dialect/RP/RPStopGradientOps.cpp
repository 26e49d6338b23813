//===- RPStopGradientOps.cpp - rp.stop_gradient ---------------------------===//
//
// The gradient stops here: the operand is not differentiable, so the
// activity analysis and rp-autodiff never ask for its rule on a path that
// needs a gradient, and the rule that is asked for (another operand on the
// path shares the value) gives none.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"

using namespace mlir;
using namespace mlir::rp;

bool StopGradientOp::isDifferentiableOperand(unsigned) { return false; }

LogicalResult StopGradientOp::buildVJP(OpBuilder &, ArrayRef<Value>,
                                       SmallVectorImpl<Value> &dxs) {
  dxs.assign({Value()});
  return success();
}
