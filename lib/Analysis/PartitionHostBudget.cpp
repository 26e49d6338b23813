//===- PartitionHostBudget.cpp - partitions held to the host budget -------===//
//
// holdToHostBudget (PartitionMemory.h): the step-time search cuts for speed
// and device memory; the host's pinned staging buffers, which grow with the
// backward stages, are held to the host budget here, after it, so that the
// search itself (its starts, climbs and memo) is unchanged and a plan under
// the budget is the search's own. Merging stages only: a merge keeps every
// other boundary, so each move stages fewer bytes or is dropped, and the
// walk ends within a stage count of moves.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/PartitionMemory.h"

#include "llvm/Support/Parallel.h"

#include <optional>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// A partition as stage sizes (PartitionSearch.cpp's form: forward from
/// layer 0, the tail, backward from deep to shallow).
struct Sizes {
  std::vector<unsigned> fwd;
  unsigned tail = 0;
  std::vector<unsigned> bwd;
};

std::vector<unsigned> sizesOf(llvm::ArrayRef<StageRange> stages) {
  std::vector<unsigned> sizes;
  for (const StageRange &r : stages)
    sizes.push_back(r.size());
  return sizes;
}

void mergeNeighbours(const std::vector<unsigned> &list,
                     std::vector<std::vector<unsigned>> &out) {
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    std::vector<unsigned> merged = list;
    merged[i] += merged[i + 1];
    merged.erase(merged.begin() + i + 1);
    out.push_back(std::move(merged));
  }
}

/// Every move that may stage fewer bytes: two neighbouring forward or
/// backward stages merged, or the tail grown by a layer (taken from the
/// last forward stage and the deepest backward one).
std::vector<Sizes> mergeMoves(const Sizes &s) {
  std::vector<Sizes> out;
  std::vector<std::vector<unsigned>> lists;
  mergeNeighbours(s.fwd, lists);
  for (auto &l : lists)
    out.push_back({l, s.tail, s.bwd});
  lists.clear();
  mergeNeighbours(s.bwd, lists);
  for (auto &l : lists)
    out.push_back({s.fwd, s.tail, l});
  if (!s.fwd.empty() && !s.bwd.empty()) {
    Sizes g = s;
    g.tail++;
    if (--g.fwd.back() == 0)
      g.fwd.pop_back();
    if (--g.bwd.front() == 0)
      g.bwd.erase(g.bwd.begin());
    out.push_back(std::move(g));
  }
  return out;
}

struct Candidate {
  Partition p;
  DevicePeak peak;
  double ms = 0;
  bool usable = false;
};

} // namespace

Partition mlir::rp::holdToHostBudget(const Partition &p,
                                     llvm::ArrayRef<LayerCost> layers,
                                     const SearchTarget &t) {
  if (t.hostStagedBytes <= 0 || layers.empty())
    return p;
  DevicePeak peak = devicePeak(p, layers, t);
  if (peak.hostBytes <= t.hostStagedBytes || !peak.fits)
    return p;
  const unsigned n = layers.size();
  const int64_t cap = p.stageBytes > 0 ? p.stageBytes : t.stageBytes;
  auto make = [&](const Sizes &s) {
    Partition q = partitionFromSizes(s.fwd, s.tail, s.bwd, n);
    q.layerGrain = p.layerGrain;
    q.tailJobs = p.tailJobs;
    // The timing model's tail pair is a split of the tail it was cut for.
    q.tailPairAt = s.tail == p.tail.size() ? p.tailPairAt : 0;
    q.stageBytes = cap;
    return q;
  };
  Partition cur = p;
  DevicePeak curPeak = peak;
  // The step time is not monotone in the merges (a stage count that
  // divides evenly over the devices can be faster than one more stage), so
  // the walk goes on for a device count of moves past the first partition
  // that fits, and the fastest that fits of every one tried is kept.
  std::optional<Candidate> fastestFit;
  unsigned pastFit = 0;
  while (!fastestFit || pastFit++ < t.devices) {
    std::vector<Sizes> moves = mergeMoves(
        {sizesOf(cur.forward), cur.tail.size(), sizesOf(cur.backward)});
    std::vector<Candidate> tried(moves.size());
    llvm::parallelFor(0, moves.size(), [&](size_t i) {
      Partition q = make(moves[i]);
      if (!fitsStageBytes(q, layers, cap))
        return;
      DevicePeak qp = devicePeak(q, layers, t);
      if (!qp.fits || qp.hostBytes >= curPeak.hostBytes)
        return;
      double ms = estimatedStepMs(q, layers, t);
      tried[i] = {std::move(q), qp, ms, true};
    });
    // The fastest move, the fewer staged bytes on ties, then the first in
    // move order: the same walk on any thread count.
    auto before = [](const Candidate &a, const Candidate &b) {
      return a.ms < b.ms ||
             (a.ms == b.ms && a.peak.hostBytes < b.peak.hostBytes);
    };
    const Candidate *best = nullptr;
    for (const Candidate &c : tried) {
      if (!c.usable)
        continue;
      if (!best || before(c, *best))
        best = &c;
      if (c.peak.hostBytes <= t.hostStagedBytes &&
          (!fastestFit || before(c, *fastestFit)))
        fastestFit = c;
    }
    if (!best)
      break;
    cur = best->p;
    curPeak = best->peak;
  }
  if (fastestFit)
    cur = fastestFit->p;
  scorePartition(cur, layers, t.devices);
  return cur;
}
