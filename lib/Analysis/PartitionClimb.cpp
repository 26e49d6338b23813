//===- PartitionClimb.cpp - the step-time search for one tail -------------===//
//
// partitionForStepTime's search for one tail job count (searchWithTailJobs):
// its starting points, the balanced scans and the hill climb. The entry
// points, memo and memory fit around it are in PartitionSearch.cpp.
//
//===----------------------------------------------------------------------===//

#include "PartitionClimb.h"
#include "PartitionMoves.h"
#include "rp/Analysis/MemoryPlan.h"
#include "rp/Analysis/PartitionMemory.h"
#include "rp/Analysis/PlanPrediction.h"
#include "rp/Analysis/SteadyState.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::moves;
using namespace mlir::rp::search;

namespace mlir::rp::search {

std::atomic<uint64_t> statCandidates{0}, statMicros{0};
std::atomic<unsigned> statSearches{0}, statBudgetStops{0}, statReused{0},
    statFloorStops{0}, statMemoryLimits{0};

} // namespace mlir::rp::search

namespace {

/// Neighbours of a size list: move a boundary by any number of layers,
/// merge two neighbours, split a stage anywhere.
void listMoves(const std::vector<unsigned> &list,
               std::vector<std::vector<unsigned>> &out) {
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    unsigned both = list[i] + list[i + 1];
    for (unsigned left = 1; left < both; ++left) {
      if (left == list[i])
        continue;
      std::vector<unsigned> m = list;
      m[i] = left;
      m[i + 1] = both - left;
      out.push_back(m);
    }
    std::vector<unsigned> merged = list;
    merged[i] = both;
    merged.erase(merged.begin() + i + 1);
    out.push_back(merged);
  }
  for (size_t i = 0; i < list.size(); ++i)
    for (unsigned left = 1; left < list[i]; ++left) {
      std::vector<unsigned> split = list;
      split[i] = left;
      split.insert(split.begin() + i + 1, list[i] - left);
      out.push_back(split);
    }
}

/// The climb's neighbours of `cur`: the tail's moves, then the forward
/// list's and the backward list's (listMoves), in that order.
std::vector<Sizes> neighboursOf(const Sizes &cur) {
  return moves::neighboursOf(cur, listMoves);
}

/// [0, k) cut into `count` stages of about equal time.
std::vector<unsigned> balancedSizes(llvm::ArrayRef<LayerCost> layers,
                                    unsigned k, unsigned count, bool backward) {
  std::vector<double> prefix(k + 1, 0);
  for (unsigned l = 0; l < k; ++l)
    prefix[l + 1] = prefix[l] + layers[l].recomputeMs +
                    (backward ? layers[l].backwardMs : 0);
  std::vector<unsigned> sizes;
  unsigned cut = 0;
  for (unsigned j = 1; j < count; ++j) {
    double target = prefix[k] * j / count;
    unsigned best = cut + 1;
    for (unsigned l = cut + 1; l <= k - (count - j); ++l)
      if (std::abs(prefix[l] - target) < std::abs(prefix[best] - target))
        best = l;
    sizes.push_back(best - cut);
    cut = best;
  }
  sizes.push_back(k - cut);
  if (backward)
    std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

/// The first half's layer count that makes the two halves' forward +
/// backward times most even.
unsigned balancedPairSplit(StageRange tail, llvm::ArrayRef<LayerCost> layers) {
  double total = 0;
  for (unsigned l = tail.begin; l < tail.end; ++l)
    total += layers[l].forwardMs + layers[l].backwardMs;
  unsigned best = 1;
  double bestGap = 1e300, first = 0;
  for (unsigned a = 1; a < tail.size(); ++a) {
    const LayerCost &c = layers[tail.begin + a - 1];
    first += c.forwardMs + c.backwardMs;
    double gap = std::max(first, total - first);
    if (gap < bestGap) {
      bestGap = gap;
      best = a;
    }
  }
  return best;
}

/// What SearchMemo keys a search's problem by: what the partitions it
/// may return depend on, but the grain and the layers' costs.
std::string problemOf(unsigned n, const SearchTarget &t, unsigned tailJobs) {
  return std::to_string(n) + "/" + std::to_string(t.devices) + "/" +
         std::to_string(t.microbatches) + "/" + std::to_string(t.stageBytes) +
         "/" + std::to_string(tailJobs) + "/" +
         std::to_string(unsigned(t.dispatch)) + "/" +
         std::to_string(t.budget()) + "/" +
         std::to_string(reinterpret_cast<uintptr_t>(&t.hw));
}

/// A partition as the searches' maps key it.
using Key = std::tuple<std::vector<unsigned>, unsigned, std::vector<unsigned>>;

Key keyOf(const Sizes &s) { return {s.fwd, s.tail, s.bwd}; }

/// The floor probe (searchWithTailJobs): it runs where the best start is
/// within this fraction of the floor, times at most this many partitions,
/// in chunks of this many neighbours.
constexpr double kProbeGap = 1e-4;
constexpr uint64_t kProbeTimings = 128;
constexpr size_t kProbeChunk = 16;

/// Models this small are searched in full every time: their searches are
/// cheap, and their restarts find the exhaustive optimum.
constexpr unsigned kFullSearchLayers = 16;

/// Neighbours a climb times at once before it looks for a partition that
/// fits at the floor among them: chunks of a fixed size, so that where it
/// stops does not depend on the thread count.
constexpr size_t kClimbChunk = 64;

} // namespace

