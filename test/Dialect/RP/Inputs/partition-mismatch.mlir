// A partition of three layers on a function of one: the graph changed
// after rp-partition (lower-schedule.mlir).
// expected-error @+1 {{rp.partition covers 3 layers but the function has 1; run rp-partition on this graph again}}
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host", forward = [2], backward = [1, 2]>} {
  %w0 = rp.param "l0.weight" trainable at "w.bin"[0] : tensor<8x8xf32>
  %h0 = rp.layer "l0" (%x, %w0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %h0 : tensor<2x8xf32>
}
