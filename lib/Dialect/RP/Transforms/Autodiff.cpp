//===- Autodiff.cpp - rp-autodiff -----------------------------------------===//
//
// Reverse mode over layers. Inside a region, gradients flow through the ops
// in reverse by their DifferentiableOpInterface rules; across layers, the
// gradient of a layer's result is the sum of what every later layer's
// backward returns for it.
//
//===----------------------------------------------------------------------===//

#include "AutodiffSweep.h"
#include "ExpandAttention.h"
#include "ScheduleIR.h"
#include "rp/Analysis/Activity.h"
#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::rp {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct AutodiffPass : mlir::rp::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no 'func.func @main' to differentiate");
      return signalPassFailure();
    }
    // Each token slice (rp-slice-tokens) is a model of its own: the same
    // layers at the slice's length, whose backward the slice's microbatch
    // runs.
    SmallVector<func::FuncOp> funcs = {main};
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr(kTokenSliceAttr))
        funcs.push_back(f);
    for (func::FuncOp f : funcs) {
      tailInputGrads.clear();
      activationGrads.clear();
      if (failed(differentiate(f)))
        return signalPassFailure();
    }
  }

  LogicalResult differentiate(func::FuncOp main);
  /// Makes the last layer forward + loss + backward; returns the new op.
  /// `keptSeeds` gives, by result number, the gradient that comes in for
  /// each result after loss_sum and count (a token slice's own keys and
  /// values, which the later slices read).
  FailureOr<LayerOp>
  buildTail(LayerOp layer, Value lossScale, const llvm::DenseSet<Value> &needs,
            const llvm::DenseMap<unsigned, Value> &keptSeeds);
  /// Emits the backward of a group of consecutive layers before `before`:
  /// one layer that recomputes the group's forward from the group's inputs
  /// and applies the VJPs in reverse, given the gradients of the group's
  /// results; records the gradients of its inputs in `funcGrads`.
  LogicalResult buildBackward(ArrayRef<LayerOp> group, Operation *before,
                              const llvm::DenseSet<Value> &needs,
                              llvm::MapVector<Value, Value> &funcGrads,
                              ArrayRef<int64_t> span);

  /// Records `g`, a gradient of `v` that a backward layer yields: a
  /// weight's is summed at function level; an activation's is kept apart
  /// and summed inside the backward of its producer, so a value layers in
  /// several stages read never needs a sum between stages, and the sum's
  /// order (deep to shallow) is the same for any grouping.
  void record(OpBuilder &b, Location loc,
              llvm::MapVector<Value, Value> &funcGrads, Value v, Value g) {
    if (isa_and_nonnull<LayerOp>(v.getDefiningOp()))
      activationGrads[v].push_back(g);
    else
      accumulate(b, loc, funcGrads, v, g);
  }

  /// The gradients of the tail's inputs, by input index; they follow the
  /// tail's forward results.
  SmallVector<std::pair<unsigned, Value>> tailInputGrads;
  /// The gradient contributions of each layer result, deepest first.
  llvm::MapVector<Value, SmallVector<Value>> activationGrads;
};

} // namespace

