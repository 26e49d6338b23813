// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers --rp-plan-memory --rp-verify-schedule | FileCheck %s
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers "--rp-plan-memory=arena-copies=1" | FileCheck %s --check-prefix=ONE
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-lower-schedule --rp-insert-transfers "--rp-plan-memory=arena-copies=1" | FileCheck %s --check-prefix=UNSLICED
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers \
// RUN:   | sed -E 's/(rp.copy h2d activation job 0 mb 1 device 0 bytes 192 boundary 1) after\([^)]*\)/\1/' \
// RUN:   | not rp-opt --rp-verify-schedule 2>&1 | FileCheck %s --check-prefix=EARLY

// rp-plan-memory and rp-verify-schedule on a token-sliced schedule (slices
// 3, 4, 5 at offsets 0, 3, 7 of one sequence; the schedule of
// insert-transfers-token-slices.mlir). Each attention layer keeps 64 bytes
// of keys and values per token.
//
// The plan's bytes (TokenSlicesTest.MemoryPlanHoldsEachPrefixAndTheKeyGradients
// checks the same rules buffer by buffer): each compute's input holds the
// uploads it waits for, its kept prefix among them, so the tail's sweep of
// slice 1 and its fused command of slice 1 have an input each (1152 bytes
// of activation + 192 of rows [0, 3) = 1344, not one of 2688); the tail
// (job 1, device 1) and the backward job 2 (device 0) each sum their key
// and value gradients over their slices in an accumulator of the last
// slice's prefix, 7 rows x 64 = 448 bytes, live from its first compute to
// its last. Device 1's arena: weights and gradients 10240, the work of a
// fused command at most 8808, the inputs and outputs around them: 23840.
// CHECK: rp.schedule @main attributes {arena_copies = 2 : i64, {{.*}}peak_bytes = array<i64: 26080, 23840>, {{.*}}rp.token_slices = 3

// With one copy of the arenas the step is timed again as the run holds its
// passes, on the sliced schedule (three microbatches, the tail's sweep),
// not on the unsliced one (0.308 ms).
// ONE: rp.schedule @main attributes {arena_copies = 1 : i64, bubble = 0.76987{{[0-9]*}} : f64, {{.*}}step_ms = 0.52266{{[0-9]*}} : f64
// UNSLICED: rp.schedule @main attributes {arena_copies = 1 : i64, {{.*}}step_ms = 0.30796{{[0-9]*}} : f64

// A prefix upload that does not wait for the download of its rows: the
// forward of slice 1 would read slice 0's keys before they reach the host.
// EARLY: error: 'rp.compute' op reads the kept keys and values of earlier token slices before they arrive: its upload comes before the download of layer 1's keys of microbatch 0
