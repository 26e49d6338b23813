// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers | FileCheck %s
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers | FileCheck %s --check-prefix=SWEEP
// RUN: rp-opt %S/Inputs/two-attentions.mlir --rp-attach-loss "--rp-partition=devices=2 hw=host stages=fwd:2;bwd:2,2 microbatches=1" --rp-slice-tokens=slices=3,4,5 --rp-lower-schedule --rp-insert-transfers | FileCheck %s --check-prefix=BYTES

// rp-insert-transfers on a token-sliced schedule (slices 3, 4, 5 at
// offsets 0, 3, 7): beside the unsliced plan's copies, the kept keys and
// values travel through host rows (activation copies marked
// rp.kept_keys). Each attention layer keeps 64 bytes per token (keys and
// values, one head of 8 f32). A forward of slice 0 or 1 sends its own rows
// down (3 or 4 tokens: 192 or 256 bytes); every command of slice 1 or 2
// of a job with an attention brings rows [0, o) up (3 or 7 tokens: 192 or
// 448 bytes), waiting for the downloads of those rows; a forward's of
// slice 2 in two copies, rows [0, 3) and [3, 7). Job 0 holds
// attn.0 (boundary 1: the first layer whose keys the copy carries), the
// tail job 1 attn.1, whose keys its forward sweep makes; the backward
// job 2 reads attn.0's rows that job 0 sent.

// The steady step is timed with the kept keys' copies and the key-gradient
// accumulator's kernels, each launch charged (0.606 ms, 75% bubble; a
// launch per prefix concat input and the slice gradients' zeroing
// counted since session 23);
// rp-predict-token-slices, on the mean of the slices' costs and the
// kernels a slice adds, predicts 0.600 ms, 76%.
// CHECK-LABEL: rp.schedule @main attributes {bubble = 0.74739{{[0-9]*}} : f64, {{.*}}rp.token_slices = 3 : i64, step_ms = 0.60555{{[0-9]*}} : f64
// CHECK: %[[F0:.+]] = rp.compute forward job 0 layers 0 to 2 mb 0
// CHECK: %[[D0:.+]] = rp.copy d2h activation job 0 mb 0 device 0 bytes 192 boundary 1 after(%[[F0]]) {{.*}}rp.kept_keys
// CHECK: %[[U1:.+]] = rp.copy h2d activation job 0 mb 1 device 0 bytes 192 boundary 1 after(%[[D0]]) {{.*}}rp.kept_keys
// A forward's prefix of slice 2 comes up in two parts: slice 0's rows as
// soon as they are down (and slice 0's compute freed the buffer), while
// slice 1 computes; slice 1's after their download.
// CHECK: %[[U2A:.+]] = rp.copy h2d activation job 0 mb 2 device 0 bytes 192 boundary 1 after(%[[D0]], %[[F0]]) {{.*}}rp.kept_keys, rp.kept_slices = array<i64: 0, 1>}
// The tail's sweep of slice 0, beside the forward of slice 1.
// CHECK-DAG: %[[F1:.+]] = rp.compute forward job 0 layers 0 to 2 mb 1 device 0 weights 0 after({{.*}}%[[U1]])
// CHECK-DAG: %[[S0:.+]] = rp.compute forward job 1 layers 2 to 4 mb 0 device 1
// CHECK-DAG: %[[D1:.+]] = rp.copy d2h activation job 0 mb 1 device 0 bytes 256 boundary 1 after(%[[F1]]) {{.*}}rp.kept_keys
// CHECK-DAG: %[[SD0:.+]] = rp.copy d2h activation job 1 mb 0 device 1 bytes 192 boundary 2 after(%[[S0]]) {{.*}}rp.kept_keys
// CHECK: %[[U2:.+]] = rp.copy h2d activation job 0 mb 2 device 0 bytes 256 boundary 1 after(%[[D1]], {{.+}}rp.kept_keys, rp.kept_slices = array<i64: 1, 2>}
// The order of these four follows their times (the list schedule).
// CHECK-DAG: %[[B2U:.+]] = rp.copy h2d activation job 2 mb 2 device 0 bytes 448 boundary 1 after(%[[D0]], %[[D1]], {{.+}}rp.kept_keys
// CHECK-DAG: %[[SU1:.+]] = rp.copy h2d activation job 1 mb 1 device 1 bytes 192 boundary 2 after(%[[SD0]]) {{.*}}rp.kept_keys
// CHECK-DAG: rp.compute forward job 0 layers 0 to 2 mb 2 device 0 weights 0 after({{.*}}%[[U2A]], %[[U2]])
// CHECK-DAG: %[[S1:.+]] = rp.compute forward job 1 layers 2 to 4 mb 1 device 1 weights 1 after({{.*}}%[[SU1]])
// The last slice sends nothing down.
// CHECK-NOT: d2h activation job 0 mb 2 device 0 bytes {{[0-9]+}} boundary 1
// CHECK: %[[SD1:.+]] = rp.copy d2h activation job 1 mb 1 device 1 bytes 256 boundary 2 after(%[[S1]]) {{.*}}rp.kept_keys
// CHECK: %[[TU2:.+]] = rp.copy h2d activation job 1 mb 2 device 1 bytes 448 boundary 2 after(%[[SD0]], %[[SD1]], {{.+}}rp.kept_keys
// CHECK: %[[TU1:.+]] = rp.copy h2d activation job 1 mb 1 device 1 bytes 192 boundary 2 after(%[[SD0]], {{.+}}rp.kept_keys
// The fused tail waits for its sweep on its own device: no copy between
// them (the rows go by the copies above; the second run checks that no
// gradient moves before the last slice's fused command).
// CHECK: rp.compute tail job 1 layers 2 to 4 mb 2 device 1 weights 1 after({{.*}}%[[S0]], %[[S1]], {{.*}}%[[TU2]])
// CHECK: rp.compute tail job 1 layers 2 to 4 mb 1 device 1 weights 1 after({{.*}}%[[TU1]])
// CHECK: rp.copy h2d activation job 2 mb 1 device 0 bytes 192 boundary 1 after(%[[D0]], {{.+}}rp.kept_keys
// CHECK: rp.compute backward job 2 layers 0 to 2 mb 2 device 0 weights 2 after({{.*}}%[[B2U]])
// Slice 0 reads no earlier rows.
// CHECK-NOT: rp.kept_keys
// CHECK: rp.optimizer_step

// SWEEP-LABEL: rp.schedule
// SWEEP-NOT: gradient job 1
// SWEEP: rp.compute tail job 1 layers 2 to 4 mb 2

// A slice's activations and their gradients travel at its own tokens (96
// bytes a token at boundary 2: 3, 4 and 5 tokens), as the exporter
// writes them, not at the whole sequence's 1152 bytes, which @main's
// costs give (before, every slice's copy was 1152 bytes: the written
// plan's step and its pinned host memory counted K sequences).
// BYTES: rp.copy d2h activation job 0 mb 0 device 0 bytes 288 boundary 2
// BYTES: rp.copy d2h activation job 0 mb 1 device 0 bytes 384 boundary 2
// BYTES: rp.copy d2h activation job 0 mb 2 device 0 bytes 480 boundary 2
// BYTES: rp.copy d2h gradient job 1 mb 2 device 1 bytes 480 boundary 2
