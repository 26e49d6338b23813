// RUN: rp-opt %s -rp-fuse-matmul-epilogue -split-input-file | FileCheck %s

// A linear layer: the bias add (either operand order) is the product's only
// reader.
// CHECK-LABEL: func.func @bias
// CHECK: rp.matmul %{{.+}} transpose_b {rp.epilogue = "bias"}
// CHECK: rp.matmul %{{.+}} {rp.epilogue = "bias"}
func.func @bias(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>,
                %w2: tensor<32x4xf32>, %b2: tensor<4xf32>) -> tensor<2x8x4xf32> {
  %p = rp.matmul %x, %w transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %s = rp.add %b, %p : (tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %q = rp.matmul %s, %w2 : (tensor<2x8x32xf32>, tensor<32x4xf32>) -> tensor<2x8x4xf32>
  %t = rp.add %q, %b2 : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
  return %t : tensor<2x8x4xf32>
}

// -----

// GPT-2's MLP in bf16: bias then gelu; the sum is also read by the gelu's
// gradient, which the fused call then writes as its second result.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: rp.matmul %{{.+}} transpose_b {rp.epilogue = "bias_gelu"}
// CHECK-NEXT: rp.add
// CHECK-NEXT: rp.gelu %{{.+}} approximate = tanh
func.func @bias_gelu(%x: tensor<16x8xbf16>, %w: tensor<32x8xbf16>, %b: tensor<32xbf16>,
                     %dy: tensor<16x32xbf16>) -> (tensor<16x32xbf16>, tensor<16x32xbf16>) {
  %p = rp.matmul %x, %w transpose_b : (tensor<16x8xbf16>, tensor<32x8xbf16>) -> tensor<16x32xbf16>
  %s = rp.add %b, %p : (tensor<32xbf16>, tensor<16x32xbf16>) -> tensor<16x32xbf16>
  %g = rp.gelu %s approximate = tanh : tensor<16x32xbf16>
  %d = rp.unary_grad gelu_tanh %s, %dy : tensor<16x32xbf16>
  return %g, %d : tensor<16x32xbf16>, tensor<16x32xbf16>
}

// -----

// The backward: the next layer's input gradient is the gelu gradient's dy.
// CHECK-LABEL: func.func @dgelu
// CHECK: rp.matmul %{{.+}} {rp.epilogue = "dgelu"}
// CHECK-NEXT: rp.unary_grad gelu
func.func @dgelu(%pre: tensor<4x16x32xf32>, %g: tensor<4x16x8xf32>, %w: tensor<32x8xf32>) -> tensor<4x16x32xf32> {
  %dy = rp.matmul %g, %w transpose_b : (tensor<4x16x8xf32>, tensor<32x8xf32>) -> tensor<4x16x32xf32>
  %dx = rp.unary_grad gelu %pre, %dy : tensor<4x16x32xf32>
  return %dx : tensor<4x16x32xf32>
}

// -----

// Left alone: a product with two readers, a residual add (no bias vector),
// a bias of another width's broadcast ([1, N]), a product that is the
// gelu gradient's x (not dy), another activation's gradient, an integer...
// CHECK-LABEL: func.func @not_epilogues
// CHECK-NOT: rp.epilogue
func.func @not_epilogues(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>,
                         %r: tensor<8x16xf32>, %b2: tensor<1x16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %p = rp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %s = rp.add %p, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %u = rp.mul %p, %p : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %q = rp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %t = rp.add %q, %r : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %q2 = rp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %t2 = rp.add %q2, %b2 : (tensor<8x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
  %q3 = rp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %d3 = rp.unary_grad gelu %q3, %r : tensor<8x16xf32>
  %q4 = rp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %d4 = rp.unary_grad silu %r, %q4 : tensor<8x16xf32>
  return %t, %t2, %d3, %d4, %u : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
