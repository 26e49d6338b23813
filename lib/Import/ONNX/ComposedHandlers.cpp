//===- ComposedHandlers.cpp - ONNX ops written as several rp ops ----------===//
//
// ONNX ops rp has no op of its own for, on run-time values, written as
// compositions of rp ops whose VJPs give the ops' gradients (the same
// compositions rp.trace writes, python/rp/_aten_compose.py):
//
//   Softplus        log(1 + exp(min(x, 20))), x where x > 20 (so neither
//                   branch overflows: a NaN in the unselected one would
//                   still reach the gradient)
//   CumSum          a triangular ones constant times x along the axis,
//                   one matmul (RoBERTa's position ids; f32, exact for
//                   the integer counts it sums below 2^24)
//   GatherElements  along the last axis: a one-hot of the indices selects
//                   from the data (BERT's token type ids)
//   TopK            the largest k along the last axis (a router that
//                   MoERecognize.cpp leaves to the op-by-op import): the
//                   indices from rp.moe.route, ordered as PyTorch's topk
//                   orders ties; the values the input where a one-hot of
//                   the indices is set, summed, so their gradient reaches
//                   the chosen elements (a where, not a product: a masked
//                   -inf times 0 would be NaN)
//   ArgMax, ArgMin  the first (or, select_last_index, the last) position
//                   equal to the max (min) along the axis: positions where
//                   it is, else past the end, reduced by min (PhiMoE's
//                   sparsemixer routes by torch.max's indices); an integer
//                   with no gradient
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

Value onnx_import::scalarOf(NodeImporter &n, Type element, double v) {
  auto type = RankedTensorType::get({}, element);
  if (isa<FloatType>(element))
    return n.constant(
        DenseElementsAttr::get(type, n.builder.getFloatAttr(element, v)));
  return n.constant(DenseElementsAttr::get(
      type, n.builder.getIntegerAttr(element, int64_t(v))));
}

Value onnx_import::lastAxisOneHot(NodeImporter &n, Value indices, int64_t c) {
  auto it = cast<RankedTensorType>(indices.getType());
  Type i64 = n.builder.getI64Type();
  Value idx = n.castTo(indices, i64);
  // Negative indices count from the end.
  Value neg = n.create<CmpOp>(CmpPredicate::lt, idx, scalarOf(n, i64, 0));
  idx = n.create<WhereOp>(
      neg, n.create<AddOp>(idx, scalarOf(n, i64, double(c))), idx);
  SmallVector<int64_t> col(it.getShape()), rangeShape(it.getRank(), 1);
  col.push_back(1);
  rangeShape.push_back(c);
  SmallVector<int64_t> range = llvm::to_vector(llvm::seq<int64_t>(0, c));
  return n.create<CmpOp>(CmpPredicate::eq, n.reshape(idx, col),
                         n.reshape(n.i64Constant(range), rangeShape));
}

FailureOr<std::pair<Value, SmallVector<int64_t>>>
onnx_import::inputAndInts(NodeImporter &n, StringRef what) {
  Value x = n.input(0);
  auto ints = n.constantInts(1, what);
  if (!x || failed(ints))
    return failure();
  return std::make_pair(x, *ints);
}

static LogicalResult importSoftplus(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  Type f = cast<RankedTensorType>(x.getType()).getElementType();
  if (!isa<FloatType>(f))
    return n.error() << "Softplus of a non-float tensor";
  Value threshold = scalarOf(n, f, 20.0);
  Value ex = n.create<ExpOp>(n.create<MinOp>(x, threshold));
  Value soft = n.create<LogOp>(n.create<AddOp>(ex, scalarOf(n, f, 1.0)));
  Value big = n.create<CmpOp>(CmpPredicate::gt, x, threshold);
  n.setOutput(0, n.create<WhereOp>(big, x, soft));
  return success();
}

