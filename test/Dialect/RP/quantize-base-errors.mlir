// RUN: rp-opt %s -rp-quantize-base="kind=nf4 weights-file=%t.bin" -split-input-file -verify-diagnostics

// A model without adapters trains its weights: refused, naming the flag.
// expected-error @+1 {{--quantize-base nf4 stores the frozen base of a LoRA model quantized, and this model has no adapters: add them (--lora-rank N); a trained weight cannot be quantized}}
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %q = rp.param "q_proj" trainable at "w.bin"[0] : tensor<8x4xf32>
  %y = rp.layer "h.0" (%x, %q) : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wq: tensor<8x4xf32>):
    %m = rp.matmul %a, %wq transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    rp.yield %m : tensor<3x8xf32>
  }
  return %y : tensor<3x8xf32>
}

// -----

// Adapters, but every frozen weight is read by something else than a GEMM
// (here a tanh): nothing to quantize.
// expected-error @+1 {{--quantize-base: no frozen linear or expert weight to quantize}}
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %w = rp.param "scale" at "w.bin"[0] : tensor<3x4xf32>
  %a = rp.param "q.lora_A" trainable : tensor<2x4xf32>
  %y = rp.layer "h.0" (%x, %w, %a) : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%v: tensor<3x4xf32>, %s: tensor<3x4xf32>, %aa: tensor<2x4xf32>):
    %t = rp.tanh %s : tensor<3x4xf32>
    %m = rp.mul %v, %t : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    rp.yield %m : tensor<3x4xf32>
  }
  return %y : tensor<3x4xf32>
}

// -----

// rp.dequantize's blob has the contract's size for the result.
func.func @bad_blob(%b: tensor<10xi8>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'rp.dequantize' op expected a blob of 44 bytes (tensor<44xi8>) for nf4 of 64 values but got 'tensor<10xi8>'}}
  %w = rp.dequantize nf4 %b : tensor<10xi8> -> tensor<8x8xf32>
  return %w : tensor<8x8xf32>
}
