//===- PartitionMemory.cpp - partitions that fit long sequences -----------===//

#include "rp/Analysis/PartitionMemory.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/PlanPrediction.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// `p`'s round-robin schedule as rp-insert-transfers leaves it (in issue
/// order, which buffer reuse follows), and its buffers, not placed.
std::optional<std::pair<Pipeline, MemoryPlan>>
buffersOf(const Partition &p, llvm::ArrayRef<LayerCost> layers,
          const SearchTarget &t) {
  std::string error;
  FailureOr<Pipeline> pl = lowerForTarget(p, layers, t, error);
  if (failed(pl))
    return std::nullopt;
  insertTransfers(*pl, layers, t.hw);
  if (std::optional<Schedule> issued = inIssueOrder(pl->schedule))
    pl->schedule = std::move(*issued);
  MemoryPlan mp = collectBuffers(*pl, layers);
  return std::make_pair(std::move(*pl), std::move(mp));
}

} // namespace

std::optional<DevicePeak> mlir::rp::peakUnder(const PeakFacts &facts,
                                              int64_t hostLimit, int64_t budget,
                                              int64_t skipOver) {
  if (!facts.known)
    return std::nullopt;
  DevicePeak peak;
  if (!facts.lowered) {
    peak.bytes = std::numeric_limits<int64_t>::max();
    return peak;
  }
  // devicePeak's early answers, in its order: where a limit is asked, the
  // cheap bounds first, then the host's pool alone (the hold's moves
  // mostly fail one of them).
  if (hostLimit > 0 || skipOver >= 0) {
    if (!facts.bounded)
      return std::nullopt;
    peak.bytes = facts.deviceBound;
    peak.hostBytes = facts.hostBound;
    if ((hostLimit > 0 && facts.hostBound > hostLimit) ||
        (facts.deviceBound > budget && facts.deviceBound >= skipOver))
      return peak;
  }
  if (hostLimit > 0) {
    if (!facts.stagedHostBytes)
      return std::nullopt;
    peak.hostBytes = *facts.stagedHostBytes;
    if (peak.hostBytes > hostLimit)
      return peak;
  }
  return facts.placed;
}

namespace {

/// learnPeak, handing back the placed plan to `planned` where it is
/// placed (devicePeak's).
DevicePeak learn(PeakFacts &facts, const Partition &p,
                 llvm::ArrayRef<LayerCost> layers, const SearchTarget &t,
                 int64_t hostLimit, int64_t skipOver,
                 std::pair<Pipeline, MemoryPlan> *planned) {
  if (std::optional<DevicePeak> known =
          peakUnder(facts, hostLimit, t.budget(), skipOver))
    return *known;
  // Learnt again from the start where a limit needs more than the facts
  // hold: the buffers are not kept (a hold asks thousands of partitions),
  // and the limits a hold asks mostly fall.
  facts = PeakFacts();
  facts.known = true;
  auto built = buffersOf(p, layers, t);
  if (built) {
    facts.lowered = true;
    const Pipeline &pl = built->first;
    MemoryPlan &mp = built->second;
    bool over = false;
    // The bounds only where a limit can stop at them: they cost a pass
    // over the buffers that a plain devicePeak does not need.
    if (hostLimit > 0 || skipOver >= 0) {
      std::vector<int64_t> bounds = liveBytesBounds(mp, pl.devices);
      facts.bounded = true;
      facts.hostBound = bounds.back();
      bounds.pop_back();
      facts.deviceBound = *std::max_element(bounds.begin(), bounds.end());
      over = (hostLimit > 0 && facts.hostBound > hostLimit) ||
             (facts.deviceBound > t.budget() && facts.deviceBound >= skipOver);
    }
    if (!over) {
      HappensBefore hb(pl.schedule);
      mp.stagedHostBytes =
          placePool(mp, hb, pl.devices, /*largestFirstToo=*/false);
      facts.stagedHostBytes = mp.stagedHostBytes;
      if (hostLimit <= 0 || mp.stagedHostBytes <= hostLimit) {
        mp.peakBytes.assign(pl.devices, 0);
        for (unsigned d = 0; d < pl.devices; ++d)
          mp.peakBytes[d] = placePool(mp, hb, d, /*largestFirstToo=*/true);
        FullestDevice full = fullestDevice(mp);
        DevicePeak placed;
        placed.planned = true;
        placed.bytes = full.peak;
        placed.device = full.device;
        placed.fits = placed.bytes <= t.budget();
        placed.hostBytes = mp.stagedHostBytes;
        facts.placed = placed;
        if (planned)
          *planned = std::move(*built);
      }
    }
  }
  return *peakUnder(facts, hostLimit, t.budget(), skipOver);
}

} // namespace

