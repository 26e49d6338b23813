// RUN: rp-opt %s -rp-attach-loss -rp-fuse-linear-cross-entropy=chunk=128 -rp-autodiff -canonicalize | FileCheck %s

// A GPT-style tied head through autodiff: the forward and the backward use
// the fused ops, no [tokens, vocabulary] tensor is left anywhere, and the
// embedding table gets the sum of the gather's and the head's gradients.
// CHECK-LABEL: func.func @main
// CHECK-NOT: tensor<2x16x1000xf32>
// CHECK: %[[T:.+]]:4 = rp.layer "head" role = tail
// CHECK: rp.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 chunk = 128
// CHECK: %[[DH:.+]], %[[DW:.+]] = rp.linear_cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 chunk = 128 : (tensor<2x16x8xf32>, tensor<1000x8xf32>, tensor<2x16xi64>, tensor<f32>) -> (tensor<2x16x8xf32>, tensor<1000x8xf32>)
// CHECK: rp.layer "embed.backward" role = backward
// CHECK: rp.gather_grad
// CHECK: rp.add %[[T]]#3
// CHECK-NOT: tensor<2x16x1000xf32>
func.func @main(%ids: tensor<2x16xi64>) -> tensor<2x16x1000xf32> {
  %e = rp.param "wte" trainable at "w.bin"[0] : tensor<1000x8xf32>
  %h = rp.layer "embed" (%e, %ids) : (tensor<1000x8xf32>, tensor<2x16xi64>) -> tensor<2x16x8xf32> {
  ^bb0(%t: tensor<1000x8xf32>, %i: tensor<2x16xi64>):
    %g = rp.gather %t[%i] axis = 0 : (tensor<1000x8xf32>, tensor<2x16xi64>) -> tensor<2x16x8xf32>
    %a = rp.tanh %g : tensor<2x16x8xf32>
    rp.yield %a : tensor<2x16x8xf32>
  }
  %y = rp.layer "head" (%h, %e) : (tensor<2x16x8xf32>, tensor<1000x8xf32>) -> tensor<2x16x1000xf32> {
  ^bb0(%a: tensor<2x16x8xf32>, %t: tensor<1000x8xf32>):
    %l = rp.matmul %a, %t transpose_b : (tensor<2x16x8xf32>, tensor<1000x8xf32>) -> tensor<2x16x1000xf32>
    rp.yield %l : tensor<2x16x1000xf32>
  }
  return %y : tensor<2x16x1000xf32>
}
