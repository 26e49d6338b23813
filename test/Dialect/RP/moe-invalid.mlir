// RUN: rp-opt %s -split-input-file -verify-diagnostics

// One chunk per verifier branch of the rp.moe ops.

func.func @route_rank(%l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{expected logits of rank 2 ([tokens, experts]) but got [2, 4, 8]}}
  %w, %e = rp.moe.route %l top_k = 2 softmax = before
      : tensor<2x4x8xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return
}

// -----

func.func @route_too_many(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{top_k = 9 is more than the 8 experts}}
  %w, %e = rp.moe.route %l top_k = 9 softmax = before
      : tensor<4x8xf32> -> (tensor<4x9xf32>, tensor<4x9xi64>)
  return
}

// -----

func.func @route_zero_k(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{attribute 'top_k' failed to satisfy constraint}}
  %w, %e = rp.moe.route %l top_k = 0 softmax = before
      : tensor<4x8xf32> -> (tensor<4x0xf32>, tensor<4x0xi64>)
  return
}

// -----

func.func @route_weights_shape(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{expected weights of shape [4, 2] but got [4, 3]}}
  %w, %e = rp.moe.route %l top_k = 2 softmax = before
      : tensor<4x8xf32> -> (tensor<4x3xf32>, tensor<4x2xi64>)
  return
}

// -----

func.func @route_weights_type(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{expected weights of element type 'f32' but got 'f16'}}
  %w, %e = rp.moe.route %l top_k = 2 softmax = before
      : tensor<4x8xf32> -> (tensor<4x2xf16>, tensor<4x2xi64>)
  return
}

// -----

func.func @route_experts_type(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{expected experts of element type i64 but got 'i32'}}
  %w, %e = rp.moe.route %l top_k = 2 softmax = before
      : tensor<4x8xf32> -> (tensor<4x2xf32>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_normalize_after(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{normalize applies only with softmax = before}}
  %w, %e = rp.moe.route %l top_k = 2 softmax = after normalize
      : tensor<4x8xf32> -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return
}

// -----

