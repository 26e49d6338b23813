// The plan as rp-plan-memory wrote it passes; each RUN below breaks one
// rule with sed and expects the verifier's error for it.
// RUN: rp-opt %S/Inputs/four-layers-schedule.mlir --rp-verify-schedule | FileCheck %s --check-prefix=OK
// OK: rp.partition = #rp.partition<schedule = "round-robin"
// OK: rp.schedule @main

// Read after event: job 1's compute no longer waits for its input upload.
// RUN: sed 's/after(%%2, %%8)/after(%%2)/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=INPUT
// INPUT: error: 'rp.compute' op reads the activation entering layer 1 before it arrives: no upload to device 1 happens before it after a download of it from job 0
// INPUT: exit 1

// The upload without the download it copies from.
// RUN: sed 's/boundary 1 after(%%6) {ms = 2.560000e-06 : f64}$/boundary 1 {ms = 2.560000e-06 : f64}/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=INPUT

// Weights: job 0's compute no longer waits for its weight upload.
// RUN: sed 's/after(%%0, %%1)/after(%%1)/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=WEIGHTS
// WEIGHTS: error: 'rp.compute' op may run before its weights arrive: the upload of chunk 0 of weight set 0 does not happen before it; wait for it
// WEIGHTS: exit 1

// Gradients downloaded before the last backward has computed them.
// RUN: sed 's/weight_grads job 4 device 0 bytes 256 after(%%22)/weight_grads job 4 device 0 bytes 256 after(%%21)/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=GRADS
// GRADS: error: 'rp.copy' op downloads the gradients of weight set 4 before B4 mb0 has added to them
// GRADS: exit 1

// The optimizer no longer waits for job 4's gradients.
// RUN: sed 's/optimizer_step after(%%15, %%20, %%23)/optimizer_step after(%%15, %%20)/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=OPT
// OPT: error: 'rp.optimizer_step' op may start before the gradients of weight set 4 are downloaded; the step's update needs all of them
// OPT: exit 1

// Memory: job 4's weights placed over the tail's, which may still be live.
// RUN: sed 's/offsets = array<i64: 1472,/offsets = array<i64: 448,/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=OVERLAP
// OVERLAP: error: 'rp.schedule' op places weights of set 2 (layers 2-3) and weights of set 4 (layers 0-0) in overlapping bytes of device 0 while both may be live
// OVERLAP: exit 1

// Memory: over the budget the plan was made for, and a wrong peak.
// RUN: sed 's/budget_bytes = 25769803776/budget_bytes = 1000/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BUDGET
// BUDGET: error: 'rp.schedule' op needs 1984 bytes on device 0, over its budget of 1000
// BUDGET: exit 1
// RUN: sed 's/peak_bytes = array<i64: 1984,/peak_bytes = array<i64: 100,/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=PEAK
// PEAK: error: 'rp.schedule' op records a peak of 100 bytes on device 0 but its buffers reach 1984
// PEAK: exit 1

// No deadlock: waits are SSA values listed before their users and queue
// order is list order, so a wait on a later command (the only way to
// close a cycle) does not even parse.
// RUN: sed 's/after(%%0, %%1)/after(%%0, %%9)/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=CYCLE
// CYCLE: error: operand #1 does not dominate this use
// CYCLE: exit 1

// Gradients of a weight set downloaded twice.
// RUN: sed 's/^\(.*\)%%23 = rp.copy d2h weight_grads job 4\(.*\)$/\1%%99 = rp.copy d2h weight_grads job 4\2\n\1%%23 = rp.copy d2h weight_grads job 4\2/' %S/Inputs/four-layers-schedule.mlir | (rp-opt --rp-verify-schedule 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TWICE
// TWICE: error: 'rp.compute' op computes gradients of weight set 4, which are downloaded 2 times instead of once
// TWICE: exit 1
