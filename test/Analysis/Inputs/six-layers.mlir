func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = rp.param "a0.weight" trainable at "w.bin"[0] : tensor<8x8xf32>
  %w1 = rp.param "a1.weight" trainable at "w.bin"[256] : tensor<8x8xf32>
  %w2 = rp.param "a2.weight" trainable at "w.bin"[512] : tensor<8x8xf32>
  %w3 = rp.param "a3.weight" trainable at "w.bin"[768] : tensor<8x8xf32>
  %w4 = rp.param "a4.weight" trainable at "w.bin"[1024] : tensor<8x8xf32>
  %w5 = rp.param "head.weight" trainable at "w.bin"[1280] : tensor<8x8xf32>
  %h0 = rp.layer "a0" (%x, %w0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h1 = rp.layer "a1" (%h0, %w1) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h2 = rp.layer "a2" (%h1, %w2) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h3 = rp.layer "a3" (%h2, %w3) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h4 = rp.layer "a4" (%h3, %w4) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  %h5 = rp.layer "head" (%h4, %w5) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<8x8xf32>):
    %m = rp.matmul %a, %b : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    rp.yield %m : tensor<2x8xf32>
  }
  return %h5 : tensor<2x8xf32>
}
