//===- ShapeHandlers.cpp - ONNX shape and data movement ops ---------------===//
//
// Shape arithmetic (Shape, ConstantOfShape, Range, Mod, ...) produces
// constants once every shape is static; Reshape, Expand, Slice and friends
// read those constants back. What folds away leaves only compute in the
// graph.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

static LogicalResult importShape(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  int64_t start = n.intAttr("start", 0), end = n.intAttr("end", rank);
  auto clampAxis = [&](int64_t a) {
    a = a < 0 ? a + rank : a;
    return std::clamp<int64_t>(a, 0, rank);
  };
  start = clampAxis(start);
  end = std::max(start, clampAxis(end));
  n.setOutput(0, n.i64Constant(shape.slice(start, end - start)));
  return success();
}

static LogicalResult importReshape(NodeImporter &n) {
  Value x = n.input(0);
  auto target = n.constantInts(1, "shape");
  if (!x || failed(target))
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  bool allowZero = n.intAttr("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (auto [d, s] : llvm::enumerate(*target)) {
    if (s == 0 && !allowZero) {
      if (d >= in.size())
        return n.error() << "shape entry " << d
                         << " copies a dimension the input does not have";
      s = in[d];
    }
    if (s == -1) {
      if (inferred >= 0)
        return n.error() << "shape has more than one -1";
      inferred = d;
      shape.push_back(1);
      continue;
    }
    if (s < 0)
      return n.error() << "shape entry " << s << " is invalid";
    shape.push_back(s);
    if (__builtin_mul_overflow(known, s, &known))
      return n.error() << "shape has more elements than fit in 64 bits";
  }
  int64_t total = cast<RankedTensorType>(x.getType()).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return n.error() << "cannot reshape " << x.getType() << " to shape with "
                       << known << " known elements";
    shape[inferred] = total / known;
  } else if (known != total) {
    return n.error() << "cannot reshape " << x.getType() << " ("
                     << total << " elements) to " << known << " elements";
  }
  n.setOutput(0, n.reshape(x, shape));
  return success();
}

static LogicalResult importFlatten(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size(), axis = n.intAttr("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return n.error() << "axis " << n.intAttr("axis", 1)
                     << " is out of range for rank " << rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? outer : inner) *= in[d];
  n.setOutput(0, n.reshape(x, {outer, inner}));
  return success();
}

/// Axes of Squeeze/Unsqueeze: an input since opset 13.
static FailureOr<SmallVector<int64_t>> axesOf(NodeImporter &n, int64_t rank,
                                              bool required) {
  if (!n.hasInput(1)) {
    if (required)
      return n.error() << "needs the 'axes' input";
    return SmallVector<int64_t>{};
  }
  auto axes = n.constantInts(1, "axes");
  if (failed(axes))
    return failure();
  for (int64_t &a : *axes) {
    auto norm = n.normalizeAxis(a, rank);
    if (failed(norm))
      return failure();
    a = *norm;
  }
  llvm::sort(*axes);
  if (std::adjacent_find(axes->begin(), axes->end()) != axes->end())
    return n.error() << "axes repeat an axis";
  return axes;
}

static LogicalResult importSqueeze(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  auto axes = axesOf(n, in.size(), /*required=*/false);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  for (auto [d, s] : llvm::enumerate(in)) {
    bool listed = llvm::is_contained(*axes, int64_t(d));
    if (listed && s != 1)
      return n.error() << "cannot squeeze dimension " << d << " of size " << s;
    if (listed || (axes->empty() && s == 1))
      continue;
    shape.push_back(s);
  }
  n.setOutput(0, n.reshape(x, shape));
  return success();
}

static LogicalResult importUnsqueeze(NodeImporter &n) {
  Value x = n.input(0);
  auto count = n.constantInts(1, "axes");
  if (!x || failed(count))
    return failure();
  // Axes count against the output rank.
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t outRank = in.size() + count->size();
  auto axes = axesOf(n, outRank, /*required=*/true);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  auto it = in.begin();
  for (int64_t d = 0; d < outRank; ++d)
    shape.push_back(llvm::is_contained(*axes, d) ? 1 : *it++);
  n.setOutput(0, n.reshape(x, shape));
  return success();
}

