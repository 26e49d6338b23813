//===- RPComputeOps.td - rp tensor compute ops -------------*- tablegen -*-===//
//
// Static-shape tensor compute. Every op states its semantics and its
// vector-Jacobian rule (VJP: how the gradient of its result `dy` becomes the
// gradients of its operands), which the autodiff pass implements once per op.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPCOMPUTEOPS_TD
#define RP_DIALECT_RP_RPCOMPUTEOPS_TD

def RP_ElementwiseOps : OpDocGroup {
  let summary = "Elementwise ops";
  let description = [{
    Binary and ternary elementwise ops broadcast their operands the numpy
    way: shapes are aligned at the trailing dimension and a dimension of
    size 1 stretches. The result has the broadcast shape. There is no
    implicit type promotion: operands share one element type (insert
    `rp.cast`). The VJP of a broadcast operand sums `dy` over the stretched
    dimensions.
  }];
}

def RP_ShapeOps : OpDocGroup {
  let summary = "Shape and data movement ops";
  let description = "Reshape, transpose, slice, concat, broadcast, gather.";
}

def RP_NNOps : OpDocGroup {
  let summary = "Neural network ops";
  let description = "Matmul, reductions, softmax, normalizations, attention.";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

let opDocGroup = RP_ElementwiseOps in {

class RP_BinaryOp<string mnemonic, string math, string vjp,
                  Type operandType = RP_NumericTensor, list<Trait> traits = []>
    : RP_PureOp<mnemonic, !listconcat(traits, [RP_BroadcastingElementwise,
        AllElementTypesMatch<["lhs", "rhs", "result"]>,
        DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>])> {
  let summary = "elementwise " # math # " with broadcasting";
  let description = "Computes `" # math # "` elementwise. VJP: " # vjp #
      "\n\n```mlir\n%r = rp." # mnemonic #
      " %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let builders = [
    /// Infers the broadcast result type.
    OpBuilder<(ins "Value":$lhs, "Value":$rhs), [{
      build($_builder, $_state,
            broadcastResultType({lhs, rhs}, getElementTypeOrSelf(lhs)),
            lhs, rhs);
    }]>
  ];
  let hasFolder = 1;
}

def RP_AddOp : RP_BinaryOp<"add", "lhs + rhs", "dlhs = dy, drhs = dy.",
                           RP_NumericTensor, [Commutative]>;
def RP_SubOp : RP_BinaryOp<"sub", "lhs - rhs", "dlhs = dy, drhs = -dy.">;
def RP_MulOp : RP_BinaryOp<"mul", "lhs * rhs",
                           "dlhs = dy * rhs, drhs = dy * lhs.",
                           RP_NumericTensor, [Commutative]>;
def RP_DivOp : RP_BinaryOp<"div", "lhs / rhs",
    "dlhs = dy / rhs, drhs = -dy * lhs / rhs^2. Integer division truncates "
    "toward zero; dividing by zero is an error at fold time.">;
def RP_PowOp : RP_BinaryOp<"pow", "lhs ^ rhs",
    "dlhs = dy * rhs * lhs^(rhs - 1), drhs = dy * lhs^rhs * log(lhs).",
    RP_FloatTensor>;
def RP_MaxOp : RP_BinaryOp<"max", "max(lhs, rhs)",
    "dy goes to the larger operand, to lhs on ties.",
    RP_NumericTensor, [Commutative]>;
def RP_MinOp : RP_BinaryOp<"min", "min(lhs, rhs)",
    "dy goes to the smaller operand, to lhs on ties.",
    RP_NumericTensor, [Commutative]>;

def RP_CmpOp : RP_PureOp<"cmp", [RP_BroadcastingElementwise,
    AllElementTypesMatch<["lhs", "rhs"]>]> {
  let summary = "elementwise comparison with broadcasting";
  let description = [{
    Compares `lhs` and `rhs` with `predicate` (`eq`, `ne`, `lt`, `le`, `gt`,
    `ge`), giving an i1 tensor of the broadcast shape. Floats compare
    ordered: any comparison with NaN is false except `ne`. No VJP (the result
    is not differentiable).

    ```mlir
    %m = rp.cmp lt, %i, %j : (tensor<8x1xi64>, tensor<1x8xi64>) -> tensor<8x8xi1>
    ```
  }];
  let arguments = (ins RP_CmpPredicate:$predicate, RP_Tensor:$lhs,
                   RP_Tensor:$rhs);
  let results = (outs RP_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "CmpPredicate":$predicate, "Value":$lhs, "Value":$rhs), [{
      build($_builder, $_state,
            broadcastResultType({lhs, rhs}, $_builder.getI1Type()),
            predicate, lhs, rhs);
    }]>
  ];
  let hasFolder = 1;
}

