//===- Activity.h - which values of a model need a gradient -----*- C++ -*-===//
//
// Activity analysis for rp-autodiff: a value needs a gradient when it is
// on a path from a trainable parameter to the loss through operands that
// VJP rules differentiate. Masks, rotary tables, position ids and float
// initializers nothing trainable reaches (or that reach the loss only
// through an attention mask or a comparison) get none: nothing is
// computed, stored, transferred or dumped for them.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_ACTIVITY_H
#define RP_ANALYSIS_ACTIVITY_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::rp {

/// The activity of every value of `@main` (function level and inside its
/// layers) in the loss graph of rp-attach-loss: `main` returns the loss sum
/// of its last layer first.
class Activity {
public:
  /// `moreVaried` are function arguments taken to depend on a trainable
  /// parameter and `moreUseful` values the loss is taken to depend on,
  /// beside the parameters and the loss: a token slice's kept prefix of
  /// keys and values (an earlier slice's, computed from the weights) and
  /// its own keys and values (which the later slices' losses read).
  explicit Activity(func::FuncOp main, ValueRange moreVaried = {},
                    ValueRange moreUseful = {});

  /// Depends on a trainable parameter through differentiable operands.
  bool isVaried(Value v) const { return varied.contains(v); }
  /// The loss depends on it through differentiable operands.
  bool isUseful(Value v) const { return useful.contains(v); }
  /// Needs a gradient: both.
  bool isActive(Value v) const { return isVaried(v) && isUseful(v); }
  /// Every active value.
  llvm::DenseSet<Value> activeValues() const;

private:
  llvm::DenseSet<Value> varied, useful;
};

} // namespace mlir::rp

#endif // RP_ANALYSIS_ACTIVITY_H
