// RUN: rp-opt %S/Inputs/four-layers.mlir -rp-attach-loss "-rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2" -rp-autodiff | FileCheck %s
// RUN: rp-opt %S/Inputs/four-layers.mlir -rp-attach-loss "-rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2" -rp-autodiff=recompute=layer | FileCheck %s --check-prefix=LAYER
// RUN: rp-opt %S/Inputs/four-layers.mlir -rp-attach-loss "-rp-partition=devices=2 hw=host stages=fwd:1,1,1;bwd:1,1,2" -rp-autodiff | FileCheck %s --check-prefix=THREE
// RUN: rp-opt %s -rp-autodiff -verify-diagnostics
// The grain rp-partition records is the one rp-autodiff applies, unless
// rp-autodiff is given its own.
// RUN: rp-opt %S/Inputs/four-layers.mlir -rp-attach-loss "-rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 recompute=layer" -rp-autodiff | FileCheck %s --check-prefix=LAYER
// RUN: rp-opt %S/Inputs/four-layers.mlir -rp-attach-loss "-rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 recompute=layer" -rp-autodiff=recompute=stage | FileCheck %s

// rp-partition's stages decide the layout: a tail of two layers fuses l2
// and l3 into one layer, and each backward stage recomputes as one group
// (stage grain) or layer by layer (layer grain). `span` names the forward
// layers each covers.

// CHECK:      rp.layer "l0"(%arg0, %0) {span = array<i64: 0, 1>}
// CHECK:      rp.layer "l1"(%{{.*}}, %1) {span = array<i64: 1, 2>}
// CHECK:      %[[T:.*]]:5 = rp.layer "l2..l3" role = tail(%{{.*}}, %2, %3, %arg1, %arg2) {span = array<i64: 2, 4>}
// CHECK:      %[[B:.*]]:2 = rp.layer "l0..l1.backward" role = backward(%arg0, %0, %1, %[[T]]#2) {span = array<i64: 0, 2>}
// CHECK:      return %[[T]]#0, %[[T]]#1, %[[B]]#0, %[[B]]#1, %[[T]]#3, %[[T]]#4

// LAYER:      %[[T:.*]]:5 = rp.layer "l2..l3" role = tail
// LAYER:      %[[B1:.*]]:2 = rp.layer "l1.backward" role = backward(%{{.*}}, %1, %[[T]]#2) {span = array<i64: 1, 2>}
// LAYER:      %[[B0:.*]] = rp.layer "l0.backward" role = backward(%arg0, %0, %[[B1]]#0) {span = array<i64: 0, 1>}
// LAYER:      return %[[T]]#0, %[[T]]#1, %[[B0]], %[[B1]]#1, %[[T]]#3, %[[T]]#4

// THREE:      rp.layer "l3" role = tail({{.*}}) {span = array<i64: 3, 4>}
// THREE:      rp.layer "l2.backward" role = backward({{.*}}) {span = array<i64: 2, 3>}
// THREE:      rp.layer "l0..l1.backward" role = backward({{.*}}) {span = array<i64: 0, 2>}

// expected-error @+1 {{rp.partition covers 3 layers but @main has 2; run rp-partition on this graph again}}
func.func @main(%x: tensor<2x8xf32>, %labels: tensor<2xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", forward = [2], backward = [1, 2]>} {
  %w0 = rp.param "l0.weight" trainable at "w.bin"[0] : tensor<8x8xf32>
  %h0 = rp.layer "l0" (%x, %w0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %s, %n = rp.layer "l1" (%h0, %labels) : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<2x8xf32>, %l: tensor<2xi64>):
    %s, %n = rp.cross_entropy %a, %l ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}
