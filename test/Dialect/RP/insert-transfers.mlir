// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1" --rp-lower-schedule --rp-insert-transfers | FileCheck %s --check-prefix=RR
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 schedule=1f1b microbatches=2" --rp-lower-schedule --rp-insert-transfers | FileCheck %s --check-prefix=RESIDENT
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 schedule=1f1b microbatches=2" --rp-lower-schedule --rp-insert-transfers="weight-budget=0.0000000001" | FileCheck %s --check-prefix=OFFLOAD
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1" --rp-lower-schedule --rp-insert-transfers="pass-shift=0" | FileCheck %s --check-prefix=SHIFT0
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition --rp-lower-schedule --rp-insert-transfers="dispatch=sideways" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=DISPATCH
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition --rp-lower-schedule --rp-insert-transfers --rp-insert-transfers 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TWICE
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition --rp-insert-transfers 2>&1; echo "exit $?") | FileCheck %s --check-prefix=NOSCHEDULE

// The pass shift: five stage jobs on 2 devices move by 1 per pass (the
// job counter carrying on, dispatch=modulo); pass-shift sets it.
// RR: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090"
// RR: rp.schedule @main attributes {{{.*}}pass_shift = 1 : i64
// SHIFT0: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090"
// SHIFT0: rp.schedule @main attributes {{{.*}}pass_shift = 0 : i64
// DISPATCH: for the --dispatch option: Cannot find option named 'sideways'

// Round-robin on 2 devices, 3 microbatches: each job uploads its weights
// once (PCIe time from the profile: 256 B at 25 GB/s); job 0 reads the
// model input from the host; activations go down from the producer and up
// to the consumer, at most two in flight per device.
// RR: %[[W0:.*]] = rp.copy h2d weights job 0 device 0 bytes 256 {ms = 1.024000e-05 : f64}
// RR-NEXT: %[[X0:.*]] = rp.copy h2d activation job 0 mb 0 device 0 bytes 64 boundary 0 {ms = 2.560000e-06 : f64}
// The computes start job_us (30 us) after the copies they wait for, so
// job 2's upload is issued before them.
// RR: rp.copy h2d weights job 2 device 0 bytes 512
// RR: %[[F0:.*]] = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 after(%[[W0]], %[[X0]])
// RR-DAG: %[[OUT:.*]] = rp.copy d2h activation job 0 mb 0 device 0 bytes 64 boundary 1 after(%[[F0]])
// RR-DAG: rp.compute forward job 0 layers 0 to 1 mb 1 device 0
// The third microbatch's input waits for the first one's compute to free
// its buffer; its compute waits for the first one's output download.
// RR: rp.copy h2d activation job 0 mb 2 device 0 bytes 64 boundary 0 after(%[[F0]])
// RR: %[[IN1:.*]] = rp.copy h2d activation job 1 mb 0 device 1 bytes 64 boundary 1 after(%[[OUT]])
// RR: %[[F0M2:.*]] = rp.compute forward job 0 layers 0 to 1 mb 2 device 0 weights 0 after(%[[W0]], %{{.*}}, %[[OUT]])
// Job 4 on device 0 holds a third weight set: its upload waits for job 0,
// two turns back, to finish.
// RR: rp.copy h2d weights job 4 device 0 bytes 256 after(%[[F0M2]])
// Job 3's saved input (boundary 1, from job 0's download) goes up ahead
// of its activation gradient, which the tail downloads: the recompute's
// input never queues behind the gradient.
// RR: rp.copy h2d activation job 3 mb 0 device 1 bytes 64 boundary 1 after(%[[OUT]],
// RR: rp.copy d2h gradient job 2 mb 0 device 0 bytes 64 boundary 2
// RR: rp.copy h2d gradient job 3 mb 0 device 1 bytes 64 boundary 2
// Weight gradients go down once per job, after its last microbatch, and
// the optimizer waits for all of them.
// RR: %[[G2:.*]] = rp.copy d2h weight_grads job 2 device 0 bytes 512
// RR: %[[G3:.*]] = rp.copy d2h weight_grads job 3 device 1 bytes 256
// RR: %[[G4:.*]] = rp.copy d2h weight_grads job 4 device 0 bytes 256
// RR-NEXT: rp.optimizer_step after(%[[G2]], %[[G3]], %[[G4]])

// 1F1B whose stages fit: weights stay resident, the backward reads the
// input its forward kept on the device, only stage-boundary traffic moves.
// RESIDENT: rp.partition = #rp.partition<schedule = "1f1b", devices = 2, microbatches = 2, hw = "rtx4090"
// RESIDENT: rp.schedule @main resident
// RESIDENT-NOT: weights
// RESIDENT: %[[F:.*]] = rp.compute forward job 0 layers 0 to 2 mb 0 device 0 weights 0
// RESIDENT: rp.compute backward job 2 layers 0 to 2 mb 0 device 0 weights 0 after(%[[F]], %{{.*}})
// RESIDENT-NOT: weight_grads
// RESIDENT: rp.optimizer_step

// Offloaded: each stage uploads once per step, shared by its forward and
// backward, and downloads its gradients once.
// The estimated step and the idle share of the devices' compute (a
// backward's recompute timed before its gradient lands, as the plan runs
// it; 0.076 ms and 32% when it waited); the second microbatch's gradients
// added to the accumulators, an add kernel per weight (the plan's
// add-grads program). A command waiting on another queue's starts 30 us
// (rtx4090's job_us, the host's hand-off) after it ends, as the sim times
// it (issue 32; 0.324 ms and 28% when job_us was charged on every run
// job, the back-to-back ones too). The 2-layer backward stages recompute
// their first layer whole, since its output feeds the second: more busy
// time at the same step (bubble 38% when only what each layer's own
// sweep reads was charged).
// OFFLOAD: rp.partition = #rp.partition<schedule = "1f1b", devices = 2, microbatches = 2, hw = "rtx4090"
// OFFLOAD: rp.schedule @main attributes {bubble = 0.335{{[0-9]*}} : f64, step_ms = 0.0842{{[0-9]*}} : f64} {
// OFFLOAD-COUNT-2: rp.copy h2d weights
// OFFLOAD-NOT: rp.copy h2d weights
// OFFLOAD-COUNT-2: rp.copy d2h weight_grads
// The optimizer streams 40 bytes per parameter (4 x 64 of them: AdamW's
// 28 and the f16 gradient and weight conversions, issue 32) at the
// profile's 58 GB/s (bench/adamw_vs_torch.py's): 10240 B / 58e9 B/s =
// 1.7655e-4 ms.
// OFFLOAD: rp.optimizer_step after({{.*}}) {ms = 1.7655172413793104E-4 : f64}

// TWICE: error: 'rp.schedule' op has transfers already
// NOSCHEDULE: error: no rp.schedule; run rp-lower-schedule first
// DISPATCH: exit 1
// NOSCHEDULE: exit 1
// TWICE: exit 1
