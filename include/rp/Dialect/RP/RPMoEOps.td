//===- RPMoEOps.td - rp mixture-of-experts ops -------------*- tablegen -*-===//
//
// A mixture-of-experts layer in five steps: route (logits -> top-k experts
// and their weights), dispatch (token rows grouped by expert), grouped
// matmuls (every expert's linear layer over its group of rows), the
// activation (ordinary elementwise ops) and combine (the weighted sum of
// each token's expert outputs). Shapes are static and sized for the worst
// case; how many rows each expert got (`counts`) is known only when the
// kernels run, and only kernels read it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPMOEOPS_TD
#define RP_DIALECT_RP_RPMOEOPS_TD

def RP_MoEOps : OpDocGroup {
  let summary = "Mixture-of-experts ops";
  let description = [{
    Routing, dispatch grouped by expert, grouped matmuls and the weighted
    combine, with their gradient ops. A layer with `T` tokens, `E` experts
    and `K` experts per token dispatches `T * K` rows; row `r` of expert
    `e`'s group is row `offset(e) + r` of the dispatched tensor, with
    `offset(e)` the sum of the counts of the experts before `e`.
  }];
}

def RP_MoESoftmax : I32EnumAttr<"MoESoftmax",
    "where rp.moe.route takes the softmax", [
    I32EnumAttrCase<"before", 0>, I32EnumAttrCase<"after", 1>
  ]> {
  let cppNamespace = "::mlir::rp";
}

