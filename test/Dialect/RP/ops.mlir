// RUN: rp-opt %s | rp-opt | FileCheck %s
// RUN: rp-opt %s --mlir-print-op-generic | rp-opt | FileCheck %s

// Every rp op round-trips through its custom assembly and the generic form.

// CHECK-LABEL: func.func @params_and_constants
func.func @params_and_constants() -> (tensor<16x8xf32>, tensor<4xf32>, tensor<2xi64>, tensor<2x2xi1>) {
  // CHECK: rp.param "h.0.attn.weight" trainable at "weights.bin"[1024] : tensor<16x8xf32>
  %w = rp.param "h.0.attn.weight" trainable at "weights.bin"[1024] : tensor<16x8xf32>
  // CHECK: rp.param "rope.inv_freq" : tensor<4xf32>
  %f = rp.param "rope.inv_freq" : tensor<4xf32>
  // CHECK: rp.param "w.lora_A" trainable init = 1.250000e-01 : tensor<2x8xf32>
  %a = rp.param "w.lora_A" trainable init = 0.125 : tensor<2x8xf32>
  // CHECK: rp.constant dense<[2, 3]> : tensor<2xi64>
  %c = rp.constant dense<[2, 3]> : tensor<2xi64>
  // CHECK: rp.constant dense<{{\[}}[true, false], [true, true]]> : tensor<2x2xi1>
  %m = rp.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  return %w, %f, %c, %m : tensor<16x8xf32>, tensor<4xf32>, tensor<2xi64>, tensor<2x2xi1>
}

// CHECK-LABEL: func.func @layer
func.func @layer(%x: tensor<2x8xf32>) -> tensor<2x16xf32> {
  %w = rp.param "h.0.fc.weight" trainable at "weights.bin"[0] : tensor<16x8xf32>
  // CHECK: %[[Y:.+]] = rp.layer "h.0"(%{{.+}}, %{{.+}}) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32> {
  // CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<2x8xf32>, %[[B:.+]]: tensor<16x8xf32>):
  // CHECK-NEXT: %[[MM:.+]] = rp.matmul %[[A]], %[[B]] transpose_b
  // CHECK-NEXT: rp.yield %[[MM]] : tensor<2x16xf32>
  %y = rp.layer "h.0" (%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<16x8xf32>):
    %0 = rp.matmul %a, %b transpose_b : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
    rp.yield %0 : tensor<2x16xf32>
  }
  return %y : tensor<2x16xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<4x1xi64>, %j: tensor<1x4xi64>) -> (tensor<2x3xf32>, tensor<4x4xi64>, tensor<4x4xi1>) {
  // CHECK: rp.add %{{.+}}, %{{.+}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = rp.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.sub
  %1 = rp.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.mul
  %2 = rp.mul %1, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.div
  %3 = rp.div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.pow
  %4 = rp.pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.max
  %5 = rp.max %4, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.min
  %6 = rp.min %5, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: rp.add %{{.+}}, %{{.+}} : (tensor<4x1xi64>, tensor<1x4xi64>) -> tensor<4x4xi64>
  %7 = rp.add %i, %j : (tensor<4x1xi64>, tensor<1x4xi64>) -> tensor<4x4xi64>
  // CHECK: rp.cmp le, %{{.+}}, %{{.+}} : (tensor<4x1xi64>, tensor<1x4xi64>) -> tensor<4x4xi1>
  %8 = rp.cmp le, %i, %j : (tensor<4x1xi64>, tensor<1x4xi64>) -> tensor<4x4xi1>
  return %6, %7, %8 : tensor<2x3xf32>, tensor<4x4xi64>, tensor<4x4xi1>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<2xi32>) -> (tensor<2x3xf32>, tensor<2xi32>) {
  // CHECK: rp.neg %{{.+}} : tensor<2x3xf32>
  %0 = rp.neg %x : tensor<2x3xf32>
  // CHECK: rp.exp
  %1 = rp.exp %0 : tensor<2x3xf32>
  // CHECK: rp.log
  %2 = rp.log %1 : tensor<2x3xf32>
  // CHECK: rp.sqrt
  %3 = rp.sqrt %2 : tensor<2x3xf32>
  // CHECK: rp.rsqrt
  %4 = rp.rsqrt %3 : tensor<2x3xf32>
  // CHECK: rp.tanh
  %5 = rp.tanh %4 : tensor<2x3xf32>
  // CHECK: rp.erf
  %6 = rp.erf %5 : tensor<2x3xf32>
  // CHECK: rp.sigmoid
  %7 = rp.sigmoid %6 : tensor<2x3xf32>
  // CHECK: rp.silu
  %8 = rp.silu %7 : tensor<2x3xf32>
  // CHECK: rp.relu
  %9 = rp.relu %8 : tensor<2x3xf32>
  // CHECK: rp.gelu %{{.+}} : tensor<2x3xf32>
  %10 = rp.gelu %9 : tensor<2x3xf32>
  // CHECK: rp.gelu %{{.+}} approximate = tanh : tensor<2x3xf32>
  %11 = rp.gelu %10 approximate = tanh : tensor<2x3xf32>
  // CHECK: rp.neg %{{.+}} : tensor<2xi32>
  %12 = rp.neg %i : tensor<2xi32>
  return %11, %12 : tensor<2x3xf32>, tensor<2xi32>
}

