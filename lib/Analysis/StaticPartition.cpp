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

  /// The cut with the least sum of `cost(stage time)` whose stages are all
  /// at most `cap`; the latest cut on ties when `latest`, else the
  /// earliest (the later stages the longer). Empty where none is.
  template <typename Cost>
  Sizes cheapest(double cap, bool latest, Cost cost) const {
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
          // digits: within kSame they are equal, so that the rule, not
          // the rounding, picks among them.
          double c = best[k - 1][j] + cost(t);
          bool same = best[k][i] < inf &&
                      std::abs(c - best[k][i]) <= kSame * std::abs(best[k][i]);
          if ((!same && c < best[k][i]) || (same && latest)) {
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

} // namespace

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
  // As rp-compile plans it: the optimizer runs on the host, so every step
  // uploads the weights (PlanPrediction.h's predictPlan, without the
  // memory plan the choice does not need).
  pl->residentWeights = false;
  insertTransfers(*pl, layers, hw);
  std::optional<Schedule> issued = inIssueOrder(pl->schedule);
  if (!issued)
    return std::nullopt;
  pl->schedule = std::move(*issued);
  std::optional<Timing> t =
      estimateTiming(recomputeSplit(pl->schedule, *pl, layers));
  if (!t)
    return std::nullopt;
  return t->iterationMs;
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
  auto none = [](double) { return 0.0; };
  auto square = [](double t) { return t * t; };
  for (Sizes s :
       {cutter.cheapest(cap, true, none), cutter.cheapest(cap, false, square),
        cutter.cheapest(cap, true, square)})
    if (!s.empty() && llvm::find(starts, s) == starts.end())
      starts.push_back(std::move(s));
  auto stepOf = [&](const Sizes &s) {
    std::optional<double> ms = staticStepMs(fromSizes(s, layers), layers, kind,
                                            devices, microbatches, hw);
    return ms ? *ms : 1e300;
  };
  Sizes best = first;
  double bestMs = stepOf(first);
  if (bestMs >= 1e300)
    return least; // the schedule cannot run these stages: its error says so
  for (size_t i = 1; i < starts.size(); ++i)
    if (double ms = stepOf(starts[i]); ms < bestMs * (1 - kStaticStepTie)) {
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
        if (double ms = stepOf(s); ms < bestMs * (1 - kStaticStepTie)) {
          best = std::move(s);
          bestMs = ms;
          moved = true;
        }
      }
  }
  return fromSizes(best, layers);
}