DevicePeak mlir::rp::learnPeak(PeakFacts &facts, const Partition &p,
                               llvm::ArrayRef<LayerCost> layers,
                               const SearchTarget &t, int64_t hostLimit,
                               int64_t skipOver) {
  return learn(facts, p, layers, t, hostLimit, skipOver, nullptr);
}

// One body with learnPeak: fresh facts learn what this limit needs, the
// same steps in the same order.
DevicePeak mlir::rp::devicePeak(const Partition &p,
                                llvm::ArrayRef<LayerCost> layers,
                                const SearchTarget &t, int64_t hostLimit,
                                int64_t skipOver,
                                std::pair<Pipeline, MemoryPlan> *planned) {
  PeakFacts facts;
  return learn(facts, p, layers, t, hostLimit, skipOver, planned);
}

namespace {

/// A lean partition: a tail of `t` layers, backward stages of `b` layers
/// (the shallowest takes the rest) and forward stages of `f` (the deepest
/// takes the rest).
Partition lean(unsigned n, unsigned t, unsigned b, unsigned f) {
  unsigned k = n - t;
  std::vector<unsigned> fwd, bwd;
  for (unsigned done = 0; done < k; done += f)
    fwd.push_back(std::min(f, k - done));
  for (unsigned done = 0; done < k; done += b)
    bwd.push_back(std::min(b, k - done));
  return partitionFromSizes(fwd, t, bwd, n);
}

} // namespace

