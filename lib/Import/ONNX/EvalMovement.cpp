//===- EvalMovement.cpp - data movement and generators, evaluated ---------===//
//
// The constant evaluator's shape ops: each computes its result shape and
// the source offset of every result element (an index map applied by
// `take`), so one routine moves the data of every element type. Shape,
// Size, ConstantOfShape, Range and OneHot generate their values.
//
//===----------------------------------------------------------------------===//

#include "ConstantEvaluator.h"
#include "EvalTensor.h"

#include "mlir/Dialect/Traits.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::eval;

static Tensor i64Tensor(MLIRContext *ctx, ArrayRef<int64_t> shape,
                        ArrayRef<int64_t> values) {
  Tensor t = Tensor::make(IntegerType::get(ctx, 64), shape);
  llvm::copy(values, t.i.begin());
  return t;
}

/// The same elements under another shape.
static LogicalResult reshaped(Eval &e, const Tensor &x,
                              ArrayRef<int64_t> shape) {
  if (numElements(shape) != x.size())
    return e.n.error() << "cannot reshape " << x.size() << " elements to "
                       << numElements(shape);
  Tensor r = x;
  r.shape.assign(shape.begin(), shape.end());
  e.out.push_back(std::move(r));
  return success();
}

static LogicalResult evalShape(Eval &e) {
  const Tensor &x = e.first();
  ArrayRef<int64_t> shape = x.shape;
  int64_t rank = shape.size();
  auto clampAxis = [&](int64_t a) {
    return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank);
  };
  int64_t start = clampAxis(e.n.intAttr("start", 0));
  int64_t end = std::max(start, clampAxis(e.n.intAttr("end", rank)));
  ArrayRef<int64_t> dims = shape.slice(start, end - start);
  e.out.push_back(
      i64Tensor(e.n.builder.getContext(), {int64_t(dims.size())}, dims));
  return success();
}

static LogicalResult evalSize(Eval &e) {
  const Tensor &x = e.first();
  e.out.push_back(i64Tensor(e.n.builder.getContext(), {}, {x.size()}));
  return success();
}

static LogicalResult evalReshape(Eval &e) {
  const Tensor &t = e.first();
  auto target = e.ints(1, "shape");
  if (failed(target))
    return failure();
  bool allowZero = e.n.intAttr("allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (auto [d, s] : llvm::enumerate(*target)) {
    if (s == 0 && !allowZero) {
      if (int64_t(d) >= t.rank())
        return e.n.error() << "shape entry " << d
                           << " copies a dimension the input does not have";
      s = t.shape[d];
    }
    if (s == -1) {
      if (inferred >= 0)
        return e.n.error() << "shape has more than one -1";
      inferred = d;
      shape.push_back(1);
      continue;
    }
    if (s < 0)
      return e.n.error() << "shape entry " << s << " is invalid";
    shape.push_back(s);
    known *= s;
  }
  if (inferred >= 0) {
    if (known == 0 || t.size() % known)
      return e.n.error() << "cannot infer the -1 of the shape from " << t.size()
                         << " elements";
    shape[inferred] = t.size() / known;
  }
  return reshaped(e, t, shape);
}

static LogicalResult evalFlatten(Eval &e) {
  const Tensor &t = e.first();
  int64_t axis = e.n.intAttr("axis", 1);
  if (axis < 0)
    axis += t.rank();
  if (axis < 0 || axis > t.rank())
    return e.n.error() << "axis " << e.n.intAttr("axis", 1)
                       << " is out of range for rank " << t.rank();
  int64_t outer = numElements(ArrayRef(t.shape).take_front(axis));
  return reshaped(e, t, {outer, t.size() / std::max<int64_t>(outer, 1)});
}

/// Axes of Squeeze and Unsqueeze: input 1 since opset 13.
static FailureOr<SmallVector<int64_t>> squeezeAxes(Eval &e, int64_t rank) {
  SmallVector<int64_t> axes;
  if (e.n.hasInput(1)) {
    auto given = e.ints(1, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  }
  for (int64_t &a : axes) {
    auto norm = e.n.normalizeAxis(a, rank);
    if (failed(norm))
      return failure();
    a = *norm;
  }
  llvm::sort(axes);
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return e.n.error() << "axes repeat an axis";
  return axes;
}

static LogicalResult evalSqueeze(Eval &e) {
  const Tensor &t = e.first();
  auto axes = squeezeAxes(e, t.rank());
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.rank(); ++d) {
    bool listed = llvm::is_contained(*axes, d);
    if (listed && t.shape[d] != 1)
      return e.n.error() << "cannot squeeze dimension " << d << " of size "
                         << t.shape[d];
    if (!listed && !(axes->empty() && t.shape[d] == 1))
      shape.push_back(t.shape[d]);
  }
  return reshaped(e, t, shape);
}

