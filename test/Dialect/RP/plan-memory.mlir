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
// CHECK: rp.schedule @main attributes {arena_copies = 2 : i64, bubble = {{.*}} : f64, budget_bytes = 25769803776 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2432, 1088>, pinned_bytes = 2176 : i64, rp.step_range_ms = array<f64: 0.11{{[0-9]*}}, 0.62{{[0-9]*}}>, step_ms = 0.31{{[0-9]*}} : f64}
// Both devices are placed largest first: in issue order (the weight
// uploads of jobs 2 and 3 issued before the first computes) device 0
// peaked at 2560 bytes and device 1 at 1280, over the bytes live at once
// (rp-plan-memory keeps the lower of the two orders). Device 0: the tail's
// weights and gradients (1024 bytes) at 0, its work (640: layer 3's input
// and output or its gradient's, and its microbatch's weight gradients)
// at 1024, in bytes job 0's weights held before it (job 0 ran first).
// CHECK: rp.compute forward job 0 {{.*}} offsets = array<i64: 1024, 1280, 1344, 1408>
// CHECK: rp.compute forward job 1 {{.*}} offsets = array<i64: 512, 768, 960, 1024>
// CHECK: rp.compute tail job 2 {{.*}} offsets = array<i64: 0, 2304, 2368, 1024>, work_bytes = 640
// CHECK: rp.compute backward job 3 {{.*}} offsets = array<i64: 0, 832, 960, 512>

// 1F1B with resident weights: one weight set per device, kept inputs.
// STATIC: rp.partition = #rp.partition<schedule = "1f1b"
// STATIC: rp.schedule @main resident attributes {arena_copies = 2 : i64, bubble = {{.*}}, budget_bytes = 25769803776 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: {{[0-9]+}}, {{[0-9]+}}>

// OVER: error: device 0 needs 2.26e-06 GiB (2432 bytes) at its peak, over its budget of 1.5e-06 GiB (1610 bytes)
// OVER: note: the biggest buffers: weights of set 2 (layers 2-3), 9.54e-07 GiB
// OVER: note: the biggest buffers: work of T2 mb0, 5.96e-07 GiB
// OVER: note: the biggest buffers: weights of set 4 (layers 0-0), 4.77e-07 GiB
// OVER: note: to fit, cut smaller stages (a lower weight-budget or stage-bytes, or --stages) or use more devices
// NOSCHEDULE: error: no rp.schedule; run rp-lower-schedule first
// NOSCHEDULE: exit 1
// OVER: exit 1

// Passes in flight: a continuous run keeps two, each on its own copy of
// the arenas when two copies fit every device, each the largest device's
// (2432 bytes) since round-robin renames the devices: 4864 bytes. A
// budget of 5261 bytes keeps two copies; one of 4831 bytes one that the
// two passes share (a device takes up the next pass once its own part of
// the pass before is done), the steady step timed again that way.
// TWOFIT: rp.schedule @main attributes {arena_copies = 2 : i64, {{.*}}, budget_bytes = 5261 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2432, 1088>
// ONE: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}, budget_bytes = 4831 : i64, pass_shift = 1 : i64, passes_in_flight = 2 : i64, peak_bytes = array<i64: 2432, 1088>, {{.*}}step_ms =
// SHARED: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}passes_in_flight = 2 : i64
// One pass in flight has one copy of the arenas.
// FORCED1: arena_copies = 1 : i64, {{.*}}passes_in_flight = 1 : i64, peak_bytes = array<i64: 2432, 1088>
// FORCED2: error: two copies of the arenas need 4.53e-06 GiB (4864 bytes) on device 0 (one per pass in flight, each the largest device's since the devices are renamed pass by pass), over its budget of 4.5e-06 GiB (4831 bytes); leave arena-copies out (the two passes then share one copy) or use fewer tokens per microbatch
// FORCED2: exit 1
// TWOFORONE: error: arena-copies 2 for 1 pass in flight: a pass needs one copy of the arenas; leave arena-copies out
// TWOFORONE: exit 1
// THREE: error: passes-in-flight 3 is not a count of passes in flight; give 1 or 2
// THREE: exit 1
// THREECOPIES: error: arena-copies 3 is not a count of arena copies; give 1, 2 or 0 (2 when two copies fit, else 1)
// THREECOPIES: exit 1
