//===- RPOps.cpp - rp op verifiers and builders ---------------------------===//
//
// Shape and dtype rules of the rp ops. Messages say what was expected and
// what was found, so that an importer or pass bug points at its cause.
//
//===----------------------------------------------------------------------===//

#include "rp/Dialect/RP/RPOps.h"
#include "ShapeDiagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;

#include "rp/Dialect/RP/RPEnums.cpp.inc"
#include "rp/Dialect/RP/RPInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>> mlir::rp::broadcastShapes(ArrayRef<int64_t> a,
                                                          ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return failure();
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

RankedTensorType mlir::rp::broadcastResultType(ValueRange values,
                                               Type elementType) {
  auto first = cast<RankedTensorType>(values.front().getType());
  SmallVector<int64_t> shape(first.getShape());
  for (Value v : values.drop_front()) {
    auto next =
        broadcastShapes(shape, cast<RankedTensorType>(v.getType()).getShape());
    if (failed(next))
      return RankedTensorType::get(first.getShape(), elementType);
    shape = std::move(*next);
  }
  return RankedTensorType::get(shape, elementType);
}

int64_t mlir::rp::getElementSizeInBytes(Type type) {
  unsigned bits = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
  return bits == 1 ? 1 : bits / 8;
}

LogicalResult mlir::rp::verifyBroadcastingElementwise(Operation *op) {
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> shape;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    ArrayRef<int64_t> dims =
        cast<RankedTensorType>(operand.getType()).getShape();
    auto next = broadcastShapes(shape, dims);
    if (failed(next))
      return op->emitOpError()
             << "operand #" << i << " of shape " << ShapeStr{dims}
             << " does not broadcast with the shape " << ShapeStr{shape}
             << " of the operands before it";
    shape = std::move(*next);
  }
  if (resultType.getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError()
           << "expected result shape " << ShapeStr{shape}
           << " (the broadcast of the operand shapes) but got "
           << ShapeStr{resultType.getShape()};
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("expected a non-empty parameter name");
  if (getFile().has_value() != getOffset().has_value())
    return emitOpError("expected 'file' and 'offset' together, but got only ")
           << (getFile() ? "'file'" : "'offset'");
  if (getFile() && getFile()->empty())
    return emitOpError("expected a non-empty file name");
  if (getOffsetAttr() && getOffsetAttr().getInt() < 0)
    return emitOpError("expected a non-negative byte offset but got ")
           << getOffsetAttr().getInt();
  if (getInit() && getFile())
    return emitOpError("a stored parameter takes its value from its file; "
                       "'init' is for parameters without one");
  if (getInit() && !(getInit()->convertToDouble() >= 0.0))
    return emitOpError("expected a non-negative init bound but got ")
           << getInit()->convertToDouble();
  Type element = getType().getElementType();
  if (getTrainable() && !isa<FloatType>(element))
    return emitOpError("a trainable parameter needs a float element type, "
                       "but '")
           << getName() << "' has " << element;
  return success();
}

int64_t ParamOp::getSizeInBytes() {
  return getType().getNumElements() * getElementSizeInBytes(getType());
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

void LayerOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                    TypeRange resultTypes, ValueRange inputs) {
  state.addAttribute(getNameAttrName(state.name), builder.getStringAttr(name));
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  body->push_back(block);
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
}

LogicalResult LayerOp::verify() {
  if (getName().empty())
    return emitOpError("expected a non-empty layer name");
  if (auto outer = (*this)->getParentOfType<LayerOp>()) {
    InFlightDiagnostic diag = emitOpError("layers do not nest, but '")
                              << getName() << "' is inside layer '"
                              << outer.getName() << "'";
    diag.attachNote(outer.getLoc()) << "enclosing layer is here";
    return diag;
  }
  if (std::optional<ArrayRef<int64_t>> span = getSpan())
    if (span->size() != 2 || (*span)[0] < 0 || (*span)[0] >= (*span)[1])
      return emitOpError("expected span = array<i64: begin, end> with 0 <= "
                         "begin < end");
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError("expected ")
           << getInputs().size()
           << " entry block arguments (one per input) but got "
           << block.getNumArguments();
  for (auto [i, input, arg] :
       llvm::enumerate(getInputs(), block.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError("entry block argument #")
             << i << " has type " << arg.getType()
             << " but the input it binds has type " << input.getType();
  return success();
}

// Runs after the body is verified, so the block is known to end in a
// terminator.
LogicalResult LayerOp::verifyRegions() {
  Block &block = getBody().front();
  auto yield = dyn_cast<YieldOp>(block.back());
  if (!yield)
    return emitOpError("expected the body to end with 'rp.yield'");
  if (yield.getOperands().size() != getNumResults())
    return emitOpError("expected the body to yield ")
           << getNumResults() << " values (one per result) but it yields "
           << yield.getOperands().size();
  for (auto [i, value, result] :
       llvm::enumerate(yield.getOperands(), getResults()))
    if (value.getType() != result.getType())
      return emitOpError("yielded value #")
             << i << " has type " << value.getType()
             << " but the layer result has type " << result.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("expected the same element count, but ")
           << ShapeStr{in.getShape()} << " has " << in.getNumElements()
           << " and " << ShapeStr{out.getShape()} << " has "
           << out.getNumElements();
  return success();
}

/// Checks that `perm` is a permutation of [0, rank).
static LogicalResult verifyPermutation(Operation *op, ArrayRef<int64_t> perm,
                                       int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank)
    return op->emitOpError("expected a permutation of ")
           << rank << " dimensions but got " << perm.size() << " entries";
  SmallVector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return op->emitOpError("permutation ")
             << ShapeStr{perm} << " is not a permutation of [0, " << rank
             << ")";
    seen[p] = true;
  }
  return success();
}

