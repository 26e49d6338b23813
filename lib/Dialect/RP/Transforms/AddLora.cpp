//===- AddLora.cpp - rp-add-lora ------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
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

/// True when `mm` is the model's output layer (the LM head): its result
/// reaches a result of @main, or the logits of an rp.cross_entropy, through
/// nothing but views and casts and layer boundaries. PEFT's "all-linear"
/// leaves that layer out, and so does the default target set: an adapted
/// head adds [tokens, vocabulary] values (the update, the sum) and keeps
/// rp-fuse-linear-cross-entropy from removing the logits.
bool isOutputLayer(MatmulOp mm) {
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
      if (isa<ReshapeOp, CastOp>(user))
        work.push_back(user->getResult(0));
      else if (isa<YieldOp>(user))
        if (auto layer = dyn_cast<LayerOp>(user->getParentOp()))
          work.push_back(layer->getResult(use.getOperandNumber()));
    }
  }
  return false;
}

struct AddLoraPass : rp::impl::AddLoraPassBase<AddLoraPass> {
  using AddLoraPassBase::AddLoraPassBase;

  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no 'func.func @main' to add adapters to");
      return signalPassFailure();
    }
    std::string error;
    llvm::Regex pattern(targets.empty() ? std::string(".*")
                                        : targets.getValue());
    if (!pattern.isValid(error) || rank < 1 || !(alpha > 0)) {
      main.emitError("bad LoRA options: rank ")
          << rank << ", alpha " << alpha << ", targets '" << targets << "'"
          << (error.empty() ? "" : ": " + error);
      return signalPassFailure();
    }
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
    // Only the adapters train.
    for (auto p : main.getOps<ParamOp>())
      p.setTrainable(created.contains(p));
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

  /// y = x W -> y + (alpha / rank) * (x A^T) B^T inside `layer`.
  void addUpdate(LayerOp layer, MatmulOp mm, Adapter ad) {
    Block &body = layer.getBody().front();
    layer->insertOperands(layer->getNumOperands(),
                          {ad.a.getResult(), ad.b.getResult()});
    Value a = body.addArgument(ad.a.getType(), mm.getLoc());
    Value bArg = body.addArgument(ad.b.getType(), mm.getLoc());
    OpBuilder b(mm->getContext());
    b.setInsertionPointAfter(mm);
    Location loc = mm.getLoc();
    Value xa = MatmulOp::create(b, loc, mm.getLhs(), a, false, true);
    Value xb = MatmulOp::create(b, loc, xa, bArg, false, true);
    Type element = mm.getType().getElementType();
    Value scale = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, element),
                               b.getFloatAttr(element, alpha / double(rank))));
    Value scaled = MulOp::create(b, loc, xb, scale);
    Value sum = AddOp::create(b, loc, mm.getResult(), scaled);
    mm.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  }

  /// y = grouped(x, W) -> y + (alpha / rank) * grouped(grouped(x, A), B),
  /// both adapters read as [out, in] per expert (transpose_b).
  void addGroupedUpdate(LayerOp layer, MoEGroupedMatmulOp gm, Adapter ad) {
    Block &body = layer.getBody().front();
    layer->insertOperands(layer->getNumOperands(),
                          {ad.a.getResult(), ad.b.getResult()});
    Value a = body.addArgument(ad.a.getType(), gm.getLoc());
    Value bArg = body.addArgument(ad.b.getType(), gm.getLoc());
    OpBuilder b(gm->getContext());
    b.setInsertionPointAfter(gm);
    Location loc = gm.getLoc();
    auto in = cast<RankedTensorType>(gm.getInput().getType());
    Type element = in.getElementType();
    auto xaType = RankedTensorType::get({in.getDimSize(0), rank}, element);
    Value xa = MoEGroupedMatmulOp::create(b, loc, xaType, gm.getInput(), a,
                                          gm.getCounts(), true);
    Value xb = MoEGroupedMatmulOp::create(b, loc, gm.getType(), xa, bArg,
                                          gm.getCounts(), true);
    Value scale = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, element),
                               b.getFloatAttr(element, alpha / double(rank))));
    Value scaled = MulOp::create(b, loc, xb, scale);
    Value sum = AddOp::create(b, loc, gm.getResult(), scaled);
    gm.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  }
};

} // namespace
