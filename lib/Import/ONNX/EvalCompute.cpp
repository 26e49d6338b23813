//===- EvalCompute.cpp - reductions and contractions, evaluated -----------===//
//
// The constant evaluator's ops that combine elements: Reduce*, CumSum,
// Trilu, MatMul, Einsum, Pad, ScatterND and ScatterElements. Floats accumulate
// in the element type in a fixed order (row-major over what is summed).
//
//===----------------------------------------------------------------------===//

#include "EvalTensor.h"

#include "mlir/Dialect/Traits.h"

#include <cctype>
#include <cmath>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::eval;

/// Axes of a reduction or CumSum-like op, normalized and sorted: from input
/// 1 when the op takes them there (`fromInput`), else the attribute.
static FailureOr<SmallVector<int64_t>> reduceAxes(Eval &e, int64_t rank,
                                                  bool fromInput) {
  SmallVector<int64_t> axes;
  if (fromInput && e.n.hasInput(1)) {
    auto given = e.ints(1, "axes");
    if (failed(given))
      return failure();
    axes = *given;
  } else if (auto given = e.n.intsAttr("axes")) {
    axes = *given;
  }
  for (int64_t &a : axes) {
    auto norm = e.n.normalizeAxis(a, rank);
    if (failed(norm))
      return failure();
    a = *norm;
  }
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

/// ReduceSum/Mean/Max/Min/Prod. Axes are an input from opset 18 (ReduceSum
/// from 13). Elements accumulate in row-major order in the element type.
static LogicalResult evalReduce(Eval &e) {
  const Tensor &t = e.first();
  StringRef op = e.n.node.op_type();
  bool fromInput = op == "ReduceSum" || e.n.opset >= 18;
  auto axes = reduceAxes(e, t.rank(), fromInput);
  if (failed(axes))
    return failure();
  if (axes->empty()) {
    if (e.n.intAttr("noop_with_empty_axes", 0)) {
      e.out.push_back(t);
      return success();
    }
    for (int64_t d = 0; d < t.rank(); ++d)
      axes->push_back(d);
  }
  SmallVector<int64_t> keptShape(t.shape), strides(t.rank(), 0);
  for (int64_t a : *axes)
    keptShape[a] = 1;
  SmallVector<int64_t> own = stridesOf(keptShape);
  for (int64_t d = 0; d < t.rank(); ++d)
    if (keptShape[d] != 1)
      strides[d] = own[d];
  std::vector<int64_t> target = affineIndex(t.shape, strides);
  Tensor r = Tensor::make(t.element, keptShape);
  int64_t n = r.size(), per = n ? t.size() / n : 0;
  std::vector<bool> seen(n, false);
  bool wide = t.element.isF64();
  for (int64_t k = 0; k < t.size(); ++k) {
    int64_t o = target[k];
    double v = t.asDouble(k);
    if (r.isFloat()) {
      double &acc = r.f[o];
      if (!seen[o])
        acc = op == "ReduceProd"                        ? 1
              : op == "ReduceSum" || op == "ReduceMean" ? 0
                                                        : v;
      if (op == "ReduceSum" || op == "ReduceMean")
        acc = roundTo(t.element, FLOAT_FN2(a + b)(acc, v, wide));
      else if (op == "ReduceProd")
        acc = roundTo(t.element, FLOAT_FN2(a * b)(acc, v, wide));
      else if (op == "ReduceMax" ? v > acc : v < acc)
        acc = v;
    } else {
      int64_t &acc = r.i[o], w = t.i[k];
      if (!seen[o])
        acc = op == "ReduceProd"                        ? 1
              : op == "ReduceSum" || op == "ReduceMean" ? 0
                                                        : w;
      if (op == "ReduceSum" || op == "ReduceMean")
        acc = wrapInt(t.element, int64_t(uint64_t(acc) + uint64_t(w)));
      else if (op == "ReduceProd")
        acc = wrapInt(t.element, int64_t(uint64_t(acc) * uint64_t(w)));
      else
        acc = op == "ReduceMax" ? std::max(acc, w) : std::min(acc, w);
    }
    seen[o] = true;
  }
  if (op == "ReduceMean" && per > 0)
    for (int64_t o = 0; o < n; ++o) {
      if (r.isFloat())
        r.f[o] = roundTo(t.element, FLOAT_FN2(a / b)(r.f[o], per, wide));
      else
        r.i[o] = r.i[o] / per; // an integer mean truncates, as ONNX's
    }
  if (!e.n.intAttr("keepdims", 1)) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < t.rank(); ++d)
      if (!llvm::is_contained(*axes, d))
        shape.push_back(t.shape[d]);
    r.shape = shape;
  }
  e.out.push_back(std::move(r));
  return success();
}