void TransposeOp::build(OpBuilder &builder, OperationState &state, Value input,
                        ArrayRef<int64_t> permutation) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(p >= 0 && p < type.getRank() ? type.getDimSize(p) : 1);
  build(builder, state, RankedTensorType::get(shape, type.getElementType()),
        input, permutation);
}

LogicalResult TransposeOp::verify() {
  auto in = getInput().getType();
  ArrayRef<int64_t> perm = getPermutation();
  if (failed(verifyPermutation(*this, perm, in.getRank())))
    return failure();
  SmallVector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(in.getDimSize(p));
  if (getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected result shape ")
           << ShapeStr{expected} << " but got "
           << ShapeStr{getType().getShape()};
  return success();
}

LogicalResult mlir::rp::verifySliceWindow(Operation *op, RankedTensorType in,
                                          RankedTensorType out,
                                          ArrayRef<int64_t> offsets,
                                          ArrayRef<int64_t> strides) {
  int64_t rank = in.getRank();
  if (out.getRank() != rank)
    return op->emitOpError("expected a result of rank ")
           << rank << " but got rank " << out.getRank();
  if (static_cast<int64_t>(offsets.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return op->emitOpError("expected ")
           << rank << " offsets and strides but got " << offsets.size()
           << " and " << strides.size();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t offset = offsets[d], stride = strides[d];
    int64_t size = out.getDimSize(d);
    if (stride < 1)
      return op->emitOpError("expected positive strides but dimension ")
             << d << " has stride " << stride;
    if (offset < 0 ||
        (size > 0 && offset + (size - 1) * stride >= in.getDimSize(d)) ||
        (size == 0 && offset > in.getDimSize(d)))
      return op->emitOpError("dimension ")
             << d << ": " << size << " elements from offset " << offset
             << " with stride " << stride << " do not fit in size "
             << in.getDimSize(d);
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifySliceWindow(*this, getInput().getType(), getType(), getOffsets(),
                           getStrides());
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("expected at least one input");
  auto out = getType();
  int64_t rank = out.getRank(), dim = getDim();
  if (dim >= rank)
    return emitOpError("dimension ")
           << dim << " is out of range for rank " << rank;
  int64_t total = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType() != out.getElementType())
      return emitOpError("input #")
             << i << " has element type " << type.getElementType()
             << " but the result has " << out.getElementType();
    if (type.getRank() != rank)
      return emitOpError("input #") << i << " has rank " << type.getRank()
                                    << " but the result has " << rank;
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && type.getDimSize(d) != out.getDimSize(d))
        return emitOpError("input #")
               << i << " has shape " << ShapeStr{type.getShape()}
               << ", which differs from the result shape "
               << ShapeStr{out.getShape()} << " in dimension " << d;
    total += type.getDimSize(dim);
  }
  if (total != out.getDimSize(dim))
    return emitOpError("expected result dimension ")
           << dim << " to be " << total << " (the sum of the inputs) but got "
           << out.getDimSize(dim);
  return success();
}

LogicalResult BroadcastOp::verify() {
  ArrayRef<int64_t> in = getInput().getType().getShape();
  ArrayRef<int64_t> out = getType().getShape();
  auto merged = broadcastShapes(in, out);
  if (in.size() > out.size() || failed(merged) ||
      ArrayRef<int64_t>(*merged) != out)
    return emitOpError("cannot broadcast shape ")
           << ShapeStr{in} << " to " << ShapeStr{out};
  return success();
}

/// The result shape of gather, or failure when `axis` is out of range.
static FailureOr<SmallVector<int64_t>>
gatherShape(RankedTensorType input, RankedTensorType indices, int64_t axis) {
  if (axis < 0 || axis >= input.getRank())
    return failure();
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  return shape;
}

void GatherOp::build(OpBuilder &builder, OperationState &state, Value input,
                     Value indices, int64_t axis) {
  auto inType = cast<RankedTensorType>(input.getType());
  auto shape =
      gatherShape(inType, cast<RankedTensorType>(indices.getType()), axis);
  auto resultType = RankedTensorType::get(
      succeeded(shape) ? ArrayRef<int64_t>(*shape) : inType.getShape(),
      inType.getElementType());
  build(builder, state, resultType, input, indices, axis);
}

LogicalResult GatherOp::verify() {
  auto shape =
      gatherShape(getInput().getType(), getIndices().getType(), getAxis());
  if (failed(shape))
    return emitOpError("axis ") << getAxis() << " is out of range for rank "
                                << getInput().getType().getRank();
  if (getType().getShape() != ArrayRef<int64_t>(*shape))
    return emitOpError("expected result shape ")
           << ShapeStr{*shape} << " but got " << ShapeStr{getType().getShape()};
  return success();
}

//===----------------------------------------------------------------------===//
// Generated op definitions
//===----------------------------------------------------------------------===//

#define GET_OP_CLASSES
#include "rp/Dialect/RP/RPOps.cpp.inc"
