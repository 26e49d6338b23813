// The recompute and backward figures rp-print-layer-costs prints are the
// kernels the partitioner's estimate times (issue 32): the forward ops the
// reverse sweep reads, the sweep's own kernels as rp-autodiff builds them,
// and the gradient adds; not a rule of thumb per forward op. The unit
// profile (1 TFLOP/s, 1 GB/s, no launch cost) makes every time its bytes
// in ns. Every activation is [2, 8] f32 (64 bytes), every weight [8, 8].
// RUN: rp-opt %s -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null | FileCheck %s

// h.0, tanh(x w) with w trainable. tanh's gradient (unary_grad) reads
// tanh's input, the matmul's result, so the recompute re-runs the matmul
// alone (256 FLOPs, 384 bytes; 0.000384 ms) and not tanh: the rule of
// thumb said the whole forward (320, 512). The sweep is unary_grad (128
// FLOPs, reading m and dt, writing dm: 192 bytes) and dW = xT dm (256
// FLOPs, 384 bytes); no dX, since x needs none: 384 FLOPs, 576 bytes,
// 0.000576 ms (the rule: 640 bytes). The add-grads kernel adds dW to its
// accumulator: 64 FLOPs, 3 x 256 bytes.
// CHECK: layer "h.0" forward_flops=320 recompute_flops=256 backward_flops=384 forward_traffic=512 recompute_traffic=384 backward_traffic=576 accumulate_flops=64 accumulate_traffic=768 {{.*}} forward_ms=0.000512 recompute_ms=0.000384 backward_ms=0.000576 accumulate_ms=0.000768

// h.1, (a v) * c + a with v trainable and c frozen: c's gradient (which
// would read a v) is dropped, and nothing else the sweep runs reads a
// forward value (dm = dq * c, dA = dm vT, dV = aT dm, da = dq + dA), so
// the recompute runs nothing: recompute_flops=0, recompute_ms=0 (the rule:
// the whole forward, 288 FLOPs). The sweep: mul 16 FLOPs and 192 bytes,
// two matmuls of 256 FLOPs and 384 bytes, the add of the two input
// gradients 16 and 192: 544 FLOPs, 1152 bytes (the rule: 576, 1536).
// CHECK: layer "h.1" forward_flops=288 recompute_flops=0 backward_flops=544 forward_traffic=768 recompute_traffic=0 backward_traffic=1152 accumulate_flops=64 accumulate_traffic=768 {{.*}} recompute_ms=0 backward_ms=0.001152 accumulate_ms=0.000768
// CHECK: total forward_flops=608 backward_flops=928 {{.*}} recompute_flops=256 accumulate_flops=128 recompute_ms=0.000384 accumulate_ms=0.001536
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
