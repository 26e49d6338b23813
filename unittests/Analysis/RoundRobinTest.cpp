//===- RoundRobinTest.cpp - RoundPipe's round-robin schedule --------------===//

#include "rp/Analysis/Pipeline.h"

#include <gtest/gtest.h>

using namespace mlir::rp;

namespace {

/// Layers of 1 ms forward and 2 ms backward with `bytes` of weights.
std::vector<LayerCost> uniform(unsigned n, int64_t bytes) {
  std::vector<LayerCost> layers(n);
  for (LayerCost &c : layers) {
    c.forwardMs = c.recomputeMs = 1;
    c.backwardMs = 2;
    c.paramBytes = c.gradBytes = bytes;
  }
  return layers;
}

HardwareProfile link(double gbps) {
  HardwareProfile hw;
  hw.h2dGBps = hw.d2hGBps = gbps;
  return hw;
}

/// One layer per stage: forward stages 0..n-2, tail n-1, backward n-2..0.
Partition onePerStage(unsigned n) {
  Partition p;
  for (unsigned l = 0; l + 1 < n; ++l)
    p.forward.push_back({l, l + 1});
  p.tail = {n - 1, n};
  for (unsigned l = n - 1; l-- > 0;)
    p.backward.push_back({l, l + 1});
  return p;
}

TEST(RoundRobinTest, JobsRunOnDevicesInTurn) {
  Schedule s =
      roundRobinSchedule(onePerStage(3), uniform(3, 0), link(1e9), 2, 3);
  // Jobs F0, F1, T2, B3, B4 on devices 0, 1, 0, 1, 0.
  for (const Command &c : s.commands)
    if (c.queue == Queue::compute) {
      unsigned job = std::stoi(c.label.substr(1));
      EXPECT_EQ(c.device, job % 2) << c.label;
    }
}

TEST(RoundRobinTest, FreeTransfersGiveAPipelineOfJobs) {
  // Two layers: F0 (1 ms) then the tail (3 ms) on two devices, free
  // transfers, M = 3: the tail starts after F0's first microbatch and runs
  // its three microbatches back to back: 1 + 3 x 3 ms.
  Partition p;
  p.tail = {1, 2};
  p.forward = {{0, 1}};
  p.backward = {{0, 1}};
  std::optional<Timing> t =
      estimateTiming(roundRobinSchedule(p, uniform(2, 0), link(1e9), 2, 3));
  ASSERT_TRUE(t);
  // B0 (3 ms per microbatch) follows the tail's microbatches on device 0:
  // its microbatch m needs the tail's, ending at 1 + 3(m + 1).
  EXPECT_DOUBLE_EQ(t->iterationMs, 1 + 3 * 3 + 3);
}

TEST(RoundRobinTest, UploadsArePrefetchedButBoundedToTwoWeightSets) {
  // One device, four jobs: job 2's upload waits for job 0 to finish, so
  // with slow uploads the iteration is longer than compute alone.
  Partition p = onePerStage(2);                             // F0, T1, B0
  std::vector<LayerCost> layers = uniform(2, int64_t(1e9)); // 1 GB each
  std::optional<Timing> slow =
      estimateTiming(roundRobinSchedule(p, layers, link(1), 1, 1));
  std::optional<Timing> fast =
      estimateTiming(roundRobinSchedule(p, layers, link(1e9), 1, 1));
  ASSERT_TRUE(slow && fast);
  // Compute alone: F0 1 + T1 3 + B0 3 = 7 ms.
  EXPECT_NEAR(fast->iterationMs, 7, 1e-3);
  // 1 GB at 1 GB/s is 1000 ms per upload; the third upload may start only
  // when job 0's compute has ended, and gradients also take 1000 ms each.
  EXPECT_GT(slow->iterationMs, 3000);
}

TEST(RoundRobinTest, NeverDeadlocks) {
  for (unsigned g : {1u, 2u, 3u, 8u})
    for (unsigned m : {1u, 2u, 9u}) {
      Schedule s =
          roundRobinSchedule(onePerStage(6), uniform(6, 1000), link(10), g, m);
      EXPECT_TRUE(estimateTiming(s)) << g << " devices, " << m << " mb";
    }
}

} // namespace
