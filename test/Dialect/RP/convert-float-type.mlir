// RUN: rp-opt %s -rp-convert-float-type | FileCheck %s
// RUN: rp-opt %s -rp-convert-float-type=to=f16 | FileCheck %s --check-prefix=F16
// RUN: rp-opt %s -rp-convert-float-type=to=f32 | FileCheck %s --check-prefix=SAME

// Parameters stay f32 (the master copy) and are cast where a layer reads
// them; inputs likewise; everything f32 inside the layer becomes bf16,
// constants rounded; integer tensors and the mask stay; outputs come back
// as f32.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8xf32>, %[[IDS:[^:]+]]: tensor<2xi64>) -> tensor<2x8xf32>
// CHECK-DAG: %[[W:.+]] = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
// CHECK-DAG: %[[WB:.+]] = rp.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-DAG: %[[XB:.+]] = rp.cast %[[X]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK: %[[Y:.+]] = rp.layer "h.0"(%[[XB]], %[[WB]], %[[IDS]]) : (tensor<2x8xbf16>, tensor<8x8xbf16>, tensor<2xi64>) -> tensor<2x8xbf16>
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<2x8xbf16>, %{{.+}}: tensor<8x8xbf16>, %{{.+}}: tensor<2xi64>):
// CHECK: rp.constant dense<3.140630e+00> : tensor<bf16>
// CHECK: rp.matmul {{.*}} -> tensor<2x8xbf16>
// CHECK: rp.cmp lt, {{.*}} : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi1>
// CHECK: rp.yield %{{.+}} : tensor<2x8xbf16>
// CHECK: %[[R:.+]] = rp.cast %[[Y]] : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: return %[[R]]
// F16: rp.constant dense<3.140630e+00> : tensor<f16>
// F16: -> tensor<2x8xf16>
// SAME-NOT: bf16
// SAME-NOT: rp.cast
func.func @main(%x: tensor<2x8xf32>, %ids: tensor<2xi64>) -> tensor<2x8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
  %y = rp.layer "h.0" (%x, %w, %ids) : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<2xi64>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>, %i: tensor<2xi64>):
    %pi = rp.constant dense<3.14159274> : tensor<f32>
    %zero = rp.constant dense<1> : tensor<i64>
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %s = rp.mul %m, %pi : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %i2 = rp.reshape %i : tensor<2xi64> to tensor<2x1xi64>
    %c = rp.cmp lt, %i2, %zero : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi1>
    %r = rp.where %c, %s, %a : (tensor<2x1xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %r : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}
