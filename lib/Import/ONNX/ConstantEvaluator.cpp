//===- ConstantEvaluator.cpp - ONNX nodes on constant inputs --------------===//
//
// Conversions between dense attributes and evaluator tensors, the
// elementwise kernels (one table of unary and one of binary functions over
// broadcast operands), casts, and the dispatch. Data movement lives in
// EvalMovement.cpp; reductions, CumSum, Trilu, MatMul, Einsum, Pad and
// the scatters in EvalCompute.cpp.
//
//===----------------------------------------------------------------------===//

#include "ConstantEvaluator.h"
#include "EvalTensor.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/ADT/StringSet.h"

#include <climits>
#include <cmath>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;
using namespace mlir::rp::onnx_import::eval;

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Tensor Tensor::make(Type element, ArrayRef<int64_t> shape) {
  Tensor t;
  t.element = element;
  t.shape.assign(shape.begin(), shape.end());
  t.present = true;
  (t.isFloat() ? (void)t.f.resize(t.size()) : (void)t.i.resize(t.size()));
  return t;
}

double eval::roundTo(Type element, double v) {
  if (element.isF64())
    return v;
  if (element.isF32())
    return double(float(v));
  APFloat x(v);
  bool lost;
  x.convert(cast<FloatType>(element).getFloatSemantics(),
            APFloat::rmNearestTiesToEven, &lost);
  return x.convertToDouble();
}

static Tensor fromAttr(DenseElementsAttr a) {
  Tensor t = Tensor::make(a.getElementType(), a.getType().getShape());
  Type e = t.element;
  if (e.isF32())
    llvm::copy(a.getValues<float>(), t.f.begin());
  else if (e.isF64())
    llvm::copy(a.getValues<double>(), t.f.begin());
  else if (t.isFloat())
    llvm::transform(a.getValues<APFloat>(), t.f.begin(), [](const APFloat &v) {
      APFloat d = v;
      bool lost;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      return d.convertToDouble();
    });
  else if (e.isInteger(1))
    llvm::copy(a.getValues<bool>(), t.i.begin());
  else if (foldedOnly(e))
    llvm::transform(a.getValues<APInt>(), t.i.begin(), [&](const APInt &v) {
      return e.isUnsignedInteger() ? int64_t(v.getZExtValue())
                                   : v.getSExtValue();
    });
  else if (e.isInteger(32))
    llvm::copy(a.getValues<int32_t>(), t.i.begin());
  else
    llvm::copy(a.getValues<int64_t>(), t.i.begin());
  return t;
}

static DenseElementsAttr toAttr(const Tensor &t) {
  auto type = RankedTensorType::get(t.shape, t.element);
  Type e = t.element;
  // A uniform result stays one value (a filled mask, a ones tensor).
  bool splat = t.size() > 0 &&
               (t.isFloat() ? llvm::all_equal(t.f) : llvm::all_equal(t.i));
  if (splat) {
    Attribute v = t.isFloat() ? Attribute(FloatAttr::get(e, t.f[0]))
                              : Attribute(IntegerAttr::get(
                                    e, APInt(e.getIntOrFloatBitWidth(), t.i[0],
                                             /*isSigned=*/!e.isInteger(1) &&
                                                 !e.isUnsignedInteger())));
    return SplatElementsAttr::get(type, v);
  }
  if (e.isF32()) {
    std::vector<float> v(t.f.begin(), t.f.end());
    return DenseElementsAttr::get(type, ArrayRef(v));
  }
  if (e.isF64())
    return DenseElementsAttr::get(type, ArrayRef(t.f));
  if (t.isFloat()) {
    SmallVector<APFloat> v;
    for (double x : t.f) {
      APFloat a(x);
      bool lost;
      a.convert(cast<FloatType>(e).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &lost);
      v.push_back(a);
    }
    return DenseElementsAttr::get(type, v);
  }
  if (e.isInteger(1)) {
    SmallVector<bool> v(t.i.begin(), t.i.end());
    return DenseElementsAttr::get(type, ArrayRef(v));
  }
  if (foldedOnly(e)) {
    SmallVector<APInt> v;
    for (int64_t x : t.i)
      v.push_back(APInt(e.getIntOrFloatBitWidth(), uint64_t(x),
                        /*isSigned=*/!e.isUnsignedInteger()));
    return DenseElementsAttr::get(type, v);
  }
  if (e.isInteger(32)) {
    std::vector<int32_t> v(t.i.begin(), t.i.end());
    return DenseElementsAttr::get(type, ArrayRef(v));
  }
  return DenseElementsAttr::get(type, ArrayRef(t.i));
}

