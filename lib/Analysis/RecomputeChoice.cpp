//===- RecomputeChoice.cpp - the recompute grain of each backward stage ---===//

#include "rp/Analysis/RecomputeChoice.h"

#include "rp/Analysis/ScheduleTiming.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::rp;

FailureOr<MemoryPlan> mlir::rp::planGrains(const Partition &partition,
                                           llvm::ArrayRef<LayerCost> layers,
                                           const GrainTarget &target,
                                           Pipeline *pipeline,
                                           std::string &error) {
  FailureOr<Pipeline> pl =
      lowerSchedule(partition, layers, target.kind, target.devices,
                    target.microbatches, error);
  if (failed(pl))
    return failure();
  // Weights are uploaded every step (the optimizer runs on the host).
  pl->residentWeights = false;
  insertTransfers(*pl, layers, target.hw);
  // The order rp-insert-transfers lists commands in, which buffer reuse
  // follows.
  if (std::optional<Schedule> issued = inIssueOrder(pl->schedule))
    pl->schedule = std::move(*issued);
  MemoryPlan mp = planMemory(*pl, layers);
  if (pipeline)
    *pipeline = std::move(*pl);
  return mp;
}

FailureOr<GrainChoice>
mlir::rp::chooseRecomputeGrains(const Partition &partition,
                                llvm::ArrayRef<LayerCost> layers,
                                const GrainTarget &target, std::string &error,
                                std::pair<Pipeline, MemoryPlan> *planned,
                                std::pair<Pipeline, MemoryPlan> *start) {
  Partition p = partition;
  p.layerGrain = false;
  p.stageLayerGrain.assign(p.backward.size(), false);
  auto over = [&](const MemoryPlan &mp) {
    int64_t sum = 0;
    for (int64_t peak : mp.peakBytes)
      sum += std::max<int64_t>(0, peak - target.budget);
    return sum;
  };
  Pipeline pl;
  FailureOr<MemoryPlan> mp = failure();
  if (start) {
    pl = std::move(start->first);
    mp = std::move(start->second);
  } else {
    mp = planGrains(p, layers, target, &pl, error);
    if (failed(mp))
      return failure();
  }
  std::vector<bool> tried(p.backward.size(), false);
  while (over(*mp) > 0) {
    // The candidates: stage-grain backward stages of several layers whose
    // job runs on a device over budget, by the working memory layer grain
    // saves.
    int best = -1;
    int64_t bestSaving = 0;
    for (const StageJob &j : pl.jobs) {
      if (j.kind != CommandKind::backward || j.keepsForward ||
          j.range.size() < 2 || mp->peakBytes[j.device] <= target.budget)
        continue;
      for (auto [b, s] : llvm::enumerate(p.backward)) {
        if (!(s == j.range) || tried[b] || p.stageLayerGrain[b])
          continue;
        int64_t saving = jobWorkBytes(CommandKind::backward, s, layers, false) -
                         jobWorkBytes(CommandKind::backward, s, layers, true);
        if (saving > bestSaving) {
          bestSaving = saving;
          best = int(b);
        }
      }
    }
    if (best < 0)
      break;
    tried[best] = true;
    p.stageLayerGrain[best] = true;
    Pipeline next;
    FailureOr<MemoryPlan> trial = planGrains(p, layers, target, &next, error);
    if (failed(trial))
      return failure();
    if (over(*trial) < over(*mp)) {
      mp = std::move(trial);
      pl = std::move(next);
    } else {
      p.stageLayerGrain[best] = false;
    }
  }
  // One stage at a time can stall where the stages are coupled (a switch
  // that relieves its device pushes another over with the saved inputs it
  // sends down): then start from layer grain in every stage of several
  // layers and give stage grain back, least saving first, where the plan
  // still fits.
  // Where every stage of several layers is at layer grain already (or
  // none has several: a partition of one-layer backward stages), that
  // start is the plan in hand: planning it again could not lower the
  // bytes over.
  Partition all = p;
  std::vector<std::pair<int64_t, unsigned>> order;
  for (auto [b, s] : llvm::enumerate(all.backward)) {
    all.stageLayerGrain[b] = s.size() > 1;
    if (s.size() > 1)
      order.emplace_back(
          jobWorkBytes(CommandKind::backward, s, layers, false) -
              jobWorkBytes(CommandKind::backward, s, layers, true),
          unsigned(b));
  }
  if (over(*mp) > 0 && all.stageLayerGrain != p.stageLayerGrain) {
    Pipeline allPl;
    FailureOr<MemoryPlan> allPlan =
        planGrains(all, layers, target, &allPl, error);
    if (failed(allPlan))
      return failure();
    if (over(*allPlan) < over(*mp)) {
      p = all;
      mp = std::move(allPlan);
      pl = std::move(allPl);
      std::sort(order.begin(), order.end());
      for (auto [saving, b] : order) {
        if (over(*mp) > 0)
          break;
        p.stageLayerGrain[b] = false;
        Pipeline next;
        FailureOr<MemoryPlan> trial =
            planGrains(p, layers, target, &next, error);
        if (failed(trial))
          return failure();
        if (over(*trial) == 0) {
          mp = std::move(trial);
          pl = std::move(next);
        } else {
          p.stageLayerGrain[b] = true;
        }
      }
    }
  }
  GrainChoice choice;
  choice.layerGrain = p.stageLayerGrain;
  choice.peakBytes = mp->peakBytes;
  choice.fits = over(*mp) == 0;
  if (planned)
    *planned = {std::move(pl), std::move(*mp)};
  return choice;
}
