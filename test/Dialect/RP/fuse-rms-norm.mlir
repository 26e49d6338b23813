// RUN: rp-opt %s -rp-fuse-rms-norm -split-input-file | FileCheck %s
// RUN: rp-opt %s -rp-fuse-layer-norm -rp-fuse-rms-norm -split-input-file | FileCheck %s --check-prefix=BOTH

// Llama's RMSNorm as a Llama/Qwen export writes it.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x16xf32>, %[[W:.+]]: tensor<16xf32>)
// CHECK-NEXT: %[[N:.+]] = rp.rms_norm %[[X]] scale(%[[W]]) axis = 2 epsilon = 9.9999999747524271E-7
// CHECK-NEXT: return %[[N]]
func.func @rms_norm(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-6> : tensor<f32>
  %p = rp.pow %x, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %v = rp.reduce mean %p dims = [2] keep_dims : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  %e = rp.add %v, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = rp.sqrt %e : tensor<2x8x1xf32>
  %n = rp.div %x, %s : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %y = rp.mul %w, %n : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// The rsqrt form, x * (1 / sqrt(...)), without a scale.
// CHECK-LABEL: func.func @rms_norm_reciprocal
// CHECK-NEXT: rp.rms_norm %{{.+}} axis = 1 epsilon = 1.0013580322265625E-5 : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
func.func @rms_norm_reciprocal(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %one = rp.constant dense<1.0> : tensor<bf16>
  %eps = rp.constant dense<1.0e-5> : tensor<bf16>
  %p = rp.mul %x, %x : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %v = rp.reduce mean %p dims = [1] keep_dims : tensor<4x8xbf16> -> tensor<4x1xbf16>
  %e = rp.add %v, %eps : (tensor<4x1xbf16>, tensor<bf16>) -> tensor<4x1xbf16>
  %s = rp.sqrt %e : tensor<4x1xbf16>
  %r = rp.div %one, %s : (tensor<bf16>, tensor<4x1xbf16>) -> tensor<4x1xbf16>
  %n = rp.mul %x, %r : (tensor<4x8xbf16>, tensor<4x1xbf16>) -> tensor<4x8xbf16>
  return %n : tensor<4x8xbf16>
}

// -----

// A layer norm's core also reads as x / sqrt(mean(x^2) + eps) with x
// centered: the RMS pattern leaves it to rp-fuse-layer-norm.
// CHECK-LABEL: func.func @DontFuseCenteredInput
// CHECK-NOT: rp.rms_norm
// BOTH-LABEL: func.func @DontFuseCenteredInput
// BOTH: rp.layer_norm
// BOTH-NOT: rp.rms_norm
func.func @DontFuseCenteredInput(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-5> : tensor<f32>
  %m = rp.reduce mean %x dims = [1] keep_dims : tensor<2x8xf32> -> tensor<2x1xf32>
  %d = rp.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %p = rp.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = rp.reduce mean %p dims = [1] keep_dims : tensor<2x8xf32> -> tensor<2x1xf32>
  %e = rp.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = rp.sqrt %e : tensor<2x1xf32>
  %n = rp.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// A mean of the squares that is not keep_dims cannot be this norm.
// CHECK-LABEL: func.func @DontFuseWithoutKeepDims
// CHECK-NOT: rp.rms_norm
func.func @DontFuseWithoutKeepDims(%x: tensor<8xf32>) -> tensor<8xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-5> : tensor<f32>
  %p = rp.pow %x, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %v = rp.reduce mean %p dims = [0] : tensor<8xf32> -> tensor<f32>
  %e = rp.add %v, %eps : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s = rp.sqrt %e : tensor<f32>
  %n = rp.div %x, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  return %n : tensor<8xf32>
}
