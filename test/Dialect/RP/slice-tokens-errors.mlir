// RUN: rp-opt %s --rp-slice-tokens="slices=5,5" -split-input-file -verify-diagnostics
// RUN: not rp-opt %s --rp-slice-tokens="slices=auto" -split-input-file 2>&1 | FileCheck %s --check-prefix=AUTO

// What rp-predict-token-slices refuses, rp-slice-tokens refuses: attention
// that lets a token see later ones.
func.func @main(%x: tensor<1x12x8xf32>) -> tensor<1x1x12x8xf32> {
  %y = rp.layer "attn" (%x) : (tensor<1x12x8xf32>) -> tensor<1x1x12x8xf32> {
  ^bb0(%a: tensor<1x12x8xf32>):
    %r = rp.reshape %a : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
    %t = rp.transpose %r permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
    // expected-error @+1 {{token slices need causal attention}}
    %o = rp.attention %t, %t, %t : (tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x1x12x8xf32>
    rp.yield %o : tensor<1x1x12x8xf32>
  }
  return %y : tensor<1x1x12x8xf32>
}

// -----

// Sizes that do not cover the sequence; `auto` is the prediction's to
// resolve.
// expected-error @+1 {{token slices: the sizes sum to 10 tokens, the sequence has 12}}
func.func @main(%x: tensor<1x12x8xf32>) -> tensor<1x1x12x8xf32> {
  %y = rp.layer "attn" (%x) : (tensor<1x12x8xf32>) -> tensor<1x1x12x8xf32> {
  ^bb0(%a: tensor<1x12x8xf32>):
    %r = rp.reshape %a : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
    %t = rp.transpose %r permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
    %o = rp.attention %t, %t, %t causal : (tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x1x12x8xf32>
    rp.yield %o : tensor<1x1x12x8xf32>
  }
  return %y : tensor<1x1x12x8xf32>
}
// AUTO: error: rp-slice-tokens: slices=auto is the prediction's to resolve (rp-predict-token-slices=cut=1 before it); give K or the sizes
