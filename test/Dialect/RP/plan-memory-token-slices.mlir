// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers --rp-plan-memory --rp-verify-schedule | FileCheck %s
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers "--rp-plan-memory=arena-copies=1" | FileCheck %s --check-prefix=ONE
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-lower-schedule --rp-insert-transfers "--rp-plan-memory=arena-copies=1" | FileCheck %s --check-prefix=UNSLICED
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers \
// RUN:   | sed -E 's/(rp.copy h2d activation job 0 mb 1 device 0 bytes 192 boundary 1) after\([^)]*\)/\1/' \
// RUN:   | not rp-opt --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=EARLY
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers --rp-plan-memory \
// RUN:   | sed -E '0,/rp.compute tail/ s/(rp.compute tail .*offsets = array<i64: -?[0-9]+, -?[0-9]+, -?[0-9]+, -?[0-9]+), -?[0-9]+>/\1>/' \
// RUN:   | not rp-opt --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=NOACC
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-lower-schedule --rp-insert-transfers --rp-plan-memory \
// RUN:   | sed -E '0,/rp.compute backward/ s/(rp.compute backward .*offsets = array<i64: [^>]*)>/\1, 0>/' \
// RUN:   | not rp-opt --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=EXTRA

// rp-plan-memory and rp-verify-schedule on a token-sliced schedule (slices
// 3, 4, 5 at offsets 0, 3, 7 of one sequence; the schedule of
// insert-transfers-token-slices.mlir). Each attention layer keeps 64 bytes
// of keys and values per token.
//
// The plan's bytes (TokenSlicesTest.MemoryPlanHoldsEachPrefixAndTheKeyGradients
// checks the same rules buffer by buffer): each compute's input holds the
// uploads it waits for, its kept prefix among them, so the tail's sweep of
// slice 1 and its fused command of slice 1 have an input each (384 bytes
// of the slice's activation + 192 of rows [0, 3) = 576, not one of 1152);
// the tail (job 1, device 1) and the backward job 2 (device 0) each sum
// their key and value gradients over their slices in an accumulator of
// the last slice's prefix, 7 rows x 64 = 448 bytes, live from its first
// compute to its last. Device 1's arena: weights and gradients 10240, the
// work of a fused command at most 8808, the inputs and outputs around
// them: 21480 (device 0 20360). Before the activation copies were sized by
// their slice (insert-transfers-token-slices.mlir, BYTES) each held the
// whole sequence's 1152 bytes: 23592 and 21920.
// CHECK: rp.schedule @main attributes {arena_copies = 2 : i64, {{.*}}peak_bytes = array<i64: 20360, 21480>, {{.*}}rp.token_slices = 3

// With one copy of the arenas the step is timed again as the run holds its
// passes, on the sliced schedule (three microbatches, the tail's sweep,
// the kept keys' copies, the key-gradient accumulator's kernels, a
// launch per prefix concat input and a slice gradient's zeroing: 0.736
// ms), not on the unsliced one (0.316 ms).
// ONE: rp.schedule @main attributes {arena_copies = 1 : i64, bubble = 0.79205{{[0-9]*}} : f64, {{.*}}step_ms = 0.73560{{[0-9]*}} : f64
// UNSLICED: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}step_ms = 0.31566{{[0-9]*}} : f64

// A prefix upload that does not wait for the download of its rows: the
// forward of slice 1 would read slice 0's keys before they reach the host.
// EARLY: error: 'rp.compute' op reads the kept keys and values of earlier token slices before they arrive: its upload comes before the download of layer 1's keys of microbatch 0

// The accumulator's place: every fused and backward compute of a job that
// sums key gradients has a fifth offset, its job's accumulator (the same
// for all of the job's computes); a forward, the tail's sweep included,
// has four. rp-verify-schedule refuses a compute of such a job without it,
// and a compute of an unsliced schedule with one.
// CHECK: rp.compute forward job 1 layers 2 to 4 mb 0 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>
// CHECK: rp.compute forward job 1 layers 2 to 4 mb 1 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>
// CHECK: rp.compute tail job 1 layers 2 to 4 mb 2 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[TACC:[0-9]+]]>
// CHECK: rp.compute tail job 1 layers 2 to 4 mb 1 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[TACC]]>
// CHECK: rp.compute tail job 1 layers 2 to 4 mb 0 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[TACC]]>
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 2 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[BACC:[0-9]+]]>
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 1 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[BACC]]>
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 0 {{.*}}offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}, [[BACC]]>
// NOACC: error: 'rp.compute' op sums the key and value gradients of its later token slices but has no offset for their accumulator
// EXTRA: error: 'rp.compute' op has an offset for a key and value gradient accumulator its job does not have