def RP_WhereOp : RP_PureOp<"where", [RP_BroadcastingElementwise, DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>,
    AllElementTypesMatch<["on_true", "on_false", "result"]>]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `result = condition ? on_true : on_false`, all three broadcast together.
    VJP: don_true = where(condition, dy, 0), don_false = where(condition, 0,
    dy).

    ```mlir
    %r = rp.where %mask, %scores, %ninf
        : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>)
        -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins RP_BoolTensor:$condition, RP_Tensor:$on_true,
                   RP_Tensor:$on_false);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "Value":$condition, "Value":$onTrue, "Value":$onFalse), [{
      build($_builder, $_state,
            broadcastResultType({condition, onTrue, onFalse},
                                getElementTypeOrSelf(onTrue)),
            condition, onTrue, onFalse);
    }]>
  ];
  let hasFolder = 1;
}

class RP_UnaryOp<string mnemonic, string math, string vjp,
                 Type operandType = RP_FloatTensor, list<Trait> traits = []>
    : RP_PureOp<mnemonic, !listconcat(traits, [SameOperandsAndResultType,
        DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>])> {
  let summary = "elementwise " # math;
  let description = "Computes `" # math # "` elementwise. VJP: " # vjp #
      "\n\n```mlir\n%r = rp." # mnemonic # " %x : tensor<2x3xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def RP_NegOp : RP_UnaryOp<"neg", "-x", "dx = -dy.", RP_NumericTensor> {
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}
def RP_ExpOp : RP_UnaryOp<"exp", "e^x", "dx = dy * exp(x).">;
def RP_LogOp : RP_UnaryOp<"log", "ln(x)", "dx = dy / x.">;
def RP_SqrtOp : RP_UnaryOp<"sqrt", "sqrt(x)", "dx = dy / (2 * sqrt(x)).">  {
  let hasFolder = 1;
}
def RP_RsqrtOp : RP_UnaryOp<"rsqrt", "1 / sqrt(x)",
                            "dx = -dy / 2 * rsqrt(x)^3.">;
def RP_TanhOp : RP_UnaryOp<"tanh", "tanh(x)", "dx = dy * (1 - tanh(x)^2).">;
def RP_ErfOp : RP_UnaryOp<"erf", "erf(x)",
                          "dx = dy * 2 / sqrt(pi) * exp(-x^2).">;
def RP_SigmoidOp : RP_UnaryOp<"sigmoid", "1 / (1 + e^-x)",
                              "dx = dy * s * (1 - s) with s = sigmoid(x).">;
def RP_SiluOp : RP_UnaryOp<"silu", "x * sigmoid(x)",
    "dx = dy * s * (1 + x * (1 - s)) with s = sigmoid(x).">;
def RP_ReluOp : RP_UnaryOp<"relu", "max(x, 0)", "dx = dy where x > 0, else 0.">;

