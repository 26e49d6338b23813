// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: rp-opt %s -rp-add-lora="rank=2 alpha=4 targets=head|proj|mix|out" -split-input-file | FileCheck %s --check-prefix=NAMED

// The default targets are PEFT's all-linear: every linear layer but the
// output layer, whose matmul reaches @main's result through a reshape and
// a layer boundary. Naming its weight adapts it too.
// CHECK-LABEL: rp.param "proj" at "w.bin"[0] : tensor<8x4xf32>
// CHECK-NEXT: rp.param "proj.lora_A" trainable
// CHECK-NEXT: rp.param "proj.lora_B" trainable
// CHECK-NEXT: rp.param "head" at "w.bin"[128] : tensor<50x8xf32>
// CHECK-NOT: head.lora
// CHECK: rp.layer "h.0"
// CHECK: rp.layer "head"(%{{[^,]+}}, %{{[^,]+}}) :
// NAMED-LABEL: rp.param "proj" at
// NAMED: rp.param "proj.lora_A" trainable
// NAMED: rp.param "head.lora_A" trainable
// NAMED: rp.param "head.lora_B" trainable
// NAMED: rp.layer "head"(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}) :
func.func @main(%x: tensor<3x4xf32>) -> tensor<1x3x50xf32> {
  %p = rp.param "proj" trainable at "w.bin"[0] : tensor<8x4xf32>
  %w = rp.param "head" trainable at "w.bin"[128] : tensor<50x8xf32>
  %h = rp.layer "h.0" (%x, %p) : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32> {
  ^bb0(%a: tensor<3x4xf32>, %wp: tensor<8x4xf32>):
    %m = rp.matmul %a, %wp transpose_b : (tensor<3x4xf32>, tensor<8x4xf32>) -> tensor<3x8xf32>
    rp.yield %m : tensor<3x8xf32>
  }
  %y = rp.layer "head" (%h, %w) : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<1x3x50xf32> {
  ^bb0(%a: tensor<3x8xf32>, %wh: tensor<50x8xf32>):
    %l = rp.matmul %a, %wh transpose_b : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32>
    %r = rp.reshape %l : tensor<3x50xf32> to tensor<1x3x50xf32>
    rp.yield %r : tensor<1x3x50xf32>
  }
  return %y : tensor<1x3x50xf32>
}

// -----

// A head whose logits feed the model's own cross-entropy is the output
// layer too.
// CHECK-LABEL: rp.param "mix" at
// CHECK-NEXT: rp.param "mix.lora_A"
// CHECK-NOT: out.lora
// CHECK: %[[T:.+]] = rp.tanh
// CHECK-NEXT: %[[L:.+]] = rp.matmul %[[T]], %{{.+}} transpose_b : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32>
// CHECK-NEXT: rp.cross_entropy %[[L]]
// NAMED-LABEL: rp.param "mix" at
// NAMED: rp.param "out.lora_B" trainable
func.func @main(%x: tensor<3x8xf32>, %y: tensor<3xi64>) -> (tensor<f32>, tensor<i64>) {
  %p = rp.param "mix" trainable at "w.bin"[0] : tensor<8x8xf32>
  %w = rp.param "out" trainable at "w.bin"[256] : tensor<50x8xf32>
  %s, %n = rp.layer "head" (%x, %p, %w, %y) : (tensor<3x8xf32>, tensor<8x8xf32>, tensor<50x8xf32>, tensor<3xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<3x8xf32>, %wp: tensor<8x8xf32>, %wh: tensor<50x8xf32>, %t: tensor<3xi64>):
    %m = rp.matmul %a, %wp transpose_b : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
    %g = rp.tanh %m : tensor<3x8xf32>
    %l = rp.matmul %g, %wh transpose_b : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32>
    %ls, %ln = rp.cross_entropy %l, %t ignore_index = -100 : (tensor<3x50xf32>, tensor<3xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %ls, %ln : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// Gemma 2's final logit softcap, 30 * tanh(logits / 30), between the head
// and the cross-entropy: elementwise ops, so the head is still the output
// layer. Before, the default adapted it (a tied head: the embedding's
// weight, which PEFT then adapted as an embedding lookup, 8e-3 off).
// CHECK-LABEL: rp.param "mix" at
// CHECK-NEXT: rp.param "mix.lora_A"
// CHECK-NOT: out.lora
// CHECK: rp.tanh
// CHECK: rp.cross_entropy
// NAMED-LABEL: rp.param "mix" at
// NAMED: rp.param "out.lora_B" trainable
func.func @main(%x: tensor<3x8xf32>, %y: tensor<3xi64>) -> (tensor<f32>, tensor<i64>) {
  %p = rp.param "mix" trainable at "w.bin"[0] : tensor<8x8xf32>
  %w = rp.param "out" trainable at "w.bin"[256] : tensor<50x8xf32>
  %s, %n = rp.layer "head" (%x, %p, %w, %y) : (tensor<3x8xf32>, tensor<8x8xf32>, tensor<50x8xf32>, tensor<3xi64>) -> (tensor<f32>, tensor<i64>) {
  ^bb0(%a: tensor<3x8xf32>, %wp: tensor<8x8xf32>, %wh: tensor<50x8xf32>, %t: tensor<3xi64>):
    %m = rp.matmul %a, %wp transpose_b : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
    %l = rp.matmul %m, %wh transpose_b : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32>
    %c = rp.constant dense<3.000000e+01> : tensor<f32>
    %d = rp.div %l, %c : (tensor<3x50xf32>, tensor<f32>) -> tensor<3x50xf32>
    %h = rp.tanh %d : tensor<3x50xf32>
    %z = rp.mul %h, %c : (tensor<3x50xf32>, tensor<f32>) -> tensor<3x50xf32>
    %ls, %ln = rp.cross_entropy %z, %t ignore_index = -100 : (tensor<3x50xf32>, tensor<3xi64>) -> (tensor<f32>, tensor<i64>)
    rp.yield %ls, %ln : tensor<f32>, tensor<i64>
  }
  return %s, %n : tensor<f32>, tensor<i64>
}

// -----

// Only the output layer is linear: the default has nothing to adapt and
// says how to adapt the head.
// expected-error @+1 {{no linear layer to adapt but the output layer, which the default targets leave out; name its weight in the LoRA targets to adapt it}}
func.func @main(%x: tensor<3x8xf32>) -> tensor<3x50xf32> {
  %w = rp.param "head" trainable at "w.bin"[0] : tensor<50x8xf32>
  %y = rp.layer "head" (%x, %w) : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32> {
  ^bb0(%a: tensor<3x8xf32>, %wh: tensor<50x8xf32>):
    %l = rp.matmul %a, %wh transpose_b : (tensor<3x8xf32>, tensor<50x8xf32>) -> tensor<3x50xf32>
    rp.yield %l : tensor<3x50xf32>
  }
  return %y : tensor<3x50xf32>
}