FailureOr<LayerOp>
AutodiffPass::buildTail(LayerOp layer, Value lossScale,
                        const llvm::DenseSet<Value> &needs,
                        const llvm::DenseMap<unsigned, Value> &keptSeeds) {
  OpBuilder b(layer);
  Block &body = layer.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getNumOperands() < 2 || !isFloatTensor(yield.getOperand(0)) ||
      llvm::any_of(llvm::seq(2u, yield.getNumOperands()),
                   [&](unsigned j) { return !keptSeeds.lookup(j); }))
    return layer.emitOpError("must yield loss_sum and count; run "
                             "rp-attach-loss first");
  unsigned numKept = yield.getNumOperands() - 2;
  unsigned numInputs = body.getNumArguments();
  Value scaleArg = body.addArgument(lossScale.getType(), layer.getLoc());
  SmallVector<Value> inputs(layer.getInputs());
  inputs.push_back(lossScale);
  llvm::DenseSet<Value> seeds;
  for (auto [input, arg] : llvm::zip(layer.getInputs(), body.getArguments()))
    if (needs.contains(input))
      seeds.insert(arg);
  SmallVector<Operation *> ops = bodyOps(layer);
  llvm::DenseSet<Value> inner = requiringGrad(ops, seeds);
  llvm::MapVector<Value, Value> grads;
  grads.insert({yield.getOperand(0), scaleArg});
  b.setInsertionPoint(yield);
  // The kept keys' and values' gradients from the later slices join the
  // loss's at the values the tail yields.
  for (unsigned j = 2; j < 2 + numKept; ++j) {
    Value seed = keptSeeds.lookup(j);
    inputs.push_back(seed);
    accumulate(b, layer.getLoc(), grads, yield.getOperand(j),
               body.addArgument(seed.getType(), layer.getLoc()));
  }
  llvm::DenseSet<Value> perUse = weightArgs(layer.getInputs(), body);
  PerUse uses;
  if (failed(reverseSweep(b, ops, inner, grads, &perUse, &uses)))
    return failure();
  SmallVector<Value> yielded(yield.getOperands());
  SmallVector<Type> types(layer.getResultTypes());
  for (auto [i, arg] :
       llvm::enumerate(body.getArguments().take_front(numInputs))) {
    if (!seeds.contains(arg))
      continue;
    for (Value g : gradsOf(arg, grads, uses)) {
      tailInputGrads.push_back({static_cast<unsigned>(i), g});
      yielded.push_back(g);
      types.push_back(g.getType());
    }
  }
  yield->setOperands(yielded);
  b.setInsertionPoint(layer);
  auto tail =
      LayerOp::create(b, layer.getLoc(), layer.getName(), types, inputs);
  tail.setRole(LayerRole::tail);
  tail.setSpanAttr(layer.getSpanAttr());
  tail.getBody().takeBody(layer.getBody());
  for (auto [oldR, newR] : llvm::zip(layer.getResults(), tail.getResults()))
    oldR.replaceAllUsesWith(newR);
  layer.erase();
  return tail;
}

