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

struct AddLoraPass : rp::impl::AddLoraPassBase<AddLoraPass> {
  using AddLoraPassBase::AddLoraPassBase;

  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no 'func.func @main' to add adapters to");
      return signalPassFailure();
    }
    std::string error;
    llvm::Regex pattern(targets.empty() ? std::string(".*") : targets.getValue());
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
            !pattern.match(param.getName()))
          continue;
        ++matched;
        Adapter &ad = adapters[param];
        if (!ad.a)
          ad = createAdapter(param, mm.getTransposeB(), created);
        addUpdate(layer, mm, ad);
      }
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

  Adapter createAdapter(ParamOp w, bool transposed,
                        llvm::SmallPtrSet<Operation *, 16> &created) {
    OpBuilder b(w->getContext());
    b.setInsertionPointAfter(w);
    auto type = w.getType();
    int64_t out = type.getDimSize(transposed ? 0 : 1);
    int64_t in = type.getDimSize(transposed ? 1 : 0);
    Type element = type.getElementType();
    auto aType = RankedTensorType::get({rank, in}, element);
    auto bType = RankedTensorType::get({out, rank}, element);
    Adapter ad;
    ad.a = ParamOp::create(b, w.getLoc(), aType,
                           (w.getName() + ".lora_A").str(), true, nullptr,
                           nullptr, b.getF64FloatAttr(1.0 / std::sqrt(in)));
    ad.b = ParamOp::create(b, w.getLoc(), bType,
                           (w.getName() + ".lora_B").str(), true, nullptr,
                           nullptr, nullptr);
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
};

} // namespace
