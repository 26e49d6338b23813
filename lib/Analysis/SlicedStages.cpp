//===- SlicedStages.cpp - stages chosen with the token slices -------------===//
//
// searchSlicedStages (include/rp/Analysis/SlicedStages.h): a climb over
// stage sizes timed by the sliced plan's own prediction. Its moves are
// small (one layer, a merge, a split in halves) because each timing is a
// whole sliced plan (K x the jobs' computes, their copies and the memory
// plan), far dearer than rp-partition's unsliced estimate.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/SlicedStages.h"
#include "PartitionMoves.h"
#include "rp/Analysis/PartitionSearch.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::moves;

namespace {

using Key = std::tuple<std::vector<unsigned>, unsigned, std::vector<unsigned>>;

Key keyOf(const Sizes &s) { return {s.fwd, s.tail, s.bwd}; }

/// A list's small moves: each boundary one layer either way, each two
/// neighbours merged, each stage of two or more layers split in halves.
void smallMoves(const std::vector<unsigned> &list,
                std::vector<std::vector<unsigned>> &out) {
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    for (int by : {-1, 1}) {
      std::vector<unsigned> m = list;
      if ((by < 0 && m[i] < 2) || (by > 0 && m[i + 1] < 2))
        continue;
      m[i] += by;
      m[i + 1] -= by;
      out.push_back(std::move(m));
    }
    std::vector<unsigned> merged = list;
    merged[i] += merged[i + 1];
    merged.erase(merged.begin() + i + 1);
    out.push_back(std::move(merged));
  }
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] >= 2) {
      std::vector<unsigned> split = list;
      split[i] = list[i] / 2;
      split.insert(split.begin() + i + 1, list[i] - list[i] / 2);
      out.push_back(std::move(split));
    }
}

std::vector<Sizes> neighboursOf(const Sizes &cur) {
  return moves::neighboursOf(cur, smallMoves);
}

} // namespace

SlicedStages mlir::rp::searchSlicedStages(const Partition &start,
                                          llvm::ArrayRef<LayerCost> layers,
                                          const SlicedStagesSearch &search) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  SlicedStages out;
  out.partition = start;
  // Per-stage grains that differ, or a tail split in a pair, are choices
  // tied to the stages as they are: those partitions are kept.
  for (bool g : start.stageLayerGrain)
    if (g != start.layerGrain) {
      std::optional<double> ms = search.stepMs(start);
      out.stepMs = out.startMs = ms ? *ms : inf;
      out.timed = 1;
      return out;
    }
  if (start.tailPairAt > 0) {
    std::optional<double> ms = search.stepMs(start);
    out.stepMs = out.startMs = ms ? *ms : inf;
    out.timed = 1;
    return out;
  }
  unsigned n = layers.size();
  auto toPlan = [&](const Sizes &s) {
    Partition p = toPartition(s, n);
    p.layerGrain = start.layerGrain;
    p.tailJobs = start.tailJobs;
    return p;
  };
  std::map<Key, double> timed;
  // Times the candidates not timed yet, on all cores, within the budget;
  // candidates past the cap or the budget are infinity.
  auto timeAll = [&](const std::vector<Sizes> &candidates) {
    std::vector<const Sizes *> todo;
    for (const Sizes &s : candidates) {
      if (timed.count(keyOf(s)))
        continue;
      if (search.stageBytesCap > 0 &&
          !fitsStageBytes(toPlan(s), layers, search.stageBytesCap)) {
        timed.emplace(keyOf(s), inf);
        continue;
      }
      if (out.timed + todo.size() >= search.maxTimings)
        break;
      timed.emplace(keyOf(s), inf);
      todo.push_back(&s);
    }
    std::vector<double> ms(todo.size(), inf);
    llvm::parallelFor(0, todo.size(), [&](size_t i) {
      std::optional<double> v = search.stepMs(toPlan(*todo[i]));
      ms[i] = v ? *v : inf;
    });
    for (auto [s, v] : llvm::zip(todo, ms))
      timed[keyOf(*s)] = v;
    out.timed += todo.size();
  };
  auto timeOf = [&](const Sizes &s) {
    auto it = timed.find(keyOf(s));
    return it == timed.end() ? inf : it->second;
  };

  // The starts: the unsliced plan's stages, and its forward layers cut
  // evenly into stages of 1 to 4 layers (what a sliced chain favours:
  // many short forward jobs, each slice's wait on the job before short).
  Sizes first = toSizes(start);
  std::vector<Sizes> starts{first};
  unsigned forwardLayers = start.tail.begin;
  for (unsigned f = 1; f <= 4 && forwardLayers > 0; ++f) {
    Sizes s = first;
    s.fwd.assign(forwardLayers / f, f);
    if (forwardLayers % f)
      s.fwd.push_back(forwardLayers % f);
    starts.push_back(std::move(s));
  }
  timeAll(starts);
  out.startMs = timeOf(first);
  Sizes best = first;
  double bestMs = out.startMs;
  for (const Sizes &s : starts)
    if (timeOf(s) < bestMs) {
      best = s;
      bestMs = timeOf(s);
    }
  // The climb: a first improvement taken chunk by chunk, not the fastest
  // of all neighbours. A sliced timing is dear (about 40 ms of CPU at 64k
  // in 16 slices) and a stage list of 30 jobs has about 100 neighbours,
  // of which many improve by about 1 %: the fastest of all cost 100
  // timings a move and ran into the cap after four moves, still gaining
  // (docs/token-slices.md, session 26). Each sweep starts where the last
  // move was found (the neighbours are listed in stage order, so moves
  // elsewhere get their turn) and times a chunk at a time, on all cores,
  // taking the chunk's fastest that gains more than kGain of the step. The
  // chunk is a constant, so the result does not depend on the thread
  // count.
  constexpr size_t kChunk = 16;
  constexpr double kGain = 1e-5;
  size_t cursor = 0;
  while (out.timed < search.maxTimings) {
    std::vector<Sizes> next = neighboursOf(best);
    if (next.empty())
      break;
    size_t from = cursor % next.size();
    std::rotate(next.begin(), next.begin() + from, next.end());
    const Sizes *pick = nullptr;
    double pickMs = bestMs * (1 - kGain);
    size_t at = 0;
    for (; at < next.size() && !pick && out.timed < search.maxTimings;
         at += kChunk) {
      std::vector<Sizes> chunk(
          next.begin() + at, next.begin() + std::min(next.size(), at + kChunk));
      timeAll(chunk);
      for (size_t i = at; i < at + chunk.size(); ++i)
        if (timeOf(next[i]) < pickMs) {
          pick = &next[i];
          pickMs = timeOf(next[i]);
          cursor = from + i;
        }
    }
    if (!pick)
      break;
    best = *pick;
    bestMs = pickMs;
  }
  if (bestMs < out.startMs) {
    out.partition = toPlan(best);
    out.partition.bottleneckMs = start.bottleneckMs;
    out.partition.stageBytes = start.stageBytes;
  }
  out.stepMs = std::min(bestMs, out.startMs);
  return out;
}
