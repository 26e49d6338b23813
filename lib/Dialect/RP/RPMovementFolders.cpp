//===- RPMovementFolders.cpp - folds of rp data movement ops --------------===//
//
// Reshape, transpose, slice, concat, broadcast and gather of constants fold
// to constants, which is how the importer turns an exporter's shape
// arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) into static
// attributes: it builds ops with createOrFold and reads the constants back.
//
//===----------------------------------------------------------------------===//

#include "FoldUtils.h"
#include "rp/Dialect/RP/RPOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::rp;

/// Row-major strides of `shape`.
static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Builds the constant whose element at result index `idx` is the input
/// element at linear position `source(idx)`. Splats stay splats; dense
/// inputs are expanded only when small.
static OpFoldResult
foldMovement(Attribute input, RankedTensorType result,
             function_ref<int64_t(ArrayRef<int64_t>)> source) {
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(input))
    return SplatElementsAttr::get(result, splat.getSplatValue<Attribute>());
  auto dense = dyn_cast_or_null<DenseElementsAttr>(input);
  if (!dense || !isSmall(result))
    return {};
  auto values = dense.getValues<Attribute>();
  ArrayRef<int64_t> shape = result.getShape();
  SmallVector<int64_t> idx(shape.size(), 0);
  SmallVector<Attribute> out;
  out.reserve(result.getNumElements());
  for (int64_t n = 0, e = result.getNumElements(); n < e; ++n) {
    out.push_back(values[source(idx)]);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return DenseElementsAttr::get(result, out);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  if (auto inner = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(inner.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, getType().getRank())))
    return getInput();
  SmallVector<int64_t> inStrides = stridesOf(getInput().getType().getShape());
  return foldMovement(adaptor.getInput(), getType(), [&](ArrayRef<int64_t> i) {
    int64_t linear = 0;
    for (auto [d, p] : llvm::enumerate(perm))
      linear += i[d] * inStrides[p];
    return linear;
  });
}

namespace {
/// transpose(transpose(x, p), q) -> transpose(x, p[q]).
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> composed;
    for (int64_t q : op.getPermutation())
      composed.push_back(inner.getPermutation()[q]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(), inner.getInput(),
                                             composed);
    return success();
  }
};
} // namespace

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<ComposeTransposes>(context);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getOffsets(), [](int64_t o) { return o == 0; }) &&
      llvm::all_of(getStrides(), [](int64_t s) { return s == 1; }))
    return getInput();
  SmallVector<int64_t> inStrides = stridesOf(getInput().getType().getShape());
  return foldMovement(adaptor.getInput(), getType(), [&](ArrayRef<int64_t> i) {
    int64_t linear = 0;
    for (size_t d = 0; d < i.size(); ++d)
      linear += (getOffsets()[d] + i[d] * getStrides()[d]) * inStrides[d];
    return linear;
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  if (!isSmall(getType()))
    return {};
  // Concatenation of constants: each result row along `dim` comes from one
  // input, found by walking the inputs' extents.
  SmallVector<DenseElementsAttr> inputs;
  for (Attribute a : adaptor.getInputs()) {
    auto dense = dyn_cast_or_null<DenseElementsAttr>(a);
    if (!dense)
      return {};
    inputs.push_back(dense);
  }
  int64_t dim = getDim();
  SmallVector<std::pair<int64_t, size_t>> start; // (first index, input)
  int64_t offset = 0;
  for (auto [n, in] : llvm::enumerate(inputs)) {
    start.push_back({offset, n});
    offset += in.getType().getDimSize(dim);
  }
  SmallVector<Attribute> out;
  ArrayRef<int64_t> shape = getType().getShape();
  SmallVector<int64_t> idx(shape.size(), 0);
  for (int64_t n = 0, e = getType().getNumElements(); n < e; ++n) {
    size_t which = 0;
    while (which + 1 < start.size() && start[which + 1].first <= idx[dim])
      ++which;
    DenseElementsAttr in = inputs[which];
    SmallVector<int64_t> local(idx);
    local[dim] -= start[which].first;
    SmallVector<int64_t> strides = stridesOf(in.getType().getShape());
    int64_t linear = 0;
    for (size_t d = 0; d < local.size(); ++d)
      linear += local[d] * strides[d];
    out.push_back(in.getValues<Attribute>()[linear]);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return DenseElementsAttr::get(getType(), out);
}

ElementsAttr mlir::rp::broadcastElements(Attribute value,
                                         RankedTensorType type) {
  auto elements = dyn_cast_or_null<DenseElementsAttr>(value);
  if (!elements)
    return {};
  auto target = type.clone(elements.getElementType());
  if (elements.getType() == target)
    return elements;
  ArrayRef<int64_t> inShape = elements.getType().getShape();
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  int64_t lead = target.getRank() - static_cast<int64_t>(inShape.size());
  if (lead < 0)
    return {};
  OpFoldResult folded =
      foldMovement(elements, target, [&](ArrayRef<int64_t> i) {
        int64_t linear = 0;
        for (size_t d = 0; d < inShape.size(); ++d)
          linear += (inShape[d] == 1 ? 0 : i[lead + d]) * inStrides[d];
        return linear;
      });
  return dyn_cast_or_null<ElementsAttr>(dyn_cast_if_present<Attribute>(folded));
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return broadcastElements(adaptor.getInput(), getType());
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto indices = dyn_cast_or_null<DenseElementsAttr>(adaptor.getIndices());
  if (!indices || !adaptor.getInput())
    return {};
  ArrayRef<int64_t> inShape = getInput().getType().getShape();
  int64_t axis = getAxis(), size = inShape[axis];
  SmallVector<int64_t> ids;
  for (const APInt &v : indices.getValues<APInt>()) {
    int64_t id = v.getSExtValue();
    if (id < 0)
      id += size;
    // Out of range is a runtime error with the op's location; do not fold.
    if (id < 0 || id >= size)
      return {};
    ids.push_back(id);
  }
  SmallVector<int64_t> inStrides = stridesOf(inShape);
  SmallVector<int64_t> idStrides = stridesOf(indices.getType().getShape());
  int64_t idRank = indices.getType().getRank();
  return foldMovement(adaptor.getInput(), getType(), [&](ArrayRef<int64_t> i) {
    int64_t linear = 0;
    for (int64_t d = 0; d < axis; ++d)
      linear += i[d] * inStrides[d];
    int64_t which = 0;
    for (int64_t d = 0; d < idRank; ++d)
      which += i[axis + d] * idStrides[d];
    linear += ids[which] * inStrides[axis];
    for (int64_t d = axis + 1; d < static_cast<int64_t>(inShape.size()); ++d)
      linear += i[idRank + d - 1] * inStrides[d];
    return linear;
  });
}
