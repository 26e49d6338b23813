//===- PartitionSearch.cpp - partitions that minimize the step time -------===//
//
// partitionForStepTime's entry: the memo, the search per tail job count
// (PartitionClimb.cpp) and the memory fit after it; the estimate and the
// fit tests the searches share, and the exhaustive search.
//
//===----------------------------------------------------------------------===//

#include "PartitionClimb.h"
#include "PartitionMoves.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PartitionMemory.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/SteadyState.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <optional>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::moves;
using namespace mlir::rp::search;

FailureOr<Pipeline> mlir::rp::lowerForTarget(const Partition &p,
                                             llvm::ArrayRef<LayerCost> layers,
                                             const SearchTarget &t,
                                             std::string &error) {
  Partition q = p;
  q.layerGrain = q.layerGrain || t.layerGrain;
  return lowerSchedule(q, layers, ScheduleKind::roundRobin, t.devices,
                       t.microbatches, error);
}

double mlir::rp::estimatedStepMs(const Partition &p,
                                 llvm::ArrayRef<LayerCost> layers,
                                 const SearchTarget &t) {
  // The steady state of a continuous run: what a run of many steps takes
  // per step, with fill and drain paid once. At layer grain (as
  // devicePeak plans it) the backward jobs are timed as they will run:
  // their inner layers' saved inputs uploaded, and only the deepest
  // layer's recompute ahead of the gradient.
  std::string error;
  FailureOr<Pipeline> pl = lowerForTarget(p, layers, t, error);
  assert(succeeded(pl) && "round-robin lowering cannot fail");
  std::optional<SteadyState> s = dispatchPasses(
      *pl, layers, t.hw, t.dispatch, false, nullptr, /*untilSteady=*/true);
  assert(s && "round-robin schedules cannot deadlock");
  return s ? s->stepMs : 1e300;
}

bool mlir::rp::fitsStageBytes(const Partition &p,
                              llvm::ArrayRef<LayerCost> layers, int64_t cap) {
  for (const StageRange &s : p.forward)
    if (stageBytes(s, layers, false) > cap)
      return false;
  if (stageBytes(p.tail, layers, true) > cap)
    return false;
  for (const StageRange &s : p.backward)
    if (stageBytes(s, layers, true) > cap)
      return false;
  return true;
}

bool mlir::rp::fitsDeviceMemory(const Partition &p,
                                llvm::ArrayRef<LayerCost> layers,
                                const SearchTarget &t) {
  // A plan the live-bytes bound puts over the budget is not placed.
  return devicePeak(p, layers, t, 0, 0).fits;
}

namespace {

/// The fastest partition found, and its estimated step in `ms`.
Partition searchForStepTime(llvm::ArrayRef<LayerCost> layers,
                            const SearchTarget &t, double &ms) {
  // The split tail needs two microbatches to alternate.
  if (t.tailJobs == 1 || t.microbatches < 2 || t.devices < 2)
    return searchWithTailJobs(layers, t, 1, ms);
  if (t.tailJobs == 2 || t.tailJobs == 3)
    return searchWithTailJobs(layers, t, t.tailJobs, ms);
  double oneMs, twoMs;
  Partition one = searchWithTailJobs(layers, t, 1, oneMs);
  Partition two = searchWithTailJobs(layers, t, 2, twoMs);
  ms = std::min(oneMs, twoMs);
  return twoMs < oneMs ? two : one;
}

} // namespace

SearchStats mlir::rp::searchStats() {
  SearchStats s;
  s.candidates = statCandidates;
  s.seconds = double(statMicros) * 1e-6;
  s.searches = statSearches;
  s.budgetStops = statBudgetStops;
  s.reused = statReused;
  s.floorStops = statFloorStops;
  s.memoryLimits = statMemoryLimits;
  return s;
}

