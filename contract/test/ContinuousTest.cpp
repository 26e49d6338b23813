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
  // Async: a warm-up of rotation + 2 steps, then the differences of step
  // ends confirmed over a rotation, and the steps that can start before
  // the cycle's end (two passes in flight) after it.
  EXPECT_GE(run->steps, 3 + 2 + 1 + 3 + 3u);
  for (unsigned p = 0; p < run->passes; ++p) {
    EXPECT_EQ(run->graph.tasks[2 * p].device, p % 3);
    EXPECT_EQ(run->graph.tasks[2 * p + 1].device, (1 + p) % 3);
    EXPECT_EQ(run->graph.waitsOf(2 * p + 1).front(), 2 * p);
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

/// The cycle of step ends: the smallest period whose differences repeat,
/// confirmed over at least `confirm` differences after the warm-up.
TEST(ContinuousLayoutTest, CycleOfStepEnds) {
  auto ends = [](const std::vector<double> &diffs, unsigned times) {
    std::vector<double> e{0};
    for (unsigned t = 0; t < times; ++t)
      for (double d : diffs)
        e.push_back(e.back() + d);
    return e;
  };
  // Three steps on four devices: 66, 66, 39 ms, a mean of 57 that no
  // window of whole rotations (4 or 8 steps) reads.
  std::vector<double> three = ends({66, 66, 39}, 4);
  EXPECT_EQ(cycleAt(three, 2), 3u);
  size_t k = three.size() - 1;
  EXPECT_NEAR((three[k] - three[k - 3]) / 3, 57, 1e-9);
  // Paired steps (async, one microbatch): a short and a long one.
  EXPECT_EQ(cycleAt(ends({1258, 8105}, 4), 2), 2u);
  // Not yet confirmed: the warm-up's differences do not count.
  EXPECT_EQ(cycleAt(ends({66, 66, 39}, 2), 2), 0u);
  // Three equal steps then a longer one in a rotation of four: over two
  // differences it looks like one step, over a rotation it is four.
  std::vector<double> runs = ends({5, 5, 5, 7}, 4);
  runs.pop_back();
  EXPECT_EQ(cycleAt(runs, 1, 2), 1u);
  EXPECT_EQ(cycleAt(runs, 1, 4), 4u);
}

/// The period is the long run's mean, whatever the cycle, and reading it
/// early (untilSteady, as the partitioner does) gives the same: passes
/// rotated over three devices, with and without an update that paces
/// them.
TEST(ContinuousLayoutTest, PeriodIsTheLongRunMean) {
  Graph g;
  g.devices = 3;
  g.tasks.push_back({0, Lane::weightH2D, 1, {}});
  g.tasks.push_back({0, Lane::compute, 2, {0}});
  g.tasks.push_back({1, Lane::compute, 1, {1}});
  g.tasks.push_back({1, Lane::d2h, 0.5, {2}});
  for (double optimizerMs : {0.0, 1.0, 3.0, 5.0})
    for (unsigned shift : {0u, 1u, 2u})
      for (bool sync : {false, true}) {
        RunLayout o;
        o.optimizerMs = optimizerMs;
        o.shift = shift;
        o.sync = sync;
        std::optional<ContinuousRun> run = layOutRun(g, o);
        ASSERT_TRUE(run);
        o.steps = 80;
        std::optional<ContinuousRun> longRun = layOutRun(g, o);
        ASSERT_TRUE(longRun);
        double mean = (longRun->stepEnd(70) - longRun->stepEnd(10)) / 60;
        EXPECT_NEAR(run->stepMs, mean, 1e-9)
            << optimizerMs << " " << shift << " " << sync;
        EXPECT_EQ(run->stepMs, longRun->stepMs);
        o.steps = 0;
        o.untilSteady = true;
        std::optional<ContinuousRun> early = layOutRun(g, o);
        ASSERT_TRUE(early);
        EXPECT_EQ(early->stepMs, run->stepMs);
        EXPECT_FALSE(early->times.complete);
      }
}

/// A recycled run's tasks are written over in place (their waits keep
/// their memory): a run laid out after a larger one was recycled is the
/// same graph, timed the same, as before it.
TEST(ContinuousLayoutTest, RecycledRunIsTheSameRun) {
  Graph g;
  g.devices = 2;
  g.tasks.push_back({0, Lane::weightH2D, 1, {}});
  g.tasks.push_back({0, Lane::compute, 1, {0}});
  g.tasks.push_back({1, Lane::weightH2D, 1, {}});
  g.tasks.push_back({1, Lane::compute, 1, {1, 2}});
  RunLayout o;
  o.arenaCopies = 1;
  o.shift = 1;
  std::optional<ContinuousRun> before = layOutRun(g, o);
  ASSERT_TRUE(before);
  // A longer run with more waits per task, given back.
  RunLayout longer = o;
  longer.steps = 40;
  longer.order = {0, 1};
  longer.share = {0.5, 0.5};
  longer.optimizerMs = 1;
  longer.gatesOfTask = {{1, 2}, {1, 2}, {1, 2}, {1, 2}};
  std::optional<ContinuousRun> big = layOutRun(g, longer);
  ASSERT_TRUE(big);
  ASSERT_GT(big->graph.tasks.size(), before->graph.tasks.size());
  recycle(std::move(*big));
  std::optional<ContinuousRun> after = layOutRun(g, o);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->graph.tasks.size(), before->graph.tasks.size());
  for (size_t i = 0; i < before->graph.tasks.size(); ++i) {
    const Task &a = before->graph.tasks[i], &b = after->graph.tasks[i];
    EXPECT_EQ(a.device, b.device) << i;
    EXPECT_EQ(a.lane, b.lane) << i;
    EXPECT_EQ(a.ms, b.ms) << i;
    Graph::Waits aw = before->graph.waitsOf(i), bw = after->graph.waitsOf(i);
    EXPECT_EQ(std::vector<unsigned>(aw.begin(), aw.end()),
              std::vector<unsigned>(bw.begin(), bw.end()))
        << i;
  }
  EXPECT_EQ(before->times.end, after->times.end);
  EXPECT_EQ(before->stepMs, after->stepMs);
}

