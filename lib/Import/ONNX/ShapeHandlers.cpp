//===- ShapeHandlers.cpp - ONNX shape and data movement ops ---------------===//
//
// Shape arithmetic (Shape, ConstantOfShape, Range, ...) produces constants
// once every shape is static; Reshape, Expand, Slice and friends read those
// constants back. Nodes whose inputs are all input-independent fold in the
// constant evaluator before any handler runs; what is left here is compute
// and the shape ops whose results depend only on their input's type.
//
//===----------------------------------------------------------------------===//

#include "ConstantEvaluator.h"
#include "EvalTensor.h"
#include "NodeImporter.h"

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
    return n.error() << "cannot reshape " << x.getType() << " (" << total
                     << " elements) to " << known << " elements";
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
    // Equal parts, as many as outputs; from opset 18 `num_outputs` says how
    // many, and the last part is smaller when the size does not divide.
    int64_t parts = n.node.output_size();
    const auto *num = n.opset >= 18 ? n.attr("num_outputs") : nullptr;
    if (n.opset >= 18 && !num)
      return n.error() << "needs the 'split' input or the 'num_outputs' "
                          "attribute from opset 18";
    if (num && num->i() != parts)
      return n.error() << "num_outputs is " << num->i() << " but the node has "
                       << parts << " outputs";
    if (parts == 0)
      return n.error() << "has no outputs";
    if (!num && in[*axis] % parts)
      return n.error() << "cannot split size " << in[*axis] << " into " << parts
                       << " equal parts";
    int64_t chunk = (in[*axis] + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::clamp<int64_t>(in[*axis] - p * chunk, 0, chunk));
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
  // Axes sliced with a negative step (a flip: Inkling 2's short
  // convolution windows, `unfold(...).flip(-1)` as dynamo writes it): a
  // Gather of the constant indices the step visits, after the slice.
  SmallVector<std::pair<int64_t, SmallVector<int64_t>>> reversed;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = n.normalizeAxis(axes[i], rank);
    if (failed(axis))
      return failure();
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return n.error() << "step 0 on axis " << *axis << " is not valid";
    if (step < 0) {
      // ONNX clamps a negative step's start into [0, dim - 1] and its end
      // into [-1, dim - 1] after adding dim to negative values.
      auto clamp = [&](int64_t v, int64_t low) {
        if (v < 0)
          v += dim;
        return std::clamp<int64_t>(v, low, dim - 1);
      };
      int64_t start = clamp((*starts)[i], 0), end = clamp((*ends)[i], -1);
      SmallVector<int64_t> picks;
      for (int64_t at = start; at > end && dim > 0; at += step) {
        picks.push_back(at);
        if (at < -step) // the next index would pass 0 (and step may be huge)
          break;
      }
      if (picks.size() > 4096)
        return n.error() << "step " << step << " on axis " << *axis
                         << " visits " << picks.size()
                         << " elements; rp reverses at most 4096 (a Gather "
                            "of constant indices)";
      reversed.push_back({*axis, picks});
      continue;
    }
    // ONNX clamps starts and ends into [0, dim] after adding dim to
    // negative values.
    auto clamp = [&](int64_t v) {
      if (v < 0)
        v += dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    int64_t start = clamp((*starts)[i]), end = clamp((*ends)[i]);
    // A step past the dimension takes one element: the same slice with the
    // step the dimension, which later stride arithmetic cannot overflow.
    step = std::min(step, std::max<int64_t>(dim, 1));
    offsets[*axis] = start;
    strides[*axis] = step;
    // Rounded up without adding the step (a step near 2^63 overflows).
    shape[*axis] = end > start ? (end - start - 1) / step + 1 : 0;
  }
  auto type = RankedTensorType::get(shape, getElementTypeOrSelf(x));
  Value out = n.create<SliceOp>(type, x, offsets, strides);
  for (auto &[axis, picks] : reversed) {
    auto ids =
        RankedTensorType::get({int64_t(picks.size())}, n.builder.getI64Type());
    Value c = n.constant(DenseElementsAttr::get(ids, ArrayRef<int64_t>(picks)));
    out = n.create<GatherOp>(out, c, axis);
  }
  n.setOutput(0, out);
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
  // torch's TorchScript exporter writes `x.permute(0, -2, -1, 1)` with the
  // negative dims as given (Falcon-H1's Mamba mixer); onnxruntime reads
  // them from the end, as torch does.
  SmallVector<int64_t> sorted(perm);
  for (int64_t &d : sorted)
    if (d < 0 && d >= -rank)
      d += rank;
  SmallVector<int64_t> given(perm);
  perm = sorted;
  llvm::sort(sorted);
  if (sorted != llvm::to_vector(llvm::seq<int64_t>(0, rank)))
    return n.error() << "perm [" << ArrayRef(given)
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
  // A splat is one value, but every pass after the importer sizes the
  // tensor: an element count that overflows, or that no device could hold,
  // is refused here rather than crashing later.
  std::optional<int64_t> count = eval::checkedNumElements(*shape);
  if (!count || *count > kMaxTensorElements)
    return n.error() << "shape [" << ArrayRef(*shape) << "] has "
                     << (count ? std::to_string(*count) : "over 2^63")
                     << " elements, more than the " << kMaxTensorElements
                     << " (2^40) of any tensor rp can place";
  Attribute value = n.builder.getF32FloatAttr(0.0f);
  if (const auto *a = n.attr("value")) {
    Type element =
        convertElementType(a->t().data_type(), n.builder.getContext());
    if (!element)
      return n.error() << "value of type "
                       << elementTypeName(a->t().data_type())
                       << " is not supported";
    auto one = n.readTensorAttr(a->t(), RankedTensorType::get({1}, element));
    if (failed(one))
      return failure();
    value = (*one).getSplatValue<Attribute>();
  }
  auto type = RankedTensorType::get(*shape, cast<TypedAttr>(value).getType());
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
  // Every element becomes an attribute: checked before the cast (UB past
  // 2^63) and the allocation.
  double elements = std::ceil((l - s) / d);
  if (!(elements <= double(kMaxEvalElements)))
    return n.error() << "the range from " << eval::shortNumber(s) << " to "
                     << eval::shortNumber(l) << " by " << eval::shortNumber(d)
                     << " has " << eval::shortNumber(elements)
                     << " elements, more than the " << kMaxEvalElements
                     << " rp makes a constant of";
  int64_t count = std::max<int64_t>(0, int64_t(elements));
  auto type = RankedTensorType::get({count}, element);
  SmallVector<Attribute> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(
        isa<FloatType>(element)
            ? Attribute(FloatAttr::get(element, s + i * d))
            : Attribute(IntegerAttr::get(
                  element, int64_t(uint64_t(int64_t(s)) +
                                   uint64_t(i) * uint64_t(int64_t(d))))));
  n.setOutput(0, n.constant(DenseElementsAttr::get(type, out)));
  return success();
}

