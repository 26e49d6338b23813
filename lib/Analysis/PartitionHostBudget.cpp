//===- PartitionHostBudget.cpp - partitions held to the host budget -------===//
//
// holdToHostBudget (PartitionMemory.h): the step-time search cuts for speed
// and device memory; the host's pinned staging buffers, which grow with the
// backward stages, are held to the host budget here, after it, so that the
// search itself (its starts, climbs and memo) is unchanged and a plan under
// the budget is the search's own. First merges: a merge keeps every other
// boundary, so each move stages fewer bytes or is dropped, and the walk
// ends within a stage count of moves; then a climb among the partitions
// that fit both budgets.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/PartitionMemory.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
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
  out.reserve(lists.size() + s.bwd.size() + 1);
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

/// The climb's neighbours: every boundary between two neighbouring
/// stages moved, every stage split in two, two merged, and the tail grown
/// or shrunk by a layer (PartitionSearch.cpp's moves).
std::vector<Sizes> climbMoves(const Sizes &s) {
  std::vector<Sizes> out = mergeMoves(s);
  auto moveAndSplit = [](const std::vector<unsigned> &list, auto &&emit) {
    for (size_t i = 0; i + 1 < list.size(); ++i)
      for (unsigned left = 1; left < list[i] + list[i + 1]; ++left)
        if (left != list[i]) {
          std::vector<unsigned> m = list;
          m[i + 1] = list[i] + list[i + 1] - left;
          m[i] = left;
          emit(std::move(m));
        }
    for (size_t i = 0; i < list.size(); ++i)
      for (unsigned left = 1; left < list[i]; ++left) {
        std::vector<unsigned> m = list;
        m[i] = left;
        m.insert(m.begin() + i + 1, list[i] - left);
        emit(std::move(m));
      }
  };
  moveAndSplit(s.fwd, [&](std::vector<unsigned> l) {
    out.push_back({std::move(l), s.tail, s.bwd});
  });
  moveAndSplit(s.bwd, [&](std::vector<unsigned> l) {
    out.push_back({s.fwd, s.tail, std::move(l)});
  });
  if (s.tail >= 2)
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
  return out;
}

/// Rounds of the climb, and the memory plans made at once in it.
constexpr unsigned kClimbRounds = 64;
constexpr size_t kPlansAtOnce = 8;

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
  if (!fastestFit) {
    scorePartition(cur, layers, t.devices);
    return cur;
  }
  // Then a climb under both budgets: merges keep every boundary they do
  // not touch, and a boundary moved is often faster at the same staged
  // bytes. Each round takes the fastest faster neighbour that fits; memory
  // is planned only for the faster ones, fastest first.
  cur = fastestFit->p;
  double curMs = fastestFit->ms;
  for (unsigned round = 0; round < kClimbRounds; ++round) {
    std::vector<Sizes> moves = climbMoves(
        {sizesOf(cur.forward), cur.tail.size(), sizesOf(cur.backward)});
    std::vector<double> ms(moves.size(), 0);
    std::vector<char> timed(moves.size(), 0);
    llvm::parallelFor(0, moves.size(), [&](size_t i) {
      Partition q = make(moves[i]);
      if (fitsStageBytes(q, layers, cap)) {
        ms[i] = estimatedStepMs(q, layers, t);
        timed[i] = 1;
      }
    });
    std::vector<size_t> faster;
    for (size_t i = 0; i < moves.size(); ++i)
      if (timed[i] && ms[i] < curMs)
        faster.push_back(i);
    std::stable_sort(faster.begin(), faster.end(),
                     [&](size_t a, size_t b) { return ms[a] < ms[b]; });
    bool moved = false;
    for (size_t at = 0; at < faster.size() && !moved; at += kPlansAtOnce) {
      size_t end = std::min(at + kPlansAtOnce, faster.size());
      std::vector<char> fits(end - at, 0);
      llvm::parallelFor(at, end, [&](size_t k) {
        DevicePeak qp = devicePeak(make(moves[faster[k]]), layers, t);
        fits[k - at] = qp.fits && qp.hostBytes <= t.hostStagedBytes;
      });
      for (size_t k = at; k < end && !moved; ++k)
        if (fits[k - at]) {
          cur = make(moves[faster[k]]);
          curMs = ms[faster[k]];
          moved = true;
        }
    }
    if (!moved)
      break;
  }
  scorePartition(cur, layers, t.devices);
  return cur;
}
