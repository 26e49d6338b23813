// RUN: rp-opt %s -rp-fuse-silu -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[S:.+]] = rp.silu %[[X]] : tensor<2x8xf32>
// CHECK-NEXT: %[[T:.+]] = rp.silu %[[X]] : tensor<2x8xf32>
func.func @silu(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = rp.sigmoid %x : tensor<2x8xf32>
  %y = rp.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %z = rp.mul %s, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// x * sigmoid(y) is a gate, not SiLU.
// CHECK-LABEL: func.func @DontFuseGate
// CHECK-NOT: rp.silu
func.func @DontFuseGate(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %s = rp.sigmoid %y : tensor<8xf32>
  %z = rp.mul %x, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %z : tensor<8xf32>
}