/// CumSum along the axis given as input 1, with `exclusive` and `reverse`.
static LogicalResult evalCumSum(Eval &e) {
  const Tensor &t = e.first();
  auto axisIn = e.ints(1, "axis");
  if (failed(axisIn))
    return failure();
  if (axisIn->size() != 1)
    return e.n.error() << "axis must hold one value";
  auto axis = e.n.normalizeAxis(axisIn->front(), t.rank());
  if (failed(axis))
    return failure();
  bool exclusive = e.n.intAttr("exclusive", 0),
       reverse = e.n.intAttr("reverse", 0);
  int64_t len = t.shape[*axis], inner = stridesOf(t.shape)[*axis];
  int64_t outer = len && inner ? t.size() / (len * inner) : 0;
  Tensor r = Tensor::make(t.element, t.shape);
  bool wide = t.element.isF64();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double facc = 0;
      int64_t iacc = 0;
      for (int64_t s = 0; s < len; ++s) {
        int64_t j = reverse ? len - 1 - s : s;
        int64_t k = (o * len + j) * inner + in;
        if (exclusive)
          (r.isFloat() ? r.f[k] = facc : r.i[k] = iacc);
        if (r.isFloat())
          facc = roundTo(t.element, FLOAT_FN2(a + b)(facc, t.f[k], wide));
        else
          iacc = wrapInt(t.element, int64_t(uint64_t(iacc) + uint64_t(t.i[k])));
        if (!exclusive)
          (r.isFloat() ? r.f[k] = facc : r.i[k] = iacc);
      }
    }
  e.out.push_back(std::move(r));
  return success();
}