static LogicalResult importConcat(NodeImporter &n) {
  if (n.numInputs() == 0)
    return n.error() << "needs at least one input";
  SmallVector<Value> inputs;
  for (int i = 0; i < n.numInputs(); ++i) {
    Value v = n.input(i);
    if (!v)
      return failure();
    inputs.push_back(v);
  }
  ArrayRef<int64_t> first = shapeOf(inputs.front());
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), first.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first);
  shape[*axis] = 0;
  for (auto [i, v] : llvm::enumerate(inputs)) {
    // A lower rank would be read past its end (found by fuzzing).
    if (shapeOf(v).size() != first.size())
      return n.error() << "input " << i << " has rank " << shapeOf(v).size()
                       << ", input 0 has rank " << first.size();
    shape[*axis] += shapeOf(v)[*axis];
  }
  auto type = RankedTensorType::get(shape, getElementTypeOrSelf(inputs[0]));
  n.setOutput(0, n.create<ConcatOp>(type, inputs, *axis));
  return success();
}

static LogicalResult importSplit(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), in.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.hasInput(1)) {
    auto given = n.constantInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else {
    int64_t parts = n.node.output_size();
    if (parts == 0)
      return n.error() << "has no outputs";
    if (in[*axis] % parts)
      return n.error() << "cannot split size " << in[*axis] << " into "
                       << parts << " equal parts";
    sizes.assign(parts, in[*axis] / parts);
  }
  if (static_cast<int>(sizes.size()) != n.node.output_size())
    return n.error() << "split gives " << sizes.size() << " sizes for "
                     << n.node.output_size() << " outputs";
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(sizes)) {
    SmallVector<int64_t> offsets(in.size(), 0), strides(in.size(), 1);
    SmallVector<int64_t> shape(in);
    offsets[*axis] = offset;
    shape[*axis] = size;
    auto type = RankedTensorType::get(shape, getElementTypeOrSelf(x));
    n.setOutput(i, n.create<SliceOp>(type, x, offsets, strides));
    offset += size;
  }
  if (offset != in[*axis])
    return n.error() << "split sizes add up to " << offset << " but dimension "
                     << *axis << " has size " << in[*axis];
  return success();
}

