//===- RPQuantOps.td - rp quantized frozen weights ---------*- tablegen -*-===//
//
// A frozen weight of a LoRA model stored quantized (rp-quantize-base): an i8
// parameter holding the blob (contract/include/rp/contract/Quantize.h) and
// an rp.dequantize inside each layer that reads it, so that the host memory
// and every weight upload hold the quantized bytes and the GEMMs read the
// compute dtype.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_RPQUANTOPS_TD
#define RP_DIALECT_RP_RPQUANTOPS_TD

def RP_QuantKind : I32EnumAttr<"QuantKind",
    "the storage format of a quantized frozen weight", [
    I32EnumAttrCase<"nf4", 0>,
    I32EnumAttrCase<"int8", 1>
  ]> {
  let cppNamespace = "::mlir::rp";
}

def RP_DequantizeOp : RP_PureOp<"dequantize"> {
  let summary = "a quantized frozen weight in the compute dtype";
  let description = [{
    Reads `blob`, the bytes of a weight quantized as `kind` (the layout and
    arithmetic of contract/include/rp/contract/Quantize.h), and produces the
    weight: `nf4` is QLoRA's 4-bit NormalFloat, blocks of 64 with their
    absmax double-quantized to 8 bits in blocks of 256 (bitsandbytes'
    `compress_statistics=True`); `int8` is per-block-of-64 absmax int8. Each
    value is computed in f32 and rounded once to the result's element type,
    the same way on every device and backend (the host kernel is the
    reference).

    The blob is a frozen parameter: the op has no gradient rule, and none
    is needed, since nothing flows to an integer tensor; a gradient flows
    through the result to the inputs of the GEMMs that read it.

    ```mlir
    %w = rp.dequantize nf4 %blob : tensor<2180xi8> -> tensor<64x64xbf16>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$blob, RP_QuantKind:$kind);
  let results = (outs RP_FloatTensor:$result);
  let assemblyFormat = [{
    $kind $blob attr-dict `:` type($blob) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // RP_DIALECT_RP_RPQUANTOPS_TD
