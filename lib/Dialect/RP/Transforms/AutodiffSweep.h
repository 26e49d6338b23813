//===- AutodiffSweep.h - rp-autodiff's reverse sweep ----------*- C++ -*-===//
//
// The pieces of rp-autodiff that do not depend on the stages: the reverse
// sweep over a list of ops by their VJP rules, which operands carry a
// weight, and inlining or merging consecutive layers.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_AUTODIFFSWEEP_H
#define RP_DIALECT_RP_TRANSFORMS_AUTODIFFSWEEP_H

#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::rp {

/// Whether `v` is a ranked tensor of floats.
bool isFloatTensor(Value v);

/// Adds `g` to the gradient of `v` in `grads`, emitting an add at `b` when
/// `v` already has one.
void accumulate(OpBuilder &b, Location loc,
                llvm::MapVector<Value, Value> &grads, Value v, Value g);

/// Values of `ops` (in order) that depend on a value of `seeds` through
/// differentiable ops: the ones that need a gradient.
llvm::DenseSet<Value> requiringGrad(ArrayRef<Operation *> ops,
                                    const llvm::DenseSet<Value> &seeds);

/// Gradients of weights kept apart per use, in the order the sweep finds
/// them (the deepest use first).
using PerUse = llvm::MapVector<Value, SmallVector<Value>>;

/// Emits at `b` the reverse sweep over `ops` given the seed gradients in
/// `grads`; afterwards `grads` holds the gradients of every value in
/// `needs` that a seed reaches, except the values of `perUse`, whose
/// contributions `uses` lists one by one.
LogicalResult reverseSweep(OpBuilder &b, ArrayRef<Operation *> ops,
                           const llvm::DenseSet<Value> &needs,
                           llvm::MapVector<Value, Value> &grads,
                           const llvm::DenseSet<Value> *perUse = nullptr,
                           PerUse *uses = nullptr);

/// Parameters and what the function computes from them alone (the casts
/// of mixed precision): values no layer computes.
bool isWeight(Value v);

/// The block arguments of `body` that `inputs` bind to weights: each use
/// of one gets a gradient of its own.
llvm::DenseSet<Value> weightArgs(ValueRange inputs, Block &body);

/// The gradients a region yields for its block argument `arg`.
SmallVector<Value> gradsOf(Value arg,
                           const llvm::MapVector<Value, Value> &grads,
                           const PerUse &uses);

/// The ops of `layer`'s body but its terminator.
SmallVector<Operation *> bodyOps(LayerOp layer);

/// Clones the bodies of `group` in order at `inner` (the end of `body`,
/// whose arguments are `inputs`), each layer reading the group's inputs or
/// an earlier layer's clones; returns where every input and layer result
/// went.
IRMapping inlineLayers(ArrayRef<LayerOp> group, ArrayRef<Value> inputs,
                       Block &body, OpBuilder &inner,
                       SmallVectorImpl<Operation *> &cloned);

/// Replaces consecutive layers, of which only the last one's results are
/// used after them, by one layer named `first..last` that computes them
/// all (a fused tail of several layers). Results of the earlier layers
/// that the function returns (a token slice's own keys and values) become
/// results of the merged layer after the last one's.
FailureOr<LayerOp> mergeLayers(ArrayRef<LayerOp> group);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_AUTODIFFSWEEP_H
