//===- RPStopGradientOps.td - rp.stop_gradient --------------*- tablegen -*-===//
//
// PyTorch's .detach() and what a model computes under torch.no_grad() (HRM's
// early recurrent cycles): the value passes unchanged, the gradient stops.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPSTOPGRADIENTOPS_TD
#define RP_DIALECT_RP_RPSTOPGRADIENTOPS_TD

def RP_StopGradientOp : RP_PureOp<"stop_gradient", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<RP_DifferentiableOpInterface,
                              ["isDifferentiableOperand"]>]> {
  let summary = "identity whose gradient is zero";
  let description = [{
    `y = x`; no gradient flows back to `x` (PyTorch's `x.detach()`, or a
    value computed under `torch.no_grad()` that an op with gradients reads).
    rp-trace emits it; the activity analysis and rp-autodiff stop at it (its
    operand is not differentiable), and the plan runs it as a same-shape
    reshape (a copy). It has no folder: folding it before rp-autodiff would
    let the gradient through.

    VJP: none (dx = 0).

    ```mlir
    %y = rp.stop_gradient %x : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

#endif // RP_DIALECT_RP_RPSTOPGRADIENTOPS_TD
