// RUN: rp-opt %s -rp-fuse-gelu -split-input-file | FileCheck %s

// nn.GELU() as torch exports it: x * (1 + erf(x / sqrt 2)) * 0.5.
// CHECK-LABEL: func.func @erf_gelu
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[G:.+]] = rp.gelu %[[X]] : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @erf_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %sqrt2 = rp.constant dense<1.41421354> : tensor<f32>
  %a = rp.div %x, %sqrt2 : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %b = rp.erf %a : tensor<2x8xf32>
  %c = rp.add %b, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %d = rp.mul %x, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = rp.mul %d, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Another association order: (0.5 * x) * (1 + erf(x * 1/sqrt 2)).
// CHECK-LABEL: func.func @erf_gelu_half_first
// CHECK-NEXT: rp.gelu %{{.+}} : tensor<4xf32>
// CHECK-NEXT: return
func.func @erf_gelu_half_first(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %rsqrt2 = rp.constant dense<0.707106769> : tensor<f32>
  %h = rp.mul %x, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %a = rp.mul %x, %rsqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = rp.erf %a : tensor<4xf32>
  %c = rp.add %one, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %y = rp.mul %h, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// GPT-2's tanh approximation written out.
// CHECK-LABEL: func.func @tanh_gelu
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[G:.+]] = rp.gelu %[[X]] approximate = tanh : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tanh_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %three = rp.constant dense<3.0> : tensor<f32>
  %k = rp.constant dense<0.044715> : tensor<f32>
  %c = rp.constant dense<0.797884583> : tensor<f32>
  %p = rp.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %q = rp.mul %p, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %r = rp.add %x, %q : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = rp.mul %r, %c : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = rp.tanh %s : tensor<2x8xf32>
  %u = rp.add %t, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = rp.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = rp.mul %v, %u : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A different constant is a different function.
// CHECK-LABEL: func.func @DontFuseWrongConstant
// CHECK-NOT: rp.gelu
func.func @DontFuseWrongConstant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %c = rp.constant dense<2.0> : tensor<f32>
  %a = rp.div %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = rp.erf %a : tensor<4xf32>
  %d = rp.add %b, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %e = rp.mul %x, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = rp.mul %e, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The inner value is also used elsewhere: fusing would compute it twice.
// CHECK-LABEL: func.func @DontFuseSharedInner
// CHECK-NOT: rp.gelu
func.func @DontFuseSharedInner(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = rp.constant dense<0.5> : tensor<f32>
  %one = rp.constant dense<1.0> : tensor<f32>
  %sqrt2 = rp.constant dense<1.41421354> : tensor<f32>
  %a = rp.div %x, %sqrt2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %b = rp.erf %a : tensor<4xf32>
  %c = rp.add %b, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %d = rp.mul %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = rp.mul %d, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y, %d : tensor<4xf32>, tensor<4xf32>
}
