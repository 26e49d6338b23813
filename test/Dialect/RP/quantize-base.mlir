// RUN: rm -rf %t && mkdir -p %t
// RUN: %PYTHON -c "import struct; open('%t/w.bin', 'wb').write(b''.join(struct.pack('<f', (i %% 37 - 18) / 7.0) for i in range(1024)))"
// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4" -rp-quantize-base="kind=nf4 weights-file=%t/q.bin ir-dir=%t" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4" -rp-quantize-base="kind=int8 weights-file=%t/q8.bin ir-dir=%t" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=INT8

// The frozen linear weights become i8 blobs of the contract's size (nf4 of
// 96 values: 48 code bytes, 2 absmax codes, padding, one absmax2 and the
// offset: 60 bytes; int8: 96 codes and 2 absmax), appended to the weights
// file and read through rp.dequantize at the top of the layer; the
// adapters, the norm scale and the output layer's weight stay f32.
// CHECK-LABEL: func.func @main
// CHECK-DAG: rp.param "norm" at "w.bin"[0] : tensor<4xf32>
// CHECK-DAG: rp.param "head" at "w.bin"[1024] : tensor<5x6xf32>
// CHECK-DAG: %[[Q:.+]] = rp.param "q_proj" at "q.bin"[0] : tensor<60xi8>
// CHECK-DAG: %[[K:.+]] = rp.param "k_proj" at "q.bin"[64] : tensor<60xi8>
// CHECK-DAG: rp.param "q_proj.lora_A" trainable init = 2.500000e-01 : tensor<2x16xf32>
// CHECK: rp.layer "h.0"(%{{.+}}, %{{.+}}, %[[Q]], %[[K]]
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<3x16xf32>, %{{.+}}: tensor<4xf32>, %[[BQ:.+]]: tensor<60xi8>, %[[BK:.+]]: tensor<60xi8>
// CHECK-DAG: %[[WK:.+]] = rp.dequantize nf4 %[[BK]] : tensor<60xi8> -> tensor<6x16xf32>
// CHECK-DAG: %[[WQ:.+]] = rp.dequantize nf4 %[[BQ]] : tensor<60xi8> -> tensor<6x16xf32>
// CHECK: rp.matmul %{{.+}}, %[[WQ]] transpose_b
// CHECK: rp.layer "head"
// CHECK-NOT: rp.dequantize
// CHECK: return
// INT8: rp.param "q_proj" at "q8.bin"[0] : tensor<104xi8>
// INT8: rp.dequantize int8 %{{.+}} : tensor<104xi8> -> tensor<6x16xf32>
func.func @main(%x: tensor<3x16xf32>) -> tensor<3x5xf32> {
  %n = rp.param "norm" trainable at "w.bin"[0] : tensor<4xf32>
  %q = rp.param "q_proj" trainable at "w.bin"[16] : tensor<6x16xf32>
  %k = rp.param "k_proj" trainable at "w.bin"[400] : tensor<6x16xf32>
  %h = rp.param "head" trainable at "w.bin"[1024] : tensor<5x6xf32>
  %y = rp.layer "h.0" (%x, %n, %q, %k) : (tensor<3x16xf32>, tensor<4xf32>, tensor<6x16xf32>, tensor<6x16xf32>) -> tensor<3x6xf32> {
  ^bb0(%a: tensor<3x16xf32>, %wn: tensor<4xf32>, %wq: tensor<6x16xf32>, %wk: tensor<6x16xf32>):
    %m = rp.matmul %a, %wq transpose_b : (tensor<3x16xf32>, tensor<6x16xf32>) -> tensor<3x6xf32>
    %o = rp.matmul %a, %wk transpose_b : (tensor<3x16xf32>, tensor<6x16xf32>) -> tensor<3x6xf32>
    %s = rp.add %m, %o : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
    rp.yield %s : tensor<3x6xf32>
  }
  %z = rp.layer "head" (%y, %h) : (tensor<3x6xf32>, tensor<5x6xf32>) -> tensor<3x5xf32> {
  ^bb0(%a: tensor<3x6xf32>, %wh: tensor<5x6xf32>):
    %l = rp.matmul %a, %wh transpose_b : (tensor<3x6xf32>, tensor<5x6xf32>) -> tensor<3x5xf32>
    rp.yield %l : tensor<3x5xf32>
  }
  return %z : tensor<3x5xf32>
}
