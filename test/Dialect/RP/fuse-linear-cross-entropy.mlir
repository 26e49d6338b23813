// RUN: rp-opt %s -rp-fuse-linear-cross-entropy -split-input-file | FileCheck %s
// RUN: rp-opt %s -rp-fuse-linear-cross-entropy=chunk=256 -split-input-file | FileCheck %s --check-prefix=CHUNK
// RUN: (rp-opt %s -rp-fuse-linear-cross-entropy=chunk=-1 -split-input-file 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BAD

// BAD: rp-fuse-linear-cross-entropy: chunk must be 0 (automatic) or a positive number of rows, got -1

// A tied head: the embedding table [vocab, hidden] read with transpose_b.
// The default chunk keeps 64 MiB of f32 logits: 65536 / 4 / 1000 rows,
// rounded down to a multiple of 128.
// CHECK-LABEL: func.func @tied
// CHECK-SAME: (%[[H:.+]]: tensor<2x16x32xf32>, %[[E:.+]]: tensor<1000x32xf32>, %[[Y:.+]]: tensor<2x16xi64>)
// CHECK-NOT: rp.matmul
// CHECK: %[[S:.+]], %[[N:.+]] = rp.linear_cross_entropy %[[H]], %[[E]], %[[Y]] ignore_index = -100 chunk = 16768 : (tensor<2x16x32xf32>, tensor<1000x32xf32>, tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
// CHECK-NEXT: return %[[S]], %[[N]]
// CHUNK-LABEL: func.func @tied
// CHUNK: rp.linear_cross_entropy {{.+}} chunk = 256
func.func @tied(%h: tensor<2x16x32xf32>, %e: tensor<1000x32xf32>, %y: tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>) {
  %l = rp.matmul %h, %e transpose_b : (tensor<2x16x32xf32>, tensor<1000x32xf32>) -> tensor<2x16x1000xf32>
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<2x16x1000xf32>, tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// A [hidden, vocab] head is transposed once; a large vocabulary gets the
// smallest chunk, 128 rows. f16 operands keep the f32 loss.
// CHECK-LABEL: func.func @untied
// CHECK: %[[T:.+]] = rp.transpose %{{.+}} permutation = [1, 0] : tensor<32x151936xf16> -> tensor<151936x32xf16>
// CHECK: rp.linear_cross_entropy %{{.+}}, %[[T]], %{{.+}} ignore_index = -7 chunk = 128 : (tensor<4x32xf16>, tensor<151936x32xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>)
func.func @untied(%h: tensor<4x32xf16>, %w: tensor<32x151936xf16>, %y: tensor<4xi64>) -> (tensor<f32>, tensor<i64>) {
  %l = rp.matmul %h, %w : (tensor<4x32xf16>, tensor<32x151936xf16>) -> tensor<4x151936xf16>
  %s, %n = rp.cross_entropy %l, %y ignore_index = -7 : (tensor<4x151936xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>)
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// Logits that the model also returns must exist: not fused.
// CHECK-LABEL: func.func @logits_read
// CHECK: rp.matmul
// CHECK: rp.cross_entropy
// CHECK-NOT: rp.linear_cross_entropy
func.func @logits_read(%h: tensor<16x32xf32>, %e: tensor<64x32xf32>, %y: tensor<16xi64>) -> (tensor<f32>, tensor<16x64xf32>) {
  %l = rp.matmul %h, %e transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<16x64xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<i64>)
  return %s, %l : tensor<f32>, tensor<16x64xf32>
}

// -----

// Logits that are not a linear layer's (a batched weight, a scaled matmul):
// not fused.
// CHECK-LABEL: func.func @not_linear
// CHECK-NOT: rp.linear_cross_entropy
// CHECK: rp.cross_entropy
// CHECK: rp.cross_entropy
func.func @not_linear(%h: tensor<2x16x32xf32>, %e: tensor<2x64x32xf32>, %y: tensor<2x16xi64>, %w: tensor<64x32xf32>, %c: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %l = rp.matmul %h, %e transpose_b : (tensor<2x16x32xf32>, tensor<2x64x32xf32>) -> tensor<2x16x64xf32>
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
  %m = rp.matmul %h, %w transpose_b : (tensor<2x16x32xf32>, tensor<64x32xf32>) -> tensor<2x16x64xf32>
  %d = rp.div %m, %c : (tensor<2x16x64xf32>, tensor<f32>) -> tensor<2x16x64xf32>
  %s2, %n2 = rp.cross_entropy %d, %y ignore_index = -100 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> (tensor<f32>, tensor<i64>)
  return %s, %s2 : tensor<f32>, tensor<f32>
}
// BAD: exit 1
