//===- PartitionMoves.h - stage sizes and the tail's moves ------*- C++ -*-===//
//
// The form the partition searches move in (PartitionClimb.cpp's step-time
// search, PartitionHostBudget.cpp's host hold): a partition as stage
// sizes, and the moves of the tail both make (and the host hold's
// boundaries of a size list). Private to lib/Analysis.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_ANALYSIS_PARTITIONMOVES_H
#define RP_LIB_ANALYSIS_PARTITIONMOVES_H

#include "rp/Analysis/Partition.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

namespace mlir::rp::moves {

/// A partition as stage sizes: forward from layer 0, the tail, backward
/// from deep to shallow (DESIGN.md's --stages form).
struct Sizes {
  std::vector<unsigned> fwd;
  unsigned tail = 0;
  std::vector<unsigned> bwd;
};

inline std::vector<unsigned> sizesOf(llvm::ArrayRef<StageRange> stages) {
  std::vector<unsigned> sizes;
  sizes.reserve(stages.size());
  for (const StageRange &r : stages)
    sizes.push_back(r.size());
  return sizes;
}

inline Sizes toSizes(const Partition &p) {
  return {sizesOf(p.forward), p.tail.size(), sizesOf(p.backward)};
}

inline Partition toPartition(const Sizes &s, unsigned numLayers) {
  return partitionFromSizes(s.fwd, s.tail, s.bwd, numLayers);
}

/// A size list's boundaries: the layer after each stage but the last.
inline std::set<unsigned> boundariesOf(const std::vector<unsigned> &list) {
  std::set<unsigned> out;
  unsigned at = 0;
  for (size_t i = 0; i + 1 < list.size(); ++i)
    out.insert(at += list[i]);
  return out;
}

inline std::vector<unsigned> listOf(const std::set<unsigned> &bounds,
                                    unsigned total) {
  std::vector<unsigned> out;
  unsigned from = 0;
  for (unsigned b : bounds) {
    out.push_back(b - from);
    from = b;
  }
  out.push_back(total - from);
  return out;
}

/// What a repaired merge changed in one of `cur`'s size lists: the
/// boundaries it dropped and added, and the span of layers they lie in.
struct ListChange {
  std::set<unsigned> dropped, added;
  unsigned lo = ~0u, hi = 0;

  ListChange(const std::set<unsigned> &from, const std::set<unsigned> &to) {
    std::set_difference(from.begin(), from.end(), to.begin(), to.end(),
                        std::inserter(dropped, dropped.end()));
    std::set_difference(to.begin(), to.end(), from.begin(), from.end(),
                        std::inserter(added, added.end()));
    for (const std::set<unsigned> *s : {&dropped, &added})
      if (!s->empty()) {
        lo = std::min(lo, *s->begin());
        hi = std::max(hi, *s->rbegin());
      }
  }
  bool empty() const { return dropped.empty() && added.empty(); }
  /// Apart: a boundary of `cur` lies strictly between the two spans, so
  /// no stage is changed by both.
  bool apart(const ListChange &o, const std::set<unsigned> &cur) const {
    if (empty() || o.empty())
      return true;
    const ListChange &a = lo <= o.lo ? *this : o, &b = lo <= o.lo ? o : *this;
    if (a.hi >= b.lo)
      return false;
    auto it = cur.upper_bound(a.hi);
    return it != cur.end() && *it < b.lo;
  }
};

/// With `grow`, the tail grown by one layer (taken from the last forward
/// stage and the deepest backward stage); with `shrink`, shrunk by one
/// (given back to both, each as a stage of its own or joined to its
/// neighbour: four moves). In that order, which the searches' ties follow.
inline void tailMoves(const Sizes &s, std::vector<Sizes> &out, bool grow = true,
                      bool shrink = true) {
  if (grow && !s.fwd.empty() && !s.bwd.empty()) {
    Sizes g = s;
    g.tail++;
    if (--g.fwd.back() == 0)
      g.fwd.pop_back();
    if (--g.bwd.front() == 0)
      g.bwd.erase(g.bwd.begin());
    out.push_back(std::move(g));
  }
  if (!shrink || s.tail < 2)
    return;
  for (bool ownFwd : {false, true})
    for (bool ownBwd : {false, true}) {
      Sizes v = s;
      v.tail--;
      if (ownFwd || v.fwd.empty())
        v.fwd.push_back(1);
      else
        v.fwd.back()++;
      if (ownBwd || v.bwd.empty())
        v.bwd.insert(v.bwd.begin(), 1);
      else
        v.bwd.front()++;
      out.push_back(std::move(v));
    }
}

/// The climbs' neighbours of `cur`: the tail's moves, then the forward
/// list's and the backward list's as `listMoves` (a function of a size list
/// and the vector it appends to) gives them, in that order.
template <typename ListMoves>
std::vector<Sizes> neighboursOf(const Sizes &cur, ListMoves listMoves) {
  std::vector<Sizes> neighbours;
  tailMoves(cur, neighbours);
  std::vector<std::vector<unsigned>> fwdMoves, bwdMoves;
  listMoves(cur.fwd, fwdMoves);
  listMoves(cur.bwd, bwdMoves);
  for (auto &l : fwdMoves)
    neighbours.push_back({l, cur.tail, cur.bwd});
  for (auto &l : bwdMoves)
    neighbours.push_back({cur.fwd, cur.tail, l});
  return neighbours;
}

} // namespace mlir::rp::moves

#endif // RP_LIB_ANALYSIS_PARTITIONMOVES_H
