//===- RPTrainOps.td - rp loss and gradient ops ------------*- tablegen -*-===//
//
// What the training graph adds to the forward one: the loss, and gradient
// ops for the VJPs that are not compositions of forward ops. The autodiff
// pass emits them; the runtime runs each as one kernel
// (runtime/include/rp/runtime/host/Gradients.h).
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPTRAINOPS_TD
#define RP_DIALECT_RP_RPTRAINOPS_TD

def RP_TrainOps : OpDocGroup {
  let summary = "Loss and gradient ops";
  let description = "The loss and the fused backward ops of training graphs.";
}

def RP_UnaryGradKind : I32EnumAttr<"UnaryGradKind",
    "elementwise function whose derivative rp.unary_grad applies", [
    I32EnumAttrCase<"exp", 0>, I32EnumAttrCase<"log", 1>,
    I32EnumAttrCase<"sqrt", 2>, I32EnumAttrCase<"rsqrt", 3>,
    I32EnumAttrCase<"tanh", 4>, I32EnumAttrCase<"erf", 5>,
    I32EnumAttrCase<"sigmoid", 6>, I32EnumAttrCase<"silu", 7>,
    I32EnumAttrCase<"relu", 8>, I32EnumAttrCase<"gelu", 9>,
    I32EnumAttrCase<"gelu_tanh", 10>
  ]> {
  let cppNamespace = "::mlir::rp";
}

