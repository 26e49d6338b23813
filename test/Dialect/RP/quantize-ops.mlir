// RUN: rp-opt %s | rp-opt | FileCheck %s

// rp.dequantize round-trips, for both formats and every float result type.
// CHECK-LABEL: func.func @dequantize
// CHECK: rp.dequantize nf4 %{{.+}} : tensor<44xi8> -> tensor<8x8xbf16>
// CHECK: rp.dequantize int8 %{{.+}} : tensor<68xi8> -> tensor<64xf32>
func.func @dequantize(%a: tensor<44xi8>, %b: tensor<68xi8>) -> (tensor<8x8xbf16>, tensor<64xf32>) {
  %w = rp.dequantize nf4 %a : tensor<44xi8> -> tensor<8x8xbf16>
  %v = rp.dequantize int8 %b : tensor<68xi8> -> tensor<64xf32>
  return %w, %v : tensor<8x8xbf16>, tensor<64xf32>
}