static LogicalResult evalUnsqueeze(Eval &e) {
  const Tensor &t = e.first();
  auto count = e.ints(1, "axes");
  if (failed(count))
    return failure();
  int64_t outRank = t.rank() + count->size();
  auto axes = squeezeAxes(e, outRank);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  auto it = t.shape.begin();
  for (int64_t d = 0; d < outRank; ++d)
    shape.push_back(llvm::is_contained(*axes, d) ? 1 : *it++);
  return reshaped(e, t, shape);
}

static LogicalResult evalIdentity(Eval &e) {
  const Tensor &x = e.first();
  e.out.push_back(x);
  return success();
}

static LogicalResult evalTranspose(Eval &e) {
  const Tensor &t = e.first();
  SmallVector<int64_t> perm;
  if (auto given = e.n.intsAttr("perm"))
    perm = *given;
  else
    for (int64_t d = t.rank() - 1; d >= 0; --d)
      perm.push_back(d);
  // Negative dims count from the end, as the handler reads them.
  for (int64_t &d : perm)
    if (d < 0 && d >= -t.rank())
      d += t.rank();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (sorted != llvm::to_vector(llvm::seq<int64_t>(0, t.rank())))
    return e.n.error() << "perm is not a permutation of the " << t.rank()
                       << " dimensions";
  SmallVector<int64_t> own = stridesOf(t.shape), shape, strides;
  for (int64_t p : perm) {
    shape.push_back(t.shape[p]);
    strides.push_back(own[p]);
  }
  e.out.push_back(take(t, affineIndex(shape, strides), shape));
  return success();
}

/// Slice with any steps, negative ones included (ONNX clamping rules).
static LogicalResult evalSlice(Eval &e) {
  const Tensor &t = e.first();
  auto starts = e.ints(1, "starts"), ends = e.ints(2, "ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (e.n.hasInput(3)) {
    auto given = e.ints(3, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  }
  if (e.n.hasInput(4)) {
    auto given = e.ints(4, "steps");
    if (failed(given))
      return failure();
    steps = *given;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return e.n.error() << "starts, ends, axes and steps have different "
                          "lengths";
  SmallVector<int64_t> own = stridesOf(t.shape), shape(t.shape), strides(own);
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = e.n.normalizeAxis(axes[i], t.rank());
    if (failed(axis))
      return failure();
    int64_t dim = t.shape[*axis], step = steps[i];
    if (step == 0)
      return e.n.error() << "step 0 on axis " << *axis;
    // A step longer than the dimension takes one element at most: clamped,
    // the length and stride arithmetic below cannot overflow.
    step = std::clamp<int64_t>(step, -(dim + 1), dim + 1);
    int64_t start = (*starts)[i], end = (*ends)[i];
    start += start < 0 ? dim : 0;
    end += end < 0 ? dim : 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t len = step > 0 ? (end - start + step - 1) / step
                           : (start - end - step - 1) / -step;
    shape[*axis] = std::max<int64_t>(len, 0);
    base += start * own[*axis];
    strides[*axis] = step * own[*axis];
  }
  if (numElements(shape) == 0)
    base = 0;
  e.out.push_back(take(t, affineIndex(shape, strides, base), shape));
  return success();
}

static LogicalResult evalGather(Eval &e) {
  const Tensor &t = e.first();
  auto ids = e.ints(1, "indices");
  if (failed(ids))
    return failure();
  auto axis = e.n.normalizeAxis(e.n.intAttr("axis", 0), t.rank());
  if (failed(axis))
    return failure();
  int64_t dim = t.shape[*axis], inner = stridesOf(t.shape)[*axis];
  int64_t outer = numElements(ArrayRef(t.shape).take_front(*axis));
  SmallVector<int64_t> shape(ArrayRef(t.shape).take_front(*axis));
  llvm::append_range(shape, e.in[1].shape);
  llvm::append_range(shape, ArrayRef(t.shape).drop_front(*axis + 1));
  if (failed(e.fits(shape)))
    return failure();
  std::vector<int64_t> index;
  index.reserve(numElements(shape));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t id : *ids) {
      int64_t j = id < 0 ? id + dim : id;
      if (j < 0 || j >= dim)
        return e.n.error() << "index " << id << " is out of range for "
                           << "dimension " << *axis << " of size " << dim;
      for (int64_t in = 0; in < inner; ++in)
        index.push_back((o * dim + j) * inner + in);
    }
  e.out.push_back(take(t, index, shape));
  return success();
}