static LogicalResult importCumSum(NodeImporter &n) {
  Value x = n.input(0);
  auto axisIn = n.constantInts(1, "axis");
  if (!x || failed(axisIn))
    return failure();
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  if (axisIn->size() != 1)
    return n.error() << "the axis is not one integer";
  auto axis = n.normalizeAxis((*axisIn)[0], rank);
  if (failed(axis))
    return failure();
  bool exclusive = n.intAttr("exclusive", 0), reverse = n.intAttr("reverse", 0);
  ArrayRef<int64_t> shape = xt.getShape();
  int64_t size = shape[*axis];
  Type f32 = n.builder.getF32Type();
  Type f = isa<FloatType>(xt.getElementType()) ? xt.getElementType() : f32;
  // out[i] = sum_j tri[i, j] * x[j]: j <= i (j < i exclusive), reversed
  // j >= i; a matmul over x seen as [before, size, after], so nothing of
  // size^2 times x's size is materialized (a broadcast product summed over
  // the axis was: 8 GiB for Mamba-2's 256-long chunks in Falcon-H1).
  SmallVector<float> tri;
  for (int64_t i = 0; i < size; ++i)
    for (int64_t j = 0; j < size; ++j)
      tri.push_back(reverse ? (exclusive ? j > i : j >= i)
                            : (exclusive ? j < i : j <= i));
  Value t = n.castTo(
      n.constant(DenseElementsAttr::get(
          RankedTensorType::get({size, size}, f32), ArrayRef<float>(tri))),
      f);
  int64_t before = 1, after = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < *axis ? before : after) *= d == *axis ? 1 : shape[d];
  Value x3 = n.reshape(n.castTo(x, f), {before, size, after});
  Value sum = n.reshape(n.create<MatmulOp>(t, x3, false, false), shape);
  n.setOutput(0, n.castTo(sum, xt.getElementType()));
  return success();
}

static LogicalResult importGatherElements(NodeImporter &n) {
  Value data = n.input(0), indices = n.input(1);
  if (!data || !indices)
    return failure();
  auto dt = cast<RankedTensorType>(data.getType());
  auto it = cast<RankedTensorType>(indices.getType());
  int64_t rank = dt.getRank();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> ds = dt.getShape(), is = it.getShape();
  if (*axis != rank - 1 || it.getRank() != rank)
    return n.error() << "GatherElements on run-time values is mapped along "
                        "the last axis only (a one-hot selection); this one "
                        "gathers along axis "
                     << *axis << " of " << rank;
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (is[d] > ds[d])
      return n.error() << "the indices " << indices.getType()
                       << " are larger than the data " << data.getType();
  int64_t c = ds.back();
  // The data's leading dims cut to the indices' (GatherElements reads only
  // those), with a unit dim for the gathered positions.
  SmallVector<int64_t> lead(is.drop_back());
  if (!llvm::equal(lead, ds.drop_back())) {
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1), cut(lead);
    cut.push_back(c);
    data = n.create<SliceOp>(RankedTensorType::get(cut, dt.getElementType()),
                             data, offsets, strides);
  }
  SmallVector<int64_t> row(lead);
  row.append({1, c});
  Value data3 = n.reshape(data, row);
  Value hit = lastAxisOneHot(n, indices, c);
  Value picked =
      n.create<WhereOp>(hit, data3, scalarOf(n, dt.getElementType(), 0.0));
  n.setOutput(0, n.create<ReduceOp>(ReduceKind::sum, picked,
                                    ArrayRef<int64_t>{rank}, false));
  return success();
}

