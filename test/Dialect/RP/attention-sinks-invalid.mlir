// RUN: rp-opt %s -split-input-file -verify-diagnostics

// rp.attention's and rp.attention_grad's sinks: one logit of the query's
// type per query head; a sinks gradient exactly with sinks.

func.func @per_kv_head(%q: tensor<1x4x6x8xf32>, %k: tensor<1x2x6x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{sinks must be one 'f32' per query head, 'tensor<4xf32>', but got 'tensor<2xf32>'}}
  %o = rp.attention %q, %k, %k sinks(%s) causal : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<2xf32>) -> tensor<1x4x6x8xf32>
  return
}

// -----

func.func @other_type(%q: tensor<1x2x6x8xbf16>, %s: tensor<2xf32>) {
  // expected-error @+1 {{sinks must be one 'bf16' per query head}}
  %o = rp.attention %q, %q, %q sinks(%s) : (tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>, tensor<2xf32>) -> tensor<1x2x6x8xbf16>
  return
}

// -----

func.func @grad_without_sinks_grad(%q: tensor<1x2x4x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{expected a sinks gradient of the sinks' type exactly when the attention has sinks}}
  %a, %b, %c = rp.attention_grad %q, %q, %q sinks(%s) grad(%q) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<2xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @grad_sinks_shape(%q: tensor<1x2x4x8xf32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{sinks must be one 'f32' per query head, 'tensor<2xf32>'}}
  %a, %b, %c, %d = rp.attention_grad %q, %q, %q sinks(%s) grad(%q) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<3xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<3xf32>)
  return
}
