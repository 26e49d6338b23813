//===- PartitionMoves.h - stage sizes and the tail's moves ------*- C++ -*-===//
//
// The form the partition searches move in (PartitionClimb.cpp's step-time
// search, PartitionHostBudget.cpp's host hold): a partition as stage
// sizes, and the moves of the tail both make. Private to lib/Analysis.
//
//===----------------------------------------------------------------------===//

#ifndef RP_LIB_ANALYSIS_PARTITIONMOVES_H
#define RP_LIB_ANALYSIS_PARTITIONMOVES_H

#include "rp/Analysis/Partition.h"

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
