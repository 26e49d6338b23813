// rp-opt four-layers.mlir --rp-partition="devices=2 hw=rtx4090 stages=fwd:1,1;bwd:2,1,1 microbatches=1"
//   --rp-lower-schedule --rp-insert-transfers --rp-plan-memory: a valid plan that
// verify-schedule.mlir breaks one rule at a time.
module {
  func.func @main(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32> attributes {rp.partition = #rp.partition<schedule = "round-robin", devices = 2, microbatches = 1, hw = "rtx4090", forward = [1, 1], backward = [2, 1, 1]>} {
    %0 = rp.param "l0.weight" trainable at "w.bin"[0] : tensor<8x8xf32>
    %1 = rp.param "l1.weight" trainable at "w.bin"[256] : tensor<8x8xf32>
    %2 = rp.param "l2.weight" trainable at "w.bin"[512] : tensor<8x8xf32>
    %3 = rp.param "l3.weight" trainable at "w.bin"[768] : tensor<8x8xf32>
    %4 = rp.layer "l0"(%arg0, %0) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
    ^bb0(%arg1: tensor<2x8xf32>, %arg2: tensor<8x8xf32>):
      %8 = rp.matmul %arg1, %arg2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      rp.yield %8 : tensor<2x8xf32>
    }
    %5 = rp.layer "l1"(%4, %1) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
    ^bb0(%arg1: tensor<2x8xf32>, %arg2: tensor<8x8xf32>):
      %8 = rp.matmul %arg1, %arg2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      rp.yield %8 : tensor<2x8xf32>
    }
    %6 = rp.layer "l2"(%5, %2) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
    ^bb0(%arg1: tensor<2x8xf32>, %arg2: tensor<8x8xf32>):
      %8 = rp.matmul %arg1, %arg2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      rp.yield %8 : tensor<2x8xf32>
    }
    %7 = rp.layer "l3"(%6, %3) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> {
    ^bb0(%arg1: tensor<2x8xf32>, %arg2: tensor<8x8xf32>):
      %8 = rp.matmul %arg1, %arg2 : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      rp.yield %8 : tensor<2x8xf32>
    }
    return %7 : tensor<2x8xf32>
  }
  rp.schedule @main attributes {budget_bytes = 25769803776 : i64, peak_bytes = array<i64: 1984, 960>, pinned_bytes = 2176 : i64} {
    %0 = rp.copy h2d weights job 0 device 0 bytes 256 {ms = 1.024000e-05 : f64}
    %1 = rp.copy h2d activation job 0 mb 0 device 0 bytes 64 boundary 0 {ms = 2.560000e-06 : f64}
    %2 = rp.copy h2d weights job 1 device 1 bytes 256 {ms = 1.024000e-05 : f64}
    %3 = rp.compute forward job 0 layers 0 to 1 mb 0 device 0 weights 0 after(%0, %1) {ms = 0.0040004761904761906 : f64, offsets = array<i64: 0, 256, 320, 384>, work_bytes = 64 : i64}
    %4 = rp.copy h2d weights job 2 device 0 bytes 512 {ms = 2.048000e-05 : f64}
    %5 = rp.copy h2d weights job 3 device 1 bytes 256 {ms = 1.024000e-05 : f64}
    %6 = rp.copy d2h activation job 0 mb 0 device 0 bytes 64 boundary 1 after(%3) {ms = 2.560000e-06 : f64}
    %7 = rp.copy h2d weights job 4 device 0 bytes 256 after(%3) {ms = 1.024000e-05 : f64}
    %8 = rp.copy h2d activation job 1 mb 0 device 1 bytes 64 boundary 1 after(%6) {ms = 2.560000e-06 : f64}
    %9 = rp.compute forward job 1 layers 1 to 2 mb 0 device 1 weights 1 after(%2, %8) {ms = 0.0040004761904761906 : f64, offsets = array<i64: 0, 768, 832, 896>, work_bytes = 64 : i64}
    %10 = rp.copy d2h activation job 1 mb 0 device 1 bytes 64 boundary 2 after(%9) {ms = 2.560000e-06 : f64}
    %11 = rp.copy h2d activation job 2 mb 0 device 0 bytes 64 boundary 2 after(%10) {ms = 2.560000e-06 : f64}
    %12 = rp.compute tail job 2 layers 2 to 4 mb 0 device 0 weights 2 after(%4, %11) {ms = 0.024002857142857145 : f64, offsets = array<i64: 448, 0, 64, 128>, work_bytes = 192 : i64}
    %13 = rp.copy h2d activation job 4 mb 0 device 0 bytes 64 boundary 0 after(%3) {ms = 2.560000e-06 : f64}
    %14 = rp.copy d2h gradient job 2 mb 0 device 0 bytes 64 boundary 2 after(%12) {ms = 2.560000e-06 : f64}
    %15 = rp.copy d2h weight_grads job 2 device 0 bytes 512 after(%12) {ms = 2.048000e-05 : f64}
    %16 = rp.copy h2d gradient job 3 mb 0 device 1 bytes 64 boundary 2 after(%14) {ms = 2.560000e-06 : f64}
    %17 = rp.copy h2d activation job 3 mb 0 device 1 bytes 64 boundary 1 after(%6) {ms = 2.560000e-06 : f64}
    %18 = rp.compute backward job 3 layers 1 to 2 mb 0 device 1 weights 3 after(%5, %16, %17) {ms = 0.012001428571428573 : f64, offsets = array<i64: 256, 0, 128, 768>, work_bytes = 128 : i64}
    %19 = rp.copy d2h gradient job 3 mb 0 device 1 bytes 64 boundary 1 after(%18) {ms = 2.560000e-06 : f64}
    %20 = rp.copy d2h weight_grads job 3 device 1 bytes 256 after(%18) {ms = 1.024000e-05 : f64}
    %21 = rp.copy h2d gradient job 4 mb 0 device 0 bytes 64 boundary 1 after(%19, %3) {ms = 2.560000e-06 : f64}
    %22 = rp.compute backward job 4 layers 0 to 1 mb 0 device 0 weights 4 after(%7, %13, %21, %6) {ms = 0.0080009523809523811 : f64, offsets = array<i64: 1472, 320, 0, 0>, work_bytes = 128 : i64}
    %23 = rp.copy d2h weight_grads job 4 device 0 bytes 256 after(%22) {ms = 1.024000e-05 : f64}
    %24 = rp.optimizer_step after(%15, %20, %23) {ms = 0.000000e+00 : f64}
  }
}

