// RUN: rp-opt %s -split-input-file -rp-autodiff -verify-diagnostics | FileCheck %s

// Activity analysis: a float initializer the importer marked trainable
// that reaches the loss only through a comparison (a mask built from it)
// gets no gradient. Layer 0 hands the mask to two layers in other stages:
// no backward yields a gradient for it (no zeros), nothing sums gradients
// of it, and @main returns no grad:mask.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {rp.name = "loss_sum"}, tensor<i64> {rp.name = "count"}, tensor<8x8xf32> {rp.name = "grad:w0"}, tensor<8x8xf32> {rp.name = "grad:w1"}, tensor<8x8xf32> {rp.name = "grad:w2"}, tensor<8x4xf32> {rp.name = "grad:head"})
// CHECK: %[[T:.+]]:4 = rp.layer "l3" role = tail
// CHECK: %[[B2:.+]]:2 = rp.layer "l2.backward" role = backward
// CHECK-NOT: tensor<1x1x4x4xi1> {{.*}} role
// CHECK: rp.attention_grad
// CHECK: rp.yield %{{.+}}, %{{.+}} : tensor<1x1x4x8xf32>, tensor<8x8xf32>
// CHECK: %[[B1:.+]]:2 = rp.layer "l1.backward" role = backward
// CHECK: rp.yield %{{.+}}, %{{.+}} : tensor<1x1x4x8xf32>, tensor<8x8xf32>
// CHECK: %[[B0:.+]] = rp.layer "l0.backward" role = backward
// CHECK-NOT: rp.add
// CHECK: return %[[T]]#0, %[[T]]#1, %[[B0]], %[[B1]]#1, %[[B2]]#1, %[[T]]#3
func.func @main(%x: tensor<1x1x4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 4, microbatches = 5, hw = "host", forward = [1, 1, 1], backward = [1, 1, 1, 1]>} {
  %w0 = rp.param "w0" trainable at "w.bin"[0] : tensor<8x8xf32>
  %mask = rp.param "mask" trainable at "w.bin"[256] : tensor<4x4xf32>
  %w1 = rp.param "w1" trainable at "w.bin"[320] : tensor<8x8xf32>
  %w2 = rp.param "w2" trainable at "w.bin"[576] : tensor<8x8xf32>
  %wh = rp.param "head" trainable at "w.bin"[832] : tensor<8x4xf32>
  %h0:2 = rp.layer "l0" (%x, %w0, %mask) : (tensor<1x1x4x8xf32>, tensor<8x8xf32>, tensor<4x4xf32>) -> (tensor<1x1x4x4xi1>, tensor<1x1x4x8xf32>) {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x8xf32>, %k: tensor<4x4xf32>):
    %zero = rp.constant dense<0.0> : tensor<f32>
    %c = rp.cmp ge, %k, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    %r = rp.reshape %c : tensor<4x4xi1> to tensor<1x1x4x4xi1>
    %h = rp.matmul %a, %w : (tensor<1x1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x1x4x8xf32>
    rp.yield %r, %h : tensor<1x1x4x4xi1>, tensor<1x1x4x8xf32>
  }
  %h1 = rp.layer "l1" (%h0#1, %w1, %h0#0) : (tensor<1x1x4x8xf32>, tensor<8x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32> {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x8xf32>, %r: tensor<1x1x4x4xi1>):
    %q = rp.matmul %a, %w : (tensor<1x1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x1x4x8xf32>
    %o = rp.attention %q, %q, %q mask(%r) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32>
    rp.yield %o : tensor<1x1x4x8xf32>
  }
  %h2 = rp.layer "l2" (%h1, %w2, %h0#0) : (tensor<1x1x4x8xf32>, tensor<8x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32> {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x8xf32>, %r: tensor<1x1x4x4xi1>):
    %q = rp.matmul %a, %w : (tensor<1x1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x1x4x8xf32>
    %o = rp.attention %q, %q, %q mask(%r) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32>
    rp.yield %o : tensor<1x1x4x8xf32>
  }
  %s, %n = rp.layer "l3" (%h2, %wh, %labels) : (tensor<1x1x4x8xf32>, tensor<8x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x4xf32>, %l: tensor<4xi64>):
    %r = rp.reshape %a : tensor<1x1x4x8xf32> to tensor<4x8xf32>
    %z = rp.matmul %r, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %s, %n = rp.cross_entropy %z, %l ignore_index = -100 : (tensor<4x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// A mask computed from a trainable table (a learned position bias) needs a
// gradient: the attention that reads it becomes matmul, add, softmax and
// matmul, and the table gets its gradient. A mask that is a trainable
// parameter itself (reshaped) may be an ONNX buffer: a warning says so.
// CHECK-LABEL: func.func @main
// CHECK-SAME: {rp.name = "grad:bias"}
// CHECK: rp.layer "l1..l3" role = tail
// CHECK-NOT: rp.attention
// CHECK: rp.matmul %{{.+}}, %{{.+}} transpose_b : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x4xf32>
// CHECK: rp.mul
// CHECK: rp.add
// CHECK: rp.softmax %{{.+}} dim = 3
// CHECK: rp.matmul %{{.+}}, %{{.+}} : (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
// CHECK: rp.softmax_grad
func.func @main(%x: tensor<1x1x4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", forward = [1], backward = [3, 1]>} {
  %w0 = rp.param "w0" trainable at "w.bin"[0] : tensor<8x8xf32>
  %bias = rp.param "bias" trainable at "w.bin"[256] : tensor<4x4xf32>
  %wh = rp.param "head" trainable at "w.bin"[832] : tensor<8x4xf32>
  %h0 = rp.layer "l0" (%x, %w0) : (tensor<1x1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x1x4x8xf32> {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x8xf32>):
    %h = rp.matmul %a, %w : (tensor<1x1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x1x4x8xf32>
    rp.yield %h : tensor<1x1x4x8xf32>
  }
  %h1 = rp.layer "l1" (%h0, %bias) : (tensor<1x1x4x8xf32>, tensor<4x4xf32>) -> tensor<1x1x4x8xf32> {
  ^bb0(%a: tensor<1x1x4x8xf32>, %k: tensor<4x4xf32>):
    %r = rp.reshape %k : tensor<4x4xf32> to tensor<1x1x4x4xf32>
    // expected-warning @+1 {{adds the trainable parameter 'bias' to its scores as a mask, so it gets a gradient and is trained; if it is a buffer (an ONNX initializer holding a constant bias), freeze it with --frozen}}
    %o = rp.attention %a, %a, %a mask(%r) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x8xf32>
    rp.yield %o : tensor<1x1x4x8xf32>
  }
  %h2 = rp.layer "l2" (%h1) : (tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  ^bb0(%a: tensor<1x1x4x8xf32>):
    %t = rp.tanh %a : tensor<1x1x4x8xf32>
    rp.yield %t : tensor<1x1x4x8xf32>
  }
  %s, %n = rp.layer "l3" (%h2, %wh, %labels) : (tensor<1x1x4x8xf32>, tensor<8x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<1x1x4x8xf32>, %w: tensor<8x4xf32>, %l: tensor<4xi64>):
    %r = rp.reshape %a : tensor<1x1x4x8xf32> to tensor<4x8xf32>
    %z = rp.matmul %r, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %s, %n = rp.cross_entropy %z, %l ignore_index = -100 : (tensor<4x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// expected-error @+1 {{no trainable parameter reaches the loss through ops that carry gradients; there is nothing to train (are the weights frozen?)}}
func.func @main(%x: tensor<1x1x4x8xf32>, %labels: tensor<4xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>} {
  %mask = rp.param "mask" trainable at "w.bin"[0] : tensor<4x4xf32>
  %s, %n = rp.layer "l0" (%x, %mask, %labels) : (tensor<1x1x4x8xf32>, tensor<4x4xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<1x1x4x8xf32>, %k: tensor<4x4xf32>, %l: tensor<4xi64>):
    %zero = rp.constant dense<0.0> : tensor<f32>
    %c = rp.cmp ge, %k, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    %r = rp.reshape %c : tensor<4x4xi1> to tensor<1x1x4x4xi1>
    %o = rp.attention %a, %a, %a mask(%r) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x8xf32>
    %z = rp.reshape %o : tensor<1x1x4x8xf32> to tensor<4x8xf32>
    %s, %n = rp.cross_entropy %z, %l ignore_index = -100 : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

func.func @main(%q: tensor<1x2x4x8xf32>, %labels: tensor<8xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>} {
  %bias = rp.param "bias" trainable at "w.bin"[0] : tensor<4x4xf32>
  %s, %n = rp.layer "l0" (%q, %bias, %labels) : (tensor<1x2x4x8xf32>, tensor<4x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<1x2x4x8xf32>, %k: tensor<4x4xf32>, %l: tensor<8xi64>):
    %kv = rp.slice %a offsets = [0, 0, 0, 0] strides = [1, 1, 1, 1] : tensor<1x2x4x8xf32> -> tensor<1x1x4x8xf32>
    %r = rp.reshape %k : tensor<4x4xf32> to tensor<1x1x4x4xf32>
    // expected-error @+1 {{shares key/value heads among query heads and its mask needs a gradient}}
    %o = rp.attention %a, %kv, %kv mask(%r) : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
    %z = rp.reshape %o : tensor<1x2x4x8xf32> to tensor<8x8xf32>
    %s, %n = rp.cross_entropy %z, %l ignore_index = -100 : (tensor<8x8xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %s, %n : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}
