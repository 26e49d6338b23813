//===- ConvertFloatType.cpp - rp-convert-float-type -----------------------===//
//
// Retypes the model's f32 compute to bf16/f16: results and block arguments
// change type in place (every rp compute op is polymorphic in its float
// type), constants are rounded, and casts are added where f32 values enter
// (parameters, inputs) and leave (outputs).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::rp {
#define GEN_PASS_DEF_CONVERTFLOATTYPEPASS
#include "rp/Dialect/RP/RPPasses.h.inc"
} // namespace mlir::rp

using namespace mlir;
using namespace mlir::rp;

namespace {

struct ConvertFloatTypePass
    : rp::impl::ConvertFloatTypePassBase<ConvertFloatTypePass> {
  using ConvertFloatTypePassBase::ConvertFloatTypePassBase;

  Type target;

  /// `type` with its element type replaced when it is f32.
  Type convert(Type type) const {
    auto t = dyn_cast<RankedTensorType>(type);
    return t && t.getElementType().isF32() ? t.clone(target) : type;
  }

  /// Retypes the results of `op` (and, for constants, their values).
  void retype(Operation *op) {
    // The loss stays f32: its precision is the printed loss's.
    if (isa<CrossEntropyOp, LinearCrossEntropyOp>(op))
      return;
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense || !dense.getElementType().isF32())
        return;
      auto type = cast<RankedTensorType>(convert(dense.getType()));
      auto &semantics = cast<FloatType>(target).getFloatSemantics();
      c.setValueAttr(dense.mapValues(target, [&](const APFloat &v) {
        APFloat x = v;
        bool lost;
        x.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
        return x.bitcastToAPInt();
      }));
      c.getResult().setType(type);
      return;
    }
    for (Value r : op->getResults())
      r.setType(convert(r.getType()));
  }

  void runOnOperation() override {
    if (to == ComputeType::f32)
      return;
    Builder b(&getContext());
    target =
        to == ComputeType::bf16 ? Type(b.getBF16Type()) : Type(b.getF16Type());
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        convertFunction(func);
  }

  void convertFunction(func::FuncOp func) {
    Block &body = func.getBody().front();
    // f32 values that enter the converted region, cast once each.
    llvm::DenseMap<Value, Value> casts;
    OpBuilder builder(&getContext());
    auto castIn = [&](Value v) -> Value {
      auto it = casts.find(v);
      if (it != casts.end())
        return it->second;
      builder.setInsertionPointAfterValue(v);
      Value c = CastOp::create(builder, v.getLoc(),
                               cast<RankedTensorType>(convert(v.getType())), v);
      casts[v] = c;
      return c;
    };
    auto entersAsF32 = [&](Value v) {
      return (isa<BlockArgument>(v) || v.getDefiningOp<ParamOp>()) &&
             convert(v.getType()) != v.getType();
    };
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<ParamOp, func::ReturnOp>(op))
        continue;
      for (OpOperand &use : op.getOpOperands())
        if (entersAsF32(use.get()))
          use.set(castIn(use.get()));
      if (auto layer = dyn_cast<LayerOp>(op)) {
        for (BlockArgument arg : layer.getBody().getArguments())
          arg.setType(convert(arg.getType()));
        layer.getBody().walk([&](Operation *inner) { retype(inner); });
        // The layer returns what its body now yields.
        auto yield = cast<YieldOp>(layer.getBody().front().getTerminator());
        for (auto [r, y] : llvm::zip(layer.getResults(), yield.getOperands()))
          r.setType(y.getType());
        continue;
      }
      retype(&op);
    }
    // Outputs stay f32: cast back what the converted region produces.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    builder.setInsertionPoint(ret);
    for (OpOperand &use : ret->getOpOperands()) {
      Type want = func.getFunctionType().getResult(use.getOperandNumber());
      if (use.get().getType() != want)
        use.set(CastOp::create(builder, ret.getLoc(), want, use.get()));
    }
  }
};

} // namespace
