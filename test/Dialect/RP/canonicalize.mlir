// RUN: rp-opt %s -canonicalize -split-input-file | FileCheck %s

// Folds are exact: each positive case has a negative twin showing where the
// fold must stop.

// CHECK-LABEL: func.func @FoldIntegerShapeArithmetic
// CHECK-NEXT: %[[C:.+]] = rp.constant dense<[2, 16, 256]> : tensor<3xi64>
// CHECK-NEXT: return %[[C]]
func.func @FoldIntegerShapeArithmetic() -> tensor<3xi64> {
  %a = rp.constant dense<[2, 16, 64]> : tensor<3xi64>
  %b = rp.constant dense<[1, 1, 4]> : tensor<3xi64>
  %c = rp.mul %a, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %d = rp.add %c, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  %e = rp.sub %d, %b : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %e : tensor<3xi64>
}

// Constants broadcast before they combine, so `shape * -1` folds.
// CHECK-LABEL: func.func @FoldBroadcastingConstants
// CHECK-NEXT: rp.constant dense<{{\[}}[2, 3, 7], [5, 6, 10]]> : tensor<2x3xi64>
func.func @FoldBroadcastingConstants() -> tensor<2x3xi64> {
  %a = rp.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %b = rp.constant dense<[1, 1, 4]> : tensor<3xi64>
  %c = rp.add %a, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  return %c : tensor<2x3xi64>
}

// CHECK-LABEL: func.func @FoldFloatSplats
// CHECK-NEXT: %[[C:.+]] = rp.constant dense<1.500000e+00> : tensor<4xbf16>
// CHECK-NEXT: return %[[C]]
func.func @FoldFloatSplats() -> tensor<4xbf16> {
  %a = rp.constant dense<3.0> : tensor<4xbf16>
  %b = rp.constant dense<2.0> : tensor<4xbf16>
  %c = rp.div %a, %b : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  return %c : tensor<4xbf16>
}

// CHECK-LABEL: func.func @DontFoldIntegerDivisionByZero
// CHECK: rp.div
func.func @DontFoldIntegerDivisionByZero() -> tensor<2xi64> {
  %a = rp.constant dense<[4, 6]> : tensor<2xi64>
  %b = rp.constant dense<[2, 0]> : tensor<2xi64>
  %c = rp.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %c : tensor<2xi64>
}

// CHECK-LABEL: func.func @FoldMaxMin
// CHECK-NEXT: %[[C:.+]] = rp.constant dense<[3, 2]> : tensor<2xi32>
// CHECK-NEXT: return %[[C]]
func.func @FoldMaxMin() -> tensor<2xi32> {
  %a = rp.constant dense<[1, 5]> : tensor<2xi32>
  %b = rp.constant dense<[3, 2]> : tensor<2xi32>
  %c = rp.constant dense<[4, 2]> : tensor<2xi32>
  %m = rp.max %a, %b : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %n = rp.min %m, %c : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %n : tensor<2xi32>
}

// CHECK-LABEL: func.func @FoldExactIdentities
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldExactIdentities(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = rp.constant dense<1.0> : tensor<4xf32>
  %nzero = rp.constant dense<-0.0> : tensor<4xf32>
  %zero = rp.constant dense<0.0> : tensor<4xf32>
  %0 = rp.mul %x, %one : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = rp.div %0, %one : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = rp.add %1, %nzero : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = rp.sub %2, %zero : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = rp.pow %3, %one : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %4 : tensor<4xf32>
}

// x + 0.0 turns -0.0 into +0.0, and x * 1 with a broadcast changes the shape.
// CHECK-LABEL: func.func @DontFoldInexactIdentities
// CHECK: rp.add
// CHECK: rp.mul
func.func @DontFoldInexactIdentities(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2x4xf32>) {
  %zero = rp.constant dense<0.0> : tensor<4xf32>
  %one = rp.constant dense<1.0> : tensor<2x4xf32>
  %0 = rp.add %x, %zero : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = rp.mul %x, %one : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0, %1 : tensor<4xf32>, tensor<2x4xf32>
}

