//===- EvalCompute.cpp - reductions and contractions, evaluated -----------===//
//
// The constant evaluator's ops that combine elements: Reduce*, CumSum,
// Trilu, MatMul and Einsum. Floats accumulate in the element type in a
// fixed order (row-major over what is summed).
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
  auto x = e.input(0);
  if (failed(x))
    return failure();
  const Tensor &t = **x;
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
    for (int64_t o = 0; o < n; ++o)
      (r.isFloat()
           ? r.f[o] = roundTo(t.element, FLOAT_FN2(a / b)(r.f[o], per, wide))
           : r.i[o] = r.i[o] / per);
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
  auto x = e.input(0);
  auto axisIn = e.ints(1, "axis");
  if (failed(x) || failed(axisIn))
    return failure();
  const Tensor &t = **x;
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
  auto x = e.input(0);
  if (failed(x))
    return failure();
  int64_t k = 0;
  if (e.n.hasInput(1)) {
    auto given = e.ints(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return e.n.error() << "k must hold one value, got " << given->size();
    k = given->front();
  }
  const Tensor &t = **x;
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
  auto a = e.input(0), b = e.input(1);
  if (failed(a) || failed(b))
    return failure();
  Tensor x = **a, y = **b;
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

void eval::registerComputeEvaluators(llvm::StringMap<EvalFn> &t) {
  for (StringRef op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
    t[op] = evalReduce;
  t["CumSum"] = evalCumSum;
  t["Trilu"] = evalTrilu;
  t["MatMul"] = evalMatMul;
  t["Einsum"] = evalEinsum;
}