LogicalResult
AutodiffPass::buildBackward(ArrayRef<LayerOp> group, Operation *before,
                            const llvm::DenseSet<Value> &needs,
                            llvm::MapVector<Value, Value> &funcGrads,
                            ArrayRef<int64_t> span) {
  llvm::SmallPtrSet<Operation *, 8> members;
  for (LayerOp l : group)
    members.insert(l.getOperation());
  // The group's results that get a gradient from later layers: one operand
  // per contribution, summed in the body in the order they came.
  SmallVector<Value> results, resultGrads;
  for (LayerOp l : group)
    for (Value r : l.getResults())
      for (Value g : activationGrads.lookup(r)) {
        results.push_back(r);
        resultGrads.push_back(g);
      }
  if (results.empty())
    return success();
  // The group's inputs: what its layers read from outside it. The backward
  // recomputes the group's forward from them alone.
  llvm::SetVector<Value> inputs;
  for (LayerOp l : group)
    for (Value in : l.getInputs())
      if (!members.contains(in.getDefiningOp()))
        inputs.insert(in);
  SmallVector<unsigned> gradInputs;
  for (auto [i, input] : llvm::enumerate(inputs))
    if (needs.contains(input))
      gradInputs.push_back(i);
  if (gradInputs.empty())
    return success();

  // Activations the group reads whose gradient deeper groups have begun
  // (a value layers in several stages read): the running sum comes in and
  // the group's own contributions are added to it, so the sum is one left
  // fold in reverse op order for any grouping (bitwise across devices).
  SmallVector<unsigned> carried;
  SmallVector<Value> carriedGrads;
  for (unsigned i : gradInputs)
    for (Value g : activationGrads.lookup(inputs[i])) {
      carried.push_back(i);
      carriedGrads.push_back(g);
    }

  SmallVector<Value> operands(inputs.begin(), inputs.end());
  llvm::append_range(operands, resultGrads);
  llvm::append_range(operands, carriedGrads);
  LayerOp first = group.front(), last = group.back();
  std::string name = group.size() == 1
                         ? first.getName().str()
                         : (first.getName() + ".." + last.getName()).str();
  OpBuilder b(before);
  // The body is built first: how many gradients it yields (one per use of
  // a weight) is known once it is.
  auto draft = LayerOp::create(b, first.getLoc(), name + ".backward",
                               TypeRange(), operands);
  Block &body = draft.getBody().front();
  OpBuilder inner = OpBuilder::atBlockEnd(&body);
  // Recompute: the group's layers inlined in order.
  SmallVector<Operation *> recomputed;
  IRMapping outer =
      inlineLayers(group, inputs.getArrayRef(), body, inner, recomputed);
  // Marked for the plan, whose timelines tell recompute from backward.
  for (Operation *op : recomputed)
    op->setAttr(kRecomputeAttr, inner.getUnitAttr());
  llvm::DenseSet<Value> seeds;
  for (unsigned i : gradInputs)
    seeds.insert(body.getArgument(i));
  llvm::DenseSet<Value> innerNeeds = requiringGrad(recomputed, seeds);
  llvm::MapVector<Value, Value> grads;
  unsigned firstGradArg = inputs.size();
  Location loc = draft.getLoc();
  for (auto [k, r] : llvm::enumerate(results))
    accumulate(inner, loc, grads, outer.lookup(r),
               body.getArgument(firstGradArg + k));
  unsigned firstCarriedArg = firstGradArg + results.size();
  for (auto [k, i] : llvm::enumerate(carried))
    accumulate(inner, loc, grads, body.getArgument(i),
               body.getArgument(firstCarriedArg + k));
  llvm::DenseSet<Value> perUse = weightArgs(inputs.getArrayRef(), body);
  PerUse uses;
  if (failed(
          reverseSweep(inner, recomputed, innerNeeds, grads, &perUse, &uses)))
    return failure();
  SmallVector<Value> yielded;
  SmallVector<unsigned> yieldedFor;
  for (unsigned i : gradInputs) {
    SmallVector<Value> gs = gradsOf(body.getArgument(i), grads, uses);
    if (gs.empty()) {
      // No path from this input to the group's results (it needs a
      // gradient elsewhere): its gradient here is zero.
      auto t = cast<RankedTensorType>(body.getArgument(i).getType());
      gs.push_back(ConstantOp::create(
          inner, loc,
          DenseElementsAttr::get(t,
                                 inner.getFloatAttr(t.getElementType(), 0))));
    }
    for (Value g : gs) {
      yielded.push_back(g);
      yieldedFor.push_back(i);
    }
  }
  YieldOp::create(inner, loc, yielded);
  auto bwd = LayerOp::create(b, loc, name + ".backward",
                             ValueRange(yielded).getTypes(), operands);
  bwd.setRole(LayerRole::backward);
  bwd.setSpan(span);
  bwd.getBody().takeBody(draft.getBody());
  draft.erase();
  b.setInsertionPoint(before);
  // The running sums replace what came in.
  for (unsigned i : carried)
    activationGrads[inputs[i]].clear();
  for (auto [k, i] : llvm::enumerate(yieldedFor))
    record(b, loc, funcGrads, inputs[i], bwd.getResult(k));
  return success();
}