/// Trilu keeps the upper (or lower) triangle of the last two dimensions
/// relative to diagonal k and zeroes the rest.
static LogicalResult evalTrilu(Eval &e) {
  const Tensor &t = e.first();
  int64_t k = 0;
  if (e.n.hasInput(1)) {
    auto given = e.ints(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return e.n.error() << "k must hold one value, got " << given->size();
    k = given->front();
  }
  if (t.rank() < 2)
    return e.n.error() << "input must have rank >= 2";
  bool upper = e.n.intAttr("upper", 1) != 0;
  int64_t rows = t.shape[t.rank() - 2], cols = t.shape.back();
  Tensor r = t;
  for (int64_t i = 0; i < t.size(); ++i) {
    int64_t row = (i / cols) % rows, col = i % cols;
    if (upper ? col - row < k : col - row > k)
      (r.isFloat() ? r.f[i] = 0 : r.i[i] = 0);
  }
  e.out.push_back(std::move(r));
  return success();
}

/// numpy matmul; f32 accumulates in float in order of the inner dimension.
static LogicalResult evalMatMul(Eval &e) {
  auto b = e.input(1);
  if (failed(b))
    return failure();
  Tensor x = e.first(), y = **b;
  if (x.element != y.element || x.isBool() || !x.rank() || !y.rank())
    return e.n.error() << "cannot multiply these operands";
  bool vecA = x.rank() == 1, vecB = y.rank() == 1;
  if (vecA)
    x.shape.insert(x.shape.begin(), 1);
  if (vecB)
    y.shape.push_back(1);
  int64_t m = x.shape[x.rank() - 2], kk = x.shape.back(), n = y.shape.back();
  if (y.shape[y.rank() - 2] != kk)
    return e.n.error() << "contraction sizes " << kk << " and "
                       << y.shape[y.rank() - 2] << " differ";
  SmallVector<int64_t> batch;
  ArrayRef<int64_t> ba = ArrayRef(x.shape).drop_back(2),
                    bb = ArrayRef(y.shape).drop_back(2);
  if (!OpTrait::util::getBroadcastedShape(ba, bb, batch))
    return e.n.error() << "batch dimensions do not broadcast";
  SmallVector<int64_t> batchRows(batch);
  batchRows.append({m, n});
  if (failed(e.fits(batchRows)) ||
      failed(e.affordable({numElements(batch), m, n, kk})))
    return failure();
  std::vector<int64_t> ia = broadcastIndex(ba, batch),
                       ib = broadcastIndex(bb, batch);
  SmallVector<int64_t> shape(batch);
  shape.push_back(m);
  shape.push_back(n);
  Tensor r = Tensor::make(x.element, shape);
  bool wide = x.element.isF64();
  for (size_t p = 0; p < ia.size(); ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t o = (p * m + i) * n + j;
        double facc = 0;
        int64_t iacc = 0;
        for (int64_t q = 0; q < kk; ++q) {
          int64_t ka = (ia[p] * m + i) * kk + q, kb = (ib[p] * kk + q) * n + j;
          if (r.isFloat())
            facc = roundTo(
                x.element,
                FLOAT_FN2(a + b)(facc, FLOAT_FN2(a * b)(x.f[ka], y.f[kb], wide),
                                 wide));
          else
            iacc += x.i[ka] * y.i[kb];
        }
        (r.isFloat() ? r.f[o] = facc : r.i[o] = wrapInt(x.element, iacc));
      }
  if (vecB)
    shape.pop_back();
  if (vecA)
    shape.erase(shape.end() - (vecB ? 1 : 2));
  r.shape = shape;
  e.out.push_back(std::move(r));
  return success();
}

/// Einsum in explicit ("ij,jk->ik") or implicit ("ij,jk") form, without
/// ellipses; exporters emit it for rotary tables ("i,j->ij"). Products sum
/// in row-major order of the summed letters.
static LogicalResult evalEinsum(Eval &e) {
  std::string eq;
  for (char c : e.n.stringAttr("equation", ""))
    if (c != ' ')
      eq += c;
  if (StringRef(eq).contains("..."))
    return e.n.error() << "equation '" << eq
                       << "' uses an ellipsis, which rp does not fold";
  auto [lhs, rhs] = StringRef(eq).split("->");
  bool implicit = !StringRef(eq).contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (int(terms.size()) != e.n.numInputs())
    return e.n.error() << "equation '" << eq << "' has " << terms.size()
                       << " operands but the node has " << e.n.numInputs()
                       << " inputs";
  llvm::DenseMap<char, int64_t> size, count;
  SmallVector<const Tensor *> ins;
  for (auto [k, term] : llvm::enumerate(terms)) {
    auto t = e.input(k);
    if (failed(t))
      return failure();
    if (int64_t(term.size()) != (*t)->rank() || (*t)->isBool() ||
        (*t)->element != e.in[0].element)
      return e.n.error() << "operand " << k << " does not match '" << term
                         << "' (rank, or element type)";
    for (auto [d, c] : llvm::enumerate(term)) {
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return e.n.error() << "bad letter '" << c << "' in '" << eq << "'";
      auto [it, inserted] = size.try_emplace(c, (*t)->shape[d]);
      if (!inserted && it->second != (*t)->shape[d])
        return e.n.error() << "letter '" << c << "' has sizes " << it->second
                           << " and " << (*t)->shape[d];
      ++count[c];
    }
    ins.push_back(*t);
  }
  std::string out = rhs.str();
  if (implicit) { // letters used once, in alphabetical order
    for (auto &entry : count)
      if (entry.second == 1)
        out += entry.first;
    llvm::sort(out);
  }
  std::string summed;
  for (auto &entry : size)
    if (out.find(entry.first) == std::string::npos)
      summed += entry.first;
  llvm::sort(summed);
  // Each operand's offset is a sum over letters of coord * stride.
  auto strideOf = [&](size_t k, char c) {
    SmallVector<int64_t> own = stridesOf(ins[k]->shape);
    int64_t s = 0;
    for (auto [d, l] : llvm::enumerate(terms[k]))
      if (l == c)
        s += own[d];
    return s;
  };
  SmallVector<int64_t> shape, sumShape;
  for (char c : out) {
    if (!size.count(c))
      return e.n.error() << "output letter '" << c << "' is in no operand";
    shape.push_back(size[c]);
  }
  for (char c : summed)
    sumShape.push_back(size[c]);
  if (failed(e.fits(shape)) || failed(e.fits(sumShape)) ||
      failed(e.affordable(
          {numElements(shape), numElements(sumShape), int64_t(ins.size())})))
    return failure();
  Tensor r = Tensor::make(ins[0]->element, shape);
  std::vector<std::vector<int64_t>> outIdx, sumIdx;
  for (size_t k = 0; k < ins.size(); ++k) {
    SmallVector<int64_t> os, ss;
    for (char c : out)
      os.push_back(strideOf(k, c));
    for (char c : summed)
      ss.push_back(strideOf(k, c));
    outIdx.push_back(affineIndex(shape, os));
    sumIdx.push_back(affineIndex(sumShape, ss));
  }
  bool wide = r.element.isF64();
  for (int64_t o = 0; o < r.size(); ++o) {
    double facc = 0;
    int64_t iacc = 0;
    for (size_t q = 0; q < sumIdx[0].size(); ++q) {
      double fp = 1;
      int64_t ip = 1;
      for (size_t k = 0; k < ins.size(); ++k) {
        int64_t at = outIdx[k][o] + sumIdx[k][q];
        if (r.isFloat())
          fp = k ? roundTo(r.element, FLOAT_FN2(a * b)(fp, ins[k]->f[at], wide))
                 : ins[k]->f[at];
        else
          ip = int64_t(uint64_t(ip) * uint64_t(ins[k]->i[at]));
      }
      if (r.isFloat())
        facc = roundTo(r.element, FLOAT_FN2(a + b)(facc, fp, wide));
      else
        iacc = int64_t(uint64_t(iacc) + uint64_t(ip));
    }
    (r.isFloat() ? r.f[o] = facc : r.i[o] = wrapInt(r.element, iacc));
  }
  e.out.push_back(std::move(r));
  return success();
}

/// Pad in constant, edge, reflect and wrap modes; pads may be negative
/// (crop). Axes are input 3 from opset 18.
static LogicalResult evalPad(Eval &e) {
  const Tensor &t = e.first();
  auto pads = e.ints(1, "pads");
  if (failed(pads))
    return failure();
  SmallVector<int64_t> axes;
  if (e.n.hasInput(3)) {
    auto given = e.ints(3, "axes");
    if (failed(given))
      return failure();
    for (int64_t a : *given) {
      auto norm = e.n.normalizeAxis(a, t.rank());
      if (failed(norm))
        return failure();
      axes.push_back(*norm);
    }
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, t.rank()));
  }
  if (pads->size() != 2 * axes.size())
    return e.n.error() << "pads has " << pads->size() << " entries for "
                       << axes.size() << " axes";
  std::string mode = e.n.stringAttr("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return e.n.error() << "mode '" << mode << "' is not supported";
  SmallVector<int64_t> begin(t.rank(), 0), shape(t.shape);
  for (auto [k, a] : llvm::enumerate(axes)) {
    begin[a] = (*pads)[k];
    if (__builtin_add_overflow(shape[a], (*pads)[k], &shape[a]) ||
        __builtin_add_overflow(shape[a], (*pads)[k + axes.size()], &shape[a]))
      return e.n.error() << "pads of dimension " << a << " overflow";
    if (shape[a] < 0)
      return e.n.error() << "pads remove more than dimension " << a << " has";
    if (mode != "constant" && t.shape[a] == 0 && shape[a] > 0)
      return e.n.error() << "cannot pad an empty dimension in mode " << mode;
  }
  if (failed(e.fits(shape)))
    return failure();
  double fill = 0;
  if (e.n.hasInput(2)) {
    auto value = e.input(2);
    if (failed(value))
      return failure();
    fill = (*value)->asDouble(0);
  }
  SmallVector<int64_t> own = stridesOf(t.shape), coord(t.rank(), 0);
  Tensor r = Tensor::make(t.element, shape);
  for (int64_t k = 0; k < r.size(); ++k) {
    int64_t src = 0;
    bool inside = true;
    for (int64_t d = 0; d < t.rank(); ++d) {
      int64_t c = coord[d] - begin[d], n = t.shape[d];
      if (c < 0 || c >= n) {
        if (mode == "constant")
          inside = false;
        else if (mode == "edge")
          c = std::clamp<int64_t>(c, 0, n - 1);
        else if (mode == "wrap")
          c = ((c % n) + n) % n;
        else if (n == 1)
          c = 0;
        else { // reflect: mirror without repeating the edge
          int64_t period = 2 * (n - 1);
          c = ((c % period) + period) % period;
          c = c < n ? c : period - c;
        }
      }
      src += c * own[d];
    }
    if (r.isFloat())
      r.f[k] = inside ? t.f[src] : roundTo(t.element, fill);
    else
      r.i[k] = inside ? t.i[src] : int64_t(fill);
    for (int64_t d = t.rank() - 1; d >= 0 && ++coord[d] == shape[d]; --d)
      coord[d] = 0;
  }
  e.out.push_back(std::move(r));
  return success();
}

