// An IR that records a fingerprint of w.bin that no file has (1), with a
// param in w.bin and a constant rp-externalize-constants moves there.
module attributes {rp.weight_fingerprints = {"w.bin" = 1 : ui64}} {
  func.func @main() -> (tensor<4xf32>, tensor<6xf32>) {
    %w = rp.param "w" trainable at "w.bin"[0] : tensor<4xf32>
    %c = rp.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]> : tensor<6xf32> loc("rope")
    return %w, %c : tensor<4xf32>, tensor<6xf32>
  }
}
