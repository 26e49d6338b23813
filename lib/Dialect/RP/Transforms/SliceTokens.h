//===- SliceTokens.h - what token slices cut ------------------*- C++ -*-===//
//
// Shared by rp-slice-tokens (which cuts the graph) and
// rp-predict-token-slices (which prices the cut): the sequence they cut
// and the graphs they refuse, so that both agree on what is sliceable.
//
//===----------------------------------------------------------------------===//

#ifndef RP_DIALECT_RP_TRANSFORMS_SLICETOKENS_H
#define RP_DIALECT_RP_TRANSFORMS_SLICETOKENS_H

#include "rp/Analysis/TokenSlices.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::rp {

/// The sequence the slices cut: dimension 1 of the function's first input
/// of rank 2 or more (`rows` its dimension 0); an error on `func` if none
/// has a sequence of 2 or more.
LogicalResult slicedSequence(func::FuncOp func, int64_t &rows, int64_t &seq);

/// Why the graph cannot be cut into token slices (an op that mixes tokens
/// across the sequence other than a causal attention), with the op; the
/// number of causal attentions otherwise. Dimensions equal to the sequence
/// length on values computed from the inputs are taken to be it.
LogicalResult checkSliceable(func::FuncOp func, int64_t seq, unsigned &causal);

/// Per layer of `func`, the keys and values of its attentions (what a job
/// keeps for the later slices): the shapes and element types of the
/// kernels a slice adds (sliceKernelsMs).
std::vector<std::vector<SlicePairCosts::Kept>> keptTensors(func::FuncOp func);

} // namespace mlir::rp

#endif // RP_DIALECT_RP_TRANSFORMS_SLICETOKENS_H