let opDocGroup = RP_TrainOps in {

def RP_CrossEntropyOp : RP_PureOp<"cross_entropy",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "summed cross-entropy of logits against integer labels";
  let description = [{
    `logits` is `[..., C]` and `labels` the same shape without the last
    dimension. `loss_sum` (f32, or f64 for f64 logits, whatever the logits'
    storage type) is the sum over positions whose label is not
    `ignore_index` of `-log_softmax(logits)[label]`; `count` is the number
    of those positions. The step loss is the sum of `loss_sum` over the
    global batch divided by the sum of `count` (a token-weighted mean, not a
    mean of means; DESIGN.md, Loss). VJP: rp.cross_entropy_grad with
    d loss_sum as its scale; `count` is not differentiable.

    ```mlir
    %sum, %n = rp.cross_entropy %logits, %labels ignore_index = -100
        : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$logits, RP_IndexTensor:$labels,
                   I64Attr:$ignore_index);
  let results = (outs RP_FloatTensor:$loss_sum, RP_IndexTensor:$count);
  let assemblyFormat = [{
    $logits `,` $labels `ignore_index` `=` $ignore_index attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_CrossEntropyGradOp : RP_PureOp<"cross_entropy_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of rp.cross_entropy's loss_sum";
  let description = [{
    `scale * (softmax(logits) - onehot(label))` at positions whose label is
    not `ignore_index`, 0 elsewhere; `scale` is the scalar gradient of the
    loss with respect to `loss_sum` (1 / the global count of labels).

    ```mlir
    %dl = rp.cross_entropy_grad %logits, %labels, %scale ignore_index = -100
        : (tensor<2x16x64xf32>, tensor<2x16xi64>, tensor<f32>)
        -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$logits, RP_IndexTensor:$labels,
                   RP_FloatTensor:$scale, I64Attr:$ignore_index);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $scale `ignore_index` `=` $ignore_index attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_LinearCrossEntropyOp : RP_PureOp<"linear_cross_entropy",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>,
     AllElementTypesMatch<["hidden", "weight"]>]> {
  let summary = "LM head and summed cross-entropy, without the logits";
  let description = [{
    `rp.cross_entropy(rp.matmul(hidden, weight, transpose_b), labels)` in
    one op: `hidden` is `[..., K]`, `weight` the `[C, K]` head (with tied
    embeddings, the embedding table) and `labels` `hidden`'s shape without
    the last dimension. The results are rp.cross_entropy's: `loss_sum` (f32,
    f64 for f64 operands) and `count`. The kernels compute the logits
    `chunk` rows (tokens) at a time, so only `[chunk, C]` of them ever
    exist, never `[tokens, C]` (rp-fuse-linear-cross-entropy). VJP:
    rp.linear_cross_entropy_grad; `labels` and `count` are not
    differentiable.

    ```mlir
    %sum, %n = rp.linear_cross_entropy %h, %w, %labels ignore_index = -100
        chunk = 1024 : (tensor<2x16x32xf32>, tensor<64x32xf32>,
        tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$hidden, RP_FloatTensor:$weight,
                   RP_IndexTensor:$labels, I64Attr:$ignore_index,
                   I64Attr:$chunk);
  let results = (outs RP_FloatTensor:$loss_sum, RP_IndexTensor:$count);
  let assemblyFormat = [{
    $hidden `,` $weight `,` $labels `ignore_index` `=` $ignore_index
    `chunk` `=` $chunk attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_LinearCrossEntropyGradOp : RP_PureOp<"linear_cross_entropy_grad",
    [AllTypesMatch<["hidden", "hidden_grad"]>,
     AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "gradients of rp.linear_cross_entropy's loss_sum";
  let description = [{
    With `dl = scale * (softmax(logits) - onehot(label))` at positions
    whose label is not `ignore_index` (0 elsewhere) and `logits = hidden *
    weight^T`: `hidden_grad = dl * weight` and `weight_grad = dl^T *
    hidden`, computed `chunk` rows at a time so that `dl` never exists for
    more than a chunk. `scale` is the gradient of the loss with respect to
    `loss_sum`.

    ```mlir
    %dh, %dw = rp.linear_cross_entropy_grad %h, %w, %labels, %scale
        ignore_index = -100 chunk = 1024
        : (tensor<2x16x32xf32>, tensor<64x32xf32>, tensor<2x16xi64>,
           tensor<f32>) -> (tensor<2x16x32xf32>, tensor<64x32xf32>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$hidden, RP_FloatTensor:$weight,
                   RP_IndexTensor:$labels, RP_FloatTensor:$scale,
                   I64Attr:$ignore_index, I64Attr:$chunk);
  let results = (outs RP_FloatTensor:$hidden_grad,
                      RP_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $hidden `,` $weight `,` $labels `,` $scale `ignore_index` `=`
    $ignore_index `chunk` `=` $chunk attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_UnaryGradOp : RP_PureOp<"unary_grad",
    [AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "dy times the derivative of an elementwise function at x";
  let description = [{
    `result = grad * f'(input)` for the function `kind` (the derivative is
    recomputed from the input, so the forward output need not be kept).

    ```mlir
    %dx = rp.unary_grad gelu_tanh %x, %dy : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins RP_UnaryGradKind:$kind, RP_FloatTensor:$input,
                   RP_FloatTensor:$grad);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = "$kind $input `,` $grad attr-dict `:` type($input)";
}

def RP_SoftmaxGradOp : RP_PureOp<"softmax_grad",
    [AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "softmax or log-softmax backward from the forward output";
  let description = [{
    softmax: `y * (dy - sum(dy * y, dim))`; log-softmax (`log`):
    `dy - exp(y) * sum(dy, dim)`, with `y` the forward output.

    ```mlir
    %dx = rp.softmax_grad %y, %dy dim = 2 : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$output, RP_FloatTensor:$grad,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$dim,
                   UnitAttr:$log);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $grad `dim` `=` $dim (`log` $log^)? attr-dict `:`
    type($output)
  }];
  let hasVerifier = 1;
}

def RP_NormGradOp : RP_PureOp<"norm_grad"> {
  let summary = "layer-norm or RMS-norm backward";
  let description = [{
    The backward of `rp.layer_norm` (or `rp.rms_norm` with `rms`) over the
    dimensions `[axis, rank)`, recomputing the statistics from `input`.
    Results: `input_grad`, then the gradient of `scale` when a scale is
    given, then the gradient of the bias when `with_bias` (layer norm only).
    The affine gradients sum over the leading dimensions.

    ```mlir
    %dx, %dg, %db = rp.norm_grad %x scale(%g) grad(%dy) axis = 2
        epsilon = 1.0e-05 with_bias
        : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8x64xf32>)
        -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input, Optional<RP_FloatTensor>:$scale,
                   RP_FloatTensor:$grad,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                   F64Attr:$epsilon, UnitAttr:$with_bias, UnitAttr:$rms);
  let results = (outs RP_FloatTensor:$input_grad,
                 Variadic<RP_FloatTensor>:$affine_grads);
  let assemblyFormat = [{
    $input (`scale` `(` $scale^ `)`)? `grad` `(` $grad `)` `axis` `=` $axis
    `epsilon` `=` $epsilon (`with_bias` $with_bias^)? (`rms` $rms^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_AttentionGradOp : RP_PureOp<"attention_grad",
    [AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention backward";
  let description = [{
    Gradients of `rp.attention` with respect to query, key and value,
    recomputing the probabilities row by row (memory linear in the sequence
    length). With grouped-query attention the key and value gradients sum
    over the query heads that share them. The mask gets no gradient;
    `sinks`, `causal`, `window` and `softcap` are the forward's
    (rp.attention); with `sinks` a fourth result is their gradient `[H]`.

    ```mlir
    %dq, %dk, %dv = rp.attention_grad %q, %k, %v grad(%do) causal
        : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>,
           tensor<2x4x16x8xf32>)
        -> (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$query, RP_FloatTensor:$key,
                   RP_FloatTensor:$value, Optional<RP_Tensor>:$mask,
                   Optional<RP_FloatTensor>:$sinks,
                   RP_FloatTensor:$grad, UnitAttr:$causal,
                   OptionalAttr<F64Attr>:$scale,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs RP_FloatTensor:$query_grad, RP_FloatTensor:$key_grad,
                 RP_FloatTensor:$value_grad,
                 Optional<RP_FloatTensor>:$sinks_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `)`)?
    (`sinks` `(` $sinks^ `)`)? `grad` `(` $grad `)`
    (`causal` $causal^)? (`scale` `=` $scale^)? (`window` `=` $window^)?
    (`softcap` `=` $softcap^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_GatherGradOp : RP_PureOp<"gather_grad"> {
  let summary = "scatter-add of a gather's output gradient";
  let description = [{
    The input gradient of `rp.gather`: zeros of the result type with `grad`
    added at `indices` along `axis`; repeated indices accumulate, in index
    order (so the sum is deterministic).

    ```mlir
    %dwte = rp.gather_grad %tokens, %de axis = 0
        : (tensor<2x16xi64>, tensor<2x16x32xf32>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins RP_IndexTensor:$indices, RP_FloatTensor:$grad,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_SliceGradOp : RP_PureOp<"slice_grad",
    [AllElementTypesMatch<["grad", "result"]>]> {
  let summary = "a slice's output gradient placed into zeros";
  let description = [{
    Zeros of the result type (the sliced tensor's type) with `grad` written
    at the window `offsets + k * strides`.

    ```mlir
    %dx = rp.slice_grad %dq offsets = [0, 0, 0] strides = [1, 1, 1]
        : tensor<2x16x32xf32> -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$grad, DenseI64ArrayAttr:$offsets,
                   DenseI64ArrayAttr:$strides);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $grad `offsets` `=` $offsets `strides` `=` $strides attr-dict `:`
    type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def RP_ExtremumGradOp : RP_PureOp<"extremum_grad",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "gradient of a max or min reduction";
  let description = [{
    `grad` (the reduced shape) goes to the first position along `dims` that
    attains the maximum (`min`: the minimum) of `input`; zeros elsewhere.

    ```mlir
    %dx = rp.extremum_grad max %x, %dy dims = [2] keep_dims
        : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins RP_ReduceKind:$kind, RP_FloatTensor:$input,
                   RP_FloatTensor:$grad, DenseI64ArrayAttr:$dims,
                   UnitAttr:$keep_dims);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $input `,` $grad `dims` `=` $dims (`keep_dims` $keep_dims^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

} // opDocGroup RP_TrainOps

#endif // RP_DIALECT_RP_RPTRAINOPS_TD