/// SplitToSequence (what torch 2's dynamo exporter writes for
/// tensor.split without its optimizer) becomes slices held as a sequence,
/// which SequenceAt reads with a constant position.
static LogicalResult importSplitToSequence(NodeImporter &n) {
  Value x = n.input(0);
  if (!x)
    return failure();
  ArrayRef<int64_t> in = shapeOf(x);
  auto axis = n.normalizeAxis(n.intAttr("axis", 0), in.size());
  if (failed(axis))
    return failure();
  int64_t dim = in[*axis];
  SmallVector<int64_t> sizes;
  bool keep = true;
  if (!n.hasInput(1)) {
    sizes.assign(dim, 1);
    keep = n.intAttr("keepdims", 1) != 0;
  } else {
    auto split = n.constantInts(1, "split");
    if (failed(split))
      return failure();
    auto type = n.constantInput(1, "split");
    if (type->getType().getRank() == 0) { // chunks of one size
      int64_t chunk = split->front();
      if (chunk <= 0)
        return n.error() << "split size " << chunk << " is not positive";
      for (int64_t at = 0; at < dim; at += chunk)
        sizes.push_back(std::min(chunk, dim - at));
    } else {
      sizes = *split;
    }
  }
  SmallVector<Value> parts;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    if (size < 0 || offset + size > dim)
      return n.error() << "split sizes exceed dimension " << *axis
                       << " of size " << dim;
    SmallVector<int64_t> offsets(in.size(), 0), strides(in.size(), 1);
    SmallVector<int64_t> shape(in);
    offsets[*axis] = offset;
    shape[*axis] = size;
    auto type = RankedTensorType::get(shape, getElementTypeOrSelf(x));
    Value part = n.create<SliceOp>(type, x, offsets, strides);
    if (!keep) {
      shape.erase(shape.begin() + *axis);
      part = n.reshape(part, shape);
    }
    parts.push_back(part);
    offset += size;
  }
  if (offset != dim)
    return n.error() << "split sizes add up to " << offset << " but dimension "
                     << *axis << " has size " << dim;
  (*n.sequences)[n.node.output(0)] = parts;
  return success();
}

static LogicalResult importSequenceAt(NodeImporter &n) {
  auto it = n.sequences->find(n.node.input(0));
  if (it == n.sequences->end())
    return n.error() << "input '" << n.node.input(0)
                     << "' is not a sequence made by SplitToSequence";
  auto position = n.constantInts(1, "position");
  if (failed(position))
    return failure();
  int64_t count = it->second.size(), p = position->front();
  if (position->size() != 1 || p < -count || p >= count)
    return n.error() << "position is out of range for a sequence of " << count
                     << " tensors";
  n.setOutput(0, it->second[p < 0 ? p + count : p]);
  return success();
}

void onnx_import::registerShapeHandlers(llvm::StringMap<Handler> &t) {
  t["SplitToSequence"] = importSplitToSequence;
  t["SequenceAt"] = importSequenceAt;
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
}
