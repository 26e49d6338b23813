//===- BackwardLiveness.cpp - what a layer's backward keeps ---------------===//

#include "rp/Analysis/BackwardLiveness.h"
#include "rp/Analysis/LayerCost.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <memory>
#include <vector>

using namespace mlir;
using namespace mlir::rp;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// A detached block that drops its values' uses before it goes, so its ops
/// can be erased in any order.
struct ScratchBlock {
  std::unique_ptr<Block> block = std::make_unique<Block>();
  ~ScratchBlock() { block->dropAllDefinedValueUses(); }
};

} // namespace

std::optional<BackwardLiveness>
mlir::rp::measureBackward(LayerOp layer, const llvm::DenseSet<Value> &needs,
                          llvm::function_ref<bool(unsigned)> isWeight,
                          llvm::function_ref<int64_t(Operation &)> scratch,
                          llvm::function_ref<double(Operation &)> opMs) {
  // A rule that cannot build its gradient here reports why; rp-autodiff
  // reports it again where it matters, so the scratch copy stays quiet.
  ScopedDiagnosticHandler quiet(layer.getContext(),
                                [](Diagnostic &) { return success(); });
  Block &body = layer.getBody().front();
  ScratchBlock owner;
  Block &copy = *owner.block;
  IRMapping map;
  for (BlockArgument arg : body.getArguments())
    map.map(arg, copy.addArgument(arg.getType(), arg.getLoc()));
  // A detached block has no region to take the context from.
  OpBuilder b(layer.getContext());
  b.setInsertionPointToEnd(&copy);
  std::vector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(b.clone(op, map));
  if (forward.empty())
    return BackwardLiveness();
  llvm::DenseSet<Value> inner;
  for (BlockArgument arg : body.getArguments())
    if (needs.contains(arg))
      inner.insert(map.lookup(arg));
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults())
      if (needs.contains(r))
        inner.insert(map.lookup(r));

  // Seeds: one gradient per float result that needs one, as later layers
  // (or the loss scale, for the tail's loss) give it.
  BackwardLiveness live;
  llvm::MapVector<Value, Value> grads;
  for (Value y : body.getTerminator()->getOperands()) {
    Value v = map.lookupOrDefault(y);
    if (!isFloatTensor(v) || !inner.contains(v) || grads.count(v))
      continue;
    grads[v] = copy.addArgument(v.getType(), layer.getLoc());
    live.resultGradBytes += tensorBytes(v.getType());
  }
  unsigned seedsFrom = body.getNumArguments();

  // The reverse sweep, as rp-autodiff's: a weight's gradient is kept per
  // use (the job's gradient bytes hold it), an activation's summed.
  llvm::DenseSet<Value> weightGrads;
  llvm::DenseMap<Operation *, int64_t> held;
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> dys;
    bool any = false;
    for (Value r : op->getResults()) {
      dys.push_back(grads.lookup(r));
      any |= dys.back() != nullptr;
    }
    if (!any || llvm::none_of(op->getOperands(),
                              [&](Value v) { return inner.contains(v); }))
      continue;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return std::nullopt;
    Operation *lastBefore = copy.empty() ? nullptr : &copy.back();
    SmallVector<Value> dxs;
    if (failed(diff.buildVJP(b, dys, dxs)))
      return std::nullopt;
    // The gradient kernel holds what its forward does (the fused loss's
    // chunk of logits and f32 weight-gradient sum).
    if (int64_t bytes = scratch(*op))
      for (Operation *o = lastBefore ? lastBefore->getNextNode()
                                     : &copy.front();
           o; o = o->getNextNode())
        held[o] = std::max(held[o], bytes);
    for (auto [operand, dx] : llvm::zip(op->getOperands(), dxs)) {
      if (!dx || !inner.contains(operand))
        continue;
      auto arg = dyn_cast<BlockArgument>(operand);
      if (arg && arg.getOwner() == &copy && isWeight(arg.getArgNumber())) {
        weightGrads.insert(dx);
        continue;
      }
      auto [it, inserted] = grads.insert({operand, dx});
      if (!inserted)
        it->second = AddOp::create(b, op->getLoc(), it->second, dx);
    }
  }
  // The input gradients the body yields live to its end.
  llvm::DenseSet<Value> yielded;
  for (BlockArgument arg : copy.getArguments())
    if (Value g = grads.lookup(arg))
      yielded.insert(g);

  // A rule builds every operand's gradient; rp-autodiff's canonicalizer
  // then drops those nothing reads (a frozen table's, a mask's), and with
  // them their reads of forward values.
  for (Operation *op = &copy.back(), *prev = nullptr;
       op && op != forward.back(); op = prev) {
    prev = op->getPrevNode();
    bool root = llvm::any_of(op->getResults(), [&](Value r) {
      return yielded.contains(r) || weightGrads.contains(r);
    });
    if (!root && op->use_empty() && isMemoryEffectFree(op)) {
      held.erase(op);
      op->erase();
    }
  }

  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(copy))
    position[&op] = i;
  unsigned n = copy.getOperations().size(), boundary = forward.size();

  if (opMs) {
    live.backwardMs = 0;
    for (Operation &op :
         llvm::make_range(std::next(copy.begin(), boundary), copy.end()))
      if (!isa<ConstantOp>(op))
        live.backwardMs += opMs(op);
  }

  // What the recompute re-runs: the forward ops the sweep reads, and
  // those they read in turn.
  live.recomputed.assign(boundary, false);
  auto markDefs = [&](Operation &op) {
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = position.find(def);
            it != position.end() && it->second < boundary)
          live.recomputed[it->second] = true;
  };
  for (Operation &op :
       llvm::make_range(std::next(copy.begin(), boundary), copy.end()))
    op.walk([&](Operation *inner) { markDefs(*inner); });
  for (unsigned i = boundary; i-- > 0;)
    if (live.recomputed[i])
      markDefs(*forward[i]);
  auto lastUse = [&](Value v, unsigned from) {
    if (yielded.contains(v))
      return n - 1;
    unsigned last = from;
    for (Operation *user : v.getUsers())
      if (Operation *at = copy.findAncestorOpInBlock(*user))
        last = std::max(last, position.lookup(at));
    return last;
  };
  std::vector<int64_t> born(n + 1, 0), freed(n + 1, 0);
  for (auto [i, op] : llvm::enumerate(copy)) {
    if (isa<ConstantOp>(op))
      continue;
    for (Value r : op.getResults()) {
      if (weightGrads.contains(r))
        continue;
      int64_t bytes = tensorBytes(r.getType());
      unsigned last = lastUse(r, i);
      born[i] += bytes;
      freed[last] += bytes;
      if (i < boundary && last >= boundary)
        live.keptBytes += bytes;
    }
  }
  for (BlockArgument arg : copy.getArguments())
    if (arg.getArgNumber() < seedsFrom && !isWeight(arg.getArgNumber()) &&
        lastUse(arg, 0) >= boundary && !arg.use_empty())
      live.keptInputBytes += tensorBytes(arg.getType());
  int64_t now = 0;
  for (auto [i, op] : llvm::enumerate(copy)) {
    now += born[i];
    int64_t at = now + std::max(scratch(op), held.lookup(&op));
    if (i < boundary)
      live.forwardPeak = std::max(live.forwardPeak, at);
    else
      live.backwardPeak = std::max(live.backwardPeak, at);
    now -= freed[i];
  }
  return live;
}
