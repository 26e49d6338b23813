// RUN: rp-opt %s -rp-fuse-attention -split-input-file | FileCheck %s

// GPT-OSS's attention sinks (transformers' eager attention, rp.trace's
// unpacked trace, the ONNX exports): a learned logit per query head as
// one more column of the scores, softmax over [scores, sink] after the
// row maximum is subtracted, the sink column dropped. rp-fuse-attention
// gives one rp.attention with the sinks operand; a form that is not that
// (a slice keeping the sink, a column that varies by row, a maximum over
// the wrong axis) is left as it was.

// transformers' form: key/value heads repeated, the scale on the scores,
// an additive causal mask, sinks [4] reshaped to [1, 4, 1, 1] and
// broadcast along the batch and the rows, the row maximum subtracted.
// CHECK-LABEL: func.func @gpt_oss_eager
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x4x8xf32>, %[[K:[^:]+]]: tensor<1x2x4x8xf32>, %[[V:[^:]+]]: tensor<1x2x4x8xf32>, %[[S:[^:]+]]: tensor<4xf32>)
// CHECK-NOT: rp.softmax
// CHECK: %[[O:.+]] = rp.attention %[[Q]], %[[K]], %[[V]] sinks(%[[S]]) causal : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @gpt_oss_eager(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %sinks: tensor<4xf32>) -> tensor<1x4x4x8xf32> {
  %scale = rp.constant dense<0.353553385> : tensor<f32>
  %mask = rp.constant dense<[[[[0.0, -3.4e38, -3.4e38, -3.4e38], [0.0, 0.0, -3.4e38, -3.4e38], [0.0, 0.0, 0.0, -3.4e38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %k1 = rp.reshape %k : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %k2 = rp.broadcast %k1 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %k3 = rp.reshape %k2 : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %v1 = rp.reshape %v : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %v2 = rp.broadcast %v1 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %v3 = rp.reshape %v2 : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %kt = rp.transpose %k3 permutation = [0, 1, 3, 2] : tensor<1x4x4x8xf32> -> tensor<1x4x8x4xf32>
  %s = rp.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x4x4xf32>
  %s1 = rp.mul %s, %scale : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %s2 = rp.add %s1, %mask : (tensor<1x4x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x4x4x4xf32>
  %sk = rp.reshape %sinks : tensor<4xf32> to tensor<1x4x1x1xf32>
  %sb = rp.broadcast %sk : tensor<1x4x1x1xf32> to tensor<1x4x4x1xf32>
  %c = rp.concat %s2, %sb dim = 3 : (tensor<1x4x4x4xf32>, tensor<1x4x4x1xf32>) -> tensor<1x4x4x5xf32>
  %m = rp.reduce max %c dims = [3] keep_dims : tensor<1x4x4x5xf32> -> tensor<1x4x4x1xf32>
  %d = rp.sub %c, %m : (tensor<1x4x4x5xf32>, tensor<1x4x4x1xf32>) -> tensor<1x4x4x5xf32>
  %p = rp.softmax %d dim = 3 : tensor<1x4x4x5xf32>
  %pk = rp.slice %p offsets = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<1x4x4x5xf32> -> tensor<1x4x4x4xf32>
  %o = rp.matmul %pk, %v3 : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// The sink column first (the slice keeps columns 1..T), no maximum
// subtracted, the column a [4, 1, 1] tensor broadcast as numpy aligns it,
// no mask: the sinks reshaped to [4].
// CHECK-LABEL: func.func @sink_first
// CHECK: %[[S:.+]] = rp.reshape %{{.+}} : tensor<4x1x1xf32> to tensor<4xf32>
// CHECK: rp.attention %{{[^ ]+}}, %{{[^ ]+}}, %{{[^ ]+}} sinks(%[[S]]) scale = 5.000000e-01 : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>, tensor<4xf32>) -> tensor<2x4x3x8xf32>
// CHECK-NOT: rp.softmax
func.func @sink_first(%q: tensor<2x4x3x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x4x3x8xf32>, %col: tensor<4x1x1xf32>) -> tensor<2x4x3x8xf32> {
  %scale = rp.constant dense<0.5> : tensor<f32>
  %s = rp.matmul %q, %k transpose_b : (tensor<2x4x3x8xf32>, tensor<2x4x3x8xf32>) -> tensor<2x4x3x3xf32>
  %s1 = rp.mul %s, %scale : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32>
  %sb = rp.broadcast %col : tensor<4x1x1xf32> to tensor<2x4x3x1xf32>
  %c = rp.concat %sb, %s1 dim = 3 : (tensor<2x4x3x1xf32>, tensor<2x4x3x3xf32>) -> tensor<2x4x3x4xf32>
  %p = rp.softmax %c dim = 3 : tensor<2x4x3x4xf32>
  %pk = rp.slice %p offsets = [0, 0, 0, 1] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x3xf32>
  %o = rp.matmul %pk, %v : (tensor<2x4x3x3xf32>, tensor<2x4x3x8xf32>) -> tensor<2x4x3x8xf32>
  return %o : tensor<2x4x3x8xf32>
}

// -----

// Near miss: the slice keeps the sink and drops the first key (offset 1
// with the sink last): not attention with sinks, left decomposed.
// CHECK-LABEL: func.func @slice_keeps_sink
// CHECK-NOT: rp.attention
// CHECK: rp.softmax
// CHECK: rp.slice
func.func @slice_keeps_sink(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>, %sinks: tensor<2xf32>) -> tensor<1x2x3x8xf32> {
  %s = rp.matmul %q, %k transpose_b : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x3xf32>
  %sk = rp.reshape %sinks : tensor<2xf32> to tensor<1x2x1x1xf32>
  %sb = rp.broadcast %sk : tensor<1x2x1x1xf32> to tensor<1x2x3x1xf32>
  %c = rp.concat %s, %sb dim = 3 : (tensor<1x2x3x3xf32>, tensor<1x2x3x1xf32>) -> tensor<1x2x3x4xf32>
  %p = rp.softmax %c dim = 3 : tensor<1x2x3x4xf32>
  %pk = rp.slice %p offsets = [0, 0, 0, 1] strides = [1, 1, 1, 1] : tensor<1x2x3x4xf32> -> tensor<1x2x3x3xf32>
  %o = rp.matmul %pk, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Near miss: the extra column differs by row (a [1, 2, 3, 1] tensor, no
// logit per head): left decomposed.
// CHECK-LABEL: func.func @column_by_row
// CHECK-NOT: rp.attention
// CHECK: rp.softmax
func.func @column_by_row(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>, %col: tensor<1x2x3x1xf32>) -> tensor<1x2x3x8xf32> {
  %s = rp.matmul %q, %k transpose_b : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x3xf32>
  %c = rp.concat %s, %col dim = 3 : (tensor<1x2x3x3xf32>, tensor<1x2x3x1xf32>) -> tensor<1x2x3x4xf32>
  %p = rp.softmax %c dim = 3 : tensor<1x2x3x4xf32>
  %pk = rp.slice %p offsets = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<1x2x3x4xf32> -> tensor<1x2x3x3xf32>
  %o = rp.matmul %pk, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Near miss: the maximum taken over the rows (dims = [2]), which is no
// shift of each row's softmax: left decomposed.
// CHECK-LABEL: func.func @max_over_rows
// CHECK-NOT: rp.attention
// CHECK: rp.reduce max
// CHECK: rp.softmax
func.func @max_over_rows(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>, %sinks: tensor<2xf32>) -> tensor<1x2x3x8xf32> {
  %s = rp.matmul %q, %k transpose_b : (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x3xf32>
  %sk = rp.reshape %sinks : tensor<2xf32> to tensor<1x2x1x1xf32>
  %sb = rp.broadcast %sk : tensor<1x2x1x1xf32> to tensor<1x2x3x1xf32>
  %c = rp.concat %s, %sb dim = 3 : (tensor<1x2x3x3xf32>, tensor<1x2x3x1xf32>) -> tensor<1x2x3x4xf32>
  %m = rp.reduce max %c dims = [2] keep_dims : tensor<1x2x3x4xf32> -> tensor<1x2x1x4xf32>
  %d = rp.sub %c, %m : (tensor<1x2x3x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x3x4xf32>
  %p = rp.softmax %d dim = 3 : tensor<1x2x3x4xf32>
  %pk = rp.slice %p offsets = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<1x2x3x4xf32> -> tensor<1x2x3x3xf32>
  %o = rp.matmul %pk, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}
