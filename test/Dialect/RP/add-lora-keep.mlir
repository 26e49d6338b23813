// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=q_proj keep-trainable=k_proj" | FileCheck %s
// RUN: not rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=q_proj keep-trainable=(" 2>&1 | FileCheck %s --check-prefix=BAD

// keep-trainable (rp-compile --lora-modules-to-save, PEFT's modules_to_save):
// the trainable parameters it matches train whole beside the adapters; a
// frozen one stays frozen; the rest are frozen as without it.
// CHECK-LABEL: func.func @main
// CHECK: rp.param "q_proj" at "w.bin"[0] : tensor<8x4xf32>
// CHECK: rp.param "q_proj.lora_A" trainable
// CHECK: rp.param "q_proj.lora_B" trainable
// CHECK: rp.param "k_proj" trainable at "w.bin"[128] : tensor<8x4xf32>
// CHECK: rp.param "k_proj.bias" at "w.bin"[256] : tensor<8xf32>
// BAD: bad LoRA modules to save '('
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %q = rp.param "q_proj" trainable at "w.bin"[0] : tensor<8x4xf32>
  %k = rp.param "k_proj" trainable at "w.bin"[128] : tensor<8x4xf32>
  %b = rp.param "k_proj.bias" at "w.bin"[256] : tensor<8xf32>
  %y = rp.layer "h.0" (%x, %q, %k, %b) : (tensor<3x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<3x8xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wq: tensor<8x4xf32>, %wk: tensor<8x4xf32>, %wb: tensor<8xf32>):
    %m = rp.matmul %a, %wq transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    %n = rp.matmul %a, %wk transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    %s = rp.add %m, %n : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %t = rp.add %s, %wb : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
    rp.yield %t : tensor<3x8xf32>
  }
  return %y : tensor<3x8xf32>
}
