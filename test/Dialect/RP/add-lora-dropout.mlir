// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=q_proj|k_proj dropout=0.1" -split-input-file -verify-diagnostics | FileCheck %s

// PEFT's lora_dropout: each adapter reads rp.dropout(x), the frozen matmul
// x itself. @main gets the dropout_key input (one row per microbatch) and
// each layer with adapters one more input, the key; each dropout's tensor
// number is FNV-1a of its weight's name (rp._philox.tensor_id).
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[KEY:[^:]+]]: tensor<1x4xi64> {rp.name = "dropout_key"}
// CHECK: rp.layer "h.0"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[KEY]], %{{.+}}, %{{.+}})
// CHECK: ^bb0(%[[X:[^:]+]]: tensor<3x4xf32>, {{.*}}, %[[K:[^:]+]]: tensor<1x4xi64>,
// CHECK: %[[Y:.+]] = rp.matmul %[[X]], %{{.+}} transpose_b
// CHECK-NEXT: %[[D:.+]] = rp.dropout %[[X]], %[[K]] {probability = 1.000000e-01 : f64, tensor = 437763714 : i64} : tensor<3x4xf32>, tensor<1x4xi64>
// CHECK-NEXT: rp.matmul %[[D]], %{{.+}} transpose_b : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
// CHECK: %[[N:.+]] = rp.matmul %[[X]], %{{.+}} transpose_b
// CHECK-NEXT: %[[D2:.+]] = rp.dropout %[[X]], %[[K]] {probability = 1.000000e-01 : f64, tensor = 2027839076 : i64}
// CHECK-NEXT: rp.matmul %[[D2]], %{{.+}} transpose_b
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
