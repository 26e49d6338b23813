func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = rp.constant dense<1.0> : tensor<4xf32>
  %0 = rp.mul %x, %one : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