SmallVector<int64_t> eval::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

std::vector<int64_t> eval::affineIndex(ArrayRef<int64_t> out,
                                       ArrayRef<int64_t> strides,
                                       int64_t base) {
  int64_t n = numElements(out), rank = out.size();
  std::vector<int64_t> index(n);
  SmallVector<int64_t> coord(rank, 0);
  int64_t offset = base;
  for (int64_t k = 0; k < n; ++k) {
    index[k] = offset;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++coord[d] < out[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (out[d] - 1);
      coord[d] = 0;
    }
  }
  return index;
}

std::vector<int64_t> eval::broadcastIndex(ArrayRef<int64_t> in,
                                          ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0), own = stridesOf(in);
  for (int64_t d = out.size() - 1, e = in.size() - 1; e >= 0; --d, --e)
    strides[d] = in[e] == 1 ? 0 : own[e];
  return affineIndex(out, strides);
}

Tensor eval::take(const Tensor &x, const std::vector<int64_t> &index,
                  ArrayRef<int64_t> shape) {
  Tensor t = Tensor::make(x.element, shape);
  for (size_t k = 0; k < index.size(); ++k)
    (x.isFloat() ? t.f[k] = x.f[index[k]] : t.i[k] = x.i[index[k]]);
  return t;
}

FailureOr<const Tensor *> Eval::input(int k) {
  if (k >= int(in.size()) || !in[k].present)
    return n.error() << "input #" << k << " is missing";
  return &in[k];
}

FailureOr<SmallVector<const Tensor *>> Eval::inputs() {
  SmallVector<const Tensor *> all;
  for (int k = 0; k < n.numInputs(); ++k) {
    auto t = input(k);
    if (failed(t))
      return failure();
    all.push_back(*t);
  }
  return all;
}

LogicalResult Eval::fits(ArrayRef<int64_t> shape) {
  std::optional<int64_t> count = checkedNumElements(shape);
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return n.error() << "the result shape [" << shape
                     << "] has a negative dimension";
  if (!count || *count > kMaxEvalElements)
    return n.error() << "the result shape [" << shape << "] has "
                     << (count ? std::to_string(*count) : "over 2^63")
                     << " elements, too many to fold at import"
                     << kTooLargeHint;
  return success();
}

LogicalResult Eval::affordable(ArrayRef<int64_t> factors) {
  std::optional<int64_t> work = checkedNumElements(factors);
  if (!work || *work > kMaxEvalWork)
    return n.error() << "folding it takes "
                     << (work ? std::to_string(*work) : "over 2^63")
                     << " multiply-adds, more than the " << kMaxEvalWork
                     << " rp does at import" << kTooLargeHint;
  return success();
}

