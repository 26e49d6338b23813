//===- AddLora.cpp - rp-add-lora ------------------------------------------===//

#include "OutputLayer.h"
#include "rp/Dialect/RP/RPPasses.h"
#include "rp/contract/PlanFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"

#include <cmath>

namespace mlir::rp {
#define GEN_PASS_DEF_ADDLORAPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct Adapter {
  ParamOp a, b;
};

} // namespace

/// An elementwise op whose other operands are constants: a map of the
/// logits (Gemma 2's final softcap, a logit scale), never a residual add,
/// so a layer whose result is only added into the stream returned is no
/// output layer.
static bool isLogitMap(Operation *op, Value logits) {
  // Unary elementwise ops (tanh) keep their operand's type instead.
  if (!op->hasTrait<mlir::rp::BroadcastingElementwise>() &&
      !(op->hasTrait<OpTrait::SameOperandsAndResultType>() &&
        op->getNumOperands() == 1))
    return false;
  return llvm::all_of(op->getOperands(), [&](Value operand) {
    return operand == logits || operand.getDefiningOp<mlir::rp::ConstantOp>();
  });
}

/// True when `mm` is the model's output layer (the LM head): its result
/// reaches a result of @main, or the logits of an rp.cross_entropy, through
/// nothing but views, casts, maps of the logits (Gemma 2's final softcap
/// `c * tanh(logits / c)`, a logit scale) and layer boundaries. PEFT's
/// "all-linear" leaves that layer out, and so does the default target set: an
/// adapted head adds [tokens, vocabulary] values (the update, the sum) and
/// keeps rp-fuse-linear-cross-entropy from removing the logits.
bool mlir::rp::isOutputLayer(MatmulOp mm) {
  SmallVector<Value> work{mm.getResult()};
  llvm::SmallPtrSet<Value, 8> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<func::ReturnOp>(user))
        return true;
      if (auto ce = dyn_cast<CrossEntropyOp>(user))
        if (ce.getLogits() == v)
          return true;
      if (isa<ReshapeOp, CastOp>(user) || isLogitMap(user, v))
        work.push_back(user->getResult(0));
      else if (isa<YieldOp>(user))
        if (auto layer = dyn_cast<LayerOp>(user->getParentOp()))
          work.push_back(layer->getResult(use.getOperandNumber()));
    }
  }
  return false;
}

namespace {

struct AddLoraPass : mlir::rp::impl::AddLoraPassBase<AddLoraPass> {
  using AddLoraPassBase::AddLoraPassBase;

  void runOnOperation() override {
    key = nullptr;
    layerKeys.clear();
    uses.clear();
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no 'func.func @main' to add adapters to");
      return signalPassFailure();
    }
    std::string error;
    llvm::Regex pattern(targets.empty() ? std::string(".*")
                                        : targets.getValue());
    llvm::Regex keepPattern(keep.getValue());
    std::string keepError;
    if (!keep.empty() && !keepPattern.isValid(keepError)) {
      main.emitError("bad LoRA modules to save '")
          << keep << "': " << keepError;
      return signalPassFailure();
    }
    if (!pattern.isValid(error) || rank < 1 || !(alpha > 0) ||
        !(dropout >= 0 && dropout < 1)) {
      main.emitError("bad LoRA options: rank ")
          << rank << ", alpha " << alpha << ", dropout " << dropout
          << ", targets '" << targets << "'"
          << (error.empty() ? "" : ": " + error);
      return signalPassFailure();
    }
    if (dropout > 0 && failed(addDropoutKey(main)))
      return signalPassFailure();
    llvm::DenseMap<Operation *, Adapter> adapters;
    llvm::SmallPtrSet<Operation *, 16> created;
    unsigned matched = 0;
    for (auto layer : llvm::make_early_inc_range(main.getOps<LayerOp>())) {
      Block &body = layer.getBody().front();
      SmallVector<MatmulOp> matmuls(body.getOps<MatmulOp>());
      for (MatmulOp mm : matmuls) {
        auto arg = dyn_cast<BlockArgument>(mm.getRhs());
        if (!arg || mm.getTransposeA())
          continue;
        auto param =
            layer.getInputs()[arg.getArgNumber()].getDefiningOp<ParamOp>();
        if (!param || param.getType().getRank() != 2 ||
            !pattern.match(param.getName()) ||
            (targets.empty() && isOutputLayer(mm)))
          continue;
        ++matched;
        Adapter &ad = adapters[param];
        if (!ad.a)
          ad = createAdapter(param, mm.getTransposeB(), created);
        addUpdate(layer, mm, ad);
      }
      // The experts of a mixture-of-experts layer: one adapter pair per
      // expert, stacked like the weights and applied per group.
      SmallVector<MoEGroupedMatmulOp> grouped(
          body.getOps<MoEGroupedMatmulOp>());
      for (MoEGroupedMatmulOp gm : grouped) {
        auto arg = dyn_cast<BlockArgument>(gm.getWeight());
        if (!arg)
          continue;
        auto param =
            layer.getInputs()[arg.getArgNumber()].getDefiningOp<ParamOp>();
        if (!param || param.getType().getRank() != 3 ||
            !pattern.match(param.getName()))
          continue;
        ++matched;
        Adapter &ad = adapters[param];
        if (!ad.a)
          ad = createAdapter(param, gm.getTransposeB(), created);
        addGroupedUpdate(layer, gm, ad);
      }
    }
    if (matched == 0 && targets.empty()) {
      main.emitError("no linear layer to adapt but the output layer, which "
                     "the default targets leave out; name its weight in "
                     "the LoRA targets to adapt it");
      return signalPassFailure();
    }
    if (matched == 0) {
      main.emitError("no linear layer has a weight matching LoRA targets '")
          << targets << "'";
      return signalPassFailure();
    }
    // Only the adapters train, and the trainable parameters kept whole
    // (modules_to_save).
    for (auto p : main.getOps<ParamOp>())
      p.setTrainable(created.contains(p) ||
                     (p.getTrainable() && !keep.empty() &&
                      keepPattern.match(p.getName())));
  }

