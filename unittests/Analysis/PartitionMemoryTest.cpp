//===- PartitionMemoryTest.cpp - the partitioner's memory objective -------===//

#include "PartitionFixture.h"
#include "rp/Analysis/PartitionPolicy.h"
#include "rp/Analysis/PlanPrediction.h"

#include <gtest/gtest.h>

using namespace mlir::rp;

namespace {

/// Twelve layers whose backward intermediates are large next to their
/// weights, as at a long sequence: a stage-grain backward stage keeps every
/// layer's, so multi-layer stages need far more memory than one-layer ones.
std::vector<LayerCost> longSequenceModel() {
  return fixture::twelveLayers(
      int64_t(1) << 30, int64_t(1) << 26,
      [](unsigned i) { return 1 + 0.1 * (i % 3); },
      [](unsigned, double forward) { return 2 * forward; });
}

using fixture::device;
using fixture::leanest;

/// 24 layers of 128 MiB, each taking 1.5 ms of compute, and a host whose
/// optimizer (2 GB/s) paces the step: partitions tie at its floor.
std::vector<LayerCost> optimizerPacedLayers() {
  std::vector<LayerCost> layers(24);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = 0.5;
    c.backwardMs = 1;
    c.paramBytes = c.gradBytes = int64_t(1) << 27;
    c.trainableElements = c.paramBytes / 2;
    c.workBytes = int64_t(1) << 28;
    c.actInBytes = c.actOutBytes = int64_t(1) << 24;
  }
  return layers;
}

HardwareProfile optimizerPacedHost() {
  HardwareProfile hw = device(24);
  hw.hostDramGBps = 200;
  hw.optimizerGBps = 2;
  hw.jobUs = 30;
  return hw;
}

} // namespace

/// Over a range of budgets: whenever the leanest partition fits, rp's
/// partitioner returns one that fits, also where its step-time search's
/// (RoundPipe's among its starts) does not; where nothing fits, its choice
/// has no higher peak than the step-time search's.
TEST(PartitionMemoryTest, FitsWheneverTheLeanestFits) {
  std::vector<LayerCost> layers = longSequenceModel();
  unsigned rescued = 0, refused = 0;
  // RoundPipe's partition needs little more than the leanest where the
  // device arenas are packed largest first (3.19 against 3.06 GiB): a
  // budget between the two joins the sweep.
  SearchTarget any{device(16), 4, 5, int64_t(1) << 40};
  double leanGiB =
      double(devicePeak(leanest(layers.size()), layers, any).bytes) / (1 << 30);
  double roundPipeGiB =
      double(devicePeak(partitionRoundPipe(layers, any.stageBytes, any.devices),
                        layers, any)
                 .bytes) /
      (1 << 30);
  ASSERT_LT(leanGiB, roundPipeGiB);
  // The boundaries (just under and just over the leanest's peak, between it
  // and RoundPipe's) and a coarse sweep to 16 GiB: each budget is a full
  // search, so a finer sweep costs time and proves nothing more.
  std::vector<double> budgets{leanGiB * 0.999, leanGiB * 1.001,
                              (leanGiB + roundPipeGiB) / 2};
  for (double gib = 2; gib <= 16; gib += 2)
    budgets.push_back(gib);
  for (double gib : budgets) {
    SearchTarget t{device(gib), 4, 5, int64_t(1) << 40};
    Partition p = partitionForStepTime(layers, t);
    Partition rp = partitionRoundPipe(layers, t.stageBytes, t.devices);
    if (devicePeak(leanest(layers.size()), layers, t).fits) {
      EXPECT_TRUE(fitsDeviceMemory(p, layers, t)) << gib << " GiB";
      rescued += !fitsDeviceMemory(rp, layers, t);
    } else if (!fitsDeviceMemory(p, layers, t)) {
      EXPECT_LE(devicePeak(p, layers, t).bytes, devicePeak(rp, layers, t).bytes)
          << gib << " GiB";
      ++refused;
    }
  }
  // The sweep covers budgets only the memory objective fits, and budgets
  // nothing fits.
  EXPECT_GT(rescued, 0u);
  EXPECT_GT(refused, 0u);
}

