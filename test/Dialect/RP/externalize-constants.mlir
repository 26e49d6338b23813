// RUN: rm -rf %t && mkdir -p %t
// RUN: rp-opt %s --rp-externalize-constants="weights=%t/model.weights.bin ir-dir=%t max-inline-elements=4" | FileCheck %s
// RUN: test -s %t/model.weights.bin
// RUN: rp-opt %s --rp-externalize-constants="max-inline-elements=4" | FileCheck %s --check-prefix=KEEP
// RUN: (rp-opt %s --rp-externalize-constants="weights=%t/no/such/dir/w.bin ir-dir=%t max-inline-elements=4" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=UNWRITABLE
// RUN: (rp-opt %s --rp-externalize-constants="weights=%t/w.bin max-inline-elements=-1" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=NEGATIVE

// A constant over the limit becomes a frozen param in the weights file,
// named after its location, with a path relative to ir-dir; a second one of
// the same name gets a suffix. Splats, bools and small constants stay.
// CHECK-LABEL: func.func @main
// CHECK-DAG: rp.param "rope:folded" at "model.weights.bin"[0] : tensor<2x3xf32>
// CHECK-DAG: rp.param "rope:folded.1" at "model.weights.bin"[64] : tensor<6xf32>
// CHECK-DAG: rp.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-DAG: rp.constant dense<[true, false, true, false, true, false]> : tensor<6xi1>
// CHECK-DAG: rp.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NOT: rp.constant dense<[1.0{{.*}}, 2.0{{.*}}, 3.0{{.*}}

// Without a weights file nothing moves.
// KEEP-COUNT-5: rp.constant
// KEEP-NOT: rp.param

// UNWRITABLE: error: {{.*}}no/such/dir
// NEGATIVE: error: rp-externalize-constants needs max-inline-elements >= 0
func.func @main() -> (tensor<2x3xf32>, tensor<6xf32>, tensor<8xf32>, tensor<6xi1>, tensor<2xf32>) {
  %big = rp.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32> loc("rope")
  %big2 = rp.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32> loc("rope")
  %splat = rp.constant dense<1.0> : tensor<8xf32>
  %bits = rp.constant dense<[true, false, true, false, true, false]> : tensor<6xi1>
  %small = rp.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %big, %big2, %splat, %bits, %small : tensor<2x3xf32>, tensor<6xf32>, tensor<8xf32>, tensor<6xi1>, tensor<2xf32>
}
// NEGATIVE: exit 1
// UNWRITABLE: exit 1