FailureOr<SmallVector<int64_t>> Eval::ints(int k, StringRef what) {
  auto t = input(k);
  if (failed(t))
    return failure();
  if ((*t)->isFloat() || (*t)->isBool())
    return n.error() << "input '" << n.node.input(k) << "' (" << what
                     << ") must hold integers";
  return SmallVector<int64_t>((*t)->i.begin(), (*t)->i.end());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// A float function computed in float for f32, f16 and bf16 (then rounded
/// to the type) and in double for f64, as onnxruntime's kernels do.
#define FLOAT_FN(EXPR)                                                         \
  [](double x, bool wide) -> double {                                          \
    if (wide) {                                                                \
      double v = x;                                                            \
      return EXPR;                                                             \
    }                                                                          \
    float v = float(x);                                                        \
    return double(EXPR);                                                       \
  }

using UnaryFloat = double (*)(double, bool);
static const llvm::StringMap<UnaryFloat> &unaryFloatTable() {
  static const llvm::StringMap<UnaryFloat> table = {
      {"Neg", FLOAT_FN(-v)},
      {"Abs", FLOAT_FN(std::fabs(v))},
      {"Sqrt", FLOAT_FN(std::sqrt(v))},
      {"Reciprocal", FLOAT_FN(1 / v)},
      {"Exp", FLOAT_FN(std::exp(v))},
      {"Log", FLOAT_FN(std::log(v))},
      {"Sin", FLOAT_FN(std::sin(v))},
      {"Cos", FLOAT_FN(std::cos(v))},
      {"Tan", FLOAT_FN(std::tan(v))},
      {"Tanh", FLOAT_FN(std::tanh(v))},
      {"Erf", FLOAT_FN(std::erf(v))},
      {"Sigmoid", FLOAT_FN(1 / (1 + std::exp(-v)))},
      {"Relu", FLOAT_FN(v > 0 ? v : decltype(v)(0))},
      {"Floor", FLOAT_FN(std::floor(v))},
      {"Ceil", FLOAT_FN(std::ceil(v))},
      // Halves round to even, as ONNX Round specifies.
      {"Round", FLOAT_FN(std::nearbyint(v))},
      {"Sign", FLOAT_FN(decltype(v)((v > 0) - (v < 0)))},
  };
  return table;
}

using BinaryFloat = double (*)(double, double, bool);
static const llvm::StringMap<BinaryFloat> &binaryFloatTable() {
  static const llvm::StringMap<BinaryFloat> table = {
      {"Add", FLOAT_FN2(a + b)},
      {"Sub", FLOAT_FN2(a - b)},
      {"Mul", FLOAT_FN2(a * b)},
      {"Div", FLOAT_FN2(a / b)},
      {"Pow", FLOAT_FN2(std::pow(a, b))},
      {"Max", FLOAT_FN2(std::isnan(a) || a > b ? a : b)},
      {"Min", FLOAT_FN2(std::isnan(a) || a < b ? a : b)},
      {"Sum", FLOAT_FN2(a + b)},
      {"Mean", FLOAT_FN2(a + b)},
      {"Mod", FLOAT_FN2(std::fmod(a, b))},
  };
  return table;
}

static const llvm::StringSet<> &comparisonOps() {
  static const llvm::StringSet<> ops = {"Equal", "Less", "LessOrEqual",
                                        "Greater", "GreaterOrEqual"};
  return ops;
}

template <typename T> static bool compareValues(StringRef op, T a, T b) {
  if (op == "Equal")
    return a == b;
  if (op == "Less")
    return a < b;
  if (op == "LessOrEqual")
    return a <= b;
  if (op == "Greater")
    return a > b;
  return a >= b;
}

/// `b` is not 0 for Div and Mod (the caller reports that).
static FailureOr<int64_t> binaryInt(Eval &e, StringRef op, int64_t a,
                                    int64_t b) {
  uint64_t ua = a, ub = b; // wrapping arithmetic
  if (op == "Add" || op == "Sum")
    return int64_t(ua + ub);
  if (op == "Sub")
    return int64_t(ua - ub);
  if (op == "Mul")
    return int64_t(ua * ub);
  if (op == "Max")
    return std::max(a, b);
  if (op == "Min")
    return std::min(a, b);
  if (op == "BitwiseAnd" || op == "And")
    return a & b;
  if (op == "BitwiseOr" || op == "Or")
    return a | b;
  if (op == "BitwiseXor" || op == "Xor")
    return a ^ b;
  if (op == "Pow") {
    // Wrapping, by squaring: an exponent of 2^62 takes 62 steps, not 2^62.
    uint64_t r = 1, base = ua;
    for (uint64_t k = b < 0 ? 0 : ub; k; k >>= 1, base *= base)
      if (k & 1)
        r *= base;
    return int64_t(r);
  }
  // INT64_MIN / -1 has no int64 result: the CPU traps (SIGFPE).
  if (op == "Div" && a == INT64_MIN && b == -1) {
    e.n.error() << "Div of " << a << " by -1 overflows "
                << e.n.builder.getI64Type();
    return failure();
  }
  if (op == "Div")
    return a / b; // truncates toward zero, as C++
  if (op != "Mod")
    return e.n.error() << "is not defined on integer tensors";
  if (b == -1)
    return 0; // every integer is a multiple of -1 (and INT64_MIN % -1 traps)
  // Mod: fmod = 1 takes the sign of the dividend, else of the divisor.
  int64_t r = a % b;
  if (!e.n.intAttr("fmod", 0) && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/// Every elementwise op with one, two or (Where) three inputs, and the
/// variadic Max, Min, Sum and Mean, over numpy-broadcast operands.
static LogicalResult evalElementwise(Eval &e) {
  StringRef op = e.n.node.op_type();
  FailureOr<SmallVector<const Tensor *>> all = e.inputs();
  if (failed(all))
    return failure();
  SmallVector<const Tensor *> &ins = *all;
  SmallVector<int64_t> shape(ins[0]->shape);
  for (const Tensor *t : ArrayRef(ins).drop_front()) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, t->shape, next))
      return e.n.error() << "input shapes do not broadcast";
    shape = next;
  }
  if (numElements(shape) > kMaxEvalElements)
    return e.n.error() << "the result has " << numElements(shape)
                       << " elements, too many to fold at import"
                       << kTooLargeHint;
  std::vector<std::vector<int64_t>> idx;
  for (const Tensor *t : ins)
    idx.push_back(broadcastIndex(t->shape, shape));
  int64_t count = numElements(shape);
  const Tensor &x = *ins[0];
  bool wide = x.element.isF64();

  if (op == "Where") {
    if (ins.size() != 3 || !x.isBool() || ins[1]->element != ins[2]->element)
      return e.n.error() << "expects a bool condition and two values of one "
                            "type";
    Tensor r = Tensor::make(ins[1]->element, shape);
    for (int64_t k = 0; k < count; ++k) {
      const Tensor &src = x.i[idx[0][k]] ? *ins[1] : *ins[2];
      int64_t at = x.i[idx[0][k]] ? idx[1][k] : idx[2][k];
      (r.isFloat() ? r.f[k] = src.f[at] : r.i[k] = src.i[at]);
    }
    e.out.push_back(std::move(r));
    return success();
  }
  // Pow's exponent may have another type; the result has the base's.
  if (op == "Pow" && ins.size() == 2 && ins[1]->element != x.element) {
    Tensor r = Tensor::make(x.element, shape);
    for (int64_t k = 0; k < count; ++k) {
      double b = ins[1]->asDouble(idx[1][k]);
      if (r.isFloat())
        r.f[k] =
            roundTo(x.element,
                    binaryFloatTable().lookup("Pow")(x.f[idx[0][k]], b, wide));
      else {
        // As Cast: a power outside int64 (or NaN) has no defined value.
        double v = std::trunc(std::pow(double(x.i[idx[0][k]]), b));
        if (!(v >= -9.2233720368547758e18 && v < 9.2233720368547758e18))
          return e.n.error() << "Pow gives " << v << " at element " << k
                             << ", which does not fit in " << x.element;
        r.i[k] = wrapInt(x.element, int64_t(v));
      }
    }
    e.out.push_back(std::move(r));
    return success();
  }
  for (const Tensor *t : ins)
    if (t->element != x.element)
      return e.n.error() << "operands have different element types: "
                         << x.element << " and " << t->element;

  bool variadic = op == "Sum" || op == "Max" || op == "Min" || op == "Mean";
  // The schema check stops a wrong count before folding, except past the
  // opsets libonnx knows: a unary op given two inputs would otherwise fold
  // through the binary integer path (and divide by the second).
  bool unary = unaryFloatTable().contains(op) || op == "Not" || op == "IsNaN" ||
               op == "IsInf";
  if (!variadic && ins.size() != (unary ? 1u : 2u))
    return e.n.error() << "has " << ins.size() << " inputs; " << op << " takes "
                       << (unary ? 1 : 2);
  if (ins.size() == 1 && variadic) {
    e.out.push_back(x);
    return success();
  }
  if (ins.size() == 1) {
    Tensor r = Tensor::make(x.element, shape);
    if (op == "Not" || op == "IsNaN" || op == "IsInf") {
      r = Tensor::make(IntegerType::get(x.element.getContext(), 1), shape);
      for (int64_t k = 0; k < count; ++k)
        r.i[k] = op == "Not"     ? !x.i[k]
                 : op == "IsNaN" ? std::isnan(x.asDouble(k))
                                 : std::isinf(x.asDouble(k));
    } else if (x.isFloat()) {
      UnaryFloat fn = unaryFloatTable().lookup(op);
      if (!fn)
        return e.n.error() << "expects more inputs";
      for (int64_t k = 0; k < count; ++k)
        r.f[k] = roundTo(x.element, fn(x.f[k], wide));
    } else if (op == "Neg" || op == "Abs" || op == "Sign") {
      for (int64_t k = 0; k < count; ++k) {
        int64_t v = x.i[k];
        // Wrapping, as the kernels do: -INT64_MIN is INT64_MIN, not UB.
        int64_t negated = int64_t(0 - uint64_t(v));
        r.i[k] = wrapInt(x.element, op == "Neg"    ? negated
                                    : op == "Abs"  ? (v < 0 ? negated : v)
                                    : op == "Sign" ? (v > 0) - (v < 0)
                                                   : v);
      }
    } else {
      return e.n.error() << "is not defined on " << x.element << " tensors";
    }
    e.out.push_back(std::move(r));
    return success();
  }

  bool compare = comparisonOps().contains(op);
  Tensor r = Tensor::make(
      compare ? IntegerType::get(x.element.getContext(), 1) : x.element, shape);
  if (x.isFloat() && !compare) {
    BinaryFloat fn = binaryFloatTable().lookup(op);
    if (!fn)
      return e.n.error() << "is not defined on " << x.element << " tensors";
    if (op == "Mod" && !e.n.intAttr("fmod", 0))
      return e.n.error() << "Mod of floating-point tensors needs fmod = 1 "
                            "(the ONNX specification)";
    // Variadic ops fold left to right, rounding after each step.
    for (int64_t k = 0; k < count; ++k) {
      double acc = x.f[idx[0][k]];
      for (size_t j = 1; j < ins.size(); ++j)
        acc = roundTo(x.element, fn(acc, ins[j]->f[idx[j][k]], wide));
      if (op == "Mean")
        acc =
            roundTo(x.element, FLOAT_FN2(a / b)(acc, double(ins.size()), wide));
      r.f[k] = acc;
    }
  } else {
    for (int64_t k = 0; k < count; ++k) {
      if (compare) {
        r.i[k] = x.isFloat()
                     ? compareValues(op, x.f[idx[0][k]], ins[1]->f[idx[1][k]])
                     : compareValues(op, x.i[idx[0][k]], ins[1]->i[idx[1][k]]);
        continue;
      }
      int64_t acc = x.i[idx[0][k]];
      for (size_t j = 1; j < ins.size(); ++j) {
        int64_t b = ins[j]->i[idx[j][k]];
        if (b == 0 && (op == "Div" || op == "Mod"))
          return e.n.error() << op << " by zero (element " << idx[j][k]
                             << " of '" << e.n.node.input(j) << "')";
        auto v = binaryInt(e, op, acc, b);
        if (failed(v))
          return failure();
        // INT32_MIN / -1 traps in an int32 kernel as the int64 case does.
        if (op == "Div" && wrapInt(x.element, *v) != *v)
          return e.n.error() << "Div of " << acc << " by " << b << " overflows "
                             << x.element;
        acc = wrapInt(x.element, *v);
      }
      r.i[k] = acc;
    }
  }
  e.out.push_back(std::move(r));
  return success();
}

