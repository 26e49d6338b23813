//===- StaticPartition.cpp - the static schedules' stages, by their step
//---===//
//
// staticPartition's linear partition bounds the slowest stage, and on a
// model of equal layers most cuts tie on it: with 30 layers in 24 stages
// any six two-layer stages do. Which ones they are decides how evenly the
// stages fall on the devices (stage s on device s mod G), and so the step:
// Qwen3-1.7B's Looped-BFS on RoundPipe's inputs takes 2,336 ms with the
// doubled stages last and 3,272 ms with them where the cut's rounding put
// them (issue 32). So the ties are broken by the schedule's own predicted
// step: a few cuts within the tie of the least bottleneck, then moves of
// one layer from a stage to another while a move shortens the step.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/Pipeline.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::rp;

namespace {

/// The stages' layer counts (the last one the tail) of one cut.
using Sizes = std::vector<unsigned>;

/// Sums of stage times within this share of each other are equal.
constexpr double kSame = 1e-9;

struct Cutter {
  llvm::ArrayRef<LayerCost> layers;
  unsigned stages;
  std::vector<double> prefix;

  Cutter(llvm::ArrayRef<LayerCost> layers, unsigned stages)
      : layers(layers), stages(stages), prefix(layers.size() + 1, 0) {
    for (unsigned l = 0; l < layers.size(); ++l)
      prefix[l + 1] = prefix[l] + layers[l].backwardJobMs();
  }

  double ms(unsigned begin, unsigned end) const {
    return prefix[end] - prefix[begin];
  }

  double bottleneck(const Sizes &sizes) const {
    double worst = 0;
    unsigned at = 0;
    for (unsigned n : sizes) {
      worst = std::max(worst, ms(at, at + n));
      at += n;
    }
    return worst;
  }

  /// The cut whose stages are all at most `cap` with the least
  /// `combine(cost of the stages before, stage time)` over its stages; on
  /// ties (costs within `same` of each other's share) the latest cut when
  /// `latest`, else the earliest (the later stages the longer). Empty where
  /// none is. staticPartition's bound is the combine max with `same` 0
  /// (exact ties); the tie search's sums take kSame.
  template <typename Combine>
  Sizes cheapest(double cap, bool latest, double same, Combine combine) const {
    unsigned n = layers.size();
    constexpr double inf = 1e300;
    std::vector<std::vector<double>> best(stages + 1,
                                          std::vector<double>(n + 1, inf));
    std::vector<std::vector<unsigned>> cut(stages + 1,
                                           std::vector<unsigned>(n + 1, 0));
    best[0][0] = 0;
    for (unsigned k = 1; k <= stages; ++k)
      for (unsigned i = k; i <= n; ++i)
        for (unsigned j = k - 1; j < i; ++j) {
          double t = ms(j, i);
          if (best[k - 1][j] >= inf || t > cap)
            continue;
          // Equal layers' stage times differ in the prefix sums' last
          // digits: within `same` they are equal, so that the rule, not
          // the rounding, picks among them.
          double c = combine(best[k - 1][j], t);
          bool tie = best[k][i] < inf &&
                     std::abs(c - best[k][i]) <= same * std::abs(best[k][i]);
          if ((!tie && c < best[k][i]) || (tie && latest)) {
            best[k][i] = c;
            cut[k][i] = j;
          }
        }
    if (best[stages][n] >= inf)
      return {};
    Sizes sizes(stages);
    for (unsigned k = stages, i = n; k > 0; i = cut[k][i], --k)
      sizes[k - 1] = i - cut[k][i];
    return sizes;
  }
};

Partition fromSizes(const Sizes &sizes, llvm::ArrayRef<LayerCost> layers) {
  std::vector<unsigned> fwd(sizes.begin(), sizes.end() - 1);
  std::vector<unsigned> bwd(fwd.rbegin(), fwd.rend());
  Partition p = partitionFromSizes(fwd, sizes.back(), bwd, layers.size());
  scorePartition(p, layers, sizes.size());
  return p;
}

/// The step of the lowered `pl` as rp-compile plans it (staticStepMs).
std::optional<double> loweredStepMs(Pipeline pl,
                                    llvm::ArrayRef<LayerCost> layers,
                                    const HardwareProfile &hw) {
  // As rp-compile plans it: the optimizer runs on the host, so every step
  // uploads the weights (PlanPrediction.h's predictPlan, without the
  // memory plan the choice does not need).
  pl.residentWeights = false;
  insertTransfers(pl, layers, hw);
  std::optional<Schedule> issued = inIssueOrder(pl.schedule);
  if (!issued)
    return std::nullopt;
  pl.schedule = std::move(*issued);
  std::optional<Timing> t =
      estimateTiming(recomputeSplit(pl.schedule, pl, layers));
  if (!t)
    return std::nullopt;
  return t->iterationMs;
}

/// The compute of the busiest device of `schedule`: a bound under its
/// step, since a device's compute queue runs one command at a time and
/// neither the copies insertTransfers adds nor recomputeSplit's halves
/// (which sum to the command they split) change a device's compute.
double busiestComputeMs(const Schedule &schedule) {
  std::vector<double> busy(schedule.devices, 0);
  for (const Command &c : schedule.commands)
    if (isCompute(c.kind) && c.device < busy.size())
      busy[c.device] += c.ms;
  return busy.empty() ? 0 : *llvm::max_element(busy);
}

} // namespace

