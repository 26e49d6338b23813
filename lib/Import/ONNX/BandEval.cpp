//===- BandEval.cpp - masks folded as bands, never S x S ------------------===//
//
// Elementwise ops fold through a band by computing the value inside and the
// value outside with the constant evaluator on scalars, so a band follows
// exactly the semantics of the dense fold. Data movement that leaves the
// last two dimensions alone (Identity, Expand, Reshape, Squeeze, Unsqueeze)
// changes only the leading shape. Everything else is no band: the caller
// folds densely when the result is small enough, else reports an error.
//
//===----------------------------------------------------------------------===//

#include "BandEval.h"
#include "ConstantEvaluator.h"

#include "mlir/Dialect/Traits.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

/// A comparison of index ranges becomes a band when its dense result would
/// have more elements than this (rp's own constant folding stops here too).
static constexpr int64_t kMinBandElements = int64_t(1) << 16;

static const llvm::StringSet<> &elementwiseOps() {
  static const llvm::StringSet<> ops = {
      "Add",       "Sub",         "Mul",     "Div",
      "Pow",       "Max",         "Min",     "Sum",
      "Mean",      "Mod",         "Neg",     "Abs",
      "Sqrt",      "Reciprocal",  "Exp",     "Log",
      "Sin",       "Cos",         "Tan",     "Tanh",
      "Erf",       "Sigmoid",     "Relu",    "Floor",
      "Ceil",      "Round",       "Sign",    "Equal",
      "Less",      "LessOrEqual", "Greater", "GreaterOrEqual",
      "And",       "Or",          "Xor",     "Not",
      "Where",     "IsNaN",       "IsInf",   "BitwiseAnd",
      "BitwiseOr", "BitwiseXor",  "Cast",    "CastLike"};
  return ops;
}

static std::optional<CmpPredicate> predicateOf(StringRef op) {
  return llvm::StringSwitch<std::optional<CmpPredicate>>(op)
      .Case("Equal", CmpPredicate::eq)
      .Case("Less", CmpPredicate::lt)
      .Case("LessOrEqual", CmpPredicate::le)
      .Case("Greater", CmpPredicate::gt)
      .Case("GreaterOrEqual", CmpPredicate::ge)
      .Default(std::nullopt);
}

/// The single value of a constant whose elements are all equal, as a rank-0
/// attribute; null otherwise.
static DenseElementsAttr uniformValue(DenseElementsAttr a) {
  if (!a || a.getNumElements() == 0)
    return {};
  auto scalar = RankedTensorType::get({}, a.getElementType());
  if (a.isSplat())
    return DenseElementsAttr::get(scalar, a.getSplatValue<Attribute>());
  auto values = a.getValues<Attribute>();
  Attribute first = *values.begin();
  for (Attribute v : values)
    if (v != first)
      return {};
  return DenseElementsAttr::get(scalar, first);
}

static int64_t rowsOf(RankedTensorType t) { return t.getShape().end()[-2]; }
static int64_t colsOf(RankedTensorType t) { return t.getShape().back(); }

/// Canonical form: sides beyond the extent open, and a band that covers all
/// or none of its positions, or holds one value, a splat.
static BandResult finish(LazyBand b) {
  int64_t rows = rowsOf(b.type), cols = colsOf(b.type);
  BandMask &m = b.band;
  bool empty =
      (m.lo != BandMask::kOpenLo && m.lo > cols - 1) ||
      (m.hi != BandMask::kOpenHi && m.hi < -(rows - 1)) ||
      (m.lo != BandMask::kOpenLo && m.hi != BandMask::kOpenHi && m.lo > m.hi);
  if (m.lo != BandMask::kOpenLo && m.lo <= -(rows - 1))
    m.lo = BandMask::kOpenLo;
  if (m.hi != BandMask::kOpenHi && m.hi >= cols - 1)
    m.hi = BandMask::kOpenHi;
  bool full = m.lo == BandMask::kOpenLo && m.hi == BandMask::kOpenHi;
  BandResult r;
  if (empty || full || b.inside == b.outside) {
    DenseElementsAttr v = empty ? b.outside : b.inside;
    r.dense = DenseElementsAttr::get(b.type, v.getSplatValue<Attribute>());
    return r;
  }
  r.band = b;
  return r;
}

static std::optional<SmallVector<int64_t>> intsOf(DenseElementsAttr a) {
  if (!a || !isa<IntegerType>(a.getElementType()))
    return std::nullopt;
  SmallVector<int64_t> v;
  bool isUnsigned = a.getElementType().isUnsignedInteger();
  for (const APInt &x : a.getValues<APInt>())
    v.push_back(isUnsigned ? int64_t(x.getZExtValue()) : x.getSExtValue());
  return v;
}

