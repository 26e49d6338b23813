//===- AttachLoss.cpp - rp-attach-loss ------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>

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
    InFlightDiagnostic diag = main.emitError("--loss=")
                              << loss << ": '" << name
                              << "' names no output; outputs:";
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      if (auto n = main.getResultAttrOfType<StringAttr>(i, "rp.name"))
        diag << " " << n.getValue();
    return diag;
  }

  LogicalResult attach(func::FuncOp main) {
    StringRef spec = loss;
    // cross-entropy+output:NAME adds the scalar output NAME (an auxiliary
    // loss, e.g. MoE load balancing) to the cross-entropy of the other one.
    StringRef auxName = spec;
    bool withAux = auxName.consume_front("cross-entropy+output:");
    bool crossEntropy = spec == "cross-entropy" || withAux;
    if (!crossEntropy && !spec.starts_with("output:"))
      return main.emitError("unknown loss '")
             << spec
             << "'; use cross-entropy, output:NAME or "
                "cross-entropy+output:NAME";
    unsigned index = 0;
    std::optional<unsigned> auxIndex;
    if (withAux) {
      if (main.getNumResults() != 2)
        return main.emitError("--loss=")
               << spec << " needs two outputs (logits and the scalar '"
               << auxName << "'), but the model has " << main.getNumResults();
      auto found = outputIndex(main, auxName);
      if (failed(found))
        return failure();
      auxIndex = *found;
      index = 1 - *found;
    } else if (crossEntropy) {
      if (main.getNumResults() != 1) {
        // A Hugging Face model traced with its KV cache on returns the
        // cache's tensors beside the logits: say so, and name the outputs.
        InFlightDiagnostic diag = main.emitError("the model has ")
                                  << main.getNumResults()
                                  << " outputs and cross-entropy needs one, "
                                     "the logits (outputs:";
        for (unsigned i = 0; i < main.getNumResults(); ++i) {
          if (auto n = main.getResultAttrOfType<StringAttr>(i, "rp.name"))
            diag << " " << n.getValue();
          else
            diag << " #" << i;
        }
        return diag << "). A Hugging Face model returns its KV cache too "
                       "unless traced or exported with use_cache=False "
                       "(rp finetune does that); otherwise choose the loss "
                       "with --loss=output:NAME";
      }
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
    if (crossEntropy &&
        (type.getRank() < 1 || !isa<FloatType>(type.getElementType())))
      return main.emitError("cross-entropy needs float logits [..., classes], "
                            "but the output is ")
             << type;
    Value aux;
    if (auxIndex) {
      Value auxOut = ret.getOperand(*auxIndex);
      auto auxType = cast<RankedTensorType>(auxOut.getType());
      if (auxOut.getDefiningOp<LayerOp>() != layer)
        return main.emitError("the auxiliary loss '")
               << auxName << "' must come from the layer computing the logits";
      if (auxType.getRank() != 0 || !isa<FloatType>(auxType.getElementType()))
        return main.emitError("the auxiliary loss '")
               << auxName << "' must be a float scalar, but is " << auxType;
      aux = auxOut;
    }
    if (!crossEntropy &&
        (type.getRank() != 0 || !isa<FloatType>(type.getElementType())))
      return main.emitError("an output loss must be a float scalar, but '")
             << spec.drop_front(strlen("output:")) << "' is " << type;

    for (Value r : layer.getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return u != ret.getOperation(); }))
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
      auto labelsType =
          RankedTensorType::get(type.getShape().drop_back(), b.getI64Type());
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
      if (aux) {
        // The step loss is sum(loss_sum) / sum(count); weighting each
        // microbatch's auxiliary loss by its count adds their
        // token-weighted mean (the plain mean when no label is ignored).
        Value auxInner =
            yield.getOperand(cast<OpResult>(aux).getResultNumber());
        if (auxInner.getType() != scalarF)
          auxInner = CastOp::create(b, loc, scalarF, auxInner);
        Value countF = CastOp::create(b, loc, scalarF, count);
        lossSum = AddOp::create(b, loc, lossSum,
                                MulOp::create(b, loc, auxInner, countF));
      }
    } else {
      lossSum = inner;
      count = ConstantOp::create(b, loc,
                                 DenseElementsAttr::get(scalarI, APInt(64, 1)));
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
