// RUN: rp-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// One chunk per verifier branch of the rp ops that training adds: the
// gradient ops, #rp.partition and the schedule ops (invalid.mlir has the
// forward ones).

func.func @cross_entropy_grad_scale(%l: tensor<2x8xf32>, %y: tensor<2xi64>, %s: tensor<f64>) {
  // expected-error @+1 {{expected scale to be a 'f32' scalar but got 'tensor<f64>'}}
  %d = rp.cross_entropy_grad %l, %y, %s ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>, tensor<f64>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_grad_dim(%y: tensor<2x8xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %d = rp.softmax_grad %y, %y dim = 2 : tensor<2x8xf32>
  return
}

// -----

func.func @norm_grad_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %d = rp.norm_grad %x grad(%x) axis = 2 epsilon = 1.0e-5 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @norm_grad_types(%x: tensor<2x8xf32>, %dy: tensor<2x8xbf16>) {
  // expected-error @+1 {{expected the gradient and the input gradient to have the input's type 'tensor<2x8xf32>'}}
  %d = rp.norm_grad %x grad(%dy) axis = 1 epsilon = 1.0e-5 : (tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @norm_grad_rms_bias(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{an RMS norm has no bias}}
  %d, %b = rp.norm_grad %x grad(%x) axis = 1 epsilon = 1.0e-5 with_bias rms : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_scale_shape(%x: tensor<2x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{scale has shape [4] but the normalized shape is [8]}}
  %d, %dg = rp.norm_grad %x scale(%g) grad(%x) axis = 1 epsilon = 1.0e-5 : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @norm_grad_count(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{expected 2 affine gradients (scale, then bias) but got 1}}
  %d, %dg = rp.norm_grad %x scale(%g) grad(%x) axis = 1 epsilon = 1.0e-5 with_bias : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @norm_grad_affine_shape(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{affine gradients must have the normalized shape [8] and type 'f32', but one is 'tensor<4xf32>'}}
  %d, %dg = rp.norm_grad %x scale(%g) grad(%x) axis = 1 epsilon = 1.0e-5 : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @attention_grad_types(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{expected the gradients to have the types of query, key and value}}
  %a, %b, %c = rp.attention_grad %q, %q, %q grad(%q) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x8x8xf32>)
  return
}

// -----

func.func @attention_grad_shapes(%q: tensor<1x2x4x8xf32>, %k: tensor<1x3x4x8xf32>) {
  // expected-error @+1 {{query heads (2) must be a multiple of key/value heads (3)}}
  %a, %b, %c = rp.attention_grad %q, %k, %k grad(%q) : (tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32>)
  return
}

// -----

func.func @gather_grad_axis(%i: tensor<3xi64>, %g: tensor<3x4xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %d = rp.gather_grad %i, %g axis = 2 : (tensor<3xi64>, tensor<3x4xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @gather_grad_shape(%i: tensor<3xi64>, %g: tensor<4x4xf32>) {
  // expected-error @+1 {{expected a gradient of shape [3, 4] but got [4, 4]}}
  %d = rp.gather_grad %i, %g axis = 0 : (tensor<3xi64>, tensor<4x4xf32>) -> tensor<10x4xf32>
  return
}

// -----

func.func @gather_grad_type(%i: tensor<3xi64>, %g: tensor<3x4xbf16>) {
  // expected-error @+1 {{expected the gradient's element type 'f32'}}
  %d = rp.gather_grad %i, %g axis = 0 : (tensor<3xi64>, tensor<3x4xbf16>) -> tensor<10x4xf32>
  return
}

// -----

func.func @slice_grad_window(%g: tensor<2x4xf32>) {
  // expected-error @+1 {{dimension 1: 4 elements from offset 6 with stride 1 do not fit in size 8}}
  %d = rp.slice_grad %g offsets = [0, 6] strides = [1, 1] : tensor<2x4xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @extremum_grad_kind(%x: tensor<2x8xf32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{takes max or min, not sum}}
  %d = rp.extremum_grad sum %x, %g dims = [1] : (tensor<2x8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @extremum_grad_dims(%x: tensor<2x8xf32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{dimension 3 is out of range}}
  %d = rp.extremum_grad max %x, %g dims = [3] : (tensor<2x8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @extremum_grad_shape(%x: tensor<2x8xf32>, %g: tensor<2x1xf32>) {
  // expected-error @+1 {{expected a gradient of shape [2] but got [2, 1]}}
  %d = rp.extremum_grad max %x, %g dims = [1] : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @param_init_with_file() {
  // expected-error @+1 {{a stored parameter takes its value from its file; 'init' is for parameters without one}}
  %0 = rp.param "w" at "weights.bin"[0] init = 0.5 : tensor<4xf32>
  return
}

// -----

func.func @param_negative_init() {
  // expected-error @+1 {{expected a non-negative init bound but got -5.000000e-01}}
  %0 = rp.param "w" trainable init = -0.5 : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{the forward stages and the tail cover 2 + 1 layers but the backward stages cover 4}}
func.func @bad_partition() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "host", forward = [2], backward = [1, 3]>}

// -----

// expected-error @+1 {{unknown schedule 'zero-bubble'}}
func.func @bad_partition_schedule() attributes {rp.partition = #rp.partition<schedule = "zero-bubble", devices = 2, microbatches = 3, hw = "host", forward = [], backward = [1]>}

// -----

// expected-error @+1 {{stage sizes must be positive}}
func.func @bad_partition_size() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 1, microbatches = 1, hw = "host", forward = [0], backward = [1, 0]>}

// -----

// expected-error @+1 {{'rp.schedule' op schedules @main, which is not in the module}}
rp.schedule @main {
}

// -----

func.func private @main()

// expected-error @+1 {{'rp.schedule' op schedules @main, which has no rp.partition; run rp-partition first}}
rp.schedule @main {
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "gpipe", devices = 2, microbatches = 1, hw = "host", forward = [], backward = [1]>}

// expected-error @+1 {{'rp.schedule' op has 1 peak_bytes for 2 devices}}
rp.schedule @main attributes {peak_bytes = array<i64: 1>} {
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{runs on device 2 but the schedule has 2}}
  %c = rp.compute forward job 0 layers 0 to 1 mb 0 device 2 weights 0 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 2, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{runs microbatch 2 of a step of 2}}
  %c = rp.compute forward job 0 layers 0 to 1 mb 2 device 0 weights 0 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{has an empty layer range [1, 1)}}
  %c = rp.compute forward job 0 layers 1 to 1 mb 0 device 0 weights 0 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{needs 4 offsets (weights, input, output, work)}}
  %c = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 {ms = 1.0 : f64, offsets = array<i64: 0>}
}

// -----

// A fifth offset (a token-sliced job's key and value gradient accumulator)
// is a tail's or a backward's: a forward sums no gradients.
func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{needs 4 offsets (weights, input, output, work), or 5 for a tail or backward with a key and value gradient accumulator}}
  %c = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 {ms = 1.0 : f64, offsets = array<i64: 0, 0, 0, 0, 0>}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{has a negative time}}
  %c = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 {ms = -1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{copies weights the wrong way}}
  %c = rp.copy d2h weights job 0 device 0 bytes 4 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{of an activation or gradient needs mb and boundary}}
  %c = rp.copy h2d activation job 0 device 0 bytes 4 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{of weights or weight gradients takes no mb or boundary}}
  %c = rp.copy d2h weight_grads job 0 mb 0 device 0 bytes 4 {ms = 1.0 : f64}
}

