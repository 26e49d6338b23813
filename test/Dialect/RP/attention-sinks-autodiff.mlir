// RUN: rp-opt %s -rp-autodiff | FileCheck %s

// rp-autodiff gives rp.attention's sinks (GPT-OSS's learned logit per query
// head, a trainable parameter) their gradient through rp.attention_grad's
// fourth result, and @main returns it as grad:sinks.


// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<2xf32> {rp.name = "grad:sinks"}
// CHECK: rp.attention_grad %{{.+}}, %{{.+}}, %{{.+}} sinks(%{{.+}}) grad(%{{.+}}) causal : {{.+}} -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>)
func.func @main(%x: tensor<1x2x4x8xf32>, %labels: tensor<8xi64>) -> (tensor<f32>, tensor<i64>) attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [2]>} {
  %w0 = rp.param "w0" trainable at "w.bin"[0] : tensor<8x8xf32>
  %sinks = rp.param "sinks" trainable at "w.bin"[256] : tensor<2xf32>
  %wh = rp.param "head" trainable at "w.bin"[264] : tensor<8x4xf32>
  %h = rp.layer "l0" (%x, %w0, %sinks) : (tensor<1x2x4x8xf32>, tensor<8x8xf32>, tensor<2xf32>) -> tensor<1x2x4x8xf32> {
  ^bb0(%a: tensor<1x2x4x8xf32>, %w: tensor<8x8xf32>, %s: tensor<2xf32>):
    %q = rp.matmul %a, %w : (tensor<1x2x4x8xf32>, tensor<8x8xf32>) -> tensor<1x2x4x8xf32>
    %o = rp.attention %q, %a, %a sinks(%s) causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>) -> tensor<1x2x4x8xf32>
    rp.yield %o : tensor<1x2x4x8xf32>
  }
  %l, %n = rp.layer "l1" (%h, %wh, %labels) : (tensor<1x2x4x8xf32>, tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<1x2x4x8xf32>, %w: tensor<8x4xf32>, %y: tensor<8xi64>):
    %r = rp.reshape %a : tensor<1x2x4x8xf32> to tensor<8x8xf32>
    %z = rp.matmul %r, %w : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %l, %n = rp.cross_entropy %z, %y ignore_index = -100 : (tensor<8x4xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %l, %n : tensor<f32>, tensor<i64>
  }
  return %l, %n : tensor<f32>, tensor<i64>
}
