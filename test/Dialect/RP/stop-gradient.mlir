// RUN: rp-opt %s -canonicalize -cse | FileCheck %s --check-prefix=KEEP
// RUN: rp-opt %s -rp-attach-loss -rp-autodiff -canonicalize | FileCheck %s

// rp.stop_gradient (x.detach(), a value computed under torch.no_grad()):
// the value passes, the gradient stops. The canonicalizer keeps it (folding
// it away before rp-autodiff would let the gradient through). "w" reaches
// the loss both directly and through the stop, so it gets the direct path's
// gradient only: one matmul of dy for it in the backward, not two; "u"
// reaches it only through the stop and gets no gradient at all.
// KEEP-LABEL: func.func @main
// KEEP-COUNT-2: rp.stop_gradient
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<8x8xf32> {rp.name = "grad:w"}, tensor<8x8xf32> {rp.name = "grad:head"})
// CHECK: rp.layer "head" role = tail
// CHECK: rp.layer "h.0.backward" role = backward
// CHECK: rp.stop_gradient %{{.+}} {rp.recompute} : tensor<8x8xf32>
// CHECK: rp.unary_grad tanh
// CHECK-NEXT: rp.matmul %{{.+}}, %{{.+}} transpose_a
// CHECK-NOT: rp.matmul
// CHECK: rp.yield
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %u = rp.param "u" trainable at "w.bin"[256] : tensor<8x8xf32>
  %hw = rp.param "head" trainable at "w.bin"[512] : tensor<8x8xf32>
  %h = rp.layer "h.0" (%x, %w, %u) : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>, %c: tensor<8x8xf32>):
    %s = rp.stop_gradient %b : tensor<8x8xf32>
    %su = rp.stop_gradient %c : tensor<8x8xf32>
    %sum = rp.add %s, %su : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t = rp.tanh %m : tensor<2x8xf32>
    %n = rp.matmul %t, %sum : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %n : tensor<2x8xf32>
  }
  %y = rp.layer "head" (%h, %hw) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}
