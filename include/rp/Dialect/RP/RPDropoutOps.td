//===- RPDropoutOps.td - rp.dropout -------------------------*- tablegen -*-===//
//
// LoRA's lora_dropout (rp-add-lora --dropout): a mask that is a pure
// function of where an element is, so the backward recomputes it and every
// device count and microbatch split drops the same elements.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPDROPOUTOPS_TD
#define RP_DIALECT_RP_RPDROPOUTOPS_TD

def RP_DropoutOp : RP_PureOp<"dropout", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<RP_DifferentiableOpInterface>]> {
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    `y = keep ? x / (1 - probability) : 0`, where element i is kept when the
    Philox4x32-10 value of (the run's seed, the step, `tensor`, i's index in
    the global batch) is at least `probability * 2^32`
    (runtime/include/rp/runtime/kernels/Philox.h; python/rp/_philox.py is
    the same in numpy). `key` is the `dropout_key` input of `@main`, one row
    `(seed, step, microbatch, on)` per microbatch that the trainer fills
    each step; a row with `on = 0` (evaluation) passes `x` through. `x`'s
    dimension 0 is the batch's, so microbatch m's first element is global
    element m times its element count. `tensor` tells the dropouts of a
    step apart (rp-add-lora numbers them by weight name).

    VJP: dx = the same op on dy (the same mask; dropout is linear in x).

    ```mlir
    %y = rp.dropout %x, %key {probability = 1.000000e-01 : f64, tensor = 7 : i64}
        : tensor<6x64xf32>, tensor<1x4xi64>
    ```
  }];
  let arguments = (ins RP_FloatTensor:$input,
      StaticShapeTensorOf<[I64]>:$key, F64Attr:$probability, I64Attr:$tensor);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $key attr-dict `:` type($input) `,` type($key)
  }];
  let hasVerifier = 1;
}

#endif // RP_DIALECT_RP_RPDROPOUTOPS_TD
