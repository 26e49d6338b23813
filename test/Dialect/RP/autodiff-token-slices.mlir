// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2" --rp-slice-tokens=slices=3,4,5 --rp-autodiff | FileCheck %s

// rp-autodiff differentiates @main and each token slice. A slice reads the
// earlier slices' keys and values (arguments keys:L, values:L) and hands
// its own on (results of the same names); differentiated, it takes the
// gradients of its own as arguments (grad:keys:L, what the later slices
// sent) and returns those of the prefix (grad:keys:L results, which the
// schedule adds to the earlier slices'). autodiff-token-slices.test checks
// the numbers; this file the form. The fused tail here is attn.1 and the
// head: the keys attn.1 keeps are results of the merged tail, their
// gradients its inputs.

// The unsliced function is differentiated as before: no kept keys.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: {rp.name = "loss_scale"}) -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<32x16xf32> {rp.name = "grad:wte"}

// Slice 0: no prefix, so no prefix gradient; its own keys' gradients come in.
// CHECK-LABEL: func.func @main.slice0(
// CHECK-SAME: {rp.name = "loss_scale"}, %{{[^:]+}}: tensor<1x1x3x8xf32> {rp.name = "grad:keys:attn.0"}, %{{[^:]+}}: tensor<1x1x3x8xf32> {rp.name = "grad:values:attn.0"}, %{{[^:]+}}: tensor<1x1x3x8xf32> {rp.name = "grad:keys:attn.1"}, %{{[^:]+}}: tensor<1x1x3x8xf32> {rp.name = "grad:values:attn.1"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<1x1x3x8xf32> {rp.name = "keys:attn.0"}, tensor<1x1x3x8xf32> {rp.name = "values:attn.0"}, tensor<1x1x3x8xf32> {rp.name = "keys:attn.1"}, tensor<1x1x3x8xf32> {rp.name = "values:attn.1"}, tensor<32x16xf32> {rp.name = "grad:wte"}
// CHECK-NOT: grad:keys:attn.0"}, tensor
// CHECK-SAME: {rp.name = "grad:head"})

// Slice 1 (offset 3, 4 tokens): both.
// CHECK-LABEL: func.func @main.slice1(
// CHECK-SAME: %[[KP0:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "keys:attn.0"}, %[[VP0:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "values:attn.0"}, %[[KP1:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "keys:attn.1"}, %[[VP1:[^:]+]]: tensor<1x1x3x8xf32> {rp.name = "values:attn.1"}, %[[SCALE:[^:]+]]: tensor<f32> {rp.name = "loss_scale"},
// CHECK-SAME: %[[GK0:[^:]+]]: tensor<1x1x4x8xf32> {rp.name = "grad:keys:attn.0"}, %[[GV0:[^:]+]]: tensor<1x1x4x8xf32> {rp.name = "grad:values:attn.0"}, %[[GK1:[^:]+]]: tensor<1x1x4x8xf32> {rp.name = "grad:keys:attn.1"}, %[[GV1:[^:]+]]: tensor<1x1x4x8xf32> {rp.name = "grad:values:attn.1"})
// CHECK-SAME: tensor<1x1x4x8xf32> {rp.name = "keys:attn.0"}
// CHECK-SAME: tensor<32x16xf32> {rp.name = "grad:head"}, tensor<1x1x3x8xf32> {rp.name = "grad:keys:attn.0"}, tensor<1x1x3x8xf32> {rp.name = "grad:values:attn.0"}, tensor<1x1x3x8xf32> {rp.name = "grad:keys:attn.1"}, tensor<1x1x3x8xf32> {rp.name = "grad:values:attn.1"})
// CHECK: %[[A0:.+]]:3 = rp.layer "attn.0"(%{{.+}}, %[[KP0]], %[[VP0]])

// The tail keeps attn.1's keys and values (results 2 and 3) and takes
// their gradients; its attention gradient's first three rows are the
// prefix's, the other four are added to what came in.
// CHECK: %[[T:.+]]:12 = rp.layer "attn.1..head" role = tail(%[[A0]]#0, {{.+}}, %[[KP1]], %[[VP1]], {{.+}}, %[[SCALE]], %[[GK1]], %[[GV1]])
// CHECK-SAME: -> (tensor<f32>, tensor<i64>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>,
// CHECK: rp.attention_grad {{.+}} causal window = 5 : (tensor<1x2x4x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>)
// CHECK: rp.slice %value_grad offsets = [0, 0, 0, 0] {{.+}} -> tensor<1x1x3x8xf32>
// CHECK: rp.slice %value_grad offsets = [0, 0, 3, 0] {{.+}} -> tensor<1x1x4x8xf32>

// The backward of embed and attn.0 takes attn.0's key gradients and
// returns its prefix's.
// CHECK: %[[B:.+]]:7 = rp.layer "embed..attn.0.backward" role = backward({{.+}}, %[[KP0]], %[[VP0]], %[[T]]#4, %[[GK0]], %[[GV0]])
// CHECK-SAME: -> ({{.+}}, tensor<1x1x3x8xf32>, tensor<1x1x3x8xf32>)
// CHECK: return %[[T]]#0, %[[T]]#1, %[[A0]]#1, %[[A0]]#2, %[[T]]#2, %[[T]]#3, {{.+}}, %[[B]]#5, %[[B]]#6, %[[T]]#9, %[[T]]#10 :

// The last slice hands nothing on and takes no key gradients.
// CHECK-LABEL: func.func @main.slice2(
// CHECK-SAME: %{{[^:]+}}: tensor<f32> {rp.name = "loss_scale"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<32x16xf32> {rp.name = "grad:wte"}
// CHECK-SAME: tensor<1x1x7x8xf32> {rp.name = "grad:values:attn.1"})
