//===- AttachLoss.cpp - rp-attach-loss ------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::rp {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

/// Labels equal to this are ignored, as in PyTorch's cross_entropy.
static constexpr int64_t kIgnoreIndex = -100;

namespace {

struct AttachLossPass : rp::impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main) {
      getOperation().emitError("no 'func.func @main' to attach a loss to");
      return signalPassFailure();
    }
    if (failed(attach(main)))
      signalPassFailure();
  }

  /// The index of the result named `name` (rp.name), or failure.
  FailureOr<unsigned> outputIndex(func::FuncOp main, StringRef name) {
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (auto n = main.getResultAttrOfType<StringAttr>(i, "rp.name");
          n && n.getValue() == name)
        return i;
    InFlightDiagnostic diag = main.emitError("--loss=output:")
                              << name << " names no output; outputs:";
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (auto n = main.getResultAttrOfType<StringAttr>(i, "rp.name"))
        diag << " " << n.getValue();
    return diag;
  }

  LogicalResult attach(func::FuncOp main) {
    StringRef spec = loss;
    bool crossEntropy = spec == "cross-entropy";
    if (!crossEntropy && !spec.starts_with("output:"))
      return main.emitError("unknown loss '")
             << spec << "'; use cross-entropy or output:NAME";
    unsigned index = 0;
    if (crossEntropy) {
      if (main.getNumResults() != 1)
        return main.emitError("the model has ")
               << main.getNumResults()
               << " outputs; choose the loss with --loss=output:NAME";
    } else {
      auto found = outputIndex(main, spec.drop_front(strlen("output:")));
      if (failed(found))
        return failure();
      index = *found;
    }
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    Value out = ret.getOperand(index);
    auto layer = out.getDefiningOp<LayerOp>();
    if (!layer)
      return main.emitError("the loss input must come from a layer; group "
                            "the model into layers first (rp-group-layers)");
    auto type = cast<RankedTensorType>(out.getType());
    if (crossEntropy && (type.getRank() < 1 ||
                         !isa<FloatType>(type.getElementType())))
      return main.emitError("cross-entropy needs float logits [..., classes], "
                            "but the output is ")
             << type;
    if (!crossEntropy && (type.getRank() != 0 ||
                          !isa<FloatType>(type.getElementType())))
      return main.emitError("an output loss must be a float scalar, but '")
             << spec.drop_front(strlen("output:")) << "' is " << type;

    for (Value r : layer.getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *u) {
            return u != ret.getOperation();
          }))
        return layer.emitOpError("has results that other layers read; the "
                                 "layer computing the loss must be the last");

    OpBuilder b(&getContext());
    Location loc = layer.getLoc();
    Block &body = layer.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    unsigned resultIndex = cast<OpResult>(out).getResultNumber();
    Value inner = yield.getOperand(resultIndex);
    Type element = type.getElementType();
    auto scalarF = RankedTensorType::get(
        {}, crossEntropy && !element.isF64() ? b.getF32Type() : element);
    auto scalarI = RankedTensorType::get({}, b.getI64Type());

    SmallVector<Value> inputs(layer.getInputs());
    Value lossSum, count;
    b.setInsertionPoint(yield);
    if (crossEntropy) {
      auto labelsType = RankedTensorType::get(type.getShape().drop_back(),
                                              b.getI64Type());
      unsigned argIndex = main.getNumArguments();
      if (failed(main.insertArgument(argIndex, labelsType,
                                     b.getDictionaryAttr(b.getNamedAttr(
                                         "rp.name", b.getStringAttr("labels"))),
                                     loc)))
        return failure();
      inputs.push_back(main.getArgument(argIndex));
      Value labelsArg = body.addArgument(labelsType, loc);
      auto ce = CrossEntropyOp::create(b, loc, TypeRange{scalarF, scalarI},
                                       inner, labelsArg, kIgnoreIndex);
      lossSum = ce.getLossSum();
      count = ce.getCount();
    } else {
      lossSum = inner;
      count = ConstantOp::create(
          b, loc, DenseElementsAttr::get(scalarI, APInt(64, 1)));
    }
    yield->setOperands({lossSum, count});

    // The layer now yields the loss; rebuild it with the new signature.
    b.setInsertionPoint(layer);
    auto newLayer = LayerOp::create(b, loc, layer.getName(),
                                    TypeRange{scalarF, scalarI}, inputs);
    newLayer.getBody().takeBody(layer.getBody());
    b.setInsertionPoint(ret);
    func::ReturnOp::create(b, ret.getLoc(), newLayer.getResults());
    ret.erase();
    layer.erase();
    main.removeResAttrsAttr();
    main.setType(b.getFunctionType(main.getArgumentTypes(),
                                   TypeRange{scalarF, scalarI}));
    main.setResultAttr(0, "rp.name", b.getStringAttr("loss_sum"));
    main.setResultAttr(1, "rp.name", b.getStringAttr("count"));
    return success();
  }
};

} // namespace
