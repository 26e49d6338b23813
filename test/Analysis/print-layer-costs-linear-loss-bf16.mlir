// The fused LM head + loss's working set with a 16-bit head. Its backward
// (bounded by the same work bytes) sums the weight gradient over the chunks
// in an f32 copy of the weight: 1000 x 8 x 4 = 32000 bytes. With chunk = 8
// (four chunks of 32 tokens): one chunk of bf16 logits, 8 x 1000 x 2 =
// 16000, plus that accumulator, plus the f32 loss sum and the i64 count
// (12) = 48012. With chunk = 32, one chunk covers every token and the
// gradient is written straight: 32 x 1000 x 2 + 12 = 64012.
// RUN: rp-opt %s -rp-attach-loss -rp-fuse-linear-cross-entropy=chunk=8 -rp-print-layer-costs=hw=%S/Inputs/unit-bf16.json -o /dev/null > %t.txt
// RUN: rp-opt %s -rp-attach-loss -rp-fuse-linear-cross-entropy=chunk=32 -rp-print-layer-costs=hw=%S/Inputs/unit-bf16.json -o /dev/null >> %t.txt
// RUN: FileCheck %s < %t.txt

// CHECK: layer "head" {{.*}} work_bytes=48012 kernels=2
// CHECK: layer "head" {{.*}} work_bytes=64012 kernels=2
func.func @main(%x: tensor<2x16x8xbf16>) -> tensor<2x16x1000xbf16> {
  %w = rp.param "wte" trainable at "w.bin"[0] : tensor<1000x8xbf16>
  %y = rp.layer "head" (%x, %w) : (tensor<2x16x8xbf16>, tensor<1000x8xbf16>) -> tensor<2x16x1000xbf16> {
  ^bb0(%a: tensor<2x16x8xbf16>, %b: tensor<1000x8xbf16>):
    %l = rp.matmul %a, %b transpose_b : (tensor<2x16x8xbf16>, tensor<1000x8xbf16>) -> tensor<2x16x1000xbf16>
    rp.yield %l : tensor<2x16x1000xbf16>
  }
  return %y : tensor<2x16x1000xbf16>
}
