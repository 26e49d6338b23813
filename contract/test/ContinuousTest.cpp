//===- ContinuousTest.cpp - the timing core's continuous-run layout -------===//

#include "rp/timing/Continuous.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace rp::timing;

namespace {

/// One pass: a 1 ms compute on device 0, then a 1 ms compute on device 1.
Graph chain() {
  Graph g;
  g.devices = 2;
  g.tasks.push_back({0, Lane::compute, 1, {}});
  g.tasks.push_back({1, Lane::compute, 1, {0}});
  return g;
}

} // namespace

/// Pass p's copy of a task runs on its device renamed by p * shift mod G,
/// waiting for its own pass's copies; the rotation sets the warm-up.
TEST(ContinuousLayoutTest, PassesRotateTheDevices) {
  Graph g = chain();
  g.devices = 3;
  RunLayout o;
  o.shift = 1;
  std::optional<ContinuousRun> run = layOutRun(g, o);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->rotation, 3u);
  // Async: a window of two rotations after a warm-up of rotation + 3
  // steps, and a rotation after it.
  EXPECT_EQ(run->steps, 4 * 3 + 3u);
  for (unsigned p = 0; p < run->passes; ++p) {
    EXPECT_EQ(run->graph.tasks[2 * p].device, p % 3);
    EXPECT_EQ(run->graph.tasks[2 * p + 1].device, (1 + p) % 3);
    EXPECT_EQ(run->graph.tasks[2 * p + 1].waits.front(), 2 * p);
  }
}

/// Without renaming the passes pipeline: one per ms. Renamed by one on
/// two devices, every device runs both tasks of every pass: two ms.
TEST(ContinuousLayoutTest, PeriodIsTheSteadyState) {
  RunLayout o;
  std::optional<ContinuousRun> still = layOutRun(chain(), o);
  ASSERT_TRUE(still);
  EXPECT_NEAR(still->stepMs, 1, 1e-9);
  EXPECT_NEAR(still->stepEnd(0), 2, 1e-9);
  o.shift = 1;
  std::optional<ContinuousRun> moved = layOutRun(chain(), o);
  ASSERT_TRUE(moved);
  EXPECT_NEAR(moved->stepMs, 2, 1e-9);
}

/// The optimizer gates the weights: async, a 3 ms update sets the period
/// alone (step k reads W_(k-1)); sync, it adds to the pass. Accumulating
/// two passes a step halves its share.
TEST(ContinuousLayoutTest, OptimizerGatesTheWeights) {
  RunLayout o;
  o.optimizerMs = 3;
  std::optional<ContinuousRun> async = layOutRun(chain(), o);
  ASSERT_TRUE(async);
  EXPECT_NEAR(async->stepMs, 3, 1e-9);
  o.sync = true;
  std::optional<ContinuousRun> sync = layOutRun(chain(), o);
  ASSERT_TRUE(sync);
  EXPECT_GT(sync->stepMs, 4 - 1e-9);
  o.sync = false;
  o.accumulate = 4;
  std::optional<ContinuousRun> accumulated = layOutRun(chain(), o);
  ASSERT_TRUE(accumulated);
  EXPECT_NEAR(accumulated->stepMs, 4, 1e-9);
}

/// Per-parameter gates: a task whose job reads no parameter waits for the
/// staging only, so it runs ahead of a slow update.
TEST(ContinuousLayoutTest, TasksWaitForTheirParametersOnly) {
  RunLayout o;
  o.optimizerMs = 10;
  o.sync = true;
  o.order = {0};
  o.share = {1};
  o.gatesOfTask = {{}, {1}};
  std::optional<ContinuousRun> run = layOutRun(chain(), o);
  ASSERT_TRUE(run);
  // Step 1's first task needs no parameter: it starts at once, while its
  // second waits for step 0's update.
  size_t C = run->passTasks;
  EXPECT_NEAR(run->times.start[C], 1, 1e-9);
  EXPECT_GE(run->times.start[C + 1], run->times.end[run->optimizer[0]]);
}

