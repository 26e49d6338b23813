//===- PartitionHostBudget.cpp - partitions held to the host budget -------===//
//
// holdToHostBudget (PartitionMemory.h): the step-time search cuts for speed
// and device memory; the host's pinned staging buffers, which grow with the
// backward stages, are held to the host budget here, after it, so that the
// search itself (its starts, climbs and memo) is unchanged and a plan under
// the budget is the search's own. First merges: a merge keeps every other
// boundary, so each move stages fewer bytes or is dropped, and the walk
// ends within a stage count of moves (where no merge fits the devices
// before the budget is met, each is repaired a layer at a time:
// Hold::repairRound); then a climb among the partitions that fit both
// budgets. At layer grain in every backward stage the walk
// splits forward stages instead of merging (stagingMoves).
// The search's choices after it that re-cut the stages keep the budget:
// rp-choose-loss-fusion holds the unfused graph's the same way, and
// `recompute = auto` does not take a layer-grain plan over it where the
// stage-grain one is within (chooseGrainForSpeed).
// Without a host budget the same walk runs under a step-time slack
// instead (holdNearFastest, SearchTarget::hostSlack): the fastest
// partition's backward boundaries each stage every microbatch's input, and
// a partition nearly as fast that stages gigabytes less is the better plan
// for a box whose memory the compiler does not know.
//
//===----------------------------------------------------------------------===//

#include "PartitionMoves.h"
#include "rp/Analysis/PartitionMemory.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::moves;

namespace {

void mergeNeighbours(const std::vector<unsigned> &list,
                     std::vector<std::vector<unsigned>> &out) {
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    std::vector<unsigned> merged = list;
    merged[i] += merged[i + 1];
    merged.erase(merged.begin() + i + 1);
    out.push_back(std::move(merged));
  }
}

/// Every move that may stage fewer bytes. At stage grain: two
/// neighbouring forward or backward stages merged (a boundary fewer to
/// stage). At layer grain in every backward stage each layer's input
/// outside the tail is staged whatever the stages, sent down with the
/// forward that computes it in one download per forward job, which is held
/// until its shallowest reader: a merge only holds more inputs longer,
/// while a forward stage split in two lets its deeper part go when its
/// backward has read it (PartitionHostBudgetTest.LayerGrainIsHeldBySplits).
/// At both grains the tail grown by a layer (taken from the last forward
/// stage and the deepest backward one).
std::vector<Sizes> stagingMoves(const Sizes &s, bool layerGrain) {
  std::vector<Sizes> out;
  std::vector<std::vector<unsigned>> lists;
  if (layerGrain) {
    for (size_t i = 0; i < s.fwd.size(); ++i)
      for (unsigned left = 1; left < s.fwd[i]; ++left) {
        std::vector<unsigned> m = s.fwd;
        m[i] = left;
        m.insert(m.begin() + i + 1, s.fwd[i] - left);
        out.push_back({std::move(m), s.tail, s.bwd});
      }
  } else {
    mergeNeighbours(s.fwd, lists);
    out.reserve(lists.size() + s.bwd.size() + 1);
    for (auto &l : lists)
      out.push_back({l, s.tail, s.bwd});
    lists.clear();
    mergeNeighbours(s.bwd, lists);
    for (auto &l : lists)
      out.push_back({s.fwd, s.tail, l});
  }
  tailMoves(s, out, /*grow=*/true, /*shrink=*/false);
  return out;
}

