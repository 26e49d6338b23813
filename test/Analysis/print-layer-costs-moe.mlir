// The cost of a mixture-of-experts layer on the round-number profile (1
// TFLOP/s, 1 GB/s, no launch cost), every figure checked by hand.
// RUN: rp-opt %s -rp-print-layer-costs=hw=%S/Inputs/unit.json -o /dev/null | FileCheck %s

// 4 tokens of 8 features, one expert each of 2, a trainable [2, 8, 8]
// expert stack:
// - dispatch moves 128 + 32 bytes in and 128 + 16 + 8 out (312), no FLOPs;
// - the grouped matmul: every row meets one [8, 8] expert weight,
//   2 * 4 * 8 * 8 = 512 FLOPs whatever the routing, moving 128 + 512 + 8
//   + 128 = 776 bytes (the whole stack is read);
// - combine: 2 FLOPs per output element (64), 128 + 16 + 128 = 272 bytes.
// Backward: the stack's gradient is one more grouped matmul (512 FLOPs, 776
// bytes; the rows come from an input, which needs no gradient) and the
// combine's gradient twice its forward (128, 544): the FLOPs and bytes
// printed. Memory bound: 1360 bytes forward at 1 GB/s; the backward's time
// is its VJP's kernels as the plan runs them (the stack's weight-gradient
// grouped matmul and the combine's gradient), 1176 bytes.
// CHECK: costs @main hw=unit layers=1
// CHECK-NEXT: layer "moe" forward_flops=576 recompute_flops=512 backward_flops=576 forward_traffic=1360 recompute_traffic=1088 backward_traffic=1176 {{.*}} param_bytes=512 grad_bytes=512 {{.*}} kernels=3 forward_ms=0.00136 recompute_ms=0.001088 backward_ms=0.001176

// RUN: rp-opt %s -rp-print-layer-costs=hw=%S/Inputs/unit-grouped.json -o /dev/null | FileCheck %s --check-prefix=GROUPED
// Compute bound (1 MFLOP/s, memory 1000 GB/s): the grouped matmul is its 2
// experts' GEMMs of 256 FLOPs each, read on the matmul curve at 256 FLOPs
// (0.5), not at its 512 (1): 512 FLOPs at 0.5 MFLOP/s = 1.024 ms, its
// weight gradient the same. Combine, at the default efficiency 1, 64 FLOPs
// (0.064 ms) forward and, as the VJP's kernel, 64 again backward; dispatch
// moves bytes only (under a nanosecond). The recompute leaves the combine
// out (the sweep reads no result of it): 1.024 ms.
// GROUPED: layer "moe" {{.*}} forward_ms=1.088 recompute_ms=1.024 backward_ms=1.088
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = rp.param "experts" trainable at "w.bin"[0] : tensor<2x8x8xf32>
  %y = rp.layer "moe" (%x, %w) : (tensor<4x8xf32>, tensor<2x8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<2x8x8xf32>):
    %e = rp.constant dense<[[1], [0], [1], [1]]> : tensor<4x1xi64>
    %rows, %pos, %cnt = rp.moe.dispatch %a, %e : (tensor<4x8xf32>, tensor<4x1xi64>) -> (tensor<4x8xf32>, tensor<4x1xi32>, tensor<2xi32>)
    %h = rp.moe.grouped_matmul %rows, %b, %cnt transpose_b : (tensor<4x8xf32>, tensor<2x8x8xf32>, tensor<2xi32>) -> tensor<4x8xf32>
    %o = rp.moe.combine %h, %pos : (tensor<4x8xf32>, tensor<4x1xi32>) -> tensor<4x8xf32>
    rp.yield %o : tensor<4x8xf32>
  }
  return %y : tensor<4x8xf32>
}
