//===- PartitionHostBudgetTest.cpp - partitions held to the host budget ---===//
//
// rp's partitioner under a host budget (SearchTarget::hostStagedBytes,
// holdToHostBudget): the pinned staging buffers of the partition it
// returns fit what the budget leaves, the devices still fit, a budget the
// fastest partition meets changes nothing, and the search memo keeps the
// held partition apart from the unheld one.
//
//===----------------------------------------------------------------------===//

#include "rp/Analysis/PartitionMemory.h"
#include "rp/Analysis/PartitionSearch.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir::rp;

namespace {

/// 12 layers of varied times, 128 MiB of weights each, 16 MiB activations
/// a microbatch: every backward stage's input waits on the host for each
/// of the 5 microbatches (80 MiB a stage boundary).
std::vector<LayerCost> model() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> time(0.5, 2.0);
  std::vector<LayerCost> layers(12);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = time(rng);
    c.backwardMs = 2 * c.forwardMs * time(rng);
    c.paramBytes = c.gradBytes = int64_t(1) << 27;
    c.workBytes = int64_t(1) << 28;
    c.actInBytes = c.actOutBytes = int64_t(1) << 24;
  }
  return layers;
}

HardwareProfile box(double gib) {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = 25;
  hw.memoryGiB = gib;
  return hw;
}

int64_t staged(const Partition &p, llvm::ArrayRef<LayerCost> layers,
               const SearchTarget &t) {
  return devicePeak(p, layers, t).hostBytes;
}

TEST(PartitionHostBudgetTest, StagedBytesFitTheBudget) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  int64_t fastestStaged = staged(fastest, layers, unheld);
  ASSERT_TRUE(fitsDeviceMemory(fastest, layers, unheld));
  ASSERT_GT(fastest.backward.size(), 1u) << "nothing to merge";
  // Just under the fastest partition's, and about half of it.
  for (int64_t budget : {fastestStaged - 1, fastestStaged / 2}) {
    SCOPED_TRACE(std::to_string(budget) + " staged bytes");
    SearchTarget held = unheld;
    held.hostStagedBytes = budget;
    Partition p = partitionForStepTime(layers, held);
    EXPECT_LE(staged(p, layers, held), budget) << formatStages(p);
    EXPECT_TRUE(fitsDeviceMemory(p, layers, held));
    EXPECT_TRUE(fitsStageBytes(p, layers, p.stageBytes));
    // Held by merging the fastest partition's stages: at best as fast.
    EXPECT_GE(estimatedStepMs(p, layers, held),
              estimatedStepMs(fastest, layers, unheld) - 1e-9);
  }
}

TEST(PartitionHostBudgetTest, ABudgetTheFastestMeetsChangesNothing) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  SearchTarget held = unheld;
  held.hostStagedBytes = staged(fastest, layers, unheld);
  EXPECT_EQ(formatStages(partitionForStepTime(layers, held)),
            formatStages(fastest));
}

// A budget no partition meets: the devices still fit, and the partition
// stages the least the merges reach (for the host budget's refusal).
TEST(PartitionHostBudgetTest, DevicesBeforeTheHost) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(3);
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  Partition fastest = partitionForStepTime(layers, unheld);
  ASSERT_TRUE(fitsDeviceMemory(fastest, layers, unheld));
  SearchTarget held = unheld;
  held.hostStagedBytes = 1;
  Partition p = partitionForStepTime(layers, held);
  EXPECT_TRUE(fitsDeviceMemory(p, layers, held)) << formatStages(p);
  EXPECT_LT(staged(p, layers, held), staged(fastest, layers, unheld));
  // One backward stage of 11 layers needs more than 3 GiB.
  EXPECT_GT(p.backward.size(), 1u);
}

// The memo returns a search's result for the same question only: a search
// under a host budget after one without it is searched (and held) again.
TEST(PartitionHostBudgetTest, TheMemoKeysTheBudget) {
  std::vector<LayerCost> layers = model();
  HardwareProfile hw = box(24);
  SearchMemo memo;
  SearchTarget unheld{hw, 4, 5, int64_t(1) << 40};
  unheld.memo = &memo;
  Partition fastest = partitionForStepTime(layers, unheld);
  SearchTarget held = unheld;
  held.hostStagedBytes = staged(fastest, layers, unheld) - 1;
  Partition p = partitionForStepTime(layers, held);
  EXPECT_NE(formatStages(p), formatStages(fastest));
  EXPECT_LE(staged(p, layers, held), held.hostStagedBytes);
}

} // namespace