/// Among the lean partitions that fit, the fastest: with room to spare the
/// search does not return the leanest (its forward stages grow), and a
/// feasibility-only search stops at the first that fits.
TEST(PartitionMemoryTest, FastestThatFitsAndFeasibilityOnly) {
  std::vector<LayerCost> layers = longSequenceModel();
  SearchTarget t{device(12), 4, 5, int64_t(1) << 40};
  MemorySearchResult full = partitionForMemory(layers, t);
  ASSERT_TRUE(full.fastest);
  EXPECT_TRUE(fitsDeviceMemory(*full.fastest, layers, t));
  EXPECT_LE(estimatedStepMs(*full.fastest, layers, t),
            estimatedStepMs(leanest(layers.size()), layers, t) + 1e-9);
  MemorySearchResult quick = partitionForMemory(layers, t, true);
  ASSERT_TRUE(quick.fastest);
  EXPECT_TRUE(fitsDeviceMemory(*quick.fastest, layers, t));
  EXPECT_LT(quick.planned, full.planned);
  // Layer grain is what the memory plans are checked at.
  SearchTarget layer = t;
  layer.layerGrain = true;
  MemorySearchResult lg = partitionForMemory(layers, layer);
  ASSERT_TRUE(lg.fastest);
  Partition q = *lg.fastest;
  q.layerGrain = true;
  EXPECT_TRUE(devicePeak(q, layers, t).fits);
}

/// A fit check decided by the live-bytes bound (devicePeak's `skipOver`)
/// answers as the placed plan does, its bytes never over the placed peak;
/// the memory objective's least peak is always a placed plan's, so a
/// search that finds nothing that fits names the same partition and peak.
TEST(PartitionMemoryTest, BoundDecidesFitsAsPlacing) {
  std::vector<LayerCost> layers = longSequenceModel();
  unsigned n = layers.size();
  unsigned bounded = 0, placed = 0;
  for (double gib = 2; gib <= 16; gib += 1) {
    SearchTarget t{device(gib), 4, 5, int64_t(1) << 40};
    std::vector<Partition> tries{
        leanest(n), partitionRoundPipe(layers, t.stageBytes, t.devices),
        partitionFromSizes({2, 2, 2, 2, 2}, 2, {2, 2, 2, 2, 2}, n),
        partitionFromSizes({5, 5}, 2, {3, 3, 4}, n)};
    for (const Partition &p : tries) {
      DevicePeak full = devicePeak(p, layers, t);
      DevicePeak quick = devicePeak(p, layers, t, 0, 0);
      EXPECT_EQ(quick.fits, full.fits) << gib << " GiB";
      EXPECT_EQ(quick.fits, fitsDeviceMemory(p, layers, t));
      EXPECT_LE(quick.bytes, full.bytes);
      if (quick.planned) {
        EXPECT_EQ(quick.bytes, full.bytes);
      }
      bounded += !quick.planned;
      placed += quick.planned;
    }
    MemorySearchResult r = partitionForMemory(layers, t);
    EXPECT_TRUE(r.least.planned);
    EXPECT_EQ(r.least.bytes, devicePeak(r.leastPeak, layers, t).bytes);
  }
  // Both ways are taken over the sweep.
  EXPECT_GT(bounded, 0u);
  EXPECT_GT(placed, 0u);
}

