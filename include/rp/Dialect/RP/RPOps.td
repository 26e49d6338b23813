//===- RPOps.td - rp graph-level ops -----------------------*- tablegen -*-===//
//
// Graph-level ops: static-shape tensor compute, parameters and layers.
// Every op names its vector-Jacobian rule in its description so that the
// autodiff pass and the op stay documented side by side.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPOPS_TD
#define RP_DIALECT_RP_RPOPS_TD

include "rp/Dialect/RP/RPDialect.td"
include "rp/Dialect/RP/RPAttrs.td"
include "rp/Dialect/RP/RPInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def RP_GraphOps : OpDocGroup {
  let summary = "Graph ops";
  let description = "Parameters, layers and tensor compute of a model.";
}

/// Result shape is the numpy broadcast of every operand's shape.
def RP_BroadcastingElementwise : NativeOpTrait<"BroadcastingElementwise"> {
  let cppNamespace = "::mlir::rp";
}

//===----------------------------------------------------------------------===//
// Parameters, constants, layers
//===----------------------------------------------------------------------===//

let opDocGroup = RP_GraphOps in {

def RP_ParamOp : RP_PureOp<"param"> {
  let summary = "a named model weight, referenced where its data lives";
  let description = [{
    Produces the value of the weight `name`. The data is never in the IR:
    `file` (a path relative to the `.mlir` file's folder) and `offset` (in
    bytes) say where the tensor is stored, little-endian and row-major, in
    the tensor's element type. A parameter without `file` starts as zeros,
    or, with `init = b`, uniform in [-b, b] from the run's seed (LoRA
    adapters, created by rp-add-lora).

    `trainable` parameters get gradients and optimizer state; the others are
    frozen and cost nothing in backward. A parameter used by several layers
    (tied embeddings) is one `rp.param` value feeding each of them.

    ```mlir
    %wte = rp.param "transformer.wte.weight" trainable at "weights.bin"[0]
        : tensor<50257x768xf32>
    %pos = rp.param "rope.inv_freq" : tensor<64xf32>
    %a = rp.param "h.0.attn.q_proj.weight.lora_A" trainable init = 0.125
        : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable,
                   OptionalAttr<StrAttr>:$file,
                   OptionalAttr<I64Attr>:$offset,
                   OptionalAttr<F64Attr>:$init);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $name (`trainable` $trainable^)?
    (`at` $file^ `[` $offset `]`)? (`init` `=` $init^)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of the tensor as stored (element type, row-major).
    int64_t getSizeInBytes();
  }];
}

def RP_ConstantOp : RP_PureOp<"constant",
    [ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "a small constant tensor";
  let description = [{
    A tensor whose value is known at compile time: masks, scales, folded
    shape arithmetic. Weights are `rp.param`, never constants.

    ```mlir
    %half = rp.constant dense<5.000000e-01> : tensor<f32>
    %mask = rp.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def RP_LayerOp : RP_Op<"layer", [
    IsolatedFromAbove, SingleBlock, RecursiveMemoryEffects]> {
  let summary = "a named layer: the unit that pipeline stages are made of";
  let description = [{
    Groups the ops of one model layer. The body is isolated from above: its
    inputs, parameters included, are operands, bound to the entry block's
    arguments, so the parameters and activations a layer needs are exactly
    its operands. Layers do not nest. The partitioner counts `rp.layer` ops
    in program order, prefix and suffix layers included.

    `role` says what the layer computes in a training graph: `forward` (the
    default), `backward` (recomputes a forward layer from its saved inputs
    and applies the vector-Jacobian products: inputs are the forward
    layer's inputs then the gradients of its results; results are the
    gradients of the inputs that need one), or `tail` (the fused last
    layer: forward, loss and backward without recompute).

    `span = array<i64: b, e>` (set by rp-autodiff) names the forward layers
    [b, e) of the partitioned model the layer computes or differentiates:
    a fused tail of several layers, or a backward that recomputes a whole
    stage. The pipeline export maps stage jobs to layers by it.

    ```mlir
    %y = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>)
        -> tensor<2x8xf32> {
    ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
      %0 = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>)
          -> tensor<2x8xf32>
      rp.yield %0 : tensor<2x8xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<RP_Tensor>:$inputs,
      DefaultValuedAttr<RP_LayerRole, "LayerRole::forward">:$role,
      OptionalAttr<DenseI64ArrayAttr>:$span);
  let results = (outs Variadic<RP_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $name (`role` `=` $role^)? `(` $inputs `)` attr-dict `:`
    functional-type($inputs, results) $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    /// Creates the layer with an entry block whose arguments mirror `inputs`
    /// and no terminator; the caller fills the body and adds `rp.yield`.
    OpBuilder<(ins "StringRef":$name, "TypeRange":$resultTypes,
                   "ValueRange":$inputs)>
  ];
}

def RP_YieldOp : RP_Op<"yield", [
    Pure, Terminator, ReturnLike, HasParent<"LayerOp">]> {
  let summary = "returns the results of a layer";
  let description = [{
    ```mlir
    rp.yield %out, %aux : tensor<2x8xf32>, tensor<2xf32>
    ```
  }];
  let arguments = (ins Variadic<RP_Tensor>:$operands);
  let assemblyFormat = "($operands^ `:` type($operands))? attr-dict";
}

} // opDocGroup RP_GraphOps

include "rp/Dialect/RP/RPComputeOps.td"
include "rp/Dialect/RP/RPTrainOps.td"
include "rp/Dialect/RP/RPScheduleOps.td"
include "rp/Dialect/RP/RPMoEOps.td"
include "rp/Dialect/RP/RPQuantOps.td"
include "rp/Dialect/RP/RPDropoutOps.td"
include "rp/Dialect/RP/RPStopGradientOps.td"

#endif // RP_DIALECT_RP_RPOPS_TD