Partition mlir::rp::search::searchWithTailJobs(llvm::ArrayRef<LayerCost> layers,
                                               const SearchTarget &t,
                                               unsigned tailJobs,
                                               double &foundMs) {
  unsigned n = layers.size();
  ++statSearches;
  // Earlier searches of the same problem in this compile (SearchMemo):
  // their bests are the starts, and the sweeps are skipped.
  std::string problem = problemOf(n, t, tailJobs);
  std::vector<const SearchMemo::Found *> earlier;
  if (t.memo && t.memo->startFromEarlier && n > kFullSearchLayers)
    for (const SearchMemo::Found &f : t.memo->found)
      if (f.problem == problem)
        earlier.push_back(&f);
  // The candidate budget: past it every untimed candidate is +inf, so
  // the climb stops where it is, its best kept.
  uint64_t spent = 0;
  bool stopped = false;
  // tailJobs 3: one tail job split by layers into a pair (tailPairAt),
  // the split where the halves' f + b are most even.
  auto toPartition = [&](const Sizes &s, unsigned numLayers) {
    Partition p = partitionFromSizes(s.fwd, s.tail, s.bwd, numLayers);
    p.tailJobs = tailJobs == 3 ? 1 : tailJobs;
    if (tailJobs == 3 && s.tail >= 2)
      p.tailPairAt = balancedPairSplit(p.tail, layers);
    return p;
  };
  // Starting points: RoundPipe's partition, and greedy cuts under
  // bottlenecks from the largest layer up to 4x it, for each tail that
  // RoundPipe's rule would give.
  Partition roundpipe = partitionRoundPipe(layers, t.stageBytes, t.devices);
  roundpipe.tailJobs = tailJobs == 3 ? 1 : tailJobs;
  int64_t cap = roundpipe.stageBytes;
  Sizes best = toSizes(roundpipe);
  double bestMs = estimatedStepMs(roundpipe, layers, t);
  const double bestRoundPipeMs = bestMs;
  double wMax = roundpipe.bottleneckMs;
  // Starting points and neighbourhoods overlap; each partition is timed
  // once. `probed` holds what the floor probe (below) timed: the search
  // reads a partition's time there rather than timing it again, but counts
  // it against its budget and keeps it in `timed` only once it asks for it
  // itself, so that where the probe fails the search runs as without it.
  std::map<Key, double> timed, probed;
  uint64_t timings = 0;
  // RoundPipe's partition is timed once: the starts hold it again, and
  // it is often the search's answer (Qwen3-235B-A22B LoRA: every search;
  // each timing a whole run of 190 jobs).
  // (Not where the starts' copy would be timed otherwise: a split tail.)
  Partition asStart = toPartition(best, n);
  if (asStart.tailJobs == roundpipe.tailJobs &&
      asStart.tailPairAt == roundpipe.tailPairAt &&
      asStart.layerGrain == roundpipe.layerGrain &&
      asStart.stageLayerGrain == roundpipe.stageLayerGrain)
    timed.try_emplace(keyOf(best), bestMs);
  auto evaluate = [&](const Sizes &s) {
    Partition p = toPartition(s, n);
    return fitsStageBytes(p, layers, cap)
               ? estimatedStepMs(p, layers, t)
               : std::numeric_limits<double>::infinity();
  };
  // The times of `todo` on all cores, those the probe timed read back.
  auto timeEach = [&](llvm::ArrayRef<const Sizes *> todo) {
    std::vector<double> ms(todo.size());
    std::vector<size_t> fresh;
    for (auto [i, s] : llvm::enumerate(todo))
      if (auto it = probed.find(keyOf(*s)); it != probed.end())
        ms[i] = it->second;
      else
        fresh.push_back(i);
    timings += fresh.size();
    llvm::parallelFor(0, fresh.size(), [&](size_t i) {
      ms[fresh[i]] = evaluate(*todo[fresh[i]]);
    });
    return ms;
  };
  auto timeOf = [&](const Sizes &s) {
    auto it = timed.find(keyOf(s));
    if (it != timed.end())
      return it->second;
    if (spent >= t.candidateBudget) {
      stopped = true;
      return std::numeric_limits<double>::infinity();
    }
    ++spent;
    double ms = timeEach({&s}).front();
    timed.try_emplace(keyOf(s), ms);
    return ms;
  };
  // Times the candidates not timed yet on all cores; the search then
  // reads them in its own order, so the result does not depend on the
  // thread count.
  auto timeAll = [&](llvm::ArrayRef<Sizes> candidates) {
    std::vector<const Sizes *> todo;
    std::set<Key> queued;
    for (const Sizes &s : candidates)
      if (!timed.count(keyOf(s)) && queued.insert(keyOf(s)).second)
        todo.push_back(&s);
    if (spent + todo.size() > t.candidateBudget) {
      todo.resize(t.candidateBudget -
                  std::min<uint64_t>(spent, t.candidateBudget));
      stopped = true;
    }
    spent += todo.size();
    std::vector<double> ms = timeEach(todo);
    for (auto [s, v] : llvm::zip(todo, ms))
      timed.try_emplace(keyOf(*s), v);
  };
  // The host optimizer's floor (PlanPrediction.h): no partition runs a
  // step faster, so once a partition that fits runs there, every other
  // can only tie to rounding. Large models stop there, where the climb
  // walked thousands of tied candidates (a 256-layer model: 19,181), and
  // keep the first partition found at the floor.
  double floorMs = n > kFullSearchLayers ? optimizerFloorMs(layers, t.hw) : 0;
  std::optional<std::pair<Sizes, bool>> floorChecked;
  bool floorReached = false;
  auto atFloor = [&](const Sizes &s, double ms) {
    if (!(floorMs > 0) || ms > floorMs * (1 + 1e-9))
      return false;
    if (!floorChecked ||
        std::tie(floorChecked->first.fwd, floorChecked->first.tail,
                 floorChecked->first.bwd) != std::tie(s.fwd, s.tail, s.bwd))
      floorChecked.emplace(s, fitsDeviceMemory(toPartition(s, n), layers, t));
    floorReached |= floorChecked->second;
    return floorChecked->second;
  };
  auto consider = [&](const Sizes &s) {
    double ms = timeOf(s);
    if (ms < bestMs) {
      bestMs = ms;
      best = s;
      return true;
    }
    return false;
  };
  // Where the fastest of a batch runs at the floor but does not fit, the
  // first of the batch that ties it there and fits ends the search as well
  // (Qwen3-32B: the fastest start's memory plan is over 24 GiB, the next
  // start at the floor fits; without this the balanced scans timed 193
  // more candidates to reach the same step).
  auto takeFloor = [&](llvm::ArrayRef<Sizes> batch) {
    if (!(floorMs > 0) || atFloor(best, bestMs) ||
        bestMs > floorMs * (1 + 1e-9))
      return;
    for (const Sizes &s : batch)
      if (double ms = timeOf(s); atFloor(s, ms)) {
        best = s;
        bestMs = ms;
        return;
      }
  };
  std::vector<Sizes> starts;
  starts.reserve(earlier.size());
  for (const SearchMemo::Found *f : earlier)
    starts.push_back(Sizes{f->fwd, f->tail, f->bwd});
  for (unsigned step = 0; earlier.empty() && step <= 30; ++step) {
    double w = wMax * (1 + step * 0.1);
    for (unsigned k = n; k-- > 0;) {
      Sizes s;
      s.tail = n - k;
      s.fwd = sizesOf(cutUnder(layers, k, w, cap, /*backward=*/false));
      s.bwd = sizesOf(cutUnder(layers, k, w, cap, /*backward=*/true));
      starts.push_back(s);
      // Tails past the bottleneck (per job) are not worth trying.
      double tail = 0;
      for (unsigned l = k; l < n; ++l)
        tail += layers[l].forwardMs + layers[l].backwardMs;
      if (tail > w * std::min(tailJobs, 2u))
        break;
    }
  }
  timeAll(starts);
  for (const Sizes &s : starts)
    consider(s);
  takeFloor(starts);
  // The floor probe: where the starts came close to the floor but no
  // partition that fits runs there, a short climb that moves to the first
  // chunk of neighbours holding a faster one looks for a partition that
  // fits at the floor, within a fixed number of timings. One found is as
  // fast as any partition can be (the floor bounds every step from
  // below), so the search ends there; none found, the search goes on as
  // without the probe (its timings read back, not taken again).
  if (earlier.empty() && floorMs > 0 && !atFloor(best, bestMs) &&
      bestMs <= floorMs * (1 + kProbeGap)) {
    Sizes cur = best;
    double curMs = bestMs;
    uint64_t left = kProbeTimings;
    bool found = false, moved = true;
    while (!found && moved && left > 0) {
      moved = false;
      std::vector<Sizes> neighbours = neighboursOf(cur);
      // More stages first: at a floor paced by the optimizer's share of
      // host DRAM, what a step loses to it is copies overlapping, which
      // smaller stages spread (a 256-layer model: 64 timings to the floor
      // this way, 84 in the climb's order).
      std::stable_partition(neighbours.begin(), neighbours.end(),
                            [&](const Sizes &s) {
                              return s.fwd.size() + s.bwd.size() >
                                     cur.fwd.size() + cur.bwd.size();
                            });
      for (size_t from = 0;
           from < neighbours.size() && left > 0 && !moved && !found;
           from += kProbeChunk) {
        llvm::ArrayRef<Sizes> chunk =
            llvm::ArrayRef(neighbours).slice(from).take_front(kProbeChunk);
        // Over the byte cap is not a timing: skipped, not counted.
        std::vector<const Sizes *> todo;
        for (const Sizes &s : chunk)
          if (!timed.count(keyOf(s)) && !probed.count(keyOf(s)) &&
              fitsStageBytes(toPartition(s, n), layers, cap) &&
              llvm::none_of(
                  todo, [&](const Sizes *q) { return keyOf(*q) == keyOf(s); }))
            todo.push_back(&s);
        if (todo.size() > left)
          todo.resize(left);
        left -= todo.size();
        std::vector<double> ms = timeEach(todo);
        for (auto [s, v] : llvm::zip(todo, ms))
          probed.try_emplace(keyOf(*s), v);
        for (const Sizes &s : chunk) {
          auto known = [&]() -> std::optional<double> {
            if (auto it = timed.find(keyOf(s)); it != timed.end())
              return it->second;
            if (auto it = probed.find(keyOf(s)); it != probed.end())
              return it->second;
            return std::nullopt;
          }();
          if (!known)
            continue;
          if (atFloor(s, *known)) {
            best = s;
            bestMs = *known;
            found = true;
            break;
          }
          if (*known < curMs) {
            cur = s;
            curMs = *known;
            moved = true;
          }
        }
      }
    }
  }
  // Balanced cuts into every pair of stage counts, for the tails RoundPipe's
  // rule and the best start use: more, smaller stages spread the weight
  // uploads over more devices, which greedy cuts under a bottleneck miss.
  // Small models try every pair of counts; larger ones search the forward
  // and backward counts in turn (each against the other's best so far,
  // three rounds): a step's time depends on them almost separably, and all
  // pairs would cost k^2 timings (4,000 for a 64-layer model).
  for (unsigned tailSize : {roundpipe.tail.size(), best.tail}) {
    if (!earlier.empty() || atFloor(best, bestMs))
      break;
    unsigned k = n - tailSize;
    unsigned sf = std::clamp<unsigned>(best.fwd.size(), 1, std::max(k, 1u));
    unsigned sb = std::clamp<unsigned>(best.bwd.size(), 1, std::max(k, 1u));
    auto balanced = [&](unsigned f, unsigned b) {
      return Sizes{balancedSizes(layers, k, f, false), tailSize,
                   balancedSizes(layers, k, b, true)};
    };
    if (k <= 16) {
      std::vector<Sizes> pairs;
      for (unsigned f = 1; f <= k; ++f)
        for (unsigned b = 1; b <= k; ++b)
          pairs.push_back(balanced(f, b));
      timeAll(pairs);
      for (const Sizes &s : pairs)
        consider(s);
      continue;
    }
    for (unsigned round = 0; round < 3; ++round) {
      unsigned bf = sf, bb = sb;
      std::vector<Sizes> scan;
      for (unsigned f = 1; f <= k; ++f)
        scan.push_back(balanced(f, sb));
      timeAll(scan);
      for (unsigned f = 1; f <= k; ++f)
        if (timeOf(balanced(f, sb)) < timeOf(balanced(bf, sb)))
          bf = f;
      scan.clear();
      for (unsigned b = 1; b <= k; ++b)
        scan.push_back(balanced(bf, b));
      timeAll(scan);
      for (unsigned b = 1; b <= k; ++b)
        if (timeOf(balanced(bf, b)) < timeOf(balanced(bf, bb)))
          bb = b;
      if (bf == sf && bb == sb)
        break;
      sf = bf;
      sb = bb;
    }
    consider(balanced(sf, sb));
  }
  // Hill climbing: take the best neighbour while it improves, from the best
  // starting point and then from the next best distinct ones (the starts
  // and balanced cuts timed so far): the step time is not convex in the
  // cuts, and an optimum two moves away (split a stage and shift the new
  // boundary) is invisible from a local optimum. Only small models
  // restart: a climb over a large model's hundreds of neighbours costs
  // seconds, and on RoundPipe's five inputs (26 to 96 layers) two restarts
  // each found at most 0.2 % (Qwen3-235B) for six times the search time.
  auto climb = [&](Sizes cur) {
    double curMs = timeOf(cur);
    for (unsigned round = 0; round < 1000 && !atFloor(cur, curMs); ++round) {
      std::vector<Sizes> neighbours = neighboursOf(cur);
      // Timed in chunks, in the neighbours' order: where a chunk holds a
      // partition that fits at the floor, the climb stops there and the
      // rest are never timed (a 256-layer model's last round: 28 of its
      // 400 neighbours fit at the floor, none of them the fastest, which
      // did not fit). Without one, the best neighbour as before.
      bool improved = false, floorStop = false;
      for (size_t from = 0; from < neighbours.size() && !floorStop;
           from += kClimbChunk) {
        llvm::ArrayRef<Sizes> chunk =
            llvm::ArrayRef(neighbours).slice(from).take_front(kClimbChunk);
        timeAll(chunk);
        for (const Sizes &s : chunk)
          if (double ms = timeOf(s); ms < curMs) {
            curMs = ms;
            cur = s;
            improved = true;
          }
        if (atFloor(cur, curMs))
          break;
        for (const Sizes &s : chunk)
          if (double ms = timeOf(s); atFloor(s, ms)) {
            curMs = ms;
            cur = s;
            improved = floorStop = true;
            break;
          }
      }
      if (!improved)
        break;
    }
    // One that fits at the floor beats one that does not, by rounding
    // faster (which the memory plan would refuse).
    if (atFloor(cur, curMs) && !atFloor(best, bestMs)) {
      best = cur;
      bestMs = curMs;
      return;
    }
    consider(cur);
  };
  std::vector<std::pair<double, Sizes>> seeds;
  for (const auto &[key, ms] : timed)
    if (std::isfinite(ms))
      seeds.emplace_back(
          ms, Sizes{std::get<0>(key), std::get<1>(key), std::get<2>(key)});
  // Ties in the order the map keeps, so the result is deterministic.
  std::stable_sort(
      seeds.begin(), seeds.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  climb(best);
  size_t restarts = n <= 16 ? 8 : 0;
  for (const auto &[ms, s] : llvm::ArrayRef(seeds).take_front(restarts + 1))
    if (std::tie(s.fwd, s.tail, s.bwd) != std::tie(seeds.front().second.fwd,
                                                   seeds.front().second.tail,
                                                   seeds.front().second.bwd))
      climb(s);
  // The steady state favours larger stages than one step alone does, and
  // the byte cap counts weights only: when the best partition's memory
  // plan does not fit a device but RoundPipe's does, take the fastest
  // partition timed that fits (RoundPipe's at worst). A model no
  // partition fits is the memory plan's to report.
  if (t.memo && t.memo->startFromEarlier)
    t.memo->found.push_back({problem, best.fwd, best.bwd, best.tail});
  statCandidates += timings + 2;
  statBudgetStops += stopped;
  statFloorStops += floorReached;
  Partition p = toPartition(best, n);
  if (!fitsDeviceMemory(p, layers, t) &&
      fitsDeviceMemory(roundpipe, layers, t)) {
    std::vector<std::pair<double, Sizes>> byTime;
    for (const auto &[key, ms] : timed)
      if (ms < bestRoundPipeMs)
        byTime.emplace_back(
            ms, Sizes{std::get<0>(key), std::get<1>(key), std::get<2>(key)});
    llvm::sort(byTime,
               [](const auto &a, const auto &b) { return a.first < b.first; });
    p = roundpipe;
    for (const auto &[ms, s] : llvm::ArrayRef(byTime).take_front(64)) {
      Partition q = toPartition(s, n);
      if (fitsDeviceMemory(q, layers, t)) {
        p = q;
        break;
      }
    }
  }
  p.stageBytes = cap;
  scorePartition(p, layers, t.devices);
  Partition timedAs = toPartition(toSizes(p), n);
  p.tailJobs = timedAs.tailJobs;
  p.tailPairAt = timedAs.tailPairAt;
  // Timed already where the climb's partition is kept (the same layers,
  // tail jobs and split, so the same bits); the fallback's may not be.
  auto known = timed.find(keyOf(toSizes(p)));
  foundMs = known != timed.end() && std::isfinite(known->second)
                ? known->second
                : estimatedStepMs(p, layers, t);
  return p;
}