/// A repair's neighbours (Hold::repairRound): one boundary between two
/// neighbouring stages moved by a layer either way, and the tail grown or
/// shrunk by one (its layer given to its neighbours). No stage is added,
/// so what is staged stays about the same.
std::vector<Sizes> shiftMoves(const Sizes &s) {
  std::vector<Sizes> out;
  auto shift = [](const std::vector<unsigned> &list, auto &&emit) {
    for (size_t i = 0; i + 1 < list.size(); ++i)
      for (int by : {-1, 1}) {
        std::vector<unsigned> m = list;
        if (by < 0 ? m[i] == 1 : m[i + 1] == 1)
          continue;
        m[i] += by;
        m[i + 1] -= by;
        emit(std::move(m));
      }
  };
  shift(s.fwd, [&](std::vector<unsigned> l) {
    out.push_back({std::move(l), s.tail, s.bwd});
  });
  shift(s.bwd, [&](std::vector<unsigned> l) {
    out.push_back({s.fwd, s.tail, std::move(l)});
  });
  // The tail shrunk gives its layer to the stages beside it: a stage of
  // its own would stage one more boundary.
  tailMoves(s, out, /*grow=*/true, /*shrink=*/false);
  if (s.tail > 1 && !s.fwd.empty() && !s.bwd.empty()) {
    Sizes v = s;
    --v.tail;
    ++v.fwd.back();
    ++v.bwd.front();
    out.push_back(std::move(v));
  }
  return out;
}

/// Stage sizes as one list (a repair's partitions seen).
std::vector<unsigned> key(const Sizes &s) {
  std::vector<unsigned> k = s.fwd;
  k.push_back(0);
  k.push_back(s.tail);
  k.push_back(0);
  k.insert(k.end(), s.bwd.begin(), s.bwd.end());
  return k;
}

/// How unevenly the layers are spread over the stages and the tail (the
/// sum of their sizes' squares): among a repair's neighbours that peak
/// alike, the evener is taken, the stages' peaks growing with their
/// layers.
uint64_t spread(const Sizes &s) {
  uint64_t sum = uint64_t(s.tail) * s.tail;
  for (unsigned n : s.fwd)
    sum += uint64_t(n) * n;
  for (unsigned n : s.bwd)
    sum += uint64_t(n) * n;
  return sum;
}

/// The climb's neighbours: every boundary between two neighbouring
/// stages moved, every stage split in two, two merged, and the tail grown
/// or shrunk by a layer (PartitionClimb.cpp's moves).
std::vector<Sizes> climbMoves(const Sizes &s) {
  std::vector<Sizes> out = stagingMoves(s, /*layerGrain=*/false);
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
  tailMoves(s, out, /*grow=*/false, /*shrink=*/true);
  return out;
}

/// The steps a repair's walk (Hold::repairRound) takes without lowering
/// its fullest device before it gives up: a neighbour that peaks alike is
/// taken (the evener), so a walk whose fullest device no single shift
/// lowers wanders among equal peaks until its step limit, a layer count.
/// Llama-3.1-8B NF4 LoRA under --host-budget-gib 16: the repaired walks
/// stayed level at most 8 steps running, those given up 11 to 34 (their
/// 9,854 device peaks of the repair's 11,444). Qwen3-235B-A22B (94 layers,
/// about 75 stages) asks about 150 device peaks a step.
constexpr unsigned kRepairLevelSteps = 16;

/// Repaired merges taken at once (Hold::jump): at most one per this many
/// stages, so a partition of fewer stages (Llama-3.1-8B's, 20 or so) keeps
/// one a round, as before.
constexpr unsigned kStagesPerJoinedMerge = 12;

/// Rounds of the climb, and the memory plans made at once in it.
constexpr unsigned kClimbRounds = 64;
constexpr size_t kPlansAtOnce = 8;

/// The holds' costs (holdStats): atomics, as the passes of two modules
/// may hold at once.
std::atomic<unsigned> statHolds{0};
std::atomic<uint64_t> statPlans{0}, statTimed{0}, statMicros{0}, statReused{0},
    statRepairs{0}, statJoins{0}, statJoinedMerges{0};