def RP_GeluOp : RP_PureOp<"gelu", [SameOperandsAndResultType, DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "elementwise gelu";
  let description = [{
    `x * Phi(x)` with Phi the standard normal CDF (`approximate = none`), or
    its tanh form `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    (`approximate = tanh`), as PyTorch's `gelu(approximate=...)`.
    VJP: dx = dy * d/dx of the same formula.

    ```mlir
    %r = rp.gelu %x : tensor<2x3xf32>
    %t = rp.gelu %x approximate = tanh : tensor<2x3xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input,
      DefaultValuedAttr<RP_GeluApproximation,
                        "GeluApproximation::none">:$approximate);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` $approximate^)? attr-dict `:` type($input)
  }];
}

def RP_CastOp : RP_PureOp<"cast", [SameOperandsAndResultShape, DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "elementwise element type conversion";
  let description = [{
    Converts each element to the result's element type: floats round to
    nearest even, float to integer truncates toward zero, to i1 is `x != 0`.
    VJP: dx = cast(dy) back to the operand type (zero for integer operands).

    ```mlir
    %h = rp.cast %x : tensor<2x3xf32> to tensor<2x3xbf16>
    ```
  }];
  let arguments = (ins RP_Tensor:$input);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

} // opDocGroup RP_ElementwiseOps

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

let opDocGroup = RP_ShapeOps in {

def RP_ReshapeOp : RP_PureOp<"reshape",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "reinterprets a tensor with another shape";
  let description = [{
    Same elements in row-major order, new shape; the element count must not
    change. VJP: dx = reshape(dy) to the operand shape.

    ```mlir
    %r = rp.reshape %x : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$input);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def RP_TransposeOp : RP_PureOp<"transpose",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "permutes the dimensions of a tensor";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.
    VJP: dx = transpose(dy) by the inverse permutation.

    ```mlir
    %t = rp.transpose %x permutation = [0, 2, 1, 3]
        : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->`
    type($result)
  }];
  let builders = [
    /// Infers the permuted result type.
    OpBuilder<(ins "Value":$input, "ArrayRef<int64_t>":$permutation)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def RP_SliceOp : RP_PureOp<"slice",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "a strided window of a tensor";
  let description = [{
    Takes along each dimension `d` the elements `offsets[d] + k * strides[d]`
    for `k` in `[0, result.shape[d])`; the result type gives the sizes.
    Strides are positive. VJP: dx = zeros with dy scattered back into the
    window.

    ```mlir
    %q = rp.slice %qkv offsets = [0, 0, 0] strides = [1, 1, 1]
        : tensor<2x8x192xf32> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$input, DenseI64ArrayAttr:$offsets,
                   DenseI64ArrayAttr:$strides);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $input `offsets` `=` $offsets `strides` `=` $strides attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def RP_ConcatOp : RP_PureOp<"concat", [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "joins tensors along one dimension";
  let description = [{
    All inputs have the result's rank and element type and agree on every
    dimension but `dim`, along which they are laid end to end.
    VJP: each input's gradient is its slice of dy.

    ```mlir
    %c = rp.concat %a, %b dim = 1
        : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<RP_Tensor>:$inputs,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$dim);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def RP_BroadcastOp : RP_PureOp<"broadcast",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "stretches a tensor to a larger shape";
  let description = [{
    Numpy broadcast of the operand to the result shape (ONNX `Expand` with a
    constant shape). VJP: dx = dy summed over the stretched dimensions.

    ```mlir
    %b = rp.broadcast %bias : tensor<1x64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$input);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def RP_GatherOp : RP_PureOp<"gather",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "takes slices of a tensor at given indices (embedding)";
  let description = [{
    ONNX `Gather`: the result shape is `input.shape[:axis] + indices.shape +
    input.shape[axis+1:]`; element `[..., i, ...]` reads `input` at index
    `indices[i]` along `axis`. A negative index counts from the end; an index
    out of range is a runtime error. An embedding lookup is `axis = 0`.
    VJP: dinput = zeros with dy scatter-added at the indices (repeated
    indices accumulate); indices get no gradient.

    ```mlir
    %e = rp.gather %wte[%tokens] axis = 0
        : (tensor<50257x768xf32>, tensor<2x128xi64>) -> tensor<2x128x768xf32>
    ```
  }];
  let arguments = (ins RP_Tensor:$input, RP_IndexTensor:$indices,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs RP_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` `axis` `=` $axis attr-dict `:`
    functional-type(operands, results)
  }];
  let builders = [
    /// Infers the gathered result type.
    OpBuilder<(ins "Value":$input, "Value":$indices, "int64_t":$axis)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

} // opDocGroup RP_ShapeOps

//===----------------------------------------------------------------------===//
// Neural network ops
//===----------------------------------------------------------------------===//

let opDocGroup = RP_NNOps in {

def RP_MatmulOp : RP_PureOp<"matmul",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "batched matrix multiplication";
  let description = [{
    `lhs` is `[..., M, K]` (`[..., K, M]` with `transpose_a`) and `rhs` is
    `[..., K, N]` (`[..., N, K]` with `transpose_b`); both have rank >= 2
    and their leading (batch) dimensions broadcast. The result is
    `[batch..., M, N]`, accumulated in f32 for 16-bit types. The transpose
    flags let a `[out, in]` weight feed a linear layer without a copy.
    VJP: dlhs = dy * rhs^T, drhs = lhs^T * dy (flags folded into the
    products, batch dimensions summed where broadcast).

    ```mlir
    %y = rp.matmul %x, %w transpose_b
        : (tensor<2x8x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$lhs, RP_FloatTensor:$rhs,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_a` $transpose_a^)? (`transpose_b` $transpose_b^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    /// Infers the result type.
    OpBuilder<(ins "Value":$lhs, "Value":$rhs,
                   CArg<"bool", "false">:$transposeA,
                   CArg<"bool", "false">:$transposeB)>
  ];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def RP_ReduceOp : RP_PureOp<"reduce",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>]> {
  let summary = "reduces a tensor over some dimensions";
  let description = [{
    Combines the elements along `dims` (strictly increasing) with `kind`:
    `sum`, `mean` (floats only), `max` or `min`. With `keep_dims` the reduced
    dimensions stay as size 1. Float sums accumulate in a fixed order so
    results do not depend on the thread count.
    VJP: sum: dx = broadcast(dy); mean: dx = broadcast(dy) / n; max/min: dy
    goes to the first position that attains the extremum.

    ```mlir
    %m = rp.reduce mean %x dims = [2] keep_dims
        : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
    ```
  }];
  let arguments = (ins RP_ReduceKind:$kind, RP_NumericTensor:$input,
                   DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs RP_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input `dims` `=` $dims (`keep_dims` $keep_dims^)? attr-dict `:`
    type($input) `->` type($result)
  }];
  let builders = [
    /// Infers the result type.
    OpBuilder<(ins "ReduceKind":$kind, "Value":$input,
                   "ArrayRef<int64_t>":$dims, "bool":$keepDims)>
  ];
  let hasVerifier = 1;
  let hasFolder = 1;
}

class RP_SoftmaxLikeOp<string mnemonic, string math, string vjp>
    : RP_PureOp<mnemonic, [SameOperandsAndResultType, DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = math # " along one dimension";
  let description = "Computes " # math # " along `dim`, numerically stable "
      # "(the maximum is subtracted first). VJP: " # vjp #
      "\n\n```mlir\n%p = rp." # mnemonic #
      " %scores dim = 3 : tensor<2x4x8x8xf32>\n```";
  let arguments = (ins RP_FloatTensor:$input,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$dim);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = "$input `dim` `=` $dim attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def RP_SoftmaxOp : RP_SoftmaxLikeOp<"softmax", "softmax",
    "dx = y * (dy - sum(dy * y, dim)).">;
def RP_LogSoftmaxOp : RP_SoftmaxLikeOp<"log_softmax", "log-softmax",
    "dx = dy - exp(y) * sum(dy, dim).">;

def RP_LayerNormOp : RP_PureOp<"layer_norm",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>,
     AllTypesMatch<["input", "result"]>, AttrSizedOperandSegments]> {
  let summary = "layer normalization over the trailing dimensions";
  let description = [{
    Normalizes over the dimensions `[axis, rank)`:
    `(x - mean) / sqrt(var + epsilon) * scale + bias`, with the biased
    variance, as ONNX `LayerNormalization` and PyTorch `layer_norm`. `scale`
    and `bias` are optional and have the normalized shape. VJP: the standard
    layer-norm backward (dx from dy, the saved mean and rstd; dscale =
    sum(dy * xhat), dbias = sum(dy) over the leading dimensions).

    ```mlir
    %n = rp.layer_norm %x scale(%g) bias(%b) axis = 2 epsilon = 1.0e-05
        : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
        -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input,
                   Optional<RP_FloatTensor>:$scale,
                   Optional<RP_FloatTensor>:$bias,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                   F64Attr:$epsilon);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` `(` $scale^ `)`)? (`bias` `(` $bias^ `)`)?
    `axis` `=` $axis `epsilon` `=` $epsilon attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_RmsNormOp : RP_PureOp<"rms_norm",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>, AllElementTypesMatch<["input", "result"]>,
     AllTypesMatch<["input", "result"]>]> {
  let summary = "root-mean-square normalization over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2 over [axis, rank)) + epsilon) * scale`, as Llama's
    RMSNorm. `scale` is optional and has the normalized shape. VJP: dx =
    rstd * (g - xhat * mean(g * xhat)) with g = dy * scale; dscale =
    sum(dy * xhat) over the leading dimensions.

    ```mlir
    %n = rp.rms_norm %x scale(%g) axis = 2 epsilon = 1.0e-06
        : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input,
                   Optional<RP_FloatTensor>:$scale,
                   ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                   F64Attr:$epsilon);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` `(` $scale^ `)`)? `axis` `=` $axis `epsilon` `=` $epsilon
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_AttentionOp : RP_PureOp<"attention",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface,
                               ["isDifferentiableOperand"]>, AllElementTypesMatch<["query", "key", "value", "result"]>,
     AttrSizedOperandSegments]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `softmax(scale * Q K^T + mask) V` per batch and head, as PyTorch's
    `scaled_dot_product_attention`. Shapes are `[batch, heads, seq, dim]`:
    query `[B, H, S, D]`, key `[B, Hkv, T, D]`, value `[B, Hkv, T, Dv]`,
    result `[B, H, S, Dv]`; `H` is a multiple of `Hkv` (grouped-query
    attention shares each key/value head among `H / Hkv` query heads).
    `scale` defaults to `1 / sqrt(D)`. `mask` broadcasts to `[B, H, S, T]`:
    i1 keeps the positions that are true, a float mask is added to the
    scores; an i64 mask `[B, T]` is segment ids (each key position's
    document in a packed row): a query keeps the keys whose id equals its
    own position's, so documents never attend to each other with memory
    linear in `T`. `causal` masks key positions after the query position, with
    the queries the last `S` of the `T` positions (`S <= T`, aligned
    bottom-right as cuDNN's bottom-right causal mask: query `i` is at
    position `i + T - S`; with `S == T` the usual causal mask). `window`
    (with `causal` only) is a sliding window: the query at position `p`
    sees the keys in `(p - window, p]` (Mistral's and Gemma's local
    layers). `softcap` caps the scaled scores before the mask, as Gemma 2:
    `softcap * tanh(scale * q.k / softcap)`. `sinks` `[H]` (the query's
    element type) are GPT-OSS's attention sinks: a learned logit per query
    head, one more column in every query's softmax whose probability is
    dropped (the sink has no value), so a row's weights sum to less than 1.
    Devices may run it fused, with
    memory linear in `S`, and skip what the window and causal mask drop.
    VJP: the standard attention backward (recomputing the probabilities
    from Q, K and the saved log-sum-exp); the sinks' gradient is
    `-sum over batch and rows of P_sink * (dO . O)` per head. The mask gets no gradient;
    rp-autodiff rewrites an attention whose float mask needs one (a learned
    position bias) into matmuls, an add and a softmax first.

    ```mlir
    %o = rp.attention %q, %k, %v causal window = 4096 softcap = 50.0
        : (tensor<2x8x128x64xbf16>, tensor<2x2x128x64xbf16>,
           tensor<2x2x128x64xbf16>) -> tensor<2x8x128x64xbf16>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$query, RP_FloatTensor:$key,
                   RP_FloatTensor:$value, Optional<RP_Tensor>:$mask,
                   Optional<RP_FloatTensor>:$sinks,
                   UnitAttr:$causal, OptionalAttr<F64Attr>:$scale,
                   OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `)`)?
    (`sinks` `(` $sinks^ `)`)? (`causal` $causal^)?
    (`scale` `=` $scale^)? (`window` `=` $window^)?
    (`softcap` `=` $softcap^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale applied to Q K^T: the attribute, or 1 / sqrt(head dim).
    double getEffectiveScale();
  }];
}

} // opDocGroup RP_NNOps

#endif // RP_DIALECT_RP_RPCOMPUTEOPS_TD
