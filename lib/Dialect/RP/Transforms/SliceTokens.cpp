//===- SliceTokens.cpp - rp-slice-tokens ----------------------------------===//
//
// Cuts a causal model's sequence into token slices (docs/token-slices.md):
// one function per slice, the layered function at the slice's length, its
// position tables read at the slice's offset, and each causal attention
// reading the keys and values of the slices before it as layer inputs and
// handing its own on as layer results. The slices run as microbatches of
// the round-robin; a slice's function is the program its microbatch runs.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "Retype.h"
#include "ScheduleIR.h"
#include "SliceTokens.h"
#include "rp/Analysis/TokenSlices.h"

#include "mlir/IR/Verifier.h"

#include <numeric>

namespace mlir::rp {
#define GEN_PASS_DEF_SLICETOKENSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

/// Whether `type` has a dimension `seq` at `dim`.
bool seqAt(Value v, int64_t dim, int64_t seq) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && dim >= 0 && dim < t.getRank() && t.getDimSize(dim) == seq;
}

} // namespace

/// Why the graph cannot be cut into token slices (an op that mixes tokens
/// across the sequence other than a causal attention), with the op; the
/// number of causal attentions otherwise. Dimensions equal to the sequence
/// length on values computed from the inputs are taken to be it.
/// A kept key or value of type [batch, heads, tokens, dim] (attention's
/// operand; the tokens left out), what the slice's extra kernels move.
static SlicePairCosts::Kept keptShape(Type type) {
  auto t = cast<RankedTensorType>(type);
  SlicePairCosts::Kept k;
  k.elementBytes = (t.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  llvm::raw_string_ostream os(k.dtype);
  k.dtype.clear();
  t.getElementType().print(os);
  if (t.getRank() == 4) {
    k.batch = t.getDimSize(0);
    k.heads = t.getDimSize(1);
    k.dim = t.getDimSize(3);
  }
  return k;
}

std::vector<std::vector<SlicePairCosts::Kept>>
mlir::rp::keptTensors(func::FuncOp func) {
  std::vector<std::vector<SlicePairCosts::Kept>> kept;
  for (LayerOp layer : func.getOps<LayerOp>()) {
    kept.emplace_back();
    layer.walk([&](AttentionOp a) {
      kept.back().push_back(keptShape(a.getKey().getType()));
      kept.back().push_back(keptShape(a.getValue().getType()));
    });
  }
  return kept;
}

LogicalResult mlir::rp::checkSliceable(func::FuncOp func, int64_t seq,
                                       unsigned &causal) {
  llvm::DenseSet<Value> fromInputs = valuesFromInputs(func);
  causal = 0;
  WalkResult r = func.walk([&](Operation *op) {
    if (auto a = dyn_cast<AttentionOp>(op)) {
      if (!a.getCausal()) {
        op->emitError("token slices need causal attention: this attention "
                      "lets a token see later tokens, so a slice would need "
                      "the slices after it");
        return WalkResult::interrupt();
      }
      if (a.getMask()) {
        op->emitError("token slices do not model an attention with a mask "
                      "yet (a banded or sliding-window mask must take each "
                      "slice's offset)");
        return WalkResult::interrupt();
      }
      ++causal;
      return WalkResult::advance();
    }
    auto mixes = [&](Value in, int64_t dim) {
      return fromInputs.contains(in) && seqAt(in, dim, seq);
    };
    bool mixing = false;
    if (auto s = dyn_cast<SoftmaxOp>(op))
      mixing = mixes(s.getInput(), s.getDim());
    else if (auto s = dyn_cast<LogSoftmaxOp>(op))
      mixing = mixes(s.getInput(), s.getDim());
    else if (auto red = dyn_cast<ReduceOp>(op))
      mixing = llvm::any_of(
          red.getDims(), [&](int64_t d) { return mixes(red.getInput(), d); });
    else if (auto mm = dyn_cast<MatmulOp>(op))
      // Activations times activations over the sequence: an attention
      // spelled out (scores times values).
      if (fromInputs.contains(mm.getLhs()) && fromInputs.contains(mm.getRhs()))
        if (auto t = dyn_cast<RankedTensorType>(mm.getLhs().getType()))
          mixing = mixes(mm.getLhs(), mm.getTransposeA() ? t.getRank() - 2
                                                         : t.getRank() - 1);
    if (mixing) {
      op->emitError("token slices cannot cut this op: it mixes tokens "
                    "across the sequence (dimension of ")
          << seq << ") other than as a causal rp.attention";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (causal == 0)
    return func.emitError(
        "token slices need a causal model: this one has no causal "
        "rp.attention, so nothing orders its tokens");
  return success();
}

LogicalResult mlir::rp::slicedSequence(func::FuncOp func, int64_t &rows,
                                       int64_t &seq) {
  for (BlockArgument a : func.getArguments())
    if (auto t = dyn_cast<RankedTensorType>(a.getType());
        t && t.getRank() >= 2 && t.hasStaticShape()) {
      rows = t.getDimSize(0);
      seq = t.getDimSize(1);
      break;
    }
  if (seq > 1)
    return success();
  return func.emitError("token slices: no input of rank 2 or more whose "
                        "dimension 1 is a sequence to cut");
}

namespace {

/// `t` with dimension `dim` set to `size`.
RankedTensorType withDim(Type type, unsigned dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> dims(t.getShape());
  dims[dim] = size;
  return t.clone(dims);
}

/// What one slice is: its place in the sequence and among the slices.
struct Slice {
  unsigned index, count;
  int64_t offset, size, sequence, rows;
};

/// A kept key or value: a function argument (the earlier slices' rows) or
/// result (the slice's own rows) named after its layer and attention.
std::string keptName(StringRef what, StringRef layer, unsigned i) {
  return (what + ":" + layer + (i ? ":" + std::to_string(i) : "")).str();
}

/// Reads every constant with a dimension of the sequence (position tables,
/// position ids) through an rp.slice at the slice's offset; the constant
/// itself stays whole. Returns the values the retype must leave alone.
llvm::DenseSet<Value> sliceConstants(func::FuncOp func, const Slice &slice) {
  llvm::DenseSet<Value> whole;
  func.walk([&](ConstantOp c) {
    auto t = dyn_cast<RankedTensorType>(c.getType());
    if (!t || !llvm::is_contained(t.getShape(), slice.sequence))
      return;
    SmallVector<int64_t> offsets, dims;
    for (int64_t d : t.getShape()) {
      offsets.push_back(d == slice.sequence ? slice.offset : 0);
      dims.push_back(d == slice.sequence ? slice.size : d);
    }
    OpBuilder b(c->getContext());
    b.setInsertionPointAfter(c);
    SmallVector<int64_t> strides(t.getRank(), 1);
    auto cut = SliceOp::create(b, c.getLoc(), t.clone(dims), c.getResult(),
                               b.getDenseI64ArrayAttr(offsets),
                               b.getDenseI64ArrayAttr(strides));
    c.getResult().replaceAllUsesExcept(cut.getResult(), cut);
    whole.insert(c.getResult());
    whole.insert(cut.getResult());
  });
  return whole;
}

/// Gives each causal attention of `layer` the kept prefix (slices after
/// the first) and hands its own keys and values on (slices before the
/// last), as layer inputs and results bound to function arguments and
/// results. Returns the rebuilt layer's extra results with their names.
FailureOr<SmallVector<std::pair<Value, std::string>>>
keepKeysValues(func::FuncOp func, LayerOp layer, const Slice &slice) {
  SmallVector<AttentionOp> attentions;
  layer.walk([&](AttentionOp a) { attentions.push_back(a); });
  SmallVector<std::pair<Value, std::string>> kept;
  if (attentions.empty())
    return kept;
  bool prefix = slice.offset > 0, last = slice.index + 1 == slice.count;
  if (!prefix && last)
    return kept;
  Block &body = layer.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  SmallVector<Value> inputs(layer.getInputs()), own;
  SmallVector<std::string> ownNames;
  OpBuilder b(layer->getContext());
  for (auto [i, a] : llvm::enumerate(attentions)) {
    for (auto [what, operand] :
         {std::pair<StringRef, OpOperand *>{"keys", &a.getKeyMutable()},
          {"values", &a.getValueMutable()}}) {
      Value mine = operand->get();
      auto t = dyn_cast<RankedTensorType>(mine.getType());
      if (!t || t.getRank() != 4 || t.getDimSize(2) != slice.size)
        return a.emitError("token slices: the attention's ")
               << what << " are not [batch, heads, " << slice.size
               << " tokens, dim] at the slice's length";
      std::string name = keptName(what, layer.getName(), i);
      if (prefix) {
        RankedTensorType before = withDim(t, 2, slice.offset);
        unsigned at = func.getNumArguments();
        if (failed(func.insertArgument(at, before,
                                       b.getDictionaryAttr(b.getNamedAttr(
                                           "rp.name", b.getStringAttr(name))),
                                       a.getLoc())))
          return failure();
        inputs.push_back(func.getArgument(at));
        Value arg = body.addArgument(before, a.getLoc());
        b.setInsertionPoint(a);
        auto all = ConcatOp::create(
            b, a.getLoc(), withDim(t, 2, slice.offset + slice.size),
            ValueRange{arg, mine}, b.getI64IntegerAttr(2));
        operand->set(all.getResult());
      }
      if (!last) {
        own.push_back(mine);
        ownNames.push_back(name);
      }
    }
  }
  SmallVector<Value> ys(yield.getOperands());
  ys.append(own.begin(), own.end());
  yield->setOperands(ys);
  b.setInsertionPoint(layer);
  auto copy = LayerOp::create(b, layer.getLoc(), layer.getName(),
                              ValueRange(ys).getTypes(), inputs);
  copy->setAttrs(layer->getAttrs());
  copy.getBody().takeBody(layer.getBody());
  for (auto [old, now] : llvm::zip(layer.getResults(), copy.getResults()))
    old.replaceAllUsesWith(now);
  unsigned first = layer.getNumResults();
  layer.erase();
  for (auto [j, name] : llvm::enumerate(ownNames))
    kept.push_back({copy.getResult(first + j), name});
  return kept;
}

/// Adds slice `slice` of `func` after `after`, as the pass's description
/// says.
FailureOr<func::FuncOp> cutSlice(func::FuncOp func, Operation *after,
                                 const Slice &slice,
                                 ArrayRef<int64_t> multiples) {
  OpBuilder b(func->getContext());
  b.setInsertionPointAfter(after);
  auto copy = cast<func::FuncOp>(b.clone(*func.getOperation()));
  copy.setSymName((func.getSymName() + ".slice" + Twine(slice.index)).str());
  copy->setAttr(
      kTokenSliceAttr,
      b.getDictionaryAttr({
          b.getNamedAttr("index", b.getI64IntegerAttr(slice.index)),
          b.getNamedAttr("offset", b.getI64IntegerAttr(slice.offset)),
          b.getNamedAttr("size", b.getI64IntegerAttr(slice.size)),
          b.getNamedAttr("sequence", b.getI64IntegerAttr(slice.sequence)),
      }));
  // What the slice scales: the values computed from the inputs or from a
  // position table's rows; the weights and what only they make keep their
  // shapes, whatever their dimensions.
  llvm::DenseSet<Value> whole = sliceConstants(copy, slice);
  SmallVector<Value> cuts;
  for (Value v : whole)
    if (isa_and_nonnull<SliceOp>(v.getDefiningOp()))
      cuts.push_back(v);
  llvm::DenseSet<Value> scaled = valuesFromInputs(copy, cuts);
  auto retype = [&](Value v) {
    if (scaled.contains(v) && !whole.contains(v))
      v.setType(rescaled(v.getType(), slice.sequence, slice.size, multiples,
                         /*fromInputs=*/true));
  };
  copy.walk([&](Operation *op) {
    for (Value r : op->getResults())
      retype(r);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument a : block.getArguments())
          retype(a);
  });
  auto ret = cast<func::ReturnOp>(copy.getBody().front().getTerminator());
  copy.setType(b.getFunctionType(copy.getBody().front().getArgumentTypes(),
                                 ret.getOperandTypes()));
  for (AttentionOp a : copy.getBody().front().getOps<AttentionOp>())
    return a.emitError("token slices: an attention outside any rp.layer has "
                       "no layer to keep its keys and values in");
  SmallVector<std::pair<Value, std::string>> results;
  for (LayerOp layer :
       llvm::make_early_inc_range(copy.getBody().front().getOps<LayerOp>())) {
    auto kept = keepKeysValues(copy, layer, slice);
    if (failed(kept))
      return failure();
    results.append(kept->begin(), kept->end());
  }
  unsigned first = ret.getNumOperands();
  SmallVector<Value> outs(ret.getOperands());
  for (auto &[v, name] : results)
    outs.push_back(v);
  ret->setOperands(outs);
  copy.setType(
      b.getFunctionType(copy.getArgumentTypes(), ValueRange(outs).getTypes()));
  for (auto [j, r] : llvm::enumerate(results))
    copy.setResultAttr(first + j, "rp.name", b.getStringAttr(r.second));
  if (failed(verify(copy)))
    return copy.emitError("token slices: slice ")
           << slice.index << " does not verify at " << slice.size
           << " tokens (a weight or feature dimension equal to the "
              "sequence's "
           << slice.sequence << "? build the graph at another length)";
  return copy;
}

struct SliceTokensPass : mlir::rp::impl::SliceTokensPassBase<SliceTokensPass> {
  using SliceTokensPassBase::SliceTokensPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(kTokenSliceAttr)) {
        f.emitError("already cut into token slices");
        return signalPassFailure();
      }
    FailureOr<func::FuncOp> func = layeredFunction(module);
    if (failed(func))
      return signalPassFailure();
    int64_t rows = 1, seq = 0;
    unsigned causal = 0;
    if (failed(slicedSequence(*func, rows, seq)) ||
        failed(checkSliceable(*func, seq, causal)))
      return signalPassFailure();
    std::string error;
    FailureOr<TokenSlicesSpec> spec = parseTokenSlices(slices, error);
    if (failed(spec)) {
      func->emitError(error);
      return signalPassFailure();
    }
    std::vector<int64_t> sizes;
    auto chosen =
        module->getAttrOfType<DenseI64ArrayAttr>(kTokenSliceSizesAttr);
    module->removeAttr(kTokenSliceSizesAttr);
    if (spec->kind == TokenSlicesSpec::Kind::automatic) {
      if (!chosen) {
        func->emitError("rp-slice-tokens: slices=auto is the prediction's "
                        "to resolve (rp-predict-token-slices=cut=1 before "
                        "it); give K or the sizes");
        return signalPassFailure();
      }
      sizes.assign(chosen.asArrayRef().begin(), chosen.asArrayRef().end());
    } else if (spec->kind == TokenSlicesSpec::Kind::count) {
      if (spec->count > unsigned(seq)) {
        func->emitError() << "token slices: " << spec->count
                          << " slices of a sequence of " << seq << " tokens";
        return signalPassFailure();
      }
      sizes = equalSlices(seq, spec->count);
    } else {
      sizes = spec->sizes;
    }
    int64_t sum = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    if (sum != seq) {
      func->emitError() << "token slices: the sizes sum to " << sum
                        << " tokens, the sequence has " << seq;
      return signalPassFailure();
    }
    // One slice is the graph itself: its plan is the unsliced one.
    if (sizes.size() == 1)
      return;
    SmallVector<int64_t> multiples = sequenceMultiples(module, rows);
    Operation *after = *func;
    int64_t offset = 0;
    for (auto [k, size] : llvm::enumerate(sizes)) {
      Slice slice{unsigned(k), unsigned(sizes.size()), offset, size, seq, rows};
      FailureOr<func::FuncOp> cut = cutSlice(*func, after, slice, multiples);
      if (failed(cut))
        return signalPassFailure();
      after = *cut;
      offset += size;
    }
  }
};

} // namespace
