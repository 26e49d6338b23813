// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=q_proj" -split-input-file -verify-diagnostics | FileCheck %s

// The matching weight gets adapters A [r, in] (uniform +-1/sqrt(in)) and
// B [out, r] (zeros) feeding y + ((alpha/r) x A^T) B^T, the scale on the
// rank-wide side; every other parameter is frozen.
// CHECK-LABEL: func.func @main
// CHECK: rp.param "q_proj" at "w.bin"[0] : tensor<8x4xf32>
// CHECK-NEXT: %[[A:.+]] = rp.param "q_proj.lora_A" trainable init = 5.000000e-01 : tensor<2x4xf32>
// CHECK-NEXT: %[[B:.+]] = rp.param "q_proj.lora_B" trainable : tensor<8x2xf32>
// CHECK: rp.param "k_proj" at "w.bin"[128] : tensor<8x4xf32>
// CHECK: rp.layer "h.0"(%{{.+}}, %{{.+}}, %{{.+}}, %[[A]], %[[B]])
// CHECK: %[[Y:.+]] = rp.matmul %[[X:.+]], %{{.+}} transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %[[XA:.+]] = rp.matmul %[[X]], %{{.+}} transpose_b : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[S:.+]] = rp.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.+]] = rp.mul %[[XA]], %[[S]] : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[XB:.+]] = rp.matmul %[[M]], %{{.+}} transpose_b : (tensor<3x2xf32>, tensor<8x2xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %[[SUM:.+]] = rp.add %[[Y]], %[[XB]]
// CHECK-NEXT: rp.tanh %[[SUM]]
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x8xf32> {
  %q = rp.param "q_proj" trainable at "w.bin"[0] : tensor<8x4xf32>
  %k = rp.param "k_proj" trainable at "w.bin"[128] : tensor<8x4xf32>
  %y = rp.layer "h.0" (%x, %q, %k) : (tensor<3x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wq: tensor<8x4xf32>, %wk: tensor<8x4xf32>):
    %m = rp.matmul %a, %wq transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    %t = rp.tanh %m : tensor<3x8xf32>
    %n = rp.matmul %a, %wk transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    %s = rp.add %t, %n : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    rp.yield %s : tensor<3x8xf32>
  }
  return %y : tensor<3x8xf32>
}

// -----

// expected-error @+1 {{no linear layer has a weight matching LoRA targets 'q_proj'}}
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %y = rp.layer "h.0" (%x) : (tensor<3x4xf32>) -> tensor<3x4xf32> {
  ^bb0(%a: tensor<3x4xf32>):
    %t = rp.tanh %a : tensor<3x4xf32>
    rp.yield %t : tensor<3x4xf32>
  }
  return %y : tensor<3x4xf32>
}
