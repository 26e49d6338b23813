// RUN: rp-opt %s --rp-attach-loss --rp-slice-tokens="slices=3,4,5" | FileCheck %s
// RUN: rp-opt %s --rp-attach-loss --rp-slice-tokens="slices=3,4,5" --rp-autodiff | FileCheck %s --check-prefix=GRAD

// rp-slice-tokens over an attention with GPT-OSS's sinks (slice-tokens.mlir's
// first model, a sinks parameter added): each slice's attention keeps the
// sinks operand (a logit per head, the same for every query row, so a slice
// of the rows needs all of them), with the earlier slices' keys laid before
// its own; rp-autodiff then gives every slice's attention_grad a sinks
// gradient.

// CHECK-LABEL: func.func @main.slice0(
// CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} sinks(%{{.+}}) causal : (tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>, tensor<2xf32>) -> tensor<1x2x3x8xf32>
// CHECK-LABEL: func.func @main.slice1(
// CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} sinks(%{{.+}}) causal : (tensor<1x2x4x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<2xf32>) -> tensor<1x2x4x8xf32>
// CHECK-LABEL: func.func @main.slice2(
// CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} sinks(%{{.+}}) causal : (tensor<1x2x5x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>, tensor<2xf32>) -> tensor<1x2x5x8xf32>

// GRAD-LABEL: func.func @main.slice2(
// GRAD-SAME: tensor<2xf32> {rp.name = "grad:sinks"}
// GRAD: rp.attention_grad {{.+}} sinks(%{{.+}}) grad(%{{.+}}) causal : {{.+}} -> (tensor<1x2x5x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>, tensor<2xf32>)





module {
  func.func @main(%tokens: tensor<1x12xi64> {rp.name = "tokens"}) -> (tensor<1x12x32xf32> {rp.name = "logits"}) {
    %wte = rp.param "wte" trainable : tensor<32x16xf32>
    %wpe = rp.param "wpe" trainable : tensor<12x16xf32>
    %pos = rp.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]> : tensor<1x12xi64>
    %x0 = rp.layer "embed" (%tokens, %wte, %pos, %wpe) : (tensor<1x12xi64>, tensor<32x16xf32>, tensor<1x12xi64>, tensor<12x16xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%t: tensor<1x12xi64>, %w: tensor<32x16xf32>, %p: tensor<1x12xi64>, %wp: tensor<12x16xf32>):
      %e = rp.gather %w[%t] axis = 0 : (tensor<32x16xf32>, tensor<1x12xi64>) -> tensor<1x12x16xf32>
      %ep = rp.gather %wp[%p] axis = 0 : (tensor<12x16xf32>, tensor<1x12xi64>) -> tensor<1x12x16xf32>
      %s = rp.add %e, %ep : (tensor<1x12x16xf32>, tensor<1x12x16xf32>) -> tensor<1x12x16xf32>
      rp.yield %s : tensor<1x12x16xf32>
    }
    %wq = rp.param "wq" trainable : tensor<16x16xf32>
    %wk = rp.param "wk" trainable : tensor<8x16xf32>
    %wv = rp.param "wv" trainable : tensor<8x16xf32>
    %wo = rp.param "wo" trainable : tensor<16x16xf32>
    %cos = rp.constant dense<0.5> : tensor<12x8xf32>
    %sk = rp.param "sinks" trainable : tensor<2xf32>
    %x1 = rp.layer "attn.0" (%x0, %wq, %wk, %wv, %wo, %cos, %sk) : (tensor<1x12x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<12x8xf32>, tensor<2xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%x: tensor<1x12x16xf32>, %a: tensor<16x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>, %d: tensor<16x16xf32>, %rc: tensor<12x8xf32>, %sn: tensor<2xf32>):
      %q = rp.matmul %x, %a transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %k = rp.matmul %x, %b transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %v = rp.matmul %x, %c transpose_b : (tensor<1x12x16xf32>, tensor<8x16xf32>) -> tensor<1x12x8xf32>
      %qr = rp.reshape %q : tensor<1x12x16xf32> to tensor<1x12x2x8xf32>
      %qt = rp.transpose %qr permutation = [0, 2, 1, 3] : tensor<1x12x2x8xf32> -> tensor<1x2x12x8xf32>
      %qc = rp.mul %qt, %rc : (tensor<1x2x12x8xf32>, tensor<12x8xf32>) -> tensor<1x2x12x8xf32>
      %kr = rp.reshape %k : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %kt = rp.transpose %kr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %kc = rp.mul %kt, %rc : (tensor<1x1x12x8xf32>, tensor<12x8xf32>) -> tensor<1x1x12x8xf32>
      %vr = rp.reshape %v : tensor<1x12x8xf32> to tensor<1x12x1x8xf32>
      %vt = rp.transpose %vr permutation = [0, 2, 1, 3] : tensor<1x12x1x8xf32> -> tensor<1x1x12x8xf32>
      %att = rp.attention %qc, %kc, %vt sinks(%sn) causal : (tensor<1x2x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>, tensor<2xf32>) -> tensor<1x2x12x8xf32>
      %at = rp.transpose %att permutation = [0, 2, 1, 3] : tensor<1x2x12x8xf32> -> tensor<1x12x2x8xf32>
      %af = rp.reshape %at : tensor<1x12x2x8xf32> to tensor<1x12x16xf32>
      %o = rp.matmul %af, %d transpose_b : (tensor<1x12x16xf32>, tensor<16x16xf32>) -> tensor<1x12x16xf32>
      %y = rp.add %x, %o : (tensor<1x12x16xf32>, tensor<1x12x16xf32>) -> tensor<1x12x16xf32>
      rp.yield %y : tensor<1x12x16xf32>
    }
    %wh = rp.param "head" trainable : tensor<32x16xf32>
    %l = rp.layer "head" (%x1, %wh) : (tensor<1x12x16xf32>, tensor<32x16xf32>) -> tensor<1x12x32xf32> {
    ^bb0(%h: tensor<1x12x16xf32>, %w: tensor<32x16xf32>):
      %m = rp.matmul %h, %w transpose_b : (tensor<1x12x16xf32>, tensor<32x16xf32>) -> tensor<1x12x32xf32>
      rp.yield %m : tensor<1x12x32xf32>
    }
    return %l : tensor<1x12x32xf32>
  }
}
