// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:3;bwd:1,3 microbatches=1" "--rp-predict-token-slices=slices=4 tail-jobs=2 cut=1" --rp-slice-tokens=slices=auto --rp-lower-schedule 2>&1 | FileCheck %s
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:3;bwd:1,3 microbatches=1" "--rp-predict-token-slices=slices=4 tail-jobs=2 cut=1" --rp-slice-tokens=slices=auto --rp-lower-schedule --rp-insert-transfers --rp-plan-memory --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=PLANNED
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:3;bwd:1,3 microbatches=1" "--rp-predict-token-slices=slices=4 tail-jobs=2 cut=1" --rp-slice-tokens=slices=auto --rp-lower-schedule | sed 's/tail job \([12]\) layers 3 to 4/tail job \1 layers 2 to 4/' | not rp-opt --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:3;bwd:1,3 microbatches=1" | sed 's/hw = "host", forward/hw = "host", tail_jobs = 2, forward/' | not rp-opt --rp-lower-schedule 2>&1 | FileCheck %s --check-prefix=UNSLICED
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=2 | sed 's/hw = "host", forward/hw = "host", tail_jobs = 2, forward/' | not rp-opt --rp-lower-schedule 2>&1 | FileCheck %s --check-prefix=KEYS
// RUN: not rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" "--rp-predict-token-slices=slices=2 tail-jobs=2 cut=1" 2>&1 | FileCheck %s --check-prefix=PREDICT
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:3;bwd:1,3 microbatches=2" --rp-slice-tokens=slices=3 | sed 's/hw = "host", forward/hw = "host", tail_jobs = 2, forward/' | not rp-opt --rp-lower-schedule 2>&1 | FileCheck %s --check-prefix=ODD

// The fused tail as two jobs on alternate token slices (docs/token-slices.md,
// "The head-only tail as two jobs"): with the head alone as the tail (layer
// 3, the loss; no attention), four slices of one sequence, tail job 1 runs
// slices 2 then 0 and tail job 2 slices 3 then 1, each last first, and the
// backward job runs 3, 2, 1, 0, each after the tail job that ran its slice.
// The prediction says so, the partition records it, and the transfers, the
// memory plan and rp-verify-schedule take the schedule.
// CHECK: remark: token slices {{.*}}4 slices of 3,3,3,3 tokens (even; the tail as 2 jobs on alternate slices)
// CHECK: tail_jobs = 2, forward = [3], backward = [1, 3]
// CHECK: %[[T2:.+]] = rp.compute tail job 1 layers 3 to 4 mb 2 device 1
// CHECK: %[[T0:.+]] = rp.compute tail job 1 layers 3 to 4 mb 0 device 1
// CHECK: %[[T3:.+]] = rp.compute tail job 2 layers 3 to 4 mb 3 device 0
// CHECK: rp.compute backward job 3 layers 0 to 3 mb 3 device 1 {{.*}}after(%[[T3]])
// CHECK: %[[T1:.+]] = rp.compute tail job 2 layers 3 to 4 mb 1 device 0
// CHECK: rp.compute backward job 3 layers 0 to 3 mb 2 device 1 {{.*}}after(%[[T2]])
// CHECK: rp.compute backward job 3 layers 0 to 3 mb 1 device 1 {{.*}}after(%[[T1]])
// CHECK: rp.compute backward job 3 layers 0 to 3 mb 0 device 1 {{.*}}after(%[[T0]])
// PLANNED: rp.schedule @main attributes {{.*}}peak_bytes
// PLANNED-NOT: error

// A schedule whose two tail jobs hold an attention (layer 2, edited in):
// its next slice would read keys the other job made.
// VERIFY: error: 'rp.schedule' op runs the fused tail as 2 jobs on alternate token slices, but its layer 2 keeps keys and values for the later slices; a tail of several jobs must keep none (the head alone)

// Two tail jobs with one microbatch and no slices take nothing alternate.
// UNSLICED: error: rp.partition has tail_jobs = 2 with one microbatch and no token slices

// A tail that holds an attention (layers 2 and 3) as two jobs: refused by
// the schedule's lowering and by the prediction.
// KEYS: error: the fused tail as 2 jobs takes alternate token slices, so it must keep no keys, but its layer 2 has an attention
// PREDICT: error: rp-predict-token-slices tail-jobs=2: the fused tail as 2 jobs takes alternate token slices, so it must keep no keys, but its layer 2

// Two sequences of three slices: a tail job's slices would not alternate
// its buffers across the sequences.
// ODD: error: the fused tail as 2 jobs with 2 sequences a step needs an even slice count, not 3