MemorySearchResult
mlir::rp::partitionForMemory(llvm::ArrayRef<LayerCost> layers,
                             const SearchTarget &t, bool feasibilityOnly) {
  unsigned n = layers.size();
  MemorySearchResult r;
  r.least.bytes = std::numeric_limits<int64_t>::max();
  if (n < 2) {
    r.leastPeak = lean(n, n, 1, 1);
    r.least = devicePeak(r.leastPeak, layers, t);
    ++r.planned;
    if (r.least.fits)
      r.fastest = r.leastPeak;
    return r;
  }
  // The per-stage byte cap, raised to the largest layer as RoundPipe's
  // rule raises it (a one-layer stage is as lean as stages get).
  int64_t cap = t.stageBytes;
  for (unsigned l = 0; l < n; ++l)
    cap = std::max(cap, stageBytes({l, l + 1}, layers, true));
  std::map<std::tuple<unsigned, unsigned, unsigned>, bool> fit;
  // With feasibilityOnly, the placed plans of the last partition that fit
  // and of the least peak, which the caller plans next (a report's
  // trial): kept rather than planned again.
  std::tuple<unsigned, unsigned, unsigned> fitKey;
  std::optional<std::pair<Pipeline, MemoryPlan>> fitPlan, leastPlan;
  auto fits = [&](unsigned tail, unsigned b, unsigned f) {
    auto [it, fresh] = fit.try_emplace({tail, b, f}, false);
    if (!fresh)
      return it->second;
    Partition p = lean(n, tail, b, f);
    if (!fitsStageBytes(p, layers, cap))
      return false;
    // A plan whose bound is over the budget and not under the least peak
    // so far neither fits nor becomes the least: not placed.
    std::pair<Pipeline, MemoryPlan> placed;
    DevicePeak peak = devicePeak(p, layers, t, 0, r.least.bytes,
                                 feasibilityOnly ? &placed : nullptr);
    ++r.planned;
    bool least = peak.bytes < r.least.bytes;
    if (least) {
      r.least = peak;
      r.leastPeak = p;
    }
    if (least && !peak.planned)
      leastPlan.reset();
    if (feasibilityOnly && peak.planned) {
      if (peak.fits) {
        fitKey = {tail, b, f};
        fitPlan = least ? placed : std::move(placed);
      }
      if (least)
        leastPlan = std::move(placed);
    }
    return it->second = peak.fits;
  };
  double bestMs = 0;
  auto consider = [&](unsigned tail, unsigned b, unsigned f) {
    Partition p = lean(n, tail, b, f);
    double ms = estimatedStepMs(p, layers, t);
    ++r.timed;
    if (!r.fastest || ms < bestMs) {
      r.fastest = p;
      bestMs = ms;
    }
  };
  // Tails and backward stages from the leanest up: a longer one holds
  // more, so once none fits at some size the larger ones are not tried.
  const unsigned backwardSizes[] = {1, 2, 3, 4, 6, 8};
  for (unsigned tail = 1; tail <= std::min(3u, n - 1); ++tail) {
    unsigned k = n - tail;
    bool anyB = false;
    for (unsigned b : backwardSizes) {
      if (b > k)
        break;
      // The first of the shortest forward stages that fits: where stages
      // land on devices changes with f, so the peak is not quite monotone
      // in it at the start.
      unsigned lo = 0;
      for (unsigned f = 1; f <= std::min(3u, k) && !lo; ++f)
        if (fits(tail, b, f))
          lo = f;
      if (!lo)
        break;
      anyB = true;
      if (feasibilityOnly) {
        r.fastest = lean(n, tail, b, lo);
        if (fitPlan && fitKey == std::make_tuple(tail, b, lo))
          r.plan = std::move(fitPlan);
        break;
      }
      // Longer forward stages hold more weights: gallop, then bisect for
      // the longest that fits.
      unsigned hi = lo + 1, step = 1;
      while (hi <= k && fits(tail, b, hi)) {
        lo = hi;
        step *= 2;
        hi = lo + step;
      }
      hi = std::min(hi, k + 1);
      while (hi - lo > 1) {
        unsigned mid = lo + (hi - lo) / 2;
        if (fits(tail, b, mid))
          lo = mid;
        else
          hi = mid;
      }
      // The longest forward stages upload the fewest sets, but shorter
      // ones spread a pass over more devices: time both ends and between.
      std::set<unsigned> tries{lo, (lo + 1) / 2, (lo + 3) / 4};
      for (unsigned f : tries)
        if (f == lo || fits(tail, b, f))
          consider(tail, b, f);
    }
    if (!anyB || (feasibilityOnly && r.fastest))
      break;
  }
  if (r.fastest) {
    r.fastest->stageBytes = cap;
    scorePartition(*r.fastest, layers, t.devices);
  }
  r.leastPeak.stageBytes = cap;
  scorePartition(r.leastPeak, layers, t.devices);
  if (feasibilityOnly && !r.fastest)
    r.plan = std::move(leastPlan);
  return r;
}