func.func @route_grad_experts(%l: tensor<4x8xf32>, %e: tensor<4x9xi64>,
                              %g: tensor<4x9xf32>) {
  // expected-error @+1 {{expected experts of shape [4, k] with k <= 8 but got [4, 9]}}
  %d = rp.moe.route_grad %l, %e grad(%g) softmax = after
      : (tensor<4x8xf32>, tensor<4x9xi64>, tensor<4x9xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @route_grad_grad(%l: tensor<4x8xf32>, %e: tensor<4x2xi64>,
                           %g: tensor<4x3xf32>) {
  // expected-error @+1 {{expected grad of shape [4, 2] but got [4, 3]}}
  %d = rp.moe.route_grad %l, %e grad(%g) softmax = after
      : (tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @dispatch_tokens(%x: tensor<4x16xf32>, %e: tensor<5x2xi64>) {
  // expected-error @+1 {{expected experts for 4 tokens but got [5, 2]}}
  %r, %p, %c = rp.moe.dispatch %x, %e : (tensor<4x16xf32>, tensor<5x2xi64>)
      -> (tensor<8x16xf32>, tensor<4x2xi32>, tensor<8xi32>)
  return
}

// -----

func.func @dispatch_rows(%x: tensor<4x16xf32>, %e: tensor<4x2xi64>) {
  // expected-error @+1 {{expected rows of shape [8, 16] but got [4, 16]}}
  %r, %p, %c = rp.moe.dispatch %x, %e : (tensor<4x16xf32>, tensor<4x2xi64>)
      -> (tensor<4x16xf32>, tensor<4x2xi32>, tensor<8xi32>)
  return
}

// -----

func.func @dispatch_positions_type(%x: tensor<4x16xf32>, %e: tensor<4x2xi64>) {
  // expected-error @+1 {{expected positions of element type i32 but got 'i64'}}
  %r, %p, %c = rp.moe.dispatch %x, %e : (tensor<4x16xf32>, tensor<4x2xi64>)
      -> (tensor<8x16xf32>, tensor<4x2xi64>, tensor<8xi32>)
  return
}

// -----

func.func @dispatch_counts_rank(%x: tensor<4x16xf32>, %e: tensor<4x2xi64>) {
  // expected-error @+1 {{expected counts of rank 1 ([experts]) but got [2, 4]}}
  %r, %p, %c = rp.moe.dispatch %x, %e : (tensor<4x16xf32>, tensor<4x2xi64>)
      -> (tensor<8x16xf32>, tensor<4x2xi32>, tensor<2x4xi32>)
  return
}

// -----

func.func @dispatch_no_experts(%x: tensor<4x16xf32>, %e: tensor<4x2xi64>) {
  // expected-error @+1 {{expected at least one expert}}
  %r, %p, %c = rp.moe.dispatch %x, %e : (tensor<4x16xf32>, tensor<4x2xi64>)
      -> (tensor<8x16xf32>, tensor<4x2xi32>, tensor<0xi32>)
  return
}

// -----

func.func @grouped_weight_rank(%x: tensor<8x16xf32>, %w: tensor<32x16xf32>,
                               %c: tensor<4xi32>) {
  // expected-error @+1 {{expected weight of rank 3 ([experts, out, in]) but got [32, 16]}}
  %y = rp.moe.grouped_matmul %x, %w, %c transpose_b
      : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<4xi32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_counts(%x: tensor<8x16xf32>, %w: tensor<4x32x16xf32>,
                          %c: tensor<3xi32>) {
  // expected-error @+1 {{expected counts for the 4 experts of the weight but got [3]}}
  %y = rp.moe.grouped_matmul %x, %w, %c transpose_b
      : (tensor<8x16xf32>, tensor<4x32x16xf32>, tensor<3xi32>) -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_features(%x: tensor<8x16xf32>, %w: tensor<4x32x16xf32>,
                            %c: tensor<4xi32>) {
  // expected-error @+1 {{input rows have 16 features but the weight takes 32}}
  %y = rp.moe.grouped_matmul %x, %w, %c
      : (tensor<8x16xf32>, tensor<4x32x16xf32>, tensor<4xi32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_result(%x: tensor<8x16xf32>, %w: tensor<4x32x16xf32>,
                          %c: tensor<4xi32>) {
  // expected-error @+1 {{expected result of shape [8, 32] but got [8, 16]}}
  %y = rp.moe.grouped_matmul %x, %w, %c transpose_b
      : (tensor<8x16xf32>, tensor<4x32x16xf32>, tensor<4xi32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_counts_type(%x: tensor<8x16xf32>, %w: tensor<4x32x16xf32>,
                               %c: tensor<4xi64>) {
  // expected-error @+1 {{expected counts of element type i32 but got 'i64'}}
  %y = rp.moe.grouped_matmul %x, %w, %c transpose_b
      : (tensor<8x16xf32>, tensor<4x32x16xf32>, tensor<4xi64>) -> tensor<8x32xf32>
  return
}

// -----

func.func @wgrad_grad(%x: tensor<8x16xf32>, %g: tensor<8x30xf32>,
                      %c: tensor<4xi32>) {
  // expected-error @+1 {{expected grad of shape [8, 32] but got [8, 30]}}
  %dw = rp.moe.grouped_matmul_wgrad %x, %g, %c transpose_b
      : (tensor<8x16xf32>, tensor<8x30xf32>, tensor<4xi32>) -> tensor<4x32x16xf32>
  return
}

// -----

func.func @combine_rows(%r: tensor<6x16xf32>, %p: tensor<4x2xi32>) {
  // expected-error @+1 {{positions name 8 rows but there are only 6}}
  %y = rp.moe.combine %r, %p : (tensor<6x16xf32>, tensor<4x2xi32>)
      -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_weights(%r: tensor<8x16xf32>, %p: tensor<4x2xi32>,
                           %w: tensor<4x3xf32>) {
  // expected-error @+1 {{expected weights of shape [4, 2] but got [4, 3]}}
  %y = rp.moe.combine %r, %p weights(%w)
      : (tensor<8x16xf32>, tensor<4x2xi32>, tensor<4x3xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @combine_result(%r: tensor<8x16xf32>, %p: tensor<4x2xi32>) {
  // expected-error @+1 {{expected result of shape [4, 16] but got [8, 16]}}
  %y = rp.moe.combine %r, %p : (tensor<8x16xf32>, tensor<4x2xi32>)
      -> tensor<8x16xf32>
  return
}

// -----

func.func @combine_grad_count(%r: tensor<8x16xf32>, %p: tensor<4x2xi32>,
                              %g: tensor<4x16xf32>) {
  // expected-error @+1 {{expected 0 weights gradients (one with weights) but got 1}}
  %dr, %dw = rp.moe.combine_grad %r, %p grad(%g)
      : (tensor<8x16xf32>, tensor<4x2xi32>, tensor<4x16xf32>)
      -> (tensor<8x16xf32>, tensor<4x2xf32>)
  return
}

// -----

func.func @combine_grad_rows(%r: tensor<8x16xf32>, %p: tensor<4x2xi32>,
                             %g: tensor<4x16xf32>) {
  // expected-error @+1 {{expected the rows' gradient to have the rows' type 'tensor<8x16xf32>'}}
  %dr = rp.moe.combine_grad %r, %p grad(%g)
      : (tensor<8x16xf32>, tensor<4x2xi32>, tensor<4x16xf32>)
      -> tensor<8x8xf32>
  return
}