LogicalResult AutodiffPass::differentiate(func::FuncOp main) {
  Block &block = main.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  SmallVector<LayerOp> layers(main.getOps<LayerOp>());
  // A token slice also returns its own keys and values (the later slices'
  // prefix) and reads the earlier slices' as arguments: the gradients of
  // its own come in as arguments, those of the prefix go out as results.
  bool sliced = main->hasAttr(kTokenSliceAttr);
  if (layers.empty() || ret.getNumOperands() < 2 ||
      (!sliced && ret.getNumOperands() != 2) ||
      ret.getOperand(0).getDefiningOp() != layers.back().getOperation())
    return main.emitError("expected @")
           << main.getSymName()
           << " to return the loss_sum and count of its last layer; run "
              "rp-attach-loss first";
  SmallVector<Value> prefix, kept;
  SmallVector<std::string> prefixNames, keptNames;
  auto nameOf = [](DictionaryAttr attrs) {
    auto n = attrs ? attrs.getAs<StringAttr>("rp.name") : StringAttr();
    return n ? n.str() : std::string();
  };
  if (sliced) {
    for (BlockArgument a : main.getArguments()) {
      std::string name = nameOf(main.getArgAttrDict(a.getArgNumber()));
      if (StringRef(name).starts_with("keys:") ||
          StringRef(name).starts_with("values:")) {
        prefix.push_back(a);
        prefixNames.push_back(name);
      }
    }
    for (unsigned i = 2; i < ret.getNumOperands(); ++i) {
      keptNames.push_back(nameOf(main.getResultAttrDict(i)));
      if (!isa_and_nonnull<LayerOp>(ret.getOperand(i).getDefiningOp()))
        return main.emitError("token slice: result ")
               << i << " ('" << keptNames.back()
               << "') is not a layer's kept keys or values";
    }
  }
  if (llvm::any_of(layers,
                   [](LayerOp l) { return l.getRole() != LayerRole::forward; }))
    return main.emitError("the model is differentiated already");

  // The stages: those rp-partition cut (the fused tail and the backward
  // stages, deep to shallow), else a one-layer tail and one backward stage.
  unsigned numLayers = layers.size(), tailSize = 1;
  SmallVector<std::pair<unsigned, unsigned>> groups;
  // Per backward stage, the grain rp-partition (or rp-choose-recompute)
  // recorded, unless this pass was given one for all.
  SmallVector<RecomputeGrain> grains;
  auto p = main->getAttrOfType<PartitionAttr>("rp.partition");
  if (p) {
    int64_t fwd = 0, bwd = 0;
    for (int64_t n : p.getForward())
      fwd += n;
    for (int64_t n : p.getBackward())
      bwd += n;
    if (p.getBackward().empty() || fwd + p.getBackward()[0] != numLayers ||
        bwd != numLayers)
      return main.emitError("rp.partition covers ")
             << bwd << " layers but @main has " << numLayers
             << "; run rp-partition on this graph again";
    tailSize = p.getBackward()[0];
    unsigned end = numLayers - tailSize;
    for (int64_t n : p.getBackward().drop_front()) {
      grains.push_back(recompute.hasValue() ? RecomputeGrain(recompute)
                                            : p.getGrain(groups.size()));
      groups.push_back({end - unsigned(n), end});
      end -= n;
    }
  } else if (numLayers > 1) {
    groups.push_back({0, numLayers - 1});
    grains.push_back(recompute);
  }
  // A layer-grain stage becomes one group per layer, deep to shallow.
  SmallVector<std::pair<unsigned, unsigned>> split;
  for (auto [group, grain] : llvm::zip(groups, grains)) {
    if (grain != RecomputeGrain::layer) {
      split.push_back(group);
      continue;
    }
    for (unsigned l = group.second; l-- > group.first;)
      split.push_back({l, l + 1});
  }
  groups = split;
  if (tailSize > 1) {
    FailureOr<LayerOp> merged =
        mergeLayers(ArrayRef(layers).take_back(tailSize));
    if (failed(merged))
      return failure();
    layers.resize(numLayers - tailSize);
    layers.push_back(*merged);
  }
  for (auto [i, l] : llvm::enumerate(layers))
    l.setSpan(ArrayRef<int64_t>{int64_t(i), int64_t(i) + 1});
  layers.back().setSpan(
      ArrayRef<int64_t>{int64_t(numLayers - tailSize), int64_t(numLayers)});

  // The kept values once a fused tail has merged its layers.
  llvm::append_range(kept, ret.getOperands().drop_front(2));

  // What needs a gradient: the values on a path from a trainable parameter
  // to the loss (Activity.h). A trainable parameter off every such path (a
  // float initializer holding a mask) gets no gradient and is not returned.
  SmallVector<ParamOp> trainable;
  for (auto p : main.getOps<ParamOp>())
    if (p.getTrainable())
      trainable.push_back(p);
  if (trainable.empty())
    return main.emitError("the model has no trainable parameter");
  SmallVector<AttentionOp> learnedMasks;
  {
    Activity before(main, prefix, kept);
    main.walk([&](AttentionOp a) {
      Value m = a.getMask();
      if (m && isFloatTensor(m) && before.isVaried(m) &&
          before.isUseful(a.getResult()))
        learnedMasks.push_back(a);
    });
  }
  for (AttentionOp a : learnedMasks)
    if (failed(expandAttention(a)))
      return failure();
  Activity activity(main, prefix, kept);
  llvm::DenseSet<Value> needs = activity.activeValues();
  if (llvm::none_of(trainable,
                    [&](ParamOp p) { return needs.contains(p.getResult()); }))
    return main.emitError("no trainable parameter reaches the loss through "
                          "ops that carry gradients; there is nothing to "
                          "train (are the weights frozen?)");
  // Ops between layers (the casts of mixed precision) carry gradients too.
  SmallVector<Operation *> between;
  for (Operation &op : main.getBody().front()) {
    if (isa<LayerOp, ParamOp, ConstantOp>(op) ||
        op.hasTrait<OpTrait::IsTerminator>())
      continue;
    between.push_back(&op);
  }

  OpBuilder b(main.getContext());
  Type lossType = ret.getOperand(0).getType();
  unsigned scaleIndex = main.getNumArguments();
  if (failed(main.insertArgument(scaleIndex, lossType,
                                 b.getDictionaryAttr(b.getNamedAttr(
                                     "rp.name", b.getStringAttr("loss_scale"))),
                                 main.getLoc())))
    return failure();
  Value lossScale = main.getArgument(scaleIndex);

  // One argument per kept result: its gradient, summed over the later
  // slices by the schedule. The tail takes those of its own results; the
  // others start their layer's result gradients (nothing else reads them).
  LayerOp last = layers.back();
  llvm::DenseMap<unsigned, Value> tailSeeds;
  for (auto [value, name] : llvm::zip(kept, keptNames)) {
    unsigned at = main.getNumArguments();
    if (failed(main.insertArgument(
            at, value.getType(),
            b.getDictionaryAttr(
                b.getNamedAttr("rp.name", b.getStringAttr("grad:" + name))),
            main.getLoc())))
      return failure();
    if (value.getDefiningOp() == last.getOperation())
      tailSeeds[cast<OpResult>(value).getResultNumber()] = main.getArgument(at);
    else
      activationGrads[value].push_back(main.getArgument(at));
  }
  SmallVector<Value> lastInputs(last.getInputs());
  unsigned tailForward = last.getNumResults();
  auto tail = buildTail(last, lossScale, needs, tailSeeds);
  if (failed(tail))
    return failure();
  llvm::MapVector<Value, Value> funcGrads;
  b.setInsertionPoint(ret);
  for (auto [k, entry] : llvm::enumerate(tailInputGrads))
    record(b, tail->getLoc(), funcGrads, lastInputs[entry.first],
           tail->getResult(tailForward + k));
  // One backward per recompute group, deep to shallow.
  for (auto [begin, end] : groups)
    if (failed(buildBackward(ArrayRef(layers).slice(begin, end - begin), ret,
                             needs, funcGrads, {int64_t(begin), int64_t(end)})))
      return failure();

  // Gradients through the ops between layers, back to the parameters.
  b.setInsertionPoint(ret);
  if (failed(reverseSweep(b, between, needs, funcGrads)))
    return failure();

  SmallVector<Value> results = {tail->getResult(0), tail->getResult(1)};
  SmallVector<std::string> names = {"loss_sum", "count"};
  // A slice's own keys and values (the tail's now its results).
  for (auto [i, name] : llvm::enumerate(keptNames)) {
    results.push_back(ret.getOperand(2 + i));
    names.push_back(name);
  }
  for (ParamOp p : trainable)
    if (Value g = funcGrads.lookup(p.getResult())) {
      results.push_back(g);
      names.push_back(("grad:" + p.getName()).str());
    }
  // The prefix's gradients, which the schedule adds to the earlier slices'
  // (a prefix no loss reads has a zero gradient: there is one per slice).
  for (auto [arg, name] : llvm::zip(prefix, prefixNames)) {
    Value g = funcGrads.lookup(arg);
    if (!g) {
      auto t = cast<RankedTensorType>(arg.getType());
      g = ConstantOp::create(
          b, main.getLoc(),
          DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0)));
    }
    results.push_back(g);
    names.push_back("grad:" + name);
  }
  ret->setOperands(results);
  main.removeResAttrsAttr();
  main.setType(b.getFunctionType(main.getArgumentTypes(),
                                 ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(names))
    main.setResultAttr(i, "rp.name", b.getStringAttr(name));
  return success();
}
