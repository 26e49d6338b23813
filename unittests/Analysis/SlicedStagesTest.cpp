// searchSlicedStages (include/rp/Analysis/SlicedStages.h): the climb finds
// the stages its timing prefers, keeps the start where none is faster,
// holds the byte cap and skips what does not fit.

#include "rp/Analysis/SlicedStages.h"
#include "rp/Analysis/PartitionSearch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

using namespace mlir::rp;

namespace {

std::vector<LayerCost> layersOf(unsigned n, int64_t bytes = 0) {
  std::vector<LayerCost> layers(n);
  for (LayerCost &l : layers) {
    l.forwardMs = l.recomputeMs = 1;
    l.backwardMs = 2;
    l.paramBytes = bytes;
  }
  return layers;
}

std::vector<unsigned> sizes(llvm::ArrayRef<StageRange> stages) {
  std::vector<unsigned> out;
  for (const StageRange &r : stages)
    out.push_back(r.size());
  return out;
}

/// A step that grows with each forward stage's distance from two layers
/// and each backward stage's from three: the stages a sliced chain
/// favours, far from the start's.
double preferSmall(const Partition &p) {
  double ms = 100;
  for (const StageRange &r : p.forward)
    ms += std::pow(double(r.size()) - 2, 2) + 0.5;
  for (const StageRange &r : p.backward)
    ms += std::pow(double(r.size()) - 3, 2) + 0.5;
  return ms;
}

} // namespace

TEST(SlicedStagesTest, FindsTheStagesTheTimingPrefers) {
  std::vector<LayerCost> layers = layersOf(30);
  Partition start = partitionFromSizes({8, 7, 7, 7}, 1, {15, 14}, 30);
  std::atomic<unsigned> calls{0};
  auto time = [&](const Partition &p) -> std::optional<double> {
    ++calls;
    return preferSmall(p);
  };
  SlicedStagesSearch search;
  search.stepMs = time;
  search.maxTimings = 4000;
  SlicedStages found = searchSlicedStages(start, layers, search);
  EXPECT_DOUBLE_EQ(found.startMs, preferSmall(start));
  EXPECT_LT(found.stepMs, found.startMs);
  EXPECT_DOUBLE_EQ(found.stepMs, preferSmall(found.partition));
  EXPECT_EQ(found.timed, calls.load());
  EXPECT_LE(found.timed, search.maxTimings);
  // The forward list from the even two-layer start; the backward list
  // climbed to stages of three or so from two of 15 and 14.
  for (unsigned s : sizes(found.partition.forward))
    EXPECT_LE(s, 2u);
  for (unsigned s : sizes(found.partition.backward))
    EXPECT_LE(s, 4u);
  EXPECT_EQ(found.partition.tail.size() + found.partition.tail.begin, 30u);
  // The budget stops the climb where it is, its best kept.
  calls = 0;
  search.maxTimings = 10;
  SlicedStages cut = searchSlicedStages(start, layers, search);
  EXPECT_LE(cut.timed, 10u);
  EXPECT_EQ(cut.timed, calls.load());
  EXPECT_LE(cut.stepMs, cut.startMs);
  EXPECT_GT(cut.stepMs, found.stepMs);
}

TEST(SlicedStagesTest, KeepsTheStartWhereNoneIsFaster) {
  std::vector<LayerCost> layers = layersOf(12);
  Partition start = partitionFromSizes({6, 5}, 1, {6, 5}, 12);
  start.tailJobs = 1;
  auto flat = [](const Partition &) -> std::optional<double> { return 10; };
  SlicedStagesSearch search;
  search.stepMs = flat;
  SlicedStages found = searchSlicedStages(start, layers, search);
  EXPECT_EQ(sizes(found.partition.forward), sizes(start.forward));
  EXPECT_EQ(sizes(found.partition.backward), sizes(start.backward));
  EXPECT_DOUBLE_EQ(found.stepMs, found.startMs);
  // Mixed grains tie the stages to their own grains: kept, timed once.
  start.stageLayerGrain = {true, false};
  auto fewer = [](const Partition &p) -> std::optional<double> {
    return double(p.numStages());
  };
  search.stepMs = fewer;
  found = searchSlicedStages(start, layers, search);
  EXPECT_EQ(found.timed, 1u);
  EXPECT_EQ(sizes(found.partition.backward), sizes(start.backward));
}

TEST(SlicedStagesTest, HoldsTheCapAndSkipsWhatDoesNotFit) {
  // Fewer stages are faster, but no stage may hold more than 4 layers'
  // weights (and gradients), and no forward stage of one layer fits.
  std::vector<LayerCost> layers = layersOf(16, 100);
  for (LayerCost &l : layers)
    l.gradBytes = 100;
  Partition start =
      partitionFromSizes({2, 2, 2, 2, 2, 2, 2}, 2, {2, 2, 2, 2, 2, 2, 2}, 16);
  auto fewer = [](const Partition &p) -> std::optional<double> {
    for (const StageRange &r : p.forward)
      if (r.size() == 1)
        return std::nullopt;
    return double(p.numStages());
  };
  SlicedStagesSearch search;
  search.stepMs = fewer;
  search.stageBytesCap = 4 * 200;
  search.maxTimings = 4000;
  SlicedStages found = searchSlicedStages(start, layers, search);
  EXPECT_LT(found.stepMs, found.startMs);
  EXPECT_TRUE(fitsStageBytes(found.partition, layers, search.stageBytesCap));
  for (const StageRange &r : found.partition.forward)
    EXPECT_GE(r.size(), 2u);
  // Without the cap the climb merges past it.
  search.stageBytesCap = 0;
  SlicedStages uncapped = searchSlicedStages(start, layers, search);
  EXPECT_LT(uncapped.stepMs, found.stepMs);
}
