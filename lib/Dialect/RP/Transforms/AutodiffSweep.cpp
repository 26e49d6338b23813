//===- AutodiffSweep.cpp - rp-autodiff's reverse sweep --------------------===//
//
// The pieces of rp-autodiff that do not depend on the stages: the reverse
// sweep over a list of ops by their VJP rules, which operands carry a
// weight, and inlining or merging consecutive layers.
//
//===----------------------------------------------------------------------===//

#include "AutodiffSweep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::rp {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// Adds `g` to the gradient of `v` in `grads`, emitting an add at `b` when
/// `v` already has one.
void accumulate(OpBuilder &b, Location loc,
                llvm::MapVector<Value, Value> &grads, Value v, Value g) {
  auto [it, inserted] = grads.insert({v, g});
  if (!inserted)
    it->second = AddOp::create(b, loc, it->second, g);
}

/// Values of `ops` (in order) that depend on a value of `seeds` through
/// differentiable ops: the ones that need a gradient.
llvm::DenseSet<Value> requiringGrad(ArrayRef<Operation *> ops,
                                    const llvm::DenseSet<Value> &seeds) {
  llvm::DenseSet<Value> needs(seeds);
  for (Operation *op : ops) {
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff || llvm::none_of(llvm::enumerate(op->getOperands()), [&](auto e) {
          return needs.contains(e.value()) &&
                 diff.isDifferentiableOperand(e.index());
        }))
      continue;
    for (Value r : op->getResults())
      if (isFloatTensor(r))
        needs.insert(r);
  }
  return needs;
}

/// Emits at `b` the reverse sweep over `ops` given the seed gradients in
/// `grads`; afterwards `grads` holds the gradients of every value in
/// `needs` that a seed reaches, except the values of `perUse`, whose
/// contributions `uses` lists one by one.
LogicalResult reverseSweep(OpBuilder &b, ArrayRef<Operation *> ops,
                           const llvm::DenseSet<Value> &needs,
                           llvm::MapVector<Value, Value> &grads,
                           const llvm::DenseSet<Value> *perUse, PerUse *uses) {
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> dys;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = grads.lookup(r);
      dys.push_back(g);
      any |= g != nullptr;
    }
    if (!any || llvm::none_of(op->getOperands(),
                              [&](Value v) { return needs.contains(v); }))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return op->emitOpError("is on the path to the loss but has no "
                             "vector-Jacobian rule");
    SmallVector<Value> dxs;
    if (failed(diff.buildVJP(b, dys, dxs)))
      return failure();
    for (auto [operand, dx] : llvm::zip(op->getOperands(), dxs)) {
      if (!dx || !needs.contains(operand))
        continue;
      if (perUse && perUse->contains(operand))
        (*uses)[operand].push_back(dx);
      else
        accumulate(b, op->getLoc(), grads, operand, dx);
    }
  }
  return success();
}

/// Parameters and what the function computes from them alone (the casts
/// of mixed precision): values no layer computes.
bool isWeight(Value v) {
  return !isa<BlockArgument>(v) && !isa<LayerOp>(v.getDefiningOp());
}

/// A weight used twice in one layer (a tied embedding in a fused tail)
/// gets one gradient per use, summed after the microbatches like uses in
/// different layers: the sum's order then does not depend on how layers
/// are grouped into stages.
llvm::DenseSet<Value> weightArgs(ValueRange inputs, Block &body) {
  llvm::DenseSet<Value> args;
  for (auto [input, arg] : llvm::zip(inputs, body.getArguments()))
    if (isWeight(input))
      args.insert(arg);
  return args;
}

/// The gradients a region yields for its block argument `arg`.
SmallVector<Value> gradsOf(Value arg,
                           const llvm::MapVector<Value, Value> &grads,
                           const PerUse &uses) {
  if (auto it = uses.find(arg); it != uses.end())
    return it->second;
  if (Value g = grads.lookup(arg))
    return {g};
  return {};
}

SmallVector<Operation *> bodyOps(LayerOp layer) {
  SmallVector<Operation *> ops;
  for (Operation &op : layer.getBody().front().without_terminator())
    ops.push_back(&op);
  return ops;
}

/// Clones the bodies of `group` in order at `inner` (the end of `body`, whose
/// arguments are `inputs`), each layer reading the group's inputs or an
/// earlier layer's clones; returns where every input and layer result went.
IRMapping inlineLayers(ArrayRef<LayerOp> group, ArrayRef<Value> inputs,
                       Block &body, OpBuilder &inner,
                       SmallVectorImpl<Operation *> &cloned) {
  IRMapping outer;
  for (auto [i, v] : llvm::enumerate(inputs))
    outer.map(v, body.getArgument(i));
  for (LayerOp l : group) {
    Block &fwd = l.getBody().front();
    IRMapping map;
    for (auto [arg, in] : llvm::zip(fwd.getArguments(), l.getInputs()))
      map.map(arg, outer.lookup(in));
    for (Operation *op : bodyOps(l))
      cloned.push_back(inner.clone(*op, map));
    auto yield = cast<YieldOp>(fwd.getTerminator());
    for (auto [r, y] : llvm::zip(l.getResults(), yield.getOperands()))
      outer.map(r, map.lookupOrDefault(y));
  }
  return outer;
}

/// Replaces consecutive layers, of which only the last one's results are
/// used after them, by one layer named `first..last` that computes them all
/// (a fused tail of several layers). Results of the earlier layers that the
/// function returns (a token slice's own keys and values) become results
/// of the merged layer after the last one's.
FailureOr<LayerOp> mergeLayers(ArrayRef<LayerOp> group) {
  llvm::SmallPtrSet<Operation *, 8> members;
  for (LayerOp l : group)
    members.insert(l.getOperation());
  SmallVector<Value> returned;
  for (LayerOp l : group.drop_back())
    for (Value r : l.getResults())
      for (Operation *user : r.getUsers()) {
        if (members.contains(user))
          continue;
        if (!isa<func::ReturnOp>(user))
          return l.emitOpError("feeds a layer after the fused tail it is "
                               "part of; the tail must end the model");
        if (!llvm::is_contained(returned, r))
          returned.push_back(r);
      }
  LayerOp lastLayer = group.back();
  SmallVector<Type> types(lastLayer.getResultTypes());
  for (Value r : returned)
    types.push_back(r.getType());
  llvm::SetVector<Value> inputs;
  for (LayerOp l : group)
    for (Value in : l.getInputs())
      if (!members.contains(in.getDefiningOp()))
        inputs.insert(in);
  LayerOp first = group.front(), last = group.back();
  OpBuilder b(last);
  auto merged = LayerOp::create(b, last.getLoc(),
                                (first.getName() + ".." + last.getName()).str(),
                                types, inputs.getArrayRef());
  Block &body = merged.getBody().front();
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  SmallVector<Operation *> cloned;
  IRMapping outer =
      inlineLayers(group, inputs.getArrayRef(), body, inner, cloned);
  SmallVector<Value> ys;
  for (Value r : last.getResults())
    ys.push_back(outer.lookup(r));
  for (Value r : returned)
    ys.push_back(outer.lookup(r));
  YieldOp::create(inner, last.getLoc(), ys);
  last->replaceAllUsesWith(
      merged->getResults().take_front(last.getNumResults()));
  for (auto [r, m] : llvm::zip(
           returned, merged->getResults().drop_front(last.getNumResults())))
    r.replaceAllUsesExcept(m, members);
  for (LayerOp l : llvm::reverse(group))
    l.erase();
  return merged;
}

} // namespace mlir::rp