// CHECK-LABEL: func.func @cast_where
func.func @cast_where(%x: tensor<2x3xf32>, %c: tensor<1x3xi1>, %s: tensor<f32>) -> (tensor<2x3xbf16>, tensor<2x3xf32>) {
  // CHECK: rp.cast %{{.+}} : tensor<2x3xf32> to tensor<2x3xbf16>
  %0 = rp.cast %x : tensor<2x3xf32> to tensor<2x3xbf16>
  // CHECK: rp.where %{{.+}}, %{{.+}}, %{{.+}} : (tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  %1 = rp.where %c, %x, %s : (tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xbf16>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @shape_ops
func.func @shape_ops(%x: tensor<2x8x64xf32>, %b: tensor<1x64xf32>, %ids: tensor<2x5xi64>, %t: tensor<100x64xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x128xf32>, tensor<16x64xf32>, tensor<2x5x64xf32>) {
  // CHECK: rp.reshape %{{.+}} : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
  %0 = rp.reshape %x : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
  // CHECK: rp.transpose %{{.+}} permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %1 = rp.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  // CHECK: rp.slice %{{.+}} offsets = [0, 0, 1] strides = [1, 1, 2] : tensor<2x8x64xf32> -> tensor<2x8x32xf32>
  %2 = rp.slice %x offsets = [0, 0, 1] strides = [1, 1, 2] : tensor<2x8x64xf32> -> tensor<2x8x32xf32>
  // CHECK: rp.concat %{{.+}}, %{{.+}} dim = 2 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x128xf32>
  %3 = rp.concat %x, %x dim = 2 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x128xf32>
  // CHECK: rp.broadcast %{{.+}} : tensor<1x64xf32> to tensor<16x64xf32>
  %4 = rp.broadcast %b : tensor<1x64xf32> to tensor<16x64xf32>
  // CHECK: rp.gather %{{.+}}[%{{.+}}] axis = 0 : (tensor<100x64xf32>, tensor<2x5xi64>) -> tensor<2x5x64xf32>
  %5 = rp.gather %t[%ids] axis = 0 : (tensor<100x64xf32>, tensor<2x5xi64>) -> tensor<2x5x64xf32>
  return %1, %2, %3, %4, %5 : tensor<2x4x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x128xf32>, tensor<16x64xf32>, tensor<2x5x64xf32>
}

// CHECK-LABEL: func.func @nn_ops
func.func @nn_ops(%x: tensor<2x8x64xf32>, %w: tensor<3x64x32xf32>, %g: tensor<64xf32>) -> (tensor<2x3x8x32xf32>, tensor<2x8x1xf32>, tensor<2xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %xr = rp.reshape %x : tensor<2x8x64xf32> to tensor<2x1x8x64xf32>
  // CHECK: rp.matmul %{{.+}}, %{{.+}} : (tensor<2x1x8x64xf32>, tensor<3x64x32xf32>) -> tensor<2x3x8x32xf32>
  %0 = rp.matmul %xr, %w : (tensor<2x1x8x64xf32>, tensor<3x64x32xf32>) -> tensor<2x3x8x32xf32>
  // CHECK: rp.reduce mean %{{.+}} dims = [2] keep_dims : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  %1 = rp.reduce mean %x dims = [2] keep_dims : tensor<2x8x64xf32> -> tensor<2x8x1xf32>
  // CHECK: rp.reduce max %{{.+}} dims = [1, 2] : tensor<2x8x64xf32> -> tensor<2xf32>
  %2 = rp.reduce max %x dims = [1, 2] : tensor<2x8x64xf32> -> tensor<2xf32>
  // CHECK: rp.softmax %{{.+}} dim = 2 : tensor<2x8x64xf32>
  %3 = rp.softmax %x dim = 2 : tensor<2x8x64xf32>
  // CHECK: rp.log_softmax %{{.+}} dim = 2 : tensor<2x8x64xf32>
  %4 = rp.log_softmax %x dim = 2 : tensor<2x8x64xf32>
  // CHECK: rp.layer_norm %{{.+}} scale(%{{.+}}) bias(%{{.+}}) axis = 2 epsilon = 1.000000e-05 : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %5 = rp.layer_norm %x scale(%g) bias(%g) axis = 2 epsilon = 1.0e-05 : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: rp.layer_norm %{{.+}} axis = 2 epsilon = 1.000000e-05 : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %6 = rp.layer_norm %x axis = 2 epsilon = 1.0e-05 : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: rp.rms_norm %{{.+}} scale(%{{.+}}) axis = 2 epsilon = 9.9999999999999995E-7 : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %7 = rp.rms_norm %x scale(%g) axis = 2 epsilon = 1.0e-06 : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x3x8x32xf32>, tensor<2x8x1xf32>, tensor<2xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x16x32xbf16>, %k: tensor<2x2x16x32xbf16>, %v: tensor<2x2x16x32xbf16>, %m: tensor<1x1x16x16xi1>) -> (tensor<2x8x16x32xbf16>, tensor<2x8x16x32xbf16>) {
  // CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} causal : (tensor<2x8x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<2x2x16x32xbf16>) -> tensor<2x8x16x32xbf16>
  %0 = rp.attention %q, %k, %v causal : (tensor<2x8x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<2x2x16x32xbf16>) -> tensor<2x8x16x32xbf16>
  // CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} mask(%{{.+}}) scale = 1.250000e-01 : (tensor<2x8x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<1x1x16x16xi1>) -> tensor<2x8x16x32xbf16>
  %1 = rp.attention %q, %k, %v mask(%m) scale = 0.125 : (tensor<2x8x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<2x2x16x32xbf16>, tensor<1x1x16x16xi1>) -> tensor<2x8x16x32xbf16>
  return %0, %1 : tensor<2x8x16x32xbf16>, tensor<2x8x16x32xbf16>
}

// A sliding window, Gemma 2's soft-cap, and causal with more keys than
// queries (aligned bottom-right).
// CHECK-LABEL: func.func @attention_window_softcap
func.func @attention_window_softcap(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x24x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) {
  // CHECK: rp.attention %{{.+}}, %{{.+}}, %{{.+}} causal window = 4 softcap = 5.000000e+01 : (tensor<1x4x8x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>) -> tensor<1x4x8x16xf32>
  %0 = rp.attention %q, %k, %k causal window = 4 softcap = 50.0 : (tensor<1x4x8x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>) -> tensor<1x4x8x16xf32>
  // CHECK: rp.attention_grad %{{.+}}, %{{.+}}, %{{.+}} grad(%{{.+}}) causal scale = 2.500000e-01 window = 4 softcap = 3.000000e+01
  %dq, %dk, %dv = rp.attention_grad %q, %k, %k grad(%0) causal scale = 0.25 window = 4 softcap = 30.0 : (tensor<1x4x8x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x24x16xf32>, tensor<1x2x24x16xf32>)
  return %0, %dq : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
}

// CHECK-LABEL: func.func @train_ops
func.func @train_ops(%logits: tensor<2x4x8xf32>, %labels: tensor<2x4xi64>, %s: tensor<f32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %ids: tensor<2x4xi64>, %w8: tensor<8x8xf32>) {
  // CHECK: rp.cross_entropy %{{.+}}, %{{.+}} ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  %sum, %n = rp.cross_entropy %logits, %labels ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  // CHECK: rp.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x8xf32>
  %dl = rp.cross_entropy_grad %logits, %labels, %s ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x8xf32>
  // CHECK: rp.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  %lsum, %ln = rp.linear_cross_entropy %x, %w8, %labels ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  // CHECK: rp.linear_cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} ignore_index = -100 chunk = 256 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi64>, tensor<f32>) -> (tensor<2x4x8xf32>, tensor<8x8xf32>)
  %ldh, %ldw = rp.linear_cross_entropy_grad %x, %w8, %labels, %s ignore_index = -100 chunk = 256 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<2x4xi64>, tensor<f32>) -> (tensor<2x4x8xf32>, tensor<8x8xf32>)
  // CHECK: rp.unary_grad gelu_tanh %{{.+}}, %{{.+}} : tensor<2x4x8xf32>
  %du = rp.unary_grad gelu_tanh %x, %dl : tensor<2x4x8xf32>
  // CHECK: rp.softmax_grad %{{.+}}, %{{.+}} dim = 2 log : tensor<2x4x8xf32>
  %ds = rp.softmax_grad %x, %dl dim = 2 log : tensor<2x4x8xf32>
  // CHECK: rp.norm_grad %{{.+}} scale(%{{.+}}) grad(%{{.+}}) axis = 2 epsilon = 1.000000e-05 with_bias : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx, %dg, %db = rp.norm_grad %x scale(%g) grad(%dl) axis = 2 epsilon = 1.0e-05 with_bias : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: rp.norm_grad %{{.+}} grad(%{{.+}}) axis = 2 epsilon = 1.000000e-05 rms : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dr = rp.norm_grad %x grad(%dl) axis = 2 epsilon = 1.0e-05 rms : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: rp.attention_grad %{{.+}}, %{{.+}}, %{{.+}} grad(%{{.+}}) causal : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  %dq, %dk, %dv = rp.attention_grad %q, %k, %k grad(%q) causal : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  // CHECK: rp.gather_grad %{{.+}}, %{{.+}} axis = 0 : (tensor<2x4xi64>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  %dt = rp.gather_grad %ids, %x axis = 0 : (tensor<2x4xi64>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  // CHECK: rp.slice_grad %{{.+}} offsets = [0, 0, 4] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  %dsl = rp.slice_grad %x offsets = [0, 0, 4] strides = [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  // CHECK: rp.extremum_grad max %{{.+}}, %{{.+}} dims = [2] keep_dims : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %m = rp.reduce max %x dims = [2] keep_dims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %de = rp.extremum_grad max %x, %m dims = [2] keep_dims : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  return
}

