// Four layers of one 8x8 matmul each (256 bytes of weights, 64-byte
// activations): the model the pipeline pass tests schedule.
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = rp.param "l0.weight" trainable at "w.bin"[0] : tensor<8x8xf32>
  %w1 = rp.param "l1.weight" trainable at "w.bin"[256] : tensor<8x8xf32>
  %w2 = rp.param "l2.weight" trainable at "w.bin"[512] : tensor<8x8xf32>
  %w3 = rp.param "l3.weight" trainable at "w.bin"[768] : tensor<8x8xf32>
  %h0 = rp.layer "l0" (%x, %w0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h1 = rp.layer "l1" (%h0, %w1) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h2 = rp.layer "l2" (%h1, %w2) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h3 = rp.layer "l3" (%h2, %w3) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %h3 : tensor<2x8xf32>
}
