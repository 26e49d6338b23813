// The fused LM head + loss in the layer costs, on the unit profile (1
// TFLOP/s, 1 GB/s). Unfused, the head layer's working set is its logits:
// 2 x 16 tokens x 1000 classes x 4 bytes = 128000, plus the f32 loss sum and
// the i64 count = 128012. Fused with chunk = 8, only one chunk of logits
// exists while the op runs: 8 x 1000 x 4 = 32000, plus 12 = 32012. The
// forward is the same kernels either way: the head's matmul, 2 x 32 x 1000
// x 8 = 512000 FLOPs, and the loss, 5 FLOPs per logit x 32000 logits =
// 160000; 672000 in all. The fused backward runs the matmul once more (the
// logits are recomputed, not kept): recompute 512000 + the loss gradient
// (10 FLOPs per logit, 320000) + dW 512000 = 1344000. The unfused backward
// keeps the logits: dW 512000 + the loss gradient at twice its forward
// (320000, the fused op's 10 per logit) = 832000.
// RUN: rp-opt %s -rp-attach-loss -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null > %t.txt
// RUN: rp-opt %s -rp-attach-loss -rp-fuse-linear-cross-entropy=chunk=8 -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null >> %t.txt
// RUN: FileCheck %s < %t.txt

// CHECK: layer "head" forward_flops=672000 recompute_flops={{[0-9]+}} backward_flops=832000 forward_traffic=[[FT:[0-9]+]] {{.*}} work_bytes=128012 kernels=2
// CHECK: layer "head" forward_flops=672000 recompute_flops={{[0-9]+}} backward_flops=1344000 forward_traffic=[[FT]] {{.*}} work_bytes=32012 kernels=2
func.func @main(%x: tensor<2x16x8xf32>) -> tensor<2x16x1000xf32> {
  %w = rp.param "wte" trainable at "w.bin"[0] : tensor<1000x8xf32>
  %y = rp.layer "head" (%x, %w) : (tensor<2x16x8xf32>, tensor<1000x8xf32>) -> tensor<2x16x1000xf32> {
  ^bb0(%a: tensor<2x16x8xf32>, %b: tensor<1000x8xf32>):
    %l = rp.matmul %a, %b transpose_b : (tensor<2x16x8xf32>, tensor<1000x8xf32>) -> tensor<2x16x1000xf32>
    rp.yield %l : tensor<2x16x1000xf32>
  }
  return %y : tensor<2x16x1000xf32>
}
