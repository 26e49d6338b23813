// RUN: rp-opt %S/Inputs/four-layers.mlir "--rp-train-pipeline=devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1" | FileCheck %s
// RUN: rp-opt %S/Inputs/four-layers.mlir "--rp-train-pipeline=devices=2 hw=rtx4090 schedule=1f1b microbatches=2" | FileCheck %s --check-prefix=STATIC
// RUN: (rp-opt %S/Inputs/four-layers.mlir "--rp-train-pipeline=devices=2 schedule=zigzag" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BAD

// The whole training compile in one pipeline: the loss, the partition (a
// fused tail of two layers), the schedule with its transfers, memory plan
// and estimate, then the backward layers that the stages ask for.

// CHECK:      func.func @main(%arg0: tensor<2x8xf32>, %arg1: tensor<2xi64> {rp.name = "labels"}, %arg2: tensor<f32> {rp.name = "loss_scale"})
// CHECK-SAME: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", forward = [1, 1], backward = [2, 1, 1]>
// CHECK:      rp.layer "l2..l3" role = tail({{.*}}) {span = array<i64: 2, 4>}
// CHECK:      rp.layer "l1.backward" role = backward({{.*}}) {span = array<i64: 1, 2>}
// CHECK:      rp.layer "l0.backward" role = backward({{.*}}) {span = array<i64: 0, 1>}
// CHECK:      rp.schedule @main attributes {arena_copies = 2 : i64, bubble = {{.*}}, budget_bytes = 25769803776 : i64, pass_shift = {{[01]}} : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: {{[0-9]+}}, {{[0-9]+}}>, pinned_bytes = {{[0-9]+}} : i64, rp.step_range_ms = array<f64: {{[0-9.e+-]+}}, {{[0-9.e+-]+}}>, step_ms = {{.*}}}
// Weights are uploaded every step: the optimizer runs on the host.
// CHECK-COUNT-5: rp.copy h2d weights
// CHECK:      rp.optimizer_step

// Static schedules upload each stage once per step, too.
// STATIC:     rp.partition = #rp.partition<schedule = "1f1b", devices = 2, microbatches = 2
// STATIC:     rp.schedule @main
// STATIC-NOT: resident
// STATIC-COUNT-2: rp.copy h2d weights
// STATIC-NOT: rp.copy h2d weights
// STATIC:     rp.optimizer_step

// BAD: for the --schedule option: Cannot find option named 'zigzag'
// BAD: exit 1
