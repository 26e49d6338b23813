//===- GroupLayers.cpp - rp-group-layers ----------------------------------===//
//
// Outlines the layers found by the LayerAssignment analysis into rp.layer
// ops.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/LayerAssignment.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::rp {
#define GEN_PASS_DEF_GROUPLAYERSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// Moves the ops of each layer into an rp.layer, in layer order, before the
/// function's terminator.
static void outline(func::FuncOp func, const LayerAssignment &a) {
  Block &body = func.getBody().front();
  std::vector<SmallVector<Operation *>> members(a.names.size());
  for (Operation &op : body) {
    auto it = a.layerOf.find(&op);
    if (it != a.layerOf.end())
      members[it->second].push_back(&op);
  }
  OpBuilder builder(body.getTerminator());
  for (auto [index, ops] : llvm::enumerate(members)) {
    if (ops.empty())
      continue;
    llvm::SmallPtrSet<Operation *, 32> inside(ops.begin(), ops.end());
    llvm::SetVector<Value> inputs, outputs;
    for (Operation *op : ops) {
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && (inside.count(def) || isa<ConstantOp>(def)))
          continue;
        inputs.insert(v);
      }
      for (Value r : op->getResults())
        if (llvm::any_of(r.getUsers(),
                         [&](Operation *user) { return !inside.count(user); }))
          outputs.insert(r);
    }
    Location loc = NameLoc::get(builder.getStringAttr(a.names[index]),
                                ops.front()->getLoc());
    auto layer = LayerOp::create(builder, loc, a.names[index],
                                 ValueRange(outputs.getArrayRef()).getTypes(),
                                 inputs.getArrayRef());
    Block &inner = layer.getBody().front();
    OpBuilder innerBuilder = OpBuilder::atBlockEnd(&inner);
    IRMapping constants;
    for (Operation *op : ops) {
      op->moveBefore(&inner, inner.end());
      // A constant is copied into every layer that uses it: layers are
      // isolated, and constants cost nothing to duplicate.
      for (OpOperand &use : op->getOpOperands()) {
        auto c = use.get().getDefiningOp<ConstantOp>();
        if (!c)
          continue;
        if (!constants.contains(c.getResult())) {
          OpBuilder::InsertionGuard guard(innerBuilder);
          innerBuilder.setInsertionPointToStart(&inner);
          constants.map(c.getResult(), innerBuilder.clone(*c)->getResult(0));
        }
        use.set(constants.lookup(c.getResult()));
      }
    }
    for (auto [input, arg] : llvm::zip(inputs, inner.getArguments()))
      Value(input).replaceUsesWithIf(arg, [&](OpOperand &use) {
        return use.getOwner()->getParentOp() == layer;
      });
    innerBuilder.setInsertionPointToEnd(&inner);
    YieldOp::create(innerBuilder, loc, outputs.getArrayRef());
    for (auto [output, result] : llvm::zip(outputs, layer.getResults()))
      Value(output).replaceUsesWithIf(result, [&](OpOperand &use) {
        return use.getOwner()->getParentOp() != layer;
      });
  }
  // Constants now live inside the layers that use them.
  for (Operation &op : llvm::make_early_inc_range(body))
    if (isa<ConstantOp>(op) && op.use_empty())
      op.erase();
}

namespace {
struct GroupLayersPass : rp::impl::GroupLayersPassBase<GroupLayersPass> {
  using GroupLayersPassBase::GroupLayersPassBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.getOps<LayerOp>().empty())
        continue;
      if (failed(groupFunction(func)))
        return signalPassFailure();
    }
  }

  LogicalResult groupFunction(func::FuncOp func) {
    FailureOr<LayerAssignment> a = failure();
    if (source != LayerSource::structure) {
      a = assignLayersByScope(func);
      if (succeeded(a) && failed(verifyLayerOrder(func, *a, false))) {
        if (source == LayerSource::scope)
          return verifyLayerOrder(func, *a, true);
        a = failure();
      }
    }
    if (failed(a) && source != LayerSource::scope) {
      a = assignLayersByStructure(func);
      if (succeeded(a) && failed(verifyLayerOrder(func, *a, false)))
        a = failure();
    }
    if (failed(a)) {
      if (source != LayerSource::automatic)
        return func.emitError("no layers found from ")
               << (source == LayerSource::scope ? "exporter scopes"
                                                : "repeated structure")
               << "; try --source=auto";
      // Nothing repeats and nothing is named: one layer holds the model.
      LayerAssignment whole;
      whole.names.push_back("model");
      for (Operation &op : func.getBody().front())
        if (!isLayerFree(&op))
          whole.layerOf[&op] = 0;
      if (whole.layerOf.empty())
        return success();
      a = std::move(whole);
    }
    outline(func, *a);
    return success();
  }
};
} // namespace
