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
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // RP_DIALECT_RP_RPINTERFACES_TD