  /// A [rank, in] and B [out, rank] for a 2-D weight; [E, rank, in] and
  /// [E, out, rank] for a stack of E expert weights.
  Adapter createAdapter(ParamOp w, bool transposed,
                        llvm::SmallPtrSet<Operation *, 16> &created) {
    OpBuilder b(w->getContext());
    b.setInsertionPointAfter(w);
    auto type = w.getType();
    ArrayRef<int64_t> lead = type.getShape().drop_back(2);
    int64_t rows = type.getDimSize(type.getRank() - 2);
    int64_t cols = type.getDimSize(type.getRank() - 1);
    int64_t out = transposed ? rows : cols;
    int64_t in = transposed ? cols : rows;
    Type element = type.getElementType();
    SmallVector<int64_t> aShape(lead), bShape(lead);
    aShape.append({rank, in});
    bShape.append({out, rank});
    auto aType = RankedTensorType::get(aShape, element);
    auto bType = RankedTensorType::get(bShape, element);
    Adapter ad;
    ad.a = ParamOp::create(b, w.getLoc(), aType,
                           (w.getName() + ".lora_A").str(), true, nullptr,
                           nullptr, b.getF64FloatAttr(1.0 / std::sqrt(in)));
    ad.b =
        ParamOp::create(b, w.getLoc(), bType, (w.getName() + ".lora_B").str(),
                        true, nullptr, nullptr, nullptr);
    created.insert(ad.a);
    created.insert(ad.b);
    return ad;
  }

  /// y = x W -> y + ((alpha / rank) * (x A^T)) B^T inside `layer`. The
  /// scale multiplies the rank-wide x A^T, and the update is formed right
  /// before y's first reader while x A^T follows the matmul: x (often the
  /// largest input, a MoE layer's dispatched rows) is freed as early as
  /// without the adapter, and no out-wide value but y, the update and the
  /// sum is live at once.
  void addUpdate(LayerOp layer, MatmulOp mm, Adapter ad) {
    auto [a, bArg] = addAdapterArgs(layer, ad, mm.getLoc());
    OpBuilder b(mm->getContext());
    b.setInsertionPointAfter(mm);
    Location loc = mm.getLoc();
    // PEFT: lora_B(lora_A(lora_dropout(x))), the frozen matmul on x.
    Value x = mm.getLhs();
    if (dropout > 0)
      x = DropoutOp::create(b, loc, x, keyOf(layer, loc),
                            b.getF64FloatAttr(dropout),
                            b.getI64IntegerAttr(tensorNumber(ad.a)));
    Value xa = MatmulOp::create(b, loc, x, a, false, true);
    Value scaled = MulOp::create(b, loc, xa, scaleOf(b, loc, xa));
    b.setInsertionPoint(firstReader(layer, mm.getResult()));
    Value xb = MatmulOp::create(b, loc, scaled, bArg, false, true);
    Value sum = AddOp::create(b, loc, mm.getResult(), xb);
    mm.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  }

