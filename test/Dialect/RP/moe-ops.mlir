// RUN: rp-opt %s | rp-opt | FileCheck %s
// RUN: rp-opt %s --mlir-print-op-generic | rp-opt | FileCheck %s

// A Mixtral-style block: 16 tokens, 8 experts, top-2, SwiGLU experts.

// CHECK-LABEL: func.func @moe_block
func.func @moe_block(%x: tensor<16x32xf32>, %gate: tensor<8x32xf32>,
                     %w1: tensor<8x64x32xf32>, %w3: tensor<8x64x32xf32>,
                     %w2: tensor<8x32x64xf32>) -> tensor<16x32xf32> {
  %logits = rp.matmul %x, %gate transpose_b
      : (tensor<16x32xf32>, tensor<8x32xf32>) -> tensor<16x8xf32>
  // CHECK: rp.moe.route %{{.*}} top_k = 2 softmax = before normalize : tensor<16x8xf32> -> (tensor<16x2xf32>, tensor<16x2xi64>)
  %w, %e = rp.moe.route %logits top_k = 2 softmax = before normalize
      : tensor<16x8xf32> -> (tensor<16x2xf32>, tensor<16x2xi64>)
  // CHECK: rp.moe.dispatch %{{.*}}, %{{.*}} : (tensor<16x32xf32>, tensor<16x2xi64>) -> (tensor<32x32xf32>, tensor<16x2xi32>, tensor<8xi32>)
  %rows, %pos, %counts = rp.moe.dispatch %x, %e
      : (tensor<16x32xf32>, tensor<16x2xi64>)
      -> (tensor<32x32xf32>, tensor<16x2xi32>, tensor<8xi32>)
  // CHECK: rp.moe.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} transpose_b : (tensor<32x32xf32>, tensor<8x64x32xf32>, tensor<8xi32>) -> tensor<32x64xf32>
  %g = rp.moe.grouped_matmul %rows, %w1, %counts transpose_b
      : (tensor<32x32xf32>, tensor<8x64x32xf32>, tensor<8xi32>)
      -> tensor<32x64xf32>
  %u = rp.moe.grouped_matmul %rows, %w3, %counts transpose_b
      : (tensor<32x32xf32>, tensor<8x64x32xf32>, tensor<8xi32>)
      -> tensor<32x64xf32>
  %s = rp.silu %g : tensor<32x64xf32>
  %h = rp.mul %s, %u
      : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
  %o = rp.moe.grouped_matmul %h, %w2, %counts transpose_b
      : (tensor<32x64xf32>, tensor<8x32x64xf32>, tensor<8xi32>)
      -> tensor<32x32xf32>
  // CHECK: rp.moe.combine %{{.*}}, %{{.*}} weights(%{{.*}}) : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xf32>
  %y = rp.moe.combine %o, %pos weights(%w)
      : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>)
      -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// CHECK-LABEL: func.func @gpt_oss_route
func.func @gpt_oss_route(%l: tensor<4x32xbf16>) -> tensor<4x4xbf16> {
  // CHECK: rp.moe.route %{{.*}} top_k = 4 softmax = after : tensor<4x32xbf16>
  %w, %e = rp.moe.route %l top_k = 4 softmax = after
      : tensor<4x32xbf16> -> (tensor<4x4xbf16>, tensor<4x4xi64>)
  return %w : tensor<4x4xbf16>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%l: tensor<16x8xf32>, %e: tensor<16x2xi64>,
                     %dw: tensor<16x2xf32>, %rows: tensor<32x32xf32>,
                     %dh: tensor<32x64xf32>, %counts: tensor<8xi32>,
                     %pos: tensor<16x2xi32>, %w: tensor<16x2xf32>,
                     %dy: tensor<16x32xf32>) {
  // CHECK: rp.moe.route_grad %{{.*}}, %{{.*}} grad(%{{.*}}) softmax = before normalize : (tensor<16x8xf32>, tensor<16x2xi64>, tensor<16x2xf32>) -> tensor<16x8xf32>
  %dl = rp.moe.route_grad %l, %e grad(%dw) softmax = before normalize
      : (tensor<16x8xf32>, tensor<16x2xi64>, tensor<16x2xf32>)
      -> tensor<16x8xf32>
  // CHECK: rp.moe.grouped_matmul_wgrad %{{.*}}, %{{.*}}, %{{.*}} transpose_b : (tensor<32x32xf32>, tensor<32x64xf32>, tensor<8xi32>) -> tensor<8x64x32xf32>
  %dw1 = rp.moe.grouped_matmul_wgrad %rows, %dh, %counts transpose_b
      : (tensor<32x32xf32>, tensor<32x64xf32>, tensor<8xi32>)
      -> tensor<8x64x32xf32>
  // CHECK: rp.moe.grouped_matmul_wgrad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x32xf32>, tensor<32x64xf32>, tensor<8xi32>) -> tensor<8x32x64xf32>
  %dw2 = rp.moe.grouped_matmul_wgrad %rows, %dh, %counts
      : (tensor<32x32xf32>, tensor<32x64xf32>, tensor<8xi32>)
      -> tensor<8x32x64xf32>
  // CHECK: rp.moe.combine_grad %{{.*}}, %{{.*}} weights(%{{.*}}) grad(%{{.*}}) : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>, tensor<16x32xf32>) -> (tensor<32x32xf32>, tensor<16x2xf32>)
  %drows, %dwt = rp.moe.combine_grad %rows, %pos weights(%w) grad(%dy)
      : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x2xf32>,
         tensor<16x32xf32>) -> (tensor<32x32xf32>, tensor<16x2xf32>)
  // CHECK: rp.moe.combine_grad %{{.*}}, %{{.*}} grad(%{{.*}}) : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x32xf32>) -> tensor<32x32xf32>
  %drows2 = rp.moe.combine_grad %rows, %pos grad(%dy)
      : (tensor<32x32xf32>, tensor<16x2xi32>, tensor<16x32xf32>)
      -> tensor<32x32xf32>
  // CHECK: rp.moe.combine %{{.*}}, %{{.*}} : (tensor<32x32xf32>, tensor<16x2xi32>) -> tensor<16x32xf32>
  %sum = rp.moe.combine %rows, %pos
      : (tensor<32x32xf32>, tensor<16x2xi32>) -> tensor<16x32xf32>
  return
}