/// GatherND with batch_dims: each index tuple of the last dimension of the
/// indices picks a slice of the data (torch 2's dynamo exporter writes it
/// for advanced indexing of attention masks).
static LogicalResult evalGatherND(Eval &e) {
  const Tensor &t = e.first();
  auto ids = e.ints(1, "indices");
  if (failed(ids))
    return failure();
  ArrayRef<int64_t> is = e.in[1].shape;
  int64_t b = e.n.intAttr("batch_dims", 0);
  if (is.empty() || b < 0 || b >= int64_t(is.size()) ||
      b + is.back() > t.rank())
    return e.n.error() << "indices of shape [" << is
                       << "] do not fit data of rank " << t.rank()
                       << " with batch_dims " << b;
  for (int64_t d = 0; d < b; ++d)
    if (is[d] != t.shape[d])
      return e.n.error() << "batch dimension " << d << " differs";
  int64_t k = is.back(), tuples = numElements(is.drop_back());
  int64_t batches = numElements(ArrayRef(t.shape).take_front(b));
  int64_t slice = numElements(ArrayRef(t.shape).drop_front(b + k));
  SmallVector<int64_t> own = stridesOf(t.shape);
  int64_t batchStride = b ? own[b - 1] : t.size();
  SmallVector<int64_t> shape(is.drop_back());
  llvm::append_range(shape, ArrayRef(t.shape).drop_front(b + k));
  if (failed(e.fits(shape)))
    return failure();
  std::vector<int64_t> index;
  index.reserve(numElements(shape));
  for (int64_t o = 0; o < tuples; ++o) {
    int64_t offset = (o / std::max<int64_t>(tuples / batches, 1)) * batchStride;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = t.shape[b + j], id = (*ids)[o * k + j];
      if (id < -dim || id >= dim)
        return e.n.error() << "index " << id << " is out of range for "
                           << "dimension " << b + j << " of size " << dim;
      offset += (id < 0 ? id + dim : id) * own[b + j];
    }
    for (int64_t s = 0; s < slice; ++s)
      index.push_back(offset + s);
  }
  e.out.push_back(take(t, index, shape));
  return success();
}

static LogicalResult evalConcat(Eval &e) {
  FailureOr<SmallVector<const Tensor *>> all = e.inputs();
  if (failed(all))
    return failure();
  SmallVector<const Tensor *> &ins = *all;
  const Tensor &first = *ins[0];
  auto axis = e.n.normalizeAxis(e.n.intAttr("axis", 0), first.rank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.shape);
  shape[*axis] = 0;
  for (const Tensor *t : ins) {
    if (t->rank() != first.rank() || t->element != first.element)
      return e.n.error() << "inputs differ in rank or element type";
    for (int64_t d = 0; d < t->rank(); ++d)
      if (d != *axis && t->shape[d] != first.shape[d])
        return e.n.error() << "inputs differ in dimension " << d;
    shape[*axis] += t->shape[*axis];
  }
  if (failed(e.fits(shape)))
    return failure();
  Tensor r = Tensor::make(first.element, shape);
  int64_t outer = numElements(ArrayRef(shape).take_front(*axis)), k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor *t : ins) {
      int64_t chunk = t->shape[*axis] * stridesOf(t->shape)[*axis];
      for (int64_t c = 0; c < chunk; ++c, ++k)
        (r.isFloat() ? r.f[k] = t->f[o * chunk + c]
                     : r.i[k] = t->i[o * chunk + c]);
    }
  e.out.push_back(std::move(r));
  return success();
}