// -----

func.func private @main() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [], backward = [1]>}

rp.schedule @main {
  // expected-error @+1 {{moves a negative number of bytes}}
  %c = rp.copy h2d weights job 0 device 0 bytes -4 {ms = 1.0 : f64}
}

// -----

func.func @linear_cross_entropy_weight(%h: tensor<2x4x8xf32>, %w: tensor<16x4xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{expected a weight [classes, 8] for hidden [2, 4, 8] but got [16, 4]}}
  %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<16x4xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @linear_cross_entropy_labels(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x8xi64>) {
  // expected-error @+1 {{expected labels of shape [2, 4] (hidden without its last dimension) but got [2, 8]}}
  %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @linear_cross_entropy_chunk(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{chunk must be a positive number of rows, got 0}}
  %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100 chunk = 0 : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @linear_cross_entropy_sum(%h: tensor<2x4x8xf16>, %w: tensor<16x8xf16>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{expected loss_sum to be a 'f32' scalar but got 'tensor<f16>'}}
  %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100 chunk = 128 : (tensor<2x4x8xf16>, tensor<16x8xf16>, tensor<2x4xi64>) -> (tensor<f16>, tensor<i64>)
  return
}

// -----

func.func @linear_cross_entropy_count(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>) {
  // expected-error @+1 {{expected count to be an i64 scalar but got 'tensor<i32>'}}
  %s, %n = rp.linear_cross_entropy %h, %w, %y ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<i32>)
  return
}

// -----

func.func @linear_cross_entropy_grad_scale(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %y: tensor<2x4xi64>, %s: tensor<f64>) {
  // expected-error @+1 {{expected scale to be a 'f32' scalar but got 'tensor<f64>'}}
  %dh, %dw = rp.linear_cross_entropy_grad %h, %w, %y, %s ignore_index = -100 chunk = 128 : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi64>, tensor<f64>) -> (tensor<2x4x8xf32>, tensor<16x8xf32>)
  return
}