/// Adds one hold, its memory plans, step-time estimates and seconds to
/// holdStats().
struct HoldClock {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  std::atomic<uint64_t> plans{0}, timed{0}, reused{0};
  uint64_t repairs = 0, joins = 0, joinedMerges = 0;
  ~HoldClock() {
    ++statHolds;
    statPlans += plans;
    statTimed += timed;
    statReused += reused;
    statRepairs += repairs;
    statJoins += joins;
    statJoinedMerges += joinedMerges;
    statMicros +=
        uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
};

struct Candidate {
  Partition p;
  DevicePeak peak;
  double ms = 0;
  bool usable = false;
};

/// The fastest move, the fewer staged bytes on ties, then the first in
/// move order: the same walk on any thread count.
bool before(const Candidate &a, const Candidate &b) {
  return a.ms < b.ms || (a.ms == b.ms && a.peak.hostBytes < b.peak.hostBytes);
}

const Candidate *fastest(const std::vector<Candidate> &tried) {
  const Candidate *best = nullptr;
  for (const Candidate &c : tried)
    if (c.usable && (!best || before(c, *best)))
      best = &c;
  return best;
}

/// The holds that took a slower partition near the fastest (slackHolds).
std::mutex slackMutex;
std::vector<SlackHold> slackTaken;

/// What one hold has asked already (Hold::peakOf, Hold::msOf), keyed by
/// the stage sizes (key()), from which Hold::make makes the partition:
/// within a hold the layers, the target, the cap and the grain are fixed,
/// so an equal key is the same partition. Its step time is answered as it
/// was; its memory plan's facts (PeakFacts: the bounds, the host pool's
/// and the devices' placed peaks) depend on none of the host limits the
/// hold asks under, which fall every round (the current partition's staged
/// bytes), so each limit is answered from them (peakUnder), exactly as
/// devicePeak answers it, and a partition is placed again only where a
/// higher limit needs a step its facts lack. A move over the devices in
/// one round is so in every later one without being lowered again. Keyed
/// with the limit, as before, the repair's walks of every round met
/// partitions earlier rounds had asked, and asked them again.
struct HoldMemo {
  std::mutex mutex;
  std::map<std::vector<unsigned>, PeakFacts> peaks;
  std::map<std::vector<unsigned>, double> ms;
};

/// One hold: the partition it starts from, how it makes a partition from
/// stage sizes (keeping the start's grain, tail jobs and cap), and its
/// costs.
struct Hold {
  const Partition &start;
  llvm::ArrayRef<LayerCost> layers;
  const SearchTarget &t;
  HoldClock &clock;
  int64_t cap;
  bool layerGrain;
  std::shared_ptr<HoldMemo> memo = std::make_shared<HoldMemo>();

  /// A hold of `p`'s stages at its own stage cap and grain (the budget's
  /// and the slack's holds start alike).
  static Hold of(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                 const SearchTarget &t, HoldClock &clock) {
    return Hold{p,
                layers,
                t,
                clock,
                p.stageBytes > 0 ? p.stageBytes : t.stageBytes,
                t.layerGrain || (p.layerGrain && p.stageLayerGrain.empty())};
  }

  /// devicePeak of make(s) under `hostLimit`, from what the hold has
  /// learnt of make(s) where that answers it (HoldMemo); clock.plans counts
  /// the placements made, clock.reused the answers read back.
  DevicePeak peakOf(const Sizes &s, int64_t hostLimit) {
    std::vector<unsigned> k = key(s);
    PeakFacts facts;
    {
      std::lock_guard<std::mutex> lock(memo->mutex);
      if (auto it = memo->peaks.find(k); it != memo->peaks.end()) {
        if (std::optional<DevicePeak> known =
                peakUnder(it->second, hostLimit, t.budget())) {
          ++clock.reused;
          return *known;
        }
        facts = it->second;
      }
    }
    DevicePeak peak = learnPeak(facts, make(s), layers, t, hostLimit);
    clock.plans += facts.placed.has_value();
    std::lock_guard<std::mutex> lock(memo->mutex);
    // Two threads may learn one partition at once: the facts that went
    // furthest are kept (both are the same partition's).
    auto depth = [](const PeakFacts &f) {
      return f.placed ? 3 : f.stagedHostBytes ? 2 : f.known ? 1 : 0;
    };
    PeakFacts &kept = memo->peaks[std::move(k)];
    if (depth(facts) >= depth(kept))
      kept = std::move(facts);
    return peak;
  }

