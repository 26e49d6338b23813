//===- PartitionSearchTest.cpp - rp's partitioner vs exhaustive search ----===//

#include "rp/Analysis/PartitionSearch.h"
#include "rp/Analysis/PartitionMemory.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

using namespace mlir::rp;

namespace {

/// Layers with varied times and sizes, a heavier head last; fixed seed.
std::vector<LayerCost> model(unsigned n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  std::vector<LayerCost> layers(n);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = time(rng);
    c.backwardMs = 2 * c.forwardMs * time(rng);
    c.paramBytes = c.gradBytes = int64_t(1e9 * time(rng));
  }
  layers.back().forwardMs = layers.back().recomputeMs = 3;
  layers.back().backwardMs = 6;
  return layers;
}

HardwareProfile pcie() {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 25;
  return hw;
}

TEST(PartitionSearchTest, MatchesExhaustiveSearchOnSmallModels) {
  HardwareProfile hw = pcie();
  double worstGap = 0;
  for (unsigned n = 2; n <= 8; ++n)
    for (unsigned devices : {2u, 4u})
      for (unsigned seed = 0; seed < 3; ++seed) {
        std::vector<LayerCost> layers = model(n, seed);
        SearchTarget target{hw, devices, devices + 1, int64_t(4e9)};
        Partition ours = partitionForStepTime(layers, target);
        Partition best = partitionExhaustive(layers, target);
        Partition roundpipe =
            partitionRoundPipe(layers, target.stageBytes, devices);
        double oursMs = estimatedStepMs(ours, layers, target);
        double bestMs = estimatedStepMs(best, layers, target);
        double rpMs = estimatedStepMs(roundpipe, layers, target);
        EXPECT_TRUE(fitsStageBytes(ours, layers, target.stageBytes));
        EXPECT_LE(bestMs, oursMs + 1e-9);
        EXPECT_LE(oursMs, rpMs + 1e-9) << n << " layers, " << devices;
        worstGap = std::max(worstGap, oursMs / bestMs - 1);
      }
  // Local search is not exhaustive: on these transfer-bound models (1-2 GB
  // per layer over 25 GB/s) one climb from the best start stopped up to
  // 9.2% short of the optimum (two n = 5, G = 4 cases whose optimum is
  // three moves away). Climbing again from the next best starts finds the
  // optimum on every case here (and on 8 seeds instead of 3); the bound
  // leaves room for a near miss, not for a lost restart.
  EXPECT_LT(worstGap, 0.01);
  RecordProperty("worst_gap_pct", std::to_string(100 * worstGap));
  std::printf("worst gap to exhaustive: %.3f%%\n", 100 * worstGap);
}

TEST(PartitionSearchTest, RespectsTheStageCap) {
  HardwareProfile hw = pcie();
  std::vector<LayerCost> layers = model(8, 7);
  // A cap of about two layers' weights and gradients.
  SearchTarget target{hw, 4, 5, int64_t(4.2e9)};
  Partition p = partitionForStepTime(layers, target);
  EXPECT_TRUE(fitsStageBytes(p, layers, target.stageBytes));
  Partition e = partitionExhaustive(layers, target);
  EXPECT_TRUE(fitsStageBytes(e, layers, target.stageBytes));
}

/// A later search of the same problem (another grain, another tail's
/// costs) starts from the earlier's best instead of sweeping again: it
/// times fewer candidates, finds a partition no slower than RoundPipe's,
/// and gives the same answer each time: the full search (40 layers: local
/// search only) is deterministic, with the memo or without it.
TEST(PartitionSearchTest, LaterSearchesStartFromTheMemo) {
  HardwareProfile hw = pcie();
  std::vector<LayerCost> layers = model(40, 3);
  SearchMemo memo;
  memo.startFromEarlier = true;
  SearchTarget target{hw, 8, 9, int64_t(20e9)};
  target.memo = &memo;
  uint64_t before = searchStats().candidates;
  Partition first = partitionForStepTime(layers, target);
  uint64_t full = searchStats().candidates - before;
  ASSERT_EQ(memo.found.size(), 1u);
  // The same problem with a heavier head, as rp-choose-loss-fusion's
  // unfused graph.
  std::vector<LayerCost> heavier = layers;
  heavier.back().forwardMs *= 1.5;
  heavier.back().backwardMs *= 1.5;
  before = searchStats().candidates;
  Partition later = partitionForStepTime(heavier, target);
  uint64_t climbed = searchStats().candidates - before;
  EXPECT_LT(climbed, full) << full << " candidates, then " << climbed;
  EXPECT_EQ(memo.found.size(), 2u);
  Partition roundpipe = partitionRoundPipe(heavier, target.stageBytes, 8);
  EXPECT_LE(estimatedStepMs(later, heavier, target),
            estimatedStepMs(roundpipe, heavier, target) + 1e-9);
  // Without the memo the search is the full one, as before.
  SearchTarget alone{hw, 8, 9, int64_t(20e9)};
  Partition again = partitionForStepTime(layers, alone);
  EXPECT_EQ(again.forward, first.forward);
  EXPECT_EQ(again.backward, first.backward);
  EXPECT_EQ(again.tail, first.tail);
  EXPECT_EQ(again.tailJobs, first.tailJobs);
}