/// Split by the `split` input, or into equal parts: as many as outputs, or
/// `num_outputs` from opset 18 (the last part smaller when uneven).
static LogicalResult evalSplit(Eval &e) {
  const Tensor &t = e.first();
  auto axis = e.n.normalizeAxis(e.n.intAttr("axis", 0), t.rank());
  if (failed(axis))
    return failure();
  int64_t dim = t.shape[*axis], parts = e.n.node.output_size();
  SmallVector<int64_t> sizes;
  if (e.n.hasInput(1)) {
    auto given = e.ints(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  } else if (parts > 0) {
    int64_t chunk = (dim + parts - 1) / parts;
    if (!e.n.attr("num_outputs") && dim % parts)
      return e.n.error() << "cannot split size " << dim << " into " << parts
                         << " equal parts";
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::clamp<int64_t>(dim - p * chunk, 0, chunk));
  }
  if (int64_t(sizes.size()) != parts ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
    return e.n.error() << "split sizes do not match the outputs and "
                          "dimension "
                       << *axis << " of size " << dim;
  SmallVector<int64_t> own = stridesOf(t.shape);
  int64_t offset = 0;
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(t.shape);
    shape[*axis] = size;
    e.out.push_back(
        take(t, affineIndex(shape, own, offset * own[*axis]), shape));
    offset += size;
  }
  return success();
}

static LogicalResult evalExpand(Eval &e) {
  const Tensor &x = e.first();
  auto target = e.ints(1, "shape");
  if (failed(target))
    return failure();
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(x.shape, *target, shape))
    return e.n.error() << "the input shape does not broadcast with the "
                          "requested shape";
  if (failed(e.fits(shape)))
    return failure();
  e.out.push_back(take(x, broadcastIndex(x.shape, shape), shape));
  return success();
}

static LogicalResult evalTile(Eval &e) {
  const Tensor &t = e.first();
  auto repeats = e.ints(1, "repeats");
  if (failed(repeats))
    return failure();
  if (int64_t(repeats->size()) != t.rank())
    return e.n.error() << "repeats has " << repeats->size()
                       << " entries for rank " << t.rank();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.rank(); ++d) {
    int64_t size;
    if ((*repeats)[d] < 0)
      return e.n.error() << "repeats must not be negative";
    if (__builtin_mul_overflow(t.shape[d], (*repeats)[d], &size))
      return e.n.error() << "repeats of dimension " << d << " overflow";
    shape.push_back(size);
  }
  if (failed(e.fits(shape)))
    return failure();
  SmallVector<int64_t> own = stridesOf(t.shape);
  std::vector<int64_t> index(numElements(shape));
  SmallVector<int64_t> coord(t.rank(), 0);
  for (size_t k = 0; k < index.size(); ++k) {
    int64_t src = 0;
    for (int64_t d = 0; d < t.rank(); ++d)
      src += (coord[d] % t.shape[d]) * own[d];
    index[k] = src;
    for (int64_t d = t.rank() - 1; d >= 0 && ++coord[d] == shape[d]; --d)
      coord[d] = 0;
  }
  e.out.push_back(take(t, index, shape));
  return success();
}

static LogicalResult evalConstantOfShape(Eval &e) {
  auto shape = e.ints(0, "shape");
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return e.n.error() << "shape [" << ArrayRef(*shape)
                       << "] has a negative dimension";
  // Checked before the tensor is allocated (a bad_alloc would abort).
  std::optional<int64_t> count = checkedNumElements(*shape);
  if (!count || *count > kMaxEvalElements)
    return e.n.error() << "shape [" << ArrayRef(*shape) << "] has "
                       << (count ? std::to_string(*count) : "over 2^63")
                       << " elements, more than the " << kMaxEvalElements
                       << " rp folds at import" << kTooLargeHint;
  MLIRContext *ctx = e.n.builder.getContext();
  Tensor r = Tensor::make(Float32Type::get(ctx), *shape);
  if (const auto *a = e.n.attr("value")) {
    Type element = convertElementType(a->t().data_type(), ctx);
    if (!element)
      return e.n.error() << "value of type "
                         << elementTypeName(a->t().data_type())
                         << " is not supported";
    auto one = e.n.readTensorAttr(a->t(), RankedTensorType::get({1}, element));
    if (failed(one))
      return failure();
    r = Tensor::make(element, *shape);
    if (r.isFloat())
      std::fill(r.f.begin(), r.f.end(),
                (*one).getSplatValue<APFloat>().convertToDouble());
    else
      std::fill(r.i.begin(), r.i.end(),
                element.isInteger(1)
                    ? int64_t((*one).getSplatValue<bool>())
                    : (*one).getSplatValue<APInt>().getSExtValue());
  }
  e.out.push_back(std::move(r));
  return success();
}

