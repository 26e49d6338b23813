// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=experts" -split-input-file | FileCheck %s

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
// CHECK-NEXT: %[[S:.+]] = rp.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[M:.+]] = rp.mul %[[XA]], %[[S]] : (tensor<6x2xf32>, tensor<f32>) -> tensor<6x2xf32>
// CHECK-NEXT: %[[XB:.+]] = rp.moe.grouped_matmul %[[M]], %{{.+}}, %[[C]] transpose_b : (tensor<6x2xf32>, tensor<3x8x2xf32>, tensor<3xi32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[SUM:.+]] = rp.add %[[Y]], %[[XB]]
// CHECK-NEXT: rp.silu %[[SUM]]
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

// -----

// An expert output that only rp.moe.combine reads: the update is combined
// on its own and added in token space, combine(y) + combine(update), so the
// [T*K, out] rows of y, the update and their sum are never live at once.
// The combine of y follows its grouped matmul, the rank-wide A side follows
// too, and the B side and the second combine sit where the combine was.
// CHECK-LABEL: rp.param "experts.down" at
// CHECK: %[[Y:.+]] = rp.moe.grouped_matmul %[[X:[^,]+]], %{{.+}}, %[[C:[^ ]+]] transpose_b : (tensor<6x8xf32>, tensor<3x4x8xf32>, tensor<3xi32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[CY:.+]] = rp.moe.combine %[[Y]], %[[P:[^ ]+]] weights(%[[W:[^)]+]])
// CHECK-NEXT: %[[XA:.+]] = rp.moe.grouped_matmul %[[X]], %{{.+}}, %[[C]] transpose_b : (tensor<6x8xf32>, tensor<3x2x8xf32>, tensor<3xi32>) -> tensor<6x2xf32>
// CHECK-NEXT: rp.constant
// CHECK-NEXT: %[[M:.+]] = rp.mul %[[XA]]
// CHECK-NEXT: rp.tanh
// CHECK-NEXT: %[[XB:.+]] = rp.moe.grouped_matmul %[[M]], %{{.+}}, %[[C]] transpose_b : (tensor<6x2xf32>, tensor<3x4x2xf32>, tensor<3xi32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[CU:.+]] = rp.moe.combine %[[XB]], %[[P]] weights(%[[W]])
// CHECK-NEXT: %[[SUM:.+]] = rp.add %[[CY]], %[[CU]] : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: rp.yield %[[SUM]], %{{.+}} : tensor<3x4xf32>, tensor<3x4xf32>
// CHECK-NOT: rp.moe.combine
func.func @main(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %g = rp.param "router" trainable at "w.bin"[0] : tensor<3x4xf32>
  %u = rp.param "experts.up" trainable at "w.bin"[48] : tensor<3x8x4xf32>
  %d = rp.param "experts.down" trainable at "w.bin"[432] : tensor<3x4x8xf32>
  %y:2 = rp.layer "h.0" (%x, %g, %u, %d) : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x8x4xf32>, tensor<3x4x8xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  ^bb0(%a: tensor<3x4xf32>, %wg: tensor<3x4xf32>, %wu: tensor<3x8x4xf32>, %wd: tensor<3x4x8xf32>):
    %l = rp.matmul %a, %wg transpose_b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x3xf32>
    %w, %e = rp.moe.route %l top_k = 2 softmax = before normalize : tensor<3x3xf32> -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %rows, %pos, %cnt = rp.moe.dispatch %a, %e : (tensor<3x4xf32>, tensor<3x2xi64>) -> (tensor<6x4xf32>, tensor<3x2xi32>, tensor<3xi32>)
    %h = rp.moe.grouped_matmul %rows, %wu, %cnt transpose_b : (tensor<6x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<6x8xf32>
    %o = rp.moe.grouped_matmul %h, %wd, %cnt transpose_b : (tensor<6x8xf32>, tensor<3x4x8xf32>, tensor<3xi32>) -> tensor<6x4xf32>
    %t = rp.tanh %a : tensor<3x4xf32>
    %c = rp.moe.combine %o, %pos weights(%w) : (tensor<6x4xf32>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<3x4xf32>
    rp.yield %c, %t : tensor<3x4xf32>, tensor<3x4xf32>
  }
  return %y#0, %y#1 : tensor<3x4xf32>, tensor<3x4xf32>
}

// -----

// An expert output read twice (transformers 5's fused gate_up, sliced into
// the gate and the up halves): the update is added right after it, before
// its first reader (this crashed: a null user taken for a combine).
// CHECK-LABEL: rp.param "experts.gate_up" at
// CHECK: %[[Y:.+]] = rp.moe.grouped_matmul %[[X:[^,]+]], %{{.+}}, %[[C:[^ ]+]] transpose_b : (tensor<6x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<6x8xf32>
// CHECK: %[[XB:.+]] = rp.moe.grouped_matmul %{{.+}}, %{{.+}}, %[[C]] transpose_b : (tensor<6x2xf32>, tensor<3x8x2xf32>, tensor<3xi32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[SUM:.+]] = rp.add %[[Y]], %[[XB]]
// CHECK-NEXT: rp.slice %[[SUM]]
// CHECK-NEXT: rp.slice %[[SUM]]
func.func @main(%x: tensor<3x4xf32>) -> tensor<6x4xf32> {
  %g = rp.param "router" trainable at "w.bin"[0] : tensor<3x4xf32>
  %u = rp.param "experts.gate_up" trainable at "w.bin"[48] : tensor<3x8x4xf32>
  %y = rp.layer "h.0" (%x, %g, %u) : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x8x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wg: tensor<3x4xf32>, %wu: tensor<3x8x4xf32>):
    %l = rp.matmul %a, %wg transpose_b : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x3xf32>
    %w, %e = rp.moe.route %l top_k = 2 softmax = before normalize : tensor<3x3xf32> -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %rows, %pos, %cnt = rp.moe.dispatch %a, %e : (tensor<3x4xf32>, tensor<3x2xi64>) -> (tensor<6x4xf32>, tensor<3x2xi32>, tensor<3xi32>)
    %h = rp.moe.grouped_matmul %rows, %wu, %cnt transpose_b : (tensor<6x4xf32>, tensor<3x8x4xf32>, tensor<3xi32>) -> tensor<6x8xf32>
    %g0 = rp.slice %h offsets = [0, 0] strides = [1, 1] : tensor<6x8xf32> -> tensor<6x4xf32>
    %u0 = rp.slice %h offsets = [0, 4] strides = [1, 1] : tensor<6x8xf32> -> tensor<6x4xf32>
    %p = rp.mul %g0, %u0 : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
    rp.yield %p : tensor<6x4xf32>
  }
  return %y : tensor<6x4xf32>
}
