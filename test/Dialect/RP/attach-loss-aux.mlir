// RUN: rp-opt %s -rp-attach-loss=loss=cross-entropy+output:aux -split-input-file -verify-diagnostics | FileCheck %s

// Cross-entropy of the logits plus the scalar output `aux` (an auxiliary
// loss such as MoE load balancing): the layer yields ce_sum + aux * count,
// so the step loss sum(loss_sum) / sum(count) adds the token-weighted mean
// of the microbatches' aux.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.+}}: tensor<2x4xi64> {rp.name = "labels"}) -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"})
// CHECK: rp.layer "head"(%{{.+}}, %{{.+}}) : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
// CHECK: %[[AUX:.+]] = rp.reduce sum
// CHECK: %[[SUM:.+]], %[[COUNT:.+]] = rp.cross_entropy
// CHECK: %[[CF:.+]] = rp.cast %[[COUNT]] : tensor<i64> to tensor<f32>
// CHECK: %[[W:.+]] = rp.mul %[[AUX]], %[[CF]]
// CHECK: %[[L:.+]] = rp.add %[[SUM]], %[[W]]
// CHECK: rp.yield %[[L]], %[[COUNT]]
func.func @main(%x: tensor<2x4x8xf32>) -> (tensor<f32> {rp.name = "aux"}, tensor<2x4x8xf32> {rp.name = "logits"}) {
  %y:2 = rp.layer "head" (%x) : (tensor<2x4x8xf32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  ^bb0(%a: tensor<2x4x8xf32>):
    %s = rp.reduce sum %a dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
    rp.yield %s, %a : tensor<f32>, tensor<2x4x8xf32>
  }
  return %y#0, %y#1 : tensor<f32>, tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{--loss=cross-entropy+output:aux needs two outputs (logits and the scalar 'aux'), but the model has 1}}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "aux"}) {
  %y = rp.layer "head" (%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    rp.yield %a : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}

// -----

// expected-error @+1 {{--loss=cross-entropy+output:aux: 'aux' names no output; outputs: logits other}}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "logits"}, tensor<f32> {rp.name = "other"}) {
  %y:2 = rp.layer "head" (%x) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<f32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %s = rp.reduce sum %a dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    rp.yield %a, %s : tensor<2x8xf32>, tensor<f32>
  }
  return %y#0, %y#1 : tensor<2x8xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{the auxiliary loss 'aux' must be a float scalar, but is 'tensor<2xf32>'}}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "logits"}, tensor<2xf32> {rp.name = "aux"}) {
  %y:2 = rp.layer "head" (%x) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %s = rp.reduce sum %a dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
    rp.yield %a, %s : tensor<2x8xf32>, tensor<2xf32>
  }
  return %y#0, %y#1 : tensor<2x8xf32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{the auxiliary loss 'aux' must come from the layer computing the logits}}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "logits"}, tensor<f32> {rp.name = "aux"}) {
  %s = rp.layer "router" (%x) : (tensor<2x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<2x8xf32>):
    %r = rp.reduce sum %a dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    rp.yield %r : tensor<f32>
  }
  %y = rp.layer "head" (%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    rp.yield %a : tensor<2x8xf32>
  }
  return %y, %s : tensor<2x8xf32>, tensor<f32>
}
