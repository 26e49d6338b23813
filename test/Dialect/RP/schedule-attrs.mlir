// RUN: rp-opt %s --split-input-file | rp-opt --split-input-file | FileCheck %s
// RUN: rp-opt %S/Inputs/schedule-attrs-invalid.mlir --split-input-file --verify-diagnostics

// The decision rp-partition records: typed schedule kind, partitioner,
// recompute grain and hardware, written as the strings the options use;
// the defaults (partitioner rp, recompute stage) are left out.
// CHECK-LABEL: func.func @choices
// CHECK-SAME: #rp.partition<schedule = "looped-bfs", devices = 2, microbatches = 4, hw = "/tmp/my profile.json", recompute = "layer", forward = [1], backward = [1, 1]>
func.func @choices() attributes {rp.partition = #rp.partition<schedule = "looped-bfs", devices = 2, microbatches = 4, hw = "/tmp/my profile.json", partitioner = "rp", recompute = "layer", forward = [1], backward = [1, 1]>} {
  return
}

// -----

// A grain per backward stage after the tail (rp-choose-recompute's
// choice); a list of equal grains reads as that grain; auto not chosen yet.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: recompute = ["layer", "stage"], forward = [2, 2], backward = [1, 2, 2]
func.func @mixed() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", recompute = ["layer", "stage"], forward = [2, 2], backward = [1, 2, 2]>} {
  return
}
// CHECK-LABEL: func.func @uniform
// CHECK-SAME: recompute = "layer", forward = [2, 2]
func.func @uniform() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", recompute = ["layer", "layer"], forward = [2, 2], backward = [1, 2, 2]>} {
  return
}
// CHECK-LABEL: func.func @auto
// CHECK-SAME: recompute = "auto", forward = [2, 2]
func.func @auto() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 3, hw = "rtx4090", recompute = "auto", forward = [2, 2], backward = [1, 2, 2]>} {
  return
}

// -----

// CHECK-LABEL: func.func @roundpipe
// CHECK-SAME: hw = "h100", partitioner = "roundpipe", forward = []
func.func @roundpipe() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 1, microbatches = 1, hw = "h100", partitioner = "roundpipe", forward = [], backward = [2]>} {
  return
}

// -----

// The hardware on its own.
// CHECK-LABEL: func.func @hw
// CHECK-SAME: rp.hw = #rp.hw<"rtx3090">
func.func @hw() attributes {rp.hw = #rp.hw<"rtx3090">} {
  return
}

// -----

// The schedule keeps no copy of the decision: its kind, devices,
// microbatches and hardware are its function's partition's.
// CHECK-LABEL: func.func private @main
// CHECK-SAME: #rp.partition<schedule = "interleaved-1f1b", devices = 2, microbatches = 2, hw = "a800", forward = [1], backward = [1, 1]>
// CHECK: rp.schedule @main {
func.func private @main() attributes {rp.partition = #rp.partition<schedule = "interleaved-1f1b", devices = 2, microbatches = 2, hw = "a800", forward = [1], backward = [1, 1]>}
rp.schedule @main {
}

// -----

// Round-robin's fused tail as two stage jobs taking alternate microbatches
// is part of the decision; one job (the default) is left unwritten.
// CHECK-LABEL: func.func @two_tail_jobs
// CHECK-SAME: hw = "rtx4090", tail_jobs = 2, forward = [2], backward = [2, 2]>
func.func @two_tail_jobs() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 4, microbatches = 5, hw = "rtx4090", tail_jobs = 2, forward = [2], backward = [2, 2]>} {
  return
}

// -----

// With one microbatch two tail jobs take alternate token slices: the
// attribute parses, and the pipeline passes refuse it without slices
// (token-slices-tail-jobs.mlir).
// CHECK-LABEL: func.func @two_tail_jobs_one_microbatch
// CHECK-SAME: microbatches = 1, hw = "rtx4090", tail_jobs = 2
func.func @two_tail_jobs_one_microbatch() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 4, microbatches = 1, hw = "rtx4090", tail_jobs = 2, forward = [2], backward = [2, 2]>} {
  return
}

// -----

// CHECK-LABEL: func.func @one_tail_job
// CHECK-SAME: hw = "rtx4090", forward = [2], backward = [2, 2]>
func.func @one_tail_job() attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 4, microbatches = 5, hw = "rtx4090", tail_jobs = 1, forward = [2], backward = [2, 2]>} {
  return
}