/// At a step paced by the host optimizer (24 layers of 128 MiB, each
/// taking 1.5 ms of compute, an optimizer at 2 GB/s), partitions
/// tie at its floor and the search stops at the first that fits; of the
/// ties, the one whose memory plan peaks lowest is kept. Before, the first
/// start at the floor (a few large stages) came back, peaking twice as
/// high as one-layer stages running within the floor's tie.
TEST(PartitionMemoryTest, FloorTiesKeepTheLeanest) {
  std::vector<LayerCost> layers = optimizerPacedLayers();
  HardwareProfile hw = optimizerPacedHost();
  SearchTarget t{hw, 8, 9, int64_t(1) << 40};
  double floorMs = optimizerFloorMs(layers, hw);
  Partition p = partitionForStepTime(layers, t);
  Partition lean = leanest(layers.size());
  double ms = estimatedStepMs(p, layers, t);
  // The model is paced by the optimizer, and one-layer stages tie.
  ASSERT_TRUE(
      atOptimizerFloor(estimatedStepMs(lean, layers, t), floorMs, kGrainTie))
      << estimatedStepMs(lean, layers, t) << " ms, the floor " << floorMs;
  EXPECT_TRUE(atOptimizerFloor(ms, floorMs, kGrainTie)) << ms << " ms";
  DevicePeak peak = devicePeak(p, layers, t);
  EXPECT_TRUE(peak.fits);
  EXPECT_LE(peak.bytes, devicePeak(lean, layers, t).bytes);
  // Decided the same way every time.
  Partition again = partitionForStepTime(layers, t);
  EXPECT_EQ(again.forward, p.forward);
  EXPECT_EQ(again.tail, p.tail);
  EXPECT_EQ(again.backward, p.backward);
  // Under a host slack, which asks to stage fewer bytes than one-layer
  // stages stage, the lean tie-break is not taken.
  SearchTarget slack = t;
  slack.hostSlack = 0.05;
  EXPECT_LE(fixture::staged(partitionForStepTime(layers, slack), layers, slack),
            fixture::staged(p, layers, t));
}

/// Of the floor's ties, the fastest at the fast end of what the profile
/// cannot know (SearchTarget::fastEnd): where the optimizer is 10 times
/// faster there, one-layer stages (the leanest tie) are paced by their
/// pipeline, and the partition the search finds for the fast end ties the
/// floor on the profile's values too. Without a fast end, as before.
TEST(PartitionMemoryTest, FloorTiesTakeTheFastestAtTheFastEnd) {
  std::vector<LayerCost> layers = optimizerPacedLayers();
  HardwareProfile hw = optimizerPacedHost();
  HardwareProfile fast = hw;
  fast.optimizerGBps = 20;
  SearchTarget t{hw, 8, 9, int64_t(1) << 40};
  SearchTarget atFast{fast, 8, 9, int64_t(1) << 40};
  Partition before = partitionForStepTime(layers, t);
  t.fastEnd = &fast;
  Partition p = partitionForStepTime(layers, t);
  double floorMs = optimizerFloorMs(layers, hw);
  // Both tie the floor on the profile's values and fit.
  EXPECT_TRUE(
      atOptimizerFloor(estimatedStepMs(p, layers, t), floorMs, kGrainTie));
  EXPECT_TRUE(fitsDeviceMemory(p, layers, t));
  // At the fast end the new tie is faster by more than the tie.
  double beforeFast = estimatedStepMs(before, layers, atFast);
  double fastMs = estimatedStepMs(p, layers, atFast);
  EXPECT_LT(fastMs, beforeFast * (1 - kGrainTie))
      << fastMs << " ms against " << beforeFast;
  // Deterministic.
  Partition again = partitionForStepTime(layers, t);
  EXPECT_EQ(again.forward, p.forward);
  EXPECT_EQ(again.tail, p.tail);
  EXPECT_EQ(again.backward, p.backward);
  // A fast end no faster than the profile changes nothing.
  SearchTarget same = t;
  same.fastEnd = &hw;
  Partition unchanged = partitionForStepTime(layers, same);
  EXPECT_EQ(unchanged.forward, before.forward);
  EXPECT_EQ(unchanged.tail, before.tail);
  EXPECT_EQ(unchanged.backward, before.backward);
}