// The plan level: a schedule of commands ordered by tokens, and the
// partition attribute.
// CHECK-LABEL: func.func @partitioned
// CHECK-SAME: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", forward = [], backward = [2]>
func.func @partitioned() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", forward = [], backward = [2]>} {
  return
}
// CHECK: rp.schedule @partitioned attributes {peak_bytes = array<i64: 10, 20>} {
// CHECK-NEXT: %[[W:.+]] = rp.copy h2d weights job 0 device 1 bytes 4096 {chunk = 1 : i64, ms = 1.000000e-01 : f64}
// CHECK-NEXT: %[[I:.+]] = rp.copy h2d activation job 0 mb 2 device 1 bytes 64 boundary 0 {ms = 0.000000e+00 : f64}
// CHECK-NEXT: %[[C:.+]] = rp.compute tail job 0 layers 0 to 2 mb 2 device 1 weights 0 after(%[[W]], %[[I]]) {ms = 1.500000e+00 : f64, offsets = array<i64: 0, 1, 2, 3>, work_bytes = 8 : i64}
// CHECK-NEXT: %[[G:.+]] = rp.copy d2h weight_grads job 0 device 1 bytes 4096 after(%[[C]])
// CHECK-NEXT: rp.optimizer_step after(%[[G]]) {ms = 0.000000e+00 : f64}
rp.schedule @partitioned attributes {peak_bytes = array<i64: 10, 20>} {
  %w = rp.copy h2d weights job 0 device 1 bytes 4096 {chunk = 1 : i64, ms = 0.1 : f64}
  %i = rp.copy h2d activation job 0 mb 2 device 1 bytes 64 boundary 0 {ms = 0.0 : f64}
  %c = rp.compute tail job 0 layers 0 to 2 mb 2 device 1 weights 0 after(%w, %i) {ms = 1.5 : f64, offsets = array<i64: 0, 1, 2, 3>, work_bytes = 8 : i64}
  %g = rp.copy d2h weight_grads job 0 device 1 bytes 4096 after(%c) {ms = 0.0 : f64}
  %o = rp.optimizer_step after(%g) {ms = 0.0 : f64}
}