/// A search asked again with the same costs and target (rp-print-partition
/// after rp-partition) is answered from the memo without timing a
/// candidate; any change to the costs searches again.
TEST(PartitionSearchTest, SameSearchIsReused) {
  HardwareProfile hw = pcie();
  // 20 layers: past kFullSearchLayers (local search, as at 40), at a
  // fraction of the 40-layer search's time; the memo reads the costs,
  // whatever their number.
  std::vector<LayerCost> layers = model(20, 3);
  SearchMemo memo;
  SearchTarget target{hw, 8, 9, int64_t(20e9)};
  target.memo = &memo;
  Partition first = partitionForStepTime(layers, target);
  SearchStats before = searchStats();
  Partition again = partitionForStepTime(layers, target);
  SearchStats after = searchStats();
  EXPECT_EQ(after.candidates, before.candidates);
  EXPECT_EQ(after.searches, before.searches);
  EXPECT_EQ(after.reused, before.reused + 1);
  EXPECT_EQ(again.forward, first.forward);
  EXPECT_EQ(again.backward, first.backward);
  EXPECT_EQ(again.tail, first.tail);
  EXPECT_EQ(again.tailJobs, first.tailJobs);
  // Exact: the memo's answer is the search's, bit for bit (and a search
  // with a memo answers as one without: LaterSearchesStartFromTheMemo).
  // Another cost, another search.
  std::vector<LayerCost> heavier = layers;
  heavier.back().backwardMs *= 1.5;
  (void)partitionForStepTime(heavier, target);
  EXPECT_GT(searchStats().searches, after.searches);
  EXPECT_EQ(memo.results.size(), 2u);
  EXPECT_EQ(searchStats().reused, before.reused + 1);
}

/// The candidate budget stops a search deterministically, its best kept.
TEST(PartitionSearchTest, StopsAtTheCandidateBudget) {
  HardwareProfile hw = pcie();
  std::vector<LayerCost> layers = model(40, 3);
  SearchTarget target{hw, 8, 9, int64_t(20e9)};
  target.candidateBudget = 50;
  unsigned stops = searchStats().budgetStops;
  uint64_t before = searchStats().candidates;
  Partition a = partitionForStepTime(layers, target);
  EXPECT_LE(searchStats().candidates - before, 50u + 2);
  EXPECT_EQ(searchStats().budgetStops, stops + 1);
  Partition b = partitionForStepTime(layers, target);
  EXPECT_EQ(a.forward, b.forward);
  EXPECT_EQ(a.backward, b.backward);
  EXPECT_TRUE(fitsStageBytes(a, layers, target.stageBytes));
  Partition roundpipe = partitionRoundPipe(layers, target.stageBytes, 8);
  EXPECT_LE(estimatedStepMs(a, layers, target),
            estimatedStepMs(roundpipe, layers, target) + 1e-9);
}

