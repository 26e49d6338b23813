// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1" | FileCheck %s --check-prefix=USER
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090" | FileCheck %s --check-prefix=RP
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=1" | FileCheck %s --check-prefix=ONE
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=1f1b microbatches=4" | FileCheck %s --check-prefix=STATIC
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=interleaved-1f1b microbatches=4" | FileCheck %s --check-prefix=INTERLEAVED
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 partitioner=roundpipe recompute=layer" | FileCheck %s --check-prefix=CHOICES
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="partitioner=greedy" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BADPARTITIONER
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="schedule=zero-bubble" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BADSCHEDULE
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=0" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=BAD
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="schedule=gpipe partitioner=roundpipe" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=MIXED
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="stages=fwd:1;bwd:1,1,1,1" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=COVER
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="stage-bytes=300 stages=fwd:2;bwd:2,1,1" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=CAP
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 tail-jobs=2" | FileCheck %s --check-prefix=TAIL2
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=1 microbatches=3 tail-jobs=2" | FileCheck %s --check-prefix=TAIL2ONE
// RUN: rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 microbatches=1 tail-jobs=2" | FileCheck %s --check-prefix=TAIL2M1
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 tail-jobs=3" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TAIL3
// RUN: (rp-opt %S/Inputs/four-layers.mlir --rp-partition="devices=2 schedule=gpipe tail-jobs=2" 2>&1; echo "exit $?") | FileCheck %s --check-prefix=TAILSTATIC

// A user partition is recorded as given, with the target it was made for;
// microbatches default to devices + 1.
// USER: func.func @main{{.*}} attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", forward = [1, 1], backward = [2, 1, 1]>}

// rp's partitioner cuts stages that cover the layers.
// RP: rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", forward = [{{.*}}], backward = [{{.*}}]>

// One device: one microbatch by default, the host profile.
// ONE: #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "host"

// Static schedules cut symmetric balanced stages: 1F1B one per device,
// interleaved two per device; the last stage is the fused tail.
// STATIC: #rp.partition<schedule = "1f1b", devices = 2, microbatches = 4, hw = "host", forward = [2], backward = [2, 2]>
// INTERLEAVED: #rp.partition<schedule = "interleaved-1f1b", devices = 2, microbatches = 4, hw = "host", forward = [1, 1, 1], backward = [1, 1, 1, 1]>

// The partitioner and the recompute grain are part of the decision; the
// defaults (rp, stage) are left unwritten.
// CHOICES: #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", partitioner = "roundpipe", recompute = "layer", forward = [

// The schedule and the partitioner are enum options: a name outside them is
// refused when the options are parsed.
// BADPARTITIONER: for the --partitioner option: Cannot find option named 'greedy'
// BADSCHEDULE: for the --schedule option: Cannot find option named 'zero-bubble'
// BAD: error: rp-partition needs devices >= 1, 0 < weight-budget <= 1, stage-bytes >= 0, budget-gib >= 0, host-budget-gib >= 0 and 0 <= host-slack-pct <= 100
// MIXED: error: partitioner=roundpipe cuts round-robin stages; gpipe uses balanced static stages
// COVER: error: stages 'fwd:1;bwd:1,1,1,1' do not cover the 4 layers
// CAP: error: forward stage of layers 0-1 ('l0' to 'l1') needs 512 bytes of weights, over the per-stage cap of 300 bytes; split the stage or raise weight-budget
// BAD: exit 1
// BADPARTITIONER: exit 1
// BADSCHEDULE: exit 1
// CAP: exit 1
// COVER: exit 1
// MIXED: exit 1

// The fused tail as two stage jobs (alternate microbatches) is recorded
// with the stages, also on one device (the reference that sums the tail's
// gradients as the plans it is compared with do); one microbatch has no
// odd fold and runs one tail job.
// TAIL2: #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", tail_jobs = 2, forward = [1, 1], backward = [2, 1, 1]>
// TAIL2ONE: #rp.partition<schedule = "round-robin", devices = 1, microbatches = 3, hw = "host", tail_jobs = 2, forward =
// TAIL2M1: #rp.partition<schedule = "round-robin", devices = 2, microbatches = 1, hw = "host", forward =
// TAIL3: error: rp-partition tail-jobs=3: plans run the fused tail as 1 or 2 round-robin stage jobs (0 lets rp's partitioner choose); a tail split by layers is in the timing model only (rp-print-partition tail-pair=N)
// TAIL3: exit 1
// TAILSTATIC: error: rp-partition tail-jobs=2: plans run the fused tail as 1 or 2 round-robin stage jobs
// TAILSTATIC: exit 1