static LogicalResult importSlice(NodeImporter &n) {
  Value x = n.input(0);
  auto starts = n.constantInts(1, "starts");
  auto ends = n.constantInts(2, "ends");
  if (!x || failed(starts) || failed(ends))
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  int64_t rank = in.size();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (n.hasInput(3)) {
    auto given = n.constantInts(3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (n.hasInput(4)) {
    auto given = n.constantInts(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return n.error() << "starts, ends, axes and steps have different lengths ("
                     << starts->size() << ", " << ends->size() << ", "
                     << axes.size() << ", " << steps.size() << ")";
  SmallVector<int64_t> offsets(rank, 0), strides(rank, 1), shape(in);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = n.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = in[*axis], step = steps[i];
    if (step <= 0)
      return n.error() << "step " << step << " on axis " << *axis
                       << " is not supported; rp slices with positive steps "
                          "(to reverse, Gather with constant indices)";
    // ONNX clamps starts and ends into [0, dim] after adding dim to
    // negative values.
    auto clamp = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    int64_t start = clamp((*starts)[i]), end = clamp((*ends)[i]);
    offsets[*axis] = start;
    strides[*axis] = step;
    shape[*axis] = end > start ? (end - start + step - 1) / step : 0;
  }
  auto type = RankedTensorType::get(shape, getElementTypeOrSelf(x));
  n.setOutput(0, n.create<SliceOp>(type, x, offsets, strides));
  return success();
}

static LogicalResult importGather(NodeImporter &n) {
  Value x = n.input(0), ids = n.input(1);
  if (!x || !ids)
    return failure();
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), shapeOf(x).size());
  if (failed(axis))
    return failure();
  n.setOutput(0, n.create<GatherOp>(x, ids, *axis));
  return success();
}

static LogicalResult importTranspose(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  int64_t rank = shapeOf(x).size();
  SmallVector<int64_t> perm;
  if (auto given = n.intsAttr("perm"))
    perm = *given;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (sorted != llvm::to_vector(llvm::seq<int64_t>(0, rank)))
    return n.error() << "perm [" << ArrayRef(perm)
                     << "] is not a permutation of the " << rank
                     << " dimensions of " << x.getType();
  n.setOutput(0, n.create<TransposeOp>(x, perm));
  return success();
}

static LogicalResult importExpand(NodeImporter &n) {
  Value x = n.input(0);
  auto target = n.constantInts(1, "shape");
  if (!x || failed(target))
    return failure();
  // Expand broadcasts both ways: the result is the broadcast of the input
  // shape and the given one.
  auto shape = broadcastShapes(shapeOf(x), *target);
  if (failed(shape))
    return n.error() << "input shape " << x.getType()
                     << " does not broadcast with the requested shape";
  auto type = RankedTensorType::get(*shape, getElementTypeOrSelf(x));
  n.setOutput(0, n.create<BroadcastOp>(type, x));
  return success();
}

static LogicalResult importConstantOfShape(NodeImporter &n) {
  auto shape = n.constantInts(0, "shape");
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return n.error() << "shape [" << ArrayRef(*shape)
                     << "] has a negative dimension";
  Attribute value = n.builder.getF32FloatAttr(0.0f);
  if (const auto *a = n.attr("value")) {
    Type element = convertElementType(a->t().data_type(), n.builder.getContext());
    if (!element)
      return n.error() << "value of type " << elementTypeName(a->t().data_type())
                       << " is not supported";
    auto one = n.readTensorAttr(a->t(), RankedTensorType::get({1}, element));
    if (failed(one))
      return failure();
    value = (*one).getSplatValue<Attribute>();
  }
  auto type =
      RankedTensorType::get(*shape, cast<TypedAttr>(value).getType());
  n.setOutput(0, n.constant(SplatElementsAttr::get(type, value)));
  return success();
}

static LogicalResult importRange(NodeImporter &n) {
  auto start = n.constantInput(0, "start"), limit = n.constantInput(1, "limit"),
       delta = n.constantInput(2, "delta");
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  for (DenseElementsAttr a : {*start, *limit, *delta})
    if (a.getNumElements() != 1)
      return n.error() << "start, limit and delta must be scalars, got "
                       << a.getType();
  Type element = start->getElementType();
  auto scalar = [](DenseElementsAttr a) {
    Attribute v = a.getSplatValue<Attribute>();
    if (auto f = dyn_cast<FloatAttr>(v))
      return f.getValueAsDouble();
    return double(cast<IntegerAttr>(v).getInt());
  };
  double s = scalar(*start), l = scalar(*limit), d = scalar(*delta);
  if (d == 0)
    return n.error() << "delta is 0";
  int64_t count = std::max<int64_t>(0, std::ceil((l - s) / d));
  auto type = RankedTensorType::get({count}, element);
  SmallVector<Attribute> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(isa<FloatType>(element)
                      ? Attribute(FloatAttr::get(element, s + i * d))
                      : Attribute(IntegerAttr::get(element, int64_t(s) + i * int64_t(d))));
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, out)));
  return success();
}