/// The timing core keeps its working arrays per thread between candidates
/// (flat copies of each task's lane, duration and waits): a candidate timed
/// after others, larger or smaller, in any order or on a fresh thread, has
/// the same step time bit for bit. Copies share host DRAM with the
/// optimizer (fair shares) and each layer has its own gate.
TEST(PartitionSearchTest, CandidatesTimeTheSameInAnyOrder) {
  HardwareProfile hw = pcie();
  hw.hostDramGBps = 60;
  hw.optimizerGBps = 40;
  hw.jobUs = 30;
  std::vector<LayerCost> layers = model(40, 5);
  for (LayerCost &c : layers)
    c.trainableElements = c.paramBytes / 2;
  SearchTarget target{hw, 8, 9, int64_t(20e9)};
  std::vector<Partition> candidates;
  for (unsigned stages : {3u, 5u, 8u, 13u, 21u})
    for (unsigned tail : {1u, 3u}) {
      std::vector<unsigned> fwd, bwd;
      unsigned k = 40 - tail;
      for (unsigned done = 0; done < k; done += (k + stages - 1) / stages)
        fwd.push_back(std::min((k + stages - 1) / stages, k - done));
      for (unsigned done = 0; done < k; done += 2)
        bwd.push_back(std::min(2u, k - done));
      candidates.push_back(partitionFromSizes(fwd, tail, bwd, 40));
    }
  std::vector<double> forward, backward(candidates.size()), fresh;
  for (const Partition &p : candidates)
    forward.push_back(estimatedStepMs(p, layers, target));
  for (size_t i = candidates.size(); i-- > 0;)
    backward[i] = estimatedStepMs(candidates[i], layers, target);
  std::thread([&] {
    for (const Partition &p : candidates)
      fresh.push_back(estimatedStepMs(p, layers, target));
  }).join();
  for (size_t i = 0; i < candidates.size(); ++i) {
    EXPECT_GT(forward[i], 0);
    EXPECT_EQ(forward[i], backward[i]) << i;
    EXPECT_EQ(forward[i], fresh[i]) << i;
  }
}

} // namespace

/// The steady state rewards large stages; the byte cap counts weights
/// only. With a large working memory per layer, the partitioner's choice
/// still fits a device's memory plan whenever RoundPipe's does, and is no
/// slower than RoundPipe's.
TEST(PartitionSearchTest, ChoiceFitsTheDeviceMemory) {
  std::vector<LayerCost> layers = model(12, 7);
  for (LayerCost &c : layers) {
    c.paramBytes = c.gradBytes = int64_t(1) << 27;
    c.workBytes = int64_t(1) << 30;
    c.actInBytes = c.actOutBytes = int64_t(1) << 24;
  }
  HardwareProfile hw = pcie();
  unsigned checked = 0;
  for (double gib : {6.0, 8.0, 12.0, 24.0}) {
    hw.memoryGiB = gib;
    SearchTarget t{hw, 4, 5, int64_t(1) << 40};
    Partition rp = partitionRoundPipe(layers, t.stageBytes, t.devices);
    if (!fitsDeviceMemory(rp, layers, t))
      continue;
    Partition p = partitionForStepTime(layers, t);
    EXPECT_TRUE(fitsDeviceMemory(p, layers, t)) << gib << " GiB";
    // A partition within half the budget runs two passes in flight, one
    // over it one pass at a time (fill and drain every pass), which the
    // step estimate does not count: rp's may be slower per pass then.
    auto twoPasses = [&](const Partition &q) {
      return 2 * devicePeak(q, layers, t).bytes <= t.budget();
    };
    if (twoPasses(rp) || !twoPasses(p))
      EXPECT_LE(estimatedStepMs(p, layers, t),
                estimatedStepMs(rp, layers, t) + 1e-9)
          << gib << " GiB";
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

// A search at layer grain (the user's --recompute layer, and the layer
// half of --recompute auto's choice) times each candidate as the plan will
// run it: its backward stages upload their inner layers' saved inputs and
// recompute only the deepest layer ahead of the gradient. Timed at stage
// grain instead, the layer-grain plan looked as fast as stage grain's.
TEST(PartitionSearchTest, LayerGrainCandidatesAreTimedAtLayerGrain) {
  HardwareProfile hw = pcie();
  std::vector<LayerCost> layers = model(6, 1);
  // Large saved inputs (80 ms each over 25 GB/s): the uploads show.
  for (LayerCost &c : layers)
    c.actInBytes = c.actOutBytes = int64_t(2e9);
  Partition p = partitionFromSizes({2, 3}, 1, {3, 2}, 6);
  SearchTarget stage{hw, 2, 3, int64_t(8e9)};
  SearchTarget layer = stage;
  layer.layerGrain = true;
  Partition atLayer = p;
  atLayer.layerGrain = true;
  double byTarget = estimatedStepMs(p, layers, layer);
  EXPECT_DOUBLE_EQ(byTarget, estimatedStepMs(atLayer, layers, stage));
  EXPECT_GT(byTarget, estimatedStepMs(p, layers, stage) * 1.01);
}
