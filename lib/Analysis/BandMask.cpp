//===- BandMask.cpp - attention masks as a band of diagonals --------------===//
//
// The recognizer of index-range comparisons shared by the ONNX importer
// (which builds band masks instead of folding S x S constants) and
// rp-fuse-attention (which turns the causal band into a flag).
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/BandMask.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::rp;

std::optional<BandMask> BandMask::complement() const {
  if (lo == kOpenLo && hi != kOpenHi)
    return BandMask{hi + 1, kOpenHi};
  if (hi == kOpenHi && lo != kOpenLo)
    return BandMask{kOpenLo, lo - 1};
  return std::nullopt;
}

BandMask BandMask::intersect(const BandMask &other) const {
  return BandMask{std::max(lo, other.lo), std::min(hi, other.hi)};
}

namespace {
/// An index range along one of the last two dimensions: element k of that
/// axis holds k + offset.
struct IndexRange {
  bool alongColumns; // the last dimension; else the second-to-last
  int64_t offset;
};
} // namespace

static std::optional<IndexRange> indexRange(DenseElementsAttr a) {
  auto type = a.getType();
  if (!type.getElementType().isInteger(64) &&
      !type.getElementType().isInteger(32))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rank = shape.size();
  if (rank == 0)
    return std::nullopt;
  int64_t cols = shape[rank - 1], rows = rank >= 2 ? shape[rank - 2] : 1;
  if ((cols > 1) == (rows > 1))
    return std::nullopt;
  bool alongColumns = cols > 1;
  // A row range has no leading extent: its elements are its rows.
  if (!alongColumns && type.getNumElements() != rows)
    return std::nullopt;
  int64_t n = alongColumns ? cols : rows, k = 0, offset = 0;
  for (const APInt &v : a.getValues<APInt>()) {
    int64_t x = v.getSExtValue();
    if (k == 0)
      offset = x;
    else if (x != k % n + offset)
      return std::nullopt;
    ++k;
  }
  return IndexRange{alongColumns, offset};
}

/// The predicate with its operands swapped: a < b is b > a.
static CmpPredicate mirror(CmpPredicate p) {
  switch (p) {
  case CmpPredicate::lt:
    return CmpPredicate::gt;
  case CmpPredicate::le:
    return CmpPredicate::ge;
  case CmpPredicate::gt:
    return CmpPredicate::lt;
  case CmpPredicate::ge:
    return CmpPredicate::le;
  default:
    return p;
  }
}

std::optional<BandMask> rp::bandOfCompare(CmpPredicate predicate,
                                          DenseElementsAttr lhs,
                                          DenseElementsAttr rhs) {
  if (!lhs || !rhs || predicate == CmpPredicate::ne)
    return std::nullopt;
  auto l = indexRange(lhs), r = indexRange(rhs);
  if (!l || !r || l->alongColumns == r->alongColumns)
    return std::nullopt;
  // (c + a) P (r + b)  <=>  c - r P b - a, with P mirrored when the row
  // range is on the left.
  if (!l->alongColumns) {
    std::swap(l, r);
    predicate = mirror(predicate);
  }
  int64_t k = r->offset - l->offset;
  constexpr int64_t lo = BandMask::kOpenLo, hi = BandMask::kOpenHi;
  switch (predicate) {
  case CmpPredicate::eq:
    return BandMask{k, k};
  case CmpPredicate::lt:
    return BandMask{lo, k - 1};
  case CmpPredicate::le:
    return BandMask{lo, k};
  case CmpPredicate::gt:
    return BandMask{k + 1, hi};
  case CmpPredicate::ge:
    return BandMask{k, hi};
  default:
    return std::nullopt;
  }
}

std::optional<BandMask> rp::matchBandMask(Value cond) {
  if (!cond)
    return std::nullopt;
  if (auto cmp = cond.getDefiningOp<CmpOp>()) {
    DenseElementsAttr lhs, rhs;
    if (!matchPattern(cmp.getLhs(), m_Constant(&lhs)) ||
        !matchPattern(cmp.getRhs(), m_Constant(&rhs)))
      return std::nullopt;
    return bandOfCompare(cmp.getPredicate(), lhs, rhs);
  }
  // where(a, b, false) is a AND b.
  if (auto where = cond.getDefiningOp<WhereOp>()) {
    DenseElementsAttr no;
    if (!matchPattern(where.getOnFalse(), m_Constant(&no)) || !no.isSplat() ||
        !no.getElementType().isInteger(1) || no.getSplatValue<bool>())
      return std::nullopt;
    auto a = matchBandMask(where.getCondition());
    auto b = matchBandMask(where.getOnTrue());
    if (!a || !b)
      return std::nullopt;
    return a->intersect(*b);
  }
  return std::nullopt;
}
