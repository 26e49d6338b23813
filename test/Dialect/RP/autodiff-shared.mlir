// RUN: rp-opt %s -rp-autodiff | FileCheck %s
// RUN: rp-opt %s -rp-autodiff=recompute=layer | FileCheck %s

// An activation three later layers read, each in its own backward stage
// (l0's result h0, read by l1, l2 and the tail l3). Its gradient is a
// running sum: the tail's contribution goes into l2's backward, which adds
// its own and hands the sum to l1's backward, which adds its own and hands
// it to l0's backward. No gradient is summed between layers, so a staged
// plan never sums across stages, and the sum is one left fold in reverse
// op order for any grouping.
// CHECK:      %[[T:.+]]:5 = rp.layer "l3" role = tail
// CHECK:      %[[B2:.+]]:3 = rp.layer "l2.backward" role = backward(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[T]]#2, %[[T]]#3)
// CHECK-NEXT: ^bb0(%{{[^:]+}}: {{[^,]+}}, %[[H0:[^:]+]]: {{[^,]+}}, %{{[^:]+}}: {{[^,]+}}, %{{[^:]+}}: {{[^,]+}}, %[[IN:[^:]+]]: tensor<2x8xf32>):
// CHECK:        rp.add %[[IN]], %{{.+}}
// CHECK:      %[[B1:.+]]:2 = rp.layer "l1.backward" role = backward(%{{[^,]+}}, %{{[^,]+}}, %[[B2]]#0, %[[B2]]#1)
// CHECK:      %[[B0:.+]] = rp.layer "l0.backward" role = backward(%{{[^,]+}}, %{{[^,]+}}, %[[B1]]#0)
// CHECK-NOT:  rp.add
// CHECK:      return
func.func @main(%x: tensor<2x8xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 4, microbatches = 5, hw = "host", forward = [1, 1, 1], backward = [1, 1, 1, 1]>} {
  %w0 = rp.param "w0" trainable at "w.bin"[0] : tensor<8x8xf32>
  %w1 = rp.param "w1" trainable at "w.bin"[256] : tensor<8x8xf32>
  %w2 = rp.param "w2" trainable at "w.bin"[512] : tensor<8x8xf32>
  %wh = rp.param "head" trainable at "w.bin"[768] : tensor<8x8xf32>
  %h0 = rp.layer "l0" (%x, %w0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
    %m = rp.matmul %a, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h1 = rp.layer "l1" (%h0, %w1) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %w: tensor<8x8xf32>):
    %m = rp.matmul %a, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t = rp.tanh %m : tensor<2x8xf32>
    rp.yield %t : tensor<2x8xf32>
  }
  %h2 = rp.layer "l2" (%h1, %h0, %w2) : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %r: tensor<2x8xf32>, %w: tensor<8x8xf32>):
    %m = rp.matmul %a, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %s = rp.mul %m, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %s : tensor<2x8xf32>
  }
  %s, %n = rp.layer "l3" (%h2, %h0, %wh, %labels) : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<2x8xf32>, %r: tensor<2x8xf32>, %w: tensor<8x8xf32>, %l: tensor<2xi64>):
    %p = rp.add %a, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %z = rp.matmul %p, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %s, %n = rp.cross_entropy %z, %l ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}