Partition mlir::rp::leanestFloorTie(const Partition &p, double stepMs,
                                    const DevicePeak &peak,
                                    llvm::ArrayRef<LayerCost> layers,
                                    const SearchTarget &t) {
  unsigned n = layers.size();
  // Up to 16 layers the search is run in full (PartitionClimb.cpp's
  // kFullSearchLayers): its answer is the fastest, not the first tie.
  if (n <= 16 || !peak.planned || !peak.fits || t.hostStagedBytes > 0 ||
      t.hostSlack > 0)
    return p;
  double floorMs = optimizerFloorMs(layers, t.hw);
  if (!atOptimizerFloor(stepMs, floorMs, kGrainTie))
    return p;
  Partition q = lean(n, 1, 1, 1);
  q.stageBytes = p.stageBytes;
  if (!fitsStageBytes(q, layers, q.stageBytes) ||
      !atOptimizerFloor(estimatedStepMs(q, layers, t), floorMs, kGrainTie))
    return p;
  DevicePeak leanPeak = devicePeak(q, layers, t, 0, 0);
  if (!leanPeak.fits || leanPeak.bytes >= peak.bytes)
    return p;
  scorePartition(q, layers, t.devices);
  return q;
}

Partition mlir::rp::fastestFloorTie(const Partition &p, double stepMs,
                                    llvm::ArrayRef<LayerCost> layers,
                                    const SearchTarget &t) {
  unsigned n = layers.size();
  if (!t.fastEnd || n <= 16 || t.hostStagedBytes > 0 || t.hostSlack > 0)
    return p;
  double floorMs = optimizerFloorMs(layers, t.hw);
  if (!atOptimizerFloor(stepMs, floorMs, kGrainTie))
    return p;
  // The fast end's search runs without a fast end of its own (no second
  // round) and without the memo, whose keys name profiles by address.
  SearchTarget fast{*t.fastEnd,   t.devices,  t.microbatches,
                    t.stageBytes, t.dispatch, t.tailJobs};
  fast.layerGrain = t.layerGrain;
  fast.budgetBytes = t.budget();
  fast.candidateBudget = t.candidateBudget;
  double pFastMs = estimatedStepMs(p, layers, fast);
  // At the fast end's floor too: no partition is faster at either end.
  if (atOptimizerFloor(pFastMs, optimizerFloorMs(layers, *t.fastEnd),
                       kGrainTie))
    return p;
  Partition q = partitionForStepTime(layers, fast);
  if (estimatedStepMs(q, layers, fast) >= pFastMs * (1 - kGrainTie) ||
      !atOptimizerFloor(estimatedStepMs(q, layers, t), floorMs, kGrainTie) ||
      !devicePeak(q, layers, t, 0, 0).fits)
    return p;
  q.stageBytes = p.stageBytes;
  scorePartition(q, layers, t.devices);
  return q;
}

std::optional<Partition>
mlir::rp::partitionAtMemoryLimit(llvm::ArrayRef<LayerCost> layers,
                                 const SearchTarget &t) {
  int64_t budget = t.budget();
  if (budget <= 0 || layers.size() < 2 || t.hostStagedBytes > 0 ||
      t.hostSlack > 0)
    return std::nullopt;
  // The step-time search's fallback when its partition does not fit:
  // RoundPipe's, where it fits, with each tail job count the search tries
  // (searchForStepTime). Its bound decides where it can.
  Partition roundpipe = partitionRoundPipe(layers, t.stageBytes, t.devices);
  // (A pair of tail jobs, tailJobs 3, is timed as RoundPipe's one job.)
  std::vector<unsigned> tailJobs{1};
  if (t.microbatches >= 2 && t.devices >= 2 && t.tailJobs == 2)
    tailJobs = {2};
  else if (t.microbatches >= 2 && t.devices >= 2 && t.tailJobs == 0)
    tailJobs = {1, 2};
  for (unsigned jobs : tailJobs) {
    roundpipe.tailJobs = jobs;
    if (devicePeak(roundpipe, layers, t, 0, 0).fits)
      return std::nullopt;
  }
  MemorySearchResult leanest =
      partitionForMemory(layers, t, /*feasibilityOnly=*/true);
  // The leanest that fits is the least peak the feasibility tried.
  if (!leanest.fastest ||
      double(budget - leanest.least.bytes) > kFitTie * double(budget))
    return std::nullopt;
  return partitionForMemory(layers, t).fastest;
}
