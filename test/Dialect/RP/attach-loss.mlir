// RUN: rp-opt %s -rp-attach-loss -split-input-file -verify-diagnostics | FileCheck %s
// RUN: (rp-opt %s -rp-attach-loss=loss=output:aux -split-input-file 2>/dev/null; echo "exit $?") | FileCheck %s --check-prefix=OUTPUT
// RUN: (rp-opt %s -rp-attach-loss=loss=output:aux -split-input-file 2>&1 >/dev/null; echo "exit $?") | FileCheck %s --check-prefix=OUTERR

// Cross-entropy on the only output: a labels input, the loss in the last
// layer, @main returning loss_sum and count.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.+}}: tensor<2x4xi64> {rp.name = "labels"}) -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"})
// CHECK: rp.layer "head"(%{{.+}}, %{{.+}}) : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
// CHECK: rp.cross_entropy %{{.+}}, %{{.+}} ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
// OUTERR: error: --loss=output:aux: 'aux' names no output; outputs: logits
func.func @main(%x: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32> {rp.name = "logits"}) {
  %y = rp.layer "head" (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%a: tensor<2x4x8xf32>):
    %t = rp.tanh %a : tensor<2x4x8xf32>
    rp.yield %t : tensor<2x4x8xf32>
  }
  return %y : tensor<2x4x8xf32>
}

// -----

// expected-error @+1 {{the model has 2 outputs and cross-entropy needs one, the logits (outputs: logits aux). A Hugging Face model returns its KV cache too unless traced or exported with use_cache=False (rp finetune does that); otherwise choose the loss with --loss=output:NAME}}
func.func @main(%x: tensor<2x8xf32>) -> (tensor<2x8xf32> {rp.name = "logits"}, tensor<f32> {rp.name = "aux"}) {
  %y:2 = rp.layer "head" (%x) : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<f32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %s = rp.reduce sum %a dims = [0, 1] : tensor<2x8xf32> -> tensor<f32>
    rp.yield %a, %s : tensor<2x8xf32>, tensor<f32>
  }
  return %y#0, %y#1 : tensor<2x8xf32>, tensor<f32>
}
// The same model with --loss=output:aux takes the scalar as the loss.
// OUTPUT-LABEL: func.func @main
// OUTPUT-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"})
// OUTPUT: rp.constant dense<1> : tensor<i64>

// -----

// expected-error @+1 {{the loss input must come from a layer; group the model into layers first (rp-group-layers)}}
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %t = rp.tanh %x : tensor<2x8xf32>
  return %t : tensor<2x8xf32>
}

// -----

// expected-error @+1 {{cross-entropy needs float logits [..., classes], but the output is 'tensor<2x8xi64>'}}
func.func @main(%x: tensor<2x8xi64>) -> tensor<2x8xi64> {
  %y = rp.layer "head" (%x) : (tensor<2x8xi64>) -> tensor<2x8xi64> {
  ^bb0(%a: tensor<2x8xi64>):
    %n = rp.neg %a : tensor<2x8xi64>
    rp.yield %n : tensor<2x8xi64>
  }
  return %y : tensor<2x8xi64>
}
// OUTERR: exit 1
// OUTPUT: exit 1
