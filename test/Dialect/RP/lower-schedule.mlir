// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=2" --rp-lower-schedule | FileCheck %s --check-prefix=RR
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=gpipe microbatches=3" --rp-lower-schedule | FileCheck %s --check-prefix=GPIPE
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=1f1b microbatches=3" --rp-lower-schedule | FileCheck %s --check-prefix=ONEF
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=interleaved-1f1b microbatches=3" --rp-lower-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=INTERLEAVED
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=looped-bfs microbatches=2" --rp-lower-schedule | FileCheck %s --check-prefix=LOOPED
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=1f1b stages=fwd:2;bwd:2,1,1" --rp-lower-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=ASYMMETRIC
// RUN: rp-opt %S/Inputs/partition-mismatch.mlir --rp-lower-schedule -verify-diagnostics
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-lower-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=NOPARTITION
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition --rp-lower-schedule --rp-lower-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TWICE

// Round-robin: job n on device n mod 2, every job over both microbatches;
// a backward waits for the gradient (the job before it) and for the
// forward that computed its saved input. Ordered by estimated start.
// RR: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 2, hw = "rtx4090"
// RR: rp.schedule @main {
// RR-NEXT: %[[F0:.*]] = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 {ms = {{.*}} : f64, work_bytes = 64 : i64}
// RR-NEXT: %[[F0B:.*]] = rp.compute forward job 0 layers 0 to 1 mb 1 device 0 weights 0
// RR-NEXT: %[[F1:.*]] = rp.compute forward job 1 layers 1 to 2 mb 0 device 1 weights 1 after(%[[F0]])
// RR: %[[T:.*]] = rp.compute tail job 2 layers 2 to 4 mb 0 device 0 weights 2 after(%[[F1]])
// RR: %[[B3:.*]] = rp.compute backward job 3 layers 1 to 2 mb 0 device 1 weights 3 after(%[[T]], %[[F0]])
// RR: rp.compute backward job 4 layers 0 to 1 mb 0 device 0 weights 4 after(%[[B3]])
// RR-NOT: rp.copy

// Static schedules: stage s on device s; GPipe runs every forward first,
// 1F1B alternates after one warm-up forward on device 0.
// GPIPE: rp.partition = #rp.partition<schedule = "gpipe"
// GPIPE: rp.schedule @main
// GPIPE: forward job 0 {{.*}} mb 0 device 0
// GPIPE: forward job 0 {{.*}} mb 1 device 0
// GPIPE: forward job 0 {{.*}} mb 2 device 0
// GPIPE: backward job 2 {{.*}} mb 0 device 0
// ONEF: rp.partition = #rp.partition<schedule = "1f1b"
// ONEF: rp.schedule @main
// ONEF: forward job 0 {{.*}} mb 0 device 0
// ONEF: forward job 0 {{.*}} mb 1 device 0
// ONEF: backward job 2 {{.*}} mb 0 device 0
// ONEF: forward job 0 {{.*}} mb 2 device 0

// INTERLEAVED: error: interleaved-1f1b needs the same number of stages on every device and, with several stages per device, microbatches a multiple of the device count (got 4 stages, 2 devices, 3 microbatches)
// ASYMMETRIC: error: static schedules run the forward and backward of a stage on one device, so the backward stages must mirror the forward ones
// NOPARTITION: error: has no rp.partition attribute; run rp-partition first
// TWICE: error: already has an rp.schedule
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=gpipe stages=fwd:1,1;bwd:2,1,1" --rp-lower-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TOOMANY
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=3 tail-jobs=2" --rp-lower-schedule | FileCheck %s --check-prefix=TAIL2

// tail_jobs = 2: the fused tail is two stage jobs on consecutive devices,
// each with its own weight set, the first taking the even microbatches and
// the second the odd ones; the first backward reads each microbatch's
// gradient from the tail job that ran it, and the jobs after the tail move
// on one device.
// TAIL2: rp.compute tail job 2 layers 2 to 4 mb 0 device 0 weights 2 after(%[[F0:[0-9]+]])
// TAIL2: rp.compute tail job 3 layers 2 to 4 mb 1 device 1 weights 3 after(%[[F1:[0-9]+]])
// TAIL2: rp.compute tail job 2 layers 2 to 4 mb 2 device 0 weights 2
// TAIL2-NOT: rp.compute tail
// TAIL2: %[[B0:[0-9]+]] = rp.compute backward job 4 layers 1 to 2 mb 0 device 0 weights 4
// TAIL2: rp.compute backward job 4 layers 1 to 2 mb 1 device 0 weights 4
// TAIL2: rp.compute backward job 5 layers 0 to 1 mb 0 device 1 weights 5 after(%[[B0]])
// TOOMANY: error: gpipe runs one stage per device: 3 stages do not fit 2 devices

// Looped-BFS: four one-layer stages, two per device (stage s on device
// s mod 2, the last the fused tail); each device runs every microbatch of
// its first stage, then of its second, then the backwards deepest first.
// LOOPED: rp.partition = #rp.partition<schedule = "looped-bfs", devices = 2, microbatches = 2
// LOOPED: rp.schedule @main
// LOOPED: rp.compute forward job 0 layers 0 to 1 mb 0 device 0
// LOOPED: rp.compute forward job 0 layers 0 to 1 mb 1 device 0
// LOOPED: rp.compute forward job 2 layers 2 to 3 mb 0 device 0
// LOOPED: rp.compute forward job 2 layers 2 to 3 mb 1 device 0
// LOOPED: rp.compute tail job 3 layers 3 to 4 mb 0 device 1
// LOOPED: rp.compute backward job 4 layers 2 to 3 mb 0 device 0 weights 2
// LOOPED: rp.compute backward job 4 layers 2 to 3 mb 1 device 0
// LOOPED: rp.compute backward job 6 layers 0 to 1 mb 0 device 0 weights 0
// LOOPED: rp.compute backward job 6 layers 0 to 1 mb 1 device 0
// ASYMMETRIC: exit 1
// INTERLEAVED: exit 1
// NOPARTITION: exit 1
// TOOMANY: exit 1
// TWICE: exit 1