static LogicalResult evalCast(Eval &e) {
  const Tensor &t = e.first();
  Type to;
  if (e.n.node.op_type() == "CastLike") {
    auto like = e.input(1);
    if (failed(like))
      return failure();
    to = (*like)->element;
  } else {
    int64_t code = e.n.intAttr("to", 0);
    to = foldedElementType(code, e.n.builder.getContext());
    if (!to)
      return e.n.error() << "cast to " << elementTypeName(code)
                         << " is not supported";
  }
  Tensor r = Tensor::make(to, t.shape);
  for (int64_t k = 0; k < t.size(); ++k) {
    if (r.isFloat()) {
      r.f[k] = roundTo(to, t.asDouble(k));
    } else if (r.isBool()) {
      r.i[k] = t.asDouble(k) != 0;
    } else if (t.isFloat()) {
      auto v = floatToInt(to, t.f[k]);
      if (!v)
        return e.n.error() << "element " << k << " (" << t.f[k]
                           << ") does not fit in " << to
                           << " (CPU and GPU kernels give it different values)";
      r.i[k] = *v;
    } else {
      r.i[k] = wrapInt(to, t.i[k]);
    }
  }
  e.out.push_back(std::move(r));
  return success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

static const llvm::StringMap<EvalFn> &evaluators() {
  static const llvm::StringMap<EvalFn> table = [] {
    llvm::StringMap<EvalFn> t;
    for (auto &entry : unaryFloatTable())
      t[entry.first()] = evalElementwise;
    for (auto &entry : binaryFloatTable())
      t[entry.first()] = evalElementwise;
    for (auto &entry : comparisonOps())
      t[entry.first()] = evalElementwise;
    for (StringRef op : {"And", "Or", "Xor", "Not", "Where", "IsNaN", "IsInf",
                         "BitwiseAnd", "BitwiseOr", "BitwiseXor"})
      t[op] = evalElementwise;
    t["Cast"] = evalCast;
    t["CastLike"] = evalCast;
    registerComputeEvaluators(t);
    registerMovementEvaluators(t);
    registerNonZeroEvaluator(t);
    return t;
  }();
  return table;
}

bool onnx_import::canEvaluate(StringRef opType) {
  return evaluators().contains(opType);
}

std::vector<std::string> onnx_import::evaluatedOps() {
  std::vector<std::string> ops;
  for (auto &entry : evaluators())
    ops.push_back(entry.first().str());
  llvm::sort(ops);
  return ops;
}

FailureOr<SmallVector<DenseElementsAttr>>
onnx_import::evaluateNode(NodeImporter &n, ArrayRef<DenseElementsAttr> inputs) {
  Eval e{n, {}, {}};
  for (DenseElementsAttr a : inputs)
    e.in.push_back(a ? fromAttr(a) : Tensor());
  // The input every evaluator reads (Eval::first), checked once here.
  if (e.in.empty())
    return n.error() << "needs at least one input";
  if (failed(e.input(0)) || failed(evaluators().lookup(n.node.op_type())(e)))
    return failure();
  SmallVector<DenseElementsAttr> out;
  for (const Tensor &t : e.out) {
    if (t.size() > kMaxEvalElements)
      return n.error() << "the result has " << t.size()
                       << " elements, too many to fold at import"
                       << kTooLargeHint;
    out.push_back(toAttr(t));
  }
  return out;
}