/// One copy of the arenas shared by the passes in flight: a device takes
/// up pass p+1 (its upload included) once its own part of pass p is done.
/// Per device a 1 ms upload then a 1 ms compute: with a copy per pass the
/// next pass's upload runs under this pass's compute, but a pass is a 3 ms
/// chain and two are in flight (pass p+2 is staged after pass p's
/// epilogue), so two passes per 3 ms, in pairs of 1 and 2 ms: 1.5, where a
/// window of one step read 1 or 2 by the step count's parity; shared, it
/// waits for it (two ms). Renamed, every device still waits only for what
/// ran on it.
TEST(ContinuousLayoutTest, SharedArenasWaitPerDevice) {
  Graph g;
  g.devices = 2;
  g.tasks.push_back({0, Lane::weightH2D, 1, {}});
  g.tasks.push_back({0, Lane::compute, 1, {0}});
  g.tasks.push_back({1, Lane::weightH2D, 1, {}});
  g.tasks.push_back({1, Lane::compute, 1, {1, 2}});
  RunLayout o;
  std::optional<ContinuousRun> two = layOutRun(g, o);
  ASSERT_TRUE(two);
  EXPECT_NEAR(two->stepMs, 1.5, 1e-9);
  EXPECT_EQ(two->window, 2u);
  o.arenaCopies = 1;
  std::optional<ContinuousRun> one = layOutRun(g, o);
  ASSERT_TRUE(one);
  EXPECT_NEAR(one->stepMs, 2, 1e-9);
  o.shift = 1;
  std::optional<ContinuousRun> moved = layOutRun(g, o);
  ASSERT_TRUE(moved);
  for (unsigned p = 1; p < moved->passes; ++p)
    for (unsigned device = 0; device < 2; ++device) {
      double lastEnd = 0, firstStart = 1e300;
      for (size_t i = 0; i < g.tasks.size(); ++i) {
        size_t before = (p - 1) * g.tasks.size() + i;
        size_t now = p * g.tasks.size() + i;
        if (moved->graph.tasks[before].device == device)
          lastEnd = std::max(lastEnd, moved->times.end[before]);
        if (moved->graph.tasks[now].device == device)
          firstStart = std::min(firstStart, moved->times.start[now]);
      }
      EXPECT_GE(firstStart, lastEnd - 1e-9)
          << "pass " << p << " device " << device;
    }
  // Without the wait, the renamed passes overlap on a device.
  o.arenaCopies = 0;
  std::optional<ContinuousRun> free = layOutRun(g, o);
  ASSERT_TRUE(free);
  EXPECT_LT(free->stepMs, moved->stepMs);
}

/// One microbatch: a pass is a chain over every device (4 x 1 ms), so with
/// two passes in flight a step lasts 2 ms on average, in pairs of a short
/// period and a long one (async step k waits for step k-2). The period is
/// read over two steps, so it does not depend on the step count's parity.
TEST(ContinuousLayoutTest, PairedStepsAtAnyStepCount) {
  Graph g;
  g.devices = 4;
  for (unsigned d = 0; d < 4; ++d)
    g.tasks.push_back(
        {d, Lane::compute, 1,
         d ? std::vector<unsigned>{d - 1} : std::vector<unsigned>{}});
  RunLayout o;
  for (unsigned steps : {7u, 8u, 9u, 10u}) {
    o.steps = steps;
    std::optional<ContinuousRun> run = layOutRun(g, o);
    ASSERT_TRUE(run);
    EXPECT_NEAR(run->stepMs, 2, 1e-9) << steps << " steps";
  }
  o.sync = true;
  std::optional<ContinuousRun> sync = layOutRun(g, o);
  ASSERT_TRUE(sync);
  EXPECT_NEAR(sync->stepMs, 4, 1e-9);
}
