// RUN: rp-opt %s -rp-fuse-layer-norm -split-input-file | FileCheck %s

// The opset-14 export of nn.LayerNorm: centered, variance by pow, sqrt,
// divide, then scale and bias of the normalized shape.
// CHECK-LABEL: func.func @layer_norm_with_affine
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x16xf32>, %[[G:.+]]: tensor<16xf32>, %[[B:.+]]: tensor<16xf32>)
// CHECK-NEXT: %[[N:.+]] = rp.layer_norm %[[X]] scale(%[[G]]) bias(%[[B]]) axis = 2 epsilon = 9.9999997473787516E-6
// CHECK-NEXT: return %[[N]]
func.func @layer_norm_with_affine(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-5> : tensor<f32>
  %m = rp.reduce mean %x dims = [2] keep_dims : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  %d = rp.sub %x, %m : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %p = rp.pow %d, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %v = rp.reduce mean %p dims = [2] keep_dims : tensor<2x8x16xf32> -> tensor<2x8x1xf32>
  %e = rp.add %v, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = rp.sqrt %e : tensor<2x8x1xf32>
  %n = rp.div %d, %s : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %y = rp.mul %n, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %z = rp.add %b, %y : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %z : tensor<2x8x16xf32>
}

// -----

// Over the last two dimensions, the variance as d * d, no affine.
// CHECK-LABEL: func.func @layer_norm_two_dims
// CHECK-NEXT: %[[N:.+]] = rp.layer_norm %{{.+}} axis = 1 epsilon = 1.000000e-03 : (tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
// CHECK-NEXT: return %[[N]]
func.func @layer_norm_two_dims(%x: tensor<2x4x8xf64>) -> tensor<2x4x8xf64> {
  %eps = rp.constant dense<1.0e-3> : tensor<f64>
  %m = rp.reduce mean %x dims = [1, 2] keep_dims : tensor<2x4x8xf64> -> tensor<2x1x1xf64>
  %d = rp.sub %x, %m : (tensor<2x4x8xf64>, tensor<2x1x1xf64>) -> tensor<2x4x8xf64>
  %p = rp.mul %d, %d : (tensor<2x4x8xf64>, tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %v = rp.reduce mean %p dims = [1, 2] keep_dims : tensor<2x4x8xf64> -> tensor<2x1x1xf64>
  %e = rp.add %eps, %v : (tensor<f64>, tensor<2x1x1xf64>) -> tensor<2x1x1xf64>
  %s = rp.sqrt %e : tensor<2x1x1xf64>
  %n = rp.div %d, %s : (tensor<2x4x8xf64>, tensor<2x1x1xf64>) -> tensor<2x4x8xf64>
  return %n : tensor<2x4x8xf64>
}

// -----

// Normalizing over a leading dimension is not a layer norm.
// CHECK-LABEL: func.func @DontFuseLeadingDims
// CHECK-NOT: rp.layer_norm
func.func @DontFuseLeadingDims(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-5> : tensor<f32>
  %m = rp.reduce mean %x dims = [0] keep_dims : tensor<2x8xf32> -> tensor<1x8xf32>
  %d = rp.sub %x, %m : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %p = rp.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = rp.reduce mean %p dims = [0] keep_dims : tensor<2x8xf32> -> tensor<1x8xf32>
  %e = rp.add %v, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %s = rp.sqrt %e : tensor<1x8xf32>
  %n = rp.div %d, %s : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

// The centered value must be the one that is squared.
// CHECK-LABEL: func.func @DontFuseOtherNumerator
// CHECK-NOT: rp.layer_norm
func.func @DontFuseOtherNumerator(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = rp.constant dense<2.0> : tensor<f32>
  %eps = rp.constant dense<1.0e-5> : tensor<f32>
  %m = rp.reduce mean %x dims = [1] keep_dims : tensor<2x8xf32> -> tensor<2x1xf32>
  %d = rp.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %d2 = rp.sub %y, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %p = rp.pow %d2, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = rp.reduce mean %p dims = [1] keep_dims : tensor<2x8xf32> -> tensor<2x1xf32>
  %e = rp.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = rp.sqrt %e : tensor<2x1xf32>
  %n = rp.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}
