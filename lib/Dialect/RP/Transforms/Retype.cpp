//===- Retype.cpp - a module at another sequence length -------------------===//

#include "Retype.h"

#include "rp/Dialect/RP/RPOps.h"

#include <functional>

using namespace mlir;
using namespace mlir::rp;

Type mlir::rp::rescaled(Type type, int64_t from, int64_t to,
                        ArrayRef<int64_t> multiples, bool fromInputs) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return type;
  SmallVector<int64_t> dims(t.getShape());
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d == from) {
      d = to;
      continue;
    }
    if (i == 0 && fromInputs)
      for (int64_t m : multiples)
        if (d == from * m) {
          d = to * m;
          break;
        }
  }
  return t.clone(dims);
}

llvm::DenseSet<Value> mlir::rp::valuesFromInputs(func::FuncOp func,
                                                 ArrayRef<Value> seeds) {
  llvm::DenseSet<Value> from(func.getArguments().begin(),
                             func.getArguments().end());
  from.insert(seeds.begin(), seeds.end());
  std::function<void(Block &)> visit = [&](Block &block) {
    for (Operation &op : block) {
      bool any = llvm::any_of(op.getOperands(),
                              [&](Value v) { return from.contains(v); });
      if (auto layer = dyn_cast<LayerOp>(op)) {
        Block &body = layer.getBody().front();
        for (auto [operand, arg] :
             llvm::zip(layer.getInputs(), body.getArguments()))
          if (from.contains(operand))
            from.insert(arg);
        visit(body);
        for (auto [result, value] :
             llvm::zip(layer.getResults(), body.getTerminator()->getOperands()))
          if (from.contains(value))
            from.insert(result);
        continue;
      }
      if (any)
        from.insert(op.getResults().begin(), op.getResults().end());
    }
  };
  visit(func.getBody().front());
  return from;
}

SmallVector<int64_t> mlir::rp::sequenceMultiples(ModuleOp module,
                                                 int64_t rows) {
  SmallVector<int64_t> multiples{1};
  auto add = [&](int64_t m) {
    if (m > 1 && !llvm::is_contained(multiples, m))
      multiples.push_back(m);
  };
  add(rows);
  module.walk([&](MoERouteOp route) {
    add(route.getTopK());
    add(rows * route.getTopK());
  });
  return multiples;
}

OwningOpRef<ModuleOp> mlir::rp::retypedCopy(ModuleOp module, int64_t seq0,
                                            int64_t seq, int64_t rows) {
  SmallVector<int64_t> multiples = sequenceMultiples(module, rows);
  OwningOpRef<ModuleOp> copy = module.clone();
  // Which values are computed from the inputs, before any is retyped.
  llvm::DenseSet<Value> fromInputs;
  copy->walk([&](func::FuncOp f) {
    llvm::DenseSet<Value> mine = valuesFromInputs(f);
    fromInputs.insert(mine.begin(), mine.end());
  });
  auto retype = [&](Value v) {
    v.setType(
        rescaled(v.getType(), seq0, seq, multiples, fromInputs.contains(v)));
  };
  copy->walk([&](Operation *op) {
    for (Value r : op->getResults())
      retype(r);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          retype(a);
  });
  return copy;
}
