//===- Activity.cpp - which values of a model need a gradient -------------===//
//
// Two sweeps over @main, entering every layer's region: forward from the
// trainable parameters (varied), backward from the loss (useful). Both
// follow only the operands DifferentiableOpInterface says a gradient can
// reach, so an op without a VJP rule stops them.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/Activity.h"

using namespace mlir;
using namespace mlir::rp;

static bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// Forward step: `op`'s float results are varied when a differentiable
/// operand is.
static void forwardStep(Operation *op, llvm::DenseSet<Value> &varied) {
  auto diff = dyn_cast<DifferentiableOpInterface>(op);
  if (!diff)
    return;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (varied.contains(v) && diff.isDifferentiableOperand(i)) {
      for (Value r : op->getResults())
        if (isFloatTensor(r))
          varied.insert(r);
      return;
    }
}

/// Backward step: `op`'s differentiable operands are useful when a result
/// is.
static void backwardStep(Operation *op, llvm::DenseSet<Value> &useful) {
  auto diff = dyn_cast<DifferentiableOpInterface>(op);
  if (!diff || llvm::none_of(op->getResults(),
                             [&](Value r) { return useful.contains(r); }))
    return;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (diff.isDifferentiableOperand(i))
      useful.insert(v);
}

Activity::Activity(func::FuncOp main, ValueRange moreVaried,
                   ValueRange moreUseful) {
  Block &block = main.getBody().front();
  varied.insert(moreVaried.begin(), moreVaried.end());
  useful.insert(moreUseful.begin(), moreUseful.end());
  for (Operation &op : block) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      if (p.getTrainable())
        varied.insert(p.getResult());
      continue;
    }
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer) {
      forwardStep(&op, varied);
      continue;
    }
    Block &body = layer.getBody().front();
    for (auto [input, arg] : llvm::zip(layer.getInputs(), body.getArguments()))
      if (varied.contains(input))
        varied.insert(arg);
    for (Operation &inner : body.without_terminator())
      forwardStep(&inner, varied);
    for (auto [r, y] :
         llvm::zip(layer.getResults(), body.getTerminator()->getOperands()))
      if (varied.contains(y))
        varied.insert(r);
  }

  Operation *ret = block.getTerminator();
  if (ret->getNumOperands() != 0)
    useful.insert(ret->getOperand(0));
  if (useful.empty())
    return;
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    auto layer = dyn_cast<LayerOp>(op);
    if (!layer) {
      backwardStep(&op, useful);
      continue;
    }
    Block &body = layer.getBody().front();
    for (auto [r, y] :
         llvm::zip(layer.getResults(), body.getTerminator()->getOperands()))
      if (useful.contains(r))
        useful.insert(y);
    for (Operation &inner : llvm::reverse(body.without_terminator()))
      backwardStep(&inner, useful);
    for (auto [input, arg] : llvm::zip(layer.getInputs(), body.getArguments()))
      if (useful.contains(arg))
        useful.insert(input);
  }
}

llvm::DenseSet<Value> Activity::activeValues() const {
  llvm::DenseSet<Value> active;
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}
