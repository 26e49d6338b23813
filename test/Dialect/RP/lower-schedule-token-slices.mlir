// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule | FileCheck %s
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=2" --rp-slice-tokens=slices=2 --rp-lower-schedule | FileCheck %s --check-prefix=TWO
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule | FileCheck %s --check-prefix=COST
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-lower-schedule | FileCheck %s --check-prefix=WHOLE
// RUN: not rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1 schedule=1f1b" --rp-slice-tokens=slices=2 --rp-lower-schedule 2>&1 | FileCheck %s --check-prefix=ONEF

// rp-lower-schedule with token slices (rp-slice-tokens' functions in the
// module): K slices per sequence run as microbatches (slice k of sequence
// m is microbatch m * K + k). The forward jobs run them in slice order;
// the tail and the backward jobs last slice first, because a slice's key
// and value gradients are summed from the slices after it; and before the
// tail runs the last slice, it runs a forward of each earlier slice as the
// slice arrives, for the keys and values of its own attention (attn.1
// here, whose slice 2 reads those of slices 0 and 1).

// CHECK-LABEL: rp.schedule @main attributes {rp.token_slices = 3 : i64}
// CHECK: %[[F0:.+]] = rp.compute forward job 0 layers 0 to 2 mb 0 device 0
// CHECK: %[[F1:.+]] = rp.compute forward job 0 layers 0 to 2 mb 1 device 0
// CHECK: %[[S0:.+]] = rp.compute forward job 1 layers 2 to 4 mb 0 device 1 weights 1 after(%[[F0]])
// CHECK: %[[F2:.+]] = rp.compute forward job 0 layers 0 to 2 mb 2 device 0
// CHECK: %[[S1:.+]] = rp.compute forward job 1 layers 2 to 4 mb 1 device 1 weights 1 after(%[[F1]])
// CHECK: %[[T2:.+]] = rp.compute tail job 1 layers 2 to 4 mb 2 device 1 weights 1 after(%[[F2]], %[[S0]], %[[S1]])
// CHECK: %[[T1:.+]] = rp.compute tail job 1 layers 2 to 4 mb 1 device 1 weights 1 after(%[[F1]])
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 2 device 0 weights 2 after(%[[T2]])
// CHECK: %[[T0:.+]] = rp.compute tail job 1 layers 2 to 4 mb 0 device 1 weights 1 after(%[[F0]])
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 1 device 0 weights 2 after(%[[T1]])
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 0 device 0 weights 2 after(%[[T0]])
// CHECK-NOT: rp.compute

// Two sequences of two slices: microbatches 0, 1 and 2, 3; each
// sequence's tail and backward run slice 1 before slice 0.
// TWO-LABEL: rp.schedule @main attributes {rp.token_slices = 2 : i64}
// TWO: rp.compute tail job 1 layers 2 to 4 mb 1
// TWO: rp.compute tail job 1 layers 2 to 4 mb 0
// TWO: rp.compute backward job 2 layers 0 to 2 mb 1
// TWO: rp.compute backward job 2 layers 0 to 2 mb 0
// TWO: rp.compute tail job 1 layers 2 to 4 mb 3
// TWO: rp.compute tail job 1 layers 2 to 4 mb 2
// TWO: rp.compute backward job 2 layers 0 to 2 mb 3
// TWO: rp.compute backward job 2 layers 0 to 2 mb 2

// Each compute command is sized (and timed) by its slice: the layer costs
// of the slice's own function, 3, 4 and 5 tokens whose attention reads 0, 3
// and 7 kept keys, not the whole sequence's 12 (the second run: the unsliced
// schedule's).
// COST: rp.compute forward job 0 layers 0 to 2 mb 0 {{.*}}work_bytes = 576 :
// COST: rp.compute forward job 0 layers 0 to 2 mb 1 {{.*}}work_bytes = 1216 :
// COST: rp.compute forward job 0 layers 0 to 2 mb 2 {{.*}}work_bytes = 1408 :
// COST: rp.compute backward job 2 layers 0 to 2 mb 2 {{.*}}work_bytes = 8096 :
// COST: rp.compute backward job 2 layers 0 to 2 mb 1 {{.*}}work_bytes = 7168 :
// COST: rp.compute backward job 2 layers 0 to 2 mb 0 {{.*}}work_bytes = 6368 :
// WHOLE: rp.compute forward job 0 layers 0 to 2 mb 0 {{.*}}work_bytes = 2304 :
// WHOLE: rp.compute backward job 2 layers 0 to 2 mb 0 {{.*}}work_bytes = 10112 :

// rp-insert-transfers adds the kept keys' copies
// (insert-transfers-token-slices.mlir); rp-plan-memory and
// rp-verify-schedule plan and check them (plan-memory-token-slices.mlir).

// ONEF: error: token slices are modelled for the round-robin schedule only