static LogicalResult importTopK(NodeImporter &n) {
  auto operands = inputAndInts(n, "k");
  if (failed(operands))
    return failure();
  auto [x, kIn] = *operands;
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  auto axis = n.normalizeAxis(n.intAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  if (*axis != rank - 1 || n.intAttr("largest", 1) != 1 ||
      !isa<FloatType>(xt.getElementType()))
    return n.error() << "TopK on run-time values is mapped for the largest "
                        "floats along the last axis only (a router's "
                        "top-k); this one takes the "
                     << (n.intAttr("largest", 1) ? "largest" : "smallest")
                     << " along axis " << *axis << " of " << xt;
  int64_t c = xt.getShape().back();
  if (kIn.size() != 1 || kIn[0] < 1 || kIn[0] > c)
    return n.error() << "k is not one integer from 1 to " << c;
  int64_t k = kIn[0], rows = xt.getNumElements() / c;
  Type f32 = n.builder.getF32Type(), i64 = n.builder.getI64Type();
  Value flat = n.reshape(n.castTo(x, f32), {rows, c});
  auto route = MoERouteOp::create(n.builder, n.loc,
                                  RankedTensorType::get({rows, k}, f32),
                                  RankedTensorType::get({rows, k}, i64), flat,
                                  uint64_t(k), MoESoftmax::after, false);
  SmallVector<int64_t> outShape(xt.getShape().drop_back());
  outShape.push_back(k);
  Value ids = route.getExperts();
  if (n.hasOutput(0)) {
    Value hit = lastAxisOneHot(n, ids, c);
    Value picked = n.create<WhereOp>(hit, n.reshape(flat, {rows, 1, c}),
                                     scalarOf(n, f32, 0.0));
    Value values = n.create<ReduceOp>(ReduceKind::sum, picked,
                                      ArrayRef<int64_t>{2}, false);
    n.setOutput(0, n.castTo(n.reshape(values, outShape), xt.getElementType()));
  }
  if (n.hasOutput(1))
    n.setOutput(1, n.reshape(ids, outShape));
  return success();
}

static LogicalResult importArgExtreme(NodeImporter &n, bool max) {
  Value x = n.input(0);
  if (!x)
    return failure();
  auto xt = cast<RankedTensorType>(x.getType());
  int64_t rank = xt.getRank();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  if (!isa<FloatType>(xt.getElementType()))
    return n.error() << "Arg" << (max ? "Max" : "Min")
                     << " on run-time values is mapped for floats only; this "
                        "one reads "
                     << xt;
  int64_t c = xt.getShape()[*axis];
  bool lastIndex = n.intAttr("select_last_index", 0) != 0;
  bool keep = n.intAttr("keepdims", 1) != 0;
  Value best = n.create<ReduceOp>(max ? ReduceKind::max : ReduceKind::min, x,
                                  ArrayRef<int64_t>{*axis}, true);
  Value at = n.create<CmpOp>(CmpPredicate::eq, x, best);
  // The positions along the axis, as floats (exact below 2^24): where x is
  // the extreme, else past the end, so min (max) picks the first (last).
  Type f32 = n.builder.getF32Type();
  SmallVector<float> range;
  for (int64_t j = 0; j < c; ++j)
    range.push_back(float(j));
  SmallVector<int64_t> rangeShape(rank, 1);
  rangeShape[*axis] = c;
  Value positions = n.constant(DenseElementsAttr::get(
      RankedTensorType::get(rangeShape, f32), ArrayRef<float>(range)));
  Value candidates = n.create<WhereOp>(
      at, positions, scalarOf(n, f32, lastIndex ? -1.0 : double(c)));
  Value picked =
      n.create<ReduceOp>(lastIndex ? ReduceKind::max : ReduceKind::min,
                         candidates, ArrayRef<int64_t>{*axis}, keep);
  n.setOutput(0, n.castTo(picked, n.builder.getI64Type()));
  return success();
}

void onnx_import::registerComposedHandlers(llvm::StringMap<Handler> &t) {
  registerRuntimeComposedHandlers(t);
  registerEinsumHandler(t);
  t["Softplus"] = importSoftplus;
  t["CumSum"] = importCumSum;
  t["GatherElements"] = importGatherElements;
  t["TopK"] = importTopK;
  t["ArgMax"] = [](NodeImporter &n) { return importArgExtreme(n, true); };
  t["ArgMin"] = [](NodeImporter &n) { return importArgExtreme(n, false); };
}
