// RUN: rp-opt %s -split-input-file -verify-diagnostics

func.func @key_shape(%x: tensor<3x4xf32>, %k: tensor<4xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{expected the key to be one dropout_key row tensor<1x4xi64>}}
  %y = rp.dropout %x, %k {probability = 1.0e-01 : f64, tensor = 1 : i64} : tensor<3x4xf32>, tensor<4xi64>
  return %y : tensor<3x4xf32>
}

// -----

func.func @probability(%x: tensor<3x4xf32>, %k: tensor<1x4xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{expected a probability in [0, 1), got 1}}
  %y = rp.dropout %x, %k {probability = 1.0 : f64, tensor = 1 : i64} : tensor<3x4xf32>, tensor<1x4xi64>
  return %y : tensor<3x4xf32>
}

// -----

func.func @tensor(%x: tensor<3x4xf32>, %k: tensor<1x4xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{expected a tensor number in [0, 2^32)}}
  %y = rp.dropout %x, %k {probability = 0.5 : f64, tensor = -1 : i64} : tensor<3x4xf32>, tensor<1x4xi64>
  return %y : tensor<3x4xf32>
}