static LogicalResult importTrilu(NodeImporter &n) {
  Value in = n.input(0);
  if (!in)
    return failure();
  // Exporters apply Trilu to the constant ones of a causal mask; on a tensor
  // computed at run time it would need a kernel rp does not have.
  if (!matchPattern(in, m_Constant()))
    return n.error() << "Trilu of '" << n.node.input(0)
                     << "', which is computed at run time, is not supported; "
                        "rp folds Trilu on constant masks only (build the "
                        "mask from constants and shapes)";
  auto x = n.constantInput(0, "input");
  if (failed(x))
    return failure();
  int64_t k = 0;
  if (n.hasInput(1)) {
    auto given = n.constantInts(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return n.error() << "k must hold one value, got " << given->size();
    k = given->front();
  }
  bool upper = n.intAttr("upper", 1) != 0;
  ArrayRef<int64_t> shape = x->getType().getShape();
  if (shape.size() < 2)
    return n.error() << "input must have rank >= 2";
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Attribute zero = isa<FloatType>(x->getElementType())
                       ? Attribute(FloatAttr::get(x->getElementType(), 0.0))
                       : Attribute(IntegerAttr::get(x->getElementType(), 0));
  SmallVector<Attribute> out;
  for (auto [i, v] : llvm::enumerate(x->getValues<Attribute>())) {
    int64_t r = (i / cols) % rows, c = i % cols;
    bool keep = upper ? c - r >= k : c - r <= k;
    out.push_back(keep ? v : zero);
  }
  n.setOutput(0, n.constant(DenseElementsAttr::get(x->getType(), out)));
  return success();
}

/// The remainder of `a` by `b` as ONNX Mod defines it: with `fmod` the
/// sign of the dividend (C's fmod), else the sign of the divisor (Python's
/// %, integers only).
static APInt integerMod(const APInt &a, const APInt &b, bool fmod) {
  APInt r = a.srem(b);
  if (!fmod && !r.isZero() && r.isNegative() != b.isNegative())
    r += b;
  return r;
}

static LogicalResult importMod(NodeImporter &n) {
  Value a = n.input(0), b = n.input(1);
  if (!a || !b)
    return failure();
  // Exporters emit Mod in shape arithmetic (torch 2's MultiheadAttention);
  // on tensors computed at run time it would need a kernel rp does not have.
  for (int i = 0; i < 2; ++i)
    if (!matchPattern(i == 0 ? a : b, m_Constant()))
      return n.error() << "Mod of '" << n.node.input(i)
                       << "', which is computed at run time, is not "
                          "supported; rp folds Mod of constants only (the "
                          "shape arithmetic exporters emit)";
  auto x = n.constantInput(0, "A"), y = n.constantInput(1, "B");
  if (failed(x) || failed(y))
    return failure();
  Type element = x->getElementType();
  if (element != y->getElementType())
    return n.error() << "operands have different element types: "
                     << x->getType() << " and " << y->getType();
  bool fmod = n.intAttr("fmod", 0) != 0;
  bool isFloat = isa<FloatType>(element);
  if (isFloat && !fmod)
    return n.error() << "Mod of floating-point tensors needs fmod = 1 (the "
                        "ONNX specification)";
  if (!isFloat && !isa<IntegerType>(element))
    return n.error() << "Mod of " << element << " tensors is not supported";
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(x->getType().getShape(),
                                          y->getType().getShape(), shape))
    return n.error() << "shapes " << x->getType() << " and " << y->getType()
                     << " do not broadcast";
  // Element i of the result reads the element of each operand at the same
  // index, with broadcast dimensions held at 0 (numpy broadcasting).
  auto source = [&](DenseElementsAttr v, int64_t i) {
    ArrayRef<int64_t> s = v.getType().getShape();
    int64_t index = 0, stride = 1, rest = i;
    for (int64_t d = shape.size() - 1, e = s.size() - 1; d >= 0; --d, --e) {
      int64_t coord = rest % shape[d];
      rest /= shape[d];
      if (e < 0)
        continue;
      if (s[e] != 1)
        index += coord * stride;
      stride *= s[e];
    }
    return index;
  };
  auto type = RankedTensorType::get(shape, element);
  int64_t count = type.getNumElements();
  SmallVector<Attribute> out;
  auto xs = x->getValues<Attribute>(), ys = y->getValues<Attribute>();
  for (int64_t i = 0; i < count; ++i) {
    Attribute l = xs[source(*x, i)], r = ys[source(*y, i)];
    if (isFloat) {
      double v = std::fmod(cast<FloatAttr>(l).getValueAsDouble(),
                           cast<FloatAttr>(r).getValueAsDouble());
      out.push_back(FloatAttr::get(element, v));
      continue;
    }
    APInt divisor = cast<IntegerAttr>(r).getValue();
    if (divisor.isZero())
      return n.error() << "Mod by zero (element " << i << " of '"
                       << n.node.input(1) << "')";
    out.push_back(IntegerAttr::get(
        element, integerMod(cast<IntegerAttr>(l).getValue(), divisor, fmod)));
  }
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, out)));
  return success();
}

void onnx_import::registerShapeHandlers(llvm::StringMap<Handler> &t) {
  t["Shape"] = importShape;
  t["Reshape"] = importReshape;
  t["Flatten"] = importFlatten;
  t["Squeeze"] = importSqueeze;
  t["Unsqueeze"] = importUnsqueeze;
  t["Concat"] = importConcat;
  t["Split"] = importSplit;
  t["Slice"] = importSlice;
  t["Gather"] = importGather;
  t["Transpose"] = importTranspose;
  t["Expand"] = importExpand;
  t["ConstantOfShape"] = importConstantOfShape;
  t["Range"] = importRange;
  t["Trilu"] = importTrilu;
  t["Mod"] = importMod;
}
