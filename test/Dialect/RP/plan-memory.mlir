// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory | FileCheck %s
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 schedule=1f1b microbatches=2" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory --rp-verify-schedule | FileCheck %s --check-prefix=STATIC
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="budget-gib=0.0000015" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=OVER
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition --rp-plan-memory 2>&1; echo "exit $?") | FileCheck %s --check-prefix=NOSCHEDULE
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="budget-gib=0.0000049" | FileCheck %s --check-prefix=TWOFIT
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="budget-gib=0.0000045" --rp-verify-schedule | FileCheck %s --check-prefix=ONE
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="passes-in-flight=1" | FileCheck %s --check-prefix=FORCED1
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="budget-gib=0.0000045 arena-copies=2" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=FORCED2
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="arena-copies=1" --rp-verify-schedule | FileCheck %s --check-prefix=SHARED
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="passes-in-flight=1 arena-copies=2" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TWOFORONE
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="arena-copies=3" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=THREECOPIES
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory="passes-in-flight=3" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=THREE

// Every compute gets its weights, input, output and work offsets; the
// schedule its per-device peak, the budget (the profile's 24 GiB) and the
// pinned host memory (weights and gradients of the model, 2 x 1024 bytes,
// plus the staged activations).
// CHECK: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 1, hw = "rtx4090"
// The step at the fast and slow ends of what rtx4090 cannot know (its
// "unknown" ranges: host DRAM, GPUs per uplink, the optimizer's rate,
// launch and hand-off), for rp-compile's summary (issue 32).
// CHECK: rp.schedule @main attributes {arena_copies = 2 : i64, bubble = {{.*}} : f64, budget_bytes = 25769803776 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2560, 1280>, pinned_bytes = 2176 : i64, rp.step_range_ms = array<f64: 0.11{{[0-9]*}}, 0.62{{[0-9]*}}>, step_ms = 0.31{{[0-9]*}} : f64}
// The weight uploads of jobs 2 and 3 are issued before the first computes,
// which start 30 us (rtx4090's job_us, the host's hand-off) after the
// copies they wait for; so job 2's weights and gradients (1024 bytes) take
// 320 on device 0 before job 0's output and work are placed above them.
// CHECK: rp.compute forward job 0 {{.*}} offsets = array<i64: 0, 256, 1344, 1408>
// Job 1 on device 1: its weights at 0, then, above job 3's weights and
// gradients (issued first), its 64-byte input and output.
// CHECK: rp.compute forward job 1 {{.*}} offsets = array<i64: 0, 768, 960, 1024>
// The tail's input reuses job 0's weight bytes, free once job 0 ran. Its
// work holds what its body keeps at its peak, layer 3's input (64 bytes,
// read by its weight's gradient) beside layer 3's output or its
// gradient's (64), and its microbatch's weight gradients (512; the
// runtime adds them to the set's at the job's end): 640.
// CHECK: rp.compute tail job 2 {{.*}} offsets = array<i64: 320, 0, 192, 1920>, work_bytes = 640
// Job 3 on device 1: its saved input comes up early (ahead of its
// gradient), while job 1's buffers still live, so it takes new bytes; its
// output reuses job 1's weight bytes, free once job 1 ran.
// CHECK: rp.compute backward job 3 {{.*}} offsets = array<i64: 256, 832, 0, 960>

// 1F1B with resident weights: one weight set per device, kept inputs.
// STATIC: rp.partition = #rp.partition<schedule = "1f1b"
// STATIC: rp.schedule @main resident attributes {arena_copies = 2 : i64, bubble = {{.*}}, budget_bytes = 25769803776 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: {{[0-9]+}}, {{[0-9]+}}>

// OVER: error: device 0 needs 2.38e-06 GiB (2560 bytes) at its peak, over its budget of 1.5e-06 GiB (1610 bytes)
// OVER: note: the biggest buffers: weights of set 2 (layers 2-3), 9.54e-07 GiB
// OVER: note: the biggest buffers: work of T2 mb0, 5.96e-07 GiB
// OVER: note: the biggest buffers: weights of set 4 (layers 0-0), 4.77e-07 GiB
// OVER: note: to fit, cut smaller stages (a lower weight-budget or stage-bytes, or --stages) or use more devices
// NOSCHEDULE: error: no rp.schedule; run rp-lower-schedule first
// NOSCHEDULE: exit 1
// OVER: exit 1

// Passes in flight: a continuous run keeps two, each on its own copy of
// the arenas when two copies fit every device, each the largest device's
// (2560 bytes) since round-robin renames the devices: 5120 bytes. A
// budget of 5261 bytes keeps two copies; one of 4831 bytes one that the
// two passes share (a device takes up the next pass once its own part of
// the pass before is done), the steady step timed again that way.
// TWOFIT: rp.schedule @main attributes {arena_copies = 2 : i64, {{.*}}, budget_bytes = 5261 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2560, 1280>
// ONE: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}, budget_bytes = 4831 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2560, 1280>, {{.*}}step_ms =
// SHARED: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}passes_in_flight = 2 : i64
// One pass in flight has one copy of the arenas.
// FORCED1: arena_copies = 1 : i64, {{.*}}passes_in_flight = 1 : i64, peak_bytes = array<i64: 2560, 1280>
// FORCED2: error: two copies of the arenas need 4.77e-06 GiB (5120 bytes) on device 0 (one per pass in flight, each the largest device's since the devices are renamed pass by pass), over its budget of 4.5e-06 GiB (4831 bytes); leave arena-copies out (the two passes then share one copy) or use fewer tokens per microbatch
// FORCED2: exit 1
// TWOFORONE: error: arena-copies 2 for 1 pass in flight: a pass needs one copy of the arenas; leave arena-copies out
// TWOFORONE: exit 1
// THREE: error: passes-in-flight 3 is not a count of passes in flight; give 1 or 2
// THREE: exit 1
// THREECOPIES: error: arena-copies 3 is not a count of arena copies; give 1, 2 or 0 (2 when two copies fit, else 1)
// THREECOPIES: exit 1
