// RUN: rp-opt %s -rp-fuse-attention -split-input-file | FileCheck %s

// GPT-2 style: K^T by a transpose of the head-split keys, the scale on the
// scores, a constant causal mask through where(masked, -inf, s).
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x4x8x16xf32>, %[[K:[^:]+]]: tensor<2x4x8x16xf32>, %[[V:[^:]+]]: tensor<2x4x8x16xf32>)
// CHECK-NEXT: %[[O:.+]] = rp.attention %[[Q]], %[[K]], %[[V]] causal : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-NEXT: return %[[O]]
func.func @causal(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %scale = rp.constant dense<0.25> : tensor<f32>
  %ninf = rp.constant dense<0xFF800000> : tensor<f32>
  %upper = rp.constant dense<[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]> : tensor<8x8xi1>
  %kt = rp.transpose %k permutation = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = rp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %s2 = rp.mul %s, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %s3 = rp.where %upper, %ninf, %s2 : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = rp.softmax %s3 dim = 3 : tensor<2x4x8x8xf32>
  %o = rp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// torch's multi-head attention: [batch*heads, seq, dim], Q divided by
// sqrt(dim) first, K^T as a transposed matmul, no mask.
// CHECK-LABEL: func.func @merged_heads
// CHECK: %[[Q4:.+]] = rp.reshape %{{.+}} : tensor<6x5x16xf32> to tensor<6x1x5x16xf32>
// CHECK: %[[K4:.+]] = rp.reshape %{{.+}} : tensor<6x5x16xf32> to tensor<6x1x5x16xf32>
// CHECK: %[[V4:.+]] = rp.reshape %{{.+}} : tensor<6x5x16xf32> to tensor<6x1x5x16xf32>
// CHECK: %[[O:.+]] = rp.attention %[[Q4]], %[[K4]], %[[V4]] : (tensor<6x1x5x16xf32>
// CHECK: rp.reshape %[[O]] : tensor<6x1x5x16xf32> to tensor<6x5x16xf32>
// CHECK-NOT: rp.softmax
func.func @merged_heads(%q: tensor<6x5x16xf32>, %k: tensor<6x5x16xf32>, %v: tensor<6x5x16xf32>) -> tensor<6x5x16xf32> {
  %four = rp.constant dense<4.0> : tensor<f32>
  %qs = rp.div %q, %four : (tensor<6x5x16xf32>, tensor<f32>) -> tensor<6x5x16xf32>
  %s = rp.matmul %qs, %k transpose_b : (tensor<6x5x16xf32>, tensor<6x5x16xf32>) -> tensor<6x5x5xf32>
  %p = rp.softmax %s dim = 2 : tensor<6x5x5xf32>
  %o = rp.matmul %p, %v : (tensor<6x5x5xf32>, tensor<6x5x16xf32>) -> tensor<6x5x16xf32>
  return %o : tensor<6x5x16xf32>
}

// -----

// Llama style: an additive 0 / -big mask (causal), key/value heads
// repeated by reshape + broadcast + reshape, no scale (so scale = 1).
// CHECK-LABEL: func.func @grouped_query
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x8x16xf32>, %[[K:[^:]+]]: tensor<1x2x8x16xf32>, %[[V:[^:]+]]: tensor<1x2x8x16xf32>)
// CHECK: rp.attention %[[Q]], %[[K]], %[[V]] causal scale = 1.000000e+00 : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32>
func.func @grouped_query(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %mask = rp.constant dense<[[0.0, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38, -3.4e38, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, 0.0, -3.4e38, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, 0.0, 0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %k1 = rp.reshape %k : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
  %k2 = rp.broadcast %k1 : tensor<1x2x1x8x16xf32> to tensor<1x2x2x8x16xf32>
  %k3 = rp.reshape %k2 : tensor<1x2x2x8x16xf32> to tensor<1x4x8x16xf32>
  %v1 = rp.reshape %v : tensor<1x2x8x16xf32> to tensor<1x2x1x8x16xf32>
  %v2 = rp.broadcast %v1 : tensor<1x2x1x8x16xf32> to tensor<1x2x2x8x16xf32>
  %v3 = rp.reshape %v2 : tensor<1x2x2x8x16xf32> to tensor<1x4x8x16xf32>
  %kt = rp.transpose %k3 permutation = [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %s = rp.matmul %q, %kt : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %s2 = rp.add %s, %mask : (tensor<1x4x8x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8x8xf32>
  %p = rp.softmax %s2 dim = 3 : tensor<1x4x8x8xf32>
  %o = rp.matmul %p, %v3 : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// A padding mask from an input: where(pad, -big, s) becomes an i1 keep
// mask (pad == false); a mask that is not causal stays a mask.
// CHECK-LABEL: func.func @input_mask
// CHECK-SAME: %[[PAD:[^:]+]]: tensor<2x1x1x8xi1>
// CHECK: %[[KEEP:.+]] = rp.cmp eq, %[[PAD]], %{{.+}} : (tensor<2x1x1x8xi1>, tensor<i1>) -> tensor<2x1x1x8xi1>
// CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} mask(%[[KEEP]])
func.func @input_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %pad: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %big = rp.constant dense<-1.0e9> : tensor<f32>
  %s = rp.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %s3 = rp.where %pad, %big, %s : (tensor<2x1x1x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = rp.softmax %s3 dim = 3 : tensor<2x4x8x8xf32>
  %o = rp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The probabilities are also returned, so they must exist: no fusion.
// CHECK-LABEL: func.func @DontFuseUsedProbabilities
// CHECK: rp.softmax
// CHECK-NOT: rp.attention
func.func @DontFuseUsedProbabilities(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %s = rp.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = rp.softmax %s dim = 3 : tensor<2x4x8x8xf32>
  %o = rp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}

// -----

// A softmax over another dimension is not attention.
// CHECK-LABEL: func.func @DontFuseOtherDim
// CHECK-NOT: rp.attention
func.func @DontFuseOtherDim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %s = rp.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = rp.softmax %s dim = 2 : tensor<2x4x8x8xf32>
  %o = rp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A mask fill that is not "minus infinity" (here -1) changes the
// probabilities instead of excluding positions: no fusion.
// CHECK-LABEL: func.func @DontFuseSoftMask
// CHECK-NOT: rp.attention
func.func @DontFuseSoftMask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<8x8xi1>) -> tensor<2x4x8x16xf32> {
  %fill = rp.constant dense<-1.0> : tensor<f32>
  %s = rp.matmul %q, %k transpose_b : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %s3 = rp.where %m, %fill, %s : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = rp.softmax %s3 dim = 3 : tensor<2x4x8x8xf32>
  %o = rp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// torch 2's exporters guard the probabilities against fully masked rows
// with where(p != p, 0, p); under a causal mask no row is fully masked, so
// the guard changes nothing and the attention fuses.
// CHECK-LABEL: func.func @nan_guard_causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x2x4x8xf32>, %[[K:[^:]+]]: tensor<1x2x4x8xf32>, %[[V:[^:]+]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT: %[[O:.+]] = rp.attention %[[Q]], %[[K]], %[[V]] causal scale = 1.000000e+00 : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @nan_guard_causal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %mask = rp.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %zero = rp.constant dense<0.0> : tensor<f32>
  %kt = rp.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = rp.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s2 = rp.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = rp.softmax %s2 dim = 3 : tensor<1x2x4x4xf32>
  %nan = rp.cmp ne, %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g = rp.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = rp.matmul %g, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A mask computed at run time may mask a whole row; the guard matters
// there, so the attention stays written out.
// CHECK-LABEL: func.func @DontFuseNanGuardInputMask
// CHECK-NOT: rp.attention
// CHECK: rp.softmax
func.func @DontFuseNanGuardInputMask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %keep: tensor<4x4xi1>) -> tensor<1x2x4x8xf32> {
  %ninf = rp.constant dense<0xFF800000> : tensor<f32>
  %zero = rp.constant dense<0.0> : tensor<f32>
  %kt = rp.transpose %k permutation = [0, 1, 3, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = rp.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s2 = rp.where %keep, %s, %ninf : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = rp.softmax %s2 dim = 3 : tensor<1x2x4x4xf32>
  %nan = rp.cmp ne, %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %g = rp.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = rp.matmul %g, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}
