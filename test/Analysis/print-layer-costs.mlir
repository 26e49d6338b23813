// Layer costs on a profile with round numbers (1 TFLOP/s, 1 GB/s, no launch
// cost), so every figure below is checked by hand.
// RUN: rp-opt %s -split-input-file -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null | FileCheck %s
// RUN: rp-opt %s -rp-print-layer-costs="hw=%S/Inputs/unit.json measured=%S/Inputs/measured.json" -o /dev/null | FileCheck %s --check-prefix=MEASURED

// h.0: matmul 2x8·8x8 = 2·16·8 = 256 FLOPs moving 64+256+64 = 384 bytes; tanh
// 16 elements × 4 = 64 FLOPs moving 128 bytes. The weight is trainable and
// the input is not, so backward is one matmul (dW) and tanh's gradient
// (2 × 64 FLOPs, 2 × 128 bytes, the FLOPs and bytes printed). Memory
// bound: (384 + 128) bytes at 1 GB/s is 5.12e-4 ms forward; the backward's
// time is its VJP's kernels, as the plan runs them: dW (384 bytes) and
// unary_grad reading the result and its gradient, writing one (192):
// 5.76e-4 ms. The frozen head weight adds no dW: its backward is dX only.
// The recompute runs what the sweep reads (issue 32): h.0's matmul (tanh's
// gradient reads its input), none of the head (dX reads only the weight).
// CHECK: costs @main hw=unit layers=2
// CHECK-NEXT: layer "h.0" forward_flops=320 recompute_flops=256 backward_flops=384 forward_traffic=512 recompute_traffic=384 backward_traffic=576 accumulate_flops=64 accumulate_traffic=768 param_bytes=256 grad_bytes=256 act_in_bytes=64 act_out_bytes=64 work_bytes=128 kernels=2 forward_ms=0.000512 recompute_ms=0.000384 backward_ms=0.000576 accumulate_ms=0.000768 upload_ms=0.000256 download_ms=0.000128 source=model
// CHECK-NEXT: layer "head" forward_flops=256 recompute_flops=0 backward_flops=256 forward_traffic=384 recompute_traffic=0 backward_traffic=384 accumulate_flops=0 accumulate_traffic=0 param_bytes=256 grad_bytes=0 act_in_bytes=64 act_out_bytes=64 work_bytes=64 kernels=1 forward_ms=0.000384 recompute_ms=0 backward_ms=0.000384 accumulate_ms=0 upload_ms=0.000256 download_ms=0 source=model
// CHECK-NEXT: total forward_flops=576 backward_flops=640 param_bytes=512 grad_bytes=256 forward_ms=0.000896 backward_ms=0.00096 recompute_flops=256 accumulate_flops=64 recompute_ms=0.000384 accumulate_ms=0.000768

// MEASURED: layer "h.0" {{.*}} forward_ms=7.5 recompute_ms=7.5 backward_ms=15.25 {{.*}} source=measured
// MEASURED: layer "head" {{.*}} forward_ms=0.000384 {{.*}} source=model
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

// Causal attention over 4 queries and 4 keys visits 1+2+3+4 = 10 pairs per
// head; 2 heads × 10 pairs × 2 × (8 + 8) = 640 FLOPs, plus 32 for the add.
// Nothing upstream is trainable, so there is no backward (and no recompute
// for one). A weight passed
// twice is uploaded once.
// CHECK: costs @attention hw=unit layers=1
// CHECK-NEXT: layer "attn" forward_flops=672 recompute_flops=0 backward_flops=0 {{.*}} param_bytes=128 grad_bytes=0 act_in_bytes=768 {{.*}} kernels=2 {{.*}} backward_ms=0 {{.*}}
func.func @attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %e = rp.param "e" at "w.bin"[0] : tensor<4x8xf32>
  %o = rp.layer "attn" (%q, %k, %v, %e, %e) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<1x2x4x8xf32> {
  ^bb0(%a: tensor<1x2x4x8xf32>, %b: tensor<1x2x4x8xf32>, %c: tensor<1x2x4x8xf32>, %d: tensor<4x8xf32>, %d2: tensor<4x8xf32>):
    %r = rp.attention %a, %b, %c causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    %s = rp.add %d, %d2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    rp.yield %r : tensor<1x2x4x8xf32>
  }
  return %o : tensor<1x2x4x8xf32>
}
