//===- PartitionHostRepair.cpp - merges over the devices repaired ---------===//
//
// The host hold's rounds where no merge of the walk fits the devices
// (PartitionHostBudget.cpp's holdToHostBudget): each merge that stages
// fewer bytes is moved toward the devices a layer at a time
// (Hold::repairRound), and on partitions of many stages, where the
// fastest repaired merge misses the budget, repaired merges that change
// different stages are joined into one move (Hold::jump).
//
//===----------------------------------------------------------------------===//

#include "PartitionHold.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::moves;
using namespace mlir::rp::hold;

namespace {

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

} // namespace

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
std::vector<Candidate> Hold::repairRound(const Partition &cur,
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
std::optional<Candidate> Hold::jump(const Partition &cur,
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
