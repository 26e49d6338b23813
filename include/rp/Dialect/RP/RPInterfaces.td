//===- RPInterfaces.td - rp op interfaces ------------------*- tablegen -*-===//

#ifndef RP_DIALECT_RP_RPINTERFACES_TD
#define RP_DIALECT_RP_RPINTERFACES_TD

include "mlir/IR/OpBase.td"

def RP_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::rp";
  let description = [{
    An op that knows its vector-Jacobian product. The rule of each op is
    stated in its description and implemented once, in RPVJPRules.cpp; the
    autodiff pass calls it for every op on the path from the parameters to
    the loss.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits, at the builder's insertion point, the gradients of the
        operands given the gradients of the results (`resultGrads[i]` is
        null when result `i` gets no gradient). Fills `operandGrads` with one
        entry per operand, null where no gradient flows (integer operands,
        masks, indices).
      }],
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<[{
        Whether `buildVJP` can give operand `index` a gradient: what the
        activity analysis follows from the loss back to the parameters. By
        default every float tensor operand; an op whose rule drops the
        gradient of a float operand (the attention mask) says so.
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), [{}],
      [{
        auto t = ::llvm::dyn_cast<::mlir::RankedTensorType>(
            $_op->getOperand(index).getType());
        return t && ::llvm::isa<::mlir::FloatType>(t.getElementType());
      }]>
  ];
}

#endif // RP_DIALECT_RP_RPINTERFACES_TD
