// A model whose only input is a vector: no sequence dimension.
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %w = rp.param "w" trainable at "w.bin"[0] : tensor<8xf32>
  %y = rp.layer "l0" (%x, %w) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %m = rp.mul %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    rp.yield %m : tensor<8xf32>
  }
  return %y : tensor<8xf32>
}