/// Combines `update` into `slot` by the ScatterND/ScatterElements
/// reduction (none, add, mul, max, min; opsets 16 and 18).
static void scatterInto(Tensor &r, int64_t at, const Tensor &u, int64_t from,
                        StringRef reduction) {
  bool wide = r.element.isF64();
  if (r.isFloat()) {
    double &a = r.f[at], b = u.f[from];
    a = reduction == "add"   ? roundTo(r.element, FLOAT_FN2(a + b)(a, b, wide))
        : reduction == "mul" ? roundTo(r.element, FLOAT_FN2(a * b)(a, b, wide))
        : reduction == "max" ? std::max(a, b)
        : reduction == "min" ? std::min(a, b)
                             : b;
  } else {
    int64_t &a = r.i[at], b = u.i[from];
    a = reduction == "add"   ? wrapInt(r.element, int64_t(uint64_t(a) + b))
        : reduction == "mul" ? wrapInt(r.element, int64_t(uint64_t(a) * b))
        : reduction == "max" ? std::max(a, b)
        : reduction == "min" ? std::min(a, b)
                             : b;
  }
}

static FailureOr<std::string> reductionOf(Eval &e) {
  std::string reduction = e.n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return e.n.error() << "reduction '" << reduction << "' is not one of "
                       << "none, add, mul, max, min";
  return reduction;
}

