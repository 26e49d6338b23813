// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=experts" | FileCheck %s

// A stack of 3 expert weights [E, out, in] gets stacked adapters
// A [E, r, in] (uniform +-1/sqrt(in)) and B [E, out, r] (zeros), applied per
// group by two more grouped matmuls; the expert weights and the router are
// frozen.
// CHECK-LABEL: func.func @main
// CHECK: rp.param "router" at "w.bin"[0] : tensor<3x4xf32>
// CHECK: rp.param "experts.up" at "w.bin"[48] : tensor<3x8x4xf32>
// CHECK-NEXT: %[[A:.+]] = rp.param "experts.up.lora_A" trainable init = 5.000000e-01 : tensor<3x2x4xf32>
// CHECK-NEXT: %[[B:.+]] = rp.param "experts.up.lora_B" trainable : tensor<3x8x2xf32>
// CHECK: rp.layer "h.0"(%{{.+}}, %{{.+}}, %{{.+}}, %[[A]], %[[B]])
// CHECK: %[[Y:.+]] = rp.moe.grouped_matmul %[[R:.+]], %{{.+}}, %[[C:.+]] transpose_b : (tensor<6x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[XA:.+]] = rp.moe.grouped_matmul %[[R]], %{{.+}}, %[[C]] transpose_b : (tensor<6x4xf32>, tensor<3x2x4xf32>, tensor<3xi32>) -> tensor<6x2xf32>
// CHECK-NEXT: %[[XB:.+]] = rp.moe.grouped_matmul %[[XA]], %{{.+}}, %[[C]] transpose_b : (tensor<6x2xf32>, tensor<3x8x2xf32>, tensor<3xi32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[S:.+]] = rp.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.+]] = rp.mul %[[XB]], %[[S]]
// CHECK-NEXT: %[[SUM:.+]] = rp.add %[[Y]], %[[M]]
// CHECK: rp.silu %[[SUM]]
func.func @main(%x: tensor<3x4xf32>) -> tensor<6x8xf32> {
  %g = rp.param "router" trainable at "w.bin"[0] : tensor<3x4xf32>
  %u = rp.param "experts.up" trainable at "w.bin"[48] : tensor<3x8x4xf32>
  %y = rp.layer "h.0" (%x, %g, %u) : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x8x4xf32>) -> tensor<6x8xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wg: tensor<3x4xf32>, %wu: tensor<3x8x4xf32>):
    %l = rp.matmul %a, %wg transpose_b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x3xf32>
    %w, %e = rp.moe.route %l top_k = 2 softmax = before normalize : tensor<3x3xf32> -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %rows, %pos, %cnt = rp.moe.dispatch %a, %e : (tensor<3x4xf32>, tensor<3x2xi64>) -> (tensor<6x4xf32>, tensor<3x2xi32>, tensor<3xi32>)
    %h = rp.moe.grouped_matmul %rows, %wu, %cnt transpose_b : (tensor<6x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<6x8xf32>
    %s = rp.silu %h : tensor<6x8xf32>
    rp.yield %s : tensor<6x8xf32>
  }
  return %y : tensor<6x8xf32>
}