/// The output shape of a shape-only data movement node on `in`, or nullopt.
static std::optional<SmallVector<int64_t>>
movedShape(NodeImporter &n, ArrayRef<int64_t> in, ArrayRef<BandOperand> ops) {
  StringRef op = n.node.op_type();
  if (op == "Identity")
    return SmallVector<int64_t>(in);
  if (ops.size() < 2 || ops[1].band)
    return std::nullopt;
  auto arg = intsOf(ops[1].dense);
  if (!arg)
    return std::nullopt;
  SmallVector<int64_t> out;
  if (op == "Expand") {
    if (!OpTrait::util::getBroadcastedShape(in, *arg, out))
      return std::nullopt;
    return out;
  }
  if (op == "Reshape") {
    bool allowZero = n.intAttr("allowzero", 0) != 0;
    int64_t total = 1, known = 1, inferred = -1;
    for (int64_t d : in)
      total *= d;
    for (auto [d, s] : llvm::enumerate(*arg)) {
      if (s == 0 && !allowZero) {
        if (d >= in.size())
          return std::nullopt;
        s = in[d];
      }
      if (s == -1) {
        if (inferred >= 0)
          return std::nullopt;
        inferred = d;
        out.push_back(1);
        continue;
      }
      if (s < 0)
        return std::nullopt;
      out.push_back(s);
      known *= s;
    }
    if (inferred >= 0) {
      if (known == 0 || total % known)
        return std::nullopt;
      out[inferred] = total / known;
    } else if (known != total) {
      return std::nullopt;
    }
    return out;
  }
  if (op != "Squeeze" && op != "Unsqueeze")
    return std::nullopt;
  int64_t rank = in.size() + (op == "Unsqueeze" ? arg->size() : 0);
  for (int64_t &a : *arg) {
    if (a < -rank || a >= rank)
      return std::nullopt;
    a = a < 0 ? a + rank : a;
  }
  if (op == "Unsqueeze") {
    auto it = in.begin();
    for (int64_t d = 0; d < rank; ++d)
      out.push_back(llvm::is_contained(*arg, d) ? 1 : *it++);
    return out;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(*arg, d)) {
      if (in[d] != 1)
        return std::nullopt;
      continue;
    }
    out.push_back(in[d]);
  }
  return out;
}

/// An elementwise node with a band operand: the values inside and outside
/// computed on scalars; every other operand must be uniform.
static FailureOr<std::optional<BandResult>>
elementwiseBand(NodeImporter &n, ArrayRef<BandOperand> ops) {
  const LazyBand *first = nullptr;
  BandMask band;
  SmallVector<int64_t> shape;
  SmallVector<DenseElementsAttr> inside, outside;
  for (const BandOperand &o : ops) {
    ArrayRef<int64_t> s;
    if (o.band) {
      // Two bands combine only as the intersection of keep masks.
      if (first && !(o.band->band == band)) {
        if (n.node.op_type() != "And")
          return std::optional<BandResult>();
        band = band.intersect(o.band->band);
      } else if (!first) {
        band = o.band->band;
      }
      first = o.band;
      s = o.band->type.getShape();
      inside.push_back(o.band->inside);
      outside.push_back(o.band->outside);
    } else {
      DenseElementsAttr v = uniformValue(o.dense);
      if (!v)
        return std::optional<BandResult>();
      s = o.dense.getType().getShape();
      inside.push_back(v);
      outside.push_back(v);
    }
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, s, next))
      return std::optional<BandResult>();
    shape = next;
  }
  // An intersection is exact only for keep masks (true inside, false out).
  if (n.node.op_type() == "And")
    for (const BandOperand &o : ops)
      if (o.band && !(o.band->inside.getSplatValue<bool>() &&
                      !o.band->outside.getSplatValue<bool>()))
        return std::optional<BandResult>();
  if (shape.size() < 2 || shape.end()[-2] != rowsOf(first->type) ||
      shape.back() != colsOf(first->type))
    return std::optional<BandResult>();
  auto in = evaluateNode(n, inside);
  if (failed(in))
    return failure();
  auto out = evaluateNode(n, outside);
  if (failed(out))
    return failure();
  if (in->size() != 1 || out->size() != 1)
    return std::optional<BandResult>();
  auto type = RankedTensorType::get(shape, (*in)[0].getElementType());
  return std::optional<BandResult>(
      finish(LazyBand{band, type, (*in)[0], (*out)[0]}));
}

