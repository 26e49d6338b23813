// RUN: rp-opt %s | FileCheck %s --check-prefix=ROUND
// RUN: rp-opt %s --mlir-print-op-generic | rp-opt | FileCheck %s --check-prefix=ROUND

// rp.attention's `sinks` operand (GPT-OSS's attention sinks: a learned
// logit per query head) and rp.attention_grad's, with its fourth result
// (the sinks' gradient), round-trip in the custom and the generic form
// beside a mask (two optional operands: their segment sizes).

// ROUND-LABEL: func.func @forward
// ROUND: rp.attention %{{.+}}, %{{.+}}, %{{.+}} mask(%{{.+}}) sinks(%{{.+}}) causal window = 4 : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x6xi64>, tensor<4xf32>) -> tensor<1x4x6x8xf32>
// ROUND: rp.attention_grad %{{.+}}, %{{.+}}, %{{.+}} sinks(%{{.+}}) grad(%{{.+}}) causal : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>, tensor<1x4x6x8xf32>) -> (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>)
func.func @forward(%q: tensor<1x4x6x8xf32>, %k: tensor<1x2x6x8xf32>, %ids: tensor<1x6xi64>, %sinks: tensor<4xf32>) -> tensor<1x4x6x8xf32> {
  %o = rp.attention %q, %k, %k mask(%ids) sinks(%sinks) causal window = 4 : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x6xi64>, tensor<4xf32>) -> tensor<1x4x6x8xf32>
  %dq, %dk, %dv, %ds = rp.attention_grad %q, %k, %k sinks(%sinks) grad(%o) causal : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>, tensor<1x4x6x8xf32>) -> (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<4xf32>)
  return %o : tensor<1x4x6x8xf32>
}