/// A run keeps its waits in the graph's flat arrays (Graph::flatFirst);
/// the same graph with each task's waits in its own vector times the
/// same, bit for bit, and a flat graph ignores the tasks' own vectors.
TEST(ContinuousLayoutTest, FlatWaitsTimeAsTaskWaits) {
  Graph g;
  g.devices = 2;
  g.tasks.push_back({0, Lane::weightH2D, 1, {}});
  g.tasks.push_back({0, Lane::compute, 2, {0}});
  g.tasks.push_back({1, Lane::weightH2D, 1.5, {}});
  g.tasks.push_back({1, Lane::compute, 1, {1, 2}});
  g.tasks.push_back({1, Lane::d2h, 0.5, {3}});
  RunLayout o;
  o.shift = 1;
  o.optimizerMs = 0.7;
  o.order = {0, 1};
  o.share = {0.25, 0.75};
  o.gatesOfTask = {{1}, {1}, {2}, {2}, {}};
  std::optional<ContinuousRun> run = layOutRun(g, o);
  ASSERT_TRUE(run);
  const Graph &flat = run->graph;
  ASSERT_TRUE(flat.flat());
  Graph own = flat;
  own.flatFirst.clear();
  own.flatWaits.clear();
  for (size_t i = 0; i < own.tasks.size(); ++i) {
    Graph::Waits w = flat.waitsOf(i);
    EXPECT_TRUE(flat.tasks[i].waits.empty()) << i;
    own.tasks[i].waits.assign(w.begin(), w.end());
  }
  ASSERT_FALSE(own.flat());
  // Every pass's compute on device 1 waits for its own pass's weights.
  EXPECT_NE(std::find(own.tasks[3].waits.begin(), own.tasks[3].waits.end(), 2u),
            own.tasks[3].waits.end());
  std::optional<Times> a = resolve(flat), b = resolve(own);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->start, b->start);
  EXPECT_EQ(a->end, b->end);
  EXPECT_EQ(a->makespan, b->makespan);
  // Waits the flat arrays do not list are not read: a cycle in the tasks'
  // own vectors changes nothing.
  Graph ignored = flat;
  ignored.tasks[0].waits = {1};
  ignored.tasks[1].waits = {0};
  std::optional<Times> c = resolve(ignored);
  ASSERT_TRUE(c);
  EXPECT_EQ(a->end, c->end);
}