namespace {

/// Adds the seconds from its making to its end to searchStats(); a
/// search within a search (fastestFloorTie's) is in its caller's.
struct SearchClock {
  static thread_local unsigned depth;
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  SearchClock() { ++depth; }
  ~SearchClock() {
    if (--depth > 0)
      return;
    statMicros +=
        uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
};

thread_local unsigned SearchClock::depth = 0;

} // namespace

namespace {

/// Everything partitionForStepTime reads, as bytes: equal keys, equal
/// results (the search is deterministic).
std::string searchKey(llvm::ArrayRef<LayerCost> layers, const SearchTarget &t) {
  std::string key;
  auto put = [&](auto v) {
    key.append(reinterpret_cast<const char *>(&v), sizeof(v));
  };
  for (const LayerCost &l : layers) {
    for (int64_t v :
         {l.forwardFlops, l.backwardFlops, l.forwardTraffic, l.backwardTraffic,
          l.paramBytes, l.gradBytes, l.trainableElements, l.actInBytes,
          l.actOutBytes, l.workBytes, l.recomputePeakBytes, l.keptBytes,
          l.keptInputBytes, l.backwardPeakBytes, l.resultGradBytes,
          l.constBytes, l.kernels})
      put(v);
    for (double v :
         {l.forwardMs, l.recomputeMs, l.backwardMs, l.recomputeSkippedMs,
          l.accumulateMs, l.uploadMs, l.downloadMs})
      put(v);
    put(l.backwardMeasured);
    put(l.measured);
    key += l.name;
    key += '\0';
  }
  // The profile by identity and name: the memo lives as long as the parsed
  // profiles it was made with (CostModel).
  put(reinterpret_cast<uintptr_t>(&t.hw));
  key += t.hw.name;
  key += '\0';
  for (int64_t v :
       {int64_t(t.devices), int64_t(t.microbatches), t.stageBytes,
        int64_t(t.dispatch), int64_t(t.tailJobs), int64_t(t.layerGrain),
        t.budget(), int64_t(t.candidateBudget), t.hostStagedBytes,
        t.hostSlackBytes})
    put(v);
  put(t.hostSlack);
  // The fast end by the fields a profile's unknown inputs may set
  // (Assumptions.h), which are all it changes.
  put(t.fastEnd != nullptr);
  if (const HardwareProfile *f = t.fastEnd)
    for (double v : {f->hostDramGBps, double(f->gpusPerLink), f->uplinkGBps,
                     f->h2dGBps, f->d2hGBps, f->pageableGBps, f->optimizerGBps,
                     f->launchUs, f->jobUs, f->moeHostUs, f->kernelHostUs})
      put(v);
  return key;
}

Partition searchAndFit(llvm::ArrayRef<LayerCost> layers, const SearchTarget &t);

} // namespace

Partition mlir::rp::partitionForStepTime(llvm::ArrayRef<LayerCost> layers,
                                         const SearchTarget &t) {
  std::string key;
  if (t.memo) {
    key = searchKey(layers, t);
    for (const auto &[k, p] : t.memo->results)
      if (k == key) {
        ++statReused;
        return p;
      }
  }
  Partition p = holdToHostBudget(searchAndFit(layers, t), layers, t);
  if (t.memo)
    t.memo->results.emplace_back(std::move(key), p);
  return p;
}

namespace {

Partition searchAndFit(llvm::ArrayRef<LayerCost> layers,
                       const SearchTarget &t) {
  SearchClock clock;
  // At the memory limit the search's partitions do not fit: the memory
  // objective's, without timing them.
  if (std::optional<Partition> atLimit = partitionAtMemoryLimit(layers, t)) {
    ++statMemoryLimits;
    return *atLimit;
  }
  double stepMs;
  Partition p = searchForStepTime(layers, t, stepMs);
  // A profile without a memory size has nothing to fit.
  if (t.budget() <= 0)
    return p;
  // The memory objective: at a long sequence the fastest partitions do not
  // fit, lean ones may. A graph that fits with some lean partition is
  // never refused; one that fits with none gets the least peak found, so
  // that the memory plan's refusal names it.
  // Its bound first: the placed peak only matters where no lean
  // partition fits either (below).
  DevicePeak peak = devicePeak(p, layers, t, 0, 0);
  // Two passes in flight share one copy of the arenas where two copies do
  // not fit (rp-plan-memory), a device waiting only for its own part of
  // the pass before, so the fastest partition that fits once is kept: a
  // lean one within half the budget (two copies) lost up to 24 points of
  // bubble to its extra stages (Qwen3-1.7B at 13 x 2048: 60,610 against
  // 79,693 tokens/s on the sim). Of the host optimizer's ties, the
  // leanest tried, then the fastest at the fast end of what the profile
  // cannot know.
  if (peak.fits)
    return fastestFloorTie(leanestFloorTie(p, stepMs, peak, layers, t), stepMs,
                           layers, t);
  MemorySearchResult lean = partitionForMemory(layers, t);
  if (lean.fastest)
    return *lean.fastest;
  if (!peak.planned)
    peak = devicePeak(p, layers, t);
  return lean.least.bytes < peak.bytes ? lean.leastPeak : p;
}

} // namespace

Partition mlir::rp::partitionExhaustive(llvm::ArrayRef<LayerCost> layers,
                                        const SearchTarget &t) {
  unsigned n = layers.size();
  assert(n >= 1 && n <= 10 && "exhaustive search is for small models");
  // Compositions of k as bit masks: bit i set cuts after layer i.
  auto composition = [](unsigned k, unsigned mask) {
    std::vector<unsigned> sizes;
    unsigned size = 0;
    for (unsigned i = 0; i < k; ++i) {
      ++size;
      if (i + 1 == k || (mask >> i) & 1) {
        sizes.push_back(size);
        size = 0;
      }
    }
    return sizes;
  };
  Partition best;
  double bestMs = 0;
  bool found = false;
  for (unsigned tail = n; tail >= 1; --tail) {
    unsigned k = n - tail;
    unsigned masks = k ? 1u << (k - 1) : 1;
    for (unsigned f = 0; f < masks; ++f)
      for (unsigned b = 0; b < masks; ++b) {
        Sizes s;
        s.tail = tail;
        if (k) {
          s.fwd = composition(k, f);
          s.bwd = composition(k, b);
        }
        Partition p = toPartition(s, n);
        if (!fitsStageBytes(p, layers, t.stageBytes))
          continue;
        double ms = estimatedStepMs(p, layers, t);
        if (!found || ms < bestMs) {
          best = p;
          bestMs = ms;
          found = true;
        }
      }
  }
  best.stageBytes = t.stageBytes;
  scorePartition(best, layers, t.devices);
  return best;
}