let opDocGroup = RP_MoEOps in {

def RP_MoERouteOp : RP_PureOp<"moe.route",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "top-k experts of each token and their routing weights";
  let description = [{
    `logits` is `[T, E]` (a router's scores of `E` experts for `T` tokens).
    `experts[t]` are the `top_k` largest scores of token `t`, largest first;
    equal scores are ordered exactly as PyTorch's CPU `topk` orders them
    (a NaN counts as the largest). `weights[t]` are:

    - `softmax = before` (Mixtral, Qwen-MoE): `p = softmax(logits[t])`, the
      top-k are taken of `p` and the weights are their `p`; with
      `normalize` they are divided by their sum.
    - `softmax = after` (GPT-OSS): the top-k are taken of the logits and the
      weights are the softmax of the `top_k` selected logits.

    VJP: rp.moe.route_grad gives the logits' gradient from the weights'
    (the experts are integers and get none).

    ```mlir
    %w, %e = rp.moe.route %logits top_k = 2 softmax = before normalize
        : tensor<16x8xf32> -> (tensor<16x2xf32>, tensor<16x2xi64>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$logits,
                   ConfinedAttr<I64Attr, [IntPositive]>:$top_k,
                   RP_MoESoftmax:$softmax, UnitAttr:$normalize);
  let results = (outs RP_FloatTensor:$weights, RP_IndexTensor:$experts);
  let assemblyFormat = [{
    $logits `top_k` `=` $top_k `softmax` `=` $softmax
    (`normalize` $normalize^)? attr-dict `:` type($logits) `->`
    `(` type($weights) `,` type($experts) `)`
  }];
  let hasVerifier = 1;
}

def RP_MoERouteGradOp : RP_PureOp<"moe.route_grad",
    [AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of rp.moe.route's weights back to the logits";
  let description = [{
    Recomputes the softmax of the route (`softmax`, `normalize` as the
    forward op) from `logits` and the chosen `experts`, and maps the
    weights' gradient `grad` (`[T, K]`) to the logits' (`[T, E]`): through
    the division by the sum, then the softmax (over all `E` scores with
    `before`, over the `K` chosen ones with `after`, the others getting
    zero). Each row is summed in a fixed order.

    ```mlir
    %dl = rp.moe.route_grad %logits, %e grad(%dw) softmax = before normalize
        : (tensor<16x8xf32>, tensor<16x2xi64>, tensor<16x2xf32>)
        -> tensor<16x8xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$logits, RP_IndexTensor:$experts,
                   RP_FloatTensor:$grad, RP_MoESoftmax:$softmax,
                   UnitAttr:$normalize);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $experts `grad` `(` $grad `)` `softmax` `=` $softmax
    (`normalize` $normalize^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_MoEDispatchOp : RP_PureOp<"moe.dispatch",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "token rows grouped by expert";
  let description = [{
    `input` is `[T, H]` and `experts` the `[T, K]` choices of rp.moe.route.
    Writes each token's row once per chosen expert into `rows` (`[T*K, H]`),
    grouped by expert in expert order and, within a group, in (token,
    slot) order, so the layout is deterministic. `positions[t, k]` (i32,
    `[T, K]`) is the row that token `t`'s `k`-th choice went to and
    `counts[e]` (i32, `[E]`; `E` is the experts' count) the size of expert
    `e`'s group. An expert index outside `[0, E)` is a runtime error.
    VJP: dinput = the unweighted rp.moe.combine of the rows' gradient.

    ```mlir
    %rows, %pos, %counts = rp.moe.dispatch %x, %e
        : (tensor<16x32xf32>, tensor<16x2xi64>)
        -> (tensor<32x32xf32>, tensor<16x2xi32>, tensor<8xi32>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input, RP_IndexTensor:$experts);
  let results = (outs RP_FloatTensor:$rows, RP_IndexTensor:$positions,
                 RP_IndexTensor:$counts);
  let assemblyFormat = [{
    $input `,` $experts attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_MoEGroupedMatmulOp : RP_PureOp<"moe.grouped_matmul",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>,
     AllElementTypesMatch<["input", "weight", "result"]>]> {
  let summary = "each expert's linear layer over its group of rows";
  let description = [{
    `input` is `[R, K]` rows grouped by expert as rp.moe.dispatch lays them
    out, `weight` is `[E, K, N]` (`[E, N, K]`, a stack of `nn.Linear`
    weights, with `transpose_b`) and `counts` (`[E]`) the group sizes. Row
    `r` of group `e` is multiplied by `weight[e]` (transposed with
    `transpose_b`); rows past the last group are zero. Accumulated in f32
    for 16-bit types. VJP: dinput = grouped_matmul(dy, weight) with the
    other transpose; dweight = rp.moe.grouped_matmul_wgrad; counts get none.

    ```mlir
    %h = rp.moe.grouped_matmul %rows, %w1, %counts transpose_b
        : (tensor<32x32xf32>, tensor<8x64x32xf32>, tensor<8xi32>)
        -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input, RP_FloatTensor:$weight,
                   RP_IndexTensor:$counts, UnitAttr:$transpose_b);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $counts (`transpose_b` $transpose_b^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_MoEGroupedMatmulWGradOp : RP_PureOp<"moe.grouped_matmul_wgrad",
    [AllElementTypesMatch<["input", "grad", "result"]>]> {
  let summary = "weight gradient of rp.moe.grouped_matmul";
  let description = [{
    For every expert `e`, `input_e^T grad_e` (`[K, N]`), or `grad_e^T
    input_e` (`[N, K]`) with `transpose_b`, where `input_e` and `grad_e` are
    the rows of group `e`. An expert with no rows gets zeros. The rows of a
    group are summed in row order.

    ```mlir
    %dw1 = rp.moe.grouped_matmul_wgrad %rows, %dh, %counts transpose_b
        : (tensor<32x32xf32>, tensor<32x64xf32>, tensor<8xi32>)
        -> tensor<8x64x32xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input, RP_FloatTensor:$grad,
                   RP_IndexTensor:$counts, UnitAttr:$transpose_b);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `,` $counts (`transpose_b` $transpose_b^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_MoECombineOp : RP_PureOp<"moe.combine",
    [DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>,
     AllElementTypesMatch<["rows", "result"]>]> {
  let summary = "each token's expert outputs summed back in token order";
  let description = [{
    `rows` is `[R, H]` (the experts' outputs in dispatch order) and
    `positions` the `[T, K]` rows of rp.moe.dispatch. `result[t] = sum over
    k of weights[t, k] * rows[positions[t, k]]`, summed in `k` order; without
    `weights` every weight is 1. VJP: rp.moe.combine_grad.

    ```mlir
    %y = rp.moe.combine %out, %pos weights(%w)
        : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>)
        -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$rows, RP_IndexTensor:$positions,
                   Optional<RP_FloatTensor>:$weights);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $positions (`weights` `(` $weights^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def RP_MoECombineGradOp : RP_PureOp<"moe.combine_grad"> {
  let summary = "gradients of rp.moe.combine";
  let description = [{
    Given the combined result's gradient `grad` (`[T, H]`): the rows'
    gradient (`[R, H]`; row `positions[t, k]` gets `weights[t, k] *
    grad[t]`, rows no token reads get zeros) and, with `weights`, the
    weights' gradient (`[T, K]`: `dot(grad[t], rows[positions[t, k]])`).

    ```mlir
    %drows, %dw = rp.moe.combine_grad %out, %pos weights(%w) grad(%dy)
        : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>,
           tensor<16x32xf32>) -> (tensor<32x32xf32>, tensor<16x2xf32>)
    ```
  }];
  let arguments = (ins RP_FloatTensor:$rows, RP_IndexTensor:$positions,
                   Optional<RP_FloatTensor>:$weights, RP_FloatTensor:$grad);
  let results = (outs RP_FloatTensor:$rows_grad,
                 Variadic<RP_FloatTensor>:$weights_grad);
  let assemblyFormat = [{
    $rows `,` $positions (`weights` `(` $weights^ `)`)? `grad` `(` $grad `)`
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

} // opDocGroup RP_MoEOps

#endif // RP_DIALECT_RP_RPMOEOPS_TD
