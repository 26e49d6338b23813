// A graph rp-verify-graph refuses: one parameter declared twice.
func.func @twice() -> (tensor<4xf32>, tensor<8xf32>) {
  %0 = rp.param "w" at "weights.bin"[0] : tensor<4xf32>
  %1 = rp.param "w" at "weights.bin"[0] : tensor<8xf32>
  return %0, %1 : tensor<4xf32>, tensor<8xf32>
}