/// Range accumulates start + delta + delta ... in the element type, as
/// onnxruntime's kernel does.
static LogicalResult evalRange(Eval &e) {
  SmallVector<const Tensor *> args;
  for (int k = 0; k < 3; ++k) {
    auto t = e.input(k);
    if (failed(t))
      return failure();
    if ((*t)->size() != 1)
      return e.n.error() << "start, limit and delta must be scalars, got "
                         << RankedTensorType::get((*t)->shape, (*t)->element);
    args.push_back(*t);
  }
  Type element = args[0]->element;
  double s = args[0]->asDouble(0), l = args[1]->asDouble(0),
         d = args[2]->asDouble(0);
  if (d == 0)
    return e.n.error() << "delta is 0";
  // Checked as a double, before the cast (UB past 2^63) and the allocation.
  double elements = std::ceil((l - s) / d);
  if (!(elements <= double(kMaxEvalElements)))
    return e.n.error() << "the range from " << shortNumber(s) << " to "
                       << shortNumber(l) << " by " << shortNumber(d) << " has "
                       << shortNumber(elements) << " elements, more than the "
                       << kMaxEvalElements << " rp folds at import";
  int64_t count = std::max<int64_t>(0, int64_t(elements));
  Tensor r = Tensor::make(element, {count});
  if (r.isFloat()) {
    double v = s;
    for (int64_t k = 0; k < count; ++k, v = roundTo(element, v + d))
      r.f[k] = v;
  } else {
    for (int64_t k = 0; k < count; ++k)
      r.i[k] = int64_t(uint64_t(args[0]->i[0]) +
                       uint64_t(k) * uint64_t(args[2]->i[0])); // wrapping
  }
  e.out.push_back(std::move(r));
  return success();
}

/// OneHot: the indices' shape with `depth` inserted at `axis`; values[1]
/// where the position equals the index (negative ones count from depth),
/// else values[0]. The TorchScript exporter writes a repeat_interleave by
/// a count computed from sizes as a Tile whose repeats are such a OneHot
/// of constants (Qwen3.5's and Falcon-H1's grouped heads).
static LogicalResult evalOneHot(Eval &e) {
  auto depthIn = e.input(1);
  auto values = e.input(2);
  if (failed(depthIn) || failed(values))
    return failure();
  const Tensor &ids = e.first();
  if ((*depthIn)->size() != 1 || (*values)->size() != 2)
    return e.n.error() << "depth must hold one value and values two";
  int64_t depth = int64_t((*depthIn)->asDouble(0));
  auto axis = e.n.normalizeAxis(e.n.intAttr("axis", -1), ids.rank() + 1);
  if (depth < 1 || failed(axis))
    return failed(axis) ? failure()
                        : (e.n.error() << "depth " << depth << " is not >= 1");
  SmallVector<int64_t> shape(ids.shape);
  shape.insert(shape.begin() + *axis, depth);
  if (failed(e.fits(shape)))
    return failure();
  int64_t inner = numElements(ArrayRef<int64_t>(ids.shape).drop_front(*axis));
  const Tensor &v = **values;
  Tensor r = Tensor::make(v.element, shape);
  for (int64_t k = 0; k < r.size(); ++k) {
    int64_t at = k / (depth * inner) * inner + k % inner;
    int64_t pos = k / inner % depth, id = int64_t(ids.asDouble(at));
    int64_t pick = id == pos || id + depth == pos ? 1 : 0;
    if (r.isFloat())
      r.f[k] = v.f[pick];
    else
      r.i[k] = v.i[pick];
  }
  e.out.push_back(std::move(r));
  return success();
}

void eval::registerMovementEvaluators(llvm::StringMap<EvalFn> &t) {
  t["Shape"] = evalShape;
  t["Size"] = evalSize;
  t["Reshape"] = evalReshape;
  t["Flatten"] = evalFlatten;
  t["Squeeze"] = evalSqueeze;
  t["Unsqueeze"] = evalUnsqueeze;
  t["Identity"] = evalIdentity;
  t["Transpose"] = evalTranspose;
  t["Slice"] = evalSlice;
  t["Gather"] = evalGather;
  t["GatherND"] = evalGatherND;
  t["Concat"] = evalConcat;
  t["Split"] = evalSplit;
  t["Expand"] = evalExpand;
  t["Tile"] = evalTile;
  t["ConstantOfShape"] = evalConstantOfShape;
  t["Range"] = evalRange;
  t["OneHot"] = evalOneHot;
}
