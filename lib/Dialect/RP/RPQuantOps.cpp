//===- RPQuantOps.cpp - rp.dequantize -------------------------------------===//
//
// The blob of a quantized frozen weight has the size the contract's layout
// gives for the result's element count, and nothing else: a blob of another
// size was made for another shape (or another kind).
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"
#include "rp/contract/Quantize.h"

using namespace mlir;
using namespace mlir::rp;

/// The contract's format of `kind` (the dialect's enum has its values).
static ::rp::quant::QuantKind contractKind(QuantKind kind) {
  return kind == QuantKind::nf4 ? ::rp::quant::QuantKind::nf4
                                : ::rp::quant::QuantKind::int8;
}

int64_t mlir::rp::quantizedBytes(QuantKind kind, int64_t elements) {
  return ::rp::quant::layoutOf(contractKind(kind), elements).bytes;
}

LogicalResult DequantizeOp::verify() {
  auto blob = getBlob().getType();
  int64_t elements = getType().getNumElements();
  int64_t want = quantizedBytes(getKind(), elements);
  if (blob.getRank() != 1 || blob.getDimSize(0) != want)
    return emitOpError("expected a blob of ")
           << want << " bytes (tensor<" << want << "xi8>) for "
           << stringifyQuantKind(getKind()) << " of " << elements
           << " values but got " << blob;
  return success();
}