/// ScatterND: each index tuple (the last dimension of the indices) names a
/// slice of the data that the matching slice of the updates replaces or
/// combines into, in order.
static LogicalResult evalScatterND(Eval &e) {
  auto up = e.input(2);
  auto ids = e.ints(1, "indices");
  auto reduction = reductionOf(e);
  if (failed(up) || failed(ids) || failed(reduction))
    return failure();
  const Tensor &t = e.first(), &u = **up;
  ArrayRef<int64_t> is = e.in[1].shape;
  if (is.empty() || is.back() > t.rank() || u.element != t.element)
    return e.n.error() << "indices of shape [" << is
                       << "] or the updates do not fit the data";
  int64_t k = is.back(), tuples = numElements(is.drop_back());
  int64_t slice = numElements(ArrayRef(t.shape).drop_front(k));
  if (u.size() != tuples * slice)
    return e.n.error() << "updates hold " << u.size() << " elements, "
                       << tuples * slice << " expected";
  SmallVector<int64_t> own = stridesOf(t.shape);
  Tensor r = t;
  for (int64_t o = 0; o < tuples; ++o) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = t.shape[j], id = (*ids)[o * k + j];
      if (id < -dim || id >= dim)
        return e.n.error() << "index " << id << " is out of range for "
                           << "dimension " << j << " of size " << dim;
      offset += (id < 0 ? id + dim : id) * own[j];
    }
    for (int64_t s = 0; s < slice; ++s)
      scatterInto(r, offset + s, u, o * slice + s, *reduction);
  }
  e.out.push_back(std::move(r));
  return success();
}

/// ScatterElements: element i of the updates goes to the data position of
/// i with its `axis` coordinate replaced by indices[i].
static LogicalResult evalScatterElements(Eval &e) {
  auto up = e.input(2);
  auto ids = e.ints(1, "indices");
  auto reduction = reductionOf(e);
  if (failed(up) || failed(ids) || failed(reduction))
    return failure();
  const Tensor &t = e.first(), &u = **up;
  auto axis = e.n.normalizeAxis(e.n.intAttr("axis", 0), t.rank());
  if (failed(axis))
    return failure();
  if (e.in[1].shape != u.shape || u.rank() != t.rank() ||
      u.element != t.element)
    return e.n.error() << "indices, updates and data do not match";
  SmallVector<int64_t> own = stridesOf(t.shape), coord(u.rank(), 0);
  Tensor r = t;
  for (int64_t k = 0; k < u.size(); ++k) {
    int64_t at = 0, dim = t.shape[*axis], id = (*ids)[k];
    if (id < -dim || id >= dim)
      return e.n.error() << "index " << id << " is out of range for "
                         << "dimension " << *axis << " of size " << dim;
    for (int64_t d = 0; d < u.rank(); ++d)
      at += (d == *axis ? (id < 0 ? id + dim : id) : coord[d]) * own[d];
    scatterInto(r, at, u, k, *reduction);
    for (int64_t d = u.rank() - 1; d >= 0 && ++coord[d] == u.shape[d]; --d)
      coord[d] = 0;
  }
  e.out.push_back(std::move(r));
  return success();
}

void eval::registerComputeEvaluators(llvm::StringMap<EvalFn> &t) {
  for (StringRef op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
    t[op] = evalReduce;
  t["CumSum"] = evalCumSum;
  t["Trilu"] = evalTrilu;
  t["MatMul"] = evalMatMul;
  t["Einsum"] = evalEinsum;
  t["Pad"] = evalPad;
  t["ScatterND"] = evalScatterND;
  t["ScatterElements"] = evalScatterElements;
}
