// RUN: rp-opt %s --rp-prepare | FileCheck %s
// RUN: rm -rf %t && mkdir -p %t
// RUN: rp-opt %s "--rp-prepare=weights=%t/m.weights.bin ir-dir=%t" | FileCheck %s
// RUN: not test -e %t/m.weights.bin
// RUN: (rp-opt %S/Inputs/param-twice.mlir --rp-prepare 2>&1; echo "exit $?") | FileCheck %s --check-prefix=INVALID

// The cleanups every graph goes through after its producer (rp-import,
// rp.trace, a hand-written file): the duplicate constant merges, the
// written-out GELU becomes rp.gelu, the ops are grouped into a layer and the
// graph verified. No constant is large enough to leave the text, so a
// weights file changes nothing and none is written
// (externalize-constants.mlir tests the move).
// CHECK-LABEL: func.func @main
// CHECK:      rp.layer "model"
// CHECK:      rp.matmul
// CHECK-NEXT: rp.gelu
// CHECK-NEXT: rp.yield
// CHECK-NOT:  rp.erf

// The graph is verified last: a parameter declared twice is refused.
// INVALID: error: 'rp.param' op parameter 'w' is declared again
func.func @main(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>) -> tensor<2x8xf32> {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %one2 = rp.constant dense<1.0> : tensor<f32>
  %sqrt2 = rp.constant dense<1.41421354> : tensor<f32>
  %m = rp.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a = rp.div %m, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %b = rp.erf %a : tensor<2x8xf32>
  %c = rp.add %b, %one2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %d = rp.mul %m, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = rp.mul %d, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// INVALID: exit 1
