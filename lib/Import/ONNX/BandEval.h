//===- BandEval.h - masks folded as bands, never S x S ----------*- C++ -*-===//
//
// Private to the ONNX importer. Exporters build an attention mask from index
// ranges (transformers: arange(S)[None, :] <= arange(S)[:, None], AND-ed
// with the padding mask, Expand-ed to [B, 1, S, S], Where-d into 0 / -inf).
// Folded densely it has S x S elements: 268M at 16k tokens. When the dense
// result would be large, the importer keeps such a mask as a band
// (rp/Analysis/BandMask.h) with one value inside and one outside, folds
// elementwise ops with uniform operands and shape-only data movement
// through it, and writes it to the IR as rp.cmp of two index constants,
// which rp-fuse-attention turns into the causal flag.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_IMPORT_ONNX_BANDEVAL_H
#define RP_LIB_IMPORT_ONNX_BANDEVAL_H

#include "NodeImporter.h"
#include "rp/Analysis/BandMask.h"

#include <optional>

namespace mlir::rp::onnx_import {

/// A tensor of `type` ([.., R, C]) holding `inside` where its last two
/// coordinates are in `band` and `outside` elsewhere, whatever its leading
/// coordinates. `inside` and `outside` are rank-0 attributes of the element
/// type.
struct LazyBand {
  BandMask band;
  RankedTensorType type;
  DenseElementsAttr inside, outside;
};

/// An operand of evaluateBand: a constant or a band.
struct BandOperand {
  DenseElementsAttr dense;
  const LazyBand *band = nullptr;
};

/// What evaluateBand computed: a band, or a uniform constant (a band that
/// covers all or none of its positions, or has one value in both places).
struct BandResult {
  std::optional<LazyBand> band;
  DenseElementsAttr dense;
};

/// Computes the single output of `n` as a band when an operand is one, or
/// when `n` compares index ranges into more than 65536 elements. nullopt
/// when the node has no band form (the caller folds it densely).
FailureOr<std::optional<BandResult>>
evaluateBand(NodeImporter &n, ArrayRef<BandOperand> operands);

/// The dense elements of `b`.
DenseElementsAttr materialize(const LazyBand &b);

/// Writes `b` to the IR: rp.cmp of a column index constant [.., 1, C] and
/// a row one [R, 1] (two of them AND-ed for a two-sided band), then
/// rp.where of the two values unless it is a plain i1 keep mask.
Value emitBand(NodeImporter &n, const LazyBand &b);

/// A sentence describing `b` for errors.
std::string describe(const LazyBand &b);

} // namespace mlir::rp::onnx_import

#endif // RP_LIB_IMPORT_ONNX_BANDEVAL_H