  /// estimatedStepMs of make(s), each timed once per hold.
  double msOf(const Sizes &s) {
    std::vector<unsigned> k = key(s);
    {
      std::lock_guard<std::mutex> lock(memo->mutex);
      if (auto it = memo->ms.find(k); it != memo->ms.end()) {
        ++clock.reused;
        return it->second;
      }
    }
    ++clock.timed;
    double ms = estimatedStepMs(make(s), layers, t);
    std::lock_guard<std::mutex> lock(memo->mutex);
    memo->ms.emplace(std::move(k), ms);
    return ms;
  }

  Partition make(const Sizes &s) const {
    Partition q = partitionFromSizes(s.fwd, s.tail, s.bwd, layers.size());
    q.layerGrain = start.layerGrain;
    q.tailJobs = start.tailJobs;
    // The timing model's tail pair is a split of the tail it was cut for.
    q.tailPairAt = s.tail == start.tail.size() ? start.tailPairAt : 0;
    q.stageBytes = cap;
    return q;
  }

  /// The walk's moves from `cur`: those that fit the per-stage cap and the
  /// devices and stage fewer bytes than `curPeak`, each timed.
  std::vector<Candidate> stagingRound(const Partition &cur,
                                      const DevicePeak &curPeak) {
    std::vector<Sizes> moves = stagingMoves(toSizes(cur), layerGrain);
    // Each move's memory first, then the step time of those that fit and
    // stage fewer bytes. Not the other way round: a step-time estimate
    // costs more than a memory plan (Qwen3-235B NF4, 8 microbatches of 4,
    // stage grain: about 32 ms of CPU against 18 ms for the bounds and 10
    // more to place), and timing every move first, then placing the
    // fastest until one fits, made the same partitions with 2,096
    // estimates and 102 plans where this makes 691 and 1,195: 130 s of
    // CPU for the compile against 94.
    std::vector<Candidate> tried(moves.size());
    llvm::parallelFor(0, moves.size(), [&](size_t i) {
      Partition q = make(moves[i]);
      if (!fitsStageBytes(q, layers, cap))
        return;
      DevicePeak qp = peakOf(moves[i], curPeak.hostBytes - 1);
      if (!qp.fits || qp.hostBytes >= curPeak.hostBytes)
        return;
      double ms = msOf(moves[i]);
      tried[i] = {std::move(q), qp, ms, true};
    });
    return tried;
  }

  /// Where no move of stagingRound fits the devices: each move that
  /// stages fewer bytes than `curPeak` but is over the devices, moved
  /// toward them a layer at a time (shiftMoves: the neighbour whose
  /// fullest device peaks least, the first on ties) until it fits, then
  /// timed; given up where no neighbour peaks lower, or after
  /// kRepairLevelSteps steps without a lower peak. A merge doubles a
  /// stage, which the devices seldom hold where the fastest partition
  /// filled them; its layers spread over the other stages often fit:
  /// Llama-3.1-8B NF4 LoRA on 8 x RTX 4090 (fused loss) with the device
  /// arenas packed largest first, fwd:7,12,12;bwd:3,6,6,6,6,7, staging
  /// 10 GiB, merges only to backward stages of 12 layers (38 GiB a
  /// device), and --host-budget-gib 16 (9.6 GiB to stage) was refused;
  /// repaired, fwd:...;bwd:5,7,7,7,8 stages 8 GiB.
  std::vector<Candidate> repairRound(const Partition &cur,
                                     const DevicePeak &curPeak) {
    std::vector<Candidate> repaired;
    const int64_t limit = curPeak.hostBytes - 1;
    for (const Sizes &merge : stagingMoves(toSizes(cur), layerGrain)) {
      Partition q = make(merge);
      if (!fitsStageBytes(q, layers, cap))
        continue;
      DevicePeak qp = peakOf(merge, limit);
      if (qp.fits || qp.hostBytes >= curPeak.hostBytes)
        continue;
      Sizes s = merge;
      std::set<std::vector<unsigned>> seen{key(s)};
      unsigned level = 0;
      for (size_t step = 0;
           step < layers.size() && !qp.fits && level < kRepairLevelSteps;
           ++step) {
        std::vector<Sizes> next;
        for (Sizes &n : shiftMoves(s))
          if (!seen.count(key(n)))
            next.push_back(std::move(n));
        std::vector<DevicePeak> peaks(next.size());
        llvm::parallelFor(0, next.size(), [&](size_t i) {
          Partition n = make(next[i]);
          if (!fitsStageBytes(n, layers, cap)) {
            peaks[i].hostBytes = curPeak.hostBytes;
            return;
          }
          peaks[i] = peakOf(next[i], limit);
        });
        std::optional<size_t> best;
        for (size_t i = 0; i < next.size(); ++i)
          if (peaks[i].hostBytes < curPeak.hostBytes &&
              peaks[i].bytes <= qp.bytes &&
              (!best || peaks[i].bytes < peaks[*best].bytes ||
               (peaks[i].bytes == peaks[*best].bytes &&
                spread(next[i]) < spread(next[*best]))))
            best = i;
        if (!best)
          break;
        level = peaks[*best].bytes < qp.bytes ? 0 : level + 1;
        s = next[*best];
        qp = peaks[*best];
        seen.insert(key(s));
      }
      if (!qp.fits)
        continue;
      double ms = msOf(s);
      repaired.push_back({make(s), qp, ms, true});
    }
    return repaired;
  }

