// RUN: rp-opt %s -split-input-file -rp-print-layer-costs=hw=%S/Inputs/unit.json -verify-diagnostics -o /dev/null

// expected-error @below {{no function has rp.layer ops; group the graph into layers first (rp-group-layers)}}
module {
  func.func @flat(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = rp.param "w" trainable at "w.bin"[0] : tensor<8x8xf32>
    %m = rp.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %m : tensor<2x8xf32>
  }
}

// -----

func.func @training(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @below {{has role backward; layer costs are computed on the forward graph, so run the cost analysis before rp-autodiff}}
  %g = rp.layer "h.0.backward" role = backward (%x, %dy) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>):
    %m = rp.mul %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %g : tensor<2x8xf32>
}

// -----

// The unit profile has an f32 rate only.
func.func @bf16(%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  %h = rp.layer "h.0" (%x) : (tensor<2x8xbf16>) -> tensor<2x8xbf16> {
  ^bb0(%a: tensor<2x8xbf16>):
    // expected-error @below {{computes in 'bf16' but hardware profile 'unit' gives no rate for it; add it to "tflops"}}
    %t = rp.tanh %a : tensor<2x8xbf16>
    rp.yield %t : tensor<2x8xbf16>
  }
  return %h : tensor<2x8xbf16>
}
