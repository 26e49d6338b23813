//===- BandMask.h - attention masks as a band of diagonals ------*- C++ -*-===//
//
// A causal mask, and a sliding-window one, keeps position (row r, column c)
// of the [.., S, S] scores when the diagonal c - r lies in [lo, hi]. Exporters
// compute it by comparing an index range along the columns with one along
// the rows; at long sequences its S x S elements must never exist. The ONNX
// importer keeps such masks in this form and writes them to the IR as
// `rp.cmp` of two O(S) index constants; rp-fuse-attention reads them back
// here and turns the causal one into the `causal` flag of rp.attention.
//
//===----------------------------------------------------------------------===//

#ifndef RP_ANALYSIS_BANDMASK_H
#define RP_ANALYSIS_BANDMASK_H

#include "rp/Dialect/RP/RPOps.h"

#include <cstdint>
#include <limits>
#include <optional>

namespace mlir::rp {

/// The set {(r, c) : lo <= c - r <= hi}; an open side is the extreme int64.
struct BandMask {
  static constexpr int64_t kOpenLo = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kOpenHi = std::numeric_limits<int64_t>::max();
  int64_t lo = kOpenLo, hi = kOpenHi;

  /// Keeps exactly c <= r: the causal mask.
  bool isCausal() const { return lo == kOpenLo && hi == 0; }
  /// Whether (r, c) is in the band.
  bool contains(int64_t r, int64_t c) const {
    int64_t d = c - r;
    return d >= lo && d <= hi;
  }
  /// The band's complement when it is a band too (one open side), else
  /// nullopt.
  std::optional<BandMask> complement() const;
  /// The intersection of two bands.
  BandMask intersect(const BandMask &other) const;
  bool operator==(const BandMask &o) const { return lo == o.lo && hi == o.hi; }
};

/// The band where `lhs predicate rhs` holds, for integer constants of which
/// one is an index range along the last dimension (shape [.., 1, C], element
/// c equal to c + a in every leading slice) and the other one along the
/// second-to-last (shape [1.., R, 1], element r equal to r + b); nullopt for
/// any other operands or the `ne` predicate.
std::optional<BandMask> bandOfCompare(CmpPredicate predicate,
                                      DenseElementsAttr lhs,
                                      DenseElementsAttr rhs);

/// The band where the i1 value `cond` is true, when the IR computes it from
/// index ranges: `rp.cmp` of two constants as above, or two of those joined
/// by `rp.where %a, %b, false` (their intersection). Nullopt otherwise.
std::optional<BandMask> matchBandMask(Value cond);

} // namespace mlir::rp

#endif // RP_ANALYSIS_BANDMASK_H