FailureOr<std::optional<BandResult>>
onnx_import::evaluateBand(NodeImporter &n, ArrayRef<BandOperand> ops) {
  StringRef op = n.node.op_type();
  if (n.node.output_size() != 1 || ops.empty())
    return std::optional<BandResult>();
  bool anyBand = llvm::any_of(ops, [](auto &o) { return o.band; });
  if (!anyBand) {
    // A new band: index ranges compared into a large result.
    auto predicate = predicateOf(op);
    if (!predicate || ops.size() != 2 || !ops[0].dense || !ops[1].dense)
      return std::optional<BandResult>();
    SmallVector<int64_t> shape;
    if (!OpTrait::util::getBroadcastedShape(ops[0].dense.getType().getShape(),
                                            ops[1].dense.getType().getShape(),
                                            shape) ||
        shape.size() < 2)
      return std::optional<BandResult>();
    auto type = RankedTensorType::get(shape, n.builder.getI1Type());
    if (type.getNumElements() <= kMinBandElements)
      return std::optional<BandResult>();
    auto band = bandOfCompare(*predicate, ops[0].dense, ops[1].dense);
    if (!band)
      return std::optional<BandResult>();
    auto scalar = RankedTensorType::get({}, n.builder.getI1Type());
    return std::optional<BandResult>(
        finish(LazyBand{*band, type, DenseElementsAttr::get(scalar, true),
                        DenseElementsAttr::get(scalar, false)}));
  }
  if (elementwiseOps().contains(op))
    return elementwiseBand(n, ops);
  const LazyBand *b = ops[0].band;
  if (!b)
    return std::optional<BandResult>();
  auto shape = movedShape(n, b->type.getShape(), ops);
  if (!shape || shape->size() < 2 || shape->end()[-2] != rowsOf(b->type) ||
      shape->back() != colsOf(b->type))
    return std::optional<BandResult>();
  LazyBand moved = *b;
  moved.type = RankedTensorType::get(*shape, b->type.getElementType());
  return std::optional<BandResult>(finish(moved));
}

DenseElementsAttr onnx_import::materialize(const LazyBand &b) {
  int64_t rows = rowsOf(b.type), cols = colsOf(b.type);
  int64_t count = b.type.getNumElements();
  auto inBand = [&](int64_t k) {
    return b.band.contains((k / cols) % rows, k % cols);
  };
  if (b.type.getElementType().isInteger(1)) {
    bool in = b.inside.getSplatValue<bool>();
    bool out = b.outside.getSplatValue<bool>();
    SmallVector<bool> v(count);
    for (int64_t k = 0; k < count; ++k)
      v[k] = inBand(k) ? in : out;
    return DenseElementsAttr::get(b.type, ArrayRef(v));
  }
  ArrayRef<char> in = b.inside.getRawData(), out = b.outside.getRawData();
  std::vector<char> raw(count * in.size());
  for (int64_t k = 0; k < count; ++k)
    llvm::copy(inBand(k) ? in : out, raw.begin() + k * in.size());
  return DenseElementsAttr::getFromRawBuffer(b.type, raw);
}

Value onnx_import::emitBand(NodeImporter &n, const LazyBand &b) {
  OpBuilder &builder = n.builder;
  Location loc = n.loc;
  ArrayRef<int64_t> shape = b.type.getShape();
  int64_t rows = rowsOf(b.type), cols = colsOf(b.type);
  Type i64 = builder.getI64Type();
  SmallVector<int64_t> colShape(shape.drop_back(2));
  colShape.append({1, cols});
  std::vector<int64_t> colValues(
      RankedTensorType::get(colShape, i64).getNumElements());
  for (size_t k = 0; k < colValues.size(); ++k)
    colValues[k] = int64_t(k) % cols;
  Value col = ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(RankedTensorType::get(colShape, i64),
                             ArrayRef(colValues)));
  auto rowsPlus = [&](int64_t offset) -> Value {
    std::vector<int64_t> v(rows);
    for (int64_t r = 0; r < rows; ++r)
      v[r] = r + offset;
    return ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(RankedTensorType::get({rows, 1}, i64),
                               ArrayRef(v)));
  };
  // column <= row + hi and column >= row + lo.
  Value cond;
  if (b.band.hi != BandMask::kOpenHi)
    cond =
        CmpOp::create(builder, loc, CmpPredicate::le, col, rowsPlus(b.band.hi));
  if (b.band.lo != BandMask::kOpenLo) {
    Value ge =
        CmpOp::create(builder, loc, CmpPredicate::ge, col, rowsPlus(b.band.lo));
    if (cond) {
      auto no = ConstantOp::create(
          builder, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, builder.getI1Type()),
                                 false));
      cond = WhereOp::create(builder, loc, cond, ge, no);
    } else {
      cond = ge;
    }
  }
  if (b.type.getElementType().isInteger(1) && b.inside.getSplatValue<bool>() &&
      !b.outside.getSplatValue<bool>())
    return cond;
  return WhereOp::create(builder, loc, cond,
                         ConstantOp::create(builder, loc, b.inside),
                         ConstantOp::create(builder, loc, b.outside));
}

std::string onnx_import::describe(const LazyBand &b) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "a mask of " << rowsOf(b.type) << " x " << colsOf(b.type)
     << " positions (kept where ";
  if (b.band.lo != BandMask::kOpenLo)
    os << b.band.lo << " <= ";
  os << "column - row";
  if (b.band.hi != BandMask::kOpenHi)
    os << " <= " << b.band.hi;
  os << ")";
  return s;
}
