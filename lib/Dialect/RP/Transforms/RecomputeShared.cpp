//===- RecomputeShared.cpp - rp-recompute-shared --------------------------===//
//
// A value one layer computes from weights and constants alone (a causal
// mask reshaped from a float initializer, rotary tables, a relative
// position bias gathered from a learned table) and another layer reads is
// recomputed in every layer that reads it. Stages then need no transfer of
// it, and when it needs a gradient, each layer's contribution lands on the
// weight it came from, where per-use gradients are summed in one order for
// any number of stages.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::rp {
#define GEN_PASS_DEF_RECOMPUTESHAREDPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Function-level values no input reaches: parameters, constants and the
/// ops between layers computed from them alone (mixed precision's casts).
class Weights {
public:
  bool contains(Value v) {
    auto [it, fresh] = known.try_emplace(v, false);
    if (!fresh)
      return it->second;
    Operation *def = v.getDefiningOp();
    bool result = false;
    if (def && (isa<ParamOp, ConstantOp>(def) ||
                (!isa<LayerOp>(def) && def->getNumRegions() == 0 &&
                 isMemoryEffectFree(def) &&
                 llvm::all_of(def->getOperands(),
                              [&](Value o) { return contains(o); }))))
      result = true;
    known[v] = result;
    return result;
  }

private:
  llvm::DenseMap<Value, bool> known;
};

/// The ops of `layer` that compute `y` from weights and constants alone, in
/// order, and the weights they read; false when `y` depends on an input.
bool invariantSlice(LayerOp layer, Value y, Weights &weights,
                    llvm::SetVector<Operation *> &ops,
                    llvm::SetVector<Value> &reads) {
  if (auto arg = dyn_cast<BlockArgument>(y)) {
    if (arg.getOwner() != &layer.getBody().front())
      return false;
    Value input = layer.getInputs()[arg.getArgNumber()];
    if (!weights.contains(input))
      return false;
    reads.insert(input);
    return true;
  }
  Operation *def = y.getDefiningOp();
  if (ops.contains(def))
    return true;
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return false;
  for (Value o : def->getOperands())
    if (!invariantSlice(layer, o, weights, ops, reads))
      return false;
  ops.insert(def);
  return true;
}

/// The block argument of `consumer` that reads `v`, added when none does.
Value argFor(LayerOp consumer, Value v) {
  Block &body = consumer.getBody().front();
  for (auto [input, arg] : llvm::zip(consumer.getInputs(), body.getArguments()))
    if (input == v)
      return arg;
  consumer->insertOperands(consumer->getNumOperands(), v);
  return body.addArgument(v.getType(), v.getLoc());
}

/// Recomputes result `index` of `producer` (computed by `ops` from `reads`)
/// at the top of every other layer that reads it.
void recomputeInConsumers(LayerOp producer, unsigned index,
                          ArrayRef<Operation *> ops, ArrayRef<Value> reads) {
  Value result = producer.getResult(index);
  Value y = producer.getBody().front().getTerminator()->getOperand(index);
  llvm::SetVector<LayerOp> consumers;
  for (Operation *user : result.getUsers())
    if (auto l = dyn_cast<LayerOp>(user))
      consumers.insert(l);
  for (LayerOp consumer : consumers) {
    Block &body = consumer.getBody().front();
    IRMapping map;
    for (Value w : reads) {
      Value inner = producer.getBody().getArgument(
          llvm::find(producer.getInputs(), w) - producer.getInputs().begin());
      map.map(inner, argFor(consumer, w));
    }
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    for (Operation *op : ops)
      b.clone(*op, map);
    Value recomputed = map.lookupOrDefault(y);
    // Drop the inputs that read the result (from the last, so indices
    // stay valid).
    for (unsigned i = consumer.getInputs().size(); i-- > 0;)
      if (consumer.getInputs()[i] == result) {
        body.getArgument(i).replaceAllUsesWith(recomputed);
        body.eraseArgument(i);
        consumer->eraseOperand(i);
      }
  }
}

/// `layer` without the results nothing reads any more.
void dropDeadResults(LayerOp layer) {
  SmallVector<unsigned> live;
  for (auto [i, r] : llvm::enumerate(layer.getResults()))
    if (!r.use_empty())
      live.push_back(i);
  if (live.size() == layer.getNumResults())
    return;
  Operation *yield = layer.getBody().front().getTerminator();
  SmallVector<Value> ys;
  SmallVector<Type> types;
  for (unsigned i : live) {
    ys.push_back(yield->getOperand(i));
    types.push_back(ys.back().getType());
  }
  yield->setOperands(ys);
  OpBuilder b(layer);
  auto copy = LayerOp::create(b, layer.getLoc(), layer.getName(), types,
                              layer.getInputs());
  copy->setAttrs(layer->getAttrs());
  copy.getBody().takeBody(layer.getBody());
  for (auto [k, i] : llvm::enumerate(live))
    layer.getResult(i).replaceAllUsesWith(copy.getResult(k));
  layer.erase();
}

struct RecomputeSharedPass
    : rp::impl::RecomputeSharedPassBase<RecomputeSharedPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      Weights weights;
      SmallVector<LayerOp> layers(func.getOps<LayerOp>());
      for (LayerOp layer : layers) {
        Operation *yield = layer.getBody().front().getTerminator();
        bool changed = false;
        for (auto [i, r] : llvm::enumerate(layer.getResults())) {
          if (llvm::none_of(r.getUsers(),
                            [](Operation *u) { return isa<LayerOp>(u); }))
            continue;
          llvm::SetVector<Operation *> ops;
          llvm::SetVector<Value> reads;
          if (!invariantSlice(layer, yield->getOperand(i), weights, ops, reads))
            continue;
          recomputeInConsumers(layer, i, ops.getArrayRef(),
                               reads.getArrayRef());
          changed = true;
        }
        if (changed)
          dropDeadResults(layer);
      }
    }
  }
};

} // namespace