Partition mlir::rp::staticPartition(llvm::ArrayRef<LayerCost> layers,
                                    unsigned stages) {
  stages = std::max(1u, std::min<unsigned>(stages, layers.size()));
  // The least bottleneck, the earliest cut among exact ties.
  Sizes sizes = Cutter(layers, stages)
                    .cheapest(1e300, false, 0, [](double before, double t) {
                      return std::max(before, t);
                    });
  return fromSizes(sizes, layers);
}

std::optional<double> mlir::rp::staticStepMs(const Partition &partition,
                                             llvm::ArrayRef<LayerCost> layers,
                                             ScheduleKind kind,
                                             unsigned devices,
                                             unsigned microbatches,
                                             const HardwareProfile &hw) {
  std::string error;
  FailureOr<Pipeline> pl =
      lowerSchedule(partition, layers, kind, devices, microbatches, error);
  if (failed(pl))
    return std::nullopt;
  return loweredStepMs(std::move(*pl), layers, hw);
}

Partition mlir::rp::staticPartitionForStep(llvm::ArrayRef<LayerCost> layers,
                                           ScheduleKind kind, unsigned devices,
                                           unsigned microbatches,
                                           const HardwareProfile &hw) {
  unsigned stages = std::max(
      1u, std::min<unsigned>(staticStageCount(kind, devices, layers.size()),
                             layers.size()));
  Partition least = staticPartition(layers, stages);
  if (stages < 2 || stages == layers.size())
    return least; // one cut only
  Cutter cutter(layers, stages);
  Sizes first;
  for (const StageRange &s : least.forward)
    first.push_back(s.size());
  first.push_back(least.tail.size());
  double cap = cutter.bottleneck(first) * (1 + kStaticTie);
  // The starts: the least bottleneck's own cut, the same bound cut
  // latest-first, and the evenest stages under the tie (least sum of
  // squared stage times), each timed; the fastest is climbed from.
  std::vector<Sizes> starts{first};
  auto count = [](double before, double) { return before; };
  auto squares = [](double before, double t) { return before + t * t; };
  for (Sizes s : {cutter.cheapest(cap, true, kSame, count),
                  cutter.cheapest(cap, false, kSame, squares),
                  cutter.cheapest(cap, true, kSame, squares)})
    if (!s.empty() && llvm::find(starts, s) == starts.end())
      starts.push_back(std::move(s));
  // Each cut is timed once: a climb's round retries the moves of the one
  // before, and a move back is a cut already timed. A cut whose busiest
  // device computes longer than `bar` cannot beat it, and is not timed
  // (Qwen3-32B's Looped-BFS on RoundPipe's times: 26 of 198 cuts, those
  // that load a device already near the step with another layer).
  std::map<Sizes, double> timed;
  auto stepOf = [&](const Sizes &s, double bar) {
    auto [at, added] = timed.try_emplace(s, 1e300);
    if (!added)
      return at->second;
    std::string error;
    FailureOr<Pipeline> pl = lowerSchedule(fromSizes(s, layers), layers, kind,
                                           devices, microbatches, error);
    if (failed(pl))
      return at->second;
    if (busiestComputeMs(pl->schedule) >= bar) {
      timed.erase(at); // not timed: a lower bar may time it later
      return 1e300;
    }
    std::optional<double> ms = loweredStepMs(std::move(*pl), layers, hw);
    return at->second = ms ? *ms : 1e300;
  };
  Sizes best = first;
  double bestMs = stepOf(first, 1e300);
  if (bestMs >= 1e300)
    return least; // the schedule cannot run these stages: its error says so
  auto bar = [&] { return bestMs * (1 - kStaticStepTie); };
  for (size_t i = 1; i < starts.size(); ++i)
    if (double ms = stepOf(starts[i], bar()); ms < bar()) {
      best = starts[i];
      bestMs = ms;
    }
  // Move one layer from a stage to another (the cuts between them shift
  // by one), within the tie, while that shortens the step: where the
  // longer stages fall decides the devices' loads, and a move to the next
  // stage alone can leave every neighbouring placement at one step (1.7B:
  // the doubled stages first or in the middle, 2,804 ms; last, 2,336 ms).
  // Stages in order, so the result is the same on every run.
  for (bool moved = true; moved;) {
    moved = false;
    for (unsigned from = 0; from < stages; ++from)
      for (unsigned to = 0; to < stages; ++to) {
        if (from == to || best[from] < 2)
          continue;
        Sizes s = best;
        --s[from];
        ++s[to];
        if (cutter.bottleneck(s) > cap)
          continue;
        if (double ms = stepOf(s, bar()); ms < bar()) {
          best = std::move(s);
          bestMs = ms;
          moved = true;
        }
      }
  }
  return fromSizes(best, layers);
}
