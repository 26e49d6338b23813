// RUN: rp-opt %s -rp-autodiff -canonicalize | FileCheck %s

// A weight used twice in one layer gets one gradient per use, deepest use
// first, summed outside the layer like uses in different layers: the
// runtime sums each over the microbatches before the uses are added, so
// the step's gradient does not depend on which layers share a stage.

// CHECK:      %[[T:.*]]:5 = rp.layer "l1" role = tail(%{{.*}}, %0, %arg1, %arg2)
// CHECK-SAME: -> (tensor<f32>, tensor<i64>, tensor<2x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK:      %[[U:.*]] = rp.add %[[T]]#3, %[[T]]#4
// CHECK:      %[[B:.*]] = rp.layer "l0.backward" role = backward
// CHECK:      %[[W:.*]] = rp.add %[[U]], %[[B]]
// CHECK:      return %[[T]]#0, %[[T]]#1, %[[W]]
func.func @main(%x: tensor<2x8xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<i64>) {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %h = rp.layer "l0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %s, %n = rp.layer "l1" (%h, %w, %labels) : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>, %l: tensor<2xi64>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %m2 = rp.matmul %m, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %s, %n = rp.cross_entropy %m2, %l ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}
