// What a layer's recompute + backward body holds (BackwardLiveness.h): the
// cost analysis builds each layer's reverse sweep on a scratch copy, drops
// the gradients nothing reads, and measures the body's liveness. Every
// value here is [2, 8] f32, 64 bytes.
// RUN: rp-opt %s -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null | FileCheck %s

// h.0: the forward holds the matmul and tanh results (128). tanh's rule
// reads its result, so the sweep keeps it (kept 64); the weight's gradient
// reads the layer's input (kept input 64). The sweep, seeded by the
// result's gradient (64, counted apart), holds two values at once (128).
// CHECK: layer "h.0" {{.*}} work_bytes=128 {{.*}} recompute_peak_bytes=128 kept_bytes=64 kept_input_bytes=64 backward_peak_bytes=128 result_grad_bytes=64

// h.1: a product with a frozen parameter, whose gradient (which would read
// the matmul's result) nothing needs: once it is dropped, the sweep keeps
// none of the forward's values (kept 0), only the input its weight's
// gradient reads (64). Its own peak is two values (the product's gradient
// and the input's gradient through the matmul, before the residual's is
// added).
// CHECK: layer "h.1" {{.*}} work_bytes=128 {{.*}} recompute_peak_bytes=128 kept_bytes=0 kept_input_bytes=64 backward_peak_bytes=128 result_grad_bytes=64
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %v = rp.param "v" trainable at "w.bin"[256] : tensor<8x8xf32>
  %f = rp.param "frozen" at "w.bin"[512] : tensor<2x8xf32>
  %h = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t = rp.tanh %m : tensor<2x8xf32>
    rp.yield %t : tensor<2x8xf32>
  }
  %y = rp.layer "h.1" (%h, %v, %f) : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>, %c: tensor<2x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %p = rp.mul %m, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %q = rp.add %p, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %q : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}