// Constants move to the right of commutative ops, so 1 * x folds too.
// CHECK-LABEL: func.func @FoldIdentityOnTheLeft
// CHECK-SAME: (%[[X:.+]]: tensor<4xi64>)
// CHECK-NEXT: return %[[X]]
func.func @FoldIdentityOnTheLeft(%x: tensor<4xi64>) -> tensor<4xi64> {
  %one = rp.constant dense<1> : tensor<4xi64>
  %0 = rp.mul %one, %x : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// CHECK-LABEL: func.func @FoldCompareConstants
// CHECK-NEXT: %[[C:.+]] = rp.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: return %[[C]]
func.func @FoldCompareConstants() -> tensor<3xi1> {
  %a = rp.constant dense<[1.0, 2.0, 0x7FC00000]> : tensor<3xf32>
  %b = rp.constant dense<[1.0, 3.0, 0x7FC00000]> : tensor<3xf32>
  %c = rp.cmp eq, %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return %c : tensor<3xi1>
}

// CHECK-LABEL: func.func @DontFoldCompareOfValues
// CHECK: rp.cmp
func.func @DontFoldCompareOfValues(%x: tensor<3xi64>) -> tensor<3xi1> {
  %a = rp.constant dense<[1, 2, 3]> : tensor<3xi64>
  %c = rp.cmp lt, %x, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  return %c : tensor<3xi1>
}

// CHECK-LABEL: func.func @FoldWhereOnSplatCondition
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[Y:.+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[Y]], %[[X]]
func.func @FoldWhereOnSplatCondition(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %f = rp.constant dense<false> : tensor<4xi1>
  %0 = rp.where %f, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = rp.where %f, %x, %x : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @DontFoldWhereThatBroadcasts
// CHECK: rp.where
func.func @DontFoldWhereThatBroadcasts(%x: tensor<4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %t = rp.constant dense<true> : tensor<4xi1>
  %0 = rp.where %t, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @FoldDoubleNegation
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldDoubleNegation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = rp.neg %x : tensor<4xf32>
  %1 = rp.neg %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @DontFoldSingleNegation
// CHECK: rp.neg
func.func @DontFoldSingleNegation(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = rp.neg %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// CHECK-LABEL: func.func @FoldNegConstant
// CHECK-NEXT: rp.constant dense<[-1, 2]> : tensor<2xi64>
func.func @FoldNegConstant() -> tensor<2xi64> {
  %a = rp.constant dense<[1, -2]> : tensor<2xi64>
  %0 = rp.neg %a : tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @FoldLosslessCastRoundTrip
// CHECK-SAME: (%[[X:.+]]: tensor<4xbf16>)
// CHECK-NEXT: return %[[X]]
func.func @FoldLosslessCastRoundTrip(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = rp.cast %x : tensor<4xbf16> to tensor<4xf32>
  %1 = rp.cast %0 : tensor<4xf32> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// f32 -> bf16 rounds, and bf16 -> f16 loses range: both round trips stay.
// CHECK-LABEL: func.func @DontFoldLossyCastRoundTrip
// CHECK-COUNT-4: rp.cast
func.func @DontFoldLossyCastRoundTrip(%x: tensor<4xf32>, %y: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xbf16>) {
  %0 = rp.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = rp.cast %0 : tensor<4xbf16> to tensor<4xf32>
  %2 = rp.cast %y : tensor<4xbf16> to tensor<4xf16>
  %3 = rp.cast %2 : tensor<4xf16> to tensor<4xbf16>
  return %1, %3 : tensor<4xf32>, tensor<4xbf16>
}

// CHECK-LABEL: func.func @FoldCastOfSplat
// CHECK-NEXT: rp.constant dense<3.000000e+00> : tensor<4xf32>
// CHECK-NEXT: rp.constant dense<true> : tensor<4xi1>
func.func @FoldCastOfSplat() -> (tensor<4xf32>, tensor<4xi1>) {
  %a = rp.constant dense<3> : tensor<4xi64>
  %0 = rp.cast %a : tensor<4xi64> to tensor<4xf32>
  %1 = rp.cast %a : tensor<4xi64> to tensor<4xi1>
  return %0, %1 : tensor<4xf32>, tensor<4xi1>
}

// CHECK-LABEL: func.func @FoldReshapeChain
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[R:.+]] = rp.reshape %[[X]] : tensor<2x8xf32> to tensor<4x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @FoldReshapeChain(%x: tensor<2x8xf32>) -> tensor<4x4xf32> {
  %0 = rp.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = rp.reshape %0 : tensor<16xf32> to tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @FoldReshapeToSameType
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldReshapeToSameType(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = rp.reshape %x : tensor<2x8xf32> to tensor<16xf32>
  %1 = rp.reshape %0 : tensor<16xf32> to tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @FoldReshapeOfConstant
// CHECK-NEXT: rp.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
func.func @FoldReshapeOfConstant() -> tensor<2x2xi64> {
  %a = rp.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = rp.reshape %a : tensor<4xi64> to tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// CHECK-LABEL: func.func @ComposeTransposes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.+]] = rp.transpose %[[X]] permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[T]]
func.func @ComposeTransposes(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = rp.transpose %x permutation = [1, 2, 0] : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %1 = rp.transpose %0 permutation = [1, 2, 0] : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @FoldInverseTransposes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldInverseTransposes(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = rp.transpose %x permutation = [0, 2, 1] : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = rp.transpose %0 permutation = [0, 2, 1] : tensor<2x4x3xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @DontFoldSingleTranspose
// CHECK: rp.transpose
func.func @DontFoldSingleTranspose(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = rp.transpose %x permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @FoldFullSliceAndSingleConcat
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldFullSliceAndSingleConcat(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = rp.slice %x offsets = [0, 0] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = rp.concat %0 dim = 1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @DontFoldPartialSlice
// CHECK: rp.slice
func.func @DontFoldPartialSlice(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %0 = rp.slice %x offsets = [0, 1] strides = [1, 1] : tensor<2x3xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// CHECK-LABEL: func.func @FoldMovementOfSplats
// CHECK-DAG: rp.constant dense<2.000000e+00> : tensor<3x4xf32>
// CHECK-DAG: rp.constant dense<2.000000e+00> : tensor<4x3xf32>
// CHECK-DAG: rp.constant dense<2.000000e+00> : tensor<2x4xf32>
// CHECK-NOT: rp.broadcast
// CHECK-NOT: rp.transpose
// CHECK-NOT: rp.slice
func.func @FoldMovementOfSplats() -> (tensor<3x4xf32>, tensor<4x3xf32>, tensor<2x4xf32>) {
  %a = rp.constant dense<2.0> : tensor<1x4xf32>
  %0 = rp.broadcast %a : tensor<1x4xf32> to tensor<3x4xf32>
  %1 = rp.transpose %0 permutation = [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %2 = rp.slice %0 offsets = [1, 0] strides = [1, 1] : tensor<3x4xf32> -> tensor<2x4xf32>
  return %0, %1, %2 : tensor<3x4xf32>, tensor<4x3xf32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @DontFoldBroadcastOfValue
// CHECK: rp.broadcast
func.func @DontFoldBroadcastOfValue(%x: tensor<1x4xf32>) -> tensor<3x4xf32> {
  %0 = rp.broadcast %x : tensor<1x4xf32> to tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @FoldReduceOverUnitDims
// CHECK-SAME: (%[[X:.+]]: tensor<2x1xf32>)
// CHECK-NEXT: return %[[X]]
func.func @FoldReduceOverUnitDims(%x: tensor<2x1xf32>) -> tensor<2x1xf32> {
  %0 = rp.reduce mean %x dims = [1] keep_dims : tensor<2x1xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// CHECK-LABEL: func.func @DontFoldReduce
// CHECK: rp.reduce
func.func @DontFoldReduce(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %0 = rp.reduce sum %x dims = [1] keep_dims : tensor<2x3xf32> -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}

// Unused pure ops and layers whose results are unused go away.
// CHECK-LABEL: func.func @EraseDeadLayer
// CHECK-NOT: rp.layer
// CHECK-NOT: rp.param
func.func @EraseDeadLayer(%x: tensor<2xf32>) {
  %w = rp.param "w" trainable at "weights.bin"[0] : tensor<2xf32>
  %0 = rp.layer "h.0" (%x, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>, %b: tensor<2xf32>):
    %1 = rp.mul %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    rp.yield %1 : tensor<2xf32>
  }
  return
}

// The shape arithmetic of a dynamic-shape export, once shapes are static:
// Shape -> Gather -> Unsqueeze -> Concat -> Cast folds to one constant.
// CHECK-LABEL: func.func @FoldShapeChain
// CHECK-NEXT: %[[C:.+]] = rp.constant dense<[2, 16, 4, 8]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @FoldShapeChain() -> tensor<4xi64> {
  %shape = rp.constant dense<[2, 16, 32]> : tensor<3xi64>
  %ids = rp.constant dense<[0, 1]> : tensor<2xi64>
  %bs = rp.gather %shape[%ids] axis = 0 : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %heads = rp.constant dense<[4.0, 8.0]> : tensor<2xf32>
  %hi = rp.cast %heads : tensor<2xf32> to tensor<2xi64>
  %0 = rp.concat %bs, %hi dim = 0 : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// CHECK-LABEL: func.func @DontFoldGatherOutOfRange
// CHECK: rp.gather
func.func @DontFoldGatherOutOfRange() -> tensor<1xi64> {
  %shape = rp.constant dense<[2, 16, 32]> : tensor<3xi64>
  %ids = rp.constant dense<[3]> : tensor<1xi64>
  %0 = rp.gather %shape[%ids] axis = 0 : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// CHECK-LABEL: func.func @FoldGatherRowsWithNegativeIndex
// CHECK-NEXT: rp.constant dense<{{\[}}[5, 6], [1, 2]]> : tensor<2x2xi32>
func.func @FoldGatherRowsWithNegativeIndex() -> tensor<2x2xi32> {
  %t = rp.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
  %ids = rp.constant dense<[-1, 0]> : tensor<2xi64>
  %0 = rp.gather %t[%ids] axis = 0 : (tensor<3x2xi32>, tensor<2xi64>) -> tensor<2x2xi32>
  return %0 : tensor<2x2xi32>
}

// CHECK-LABEL: func.func @FoldDenseMovement
// CHECK-DAG: rp.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: rp.constant dense<{{\[}}[2], [5]]> : tensor<2x1xi64>
// CHECK-DAG: rp.constant dense<{{\[}}[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>
func.func @FoldDenseMovement() -> (tensor<3x2xi64>, tensor<2x1xi64>, tensor<2x3xi64>) {
  %a = rp.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %r = rp.constant dense<[[1, 2, 3]]> : tensor<1x3xi64>
  %0 = rp.transpose %a permutation = [1, 0] : tensor<2x3xi64> -> tensor<3x2xi64>
  %1 = rp.slice %a offsets = [0, 1] strides = [1, 2] : tensor<2x3xi64> -> tensor<2x1xi64>
  %2 = rp.broadcast %r : tensor<1x3xi64> to tensor<2x3xi64>
  return %0, %1, %2 : tensor<3x2xi64>, tensor<2x1xi64>, tensor<2x3xi64>
}

// CHECK-LABEL: func.func @DontFoldConcatOfValue
// CHECK: rp.concat
func.func @DontFoldConcatOfValue(%x: tensor<2xi64>) -> tensor<4xi64> {
  %c = rp.constant dense<[1, 2]> : tensor<2xi64>
  %0 = rp.concat %c, %x dim = 0 : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// A causal mask built from constants folds whole.
// CHECK-LABEL: func.func @FoldDenseWhere
// CHECK-NEXT: rp.constant dense<{{\[}}[0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
func.func @FoldDenseWhere() -> tensor<2x2xf32> {
  %m = rp.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %z = rp.constant dense<0.0> : tensor<2x2xf32>
  %n = rp.constant dense<-1.0e9> : tensor<2x2xf32>
  %0 = rp.where %m, %z, %n : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// NaN has no integer value: the cast stays for the runtime to report.
// CHECK-LABEL: func.func @DontFoldNaNToInteger
// CHECK: rp.cast
func.func @DontFoldNaNToInteger() -> tensor<2xi64> {
  %a = rp.constant dense<[1.0, 0x7FC00000]> : tensor<2xf32>
  %0 = rp.cast %a : tensor<2xf32> to tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @FoldSqrtOfConstant
// CHECK-NEXT: rp.constant dense<8.000000e+00> : tensor<f32>
func.func @FoldSqrtOfConstant() -> tensor<f32> {
  %a = rp.constant dense<64.0> : tensor<f32>
  %0 = rp.sqrt %a : tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @DontFoldSqrtOfValue
// CHECK: rp.sqrt
func.func @DontFoldSqrtOfValue(%x: tensor<f32>) -> tensor<f32> {
  %0 = rp.sqrt %x : tensor<f32>
  return %0 : tensor<f32>
}

// An [out, in] weight transposed for a matmul feeds it through the flag.
// CHECK-LABEL: func.func @FoldTransposeIntoMatmul
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8x16xf32>, %[[W:[^:]+]]: tensor<32x16xf32>, %[[K:[^:]+]]: tensor<2x4x8x16xf32>)
// CHECK-NEXT: rp.matmul %[[X]], %[[W]] transpose_b : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: rp.matmul %[[K]], %[[K]] transpose_a : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
func.func @FoldTransposeIntoMatmul(%x: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %k: tensor<2x4x8x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x16x16xf32>) {
  %wt = rp.transpose %w permutation = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %0 = rp.matmul %x, %wt : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %kt = rp.transpose %k permutation = [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %1 = rp.matmul %kt, %k : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %0, %1 : tensor<2x8x32xf32>, tensor<2x4x16x16xf32>
}

// A transpose that also moves batch dimensions is not a flag.
// CHECK-LABEL: func.func @DontFoldBatchTransposeIntoMatmul
// CHECK: rp.transpose
func.func @DontFoldBatchTransposeIntoMatmul(%q: tensor<2x4x8x16xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x4x8x8xf32> {
  %kt = rp.transpose %k permutation = [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %0 = rp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}
