// RUN: rp-opt %s -rp-attach-loss -rp-autodiff -canonicalize -split-input-file -verify-diagnostics | FileCheck %s
// RUN: rp-opt %s -rp-attach-loss -rp-autodiff=recompute=layer -canonicalize -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=LAYER

// Two layers: the last becomes the fused tail (forward, loss, backward),
// the first gets a backward layer that recomputes it from its input (those
// ops marked rp.recompute). Only
// the trainable parameter gets a gradient: the frozen one costs nothing.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %{{.+}}: tensor<f32> {rp.name = "loss_scale"})
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<8x8xf32> {rp.name = "grad:w"})
// CHECK: %[[H:.+]] = rp.layer "h.0"
// CHECK: %[[T:.+]]:3 = rp.layer "head" role = tail(%[[H]], %{{.+}}, %{{.+}}, %{{.+}})
// CHECK: rp.cross_entropy
// CHECK: rp.cross_entropy_grad
// CHECK: rp.matmul
// CHECK: %[[B:.+]] = rp.layer "h.0.backward" role = backward(%{{.+}}, %{{.+}}, %[[T]]#2)
// The recomputed forward is marked (plans time it apart), the backward not.
// CHECK: rp.matmul %{{.+}}, %{{.+}} {rp.recompute}
// CHECK-NEXT: rp.unary_grad tanh
// CHECK-NOT: rp.recompute
// CHECK: return %[[T]]#0, %[[T]]#1, %[[B]]
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %f = rp.param "frozen" at "w.bin"[256] : tensor<8x8xf32>
  %h = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t = rp.tanh %m : tensor<2x8xf32>
    rp.yield %t : tensor<2x8xf32>
  }
  %y = rp.layer "head" (%h, %f) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}

// -----

// A parameter used by two layers gets the sum of both gradients.
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.+]]:4 = rp.layer "head" role = tail
// CHECK: %[[B:.+]] = rp.layer "embed.backward" role = backward
// CHECK: rp.gather_grad
// CHECK: %[[SUM:.+]] = rp.add %[[T]]#3, %[[B]]
// CHECK: return %[[T]]#0, %[[T]]#1, %[[SUM]]
func.func @main(%ids: tensor<2xi64>) -> tensor<2x4xf32> {
  %e = rp.param "wte" trainable at "w.bin"[0] : tensor<4x8xf32>
  %h = rp.layer "embed" (%e, %ids) : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32> {
  ^bb0(%t: tensor<4x8xf32>, %i: tensor<2xi64>):
    %g = rp.gather %t[%i] axis = 0 : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
    rp.yield %g : tensor<2x8xf32>
  }
  %y = rp.layer "head" (%h, %e) : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x8xf32>, %t: tensor<4x8xf32>):
    %l = rp.matmul %a, %t transpose_b : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    rp.yield %l : tensor<2x4xf32>
  }
  return %y : tensor<2x4xf32>
}

// -----

// expected-error @+1 {{the model has no trainable parameter}}
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = rp.layer "head" (%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %t = rp.tanh %a : tensor<2x8xf32>
    rp.yield %t : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}

// -----

// Stage grain (the default): one backward recomputes every layer before
// the tail from the first layer's input; layer grain: one per layer.
// CHECK-LABEL: func.func @main
// CHECK: rp.layer "a..b.backward" role = backward
// CHECK-NOT: role = backward
// LAYER-LABEL: func.func @main
// LAYER: rp.layer "b.backward" role = backward
// LAYER: rp.layer "a.backward" role = backward
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %h = rp.layer "a" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %g = rp.layer "b" (%h) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %t = rp.tanh %a : tensor<2x8xf32>
    rp.yield %t : tensor<2x8xf32>
  }
  %y = rp.layer "head" (%g) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %s = rp.sigmoid %a : tensor<2x8xf32>
    rp.yield %s : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}
