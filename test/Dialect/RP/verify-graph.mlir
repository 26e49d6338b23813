// RUN: rp-opt %s -rp-verify-graph -split-input-file -verify-diagnostics -allow-unregistered-dialect | FileCheck %s

// A well-formed graph passes unchanged: a tied embedding is one parameter
// feeding two layers, and params of one file sit side by side.

// CHECK-LABEL: func.func @tied_embedding
// CHECK-COUNT-2: rp.param "wte"
func.func @tied_embedding(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = rp.param "wte" trainable at "weights.bin"[0] : tensor<16x8xf32>
  %wpe = rp.param "wpe" trainable at "weights.bin"[512] : tensor<4x8xf32>
  %h = rp.layer "embed" (%ids, %wte) : (tensor<2x4xi64>, tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%i: tensor<2x4xi64>, %t: tensor<16x8xf32>):
    %e = rp.gather %t[%i] axis = 0 : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    rp.yield %e : tensor<2x4x8xf32>
  }
  %wte2 = rp.param "wte" trainable at "weights.bin"[0] : tensor<16x8xf32>
  %y = rp.layer "lm_head" (%h, %wte2) : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> {
  ^bb0(%x: tensor<2x4x8xf32>, %t: tensor<16x8xf32>):
    %l = rp.matmul %x, %t transpose_b : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    rp.yield %l : tensor<2x4x16xf32>
  }
  return %y : tensor<2x4x16xf32>
}

// -----

func.func @param_redeclared() {
  // expected-note @+1 {{first declared here}}
  %0 = rp.param "w" at "weights.bin"[0] : tensor<4xf32>
  // expected-error @+1 {{parameter 'w' is declared again with another type, trainable flag or storage}}
  %1 = rp.param "w" at "weights.bin"[0] : tensor<8xf32>
  return
}

// -----

func.func @param_trainable_mismatch() {
  // expected-note @+1 {{first declared here}}
  %0 = rp.param "w" trainable : tensor<4xf32>
  // expected-error @+1 {{parameter 'w' is declared again}}
  %1 = rp.param "w" : tensor<4xf32>
  return
}

// -----

func.func @param_overlap() {
  // expected-note @+1 {{'a' is declared here}}
  %0 = rp.param "a" at "weights.bin"[0] : tensor<4xf32>
  // expected-error @+1 {{parameter 'b' stored at bytes [12, 28) of 'weights.bin' overlaps parameter 'a'}}
  %1 = rp.param "b" at "weights.bin"[12] : tensor<4xf32>
  return
}

// -----

// The same offsets in two files do not overlap.
// CHECK-LABEL: func.func @two_files
func.func @two_files() {
  %0 = rp.param "a" at "a.bin"[0] : tensor<4xf32>
  %1 = rp.param "b" at "b.bin"[0] : tensor<4xf32>
  return
}

// -----

func.func @layer_name_reused(%x: tensor<2xf32>) {
  // expected-note @+1 {{first used here}}
  %0 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  // expected-error @+1 {{layer name 'h.0' is used twice in 'layer_name_reused'}}
  %1 = rp.layer "h.0" (%0) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    rp.yield %a : tensor<2xf32>
  }
  return
}

// -----

func.func @layer_not_in_function_body(%x: tensor<2xf32>) {
  "test.region"() ({
    // expected-error @+1 {{must sit directly in a function body, not in test.region}}
    %0 = rp.layer "h.0" (%x) : (tensor<2xf32>) -> tensor<2xf32> {
    ^bb0(%a: tensor<2xf32>):
      rp.yield %a : tensor<2xf32>
    }
    "test.end"() : () -> ()
  }) : () -> ()
  return
}
