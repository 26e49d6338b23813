// RUN: rp-opt %s -rp-group-layers -split-input-file | FileCheck %s
// RUN: (rp-opt %s -rp-group-layers=source=structure -split-input-file 2>/dev/null; echo "exit $?") | FileCheck %s --check-prefix=STRUCT
// RUN: (rp-opt %s -rp-group-layers=source=structure -split-input-file 2>&1 >/dev/null; echo "exit $?") | FileCheck %s --check-prefix=STRUCTERR
// RUN: (rp-opt %s -rp-group-layers=source=scope -split-input-file -o /dev/null 2>&1; echo "exit $?") | FileCheck %s --check-prefix=SCOPE

// Layers from exporter scopes: ops of /h.N/ form layer h.N, the ops before
// them the prefix, after them the suffix. A constant is copied into each
// layer that uses it, a parameter stays outside and becomes an operand (the
// tied embedding feeds prefix and suffix).

// CHECK-LABEL: func.func @scopes
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x4xi64>)
// CHECK: %[[WTE:.+]] = rp.param "wte"
// CHECK: %[[P:.+]] = rp.layer "prefix"(%[[WTE]], %[[IDS]]) : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK-NEXT: ^bb0(%[[B:.+]]: tensor<8x4xf32>, %[[A:.+]]: tensor<2x4xi64>):
// CHECK-NEXT: rp.gather %[[B]][%[[A]]]
// CHECK: %[[H0:.+]] = rp.layer "h.0"(%[[P]]) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: ^bb0(%[[X0:.+]]: tensor<2x4x4xf32>):
// CHECK-NEXT: %[[C0:.+]] = rp.constant dense<2.000000e+00>
// CHECK-NEXT: rp.mul %[[X0]], %[[C0]]
// CHECK: %[[H1:.+]] = rp.layer "h.1"(%[[H0]])
// CHECK: rp.constant dense<2.000000e+00>
// CHECK: %[[S:.+]] = rp.layer "suffix"(%[[H1]], %[[WTE]])
// CHECK: rp.matmul
// CHECK: return %[[S]]
func.func @scopes(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %wte = rp.param "wte" trainable at "w.bin"[0] : tensor<8x4xf32>
  %two = rp.constant dense<2.0> : tensor<f32>
  %e = rp.gather %wte[%ids] axis = 0 : (tensor<8x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32> loc("/wte/Gather")
  %a = rp.mul %e, %two : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/h.0/mlp/Mul")
  %b = rp.tanh %a : tensor<2x4x4xf32> loc("/h.0/mlp/Tanh")
  %c = rp.mul %b, %two : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/h.1/mlp/Mul")
  %d = rp.tanh %c : tensor<2x4x4xf32> loc("/h.1/mlp/Tanh")
  %l = rp.matmul %d, %wte transpose_b : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32> loc("/lm_head/MatMul")
  return %l : tensor<2x4x8xf32>
}

// Without names the same graph is cut where one activation is live, and
// the repeated mul/tanh segments become the layers.
// STRUCT-LABEL: func.func @scopes
// STRUCT: rp.layer "prefix"
// STRUCT: rp.layer "layers.0"
// STRUCT-NEXT: ^bb0
// STRUCT-NEXT: rp.constant
// STRUCT-NEXT: rp.mul
// STRUCT-NEXT: rp.tanh
// STRUCT-NEXT: rp.yield
// STRUCT: rp.layer "layers.1"
// STRUCT: rp.layer "suffix"

// -----

// A layer that reads a value of a later layer cannot be ordered: in auto
// mode the pass falls back to structure, with source=scope it fails.
// SCOPE: error: loc("/h.0/Add"): 'rp.add' op in layer 'h.0' reads a value of the later layer 'h.1'
// SCOPE: note: loc("/h.1/Exp"): the value is computed here
// CHECK-LABEL: func.func @out_of_order
// CHECK-NOT: rp.layer "h.0"
func.func @out_of_order(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = rp.tanh %x : tensor<4xf32> loc("/h.0/Tanh")
  %b = rp.exp %a : tensor<4xf32> loc("/h.1/Exp")
  %c = rp.add %b, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("/h.0/Add")
  return %c : tensor<4xf32>
}

// -----

// Nothing named, nothing repeated: one layer holds the model; asked for
// structure only, the pass says it found none.
// STRUCTERR: error: no layers found from repeated structure; try --source=auto
// CHECK-LABEL: func.func @single
// CHECK: rp.layer "model"(%{{.+}}) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: rp.exp
// CHECK-NEXT: rp.yield
func.func @single(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = rp.exp %x : tensor<4xf32>
  return %a : tensor<4xf32>
}

// -----

// Layers that exist are kept as they are.
// CHECK-LABEL: func.func @grouped
// CHECK-COUNT-1: rp.layer
func.func @grouped(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = rp.layer "mine" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = rp.exp %a : tensor<4xf32>
    rp.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
// SCOPE: exit 1
// STRUCT: exit 1
// STRUCTERR: exit 1