  /// Where no repaired merge of `repaired` (repairRound's, from `cur`)
  /// meets `hostCap` staged bytes: the fastest that keeps the tail joined
  /// by the next fastest that change other stages (ListChange::apart),
  /// each kept where the partition joined so far with it fits the devices
  /// and stages fewer bytes, until `hostCap` is met or one merge per
  /// kStagesPerJoinedMerge stages is taken; none where fewer than two
  /// are. Not exact: each round's repair walks every merge again (up to a
  /// stage count of walks, a stage count of neighbours a step), and a
  /// hold that takes one repaired merge a round makes as many rounds as
  /// merges it needs, so its cost grows as the cube of the stage count
  /// (Qwen3-235B-A22B, about 75 stages: over 15 CPU minutes unfinished).
  /// Joined, the merges are those the single rounds would not all have
  /// taken (the next round's fastest is of the partition the first made).
  std::optional<Candidate> jump(const Partition &cur,
                                const std::vector<Candidate> &repaired,
                                int64_t hostCap) {
    Sizes from = toSizes(cur);
    const unsigned most =
        unsigned(from.fwd.size() + from.bwd.size()) / kStagesPerJoinedMerge;
    if (most < 2)
      return std::nullopt;
    std::vector<size_t> order;
    for (size_t i = 0; i < repaired.size(); ++i)
      if (repaired[i].usable)
        order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return before(repaired[a], repaired[b]);
    });
    if (order.empty() || repaired[order[0]].peak.hostBytes <= hostCap)
      return std::nullopt;
    const std::set<unsigned> curFwd = boundariesOf(from.fwd),
                             curBwd = boundariesOf(from.bwd);
    const unsigned fwdLayers = layers.size() - from.tail;
    struct Taken {
      ListChange fwd, bwd;
    };
    std::vector<Taken> taken;
    Sizes joined;
    DevicePeak joinedPeak;
    for (size_t i : order) {
      if (taken.size() == most ||
          (!taken.empty() && joinedPeak.hostBytes <= hostCap))
        break;
      // A tail moved changes both lists' ends: only merges that keep it
      // are joined (the first of them may be slower than the fastest).
      Sizes s = toSizes(repaired[i].p);
      if (s.tail != from.tail)
        continue;
      Taken change{ListChange(curFwd, boundariesOf(s.fwd)),
                   ListChange(curBwd, boundariesOf(s.bwd))};
      if (taken.empty()) {
        taken.push_back(std::move(change));
        joined = std::move(s);
        joinedPeak = repaired[i].peak;
        continue;
      }
      if (!std::all_of(taken.begin(), taken.end(), [&](const Taken &o) {
            return change.fwd.apart(o.fwd, curFwd) &&
                   change.bwd.apart(o.bwd, curBwd);
          }))
        continue;
      auto join = [&](const std::vector<unsigned> &list, const ListChange &c) {
        std::set<unsigned> b = boundariesOf(list);
        for (unsigned d : c.dropped)
          b.erase(d);
        b.insert(c.added.begin(), c.added.end());
        return listOf(b, fwdLayers);
      };
      Sizes next{join(joined.fwd, change.fwd), from.tail,
                 join(joined.bwd, change.bwd)};
      if (!fitsStageBytes(make(next), layers, cap))
        continue;
      DevicePeak peak = peakOf(next, joinedPeak.hostBytes - 1);
      if (!peak.fits || peak.hostBytes >= joinedPeak.hostBytes)
        continue;
      taken.push_back(std::move(change));
      joined = std::move(next);
      joinedPeak = peak;
    }
    if (taken.size() < 2)
      return std::nullopt;
    ++clock.joins;
    clock.joinedMerges += taken.size();
    double ms = msOf(joined);
    return Candidate{make(joined), joinedPeak, ms, true};
  }

  /// From `cur` (`curMs`), the climb under both budgets, the host's being
  /// `hostCap` staged bytes: merges keep every boundary they do not touch,
  /// and a boundary moved is often faster at the same staged bytes. Each
  /// round takes the fastest faster neighbour that fits; memory is planned
  /// only for the faster ones, fastest first.
  Partition climb(Partition cur, double &curMs, int64_t hostCap) {
    for (unsigned round = 0; round < kClimbRounds; ++round) {
      std::vector<Sizes> moves = climbMoves(toSizes(cur));
      std::vector<double> ms(moves.size(), 0);
      std::vector<char> timed(moves.size(), 0);
      llvm::parallelFor(0, moves.size(), [&](size_t i) {
        if (fitsStageBytes(make(moves[i]), layers, cap)) {
          ms[i] = msOf(moves[i]);
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
          DevicePeak qp = peakOf(moves[faster[k]], hostCap);
          fits[k - at] = qp.fits && qp.hostBytes <= hostCap;
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
    return cur;
  }
};

/// No host budget, a slack (SearchTarget::hostSlack): the same walk from
/// the fastest partition `p`, each move the fastest that stages fewer
/// bytes, while its step stays within the slack (a device count of moves
/// past it, the step not being monotone in the merges). Then the
/// least staged level at which a partition the walk tried is within the
/// slack and stages at least hostSlackBytes less than `p`: the fastest
/// partition tried within that level, climbed under it (as under a
/// budget: the climb takes back part of what the merges cost). `p` itself
/// where no level is.
/// One climb, from a start already within the slack, so a few rounds: a
/// bisection over every level the walk reached, a climb each, found no
/// lower level for its cost. The climbed step is not monotone in the
/// level: Llama-3.1-8B NF4 LoRA (unfused), 8 x RTX 4090: climbed at 16 GiB
/// from the walk's 15,706.6 ms it stops at 15,638.0, over the 5 % bound of
/// 14,462.6, at 14 GiB from 20,524.1 it reaches 14,105.8, so the bisection
/// stopped at 18 GiB (14,149.7) as this does; Qwen3-32B bf16's climbs from
/// starts far over the bound took 2,378 and 3,168 step-time estimates
/// each, and the compile 456 s of CPU against 51.
Partition holdNearFastest(const Partition &p, llvm::ArrayRef<LayerCost> layers,
                          const SearchTarget &t) {
  DevicePeak peak = devicePeak(p, layers, t);
  if (!peak.fits || peak.hostBytes < t.hostSlackBytes)
    return p;
  HoldClock clock;
  Hold hold = Hold::of(p, layers, t, clock);
  ++clock.timed;
  const double fastestMs = estimatedStepMs(p, layers, t);
  const double bound = fastestMs * (1 + t.hostSlack);
  const int64_t most = peak.hostBytes - t.hostSlackBytes;
  Partition cur = p;
  DevicePeak curPeak = peak;
  // The least staged level within the slack, and the fastest partition
  // tried within it.
  std::optional<Candidate> from;
  unsigned pastBound = 0;
  while (pastBound <= t.devices) {
    std::vector<Candidate> tried = hold.stagingRound(cur, curPeak);
    const Candidate *best = fastest(tried);
    if (!best)
      break;
    pastBound = best->ms <= bound ? 0 : pastBound + 1;
    cur = best->p;
    curPeak = best->peak;
    for (Candidate &c : tried)
      if (c.usable && c.peak.hostBytes <= most && c.ms <= bound &&
          (!from || c.peak.hostBytes < from->peak.hostBytes ||
           (c.peak.hostBytes == from->peak.hostBytes && before(c, *from))))
        from = std::move(c);
  }
  if (!from)
    return p;
  // Those tried that stage less are over the slack: `from` is the
  // fastest within its level.
  const int64_t level = from->peak.hostBytes;
  double heldMs = from->ms;
  Partition held = hold.climb(std::move(from->p), heldMs, level);
  scorePartition(held, layers, t.devices);
  Sizes s = toSizes(held);
  std::lock_guard<std::mutex> lock(slackMutex);
  slackTaken.push_back({s.fwd, s.bwd, s.tail, heldMs, fastestMs,
                        devicePeak(held, layers, t).hostBytes, peak.hostBytes});
  return held;
}

} // namespace

Partition mlir::rp::holdToHostBudget(const Partition &p,
                                     llvm::ArrayRef<LayerCost> layers,
                                     const SearchTarget &t) {
  if (layers.empty())
    return p;
  if (t.hostStagedBytes <= 0)
    return t.hostSlack > 0 ? holdNearFastest(p, layers, t) : p;
  DevicePeak peak = devicePeak(p, layers, t);
  if (peak.hostBytes <= t.hostStagedBytes || !peak.fits)
    return p;
  HoldClock clock;
  Hold hold = Hold::of(p, layers, t, clock);
  Partition cur = p;
  DevicePeak curPeak = peak;
  // The step time is not monotone in the merges (a stage count that
  // divides evenly over the devices can be faster than one more stage), so
  // the walk goes on for a device count of moves past the first partition
  // that fits, and the fastest that fits of every one tried is kept.
  std::optional<Candidate> fastestFit;
  unsigned pastFit = 0;
  while (!fastestFit || pastFit++ < t.devices) {
    std::vector<Candidate> tried = hold.stagingRound(cur, curPeak);
    bool joined = false;
    if (!fastestFit && !fastest(tried)) {
      tried = hold.repairRound(cur, curPeak);
      ++clock.repairs;
      if (std::optional<Candidate> j =
              hold.jump(cur, tried, t.hostStagedBytes)) {
        tried.push_back(std::move(*j));
        joined = true;
      }
    }
    for (const Candidate &c : tried)
      if (c.usable && c.peak.hostBytes <= t.hostStagedBytes &&
          (!fastestFit || before(c, *fastestFit)))
        fastestFit = c;
    const Candidate *best = joined ? &tried.back() : fastest(tried);
    if (!best)
      break;
    cur = best->p;
    curPeak = best->peak;
  }
  if (!fastestFit) {
    scorePartition(cur, layers, t.devices);
    return cur;
  }
  double ms = fastestFit->ms;
  cur = hold.climb(fastestFit->p, ms, t.hostStagedBytes);
  scorePartition(cur, layers, t.devices);
  return cur;
}

std::vector<SlackHold> mlir::rp::slackHolds() {
  std::lock_guard<std::mutex> lock(slackMutex);
  return slackTaken;
}

HoldStats mlir::rp::holdStats() {
  return {statHolds,  statPlans,   statTimed, double(statMicros) * 1e-6,
          statReused, statRepairs, statJoins, statJoinedMerges};
}
