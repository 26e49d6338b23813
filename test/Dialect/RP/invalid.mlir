// RUN: rp-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// One chunk per verifier branch of the rp ops of a forward graph
// (invalid-training.mlir has the gradient and schedule ops).

func.func @broadcast_operands(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 of shape [4] does not broadcast with the shape [2, 3] of the operands before it}}
  %0 = rp.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{expected result shape [2, 3] (the broadcast of the operand shapes) but got [3, 3]}}
  %0 = rp.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<3xf32>, %b: tensor<3xf16>) {
  // expected-error @+1 {{all of {lhs, rhs, result} have same element type}}
  %0 = rp.sub %a, %b : (tensor<3xf32>, tensor<3xf16>) -> tensor<3xf32>
  return
}

// -----

func.func @pow_needs_floats(%a: tensor<3xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = rp.pow %a, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return
}

// -----

func.func @dynamic_shapes(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = rp.exp %a : tensor<?x3xf32>
  return
}

// -----

func.func @where_broadcast(%c: tensor<4xi1>, %a: tensor<3xf32>) {
  // expected-error @+1 {{operand #1 of shape [3] does not broadcast with the shape [4]}}
  %0 = rp.where %c, %a, %a : (tensor<4xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @param_empty_name() {
  // expected-error @+1 {{expected a non-empty parameter name}}
  %0 = rp.param "" : tensor<4xf32>
  return
}

// -----

func.func @param_file_without_offset() {
  // expected-error @+1 {{expected 'file' and 'offset' together, but got only 'file'}}
  %0 = "rp.param"() {name = "w", file = "weights.bin"} : () -> tensor<4xf32>
  return
}

// -----

func.func @param_offset_without_file() {
  // expected-error @+1 {{expected 'file' and 'offset' together, but got only 'offset'}}
  %0 = "rp.param"() {name = "w", offset = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @param_empty_file() {
  // expected-error @+1 {{expected a non-empty file name}}
  %0 = rp.param "w" at ""[0] : tensor<4xf32>
  return
}

// -----

func.func @param_negative_offset() {
  // expected-error @+1 {{expected a non-negative byte offset but got -8}}
  %0 = rp.param "w" at "weights.bin"[-8] : tensor<4xf32>
  return
}

// -----

func.func @param_trainable_integers() {
  // expected-error @+1 {{a trainable parameter needs a float element type, but 'ids' has 'i64'}}
  %0 = rp.param "ids" trainable at "weights.bin"[0] : tensor<4xi64>
  return
}

// -----

func.func @constant_type(%a: tensor<2xf32>) {
  // expected-error @+1 {{all of {value, result} have same type}}
  %0 = "rp.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @layer_empty_name(%x: tensor<2xf32>) {
  // expected-error @+1 {{expected a non-empty layer name}}
  %0 = rp.layer "" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_nested(%x: tensor<2xf32>) {
  // expected-note @+1 {{enclosing layer is here}}
  %0 = rp.layer "outer" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    // expected-error @+1 {{layers do not nest, but 'inner' is inside layer 'outer'}}
    %1 = rp.layer "inner" (%a) : (tensor<2xf32>) -> tensor<2xf32> {
    ^bb0(%b: tensor<2xf32>):
      rp.yield %b : tensor<2xf32>
    }
    rp.yield %1 : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_block_arguments(%x: tensor<2xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{expected 2 entry block arguments (one per input) but got 1}}
  %0 = rp.layer "h.0" (%x, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_block_argument_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{entry block argument #0 has type 'tensor<3xf32>' but the input it binds has type 'tensor<2xf32>'}}
  %0 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<3xf32>):
    rp.yield %x : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_terminator(%x: tensor<2xf32>) {
  // expected-error @+1 {{expected the body to end with 'rp.yield'}}
  %0 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    "test.terminator"() : () -> ()
  }
  return
}

// -----

func.func @layer_yield_count(%x: tensor<2xf32>) {
  // expected-error @+1 {{expected the body to yield 2 values (one per result) but it yields 1}}
  %0:2 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_yield_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{yielded value #0 has type 'tensor<2xf32>' but the layer result has type 'tensor<2xf16>'}}
  %0 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> tensor<2xf16> {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_isolated(%x: tensor<2xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = rp.layer "h.0" () : () -> tensor<2xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    rp.yield %x : tensor<2xf32>
  }
  return
}

// -----

func.func @yield_outside_layer(%x: tensor<2xf32>) {
  // expected-error @+1 {{expects parent op 'rp.layer'}}
  rp.yield %x : tensor<2xf32>
}

// -----

func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected the same element count, but [2, 3] has 6 and [7] has 7}}
  %0 = rp.reshape %x : tensor<2x3xf32> to tensor<7xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected a permutation of 2 dimensions but got 3 entries}}
  %0 = rp.transpose %x permutation = [0, 1, 2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @transpose_not_permutation(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation [1, 1] is not a permutation of [0, 2)}}
  %0 = rp.transpose %x permutation = [1, 1] : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected result shape [3, 2] but got [2, 3]}}
  %0 = rp.transpose %x permutation = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_rank(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected a result of rank 2 but got rank 1}}
  %0 = rp.slice %x offsets = [0, 0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @slice_attribute_sizes(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected 2 offsets and strides but got 1 and 2}}
  %0 = rp.slice %x offsets = [0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected positive strides but dimension 1 has stride 0}}
  %0 = rp.slice %x offsets = [0, 0] strides = [1, 0] : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{dimension 1: 4 elements from offset 2 with stride 2 do not fit in size 8}}
  %0 = rp.slice %x offsets = [0, 2] strides = [1, 2] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{expected at least one input}}
  %0 = "rp.concat"() {dim = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = rp.concat %x dim = 2 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @concat_element_type(%x: tensor<2x3xf32>, %y: tensor<2x3xf16>) {
  // expected-error @+1 {{input #1 has element type 'f16' but the result has 'f32'}}
  %0 = rp.concat %x, %y dim = 1 : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x3xf32>, %y: tensor<6xf32>) {
  // expected-error @+1 {{input #1 has rank 1 but the result has 2}}
  %0 = rp.concat %x, %y dim = 1 : (tensor<2x3xf32>, tensor<6xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_other_dims(%x: tensor<2x3xf32>, %y: tensor<4x3xf32>) {
  // expected-error @+1 {{input #1 has shape [4, 3], which differs from the result shape [2, 6] in dimension 0}}
  %0 = rp.concat %x, %y dim = 1 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_sum(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected result dimension 1 to be 6 (the sum of the inputs) but got 5}}
  %0 = rp.concat %x, %x dim = 1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @broadcast_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{cannot broadcast shape [3, 4] to [2, 4]}}
  %0 = rp.broadcast %x : tensor<3x4xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = rp.cast %x : tensor<3x4xf32> to tensor<4x3xf16>
  return
}

// -----

func.func @gather_axis(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = rp.gather %t[%i] axis = 2 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_result(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{expected result shape [3, 4] but got [4, 3]}}
  %0 = rp.gather %t[%i] axis = 0 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = rp.gather %t[%i] axis = 0 : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{expected operands of rank >= 2 but got ranks 1 and 2; reshape vectors to matrices first}}
  %0 = rp.matmul %a, %b : (tensor<4xf32>, tensor<4x2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<5x4xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs has 4 and rhs has 5 (shapes [3, 4] and [5, 4])}}
  %0 = rp.matmul %a, %b : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+1 {{batch dimensions [2] and [3] do not broadcast}}
  %0 = rp.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<3x4xf32>, %b: tensor<5x4xf32>) {
  // expected-error @+1 {{expected result shape [3, 5] but got [3, 4]}}
  %0 = rp.matmul %a, %b transpose_b : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @reduce_no_dims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected at least one dimension to reduce}}
  %0 = rp.reduce sum %x dims = [] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_dim_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = rp.reduce sum %x dims = [2] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_dim_order(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected strictly increasing dimensions but got [1, 0]}}
  %0 = rp.reduce sum %x dims = [1, 0] : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_mean_integers(%x: tensor<2x3xi64>) {
  // expected-error @+1 {{'mean' needs a float element type but got 'i64'}}
  %0 = rp.reduce mean %x dims = [1] : tensor<2x3xi64> -> tensor<2xi64>
  return
}

