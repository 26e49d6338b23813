// RUN: rp-opt %s --rp-attach-loss --rp-slice-tokens="slices=3,4,5" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: rp-opt %s --rp-attach-loss --rp-slice-tokens="slices=2" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=EVEN
// RUN: rp-opt %s --rp-attach-loss --rp-partition="devices=2 microbatches=1" --rp-slice-tokens="slices=2" --rp-lower-schedule -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SCHED

// A causal model of 12 tokens: learned positions (a 12-row table gathered
// by a position-id constant), RoPE-like cos table [12, 8] on queries and
// keys, grouped-query attention (2 query heads over 1 key/value head).
// Slices 3, 4, 5 are offsets 0, 3, 7.

// The unsliced function stays as it was (the schedule and partition are
// its); each slice is a function of its own after it.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: tensor<1x12xi64> {rp.name = "tokens"}
// CHECK: rp.attention %{{.+}} causal : (tensor<1x2x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x2x12x8xf32>

// Slice 0: no earlier keys, its own handed on as results.
// CHECK-LABEL: func.func @main.slice0(
// CHECK-SAME: %{{[^:]+}}: tensor<1x3xi64> {rp.name = "tokens"}, %{{[^:]+}}: tensor<1x3xi64> {rp.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<1x1x3x8xf32> {rp.name = "keys:attn.0"}, tensor<1x1x3x8xf32> {rp.name = "values:attn.0"})
// CHECK-SAME: attributes {rp.token_slice = {index = 0 : i64, offset = 0 : i64, sequence = 12 : i64, size = 3 : i64}}
// The weights keep their shapes, the 12-row position table too.
// CHECK: rp.param "wpe" trainable : tensor<12x16xf32>
// CHECK: rp.slice %{{.+}} offsets = [0, 0] strides = [1, 1] : tensor<1x12xi64> -> tensor<1x3xi64>
// CHECK: rp.slice %{{.+}} offsets = [0, 0] strides = [1, 1] : tensor<12x8xf32> -> tensor<3x8xf32>
// CHECK: rp.layer "attn.0"
// CHECK-SAME: -> (tensor<1x3x16xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>)
// CHECK-NOT: rp.concat
// CHECK: rp.attention %{{.+}} causal : (tensor<1x2x3x8xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>) -> tensor<1x2x3x8xf32>
// CHECK: rp.yield %{{.+}}, %[[K0:.+]], %[[V0:.+]] : tensor<1x3x16xf32>, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>

// Slice 1 (offset 3): the three earlier keys and values come in, are laid
// before its own four, and its own four go out; positions read at 3.
// CHECK-LABEL: func.func @main.slice1(
// CHECK-SAME: %{{[^:]+}}: tensor<1x4xi64> {rp.name = "tokens"}, %{{[^:]+}}: tensor<1x4xi64> {rp.name = "labels"}, %[[KP:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "keys:attn.0"}, %[[VP:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "values:attn.0"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<1x1x4x8xf32> {rp.name = "keys:attn.0"}, tensor<1x1x4x8xf32> {rp.name = "values:attn.0"})
// CHECK-SAME: offset = 3 : i64
// CHECK: rp.slice %{{.+}} offsets = [0, 3] strides = [1, 1] : tensor<1x12xi64> -> tensor<1x4xi64>
// CHECK: rp.slice %{{.+}} offsets = [3, 0] strides = [1, 1] : tensor<12x8xf32> -> tensor<4x8xf32>
// CHECK: rp.layer "attn.0"(%{{.+}}, %[[KP]], %[[VP]])
// CHECK-NEXT: ^bb0({{.+}}, %[[KA:[^:]+]]: tensor<1x1x3x8xf32>, %[[VA:[^:]+]]: tensor<1x1x3x8xf32>):
// CHECK: %[[KS:.+]] = rp.mul %{{.+}}, %{{.+}} : (tensor<1x1x4x8xf32>, tensor<4x8xf32>) -> tensor<1x1x4x8xf32>
// CHECK: %[[KC:.+]] = rp.concat %[[KA]], %[[KS]] dim = 2 : (tensor<1x1x3x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x7x8xf32>
// CHECK: %[[VC:.+]] = rp.concat %[[VA]], %[[VS:.+]] dim = 2 : (tensor<1x1x3x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x7x8xf32>
// CHECK: rp.attention %{{.+}}, %[[KC]], %[[VC]] causal : (tensor<1x2x4x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: rp.yield %{{.+}}, %[[KS]], %[[VS]] :

// The last slice (offset 7) reads the seven before it and hands nothing on.
// CHECK-LABEL: func.func @main.slice2(
// CHECK-SAME: tensor<1x5xi64> {rp.name = "tokens"}, %{{[^:]+}}: tensor<1x5xi64> {rp.name = "labels"}, %{{[^:]+}}: tensor<1x1x7x8xf32> {rp.name = "keys:attn.0"}, %{{[^:]+}}: tensor<1x1x7x8xf32> {rp.name = "values:attn.0"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"})
// CHECK: rp.slice %{{.+}} offsets = [7, 0] strides = [1, 1] : tensor<12x8xf32> -> tensor<5x8xf32>
// CHECK: rp.attention %{{.+}} causal : (tensor<1x2x5x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x2x5x8xf32>

// Two even slices of 6.
// EVEN: func.func @main.slice0(%{{[^:]+}}: tensor<1x6xi64>
// EVEN: func.func @main.slice1(%{{[^:]+}}: tensor<1x6xi64> {rp.name = "tokens"}, %{{[^:]+}}: tensor<1x6xi64> {rp.name = "labels"}, %{{[^:]+}}: tensor<1x1x6x8xf32> {rp.name = "keys:attn.0"}
// EVEN-NOT: func.func @main.slice2

// The pipeline passes read the one unsliced function: the slices' are the
// programs of its microbatches, not a model of their own. The schedule
// runs the slices as microbatches (lower-schedule-token-slices.mlir).
// SCHED: func.func @main.slice1
// SCHED: rp.schedule @main attributes {rp.token_slices = 2 : i64}

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
    %x1 = rp.layer "attn.0" (%x0, %wq, %wk, %wv, %wo, %cos) : (tensor<1x12x16xf32>, tensor<16x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<12x8xf32>) -> tensor<1x12x16xf32> {
    ^bb0(%x: tensor<1x12x16xf32>, %a: tensor<16x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>, %d: tensor<16x16xf32>, %rc: tensor<12x8xf32>):
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
      %att = rp.attention %qc, %kc, %vt causal : (tensor<1x2x12x8xf32>, tensor<1x1x12x8xf32>, tensor<1x1x12x8xf32>) -> tensor<1x2x12x8xf32>
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