  /// y = grouped(x, W) -> y + grouped((alpha / rank) * grouped(x, A), B),
  /// both adapters read as [out, in] per expert (transpose_b), ordered as in
  /// addUpdate. When y's only reader is rp.moe.combine, the update is
  /// combined on its own and added in token space: combine(y) +
  /// combine(update) (combine is linear in its rows), so that y and the
  /// update, [tokens x top_k, out] each, are never live together with
  /// their sum.
  void addGroupedUpdate(LayerOp layer, MoEGroupedMatmulOp gm, Adapter ad) {
    auto [a, bArg] = addAdapterArgs(layer, ad, gm.getLoc());
    OpBuilder b(gm->getContext());
    Location loc = gm.getLoc();
    auto in = cast<RankedTensorType>(gm.getInput().getType());
    Type element = in.getElementType();
    auto xaType = RankedTensorType::get({in.getDimSize(0), rank}, element);
    auto combine = dyn_cast_if_present<MoECombineOp>(
        gm->hasOneUse() ? *gm->getUsers().begin() : nullptr);
    if (combine && combine.getRows() != gm.getResult())
      combine = nullptr;
    b.setInsertionPointAfter(gm);
    Value combined;
    if (combine) {
      Operation *first = b.clone(*combine);
      combined = first->getResult(0);
    }
    Value xa = MoEGroupedMatmulOp::create(b, loc, xaType, gm.getInput(), a,
                                          gm.getCounts(), true);
    Value scaled = MulOp::create(b, loc, xa, scaleOf(b, loc, xa));
    b.setInsertionPoint(combine ? combine.getOperation()
                                : firstReader(layer, gm.getResult()));
    Value xb = MoEGroupedMatmulOp::create(b, loc, gm.getType(), scaled, bArg,
                                          gm.getCounts(), true);
    if (!combine) {
      Value sum = AddOp::create(b, loc, gm.getResult(), xb);
      gm.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
      return;
    }
    Operation *update = b.clone(*combine);
    update->setOperand(0, xb);
    Value sum = AddOp::create(b, loc, combined, update->getResult(0));
    combine.getResult().replaceAllUsesWith(sum);
    combine.erase();
  }

  /// @main's dropout_key input (one i64 row per microbatch: seed, step,
  /// microbatch, on; kernels/Philox.h), added once.
  LogicalResult addDropoutKey(func::FuncOp main) {
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      if (auto name = main.getArgAttrOfType<StringAttr>(i, "rp.name");
          name && name.getValue() == ::rp::plan::kDropoutKeyInput) {
        key = main.getArgument(i);
        return success();
      }
    OpBuilder b(main.getContext());
    unsigned index = main.getNumArguments();
    auto type = RankedTensorType::get({1, 4}, b.getI64Type());
    if (failed(main.insertArgument(
            index, type,
            b.getDictionaryAttr(b.getNamedAttr(
                "rp.name", b.getStringAttr(::rp::plan::kDropoutKeyInput))),
            main.getLoc())))
      return failure();
    key = main.getArgument(index);
    return success();
  }

  /// The dropout key inside `layer`: one more input, added once a layer.
  Value keyOf(LayerOp layer, Location loc) {
    Value &inner = layerKeys[layer];
    if (!inner) {
      layer->insertOperands(layer->getNumOperands(), {key});
      inner = layer.getBody().front().addArgument(key.getType(), loc);
    }
    return inner;
  }

  /// The mask's tensor number of the adapter whose A is `a`: FNV-1a (32
  /// bits) of the weight's name, plus the adapters of that weight so far
  /// (python/rp/_philox.py's tensor_id), so that a reference finds each
  /// module's mask by its name alone.
  uint32_t tensorNumber(ParamOp a) {
    StringRef name = a.getName();
    name.consume_back(".lora_A");
    uint32_t h = 2166136261u;
    for (char c : name)
      h = (h ^ uint8_t(c)) * 16777619u;
    return h + uses[name]++;
  }

  Value key;
  llvm::DenseMap<Operation *, Value> layerKeys;
  llvm::StringMap<uint32_t> uses;

  /// The adapters as two new inputs of `layer`, and their block arguments.
  std::pair<Value, Value> addAdapterArgs(LayerOp layer, Adapter ad,
                                         Location loc) {
    Block &body = layer.getBody().front();
    layer->insertOperands(layer->getNumOperands(),
                          {ad.a.getResult(), ad.b.getResult()});
    Value a = body.addArgument(ad.a.getType(), loc);
    Value bArg = body.addArgument(ad.b.getType(), loc);
    return {a, bArg};
  }

  /// alpha / rank as a scalar of `like`'s element type.
  Value scaleOf(OpBuilder &b, Location loc, Value like) {
    Type element = cast<RankedTensorType>(like.getType()).getElementType();
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, element),
                               b.getFloatAttr(element, alpha / double(rank))));
  }

  /// The op of `layer`'s body that reads `v` first (its terminator when
  /// nothing else does).
  static Operation *firstReader(LayerOp layer, Value v) {
    Block &body = layer.getBody().front();
    Operation *first = nullptr;
    for (Operation *user : v.getUsers()) {
      Operation *op = body.findAncestorOpInBlock(*user);
      if (op && (!first || op->isBeforeInBlock(first)))
        first = op;
    }
    return first ? first : body.getTerminator();
  }
};

} // namespace
