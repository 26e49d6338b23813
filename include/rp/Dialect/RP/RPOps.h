//===- RPOps.h - rp dialect ops ---------------------------------*- C++ -*-===//

#ifndef RP_DIALECT_RP_RPOPS_H
#define RP_DIALECT_RP_RPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "rp/Dialect/RP/RPDialect.h"

#include "rp/Dialect/RP/RPEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "rp/Dialect/RP/RPTypes.h.inc"
#define GET_ATTRDEF_CLASSES
#include "rp/Dialect/RP/RPAttrDefs.h.inc"
#include "rp/Dialect/RP/RPInterfaces.h.inc"

namespace mlir::rp {

/// Numpy broadcast of `a` and `b`, or failure when a dimension pair is
/// neither equal nor 1.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                ArrayRef<int64_t> b);

/// The tensor type of the broadcast of every value's shape, with
/// `elementType`. Used by builders; when the shapes do not broadcast it
/// returns the first value's shape so that the verifier reports the problem.
RankedTensorType broadcastResultType(ValueRange values, Type elementType);

/// Bytes of one element of `type` as stored in weight files and buffers
/// (i1 takes one byte).
int64_t getElementSizeInBytes(Type type);

/// Checks that an op's result has the broadcast shape of its operands.
template <typename ConcreteType>
class BroadcastingElementwise
    : public OpTrait::TraitBase<ConcreteType, BroadcastingElementwise> {
public:
  static LogicalResult verifyTrait(Operation *op);
};

LogicalResult verifyBroadcastingElementwise(Operation *op);

/// The rules of rp.slice, shared with rp.slice_grad (where the roles of the
/// two types swap).
LogicalResult verifySliceWindow(Operation *op, RankedTensorType in,
                                RankedTensorType out, ArrayRef<int64_t> offsets,
                                ArrayRef<int64_t> strides);

/// The value of an optional float attribute.
inline std::optional<double> optionalDouble(std::optional<APFloat> x) {
  if (x)
    return x->convertToDouble();
  return std::nullopt;
}

/// The shape and attribute rules of rp.attention, shared with
/// rp.attention_grad (`sinks`: [query heads] of the query's type).
LogicalResult
verifyAttentionShapes(Operation *op, RankedTensorType q, RankedTensorType k,
                      RankedTensorType v, Value mask, bool causal,
                      std::optional<double> scale, RankedTensorType result,
                      std::optional<int64_t> window = {},
                      std::optional<double> softcap = {}, Value sinks = {});

template <typename ConcreteType>
LogicalResult
BroadcastingElementwise<ConcreteType>::verifyTrait(Operation *op) {
  return verifyBroadcastingElementwise(op);
}

/// Bytes of a weight of `elements` values quantized as `kind`
/// (contract/include/rp/contract/Quantize.h).
int64_t quantizedBytes(QuantKind kind, int64_t elements);

} // namespace mlir::rp

#define GET_OP_CLASSES
#include "rp/Dialect/RP/RPOps.h.inc"

#endif // RP_DIALECT_RP_RPOPS_H