// -----

func.func @reduce_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected result shape [2, 1] but got [2]}}
  %0 = rp.reduce max %x dims = [1] keep_dims : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @softmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = rp.softmax %x dim = 2 : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dimension 5 is out of range for rank 2}}
  %0 = rp.log_softmax %x dim = 5 : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_axis(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = rp.layer_norm %x axis = 2 epsilon = 1.0e-05 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{expected a non-negative epsilon but got -1.000000e-05}}
  %0 = rp.layer_norm %x axis = 1 epsilon = -1.0e-05 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x3xf32>, %g: tensor<2x3xf32>) {
  // expected-error @+1 {{scale has shape [2, 3] but the normalized shape is [3]}}
  %0 = rp.layer_norm %x scale(%g) axis = 1 epsilon = 1.0e-05 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale_type(%x: tensor<2x3xf32>, %g: tensor<3xbf16>) {
  // expected-error @+1 {{scale has element type 'bf16' but the input has 'f32'}}
  %0 = rp.layer_norm %x scale(%g) axis = 1 epsilon = 1.0e-05 : (tensor<2x3xf32>, tensor<3xbf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x3xf32>, %g: tensor<3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias has shape [4] but the normalized shape is [3]}}
  %0 = rp.layer_norm %x scale(%g) bias(%b) axis = 1 epsilon = 1.0e-05 : (tensor<2x3xf32>, tensor<3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_scale_shape(%x: tensor<2x3xf32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{scale has shape [2] but the normalized shape is [3]}}
  %0 = rp.rms_norm %x scale(%g) axis = 1 epsilon = 1.0e-06 : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x16x32xf32>) {
  // expected-error @+1 {{expected query of rank 4 ([batch, heads, seq, dim]) but got rank 3}}
  %0 = rp.attention %q, %q, %q : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x16x32xf32>, %k: tensor<1x4x16x32xf32>) {
  // expected-error @+1 {{query, key and value must share the batch size, but got 2, 1 and 1}}
  %0 = rp.attention %q, %k, %k : (tensor<2x4x16x32xf32>, tensor<1x4x16x32xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x16xf32>) {
  // expected-error @+1 {{key head dim 16 differs from query head dim 32}}
  %0 = rp.attention %q, %k, %k : (tensor<2x4x16x32xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  return
}

// -----

func.func @attention_value(%q: tensor<2x4x16x32xf32>, %v: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{value shape [2, 4, 8, 32] must match key shape in heads and sequence, key is [2, 4, 16, 32]}}
  %0 = rp.attention %q, %q, %v : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x4x16x32xf32>, %k: tensor<2x3x16x32xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0 = rp.attention %q, %k, %k : (tensor<2x4x16x32xf32>, tensor<2x3x16x32xf32>, tensor<2x3x16x32xf32>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{expected result shape [2, 4, 16, 32] but got [2, 16, 4, 32]}}
  %0 = rp.attention %q, %q, %q : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>) -> tensor<2x16x4x32xf32>
  return
}

// -----

func.func @attention_causal(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{causal attention needs no more queries than keys, but got 16 queries and 8 keys}}
  %0 = rp.attention %q, %k, %k causal : (tensor<2x4x16x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_window_needs_causal(%q: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{a sliding window needs `causal`}}
  %0 = rp.attention %q, %q, %q window = 4 : (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x32xf32>
  return
}

// -----

func.func @attention_window_positive(%q: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{attribute 'window' failed to satisfy constraint}}
  %0 = rp.attention %q, %q, %q causal window = 0 : (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x32xf32>
  return
}

// -----

func.func @attention_softcap_positive(%q: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{expected a positive softcap but got -5.0}}
  %0 = rp.attention %q, %q, %q causal softcap = -5.0 : (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> tensor<2x4x8x32xf32>
  return
}

// -----

func.func @attention_grad_window_needs_causal(%q: tensor<2x4x8x32xf32>) {
  // expected-error @+1 {{a sliding window needs `causal`}}
  %0:3 = rp.attention_grad %q, %q, %q grad(%q) window = 4 : (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>)
  return
}

// -----

func.func @attention_scale(%q: tensor<2x4x16x32xf32>) {
  // expected-error @+1 {{expected a positive scale but got 0.000000e+00}}
  %0 = rp.attention %q, %q, %q scale = 0.0 : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x4x16x32xf32>, %m: tensor<16x8xi1>) {
  // expected-error @+1 {{mask of shape [16, 8] does not broadcast to the scores shape [2, 4, 16, 16]}}
  %0 = rp.attention %q, %q, %q mask(%m) : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<16x8xi1>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_mask_type(%q: tensor<2x4x16x32xf32>, %m: tensor<16x16xf16>) {
  // expected-error @+1 {{mask element type must be i1, i64 (segments) or the query's 'f32' but got 'f16'}}
  %0 = rp.attention %q, %q, %q mask(%m) : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<16x16xf16>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @attention_segments_shape(%q: tensor<2x4x16x32xf32>, %m: tensor<2x1x16xi64>) {
  // expected-error @+1 {{segments (an i64 mask) of shape [2, 1, 16] must be [batch, keys] [2, 16]}}
  %0 = rp.attention %q, %q, %q mask(%m) causal : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>, tensor<2x1x16xi64>) -> tensor<2x4x16x32xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x4x8xf32>, %y: tensor<2x8xi64>) {
  // expected-error @+1 {{expected labels of shape [2, 4] (the logits without the class dimension) but got [2, 8]}}
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<2x4x8xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @cross_entropy_sum(%l: tensor<2x8xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{expected loss_sum to be a 'f32' scalar but got 'tensor<2xf32>'}}
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<2xf32>, tensor<i64>)
  return
}

// -----

func.func @cross_entropy_count(%l: tensor<2x8xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{expected count to be an i64 scalar but got 'tensor<i32>'}}
  %s, %n = rp.cross_entropy %l, %y ignore_index = -100 : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<i32>)
  return
}
