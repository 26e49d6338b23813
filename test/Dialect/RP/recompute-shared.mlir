// RUN: rp-opt %s -rp-recompute-shared -split-input-file | FileCheck %s

// A mask layer 0 reshapes from a float initializer and two later layers
// read: each reader reshapes the initializer itself, and layer 0 stops
// yielding the mask (it still uses it).
// CHECK-LABEL: func.func @mask
// CHECK:      %[[M:.+]] = rp.param "mask"
// CHECK:      %[[H0:.+]] = rp.layer "h.0"(%arg0, %[[M]]) : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
// CHECK:        rp.reshape
// CHECK:        rp.yield %{{.+}} : tensor<2x8xf32>
// CHECK:      %[[H1:.+]] = rp.layer "h.1"(%[[H0]], %[[M]]) : (tensor<2x8xf32>, tensor<4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<2x8xf32>, %[[K:.+]]: tensor<4xf32>):
// CHECK-NEXT:   %[[R:.+]] = rp.reshape %[[K]] : tensor<4xf32> to tensor<1x4xf32>
// CHECK-NEXT:   %[[C:.+]] = rp.concat %[[R]], %[[R]]
// CHECK-NEXT:   rp.mul %[[A]], %[[C]]
// CHECK:      rp.layer "h.2"(%[[H1]], %[[M]])
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<2x8xf32>, %[[K2:.+]]: tensor<4xf32>):
// CHECK-NEXT:   rp.reshape %[[K2]]
func.func @mask(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = rp.param "mask" at "w.bin"[0] : tensor<4xf32>
  %h0:2 = rp.layer "h.0" (%x, %m) : (tensor<2x8xf32>, tensor<4xf32>) -> (tensor<1x4xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<2x8xf32>, %k: tensor<4xf32>):
    %r = rp.reshape %k : tensor<4xf32> to tensor<1x4xf32>
    %c = rp.concat %r, %r dim = 1 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
    %y = rp.mul %a, %c : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
    rp.yield %r, %y : tensor<1x4xf32>, tensor<2x8xf32>
  }
  %h1 = rp.layer "h.1" (%h0#1, %h0#0) : (tensor<2x8xf32>, tensor<1x4xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %r: tensor<1x4xf32>):
    %c = rp.concat %r, %r dim = 1 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
    %y = rp.mul %a, %c : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
    rp.yield %y : tensor<2x8xf32>
  }
  %h2 = rp.layer "h.2" (%h1, %h0#0) : (tensor<2x8xf32>, tensor<1x4xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %r: tensor<1x4xf32>):
    %c = rp.concat %r, %r dim = 1 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
    %y = rp.add %a, %c : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
    rp.yield %y : tensor<2x8xf32>
  }
  return %h2 : tensor<2x8xf32>
}

// -----

// A learned bias gathered with constant indices from a trainable table:
// the reader gets the table (an input it already has is reused) and the
// constant indices, and recomputes the gather.
// CHECK-LABEL: func.func @bias
// CHECK:      %[[T:.+]] = rp.param "rel" trainable
// CHECK:      %[[H0:.+]] = rp.layer "h.0"(%arg0, %[[T]]) : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK:      rp.layer "h.1"(%[[H0]], %[[T]]) : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: ^bb0(%{{.+}}: tensor<2x8xf32>, %[[W:.+]]: tensor<4x8xf32>):
// CHECK-NEXT:   %[[I:.+]] = rp.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-NEXT:   %[[G:.+]] = rp.gather %[[W]][%[[I]]]
// CHECK-NEXT:   rp.add %{{.+}}, %[[G]]
func.func @bias(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %t = rp.param "rel" trainable at "w.bin"[0] : tensor<4x8xf32>
  %h0:2 = rp.layer "h.0" (%x, %t) : (tensor<2x8xf32>, tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<2x8xf32>, %w: tensor<4x8xf32>):
    %i = rp.constant dense<[1, 0]> : tensor<2xi64>
    %g = rp.gather %w[%i] axis = 0 : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
    %y = rp.add %a, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %g, %y : tensor<2x8xf32>, tensor<2x8xf32>
  }
  %h1 = rp.layer "h.1" (%h0#1, %h0#0, %t) : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>, %w: tensor<4x8xf32>):
    %y = rp.add %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %z = rp.matmul %y, %w transpose_b : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %s = rp.reduce sum %z dims = [1] : tensor<2x4xf32> -> tensor<2xf32>
    %u = rp.reshape %s : tensor<2xf32> to tensor<2x1xf32>
    %v = rp.add %y, %u : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    rp.yield %v : tensor<2x8xf32>
  }
  return %h1 : tensor<2x8xf32>
}

// -----

// A value computed from an input stays a layer result: the reader gets it
// from layer 0 (a plan transfers it).
// CHECK-LABEL: func.func @activation
// CHECK: %[[H0:.+]]:2 = rp.layer "h.0"
// CHECK: rp.layer "h.1"(%[[H0]]#1, %[[H0]]#0)
func.func @activation(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = rp.param "w" trainable at "w.bin"[0] : tensor<2x8xf32>
  %h0:2 = rp.layer "h.0" (%x, %m) : (tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  ^bb0(%a: tensor<2x8xf32>, %k: tensor<2x8xf32>):
    %s = rp.add %a, %k : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = rp.tanh %s : tensor<2x8xf32>
    rp.yield %s, %y : tensor<2x8xf32>, tensor<2x8xf32>
  }
  %h1 = rp.layer "h.1" (%h0#1, %h0#0) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %r: tensor<2x8xf32>):
    %y = rp.mul %a, %r : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    rp.yield %y : tensor<2x8xf32>
  }
  return %h1 : tensor<2x8xf32>
}
